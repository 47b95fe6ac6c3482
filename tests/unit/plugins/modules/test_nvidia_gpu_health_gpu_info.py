# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_gpu_health judging the GPU records of a previous nvidia_smi_info call, and the expected_* options.

With ``gpu_info`` the module must run no ``nvidia-smi -q -x``: every command
it may run is listed in the script of each case, with its exact argv.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_xml
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.test_nvidia_gpu_health import (
    JOURNAL,
    JOURNAL_XID79,
    SMI_XML,
    TIMEOUT,
    codes,
    run_module,
    smi_xml,
)

SMI_LIST = TIMEOUT + ['/usr/bin/nvidia-smi', '-L']
QUIET = {'check_nvlink': 'never', 'kernel_log_source': 'none'}
A100_LIST = ('GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb200)\n' +
             ''.join('  MIG 1g.20gb     Device  %d: (UUID: MIG-0000000%d-7d19-5063-b049-1e69664bb298)\n' % (i, i)
                     for i in range(4)))


def gpu_info(*gpus, **overrides):
    """What nvidia_smi_info registers for ``smi_xml(*gpus)``: records without their MIG devices and processes."""
    report = parse_xml(smi_xml(*gpus))
    records, mig_devices = [], []
    for gpu in report['gpus']:
        gpu = copy.deepcopy(gpu)
        for device in gpu.pop('mig_devices'):
            mig_devices.append(dict(device, gpu_index=gpu['index'], gpu_uuid=gpu['uuid'], uuid=None, profile=None))
        gpu.pop('processes')
        records.append(gpu)
    info = {'changed': False, 'gathered': ['gpus', 'mig'], 'gpus': records, 'mig_devices': mig_devices,
            'gpu_count': len(records), 'failure': None, 'nvidia_smi_seconds': 0.25, 'nvidia_smi_warnings': [],
            'driver': {'version': report['driver_version'], 'branch': report['driver_version'].split('.', maxsplit=1)[0],
                       'cuda_version': report['cuda_version']}}
    info.update(overrides)
    return info


def test_records_of_nvidia_smi_info_are_judged_without_running_nvidia_smi(monkeypatch, module_exits):
    args = {'gpu_info': gpu_info({}, {'gpu_temp': '88 C'}), 'check_nvlink': 'never'}
    result, failed, host = run_module(monkeypatch, module_exits, args, [(JOURNAL, 0, JOURNAL_XID79, '')])
    assert not failed
    assert host.nvidia_smi_calls() == 0 and result['nvidia_smi_calls'] == 0
    assert codes(result) == ['xid_79', 'temperature_near_slowdown']
    assert result['driver_version'] == '535.54.03' and result['nvidia_smi_seconds'] == 0.25
    assert [gpu['index'] for gpu in result['gpus']] == [0, 1]


def test_failure_slowness_and_warnings_of_the_reading_are_findings(monkeypatch, module_exits):
    broken = gpu_info({}, gpus=[], gpu_count=0, nvidia_smi_seconds=0.1, failure={
        'reason': 'driver_not_loaded', 'hint': 'Load the driver.', 'pci_bus_id': None, 'cmd': 'nvidia-smi -q -x',
        'rc': 9})
    result, _failed, host = run_module(monkeypatch, module_exits, dict(QUIET, gpu_info=broken), [])
    assert host.calls == []
    assert codes(result) == ['nvidia_smi_driver_not_loaded'] and result['healthy'] is False
    slow = gpu_info({}, nvidia_smi_seconds=12.5, nvidia_smi_warnings=['WARNING: infoROM is corrupted at gpu 0000:01:00.0'])
    result, _failed, _host = run_module(monkeypatch, module_exits, dict(QUIET, gpu_info=slow), [])
    assert codes(result) == ['nvidia_smi_slow', 'nvidia_smi_warning']


def test_a_failed_later_call_of_nvidia_smi_info_keeps_the_records(monkeypatch, module_exits):
    partial = gpu_info({}, failure={'reason': 'not_supported', 'hint': 'Not supported.', 'pci_bus_id': None,
                                    'cmd': 'nvidia-smi topo -m', 'rc': 3})
    result, _failed, _host = run_module(monkeypatch, module_exits, dict(QUIET, gpu_info=partial), [])
    assert codes(result) == ['nvidia_smi_warning']
    assert 'nvidia-smi topo -m failed' in result['findings'][0]['evidence']


def test_gpu_info_without_gpus_is_refused(monkeypatch, module_exits):
    result, failed, _host = run_module(monkeypatch, module_exits,
                                       dict(QUIET, gpu_info={'gathered': ['topology'], 'topology': {}}), [])
    assert failed and 'gather containing gpus' in result['msg']


def test_expectations_of_model_driver_ecc_and_count(monkeypatch, module_exits):
    args = dict(QUIET, gpu_info=gpu_info({}, {}), expected_gpu_model='H100', expected_driver_branch='570',
                expected_ecc='disabled', expected_gpu_count=4)
    result, _failed, host = run_module(monkeypatch, module_exits, args, [])
    assert host.calls == []
    # Host-wide first, then per GPU.
    assert codes(result) == ['gpu_count_low', 'driver_branch_unexpected', 'ecc_mode_unexpected', 'gpu_model_unexpected',
                             'ecc_mode_unexpected', 'gpu_model_unexpected']
    matching = dict(QUIET, gpu_info=gpu_info({}, {}), expected_gpu_model='a100', expected_driver_branch='535.54',
                    expected_ecc='enabled', expected_gpu_count=2)
    result, _failed, _host = run_module(monkeypatch, module_exits, matching, [])
    assert codes(result) == [] and result['healthy'] is True


def test_mig_layout_read_with_nvidia_smi_list_when_the_profiles_are_unknown(monkeypatch, module_exits):
    layout = [{'gpus': ['0'], 'profiles': {'1g.20gb': 4}}]
    # From gpu_info gathered without mig_uuids: the module reads the profile names itself.
    result, _failed, host = run_module(monkeypatch, module_exits,
                                       dict(QUIET, gpu_info=gpu_info({}), expected_mig_layout=layout),
                                       [(SMI_LIST, 0, A100_LIST, '')])
    assert codes(result) == [] and result['nvidia_smi_calls'] == 1 and host.nvidia_smi_calls() == 1
    # Reading the GPUs itself: -q -x, then -L.
    other = [{'profiles': {'3g.40gb': 2}}]
    result, _failed, _host = run_module(monkeypatch, module_exits, dict(QUIET, expected_mig_layout=other),
                                        [(SMI_XML, 0, smi_xml({}), ''), (SMI_LIST, 0, A100_LIST, '')])
    assert codes(result) == ['mig_layout_unexpected'] and result['nvidia_smi_calls'] == 2
    assert result['findings'][0]['found'] == '1g.20gb x4'


def test_mig_layout_from_gpu_info_with_profile_names_costs_nothing(monkeypatch, module_exits):
    info = gpu_info({})
    for device in info['mig_devices']:
        device['profile'] = '1g.20gb'
    result, _failed, host = run_module(
        monkeypatch, module_exits,
        dict(QUIET, gpu_info=info, expected_mig_layout=[{'profiles': {'MIG 1g.20gb': 3}}]), [])
    assert host.calls == [] and codes(result) == ['mig_layout_unexpected']


def test_mig_layout_unknown_when_nvidia_smi_list_fails(monkeypatch, module_exits):
    result, _failed, _host = run_module(
        monkeypatch, module_exits, dict(QUIET, gpu_info=gpu_info({}), expected_mig_layout=[{'profiles': {'1g.20gb': 4}}]),
        [(SMI_LIST, 255, '', 'Unknown Error\n')])
    assert codes(result) == ['mig_layout_unknown']


def test_processes_listed_apart_are_put_back_on_their_gpu(monkeypatch, module_exits):
    """nvidia_smi_info returns processes in one flat list; a small one on an idle node is still work on a GPU."""
    info = gpu_info({}, {}, gathered=['gpus', 'mig', 'processes'], processes=[
        {'gpu_index': 1, 'gpu_uuid': 'GPU-1', 'pid': 4242, 'type': 'C', 'name': 'python3', 'used_memory_mib': 300,
         'gpu_instance_id': None, 'compute_instance_id': None}])
    result, _failed, host = run_module(monkeypatch, module_exits, dict(QUIET, gpu_info=info, node_idle=True), [])
    assert host.calls == []
    busy = [f for f in result['findings'] if f['code'] == 'gpu_busy_while_idle']
    assert [f['gpu']['index'] for f in busy] == [1] and 'python3 pid 4242' in busy[0]['evidence'], result['findings']
    # Not gathered: the records are judged as they are.
    plain = dict(QUIET, gpu_info=gpu_info({}, {}), node_idle=True)
    result, _failed, _host = run_module(monkeypatch, module_exits, plain, [])
    assert 'gpu_busy_while_idle' not in codes(result)
