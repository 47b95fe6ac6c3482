# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.nvidia_smi with a table of expected nvidia-smi calls and canned answers."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_smi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_settings import QUERY_FIELDS
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.nvidia_smi_command_table import run_module

QUERY = ['--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits']

A100_0 = dict(index='0', uuid='GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763', bus='00000000:07:00.0',
              name='NVIDIA A100-SXM4-80GB', pm='Disabled', cm='Default', pl='400.00', plmin='100.00', plmax='400.00',
              acm='1593', acg='1410', dacm='1593', dacg='1275', ecc='Enabled', eccp='Enabled',
              mig='Disabled', migp='Disabled')
A100_1 = dict(A100_0, index='1', uuid='GPU-3c81b7de-0c1f-5f5e-6d2a-7a9be0c1d2e3', bus='00000000:0F:00.0')
T4 = dict(index='0', uuid='GPU-1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b', bus='00000000:3B:00.0', name='Tesla T4',
          pm='Enabled', cm='Default', pl='70.00', plmin='60.00', plmax='70.00', acm='5001', acg='1590', dacm='5001',
          dacg='585', ecc='Enabled', eccp='Enabled', mig='[N/A]', migp='[N/A]')
LAPTOP = dict(index='0', uuid='GPU-5b8f4e2a-9c1d-4e3f-8a7b-6c5d4e3f2a1b', bus='00000000:01:00.0',
              name='NVIDIA GeForce RTX 3050 Laptop GPU', pm='Disabled', cm='Default', pl='[N/A]', plmin='[N/A]',
              plmax='[N/A]', acm='[N/A]', acg='[N/A]', dacm='[N/A]', dacg='[N/A]', ecc='[N/A]', eccp='[N/A]',
              mig='[N/A]', migp='[N/A]')

ORDER = ('index', 'uuid', 'bus', 'name', 'pm', 'cm', 'pl', 'plmin', 'plmax', 'acm', 'acg', 'dacm', 'dacg',
         'ecc', 'eccp', 'mig', 'migp')


def csv(*gpus):
    return ''.join(', '.join(gpu[key] for key in ORDER) + '\n' for gpu in gpus)


def query(*gpus):
    return (QUERY, 0, csv(*gpus), '')


def ok(args, stdout='All done.\n'):
    return (args, 0, stdout, '')


# What nvidia-smi prints when the driver cannot reset the GPU to apply MIG mode at once.
MIG_PENDING_OUTPUT = (
    'Warning: MIG mode is in pending enable state for GPU 00000000:07:00.0:In use by another client\n'
    '00000000:07:00.0 is currently being used by one or more other processes (e.g. CUDA application or a monitoring '
    'application such as another instance of nvidia-smi). Please first kill all processes using the device and retry '
    'the command or reboot the system to make MIG mode effective.\nAll done.\n')

SUPPORTED_A100 = '1593, 1410\n1593, 1395\n1593, 1380\n1593, 1275\n1593, 210\n'

# ------------------------------------------------------------------ successful runs
# (id, module args, check mode, calls, expected subset of the result)
CASES = [
    ('idempotent-nothing-differs',
     dict(persistence_mode=False, compute_mode='Default', power_limit=400, ecc_mode=True, mig_mode=False),
     False,
     [query(A100_0, A100_1)],
     dict(changed=False, actions=[], reset_required=False, reboot_required=False)),
    ('power-limit-rounding-counts-as-equal',
     dict(power_limit=399.7), False,
     [query(A100_0)],
     dict(changed=False, actions=[])),
    ('no-settings-requested-reads-only',
     dict(), False,
     [query(A100_0)],
     dict(changed=False, actions=[])),
    ('persistence-compute-power-on-all-gpus',
     dict(persistence_mode=True, compute_mode='Exclusive_Process', power_limit=300), False,
     [query(A100_0, A100_1),
      ok(['-i', '0', '-pm', '1'], 'Enabled persistence mode for GPU 00000000:07:00.0.\nAll done.\n'),
      ok(['-i', '0', '-c', 'EXCLUSIVE_PROCESS'], 'Set compute mode to EXCLUSIVE_PROCESS for GPU 00000000:07:00.0.\n'),
      ok(['-i', '0', '-pl', '300'], 'Power limit for GPU 00000000:07:00.0 was set to 300.00 W from 400.00 W.\n'),
      ok(['-i', '1', '-pm', '1']),
      ok(['-i', '1', '-c', 'EXCLUSIVE_PROCESS']),
      ok(['-i', '1', '-pl', '300']),
      query(dict(A100_0, pm='Enabled', cm='Exclusive_Process', pl='300.00'),
            dict(A100_1, pm='Enabled', cm='Exclusive_Process', pl='300.00'))],
     dict(changed=True,
          actions=['nvidia-smi -i 0 -pm 1', 'nvidia-smi -i 0 -c EXCLUSIVE_PROCESS', 'nvidia-smi -i 0 -pl 300',
                   'nvidia-smi -i 1 -pm 1', 'nvidia-smi -i 1 -c EXCLUSIVE_PROCESS', 'nvidia-smi -i 1 -pl 300'],
          reset_required=False)),
    ('second-run-after-change-is-idempotent',
     dict(persistence_mode=True, compute_mode='Exclusive_Process', power_limit=300), False,
     [query(dict(A100_0, pm='Enabled', cm='Exclusive_Process', pl='300.00'),
            dict(A100_1, pm='Enabled', cm='Exclusive_Process', pl='300.00'))],
     dict(changed=False, actions=[])),
    ('fractional-power-limit',
     dict(power_limit=250.5, gpus=['1']), False,
     [query(A100_0, A100_1), ok(['-i', '1', '-pl', '250.5']), query(A100_0, dict(A100_1, pl='250.50'))],
     dict(changed=True, actions=['nvidia-smi -i 1 -pl 250.5'])),
    ('select-by-uuid',
     dict(persistence_mode=True, gpus=['GPU-3C81B7DE-0C1F-5F5E-6D2A-7A9BE0C1D2E3']), False,
     [query(A100_0, A100_1), ok(['-i', '1', '-pm', '1']), query(A100_0, dict(A100_1, pm='Enabled'))],
     dict(changed=True, actions=['nvidia-smi -i 1 -pm 1'])),
    ('select-by-short-pci-bus-id',
     dict(persistence_mode=True, gpus=['0f:00.0']), False,
     [query(A100_0, A100_1), ok(['-i', '1', '-pm', '1']), query(A100_0, dict(A100_1, pm='Enabled'))],
     dict(changed=True, actions=['nvidia-smi -i 1 -pm 1'])),
    ('select-by-lspci-style-bus-id-and-index-once',
     dict(persistence_mode=True, gpus=['0000:07:00.0', '0']), False,
     [query(A100_0, A100_1), ok(['-i', '0', '-pm', '1']), query(dict(A100_0, pm='Enabled'), A100_1)],
     dict(changed=True, actions=['nvidia-smi -i 0 -pm 1'])),
    ('application-clocks-supported-pair',
     dict(application_clocks=dict(memory=1593, graphics=1395), gpus=[0]), False,
     [query(A100_0),
      (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 0, SUPPORTED_A100, ''),
      ok(['-i', '0', '-ac', '1593,1395'], 'Applications clocks set to "(MEM 1593, SM 1395)" for GPU 00000000:07:00.0\n'),
      query(dict(A100_0, acg='1395'))],
     dict(changed=True, actions=['nvidia-smi -i 0 -ac 1593,1395'])),
    ('application-clocks-already-set-skips-supported-query',
     dict(application_clocks=dict(memory=1593, graphics=1410)), False,
     [query(A100_0)],
     dict(changed=False, actions=[])),
    ('application-clocks-reset',
     dict(application_clocks=dict(reset=True)), False,
     [query(A100_0), ok(['-i', '0', '-rac']), query(dict(A100_0, acg='1275'))],
     dict(changed=True, actions=['nvidia-smi -i 0 -rac'])),
    ('application-clocks-reset-when-at-default',
     dict(application_clocks=dict(reset=True)), False,
     [query(dict(A100_0, acg='1275'))],
     dict(changed=False, actions=[])),
    ('ecc-off-is-pending-until-reboot',
     dict(ecc_mode=False), False,
     [query(A100_0),
      ok(['-i', '0', '-e', '0'], 'Disabled ECC support for GPU 00000000:07:00.0.\nAll done.\nReboot required.\n'),
      query(dict(A100_0, eccp='Disabled'))],
     dict(changed=True, actions=['nvidia-smi -i 0 -e 0'], reset_required=True, reboot_required=True,
          pending={'0': ['ecc_mode']})),
    ('ecc-pending-equal-to-request-is-idempotent',
     dict(ecc_mode=False), False,
     [query(dict(A100_0, eccp='Disabled'))],
     dict(changed=False, actions=[], reset_required=True, reboot_required=True, pending={'0': ['ecc_mode']})),
    ('mig-on-pending-reset',
     dict(mig_mode=True, gpus=['0']), False,
     [query(A100_0, A100_1),
      ok(['-i', '0', '-mig', '1'], MIG_PENDING_OUTPUT),
      query(dict(A100_0, migp='Enabled'), A100_1)],
     dict(changed=True, actions=['nvidia-smi -i 0 -mig 1'], reset_required=True, reboot_required=False,
          pending={'0': ['mig_mode']})),
    ('mig-on-applied-at-once',
     dict(mig_mode=True), False,
     [query(A100_0), ok(['-i', '0', '-mig', '1'], 'Enabled MIG Mode for GPU 00000000:07:00.0\nAll done.\n'),
      query(dict(A100_0, mig='Enabled', migp='Enabled'))],
     dict(changed=True, reset_required=False, pending={})),
    ('mig-pending-equal-to-request-is-idempotent',
     dict(mig_mode=True), False,
     [query(dict(A100_0, migp='Enabled'))],
     dict(changed=False, actions=[], reset_required=True, reboot_required=False)),
    ('empty-gpu-list-selects-nothing',
     dict(persistence_mode=True, gpus=[]), False,
     [query(A100_0)],
     dict(changed=False, actions=[], gpus=[])),
    # Check mode: state is read and validated, no setter and no read-back runs.
    ('check-mode-runs-no-setter',
     dict(persistence_mode=True, compute_mode='Prohibited', power_limit=250, ecc_mode=False, mig_mode=True,
          application_clocks=dict(memory=1593, graphics=1380)), True,
     [query(A100_0),
      (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 0, SUPPORTED_A100, '')],
     dict(changed=True,
          actions=['nvidia-smi -i 0 -pm 1', 'nvidia-smi -i 0 -e 0', 'nvidia-smi -i 0 -mig 1',
                   'nvidia-smi -i 0 -c PROHIBITED', 'nvidia-smi -i 0 -pl 250', 'nvidia-smi -i 0 -ac 1593,1380'],
          reset_required=True, reboot_required=True, pending={'0': ['ecc_mode', 'mig_mode']})),
    ('check-mode-idempotent',
     dict(persistence_mode=True), True,
     [query(T4)],
     dict(changed=False, actions=[])),
]


@pytest.mark.parametrize('args, check_mode, calls, expected', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_settings(monkeypatch, args, check_mode, calls, expected):
    result, failed, table = run_module(monkeypatch, nvidia_smi.main, args, calls, check_mode=check_mode)
    assert not failed, result
    for key, value in expected.items():
        assert result[key] == value, key
    setters = [args for args in table.ran if not any(a.startswith('--query') for a in args)]
    assert ['nvidia-smi ' + ' '.join(a) for a in setters] == ([] if check_mode else result['actions'])


def test_check_mode_predicts_after_state(monkeypatch):
    result, failed, _table = run_module(
        monkeypatch, nvidia_smi.main, dict(persistence_mode=True, power_limit=250, ecc_mode=False), [query(A100_0)],
        check_mode=True)
    assert not failed
    gpu = result['gpus'][0]
    assert (gpu['persistence_mode'], gpu['power']['limit_w'], gpu['ecc_mode_current'], gpu['ecc_mode_pending']) == \
        (True, 250.0, True, False)


def test_returned_gpus_are_read_back_after_changes(monkeypatch):
    result, failed, _table = run_module(
        monkeypatch, nvidia_smi.main, dict(power_limit=300),
        [query(A100_0), ok(['-i', '0', '-pl', '300']), query(dict(A100_0, pl='299.00'))])
    assert not failed
    # The driver stored 299 W: the result shows what the GPU says, not what was asked.
    assert result['gpus'][0]['power']['limit_w'] == 299.0
    # The GPU record of nvidia_smi_info, limited to the settings' keys.
    assert result['gpus'][0] == {
        'index': 0, 'uuid': 'GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763', 'pci_bus_id': '0000:07:00.0',
        'name': 'NVIDIA A100-SXM4-80GB', 'persistence_mode': False, 'compute_mode': 'Default',
        'power': {'limit_w': 299.0, 'limit_min_w': 100.0, 'limit_max_w': 400.0},
        'clocks_applications': {'memory': 1593, 'graphics': 1410},
        'clocks_default_applications': {'memory': 1593, 'graphics': 1275},
        'ecc_mode_current': True, 'ecc_mode_pending': True, 'mig_mode_current': False, 'mig_mode_pending': False}


@pytest.mark.parametrize('check_mode', [False, True])
def test_diff_has_before_and_after_per_gpu(monkeypatch, check_mode):
    calls = [query(A100_0, A100_1)]
    if not check_mode:
        calls += [ok(['-i', '1', '-pm', '1']), ok(['-i', '1', '-mig', '1']),
                  query(A100_0, dict(A100_1, pm='Enabled', migp='Enabled'))]
    result, failed, _table = run_module(monkeypatch, nvidia_smi.main,
                                        dict(persistence_mode=True, mig_mode=True, gpus=[1]), calls,
                                        check_mode=check_mode, diff=True)
    assert not failed
    assert result['diff']['before'] == {'1': {
        'persistence_mode': False, 'compute_mode': 'Default', 'power': {'limit_w': 400.0},
        'clocks_applications': {'memory': 1593, 'graphics': 1410}, 'ecc_mode_pending': True,
        'mig_mode_pending': False}}
    assert result['diff']['after'] == {'1': {
        'persistence_mode': True, 'compute_mode': 'Default', 'power': {'limit_w': 400.0},
        'clocks_applications': {'memory': 1593, 'graphics': 1410}, 'ecc_mode_pending': True,
        'mig_mode_pending': True}}


def test_no_diff_key_without_diff_mode(monkeypatch):
    result, _failed, _table = run_module(monkeypatch, nvidia_smi.main, dict(persistence_mode=False), [query(A100_0)])
    assert 'diff' not in result


# ------------------------------------------------------------------ validation errors: nothing runs
# (id, module args, calls, fragments the message must contain)
INVALID = [
    ('power-limit-above-max',
     dict(power_limit=500), [query(A100_0)],
     ['power_limit 500 W is outside the range GPU 0 (NVIDIA A100-SXM4-80GB, 0000:07:00.0) accepts: 100-400 W']),
    ('power-limit-below-min',
     dict(power_limit=50, gpus=['0']), [query(T4)],
     ['power_limit 50 W is outside the range GPU 0 (Tesla T4, 0000:3b:00.0) accepts: 60-70 W']),
    ('power-limits-not-reported',
     dict(power_limit=80), [query(LAPTOP)],
     ['GPU 0 (NVIDIA GeForce RTX 3050 Laptop GPU, 0000:01:00.0) does not report its power limits']),
    ('unsupported-clock-pair',
     dict(application_clocks=dict(memory=1593, graphics=1500)),
     [query(A100_0),
      (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 0, SUPPORTED_A100, '')],
     ['application_clocks memory 1593 MHz, graphics 1500 MHz is not supported by GPU 0',
      'graphics clocks supported with memory 1593 MHz: 1410, 1395, 1380, 1275, 210']),
    ('unsupported-memory-clock',
     dict(application_clocks=dict(memory=1215, graphics=1410)),
     [query(A100_0),
      (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 0, SUPPORTED_A100, '')],
     ['is not supported by GPU 0', 'supported memory clocks: 1593']),
    ('no-application-clocks',
     dict(application_clocks=dict(memory=7001, graphics=1800)), [query(LAPTOP)],
     ['does not support application clocks']),
    ('ecc-not-supported',
     dict(ecc_mode=True), [query(LAPTOP)],
     ['GPU 0 (NVIDIA GeForce RTX 3050 Laptop GPU, 0000:01:00.0) does not support ECC mode']),
    ('mig-not-supported',
     dict(mig_mode=True), [query(T4)],
     ['GPU 0 (Tesla T4, 0000:3b:00.0) does not support MIG mode']),
    ('unknown-index',
     dict(persistence_mode=True, gpus=['4']), [query(A100_0, A100_1)],
     ['gpus: no GPU matches 4; GPUs on this host: 0 (GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763, 0000:07:00.0), '
      '1 (GPU-3c81b7de-0c1f-5f5e-6d2a-7a9be0c1d2e3, 0000:0f:00.0)']),
    ('unknown-uuid',
     dict(persistence_mode=True, gpus=['GPU-00000000-0000-0000-0000-000000000000']), [query(A100_0)],
     ['gpus: no GPU matches GPU-00000000-0000-0000-0000-000000000000']),
    ('unknown-bus-id',
     dict(persistence_mode=True, gpus=['00000000:AF:00.0']), [query(A100_0)],
     ['gpus: no GPU matches 00000000:AF:00.0']),
    ('mig-device-uuid',
     dict(persistence_mode=True, gpus=['MIG-b6ba6b2a-1cd4-5f1e-8a03-77d19e02c4b1']), [query(A100_0)],
     ['is a MIG device; select its parent GPU']),
    ('selector-of-unknown-shape',
     dict(persistence_mode=True, gpus=['first']), [query(A100_0)],
     ["gpus: 'first' is neither a GPU index"]),
    # One bad GPU stops the whole run: GPU 0 would be fine, yet nothing is changed on it either.
    ('validation-before-any-change',
     dict(power_limit=300), [query(A100_0, dict(A100_1, plmax='250.00'))],
     ['power_limit 300 W is outside the range GPU 1 (NVIDIA A100-SXM4-80GB, 0000:0f:00.0) accepts: 100-250 W']),
]


@pytest.mark.parametrize('args, calls, fragments', [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
@pytest.mark.parametrize('check_mode', [False, True])
def test_validation_errors_change_nothing(monkeypatch, args, calls, fragments, check_mode):
    result, failed, table = run_module(monkeypatch, nvidia_smi.main, args, calls, check_mode=check_mode)
    assert failed
    for fragment in fragments:
        assert fragment in result['msg']
    assert result['changed'] is False
    assert result['actions'] == []
    assert all(any(a.startswith('--query') for a in args) for args in table.ran)


@pytest.mark.parametrize('clocks, message', [
    (dict(memory=1593), 'parameters are required together: memory, graphics'),
    (dict(reset=True, memory=1593, graphics=1410), 'parameters are mutually exclusive: reset|memory'),
    (dict(), 'application_clocks needs memory and graphics, or reset: true'),
    (dict(reset=False), 'application_clocks needs memory and graphics, or reset: true'),
])
def test_application_clocks_arguments(monkeypatch, clocks, message):
    result, failed, table = run_module(monkeypatch, nvidia_smi.main, dict(application_clocks=clocks), [])
    assert failed
    assert message in result['msg']
    assert table.ran == []


def test_compute_mode_choices(monkeypatch):
    result, failed, _table = run_module(monkeypatch, nvidia_smi.main, dict(compute_mode='Exclusive_Thread'), [])
    assert failed and 'compute_mode' in result['msg']


# ------------------------------------------------------------------ failures of nvidia-smi itself
# (id, canned answer of the first query, expected reason)
FAILURES = [
    ('driver-not-loaded', (9, '', "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
                                  'sure that the latest NVIDIA driver is installed and running.\n'), 'driver_not_loaded'),
    ('version-mismatch', (18, 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: '
                              '570.195\n', ''), 'version_mismatch'),
    ('no-devices', (6, 'No devices were found\n', ''), 'no_devices'),
    ('not-installed', (127, '', ''), 'not_installed'),
    ('timeout', (124, '', ''), 'timeout'),
    ('gpu-lost', (15, 'Unable to determine the device handle for GPU0000:07:00.0: GPU is lost.  Reboot the system to '
                      'recover this GPU\n', ''), 'gpu_lost'),
    ('permissions', (4, 'Insufficient Permissions\n', ''), 'insufficient_permissions'),
]


@pytest.mark.parametrize('answer, reason', [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_read_failures_are_classified(monkeypatch, answer, reason):
    rc, stdout, stderr = answer
    result, failed, _table = run_module(monkeypatch, nvidia_smi.main, dict(persistence_mode=True),
                                        [(QUERY, rc, stdout, stderr)])
    assert failed
    assert result['reason'] == reason
    assert result['rc'] == rc
    assert result['msg']
    assert result['changed'] is False


@pytest.mark.parametrize('stdout', [
    'garbage without commas\n',
    '0, GPU-8f2c, 00000000:07:00.0\n',
    csv(dict(A100_0, pm='Maybe')),
    csv(dict(A100_0, pl='lots')),
    '<html>502 Bad Gateway</html>\n',
])
def test_garbage_output_fails_cleanly(monkeypatch, stdout):
    result, failed, _table = run_module(monkeypatch, nvidia_smi.main, dict(persistence_mode=True),
                                        [(QUERY, 0, stdout, '')])
    assert failed
    assert result['reason'] == 'unparsable_output'
    assert 'could not read the output of nvidia-smi --query-gpu=' in result['msg']


def test_empty_output_is_no_devices(monkeypatch):
    result, failed, _table = run_module(monkeypatch, nvidia_smi.main, dict(persistence_mode=True), [(QUERY, 0, '', '')])
    assert failed
    assert result['reason'] == 'no_devices'


def test_setter_failure_reports_reason_and_progress(monkeypatch):
    result, failed, _table = run_module(
        monkeypatch, nvidia_smi.main, dict(persistence_mode=True, power_limit=300),
        [query(A100_0), ok(['-i', '0', '-pm', '1']),
         (['-i', '0', '-pl', '300'], 4, 'Changing power management limit is not supported in current scope for GPU: '
                                        '00000000:07:00.0.\nInsufficient Permissions\n', '')])
    assert failed
    assert result['reason'] == 'insufficient_permissions'
    assert result['changed'] is True
    assert result['actions'] == ['nvidia-smi -i 0 -pm 1', 'nvidia-smi -i 0 -pl 300']
    assert result['cmd'].endswith('-i 0 -pl 300')


def test_supported_clocks_query_failure(monkeypatch):
    result, failed, _table = run_module(
        monkeypatch, nvidia_smi.main, dict(application_clocks=dict(memory=1593, graphics=1395)),
        [query(A100_0),
         (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 3,
          'Not Supported\n', '')])
    assert failed
    assert result['reason'] == 'not_supported'
    assert result['actions'] == []


def test_supported_clocks_garbage(monkeypatch):
    result, failed, _table = run_module(
        monkeypatch, nvidia_smi.main, dict(application_clocks=dict(memory=1593, graphics=1395)),
        [query(A100_0),
         (['-i', '0', '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits'], 0,
          'one, two, three\n', '')])
    assert failed
    assert result['reason'] == 'unparsable_output'
