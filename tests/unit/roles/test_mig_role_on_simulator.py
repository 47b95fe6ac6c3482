# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role run by ansible-playbook on this machine against the simulated nvidia-smi.

The Molecule scenario covers the role on systemd hosts; this covers, in
seconds, the paths it does not: every refusal and its message, and a run
twice on a fresh A100 (changed, then unchanged). The boot unit is left out
(mig_boot_persistence: false with temporary paths): this machine is not a
systemd host.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

# One play per case: the role inside a block whose rescue records the message.
CASE_PLAY = """
- name: Case {name}
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: {python}
  tasks:
    - name: Run the role
      environment: {environment}
      block:
        - name: Include the mig role
          ansible.builtin.include_role:
            name: gpufleet.nvidia.mig
          vars: {role_vars}
        - name: Record success
          ansible.builtin.copy:
            content: '{{{{ {{"failed": false}} | to_json }}}}'
            dest: {result}
            mode: "0644"
      rescue:
        - name: Record the failure
          ansible.builtin.copy:
            content: >-
              {{{{ {{"failed": true, "msg": ([ansible_failed_result.msg] + (ansible_failed_result.results | default([])
                   | selectattr("failed", "defined") | selectattr("failed") | map(attribute="msg") | list))
                   | join(" | ")}} | to_json }}}}
            dest: {result}
            mode: "0644"
"""

BASE_VARS = {'mig_verify': True, 'mig_boot_persistence': False}


def run_case_plays(tmp_path, cases):
    """One play per case, in one ansible-playbook run: cases maps a name to (simulated host, role
    variables). Returns ({name: {"failed": ..., "msg": ...}}, the run's output)."""
    plays, results = [], {}
    for name, (sim, case_vars) in sorted(cases.items()):
        environment = dict(sim.env, PATH=SIM_BIN + os.pathsep + os.environ.get('PATH', ''))
        role_vars = dict(BASE_VARS, mig_config_path=os.path.join(sim.root, 'etc', 'mig.json'),
                         mig_boot_script_dir=os.path.join(sim.root, 'lib'), **case_vars)
        results[name] = str(tmp_path / (name + '.json'))
        plays.append(CASE_PLAY.format(name=name, python=sys.executable, environment=json.dumps(environment),
                                      role_vars=json.dumps(role_vars), result=results[name]))
    playbook = tmp_path / 'cases.yml'
    playbook.write_text(''.join(plays))
    proc = subprocess.run([PLAYBOOK_BIN, '-i', 'localhost,', str(playbook)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, cwd=str(tmp_path), timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    outcome = {}
    for name, path in results.items():
        with open(path) as handle:
            outcome[name] = json.load(handle)
    return outcome, proc.stdout


@pytest.fixture
def run_cases(tmp_path):
    started = []

    def run(cases):
        sims = {}
        for name, case in sorted(cases.items()):
            if 'same_host_as' in case:
                sim = sims[case['same_host_as']]
            else:
                sim = make_host(str(tmp_path / name), case.get('profile', 'a100_40gb_mig'))
                started.append(sim)
            sims[name] = sim
            for args in case.get('setup', []):
                done = sim.smi(*args)
                assert done.returncode == 0, done.stdout + done.stderr
            if case.get('pending_idle'):
                # Requested while a job ran, so pending; the job has ended since.
                job = sim.start_workload('--gpu', '0', '--memory', '1024', '--name', 'earlier-job')
                assert 'pending enable state' in sim.smi('-i', '0', '-mig', '1').stdout
                sim.stop(job)
            for gpu in case.get('workloads', []):
                sim.start_workload('--gpu', str(gpu), '--memory', '1024', '--name', 'case-job')
        outcome, output = run_case_plays(tmp_path, dict((name, (sims[name], case['vars'])) for name, case in cases.items()))
        return outcome, output, sims

    yield run
    for sim in started:
        sim.cleanup()


def _flat(text):
    return ' '.join(text.split())


def test_refusals_name_what_to_change(run_cases):
    layout = [{'gpus': [0], 'profiles': {'3g.20gb': 2}}]
    outcome, _output, _sims = run_cases({
        'empty': {'vars': {'mig_layouts': []}},
        'bad_count': {'vars': {'mig_layouts': [{'profiles': {'3g.20gb': 'two'}}]}},
        'no_such_gpu': {'vars': {'mig_layouts': [{'gpus': ['5'], 'profiles': {'3g.20gb': 2}}]}},
        'not_mig_capable': {'profile': 'l40s_2gpu', 'vars': {'mig_layouts': [{'profiles': {'1g.12gb': 4}}]}},
        'gpu_twice': {'vars': {'mig_layouts': [{'profiles': {'3g.20gb': 1}},
                                               {'gpus': ['00000000:00:04.0'], 'profiles': {'1g.5gb': 1}}]}},
        'too_many': {'vars': {'mig_layouts': [{'gpus': [0], 'profiles': {'3g.20gb': 3}}]}},
        'busy_layout': {'setup': [('mig', '-cgi', '19', '-C')], 'workloads': [0], 'vars': {'mig_layouts': layout}},
        'pending_busy_never': {'setup': [('-i', '0', '-mig', '0')], 'workloads': [0], 'vars': {'mig_layouts': layout}},
    })
    messages = dict((name, _flat(result.get('msg', ''))) for name, result in outcome.items())
    assert all(result["failed"] for result in outcome.values()), outcome

    assert 'mig_layouts is empty' in messages['empty']
    assert 'mig_layouts[1] is not valid' in messages['bad_count']
    assert 'mig_layouts[1] (gpus: ["5"]):' in messages['no_such_gpu']
    assert 'no GPU matches 5' in messages['no_such_gpu']
    assert 'mig_layouts[1] (gpus: "all"):' in messages['not_mig_capable']
    assert 'does not support MIG mode' in messages['not_mig_capable']
    assert 'GPU 0 is selected by mig_layouts entries 1 and 2' in messages['gpu_twice']
    assert '3 x 3g.20gb requested but the GPU holds at most 2' in messages['too_many']
    assert 'Change mig_layouts to profiles and counts the GPU offers' in messages['too_many']
    assert 'compute processes run on GPUs whose MIG layout must change' in messages['busy_layout']
    assert 'set mig_force: true' in messages['busy_layout'] and 'force: true.' not in messages['busy_layout']
    # MIG mode turned off on an idle GPU, then the job starts: the role's request stays pending.
    assert messages['pending_busy_never'].startswith('MIG mode is enabled but pending on GPU(s) 0: compute processes')
    assert re.search(r'compute processes run on them \(pid \d+ case-job\)', messages['pending_busy_never'])
    assert 'mig_reboot_policy: if_needed' in messages['pending_busy_never']


def _role_task_statuses(output, play):
    """``{task title: status}`` of the mig role's tasks in one play of the output."""
    section = output.split('PLAY [Case %s]' % play, 1)[1].split('PLAY [', 1)[0]
    statuses = {}
    title = None
    for line in section.splitlines():
        if line.startswith('TASK [') or line.startswith('RUNNING HANDLER ['):
            title = line.split('[', 1)[1].rsplit(']', 1)[0]
        elif title and title.startswith('gpufleet.nvidia.mig :') and line.split(':', 1)[0] in ('ok', 'changed',
                                                                                               'skipping', 'fatal'):
            statuses.setdefault(title, set()).add(line.split(':', 1)[0])
    return statuses


def test_idle_gpu_with_mig_off_is_reset_partitioned_and_then_left_alone(run_cases):
    layout = [{'gpus': ['GPU-33de42c1-a73b-3927-6cbc-f1e43c551384'], 'profiles': {'1g.5gb': 7}}]
    outcome, output, sims = run_cases({
        # A job held the GPU when MIG mode was requested, and has ended since: pending, idle.
        'first': {'setup': [('-i', '0', '-mig', '0')], 'vars': {'mig_layouts': layout}, 'pending_idle': True},
        'second': {'same_host_as': 'first', 'vars': {'mig_layouts': layout}},
    })
    assert outcome == {'first': {'failed': False}, 'second': {'failed': False}}
    first, second = _role_task_statuses(output, 'first'), _role_task_statuses(output, 'second')
    assert first['gpufleet.nvidia.mig : Reset each GPU with MIG mode pending'] == {'changed'}
    assert first['gpufleet.nvidia.mig : Create the MIG GPU and compute instances'] == {'changed'}
    assert first['gpufleet.nvidia.mig : Check each GPU has its MIG layout'] == {'ok'}
    assert [t for t, s in second.items() if 'changed' in s] == []
    assert second['gpufleet.nvidia.mig : Create the MIG GPU and compute instances'] == {'ok'}
    calls = [c['argv'] for c in sims['first'].calls('nvidia-smi')]
    assert calls.count(['-i', '0', '-r']) == 1
    assert [argv for argv in calls if '-cgi' in argv] == [['mig', '-i', '0', '-cgi', '19,19,19,19,19,19,19', '-C']]
    assert sims['first'].smi('-L').stdout.count('MIG 1g.5gb') == 7
