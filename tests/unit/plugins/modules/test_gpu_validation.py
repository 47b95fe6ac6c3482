# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_validation with a mocked host: each case lists the binaries present and every command with its answer."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

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
        return answer


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
    assert [c['name'] for c in result['checks']] == ['driver', 'cdi', 'container', 'dcgm_diag', 'framework']
    assert checks['driver'] == ('pass', 'nvidia-smi answers: 2 GPUs, driver 570.195.03.')
    assert checks['cdi'] == ('skipped', 'The NVIDIA Container Toolkit is not installed (no nvidia-ctk).')
    assert checks['container'] == ('skipped', 'No image named (container_image).')
    assert checks['dcgm_diag'] == ('skipped', 'DCGM is not installed (no dcgmi).')
    assert checks['framework'][0] == 'skipped' and 'framework_image' in checks['framework'][1]
    assert result['passed'] is True and result['failed_checks'] == [] and result['changed'] is False
    assert result['lines'][0] == 'driver: pass - nvidia-smi answers: 2 GPUs, driver 570.195.03.'


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
    _result, checks = validate(monkeypatch, module_exits, {'cdi': False}, ['dcgmi'], [(DIAG, answer)])
    assert checks['dcgm_diag'] == ('fail', reason)
    assert checks['cdi'] == ('skipped', 'Turned off.')


def test_driver_failure_skips_what_needs_gpus(monkeypatch, module_exits):
    broken = {'gathered': ['gpus', 'mig'], 'gpus': [], 'driver': {'version': None},
              'failure': {'reason': 'driver_not_loaded', 'hint': 'The NVIDIA kernel driver is not loaded.'}}
    result, checks = validate(monkeypatch, module_exits, {'gpu_info': broken, 'container_image': 'cuda'},
                              ['nvidia-ctk', 'dcgmi', 'docker'], [])
    assert checks['driver'] == ('fail', 'nvidia-smi does not answer (driver_not_loaded): The NVIDIA kernel driver is '
                                        'not loaded.')
    assert all(status == 'skipped' for name, (status, _reason) in checks.items() if name != 'driver')
    assert result['failed_checks'] == ['driver']


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
