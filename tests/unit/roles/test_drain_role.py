# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The internal drain role: the commands each hook builds, and its entry points
run by ansible-playbook on this machine against test doubles of scontrol and
kubectl (tests/unit/roles/fake_schedulers: node state in a JSON file, every
argv logged) and the simulated nvidia-smi. No Slurm or Kubernetes cluster is
needed here; the fleet scenario drains real Slurm nodes.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    defaults, load, plain, render, role_variables, trust)
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fake_schedulers')


# ------------------------------------------------------------ commands built

def _commands(hook, **inputs):
    variables = role_variables('drain', 'main.yml')
    variables.update(trust(dict(inventory_hostname='gpu01.example.com', inventory_hostname_short='gpu01',
                                drain_hook=hook, __drain_action='drain', **inputs)))
    return plain(render(variables['__drain_commands'][hook], variables)), \
        plain(render(variables['__drain_state_commands'][hook], variables)), \
        plain(render(variables['__drain_hook_host'], variables))


def test_slurm_commands():
    commands, state, host = _commands('slurm', drain_slurm_controller='slurmctl01', drain_reason='driver upgrade')
    assert commands['drain'] == [['scontrol', 'update', 'NodeName=gpu01', 'State=DRAIN',
                                  'Reason=gpufleet: driver upgrade']]
    assert commands['record'] == commands['drain']
    assert commands['undrain'] == [['scontrol', 'update', 'NodeName=gpu01', 'State=RESUME']]
    assert state == [['scontrol', '--oneliner', 'show', 'node', 'gpu01']]
    assert host == 'slurmctl01'


def test_slurm_reason_is_cut_and_the_node_name_can_be_set():
    commands, _state, _host = _commands('slurm', drain_slurm_controller='c', drain_reason='x' * 500,
                                        drain_node_name='node-7', drain_slurm_scontrol='/opt/slurm/bin/scontrol')
    argv = commands['drain'][0]
    assert argv[0] == '/opt/slurm/bin/scontrol' and argv[2] == 'NodeName=node-7'
    assert len(argv[4]) == len('Reason=') + 200


def test_kubernetes_commands():
    commands, state, host = _commands('kubernetes', drain_kubernetes_host='localhost', drain_reason='driver upgrade',
                                      drain_kubeconfig='/etc/gpufleet/kubeconfig', drain_kubernetes_timeout=900)
    kubectl = ['kubectl', '--kubeconfig', '/etc/gpufleet/kubeconfig']
    assert commands['drain'] == [
        kubectl + ['cordon', 'gpu01'],
        kubectl + ['annotate', '--overwrite', 'node', 'gpu01', 'gpufleet.nvidia/drain-reason=gpufleet: driver upgrade'],
        kubectl + ['drain', 'gpu01', '--timeout=900s', '--ignore-daemonsets', '--delete-emptydir-data'],
    ]
    assert commands['record'] == commands['drain'][:2]
    assert commands['undrain'] == [kubectl + ['uncordon', 'gpu01'],
                                   kubectl + ['annotate', 'node', 'gpu01', 'gpufleet.nvidia/drain-reason-']]
    assert state == [kubectl + ['get', 'node', 'gpu01', '--output', 'json']]
    assert host == 'localhost'


def test_kubernetes_without_kubeconfig_uses_kubectls_default():
    commands, _state, _host = _commands('kubernetes', drain_kubernetes_host='localhost')
    assert commands['undrain'][0] == ['kubectl', 'uncordon', 'gpu01']


def test_command_hook_runs_the_operators_argv_on_the_node_by_default():
    commands, state, host = _commands('command', drain_command=['/usr/local/sbin/node-off', '--now'],
                                      drain_undrain_command=['/usr/local/sbin/node-on'])
    assert commands == {'drain': [['/usr/local/sbin/node-off', '--now']],
                        # No record command: draining again records the reason.
                        'record': [['/usr/local/sbin/node-off', '--now']],
                        'undrain': [['/usr/local/sbin/node-on']]}
    assert state == [] and host == 'gpu01.example.com'
    commands, _state, host = _commands('command', drain_command=['a'], drain_undrain_command=['b'],
                                       drain_record_command=['c'], drain_command_host='jump01')
    assert commands['record'] == [['c']] and host == 'jump01'


def test_none_hook_runs_nothing():
    commands, state, _host = _commands('none')
    assert commands == {'drain': [], 'record': [], 'undrain': []} and state == []


def test_every_entry_point_takes_the_hook_options():
    specs = load('drain', 'meta', 'argument_specs.yml')['argument_specs']
    assert sorted(specs) == ['check', 'drain', 'read', 'record', 'undrain', 'wait_idle']
    common = set(specs['drain']['options'])
    assert set(specs['read']['options']) == common
    for name in ('check', 'record', 'undrain', 'wait_idle'):
        assert common <= set(specs[name]['options']), name
    assert set(specs['check']['options']) == set(specs['wait_idle']['options'])
    assert set(specs['wait_idle']['options']) - common == {'drain_wait_timeout', 'drain_wait_interval',
                                                           'drain_wait_unknown'}
    assert defaults('drain')['drain_hook'] == 'none'


# ------------------------------------------------------------ runs

PLAY = """
- name: Case {name}
  hosts: {host}
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: {python}
    drain_hook_become: false
    drain_record_file: {record}
    drain_wait_interval: 1
  environment: {environment}
  tasks:
    - name: Run the steps
      block:
{steps}
        - name: Record success
          ansible.builtin.copy:
            content: '{{{{ {{"failed": false}} | to_json }}}}'
            dest: {result}
            mode: "0644"
      rescue:
        - name: Record the failure
          ansible.builtin.copy:
            content: '{{{{ {{"failed": true, "task": ansible_failed_task.name, "msg": ansible_failed_result.msg}} | to_json }}}}'
            dest: {result}
            mode: "0644"
"""

STEP = """        - name: Step {number} {entry}
          ansible.builtin.include_role:
            name: gpufleet.nvidia.drain
            tasks_from: {entry}
          vars: {variables}
"""


@pytest.fixture
def scheduler(tmp_path):
    """State and call log of the fake schedulers, and a runner of entry-point sequences."""
    state = tmp_path / 'scheduler.json'
    log = tmp_path / 'calls.jsonl'

    class Scheduler(object):
        sims = []

        def nodes(self, nodes):
            state.write_text(json.dumps({'nodes': nodes}))

        def node(self, name):
            return json.loads(state.read_text())['nodes'][name]

        def calls(self, prog=None):
            if not log.exists():
                return []
            entries = [json.loads(line) for line in log.read_text().splitlines()]
            return [e for e in entries if prog is None or e['prog'] == prog]

        def run(self, steps, host='gpu01', sim=None, name='case'):
            environment = {'FAKE_SCHEDULER_STATE': str(state), 'FAKE_SCHEDULER_LOG': str(log),
                           'PATH': SIM_BIN + os.pathsep + os.environ.get('PATH', '')}
            if sim is not None:
                environment.update(NVIDIA_SIM_ROOT=sim.root, NVIDIA_SIM_LIB=sim.env['NVIDIA_SIM_LIB'])
            result = tmp_path / ('%s.json' % name)
            record = tmp_path / ('%s-drained' % host)
            text = ''.join(STEP.format(number=n, entry=entry, variables=json.dumps(variables))
                           for n, (entry, variables) in enumerate(steps))
            playbook = tmp_path / ('%s.yml' % name)
            playbook.write_text(PLAY.format(name=name, host=host, python=sys.executable, record=record,
                                            environment=json.dumps(environment), steps=text, result=result))
            proc = subprocess.run([PLAYBOOK_BIN, '-i', 'gpu01,gpu02,ctl01,', str(playbook)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True, cwd=str(tmp_path), timeout=600,
                                  check=False)
            assert proc.returncode == 0, proc.stdout[-6000:]
            outcome = json.loads(result.read_text())
            outcome['record'] = json.loads(record.read_text()) if record.exists() else None
            outcome['output'] = proc.stdout
            return outcome

    yield Scheduler()
    for sim in Scheduler.sims:
        sim.cleanup()


SLURM = {'drain_hook': 'slurm', 'drain_slurm_controller': 'ctl01', 'drain_slurm_scontrol': os.path.join(FAKES, 'scontrol')}
KUBE = {'drain_hook': 'kubernetes', 'drain_kubernetes_host': 'ctl01', 'drain_kubectl': os.path.join(FAKES, 'kubectl')}


def _argvs(scheduler, prog):
    return [c['argv'] for c in scheduler.calls(prog) if c['argv'][:1] not in (['--oneliner'], ['get'])]


def test_slurm_drain_twice_record_and_undrain(scheduler):
    scheduler.nodes({'gpu01': {'state': 'IDLE'}})
    drained = scheduler.run([('drain', dict(SLURM, drain_reason='driver upgrade'))] * 2)
    assert not drained['failed'], drained
    assert scheduler.node('gpu01') == {'state': 'IDLE', 'drain': True, 'reason': 'gpufleet: driver upgrade'}
    # The second drain found the node drained by this role for the same reason.
    assert _argvs(scheduler, 'scontrol') == [['update', 'NodeName=gpu01', 'State=DRAIN',
                                              'Reason=gpufleet: driver upgrade']]
    record = drained['record']
    assert record['drained_by'] == 'gpufleet.nvidia' and record['hook'] == 'slurm' and not record['foreign']
    assert record['reason'] == 'gpufleet: driver upgrade'

    failed = scheduler.run([('record', dict(SLURM, drain_reason='verification failed: xid_79'))])
    assert scheduler.node('gpu01')['reason'] == 'gpufleet: verification failed: xid_79'
    assert failed['record']['reason'] == 'gpufleet: verification failed: xid_79'
    assert failed['record']['since'] == record['since']
    assert 'stays drained' in failed['output']

    resumed = scheduler.run([('undrain', SLURM)])
    assert scheduler.node('gpu01') == {'state': 'IDLE', 'drain': False, 'reason': ''}
    assert resumed['record'] is None
    # Every call saw who and why.
    env = scheduler.calls('scontrol')[-1]['env']
    assert env['GPUFLEET_DRAIN_NODE'] == 'gpu01' and env['GPUFLEET_DRAIN_ACTION'] == 'undrain'


def test_slurm_node_drained_by_someone_else_stays_drained(scheduler):
    scheduler.nodes({'gpu01': {'state': 'IDLE', 'drain': True, 'reason': 'bad fan, ticket 4711'}})
    outcome = scheduler.run([('drain', SLURM), ('undrain', SLURM)])
    assert not outcome['failed'], outcome
    assert scheduler.node('gpu01')['reason'] == 'bad fan, ticket 4711'
    assert _argvs(scheduler, 'scontrol') == []
    assert 'not by gpufleet.nvidia: its reason is kept, and undrain will leave it drained' in outcome['output']
    assert 'stays IDLE+DRAIN in slurm: it was drained by someone else before (bad fan, ticket 4711)' in outcome['output']
    assert outcome['record'] is None


def test_slurm_undrain_of_a_node_this_role_did_not_drain_does_nothing(scheduler):
    scheduler.nodes({'gpu01': {'state': 'IDLE'}})
    outcome = scheduler.run([('undrain', SLURM)])
    assert not outcome['failed'] and _argvs(scheduler, 'scontrol') == []


def test_unknown_slurm_node_fails_with_what_to_check(scheduler):
    scheduler.nodes({})
    outcome = scheduler.run([('drain', SLURM)])
    assert outcome['failed'] and outcome['task'] == 'Check the scheduler knows the node'
    assert 'Node gpu01 not found' in outcome['msg'] and 'drain_node_name' in outcome['msg']


def test_slurm_needs_a_controller(scheduler):
    scheduler.nodes({})
    outcome = scheduler.run([('drain', {'drain_hook': 'slurm'})])
    assert outcome['failed'] and 'drain_slurm_controller must name the inventory host that runs scontrol' in outcome['msg']


def test_kubernetes_cordon_annotate_drain_record_uncordon(scheduler):
    scheduler.nodes({'gpu01': {'pods': [{'name': 'train-0'}, {'name': 'dcgm-exporter', 'daemonset': True}]}})
    outcome = scheduler.run([('drain', dict(KUBE, drain_reason='driver upgrade')),
                             ('drain', dict(KUBE, drain_reason='driver upgrade'))])
    assert not outcome['failed'], outcome
    node = scheduler.node('gpu01')
    assert node['unschedulable'] and node['drained'] and node['pods'] == [{'name': 'dcgm-exporter', 'daemonset': True}]
    assert node['annotations'] == {'gpufleet.nvidia/drain-reason': 'gpufleet: driver upgrade'}
    assert _argvs(scheduler, 'kubectl') == [
        ['cordon', 'gpu01'],
        ['annotate', '--overwrite', 'node', 'gpu01', 'gpufleet.nvidia/drain-reason=gpufleet: driver upgrade'],
        ['drain', 'gpu01', '--timeout=600s', '--ignore-daemonsets', '--delete-emptydir-data']]

    scheduler.run([('record', dict(KUBE, drain_reason='verification failed'))])
    assert scheduler.node('gpu01')['annotations'] == {'gpufleet.nvidia/drain-reason': 'gpufleet: verification failed'}

    resumed = scheduler.run([('undrain', KUBE)])
    node = scheduler.node('gpu01')
    assert not node['unschedulable'] and node['annotations'] == {} and resumed['record'] is None
    assert _argvs(scheduler, 'kubectl')[-2:] == [['uncordon', 'gpu01'],
                                                 ['annotate', 'node', 'gpu01', 'gpufleet.nvidia/drain-reason-']]


def test_kubernetes_node_cordoned_by_someone_else_stays_cordoned(scheduler):
    scheduler.nodes({'gpu01': {'unschedulable': True}})
    outcome = scheduler.run([('drain', KUBE), ('undrain', KUBE)])
    assert not outcome['failed'] and scheduler.node('gpu01')['unschedulable']
    assert _argvs(scheduler, 'kubectl') == []


def test_command_hook(scheduler, tmp_path):
    script = tmp_path / 'hook.sh'
    script.write_text('#!/bin/sh\necho "$0 $* $GPUFLEET_DRAIN_ACTION $GPUFLEET_DRAIN_NODE $GPUFLEET_DRAIN_REASON" >> %s\n'
                      % (tmp_path / 'hook.log'))
    script.chmod(0o755)
    hook = {'drain_hook': 'command', 'drain_command': [str(script), 'off'], 'drain_undrain_command': [str(script), 'on'],
            'drain_reason': 'driver upgrade'}
    outcome = scheduler.run([('drain', hook), ('drain', hook), ('record', dict(hook, drain_reason='failed')),
                             ('undrain', hook)])
    assert not outcome['failed'], outcome
    assert (tmp_path / 'hook.log').read_text().splitlines() == [
        '%s off drain gpu01 gpufleet: driver upgrade' % script,
        '%s off record gpu01 gpufleet: failed' % script,
        '%s on undrain gpu01 gpufleet: driver upgrade' % script]


def test_none_hook_keeps_only_the_record_file(scheduler):
    scheduler.nodes({})
    outcome = scheduler.run([('drain', {'drain_reason': 'maintenance'})])
    assert outcome['record']['hook'] == 'none' and outcome['record']['reason'] == 'gpufleet: maintenance'
    assert scheduler.run([('undrain', {})])['record'] is None


def _sim(scheduler, tmp_path, name, **kwargs):
    sim = make_host(str(tmp_path / name), 'l40s_2gpu', **kwargs)
    scheduler.sims.append(sim)
    return sim


def test_wait_idle_waits_for_the_gpu_processes(scheduler, tmp_path):
    sim = _sim(scheduler, tmp_path, 'idle')
    assert not scheduler.run([('wait_idle', {'drain_wait_timeout': 5})], sim=sim)['failed']
    sim.start_workload('--gpu', '1', '--memory', '1024', '--name', 'train.py')
    outcome = scheduler.run([('wait_idle', {'drain_wait_timeout': 2})], sim=sim, name='busy')
    assert outcome['failed'] and outcome['task'] == 'Say what still runs'
    assert 'not idle after 2 s (drain_wait_timeout): GPU compute processes still run: PID' in outcome['msg']
    assert '(train.py) on GPU 1' in outcome['msg']


def test_wait_idle_waits_for_slurm_jobs(scheduler, tmp_path):
    sim = _sim(scheduler, tmp_path, 'slurm')
    scheduler.nodes({'gpu01': {'state': 'MIXED', 'drain': True, 'reason': 'gpufleet: x'}})
    outcome = scheduler.run([('wait_idle', dict(SLURM, drain_wait_timeout=2))], sim=sim)
    assert outcome['failed'] and 'Slurm still lists it as MIXED+DRAIN' in outcome['msg']
    scheduler.nodes({'gpu01': {'state': 'IDLE', 'drain': True, 'reason': 'gpufleet: x'}})
    assert not scheduler.run([('wait_idle', dict(SLURM, drain_wait_timeout=2))], sim=sim, name='drained')['failed']


def test_wait_idle_without_a_process_list(scheduler, tmp_path):
    # The driver upgraded without a reboot: nvidia-smi answers "Driver/library version mismatch".
    sim = _sim(scheduler, tmp_path, 'mismatch')
    sim.install_driver('580.95.05')
    outcome = scheduler.run([('wait_idle', {})], sim=sim)
    assert outcome['failed'] and 'nvidia-smi cannot list the GPU processes on gpu01 (version_mismatch' in outcome['msg']
    assert 'drain_wait_unknown: proceed' in outcome['msg']
    outcome = scheduler.run([('wait_idle', {'drain_wait_unknown': 'proceed'})], sim=sim, name='proceed')
    assert not outcome['failed'] and 'going on as if idle' in outcome['output']
    # No driver loaded: nothing can run on the GPUs.
    unloaded = _sim(scheduler, tmp_path, 'unloaded', load=False)
    assert not scheduler.run([('wait_idle', {})], sim=unloaded, name='unloaded')['failed']
