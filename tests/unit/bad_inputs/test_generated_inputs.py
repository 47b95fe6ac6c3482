# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The generated bad-input suite (generated.py): every input of every role and
playbook in every spelling its type invites, read the way the entry reads it.

One ansible-playbook run, one play per entry point, which loops over the
entry's cases and runs on each what the entry runs before anything else:
the entry's "Inputs" task, the gpufleet.nvidia.role_inputs lookup, with the
case's value given as the raw string (or number, list...) a survey, an INI
inventory or -e would deliver (that every entry starts with exactly that task
is checked by tests/unit/roles/test_inputs_read_once.py); before it, for
every refused case and each input's first accepted one, Ansible's own
argument spec validation (validate_argument_spec, which ansible-core runs
when it enters a role). An accepted case must convert to
its well-typed twin; a refused one must fail there, naming the variable.
Nothing here connects anywhere or changes anything (the watched
configuration of this machine is compared before and after the run).

The closing line "bad inputs, generated: N passed, N failed" is printed at the
end of the run (tests/unit/conftest.py).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import json
import os
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.generated import (
    BASE_VARS, PLAYBOOK_SPECS, REPO_ROOT, generate, spec_options)
from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.check_run import run_check
from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.test_bad_inputs import _fingerprint

CASES = generate()


def _group(case):
    return 'g_%s_%s' % (case['scope'], case['entry'])


def _play(group, scope, entry, prefix, numbers, results):
    spec_file = PLAYBOOK_SPECS if scope == 'playbooks' else os.path.join(REPO_ROOT, 'roles', scope, 'meta',
                                                                         'argument_specs.yml')
    items = []
    declared = spec_options(scope, entry)
    sampled = set()
    for number in numbers:
        case = CASES[number]
        inputs = dict((k, v) for k, v in BASE_VARS.get(scope, {}).items() if k in declared)
        inputs[case['var']] = case['value']
        # Ansible's validator accepts every spelling the collection accepts
        # (its own sets are wider), so each input's first accepted spelling
        # shows it; every refused case goes through it, since it may be the
        # one that refuses. It costs most of this suite's time.
        validate = case['expect'] == 'refuse' or case['var'] not in sampled
        sampled.add(case['var'])
        items.append({'number': number, 'inputs': inputs, 'validate': validate})
    return {
        'name': '%s entry %s' % (scope, entry),
        'hosts': group,
        'gather_facts': False,
        'vars': {'cases': items},
        'tasks': [
            {'name': 'Validate against the argument spec', 'ansible.builtin.validate_argument_spec': {
                'argument_spec': spec_options(scope, entry), 'provided_arguments': '{{ item.inputs }}'},
             'loop': '{{ cases }}', 'loop_control': {'label': '{{ item.number }}'},
             'when': 'item.validate', 'register': 'validated', 'ignore_errors': True},
            {'name': 'Inputs', 'ansible.builtin.debug': {
                'msg': "{{ lookup('gpufleet.nvidia.role_inputs', '%s', spec_file='%s', prefix='%s', "
                       "values=item.inputs) }}" % (entry, spec_file, prefix)},
             'loop': '{{ cases }}', 'loop_control': {'label': '{{ item.number }}'},
             'register': 'read', 'ignore_errors': True},
            {'name': 'Keep the results', 'ansible.builtin.copy': {
                'dest': results,
                'content': "{{ {'validated': validated.results | map(attribute='failed', default=false) | list,"
                           " 'validated_msg': validated.results | map(attribute='msg', default='') | list,"
                           " 'read': read.results | map(attribute='failed', default=false) | list,"
                           " 'read_msg': read.results | map(attribute='msg', default='') | list,"
                           " 'numbers': cases | map(attribute='number') | list} | to_json }}",
                'mode': '0600'},
             # The results are this test's own file in its temporary directory.
             'check_mode': False},
        ],
    }


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp('generated-inputs')
    groups = {}
    for number, case in enumerate(CASES):
        groups.setdefault(_group(case), (case['scope'], case['entry'], case['prefix'], []))[3].append(number)
    plays = [_play(group, scope, entry, prefix, numbers, str(workdir / ('%s.json' % group)))
             for group, (scope, entry, prefix, numbers) in sorted(groups.items())]
    inventory = {'all': {'hosts': dict((group, None) for group in groups), 'vars': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}
    (workdir / 'inventory.yml').write_text(yaml.safe_dump(inventory))
    (workdir / 'generated.yml').write_text(yaml.safe_dump(plays, sort_keys=False))
    before = _fingerprint()
    # A line per case and task is noise here; the results go to files.
    result = run_check(['-i', str(workdir / 'inventory.yml'), str(workdir / 'generated.yml')], 1800,
                       ANSIBLE_DISPLAY_OK_HOSTS='false', ANSIBLE_DISPLAY_FAILED_STDERR='false',
                       ANSIBLE_STDOUT_CALLBACK='ansible.builtin.minimal')
    reports = {}
    for group in groups:
        path = workdir / ('%s.json' % group)
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        for index, number in enumerate(data['numbers']):
            if data['validated'][index]:
                reports[number] = {'typed': None, 'task': 'Validate against the argument spec',
                                   'msg': str(data['validated_msg'][index])}
            elif data['read'][index]:
                reports[number] = {'typed': None, 'task': 'Inputs', 'msg': str(data['read_msg'][index])}
            else:
                reports[number] = {'typed': data['read_msg'][index], 'task': '', 'msg': ''}
    return {'result': result, 'reports': reports, 'unchanged': before == _fingerprint()}


def _problem(run, number):
    case = CASES[number]
    report = run['reports'].get(number)
    if report is None:
        return 'case %s did not report:\n%s' % (case['id'], run['result'].stdout[-3000:])
    key = case['var'][len(case['prefix']):] if case['var'].startswith(case['prefix']) else case['var']
    if case['expect'] == 'accept':
        if report['typed'] is None:
            return 'refused in %r: %s' % (report['task'], report['msg'][:2000])
        if key not in report['typed']:
            return '%s is missing from the typed inputs' % key
        typed = report['typed'][key]
        if typed != case['expected'] or type(typed) is not type(case['expected']):
            return 'read as %r (%s), not as its twin %r' % (typed, type(typed).__name__, case['expected'])
        return None
    if report['typed'] is not None:
        return 'accepted as %r' % report['typed'].get(key)
    if report['task'] not in ('Validate against the argument spec', 'Inputs'):
        return 'refused in %r, not at the entry' % report['task']
    if case['var'] not in report['msg']:
        return 'the message does not name %s: %s' % (case['var'], report['msg'][:2000])
    if len(report['msg']) > 4000:
        return 'the message is %d characters long' % len(report['msg'])
    return None


def test_the_suite_is_large_and_covers_every_spec():
    assert len(CASES) >= 500
    assert len(set(c['id'] for c in CASES)) == len(CASES)
    scopes = set(c['scope'] for c in CASES)
    roles = set(os.path.basename(os.path.dirname(os.path.dirname(p)))
                for p in glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'meta', 'argument_specs.yml')))
    assert roles | {'playbooks'} == scopes


def test_the_run_changed_nothing(run):
    result = run['result']
    assert result.returncode == 0, result.stdout[-4000:]
    assert len(run['reports']) == len(CASES), result.stdout[-4000:]
    assert run['unchanged'], 'the watched configuration of this machine changed during the run'


@pytest.mark.parametrize('number', range(len(CASES)), ids=[c['id'] for c in CASES])
def test_case(run, number):
    problem = _problem(run, number)
    assert problem is None, problem


def test_summary(run, record_property):
    """The suite's closing line, printed at the end of the run."""
    failed = [CASES[n]['id'] for n in range(len(CASES)) if _problem(run, n) is not None]
    record_property('gpufleet_summary', 'bad inputs, generated: %d passed, %d failed' % (
        len(CASES) - len(failed), len(failed)))
    assert failed == [], failed[:50]
