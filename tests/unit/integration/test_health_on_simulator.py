# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health role run by ansible-playbook against simulated hosts (no containers).

Three throw-away hosts below temporary NVIDIA_SIM_ROOTs, shaped like the demo
fleet (8x H100 HGX, 2x L40S, A100 with MIG), each with its own simulated DCGM
host engine and CDI specification. Faults are injected into these hosts only:
an Xid in a saved kernel log, a driver of another branch than expected, a MIG
layout that differs from the inventory's. The simulator's call log proves that
the default health check costs one nvidia-smi process per node.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, SIM_DIR, make_host
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.daemon_helpers import Servers, start_hostengine

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
PROFILES = {'hgx01': 'hgx_h100_8gpu', 'l40s01': 'l40s_2gpu', 'a100mig01': 'a100_40gb_mig'}
MODELS = {'hgx01': 'H100', 'l40s01': 'L40S', 'a100mig01': 'A100'}
COUNTS = {'hgx01': 8, 'l40s01': 2, 'a100mig01': 1}
XID_79 = ('2026-01-10T09:12:44+0000 a100mig01 kernel: NVRM: Xid (PCI:0000:00:04): 79, pid=0, '
          'GPU has fallen off the bus.\n')

PLAY = """
- name: Health of the simulated hosts
  hosts: gpu_nodes
  gather_facts: false
  environment:
    NVIDIA_SIM_ROOT: "{{{{ sim_root }}}}"
    NVIDIA_SIM_LIB: {sim_lib}
    PATH: "{sim_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
  tasks:
    - name: The role
      ansible.builtin.include_role:
        name: gpufleet.nvidia.health
        tasks_from: "{{{{ entry_point | default('main') }}}}"
    - name: Save the result
      ansible.builtin.copy:
        content: "{{{{ {{'gpu_health': gpu_health | default(none), 'validated': __health_checks | default(none)}} | to_json }}}}"
        dest: "{{{{ out_dir }}}}/{{{{ inventory_hostname }}}}.json"
        mode: "0644"
      delegate_to: localhost
"""


class Fleet(object):
    """Simulated hosts, an inventory of them, and ansible-playbook runs with the health role."""

    def __init__(self, tmp_path, servers):
        self.tmp = tmp_path
        self.hosts = {}
        self.ports = {}
        for name, profile in PROFILES.items():
            host = make_host(str(tmp_path / name), profile)
            # Persistence on (as the persistence_mode role leaves it) and a CDI specification (container_toolkit).
            assert host.smi('-pm', '1').returncode == 0
            assert host.run('nvidia-ctk', 'cdi', 'generate', '--output=/var/run/cdi/nvidia.yaml').returncode == 0
            host.write('var/log/kern.log', 'kernel: Linux version 6.1.0\n')
            if profile == 'hgx_h100_8gpu':
                # The fabricmanager role's daemon on the NVSwitch system (a live pid is what the simulator reads):
                # without it the GPUs' fabric stays "Not Started" and fabric_not_ready is critical, as on a real
                # HGX, where CUDA cannot start until the fabric is up.
                host.write('run/nvidia-fabricmanager/nv-fabricmanager.pid', '%d\n' % os.getpid())
            self.ports[name] = start_hostengine(servers, host)[1]
            self.hosts[name] = host
        self.out = tmp_path / 'out'
        self.out.mkdir()
        self.report_dir = tmp_path / 'report'

    def inventory(self, host_vars, group_vars):
        hosts = {}
        for name, host in self.hosts.items():
            hosts[name] = dict({
                'sim_root': host.root,
                'health_kernel_log_source': 'file',
                'health_kernel_log_path': host.path('var/log/kern.log'),
                'health_dcgm_host': '127.0.0.1:%d' % self.ports[name],
                'health_expected_gpu_count': COUNTS[name],
                'health_expected_gpu_model': MODELS[name],
                # The checks' memory, inside the simulated host (the default is the machine's own /var/lib).
                'health_state_path': host.path('var/lib/gpufleet/health-state.json'),
            }, **host_vars.get(name, {}))
        return {'all': {'vars': dict({
            'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
            'out_dir': str(self.out), 'health_report_dir': str(self.report_dir),
            'health_expected_driver_branch': '570'}, **group_vars),
            'children': {'gpu_nodes': {'hosts': hosts}}}}

    def smi_calls(self):
        return dict((name, len(host.calls('nvidia-smi'))) for name, host in self.hosts.items())

    def play(self, host_vars=None, group_vars=None, expect_rc=0):
        inventory = self.tmp / 'hosts.json'
        inventory.write_text(json.dumps(self.inventory(host_vars or {}, group_vars or {})))
        playbook = self.tmp / 'play.yml'
        playbook.write_text(PLAY.format(sim_lib=SIM_DIR, sim_bin=SIM_BIN))
        env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'),
                   ANSIBLE_STDOUT_CALLBACK='ansible.builtin.default')
        done = subprocess.run([PLAYBOOK_BIN, '-i', str(inventory), str(playbook)], capture_output=True, text=True,
                              check=False, env=env, cwd=REPO_ROOT)
        assert done.returncode == expect_rc, done.stdout + done.stderr
        results = {}
        for name in self.hosts:
            path = self.out / (name + '.json')
            results[name] = json.loads(path.read_text()) if path.exists() else None
        return results, done.stdout

    def cleanup(self):
        for host in self.hosts.values():
            host.cleanup()


@pytest.fixture
def fleet(tmp_path):
    with Servers() as servers:
        simulated = Fleet(tmp_path, servers)
        try:
            yield simulated
        finally:
            simulated.cleanup()


def codes(result):
    return sorted(finding['code'] for finding in result['gpu_health']['findings'])


def checks(result):
    return dict((check['name'], check['status']) for check in result['gpu_health']['checks'])


def test_one_nvidia_smi_per_node_findings_checks_and_report(fleet):
    fleet.hosts['a100mig01'].write('var/log/kern.log', XID_79)
    before = fleet.smi_calls()
    results, stdout = fleet.play()
    after = fleet.smi_calls()
    # The whole default health check: one nvidia-smi -q -x per node, nothing else.
    assert dict((name, after[name] - before[name]) for name in after) == {'hgx01': 1, 'l40s01': 1, 'a100mig01': 1}
    for name, host in fleet.hosts.items():
        assert [call['argv'] for call in host.calls('nvidia-smi')[before[name]:]] == [['-q', '-x']], name

    hgx, l40s, a100 = results['hgx01'], results['l40s01'], results['a100mig01']
    assert hgx['gpu_health']['healthy'] is True and codes(hgx) == []
    assert l40s['gpu_health']['healthy'] is True and codes(l40s) == []
    assert a100['gpu_health']['healthy'] is False and codes(a100) == ['xid_79']
    assert a100['gpu_health']['findings'][0]['severity'] == 'critical'
    for result in results.values():
        assert checks(result) == {'driver': 'pass', 'cdi': 'pass', 'container': 'skipped', 'dcgm_diag': 'pass',
                                  'framework': 'skipped', 'nvbandwidth': 'skipped', 'nccl_allreduce': 'skipped'}
    assert len(hgx['gpu_health']['gpus']) == 8 and hgx['gpu_health']['driver']['version'] == '570.195.03'

    report = json.loads((fleet.report_dir / 'gpu-health.json').read_text())
    assert report['totals']['hosts'] == 3 and report['totals']['healthy'] == 2 and report['totals']['gpus'] == 11
    assert [(m['model'], m['gpus']) for m in report['by_model']] == [
        ('NVIDIA H100 80GB HBM3', 8), ('NVIDIA L40S', 2), ('NVIDIA A100-SXM4-40GB', 1)]
    assert report['by_driver'] == [{'driver': '570.195.03', 'cuda': '12.8', 'gpus': 11, 'hosts': 3}]
    page = (fleet.report_dir / 'gpu-health.html').read_text()
    assert 'xid_79' in page and page.count('<tr data-host="hgx01" data-status="healthy">') == 8
    # The table in the job output.
    assert 'a100mig01  unhealthy' in stdout and 'a100mig01: critical xid_79 (GPU 0)' in stdout
    assert '3 hosts: 2 healthy, 1 unhealthy, 0 without data; 11 GPUs' in stdout
    assert all(set(['code', 'severity', 'action', 'source']) <= set(f) for f in report['hosts'][2]['findings'])

    # The next run remembers the Xid it reported (health_state_path on the node): nothing new, the node healthy,
    # the Xid listed as already reported; when it recurs, it is raised again with its count.
    again, _stdout = fleet.play()
    assert codes(again['a100mig01']) == [] and again['a100mig01']['gpu_health']['healthy'] is True
    assert [f['code'] for f in again['a100mig01']['gpu_health']['already_reported']] == ['xid_79']
    fleet.hosts['a100mig01'].write('var/log/kern.log', XID_79 + XID_79.replace('09:12:44', '10:40:02'))
    recurred, _stdout = fleet.play()
    assert codes(recurred['a100mig01']) == ['xid_79'] and recurred['a100mig01']['gpu_health']['findings'][0]['count'] == 2


def test_expectations_from_the_inventory_and_a_broken_check(fleet):
    # The MIG host gets one 3g.20gb GPU instance; the inventory expects two of them.
    a100 = fleet.hosts['a100mig01']
    assert a100.smi('mig', '-cgi', '3g.20gb', '-C').returncode == 0, a100.smi('mig', '-lgip').stdout
    before = fleet.smi_calls()
    results, _stdout = fleet.play(host_vars={
        'hgx01': {'health_expected_driver_branch': '580', 'health_dcgm_host': '127.0.0.1:1'},
        'l40s01': {'health_expected_gpu_model': 'H100', 'health_expected_gpu_count': 4,
                   # The medium DCGM diagnostic, opt-in with its time budget (the simulator's dcgmi runs it).
                   'health_dcgm_diag_level': 2, 'health_check_timeout': 240},
        'a100mig01': {'health_expected_mig_layout': [{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}]},
    })
    after = fleet.smi_calls()
    # A MIG layout to check costs nvidia-smi -L for the profile names; the other hosts stay at one process.
    assert dict((name, after[name] - before[name]) for name in after) == {'hgx01': 1, 'l40s01': 1, 'a100mig01': 2}
    hgx, l40s, mig = results['hgx01'], results['l40s01'], results['a100mig01']
    # A diagnostic that could not reach its host engine did not complete: a finding of its own.
    assert codes(hgx) == ['acceptance_failed', 'driver_branch_unexpected']
    assert checks(hgx)['dcgm_diag'] == 'fail'
    assert 'dcgmi diag failed' in [c for c in hgx['gpu_health']['checks'] if c['name'] == 'dcgm_diag'][0]['reason']
    stopped = [f for f in hgx['gpu_health']['findings'] if f['code'] == 'acceptance_failed'][0]
    assert (stopped['check'], stopped['action']) == ('dcgm_diag', 'drain') and 'dcgmi diag failed' in stopped['evidence']
    assert codes(l40s) == ['gpu_count_low', 'gpu_model_unexpected', 'gpu_model_unexpected']
    diag = [c for c in l40s['gpu_health']['checks'] if c['name'] == 'dcgm_diag'][0]
    assert diag['status'] == 'pass' and 'level 2 passed' in diag['reason'], diag
    assert codes(mig) == ['mig_layout_unexpected']
    finding = mig['gpu_health']['findings'][0]
    assert (finding['expected'], finding['found']) == ('3g.20gb x2', '3g.20gb x1')
    assert all(not result['gpu_health']['healthy'] for result in results.values())
    report = json.loads((fleet.report_dir / 'gpu-health.json').read_text())
    assert report['totals']['unhealthy'] == 3 and report['totals']['checks_failed'] == 1


def test_validate_entry_point_fails_the_node_with_a_failed_check(fleet):
    results, stdout = fleet.play(
        host_vars={'l40s01': {'health_dcgm_host': '127.0.0.1:1'}},
        group_vars={'entry_point': 'validate'}, expect_rc=2)
    assert results['l40s01'] is None
    assert results['hgx01']['validated']['passed'] is True and results['hgx01']['gpu_health'] is None
    assert 'Validation failed: dcgmi diag failed' in stdout
    assert 'dcgm_diag: pass - DCGM diagnostic level 1 passed' in stdout


def test_only_unhealthy_nodes_are_drained_and_only_when_asked(fleet, tmp_path):
    fleet.hosts['a100mig01'].write('var/log/kern.log', XID_79)
    drained = tmp_path / 'drained.txt'
    drain = {'health_drain_unhealthy': True, 'health_drain_hook': 'command',
             'drain_command': ['/bin/sh', '-c', 'echo "$GPUFLEET_DRAIN_NODE $GPUFLEET_DRAIN_REASON" >> %s' % drained],
             'drain_undrain_command': ['/bin/true']}
    host_vars = dict((name, {'drain_record_file': str(tmp_path / ('record-' + name))}) for name in fleet.hosts)
    # The default brake (10 % of the play's 3 hosts, rounded down) drains no node and says so.
    results, stdout = fleet.play(host_vars=host_vars, group_vars=drain)
    assert [name for name, result in results.items() if not result['gpu_health']['healthy']] == ['a100mig01']
    assert not drained.exists()
    assert 'Drain brake: 0 of 3 hosts (health_drain_max_share 10%) may be drained in one run; drained now: none.' in stdout
    assert 'a100mig01: unhealthy (needs reboot), left in service by the brake' in stdout
    # A share that lets one of three through. The Xid is remembered (health_state_path): a fresh state file.
    fleet.hosts['a100mig01'].remove('var/lib/gpufleet/health-state.json')
    results, _stdout = fleet.play(host_vars=host_vars, group_vars=dict(drain, health_drain_max_share=34))
    lines = drained.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith('a100mig01 ') and 'gpu health: xid_79' in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('record-')) == ['record-a100mig01']


def test_acceptance_tests_through_the_role_on_the_simulators_programs(fleet):
    """nvbandwidth and all_reduce_perf turned on by survey strings. The programs are the simulator's (host-side
    test doubles printing the real tools' layouts, numbers from a model of the profile's PCIe and NVLink): what
    this proves is the role's wiring and judgement, not NVIDIA's numbers."""
    on = {'health_check_nvbandwidth': 'true', 'health_check_nccl_allreduce': 'yes', 'health_check_timeout': '60'}
    results, _stdout = fleet.play(group_vars=on)
    hgx, l40s, mig = results['hgx01'], results['l40s01'], results['a100mig01']
    # 8x H100: both run and pass the catalog's H100 minimums (48 / 335 GB/s, 460 GB/s all-reduce).
    assert checks(hgx)['nvbandwidth'] == checks(hgx)['nccl_allreduce'] == 'pass', hgx['gpu_health']['checks']
    assert codes(hgx) == [] and hgx['gpu_health']['healthy'] is True
    # L40S: no published minimum; the A100 is in MIG mode. Neither runs, both say so, neither is unhealthy for it.
    for result, why in ((l40s, 'The catalog has no'), (mig, 'MIG is enabled')):
        assert codes(result) == ['acceptance_not_run', 'acceptance_not_run'] and result['gpu_health']['healthy']
        assert all(why in f['evidence'] for f in result['gpu_health']['findings']), result['gpu_health']['findings']

    # GPU 5 of the HGX copies from the host at 11 GB/s; GPU 2 returns wrong data in the all-reduce.
    host = fleet.hosts['hgx01']
    state = host.state()
    state.setdefault('gpus', {}).setdefault('5', {})['acceptance'] = {'h2d_gbps': 11.0}
    state['gpus'].setdefault('2', {})['acceptance'] = {'wrong_results': 3}
    host.write('var/lib/nvidia-sim/state.json', json.dumps(state))
    results, _stdout = fleet.play(host_vars={'hgx01': on})
    hgx = results['hgx01']['gpu_health']
    assert hgx['healthy'] is False and sorted(f['code'] for f in hgx['findings']) == [
        'nccl_allreduce_wrong_results', 'nvbandwidth_low']
    slow = [f for f in hgx['findings'] if f['code'] == 'nvbandwidth_low'][0]
    assert slow['gpu']['index'] == 5 and 'host_to_device_memcpy_ce 11 GB/s' in slow['evidence'], slow
    assert (slow['action'], slow['threshold']['value'], slow['threshold']['source']) == (
        'drain', 48, 'azurehpc-health-checks')
    report = json.loads((fleet.report_dir / 'gpu-health.json').read_text())
    assert set(['nvbandwidth_low', 'nccl_allreduce_wrong_results']) <= set(e['code'] for e in report['by_code'])

    # A job on GPU 1: the tests do not run on busy GPUs; nothing is judged, nothing passes.
    host.start_workload('--gpu', '1', '--memory', '2048')
    results, _stdout = fleet.play(host_vars={'hgx01': on})
    hgx = results['hgx01']['gpu_health']
    assert sorted(f['code'] for f in hgx['findings']) == ['acceptance_not_run', 'acceptance_not_run']
    assert all('GPU 1 runs processes' in f['evidence'] for f in hgx['findings']) and hgx['healthy'] is True
