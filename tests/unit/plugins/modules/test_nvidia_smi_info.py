# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_smi_info against a mocked run_command fed with real nvidia-smi outputs."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_smi_info
from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import set_module_args

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'module_utils', 'fixtures', 'nvidia_smi')
NVIDIA_SMI = '/usr/bin/nvidia-smi'
TIMEOUT = '/usr/bin/timeout'
BOUNDED = [TIMEOUT, '--kill-after=5', '30', NVIDIA_SMI]

DRIVER_NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
                     'the latest NVIDIA driver is installed and running.\n')

# nvidia-smi -L of the A100 in a100-sxm4-80gb_535_q.xml, written in the real
# -L format from that report's GPU UUID and its four 1g.20gb MIG devices.
A100_LIST = ('GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)\n' +
             ''.join('  MIG 1g.20gb     Device  %d: (UUID: MIG-0000000%d-7d19-5063-b049-1e69664bb298)\n' % (i, i)
                     for i in range(4)))


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


class Commands(object):
    """Plays the role of AnsibleModule.run_command: one scripted answer per expected argv."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = []

    def __call__(self, module, args, **kwargs):
        self.calls.append((args, kwargs))
        assert self.script, 'unexpected command %r' % (args,)
        expected, result = self.script.pop(0)
        assert args == BOUNDED + expected
        return result


@pytest.fixture
def run(monkeypatch, module_exits):
    """Run the module with ``args`` against a command script; return (result, commands, warnings)."""
    exit_json, fail_json = module_exits
    warnings = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {'nvidia-smi': NVIDIA_SMI, 'timeout': TIMEOUT}.get(name)

    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg: warnings.append(msg))

    def _run(args, script, expect_failure=False):
        commands = Commands(script)

        def run_command(module, args, **kwargs):
            return commands(module, args, **kwargs)

        monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
        with set_module_args(args):
            with pytest.raises(fail_json if expect_failure else exit_json) as raised:
                nvidia_smi_info.main()
        assert commands.script == [], 'commands not run: %r' % (commands.script,)
        return raised.value.result, commands, warnings
    return _run


def test_default_gather_is_one_xml_call_in_the_c_locale(run):
    result, commands, _warnings = run({}, [(['-q', '-x'], (0, fixture('a100-sxm4-80gb_535_q.xml'), ''))])
    assert len(commands.calls) == 1
    assert commands.calls[0][1]['environ_update'] == {'LC_ALL': 'C', 'LANG': 'C'}
    assert result['changed'] is False
    assert result['driver'] == {'version': '535.54.03', 'branch': '535', 'cuda_version': '12.2'}
    assert result['gpu_count'] == 1
    assert result['product'] == 'NVIDIA A100-SXM4-80GB'
    assert result['memory_mib'] == 81920
    assert result['mig_capable'] is True
    assert result['mig_enabled'] is True
    assert result['gathered'] == ['gpus', 'mig']
    assert result['failure'] is None
    assert result['gpus'][0]['serial'] == '1650522003820'
    assert 'mig_devices' not in result['gpus'][0] and 'processes' not in result['gpus'][0]
    assert [(d['gpu_index'], d['index'], d['gpu_instance_id']) for d in result['mig_devices']] == [
        (0, 0, 3), (0, 1, 4), (0, 2, 5), (0, 3, 6)]
    assert result['mig_devices'][0]['uuid'] is None
    assert 'processes' not in result and 'topology' not in result and 'nvlink' not in result
    # An _info module returns data; it sets no facts.
    assert 'ansible_facts' not in result
    gpu = result['gpus'][0]
    assert (gpu['persistence_mode'], gpu['mig_mode_current'], gpu['ecc_mode_current']) == (False, True, True)
    assert gpu['pci_bus_id'] == '0000:01:00.0'
    assert gpu['power']['limit_w'] == 500.0 and isinstance(gpu['power']['limit_w'], float)


def test_check_mode_gathers_the_same_facts(run):
    result, commands, _warnings = run({'_ansible_check_mode': True},
                                      [(['-q', '-x'], (0, fixture('tesla-t4_515_q.xml'), ''))])
    assert len(commands.calls) == 1
    assert result['changed'] is False
    assert result['gpus'][0]['name'] == 'Tesla T4'
    assert result['mig_capable'] is False
    assert result['mig_devices'] == []


def test_processes_come_from_the_same_single_call(run):
    result, commands, _warnings = run({'gather': ['gpus', 'processes']},
                                      [(['-q', '-x'], (0, fixture('tesla-t4_515_q.xml'), ''))])
    assert len(commands.calls) == 1
    assert [(p['gpu_index'], p['pid'], p['type']) for p in result['processes']] == [(0, 675, 'G'), (0, 5762, 'C')]
    assert result['processes'][1]['gpu_uuid'] == 'GPU-d37e67a5-91dd-3774-a5cb-99096249601a'
    assert 'mig_devices' not in result


def test_gather_everything_runs_each_command_once(run):
    result, commands, _warnings = run(
        {'gather': ['gpus', 'mig', 'mig_uuids', 'processes', 'topology', 'nvlink'], 'timeout': 30},
        [(['-q', '-x'], (0, fixture('a100-sxm4-80gb_535_q.xml'), '')),
         (['-L'], (0, A100_LIST, '')),
         (['topo', '-m'], (0, fixture('a100-sxm4-40gb_unknown_topo.txt'), '')),
         (['nvlink', '-s'], (0, fixture('tesla-v100-sxm2-32gb_580_nvlink.txt'), ''))])
    assert len(commands.calls) == 4
    assert [(d['index'], d['gpu_instance_id'], d['profile'], d['uuid']) for d in result['mig_devices']] == [
        (i, i + 3, '1g.20gb', 'MIG-0000000%d-7d19-5063-b049-1e69664bb298' % i) for i in range(4)]
    assert result['topology']['gpus'][0]['links']['GPU1'] == 'NV12'
    assert len(result['nvlink']) == 8
    assert result['processes'] == []


def test_mig_uuids_alone_lists_mig_devices_without_the_xml_report(run):
    result, commands, _warnings = run({'gather': ['mig_uuids']},
                                      [(['-L'], (0, fixture('dgx-station-a100-80gb_unknown_list.txt'), ''))])
    assert len(commands.calls) == 1
    assert len(result['mig_devices']) == 7
    assert result['mig_devices'][0]['profile'] == '1g.10gb'
    assert result['mig_devices'][0]['gpu_uuid'] == 'GPU-9434a402-0d94-4ef8-93d0-0528ee662e9c'
    assert result['mig_devices'][0]['gpu_instance_id'] is None
    assert result['driver']['version'] is None
    assert result['gpu_count'] is None


def test_topology_alone_does_not_query_the_gpus(run):
    result, commands, _warnings = run({'gather': ['topology']},
                                      [(['topo', '-m'], (0, fixture('titan-v_unknown_topo.txt'), ''))])
    assert len(commands.calls) == 1
    assert len(result['topology']['gpus']) == 8
    assert 'gpus' not in result


def test_driver_not_loaded_fails_with_reason_and_hint(run):
    result, _commands, _warnings = run({}, [(['-q', '-x'], (9, DRIVER_NOT_LOADED, ''))], expect_failure=True)
    assert result['reason'] == 'driver_not_loaded'
    assert 'modprobe nvidia' in result['msg']
    assert result['rc'] == 9
    assert result['cmd'] == 'nvidia-smi -q -x'
    assert result['stdout'] == DRIVER_NOT_LOADED


def test_driver_not_loaded_without_fail_on_error_returns_empty_facts(run):
    result, commands, _warnings = run({'fail_on_error': False, 'gather': ['gpus', 'mig', 'topology']},
                                      [(['-q', '-x'], (9, DRIVER_NOT_LOADED, ''))])
    assert len(commands.calls) == 1, 'no further nvidia-smi call after the driver failed'
    assert 'failed' not in result
    assert result['gpus'] == [] and result['mig_devices'] == [] and result['gpu_count'] == 0
    assert result['topology'] == {'devices': [], 'gpus': [], 'nics': []}
    assert result['failure'] == {'reason': 'driver_not_loaded', 'hint': result['failure']['hint'], 'pci_bus_id': None,
                                 'cmd': 'nvidia-smi -q -x', 'rc': 9}
    assert 'ansible_facts' not in result


def test_a_failure_naming_a_gpu_carries_its_bus_id(run):
    stdout = 'Unable to determine the device handle for GPU0000:07:00.0: GPU requires reset\n'
    result, _commands, _warnings = run({'fail_on_error': False}, [(['-q', '-x'], (255, stdout, ''))])
    assert (result['failure']['reason'], result['failure']['pci_bus_id']) == ('gpu_requires_reset', '0000:07:00.0')
    failed, _commands, _warnings = run({}, [(['-q', '-x'], (255, stdout, ''))], expect_failure=True)
    assert (failed['reason'], failed['pci_bus_id']) == ('gpu_requires_reset', '0000:07:00.0')


def test_failure_after_the_report_keeps_the_gpu_facts(run):
    result, commands, _warnings = run(
        {'fail_on_error': False, 'gather': ['gpus', 'topology', 'nvlink']},
        [(['-q', '-x'], (0, fixture('tesla-t4_515_q.xml'), '')),
         (['topo', '-m'], (3, 'Topology is not supported in this virtual machine\n', ''))])
    assert len(commands.calls) == 2
    assert result['gpu_count'] == 1
    assert result['failure']['reason'] == 'not_supported'
    assert result['topology']['gpus'] == [] and result['nvlink'] == []


@pytest.mark.parametrize('rc, stdout, reason', [
    (6, 'No devices were found\n', 'no_devices'),
    (0, 'No devices were found\n', 'no_devices'),
    (0, '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>550.54.15</driver_version>\n'
        '<attached_gpus>0</attached_gpus>\n</nvidia_smi_log>\n', 'no_devices'),
    (18, 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.126\n',
     'version_mismatch'),
    (124, '', 'timeout'),
    (0, 'Segmentation fault (core dumped)\n\x00\x01garbage', 'unparsable_output'),
    (0, '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<gpu id="00000000:01:00.0">\n', 'unparsable_output'),
])
def test_failures_are_classified_without_traceback(run, rc, stdout, reason):
    result, _commands, _warnings = run({}, [(['-q', '-x'], (rc, stdout, ''))], expect_failure=True)
    assert result['reason'] == reason
    assert result['msg']
    assert 'Traceback' not in str(result)


def test_unparsable_output_is_truncated_in_the_failure(run):
    garbage = 'x' * 20000
    result, _commands, _warnings = run({}, [(['-q', '-x'], (0, garbage, ''))], expect_failure=True)
    assert result['reason'] == 'unparsable_output'
    assert len(result['stdout']) < 9000


def test_missing_nvidia_smi_is_not_installed(run, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, required=False, opt_dirs=None: TIMEOUT if name == 'timeout' else None)
    result, commands, _warnings = run({'fail_on_error': False}, [])
    assert commands.calls == []
    assert result['failure']['reason'] == 'not_installed'
    assert result['gpus'] == []


def test_warnings_before_the_report_are_passed_on(run):
    text = 'WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n' + fixture('tesla-t4_515_q.xml')
    result, _commands, warnings = run({}, [(['-q', '-x'], (0, text, ''))])
    assert result['gpu_count'] == 1
    assert warnings == ['nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:00:1E.0']


def test_unknown_gather_choice_is_rejected(run):
    result, commands, _warnings = run({'gather': ['gpus', 'bogus']}, [], expect_failure=True)
    assert commands.calls == []
    assert 'bogus' in result['msg']
