# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every bad input of every role and module fails before any change, naming
the variable, with a bounded excerpt of the value (cases.py has the table).

One ansible-playbook run, in check mode, against this machine: every case on
a host of its own (every one is localhost through the local connection, so
that no fact a role sets leaks into another case). The cases of one role
entry point share a play, their inputs given as the host's variables: the
role is loaded once for all of them, as it is for a fleet. Module cases, and
those of the roles with run_once or delegated tasks (drain, health), keep a
play each, their inputs in the task. A case runs the role (or the module)
inside a block whose rescue records the task that failed and its result; then
it reads the watched configuration of this machine again
(gpufleet.nvidia.host_state_info) and compares it with the read taken before
the first case. The run must also end with changed=0: no task before a
failure would have changed anything, even outside check mode.

Cases whose role reads the GPUs, the repository or files on the host get them
from fixtures: fake sysfs trees (a Volta, an H100 and a B200 GPU), a flat apt
repository on file:// with an index of driver and toolkit releases, and key
files with safe and unsafe modes. The closing line "bad inputs: N passed, N
failed" comes from the last test, test_summary, at the end of the run.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import glob
import gzip
import json
import os
import re
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs import (
    cases, cases_mig, cases_packages, cases_services, cases_trust)
from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.check_run import run_check

# The hand-written table, by topic: forms and types (cases.py), MIG layouts
# and the driver's hardening, packages in the repository's index, DCGM and
# exporter listeners, TLS and sockets, and key pinning.
TOPICS = (cases, cases_mig, cases_packages, cases_services, cases_trust)
CASES = [case for topic in TOPICS for case in topic.CASES]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VALIDATION_TASK = 'Validating arguments against arg spec'
MODULE_TASK = 'Run the module with the bad parameters'
EARLY_ACTIONS = ('gpufleet.nvidia.check_inputs', 'ansible.builtin.assert', 'ansible.builtin.fail')
# What the collection's roles write on a host: none of it may change.
WATCHED_DIRS = ['/etc/apt', '/etc/modprobe.d', '/etc/modules-load.d', '/etc/systemd/system', '/etc/dcgm-exporter',
                '/etc/nvidia-container-runtime', '/etc/gpufleet', '/etc/dkms', '/etc/cdi', '/etc/ld.so.conf.d',
                '/etc/profile.d', '/etc/slurm', '/var/lib/gpufleet', '/usr/local/lib/gpufleet-mig']
WATCHED_FILES = ['/etc/passwd', '/etc/group', '/var/lib/dpkg/status', '/etc/docker/daemon.json']
# The longest message a case may give when its value is huge (the excerpt is cut at 60 characters).
BOUNDED = 2000


def _early_task_names():
    """Tasks a bad input may fail in: the input, platform and request checks, which change nothing."""
    names = set()

    def walk(tasks):
        for task in tasks or []:
            for key in ('block', 'rescue', 'always'):
                walk(task.get(key))
            if any(action in task for action in EARLY_ACTIONS):
                names.add(task['name'])

    # Every entry point starts by converting its inputs (the "Inputs" task).
    names.add('Inputs')
    for path in glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'tasks', '*.yml')):
        name = os.path.basename(path)
        with open(path) as handle:
            tasks = yaml.safe_load(handle) or []
        # Preflight files (and what they import or include to check the
        # repository's index and URL), and the first check of the drain role's
        # entry points.
        if name in ('preflight.yml', 'request.yml', 'cuda_platform.yml', 'key_download.yml') or path.endswith(
                ('/dcgm/tasks/packages.yml', '/dcgm/tasks/packages_offered.yml', '/dcgm/tasks/version_offered.yml')):
            walk(tasks)
        elif '/roles/drain/' in path:
            checks = [task for task in tasks or [] if task.get('name') != 'Inputs'][:1]
            if checks and 'gpufleet.nvidia.check_inputs' in checks[0]:
                names.add(checks[0]['name'])
    return names


def _fake_gpu(root, device):
    base = os.path.join(root, '0000:3b:00.0')
    os.makedirs(base)
    for name, value in (('vendor', '0x10de'), ('device', device), ('class', '0x030200')):
        with open(os.path.join(base, name), 'w') as handle:
            handle.write(value + '\n')
    return root


def _flat_repository(directory, packages):
    os.makedirs(directory)
    text = ''.join('Package: %s\nVersion: %s\nArchitecture: amd64\n\n' % (name, version) for name, version in packages)
    with gzip.open(os.path.join(directory, 'Packages.gz'), 'wt') as handle:
        handle.write(text)
    return 'file://' + directory


def _file(path, mode, text='test\n'):
    with open(path, 'w') as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


@pytest.fixture(scope='module')
def placeholders(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('bad-input-fixtures'))
    ctk = os.path.join(root, 'ctk')
    _flat_repository(os.path.join(ctk, 'stable', 'deb', 'amd64'),
                     [('nvidia-container-toolkit-base', v) for v in ('1.18.2-1', '1.18.0-1', '1.17.8-1')])
    found = {
        '@SYS_H100@': _fake_gpu(os.path.join(root, 'sys-h100'), '0x2330'),
        '@SYS_V100@': _fake_gpu(os.path.join(root, 'sys-v100'), '0x1db4'),
        '@SYS_B200@': _fake_gpu(os.path.join(root, 'sys-b200'), '0x2901'),
        '@CUDA_REPO@': _flat_repository(os.path.join(root, 'cuda'), [
            ('nvidia-driver', v) for v in ('580.95.05-1', '580.82.07-1', '570.195.03-1')]),
        '@CTK_REPO_BASE@': 'file://' + ctk,
        '@MOK_KEY_0644@': _file(os.path.join(root, 'MOK.priv'), 0o644),
        '@MOK_CERT@': _file(os.path.join(root, 'MOK.der'), 0o644),
        '@TLS_KEY_0644@': _file(os.path.join(root, 'exporter.key'), 0o644),
        '@TLS_CERT@': _file(os.path.join(root, 'exporter.crt'), 0o644),
        '@MISSING@': os.path.join(root, 'missing'),
    }
    for topic in TOPICS:
        if hasattr(topic, 'fixtures'):
            found.update(topic.fixtures(root))
    return found


def _fill(value, placeholders):
    if isinstance(value, str):
        for key, text in placeholders.items():
            value = value.replace(key, text)
        return value
    if isinstance(value, list):
        return [_fill(v, placeholders) for v in value]
    if isinstance(value, dict):
        return dict((k, _fill(v, placeholders)) for k, v in value.items())
    return value


def _watched():
    globs = []
    for directory in WATCHED_DIRS:
        globs += [directory, directory + '/*', directory + '/*/*']
    files = sorted(set(WATCHED_FILES + [p for d in WATCHED_DIRS for p in glob.glob(d + '/**', recursive=True)
                                        if os.path.isfile(p)]))
    return files, globs


# Roles whose cases keep a play each: run_once and delegated tasks act for
# every host of a play at once.
ALONE = ('drain', 'health')


def _shared(case):
    """Whether the case shares its entry point's play (its inputs as host variables)."""
    return case['kind'] == 'role' and case['target'].partition(':')[0] not in ALONE


def _case_tasks(action):
    """The case's tasks; the host variable case_number names the case in the report."""
    return [
        {'name': 'Run the case', 'block': [
            action,
            {'name': 'The input should have been refused', 'ansible.builtin.fail': {'msg': 'NOT REFUSED'}},
        ], 'rescue': [
            {'name': 'Record the failure', 'ansible.builtin.set_fact': {
                'case_task': '{{ ansible_failed_task.name }}',
                'case_result': '{{ ansible_failed_result }}'}},
        ]},
        # Once per play: every case host is this machine, and the linear
        # strategy reads only after every case of the play has run, so the
        # hosts of a play would all read the same state. run_once gives each
        # of them the one read (register and run_once set it on every host).
        {'name': 'Read the watched configuration again', 'gpufleet.nvidia.host_state_info': {
            'files': '{{ watched_files }}', 'globs': '{{ watched_globs }}'}, 'register': 'case_after',
         'run_once': True},
        {'name': 'Report the case', 'ansible.builtin.debug': {'msg': (
            "CASE {{ case_number }} {{ {'task': case_task, 'msg': case_result.msg | default('') | string,"
            " 'result': case_result | to_json,"
            " 'same': case_after.files == hostvars['baseline'].baseline.files"
            " and case_after.globs == hostvars['baseline'].baseline.globs} | to_json | b64encode }}")}},
    ]


def _include(target):
    name, _sep, entry = target.partition(':')
    include = {'name': 'gpufleet.nvidia.' + name}
    if entry:
        include['tasks_from'] = entry
    return include


def _play(name, numbers, facts, action):
    return {
        'name': name,
        'hosts': ':'.join('case%03d' % n for n in numbers),
        'gather_facts': facts,
        'gather_subset': ['min'],
        'tasks': _case_tasks(action),
    }


def _case_play(number, case, placeholders):
    inputs = _fill(case['inputs'], placeholders)
    if case['kind'] == 'role':
        action = {'name': 'Include the role', 'ansible.builtin.include_role': _include(case['target']), 'vars': inputs}
    else:
        action = {'name': MODULE_TASK, case['target']: inputs}
    return _play('Case %d: %s' % (number, case['id']), [number], bool(case.get('facts')), action)


def _shared_play(target, facts, numbers):
    return _play('Cases %s of %s' % (', '.join(str(n) for n in numbers), target), numbers, facts,
                 {'name': 'Include the role', 'ansible.builtin.include_role': _include(target)})


def _playbook(placeholders):
    baseline = {
        'name': 'Read the watched configuration before the cases',
        'hosts': 'baseline',
        'gather_facts': False,
        'tasks': [{'name': 'Read it', 'gpufleet.nvidia.host_state_info': {
            'files': '{{ watched_files }}', 'globs': '{{ watched_globs }}'}, 'register': 'baseline'}],
    }
    plays, shared = [baseline], {}
    for number, case in enumerate(CASES):
        if _shared(case):
            shared.setdefault((case['target'], bool(case.get('facts'))), []).append(number)
        else:
            plays.append(_case_play(number, case, placeholders))
    return plays + [_shared_play(target, facts, numbers) for (target, facts), numbers in shared.items()]


def _hosts(placeholders):
    """The inventory's hosts: each case's host carries its number, a shared case's its inputs too."""
    hosts = {'baseline': None}
    for number, case in enumerate(CASES):
        inputs = _fill(case['inputs'], placeholders) if _shared(case) else {}
        hosts['case%03d' % number] = dict(inputs, case_number=number)
    return hosts


def _fingerprint():
    """What the watched paths hold, read by Python itself before and after the run."""
    found = {}
    files, globs = _watched()
    for path in files + [p for g in globs for p in glob.glob(g)]:
        try:
            stat = os.lstat(path)
        except OSError:
            found[path] = None
            continue
        content = b''
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, 'rb') as handle:
                content = handle.read()
        found[path] = (stat.st_mode, stat.st_uid, stat.st_gid, content)
    return found


@pytest.fixture(scope='module')
def run(tmp_path_factory, placeholders):
    workdir = tmp_path_factory.mktemp('bad-inputs')
    files, globs = _watched()
    inventory = {'all': {'hosts': _hosts(placeholders), 'vars': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'watched_files': files, 'watched_globs': globs}}}
    (workdir / 'inventory.yml').write_text(yaml.safe_dump(inventory))
    (workdir / 'bad_inputs.yml').write_text(yaml.safe_dump(_playbook(placeholders), sort_keys=False))
    before = _fingerprint()
    result = run_check(['-i', str(workdir / 'inventory.yml'), str(workdir / 'bad_inputs.yml')], 1800,
                       ANSIBLE_FORKS='2')
    reports = {}
    for match in re.finditer(r'CASE (\d+) ([A-Za-z0-9+/=]+)', result.stdout):
        reports[int(match.group(1))] = json.loads(base64.b64decode(match.group(2)).decode('utf-8'))
    return {'result': result, 'reports': reports, 'unchanged': before == _fingerprint(),
            'early': _early_task_names()}


def test_the_run_changed_nothing(run):
    result = run['result']
    assert result.returncode == 0, result.stdout[-4000:]
    recaps = re.findall(r'^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', result.stdout, re.M)
    assert len(recaps) == len(CASES) + 1, result.stdout[-4000:]
    assert [host for host, changed, unreachable, failed in recaps if (changed, unreachable, failed) != ('0', '0', '0')] == []
    assert run['unchanged'], 'the watched configuration of this machine changed during the run'


def test_the_table_covers_every_role_and_module():
    assert len(CASES) >= 60
    roles = set(c['target'].split(':')[0] for c in CASES if c['kind'] == 'role')
    present = set(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'meta')))
    # repository is internal: the roles that call it check its inputs.
    assert present - {'repository'} <= roles, sorted(present - {'repository'} - roles)
    modules = set(c['target'].split('.')[-1] for c in CASES if c['kind'] == 'module')
    shipped = set(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO_ROOT, 'plugins', 'modules', '*.py')))
    assert shipped <= modules, sorted(shipped - modules)
    assert len(set(c['id'] for c in CASES)) == len(CASES)


def _problem(run, number):
    """Why case number is not refused as it must be, or None."""
    case = CASES[number]
    report = run['reports'].get(number)
    if report is None:
        return 'case %s did not report:\n%s' % (case['id'], run['result'].stdout[-3000:])
    message, result = report['msg'], report['result']
    if message == 'NOT REFUSED':
        return 'the bad input was accepted'
    if case['kind'] == 'role':
        if not (report['task'].startswith(VALIDATION_TASK) or report['task'] in run['early']):
            return 'failed in %r, not in an input or preflight check' % report['task']
    elif report['task'] != MODULE_TASK:
        return 'failed in %r, not in the module' % report['task']
    # Ansible records "(traceback unavailable)" for every failure; a crash leaves a real one, or module_stderr.
    if 'Traceback (most recent call last)' in result or json.loads(result).get('module_stderr'):
        return 'it crashed: %s' % result[:3000]
    if case['names'] not in message:
        return 'the message does not name %s: %s' % (case['names'], message[:2000])
    if case.get('huge') and len(message) >= BOUNDED:
        return 'the message repeats the huge value (%d characters)' % len(message)
    if not report['same']:
        return 'the watched configuration differs after the case'
    return None


@pytest.mark.parametrize('number', range(len(CASES)), ids=[c['id'] for c in CASES])
def test_case(run, number):
    problem = _problem(run, number)
    assert problem is None, problem


def test_summary(run, record_property):
    """The suite's closing line, printed at the end of the run (tests/unit/conftest.py)."""
    failed = [CASES[n]['id'] for n in range(len(CASES)) if _problem(run, n) is not None]
    record_property('gpufleet_summary', 'bad inputs: %d passed, %d failed' % (len(CASES) - len(failed), len(failed)))
    assert failed == []
