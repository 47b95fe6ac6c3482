# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""playbooks/driver_upgrade.yml, slurm_gres.yml and the live-fleet guard of site.yml.

The fleet scenario (molecule/fleet) runs the upgrade for real. Here, in
seconds: the playbooks parse, the per-node steps come in the required order
with a rescue that records the failure, batches follow the serial, order and
max_fail_percentage variables (a batch whose nodes fail stops the run), a
node already on the requested driver is left alone, and site.yml skips the
roles that need the loaded driver while a reboot is pending.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BIN = os.path.dirname(sys.executable)
UPGRADE = os.path.join(ROOT, 'playbooks', 'driver_upgrade.yml')
SITE = os.path.join(ROOT, 'playbooks', 'site.yml')


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _names(tasks):
    return [t['name'] for t in tasks]


def _play(path, **env):
    return subprocess.run([os.path.join(BIN, 'ansible-playbook')] + path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, cwd=ROOT, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'), **env))


@pytest.mark.parametrize('playbook', ['driver_upgrade.yml', 'slurm_gres.yml', 'site.yml'])
def test_syntax(playbook):
    proc = _play([os.path.join(ROOT, 'playbooks', playbook), '--syntax-check', '-i', 'localhost,'])
    assert proc.returncode == 0, proc.stdout


def test_batches_come_from_variables():
    check, play = _load(UPGRADE)[:2]
    # The first play checks them before any node is touched (test_inputs_read_once.py, and the runs below).
    assert check['hosts'] == play['hosts'] and check['any_errors_fatal'] is True
    assert play['serial'] == "{{ gpufleet_upgrade_serial | default(1) | string | trim }}"
    assert play['max_fail_percentage'] == "{{ gpufleet_upgrade_max_fail_percentage | default(0) | string | trim }}"
    assert play['order'] == "{{ gpufleet_upgrade_order | default('inventory') }}"


def test_steps_in_order_and_the_rescue_records_the_failure():
    play = _load(UPGRADE)[1]
    block = [t for t in play['tasks'] if 'block' in t and 'rescue' in t][0]
    steps = [(t.get('ansible.builtin.include_role', {}).get('name', ''),
              t.get('ansible.builtin.include_role', {}).get('tasks_from', '')) for t in block['block']]
    roles = [s for s in steps if s[0]]
    assert roles == [
        ('gpufleet.nvidia.drain', 'drain'),
        ('gpufleet.nvidia.drain', 'wait_idle'),
        ('gpufleet.nvidia.nvidia_driver', ''),          # installed, not rebooted
        ('gpufleet.nvidia.fabric_manager', ''),         # at the driver's version, before the reboot
        ('gpufleet.nvidia.nvidia_driver', ''),          # reboot per policy, new driver checked
        ('gpufleet.nvidia.fabric_manager', ''),         # running with it
        ('gpufleet.nvidia.container_toolkit', ''),      # CDI of the new driver
        ('gpufleet.nvidia.dcgm', ''),                   # its CUDA plugin follows the driver's CUDA major
        ('gpufleet.nvidia.drain', 'undrain'),
    ]
    install, reboot = [t for t in block['block'] if t.get('ansible.builtin.include_role', {}).get('name', '')
                       == 'gpufleet.nvidia.nvidia_driver']
    assert install['vars'] == {'nvidia_driver_reboot_policy': 'never'}
    assert '__gpufleet_upgrade_inputs.reboot_policy' in reboot['vars']['nvidia_driver_reboot_policy']
    health = [t for t in block['block'] if t.get('name') == 'Verify the node\'s health'][0]
    assert health['block'][0]['ansible.builtin.include_role']['name'] == 'gpufleet.nvidia.health'
    assert 'gpu_health.healthy' in health['block'][1]['ansible.builtin.assert']['that']
    rescue = block['rescue']
    assert rescue[0]['ansible.builtin.include_role'] == {'name': 'gpufleet.nvidia.drain', 'tasks_from': 'record'}
    assert 'ansible_failed_task.name' in rescue[0]['vars']['drain_reason']
    # The upgrade counts as ended only once the failure is recorded on the node.
    assert rescue[1]['ansible.builtin.set_fact'] == {'__gpufleet_upgrade_step': 'failed'}
    assert 'ansible.builtin.fail' in rescue[2]


def test_a_node_lost_in_an_earlier_batch_stops_the_run_before_this_batch_connects():
    # Ansible takes an unreachable node out of the play without failing it;
    # the first task of every batch, before the facts are gathered, stops the
    # run when a node of an earlier batch stopped answering mid-upgrade
    # (molecule/faults case 19 runs it).
    play = _load(UPGRADE)[1]
    assert play['gather_facts'] is False
    guard, setup = play['tasks'][:2]
    assert guard['name'].startswith('Stop before this batch when a node of an earlier batch was lost')
    assert 'ansible.builtin.fail' in guard and guard['when'] == '__gpufleet_upgrade_lost | length > 0'
    lost = guard['vars']['__gpufleet_upgrade_lost']
    for words in ('ansible_play_hosts_all', 'difference(ansible_play_hosts)', '__gpufleet_upgrade_step',
                  '__gpufleet_upgrade_ended'):
        assert words in lost, words
    assert setup['ansible.builtin.setup'] == {'gather_subset': ['min']}
    # Every step of the upgrade is announced before it runs, and each way an
    # upgrade ends is one of the values that end it.
    block = [t for t in play['tasks'] if 'block' in t and 'rescue' in t][0]
    steps = [t for t in block['block'] if 'ansible.builtin.set_fact' in t
             and '__gpufleet_upgrade_step' in t['ansible.builtin.set_fact']]
    following = [block['block'][block['block'].index(t) + 1]['name'] for t in steps[:-1]]
    assert following == ['Drain the node', 'Wait until no job and no GPU compute process runs', 'Install the driver',
                         'Reboot per policy and check the new driver is loaded', 'Check Fabric Manager with the new driver',
                         "Verify the node's health", 'Undrain the node']
    waiting = [t for t in block['block'] if t.get('name') == 'Leave a node that waits for its reboot drained'][0]
    ends = [steps[-1]['ansible.builtin.set_fact']['__gpufleet_upgrade_step'],
            block['rescue'][1]['ansible.builtin.set_fact']['__gpufleet_upgrade_step']] + [
        t['ansible.builtin.set_fact']['__gpufleet_upgrade_step'] for t in waiting['block'] if 'ansible.builtin.set_fact' in t]
    assert sorted(ends) == sorted(play['vars']['__gpufleet_upgrade_ended']), ends


def test_the_package_step_has_a_rescue_that_puts_the_node_back():
    for name in ('install_apt.yml', 'install_dnf.yml'):
        tasks = _load(os.path.join(ROOT, 'roles', 'nvidia_driver', 'tasks', name))
        block = [t for t in tasks if t.get('name') == 'Install the driver packages' and 'block' in t][0]
        rescue = _names(block['rescue'])
        assert rescue[0] == 'Keep what failed and what was installed before', name
        assert any('held before' in n or 'locked before' in n for n in rescue), name
        assert 'Start the GPU services stopped for the driver change again' in rescue, name
        assert rescue[-2:] == ['Read the host after the failed package change', 'Say what state the node is in'], name
    apt = _load(os.path.join(ROOT, 'roles', 'nvidia_driver', 'tasks', 'install_apt.yml'))
    rescue = [t for t in apt if t.get('name') == 'Install the driver packages' and 'block' in t][0]['rescue']
    pin = [t for t in rescue if t['name'] == 'Put the pin of the driver installed before back'][0]
    assert pin['vars'] == {'__nvidia_driver_pin_version': '{{ __nvidia_driver_version_before }}'}
    # A maintainer script that failed after the unpack (molecule/faults case 17): the packages
    # installed before go back, in one apt run, before the holds and the services.
    names = _names(rescue)
    rollback = names.index('Put the driver packages installed before back (apt-get install --allow-downgrades)')
    assert names.index('Read the packages the failed step left') < rollback
    assert rollback < names.index('Hold the driver packages that were held before')
    argv = rescue[rollback]['vars']['__nvidia_driver_rollback_argv']
    assert "__nvidia_driver_apt_get_argv + ['install'] + __nvidia_driver_specs_before" in argv
    variables = _load(os.path.join(ROOT, 'roles', 'nvidia_driver', 'vars', 'main.yml'))
    assert variables['__nvidia_driver_apt_get_argv'][0] == 'apt-get'
    assert variables['__nvidia_driver_apt_get_argv'][-1] == '--allow-downgrades'


@pytest.mark.parametrize('change_needed, version, state', [
    (True, '', 'latest'), (True, '580.95.05', 'present'), (False, '', 'present'), (False, '570.195.03', 'present')])
def test_dnf_moves_installed_packages_to_the_new_stream_on_a_branch_change(change_needed, version, state):
    """A branch change on EL enables the new stream while the old branch's
    packages stay installed under the same names: "present" left them there
    (the fleet's Rocky-shaped HGX rebooted into 570 after an upgrade to 580)."""
    import jinja2
    tasks = _load(os.path.join(ROOT, 'roles', 'nvidia_driver', 'tasks', 'install_dnf.yml'))
    block = [t for t in tasks if t.get('name') == 'Install the driver packages' and 'block' in t][0]
    install = [t for t in block['block'] if t.get('name') == 'Install the driver packages'][0]
    values = dict(__nvidia_driver_change_needed=change_needed, __nvidia_driver_version=version)
    assert jinja2.Template(install['ansible.builtin.dnf']['state']).render(**values) == state
    # Fabric Manager and NSCQ of the old branch require its driver: erased on a change only.
    assert jinja2.Template(install['ansible.builtin.dnf']['allowerasing']).render(**values) == str(change_needed)


def test_site_skips_what_needs_the_loaded_driver_while_a_reboot_is_pending():
    tasks = dict((t['name'], t) for t in _load(SITE)[2]['tasks'])
    guard = 'not (nvidia_driver_reboot_required | default(false) | bool)'
    for name in ('MIG layout where one is defined', 'NVIDIA Container Toolkit', 'DCGM host engine',
                 'DCGM exporter for Prometheus'):
        assert guard in tasks[name]['when'], name
    say = tasks['Say which roles wait for the reboot that loads the new driver']
    assert say['when'] == 'nvidia_driver_reboot_required | default(false) | bool'
    names = list(tasks)
    assert names.index('Say which roles wait for the reboot that loads the new driver') < names.index(
        'MIG layout where one is defined')


@pytest.fixture
def local_fleet(tmp_path):
    """Inventory of local hosts that nvidia-smi (the simulator) answers for, without become."""
    sims = []

    def make(names, driver='570.195.03'):
        sim = make_host(str(tmp_path / 'sim'), 'l40s_2gpu', driver=driver)
        sims.append(sim)
        inventory = tmp_path / 'hosts.yml'
        inventory.write_text(yaml.safe_dump({'gpu_nodes': {'hosts': dict((n, {}) for n in names), 'vars': {
            'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'ansible_become': False,
            'drain_record_file': str(tmp_path / 'drained')}}}))
        env = {'NVIDIA_SIM_ROOT': sim.root, 'NVIDIA_SIM_LIB': os.path.dirname(SIM_BIN),
               'PATH': SIM_BIN + os.pathsep + os.environ['PATH']}
        return str(inventory), env

    yield make
    for sim in sims:
        sim.cleanup()


def _hosts_run(output):
    return sorted(set(re.findall(r'^(?:ok|fatal|changed|skipping): \[([^\]]+)\]', output, re.M)))


def _upgrade_play(output):
    """The output of the upgrade play itself, after the play that checks the inputs."""
    return output.split('PLAY [Rolling NVIDIA driver upgrade]', 1)[1] if 'PLAY [Rolling NVIDIA driver upgrade]' in output else ''


def test_a_failing_batch_stops_the_run(local_fleet, tmp_path):
    inventory, env = local_fleet(['n1', 'n2', 'n3', 'n4'])
    # Every node fails to drain (the hook's command fails): only the first
    # batch (50% = 2 nodes, from the end) runs.
    extravars = {'nvidia_driver_branch': '580', 'gpufleet_upgrade_serial': '50%',
                 'gpufleet_upgrade_order': 'reverse_inventory', 'gpufleet_upgrade_drain': 'command',
                 'drain_command': ['/bin/false'], 'drain_undrain_command': ['/bin/true']}
    proc = _play([UPGRADE, '-i', inventory, '-e', json.dumps(extravars)], **env)
    assert proc.returncode != 0
    assert _hosts_run(_upgrade_play(proc.stdout)) == ['n3', 'n4'], proc.stdout
    assert 'stays drained' in proc.stdout


@pytest.mark.parametrize('extravars, named', [
    ({'nvidia_driver_branch': 'x'}, 'nvidia_driver_branch must name the branch to move to'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_serial': '0'}, 'gpufleet_upgrade_serial must be a number'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_serial': '-1'}, 'gpufleet_upgrade_serial must be a number'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_serial': 'abc'}, 'gpufleet_upgrade_serial must be a number'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_max_fail_percentage': '101'},
     'gpufleet_upgrade_max_fail_percentage must be a percentage'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_order': 'Sorted'}, 'gpufleet_upgrade_order must be one of'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_drain': 'slurm'}, 'drain_slurm_controller must name'),
    ({'nvidia_driver_branch': '580', 'gpufleet_upgrade_verify_health': 'maybe'},
     'gpufleet_upgrade_verify_health must be a boolean'),
], ids=['branch', 'serial-0', 'serial-minus-1', 'serial-abc', 'max-fail-101', 'order-case', 'slurm-no-controller',
        'verify-maybe'])
def test_a_bad_input_stops_the_run_before_any_node_is_touched(local_fleet, extravars, named):
    inventory, env = local_fleet(['n1', 'n2', 'n3'])
    proc = _play([UPGRADE, '-i', inventory, '-e', json.dumps(extravars)], **env)
    assert proc.returncode != 0
    assert named in proc.stdout, proc.stdout
    assert 'Unexpected Exception' not in proc.stdout
    assert _upgrade_play(proc.stdout) == '', proc.stdout


def test_nodes_on_the_requested_driver_are_left_alone(local_fleet):
    inventory, env = local_fleet(['n1', 'n2'], driver='580.95.05')
    proc = _play([UPGRADE, '-i', inventory, '-e', json.dumps({'nvidia_driver_branch': '580'})], **env)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.count('runs NVIDIA driver 580.95.05 (branch 580 requested) and is not drained: nothing to do') == 2
    assert 'Drain the node' not in proc.stdout
    assert re.search(r'n1\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0', proc.stdout), proc.stdout
