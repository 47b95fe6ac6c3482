# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_validation with a mocked host: each case lists the binaries present and every command with its answer."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.modules import gpu_validation
from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import set_module_args

BOUND = ['/usr/bin/timeout', '--kill-after=5', '120']
UUIDS = ['GPU-2e82308d-2e7d-5512-80ac-7f0cca15fd1f', 'GPU-a112006b-f951-e077-a08d-19c1f74db127']
INFO = {'gathered': ['gpus', 'mig'], 'failure': None, 'driver': {'version': '570.195.03'},
        'gpus': [{'index': i, 'uuid': uuid, 'mig_mode_current': None} for i, uuid in enumerate(UUIDS)]}
CDI_LIST = ('time="2026-01-01T00:00:00Z" level=info msg="Found 5 CDI devices"\nnvidia.com/gpu=0\nnvidia.com/gpu=1\n'
            + ''.join('nvidia.com/gpu=%s\n' % uuid for uuid in UUIDS) + 'nvidia.com/gpu=all\n')
SMI_LIST = ''.join('GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s)\n' % (i, uuid) for i, uuid in enumerate(UUIDS))


def dcgm4(failed=None):
    tests = []
    for name in ('software', 'pcie', 'memory'):
        fail = name == failed
        results = [{'entity_id': i, 'status': 'Fail' if fail and i == 1 else 'Pass'} for i in range(2)]
        if fail:
            results[1]['warnings'] = [{'warning': 'GPU 1 had uncorrectable memory errors', 'error_id': 95}]
        tests.append({'name': name, 'test_summary': {'status': 'Fail' if fail else 'Pass'}, 'results': results})
    return json.dumps({'DCGM Diagnostic': {'test_categories': [{'category': 'Deployment', 'tests': tests}]},
                       'metadata': {'version': '4.4.2'}})


DCGM3 = json.dumps({'DCGM GPU Diagnostic': {'test_categories': [{'category': 'Deployment', 'tests': [
    {'name': 'Denylist', 'results': [{'status': 'Pass'}]},
    {'name': 'Persistence Mode', 'results': [{'status': 'Fail', 'warnings': ['Persistence mode for GPU 0 is disabled.']}]},
]}]}})
DIAG = ['/usr/bin/dcgmi', 'diag', '--host', '127.0.0.1:5570', '--run', '1', '--json']
FRAMEWORK_OK = 'noise\n{"torch": "2.5.1", "cuda": "12.4", "available": true, "count": 2}\n'


class FakeHost(object):

    def __init__(self, binaries, script):
        self.binaries = set(binaries) | {'timeout'}
        self.script = list(script)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/bin/%s' % name if name in self.binaries else None

    def run_command(self, args, **kwargs):
        assert self.script, 'unexpected command %r' % (args,)
        expected, answer = self.script.pop(0)
        assert list(args) == BOUND + expected
        assert kwargs['environ_update']['LC_ALL'] == 'C'
        self.environ.append(kwargs['environ_update'])
        return answer

    environ = []


def validate(monkeypatch, module_exits, args, binaries, script, exists=()):
    exit_json, _fail_json = module_exits
    host = FakeHost(binaries, script)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', host.get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', host.run_command)
    monkeypatch.setattr(gpu_validation.os.path, 'exists', lambda path: path in exists)
    with pytest.raises(exit_json) as caught:
        with set_module_args(dict({'gpu_info': INFO, 'dcgm_host': '127.0.0.1:5570'}, **args)):
            gpu_validation.main()
    assert host.script == [], 'commands not run: %r' % host.script
    result = caught.value.result
    return result, dict((check['name'], (check['status'], check['reason'])) for check in result['checks'])


def test_nothing_installed_skips_with_reasons(monkeypatch, module_exits):
    result, checks = validate(monkeypatch, module_exits, {}, [], [])
    assert [c['name'] for c in result['checks']] == ['driver', 'cdi', 'container', 'dcgm_diag', 'framework',
                                                     'nvbandwidth', 'nccl_allreduce']
    assert checks['driver'] == ('pass', 'nvidia-smi answers: 2 GPUs, driver 570.195.03.')
    assert checks['cdi'] == ('skipped', 'The NVIDIA Container Toolkit is not installed (no nvidia-ctk).')
    assert checks['container'] == ('skipped', 'No image named (container_image).')
    assert checks['dcgm_diag'] == ('skipped', 'DCGM is not installed (no dcgmi).')
    assert checks['framework'][0] == 'skipped' and 'framework_image' in checks['framework'][1]
    assert checks['nvbandwidth'] == checks['nccl_allreduce'] == ('skipped', 'Turned off.')
    assert result['passed'] is True and result['failed_checks'] == [] and result['changed'] is False
    assert result['lines'][0] == 'driver: pass - nvidia-smi answers: 2 GPUs, driver 570.195.03.'
    # The acceptance test that is on and did not run says so, as information: never a pass. Those turned off
    # say nothing.
    assert result['findings'] == [{
        'code': 'acceptance_not_run', 'severity': 'info', 'action': 'none', 'source': 'gpufleet', 'gpu': None,
        'check': 'dcgm_diag', 'evidence': 'dcgm_diag not run: DCGM is not installed (no dcgmi).',
        'advice': gpu_validation.ADVICE['acceptance_not_run']}]


def test_everything_passes(monkeypatch, module_exits):
    image = 'nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04'
    result, checks = validate(
        monkeypatch, module_exits,
        {'container_image': image, 'framework_virtualenv': '/opt/torch'}, ['nvidia-ctk', 'dcgmi', 'docker'],
        [(['/usr/bin/nvidia-ctk', 'cdi', 'list'], (0, CDI_LIST, '')),
         (['/usr/bin/docker', 'run', '--rm', '--runtime=nvidia', '-e', 'NVIDIA_VISIBLE_DEVICES=all', image,
           'nvidia-smi', '-L'], (0, SMI_LIST, '')),
         (DIAG, (0, dcgm4(), '')),
         (['/opt/torch/bin/python', '-c', gpu_validation.FRAMEWORK_SCRIPT], (0, FRAMEWORK_OK, ''))],
        exists=('/opt/torch/bin/python',))
    assert result['passed'] is True, checks
    assert checks['cdi'][1] == 'The CDI specification names all 2 GPUs (nvidia.com/gpu).'
    assert checks['dcgm_diag'][1] == 'DCGM diagnostic level 1 passed: software, pcie, memory.'
    assert checks['framework'][1] == 'PyTorch 2.5.1 (CUDA 12.4) in /opt/torch sees 2 GPU devices.'


def test_failures_say_what_is_wrong(monkeypatch, module_exits):
    stale = CDI_LIST.replace(UUIDS[1], 'GPU-00000000-dead-beef-0000-000000000000')
    result, checks = validate(
        monkeypatch, module_exits, {'container_image': 'cuda', 'container_engine': 'podman', 'framework_image': 'torch'},
        ['nvidia-ctk', 'dcgmi', 'podman', 'docker'],
        [(['/usr/bin/nvidia-ctk', 'cdi', 'list'], (0, stale, '')),
         (['/usr/bin/podman', 'run', '--rm', '--device', 'nvidia.com/gpu=all', '--security-opt=label=disable', 'cuda',
           'nvidia-smi', '-L'], (0, SMI_LIST.splitlines()[0] + '\n', '')),
         (DIAG, (226, dcgm4('memory'), '')),
         (['/usr/bin/podman', 'run', '--rm', '--device', 'nvidia.com/gpu=all', '--security-opt=label=disable', 'torch',
           'python3', '-c', gpu_validation.FRAMEWORK_SCRIPT],
          (0, '{"torch": "2.5.1", "cuda": "12.4", "available": false, "count": 0}\n', ''))])
    assert result['failed_checks'] == ['cdi', 'container', 'dcgm_diag', 'framework'] and result['passed'] is False
    assert [(f['code'], f['severity'], f['action'], f['check']) for f in result['findings']] == [
        ('dcgm_diag_failed', 'critical', 'drain', 'dcgm_diag')]
    assert 'does not name %s' % UUIDS[1] in checks['cdi'][1]
    assert 'GPU-00000000-dead-beef-0000-000000000000' in checks['cdi'][1]
    assert checks['container'][1].startswith('A container of cuda sees 1 of 2 GPUs; missing: %s' % UUIDS[1])
    assert checks['dcgm_diag'][1] == 'DCGM diagnostic level 1 failed: memory (GPU 1 had uncorrectable memory errors)'
    assert 'is_available() is False' in checks['framework'][1]


@pytest.mark.parametrize('answer, reason', [
    ((235, 'Error: unable to establish a connection to the specified host: 127.0.0.1:5570\n', ''),
     'dcgmi diag failed with rc 235: Error: unable to establish a connection to the specified host: 127.0.0.1:5570'),
    ((124, '', ''), 'dcgmi diag --run 1 did not finish within 120 s.'),
    # dcgmi ignoring SIGTERM (wedged): killed after the grace period, with timeout itself.
    ((-9, '', ''), 'dcgmi diag --run 1 did not finish within 120 s.'),
    ((226, DCGM3, ''), 'DCGM diagnostic level 1 failed: Persistence Mode (Persistence mode for GPU 0 is disabled.)'),
    ((0, '{}', ''), 'dcgmi diag (rc 0) reported no test result.'),
])
def test_dcgm_diag_failures(monkeypatch, module_exits, answer, reason):
    result, checks = validate(monkeypatch, module_exits, {'cdi': False}, ['dcgmi'], [(DIAG, answer)])
    assert checks['dcgm_diag'] == ('fail', reason)
    assert checks['cdi'] == ('skipped', 'Turned off.')
    # A failed test of the diagnostic, or a diagnostic that did not complete.
    code = 'dcgm_diag_failed' if 'failed:' in reason else 'acceptance_failed'
    assert [(f['code'], f['severity']) for f in result['findings']] == [(code, 'critical')]
    assert reason in result['findings'][0]['evidence']


def test_driver_failure_skips_what_needs_gpus(monkeypatch, module_exits):
    broken = {'gathered': ['gpus', 'mig'], 'gpus': [], 'driver': {'version': None},
              'failure': {'reason': 'driver_not_loaded', 'hint': 'The NVIDIA kernel driver is not loaded.'}}
    result, checks = validate(monkeypatch, module_exits, {'gpu_info': broken, 'container_image': 'cuda'},
                              ['nvidia-ctk', 'dcgmi', 'docker'], [])
    assert checks['driver'] == ('fail', 'nvidia-smi does not answer (driver_not_loaded): The NVIDIA kernel driver is '
                                        'not loaded.')
    assert all(status == 'skipped' for name, (status, _reason) in checks.items() if name != 'driver')
    assert result['failed_checks'] == ['driver']
    assert [(f['code'], f['check']) for f in result['findings']] == [('acceptance_not_run', 'dcgm_diag')]


def test_check_mode_starts_no_container_and_cdi_by_index(monkeypatch, module_exits):
    by_index = 'nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all\n'
    _result, checks = validate(
        monkeypatch, module_exits, {'_ansible_check_mode': True, 'container_image': 'cuda', 'dcgm_diag': False,
                                    'framework_image': 'torch'},
        ['nvidia-ctk', 'docker'], [(['/usr/bin/nvidia-ctk', 'cdi', 'list'], (0, by_index, ''))])
    assert checks['cdi'][0] == 'pass'
    assert checks['container'] == ('skipped', 'Check mode starts no container.')
    assert checks['framework'] == ('skipped', 'Check mode starts no container.')


def test_missing_virtualenv_and_missing_engine_are_skipped(monkeypatch, module_exits):
    _result, checks = validate(monkeypatch, module_exits,
                               {'cdi': False, 'dcgm_diag': False, 'container_image': 'cuda',
                                'framework_virtualenv': '/opt/none'}, [], [])
    assert checks['container'] == ('skipped', 'No container engine is installed (docker, podman, nerdctl).')
    assert checks['framework'] == ('skipped', 'The virtualenv /opt/none is not on this host.')


def test_dcgm_tests_reads_both_layouts():
    assert [t['status'] for t in gpu_validation.dcgm_tests(json.loads(dcgm4('pcie')))] == ['pass', 'fail', 'pass']
    assert gpu_validation.dcgm_tests(json.loads(DCGM3))[1] == {
        'name': 'Persistence Mode', 'status': 'fail', 'message': 'Persistence mode for GPU 0 is disabled.'}
    assert gpu_validation.dcgm_tests([]) == []


# ------------------------------------------------------------------ acceptance tests

FIXTURES = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures', 'acceptance')
HGX = {'gathered': ['gpus', 'mig'], 'failure': None, 'driver': {'version': '570.195.03'},
       'gpus': [{'index': i, 'uuid': 'GPU-%08d-0000-0000-0000-000000000000' % i, 'pci_bus_id': '00000000:%02X:00.0' % i,
                 'name': 'NVIDIA H100 80GB HBM3', 'memory_total_mib': 81559, 'mig_mode_current': None,
                 'processes': []} for i in range(8)]}
NVB = ['/usr/bin/nvbandwidth', '-t', 'host_to_device_memcpy_ce', 'device_to_host_memcpy_ce',
       'device_to_device_memcpy_read_ce', '-i', '10']
ALLREDUCE = ['/usr/bin/all_reduce_perf', '-b', '16G', '-e', '16G', '-f', '2', '-g', '8', '-c', '1']
ONLY = {'gpu_info': HGX, 'cdi': False, 'container': False, 'dcgm_diag': False, 'framework': False}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def acceptance(monkeypatch, module_exits, args, binaries, script, exists=()):
    FakeHost.environ = []
    result, checks = validate(monkeypatch, module_exits, dict(ONLY, **args), binaries, script, exists)
    # nvidia-smi's indices: CUDA told to number the GPUs in PCI order.
    assert all(env.get('CUDA_DEVICE_ORDER') == 'PCI_BUS_ID' for env in FakeHost.environ)
    return result, checks


def test_acceptance_tests_pass_against_the_h100_minimums(monkeypatch, module_exits):
    result, checks = acceptance(monkeypatch, module_exits, {'nvbandwidth': True, 'nccl_allreduce': True},
                                ['nvbandwidth', 'all_reduce_perf'],
                                [(NVB, (0, fixture('nvbandwidth-composed-h100-8gpu.txt'), '')),
                                 (ALLREDUCE, (0, fixture('all_reduce_perf-composed-h100-8gpu.txt'), ''))])
    assert result['passed'] is True and result['findings'] == [], result['findings']
    assert checks['nvbandwidth'][0] == 'pass' and 'minimums: host 48, peer 335 GB/s' in checks['nvbandwidth'][1]
    assert checks['nccl_allreduce'] == ('pass', 'NCCL all_reduce_perf over 8 GPUs at 16G: average bus bandwidth '
                                                '473.425 GB/s (minimum 460, azurehpc-health-checks).')


def test_slow_bandwidth_and_wrong_results_fail_with_findings(monkeypatch, module_exits):
    nvb = fixture('nvbandwidth-composed-h100-8gpu.txt').replace('55.09', '12.10')  # H2D of GPU 4
    nccl = fixture('all_reduce_perf-composed-h100-8gpu.txt').replace(
        'Out of bounds values : 0 OK', 'Out of bounds values : 2 FAILED').replace(': 473.425', ': 401.2')
    result, checks = acceptance(monkeypatch, module_exits, {'nvbandwidth': True, 'nccl_allreduce': True},
                                ['nvbandwidth', 'all_reduce_perf'], [(NVB, (0, nvb, '')), (ALLREDUCE, (1, nccl, ''))])
    assert result['failed_checks'] == ['nvbandwidth', 'nccl_allreduce']
    findings = dict((f['code'], f) for f in result['findings'])
    assert sorted(findings) == ['nccl_allreduce_low', 'nccl_allreduce_wrong_results', 'nvbandwidth_low']
    slow = findings['nvbandwidth_low']
    assert slow['gpu']['index'] == 4 and slow['evidence'] == (
        'nvbandwidth on GPU 4: host_to_device_memcpy_ce 12.1 GB/s (minimum 48 GB/s).')
    assert slow['threshold'] == {'name': 'nvbandwidth_host_device_gbps_min', 'value': 48,
                                 'source': 'azurehpc-health-checks'}
    assert (slow['severity'], slow['action'], slow['source'], slow['check']) == (
        'critical', 'drain', 'azurehpc-health-checks', 'nvbandwidth')
    assert findings['nccl_allreduce_low']['threshold']['value'] == 460
    assert findings['nccl_allreduce_wrong_results']['source'] == 'nccl-tests'
    assert checks['nccl_allreduce'][1] == ('NCCL all_reduce_perf over 8 GPUs at 16G: average bus bandwidth 401.2 '
                                           'GB/s: 2 wrong result elements; below 460 GB/s.')


def test_a_pair_without_peer_access_is_a_finding_on_the_reading_gpu(monkeypatch, module_exits):
    lines = fixture('nvbandwidth-composed-h100-8gpu.txt').splitlines(True)
    row = lines.index('Running device_to_device_memcpy_read_ce.\n') + 3 + 2
    cells = lines[row].split()
    cells[1 + 5] = 'N/A'
    lines[row] = cells[0].rjust(2) + ''.join('%10s' % cell for cell in cells[1:]) + '\n'
    result, checks = acceptance(monkeypatch, module_exits, {'nvbandwidth': True}, ['nvbandwidth'],
                                [(NVB, (0, ''.join(lines), ''))])
    assert checks['nvbandwidth'][0] == 'fail'
    assert [(f['code'], f['gpu']['index'], f['evidence']) for f in result['findings']] == [
        ('nvbandwidth_low', 2, 'nvbandwidth device_to_device_memcpy_read_ce from GPU 2: GPU 5 N/A (not measured) '
                               '(minimum 335 GB/s).')]


@pytest.mark.parametrize('answer, reason', [
    ((124, '', ''), 'nvbandwidth did not finish within 120 s.'),
    ((1, '', 'CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n'),
     'nvbandwidth (rc 1) ran no test: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected'),
    ((0, 'Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n0 x y\n', ''),
     'unexpected nvbandwidth output (\'x\' is neither a number nor N/A).'),
])
def test_nvbandwidth_that_does_not_complete(monkeypatch, module_exits, answer, reason):
    result, checks = acceptance(monkeypatch, module_exits, {'nvbandwidth': True}, ['nvbandwidth'], [(NVB, answer)])
    assert checks['nvbandwidth'] == ('fail', reason)
    assert [(f['code'], f['severity'], f['action']) for f in result['findings']] == [
        ('acceptance_failed', 'critical', 'drain')]


@pytest.mark.parametrize('answer, reason', [
    ((124, '', ''), 'all_reduce_perf did not finish within 120 s.'),
    ((1, '# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184\n',
      'all_reduce_perf: common.cu:1037 NCCL failure\n'),
     'all_reduce_perf (rc 1) printed no result: all_reduce_perf: common.cu:1037 NCCL failure'),
])
def test_all_reduce_that_does_not_complete(monkeypatch, module_exits, answer, reason):
    result, checks = acceptance(monkeypatch, module_exits, {'nccl_allreduce': True}, ['all_reduce_perf'],
                                [(ALLREDUCE, answer)])
    assert checks['nccl_allreduce'] == ('fail', reason)
    assert [f['code'] for f in result['findings']] == ['acceptance_failed']


def _gpus(**change):
    return dict(HGX, gpus=[dict(gpu, **change) for gpu in HGX['gpus']])


@pytest.mark.parametrize('args, binaries, exists, nvbandwidth, nccl', [
    # No program.
    ({}, [], (), 'nvbandwidth is not installed (not on the PATH; or set nvbandwidth_path).',
     'all_reduce_perf is not installed (not on the PATH; or set nccl_allreduce_path).'),
    ({'nvbandwidth_path': '/opt/nvb/nvbandwidth', 'nccl_allreduce_path': '/opt/nccl-tests/all_reduce_perf'}, [], (),
     '/opt/nvb/nvbandwidth is not on this host (nvbandwidth_path).',
     '/opt/nccl-tests/all_reduce_perf is not on this host (nccl_allreduce_path).'),
    # GPUs in use, or in MIG mode.
    ({'gpu_info': dict(HGX, gpus=[dict(g, processes=[{'pid': 7}] if g['index'] == 3 else []) for g in HGX['gpus']])},
     ['nvbandwidth', 'all_reduce_perf'], (), 'GPU 3 runs processes; the test needs idle GPUs.',
     'GPU 3 runs processes; the test needs idle GPUs.'),
    ({'gpu_info': _gpus(mig_mode_current=True)}, ['nvbandwidth', 'all_reduce_perf'], (),
     'MIG is enabled; the test measures whole GPUs.', 'MIG is enabled; the test measures whole GPUs.'),
    # No minimum in the catalog for the model, and an all-reduce minimum measured on another GPU count.
    ({'gpu_info': _gpus(name='NVIDIA L40S')}, ['nvbandwidth', 'all_reduce_perf'], (),
     'The catalog has no minimum for NVIDIA L40S: set health_thresholds.nvbandwidth_host_device_gbps_min (and '
     'nvbandwidth_peer_gbps_min).',
     'The catalog has no all-reduce minimum for NVIDIA L40S: set health_thresholds.nccl_allreduce_busbw_gbps_min.'),
    ({'gpu_info': dict(HGX, gpus=HGX['gpus'][:4]), 'nvbandwidth': False}, ['all_reduce_perf'], (), 'Turned off.',
     'The catalog\'s minimum for NVIDIA H100 80GB HBM3 was measured on 8 GPUs and this node has 4: set '
     'health_thresholds.nccl_allreduce_busbw_gbps_min for it.'),
    # No GPU answers.
    ({'gpu_info': {'gathered': ['gpus'], 'gpus': [], 'driver': {},
                   'failure': {'reason': 'driver_not_loaded', 'hint': 'Not loaded.'}}},
     ['nvbandwidth', 'all_reduce_perf'], (), 'The driver does not answer, so the GPUs cannot be compared.',
     'The driver does not answer, so the GPUs cannot be compared.'),
])
def test_acceptance_tests_that_do_not_run_say_so_and_never_pass(monkeypatch, module_exits, args, binaries, exists,
                                                                nvbandwidth, nccl):
    args = dict({'nvbandwidth': True, 'nccl_allreduce': True}, **args)
    result, checks = acceptance(monkeypatch, module_exits, args, binaries, [], exists)
    assert checks['nvbandwidth'] == ('skipped', nvbandwidth)
    assert checks['nccl_allreduce'] == ('skipped', nccl)
    expected = [('nvbandwidth', nvbandwidth)] if args['nvbandwidth'] else []
    assert [(f['code'], f['severity'], f['action'], f['check'], f['evidence']) for f in result['findings']] == [
        ('acceptance_not_run', 'info', 'none', name, '%s not run: %s' % (name, reason))
        for name, reason in expected + [('nccl_allreduce', nccl)]]
    assert 'pass' not in (checks['nvbandwidth'][0], checks['nccl_allreduce'][0])


def test_inventory_minimums_apply_on_any_gpu_count_and_the_size_is_chosen(monkeypatch, module_exits):
    four = dict(HGX, gpus=[dict(g, memory_total_mib=40960) for g in HGX['gpus'][:4]])
    argv = ['/opt/nt/all_reduce_perf', '-b', '8G', '-e', '8G', '-f', '2', '-g', '4', '-c', '1']
    text = fixture('all_reduce_perf-composed-h100-8gpu.txt').replace('nGpus 8', 'nGpus 4')
    result, checks = acceptance(
        monkeypatch, module_exits,
        {'gpu_info': four, 'nccl_allreduce': True, 'nccl_allreduce_path': '/opt/nt/all_reduce_perf',
         'thresholds': {'nccl_allreduce_busbw_gbps_min': {'H100': 500}}},
        [], [(argv, (0, text, ''))], exists=('/opt/nt/all_reduce_perf',))
    assert checks['nccl_allreduce'][0] == 'fail'
    assert result['findings'][0]['threshold'] == {'name': 'nccl_allreduce_busbw_gbps_min', 'value': 500,
                                                  'source': 'inventory'}


def test_all_reduce_on_fewer_gpus_than_the_node_has_fails(monkeypatch, module_exits):
    text = fixture('all_reduce_perf-composed-h100-8gpu.txt').replace('nGpus 8', 'nGpus 6')
    _result, checks = acceptance(monkeypatch, module_exits, {'nccl_allreduce': True}, ['all_reduce_perf'],
                                 [(ALLREDUCE, (0, text, ''))])
    assert checks['nccl_allreduce'] == ('fail', 'all_reduce_perf ran on 6 of the 8 GPUs.')


@pytest.mark.parametrize('args, message', [
    ({'nccl_allreduce_size': '16GB'}, "nccl_allreduce_size: '16GB' is not a size such as 8G, 512M or a number of "
                                      "bytes, or auto"),
    ({'thresholds': {'nvbandwidth_peer_gbps_min': {'H300': 1}}},
     "health_thresholds.nvbandwidth_peer_gbps_min: unknown GPU model 'H300'"),
])
def test_bad_inputs_fail_by_name(monkeypatch, module_exits, args, message):
    _exit_json, fail_json = module_exits
    with pytest.raises(fail_json) as caught:
        with set_module_args(dict({'gpu_info': HGX}, **args)):
            gpu_validation.main()
    assert message in caught.value.result['msg']
