# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.nvidia_mig with a table of expected nvidia-smi calls answered from real MIG listings."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_mig
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.nvidia_smi_command_table import run_module

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'module_utils', 'fixtures', 'nvidia_mig')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


GPU_QUERY = ['--query-gpu=index,uuid,pci.bus_id,name,mig.mode.current,mig.mode.pending', '--format=csv,noheader,nounits']
APPS_QUERY = ['--query-compute-apps=gpu_uuid,pid,process_name,used_memory', '--format=csv,noheader,nounits']
LGIP, LGI, LCI = ['mig', '-lgip'], ['mig', '-lgi'], ['mig', '-lci']

H100 = '0, GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763, 00000000:16:00.0, NVIDIA H100 80GB HBM3, Enabled, Enabled\n'
H100_UUID = 'GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763'
A100 = '0, GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9, 00000000:10:1C.0, NVIDIA A100-SXM4-40GB, Enabled, Enabled\n'
A30 = '0, GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd, 00000000:0B:00.0, NVIDIA A30, Enabled, Enabled\n'

NO_GI = (6, 'No GPU instances found: Not Found\n', '')
NO_CI = (6, 'No compute instances found: Not Found\n', '')


def call(args, answer):
    if isinstance(answer, tuple):
        return (args, ) + answer
    return (args, 0, answer, '')


def two_gpus(lgip_name):
    """lgip of two identical GPUs built from a one-GPU capture, as nvidia-smi lists them in one table."""
    text = fixture(lgip_name)
    rows = text.splitlines()
    header, body = rows[:5], rows[5:]
    second = [line.replace('|   0  MIG', '|   1  MIG') for line in body]
    return '\n'.join(header + body + second) + '\n'


H100_LGIP = fixture('h100-80gb-hbm3_lgip.txt')
H100_7X1G = [call(LGI, fixture('h100-80gb-hbm3_lgi_7x1g.txt')), call(LCI, fixture('h100-80gb-hbm3_lci_7x1g.txt'))]
A100_MIXED = [call(LGI, fixture('a100-sxm4-40gb_580_lgi_mixed.txt')),
              call(LCI, fixture('a100-sxm4-40gb_580_lci_mixed.txt'))]
A100_2X3G_LCI = """+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      1       MIG 3g.20gb          2         0          0:4     |
+--------------------------------------------------------------------+
|   0      2       MIG 3g.20gb          2         0          0:4     |
+--------------------------------------------------------------------+
"""

# (id, module args, check mode, calls, expected subset of the result)
CASES = [
    ('already-matching-is-untouched',
     dict(layouts=[dict(profiles={'1g.10gb': 7})]), False,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G,
     dict(changed=False, actions=[])),
    ('zero-counts-and-mig-prefix-are-ignored-when-matching',
     dict(layouts=[dict(gpus=['0'], profiles={'MIG 1g.10gb': '7', '3g.40gb': 0})]), False,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G,
     dict(changed=False, actions=[])),
    ('empty-gpu-to-seven-slices',
     dict(layouts=[dict(gpus=[0], profiles={'1g.10gb': 7})]), False,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, NO_CI), call(APPS_QUERY, ''),
      call(['mig', '-i', '0', '-cgi', '19,19,19,19,19,19,19', '-C'], fixture('h100-80gb-hbm3_cgi_7x1g.txt'))]
     + H100_7X1G,
     dict(changed=True, actions=['nvidia-smi mig -i 0 -cgi 19,19,19,19,19,19,19 -C'])),
    ('check-mode-creates-nothing',
     dict(layouts=[dict(gpus=[0], profiles={'1g.10gb': 7})]), True,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, NO_CI), call(APPS_QUERY, '')],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -cgi 19,19,19,19,19,19,19 -C'])),
    ('repartition-destroys-then-creates',
     dict(layouts=[dict(profiles={'3g.20gb': 2})]), False,
     [call(GPU_QUERY, A100), call(LGIP, fixture('a100-sxm4-40gb_580_lgip.txt'))] + A100_MIXED + [
         call(APPS_QUERY, ''),
         call(['mig', '-i', '0', '-dci'], ''),
         call(['mig', '-i', '0', '-dgi'], ''),
         call(['mig', '-i', '0', '-cgi', '9,9', '-C'], fixture('a100-sxm4-40gb_mig-user-guide_cgi_2x3g.txt')),
         call(LGI, fixture('a100-sxm4-40gb_mig-user-guide_lgi_2x3g.txt')), call(LCI, A100_2X3G_LCI)],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -dci', 'nvidia-smi mig -i 0 -dgi',
                                 'nvidia-smi mig -i 0 -cgi 9,9 -C'])),
    ('partial-compute-instances-do-not-match',
     # Same GPU instance profiles as declared, but GI 3 holds two 1c.2g.10gb compute instances.
     dict(layouts=[dict(profiles={'4g.20gb': 1, '2g.10gb': 1, '1g.5gb': 1})]), True,
     [call(GPU_QUERY, A100), call(LGIP, fixture('a100-sxm4-40gb_580_lgip.txt'))] + A100_MIXED + [call(APPS_QUERY, '')],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -dci', 'nvidia-smi mig -i 0 -dgi',
                                 'nvidia-smi mig -i 0 -cgi 5,14,19 -C'])),
    ('empty-profiles-removes-everything',
     dict(layouts=[dict(gpus=[0], profiles={})]), False,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G + [
         call(APPS_QUERY, ''),
         call(['mig', '-i', '0', '-dci'], fixture('h100-80gb-hbm3_dci_7x1g.txt')),
         call(['mig', '-i', '0', '-dgi'], fixture('h100-80gb-hbm3_dgi_7x1g.txt')),
         call(LGI, NO_GI), call(LCI, NO_CI)],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -dci', 'nvidia-smi mig -i 0 -dgi'])),
    ('gpu-instances-without-compute-instances-skip-dci',
     dict(layouts=[dict(gpus=[0], profiles={})]), False,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, fixture('h100-80gb-hbm3_lgi_7x1g.txt')),
      call(LCI, NO_CI), call(APPS_QUERY, ''),
      call(['mig', '-i', '0', '-dgi'], fixture('h100-80gb-hbm3_dgi_7x1g.txt')),
      call(LGI, NO_GI), call(LCI, NO_CI)],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -dgi'])),
    ('only-the-gpu-that-differs-changes',
     dict(layouts=[dict(gpus=['GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763'], profiles={'1g.10gb': 7}),
                   dict(gpus=['00000000:17:00.0'], profiles={'3g.40gb': 2})]), True,
     [call(GPU_QUERY, H100 + '1, GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a, 00000000:17:00.0, NVIDIA H100 80GB HBM3, '
                             'Enabled, Enabled\n'),
      call(LGIP, two_gpus('h100-80gb-hbm3_lgip.txt'))] + H100_7X1G + [call(APPS_QUERY, '')],
     dict(changed=True, actions=['nvidia-smi mig -i 1 -cgi 9,9 -C'])),
    ('force-goes-on-with-processes',
     dict(layouts=[dict(profiles={'4g.24gb': 1})], force=True), True,
     [call(GPU_QUERY, A30), call(LGIP, fixture('a30_535_lgip.txt')),
      call(LGI, fixture('a30_535_lgi_mixed.txt')), call(LCI, NO_CI),
      call(APPS_QUERY, 'GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd, 4242, python3, 1024\n')],
     dict(changed=True, actions=['nvidia-smi mig -i 0 -dgi', 'nvidia-smi mig -i 0 -cgi 0 -C'],
          processes=[{'gpu_uuid': 'GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd', 'pid': 4242,
                      'name': 'python3', 'used_memory_mib': 1024}])),
    ('processes-on-other-gpus-do-not-block',
     dict(layouts=[dict(profiles={'1g.10gb': 7})]), True,
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, NO_CI),
      call(APPS_QUERY, 'GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a, 77, trainer, 30000\n')],
     dict(changed=True)),
]


@pytest.mark.parametrize('args, check_mode, calls, expected', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_layouts(monkeypatch, args, check_mode, calls, expected):
    result, failed, table = run_module(monkeypatch, nvidia_mig.main, args, calls, check_mode=check_mode)
    assert not failed, result
    for key, value in expected.items():
        assert result[key] == value, key
    mutations = [a for a in table.ran if any(flag in a for flag in ('-cgi', '-dgi', '-dci'))]
    assert ['nvidia-smi ' + ' '.join(a) for a in mutations] == ([] if check_mode else result['actions'])


def test_result_reports_instances_after_change(monkeypatch):
    calls = [call(GPU_QUERY, A100), call(LGIP, fixture('a100-sxm4-40gb_580_lgip.txt'))] + A100_MIXED + [
        call(APPS_QUERY, ''), call(['mig', '-i', '0', '-dci'], ''), call(['mig', '-i', '0', '-dgi'], ''),
        call(['mig', '-i', '0', '-cgi', '9,9', '-C'], fixture('a100-sxm4-40gb_mig-user-guide_cgi_2x3g.txt')),
        call(LGI, fixture('a100-sxm4-40gb_mig-user-guide_lgi_2x3g.txt')), call(LCI, A100_2X3G_LCI)]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'3g.20gb': 2})]),
                                        calls, diff=True)
    assert not failed
    gpu = result['gpus'][0]
    assert (gpu['index'], gpu['uuid'], gpu['name'], gpu['profiles']) == \
        (0, 'GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9', 'NVIDIA A100-SXM4-40GB', {'3g.20gb': 2})
    assert gpu['instances'][0] == {
        'gpu_instance_id': 1, 'profile': '3g.20gb', 'profile_id': 9, 'placement': {'start': 4, 'size': 4},
        'compute_instances': [{'compute_instance_id': 0, 'profile': '3g.20gb', 'profile_id': 2}]}
    assert result['diff'] == {'before': {'0': ['1g.5gb', '2g.10gb', '4g.20gb']}, 'after': {'0': ['3g.20gb', '3g.20gb']}}


def test_check_mode_diff_predicts_layout(monkeypatch):
    calls = [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G + [call(APPS_QUERY, '')]
    result, failed, _table = run_module(
        monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 2, '3g.40gb': 1, '2g.20gb': 1})]),
        calls, check_mode=True, diff=True)
    assert not failed
    assert result['diff']['before'] == {'0': ['1g.10gb'] * 7}
    assert result['diff']['after'] == {'0': ['1g.10gb', '1g.10gb', '2g.20gb', '3g.40gb']}
    assert result['actions'] == ['nvidia-smi mig -i 0 -dci', 'nvidia-smi mig -i 0 -dgi',
                                 'nvidia-smi mig -i 0 -cgi 9,14,19,19 -C']
    assert result['gpus'][0]['profiles'] == {'3g.40gb': 1, '2g.20gb': 1, '1g.10gb': 2}
    assert result['gpus'][0]['instances'][0]['gpu_instance_id'] is None


def test_idempotent_diff_is_equal(monkeypatch):
    calls = [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 7})]),
                                        calls, diff=True)
    assert not failed and not result['changed']
    assert result['diff']['before'] == result['diff']['after'] == {'0': ['1g.10gb'] * 7}


# ------------------------------------------------------------------ refusals: nothing is created or destroyed
# (id, module args, calls, reason or None, fragments of the message)
REFUSALS = [
    ('unknown-profile',
     dict(layouts=[dict(profiles={'1g.5gb': 7})]),
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)],
     'invalid_layout',
     ['GPU 0 (NVIDIA H100 80GB HBM3, 0000:16:00.0): MIG profile 1g.5gb is not offered by this GPU; available: '
      '1g.10gb (ID 19, up to 7), 1g.10gb+me (ID 20, up to 1)']),
    ('too-many-of-one-profile',
     dict(layouts=[dict(profiles={'3g.40gb': 3})]),
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)],
     'invalid_layout', ['3 x 3g.40gb requested but the GPU holds at most 2']),
    ('too-many-slices',
     dict(layouts=[dict(profiles={'4g.40gb': 1, '2g.20gb': 1, '1g.10gb': 2})]),
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)],
     'invalid_layout', ['the layout needs 8 compute slices but the GPU has 7 (2 x 1g.10gb, 1 x 2g.20gb, 1 x 4g.40gb)']),
    ('too-much-memory',
     # 7 compute slices fit, but 1g.20gb instances take two memory slices each.
     dict(layouts=[dict(profiles={'4g.40gb': 1, '1g.20gb': 3})]),
     [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)],
     'invalid_layout', ['GPU 0 (NVIDIA H100 80GB HBM3, 0000:16:00.0): the layout needs 98.36 GiB of GPU memory '
                        'but the GPU has 79.25 GiB']),
    ('processes-without-force',
     dict(layouts=[dict(profiles={'4g.24gb': 1})]),
     [call(GPU_QUERY, A30), call(LGIP, fixture('a30_535_lgip.txt')),
      call(LGI, fixture('a30_535_lgi_mixed.txt')), call(LCI, NO_CI),
      call(APPS_QUERY, 'GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd, 4242, python3, 1024\n'
                       'GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd, 4243, [Not Found], 512\n')],
     'gpu_busy',
     ['compute processes run on GPUs whose MIG layout must change: pid 4242 (python3) on '
      'GPU-1e44b340-5807-0dbe-62e6-343a6b8b8bcd, pid 4243 (None)', 'set force: true']),
    ('mig-disabled',
     dict(layouts=[dict(profiles={'1g.10gb': 7})]),
     [call(GPU_QUERY, H100.replace('Enabled, Enabled', 'Disabled, Disabled'))],
     'mig_disabled',
     ['GPU 0 (NVIDIA H100 80GB HBM3, 0000:16:00.0) has MIG mode disabled: enable it first with '
      'gpufleet.nvidia.nvidia_smi (mig_mode: true) or the gpufleet.nvidia.mig role']),
    ('mig-pending',
     dict(layouts=[dict(profiles={'1g.10gb': 7})]),
     [call(GPU_QUERY, H100.replace('Enabled, Enabled', 'Disabled, Enabled'))],
     'mig_disabled', ['has MIG mode enabled but pending: reset the GPU (nvidia-smi -i 0 -r)']),
    ('mig-not-supported',
     dict(layouts=[dict(profiles={'1g.10gb': 7})]),
     [call(GPU_QUERY, '0, GPU-1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, 00000000:3B:00.0, Tesla T4, [N/A], [N/A]\n')],
     'mig_disabled', ['GPU 0 (Tesla T4, 0000:3b:00.0) does not support MIG']),
    ('gpu-in-two-layouts',
     dict(layouts=[dict(gpus=[0], profiles={'1g.10gb': 7}), dict(profiles={'7g.80gb': 1})]),
     [call(GPU_QUERY, H100)],
     None, ['GPU 0 is selected by more than one entry of layouts (1 and 2)']),
    ('unknown-gpu',
     dict(layouts=[dict(gpus=[3], profiles={'1g.10gb': 7})]),
     [call(GPU_QUERY, H100)],
     None, ['layouts[1]: gpus: no GPU matches 3; GPUs on this host: 0']),
    ('negative-count',
     dict(layouts=[dict(profiles={'1g.10gb': -1})]),
     [call(GPU_QUERY, H100)],
     None, ['layouts[1]: the count for profile 1g.10gb must be a whole number >= 0, got -1']),
    ('non-numeric-count',
     dict(layouts=[dict(profiles={'1g.10gb': 'seven'})]),
     [call(GPU_QUERY, H100)],
     None, ["got 'seven'"]),
]


@pytest.mark.parametrize('args, calls, reason, fragments', [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
@pytest.mark.parametrize('check_mode', [False, True])
def test_refusals_change_nothing(monkeypatch, args, calls, reason, fragments, check_mode):
    result, failed, table = run_module(monkeypatch, nvidia_mig.main, args, calls, check_mode=check_mode)
    assert failed
    for fragment in fragments:
        assert fragment in result['msg'], result['msg']
    if reason:
        assert result['reason'] == reason
    assert result['changed'] is False
    assert result['actions'] == []
    assert not [a for a in table.ran if any(flag in a for flag in ('-cgi', '-dgi', '-dci'))]


def test_media_extension_variant_counts_as_its_own_profile():
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_mig import (
        parse_gpu_instance_profiles, validate_layout)
    profiles = parse_gpu_instance_profiles(fixture('a30_535_lgip.txt'))
    assert validate_layout('GPU 0', {'2g.12gb': 1, '2g.12gb+me': 1}, profiles) == []
    assert '2 x 2g.12gb+me requested but the GPU holds at most 1' in \
        validate_layout('GPU 0', {'2g.12gb+me': 2}, profiles)[0]


# ------------------------------------------------------------------ nvidia-smi failures and garbage

def test_create_failure_reports_driver_message_and_progress(monkeypatch):
    calls = [call(GPU_QUERY, A100), call(LGIP, fixture('a100-sxm4-40gb_580_lgip.txt'))] + A100_MIXED + [
        call(APPS_QUERY, ''), call(['mig', '-i', '0', '-dci'], ''), call(['mig', '-i', '0', '-dgi'], ''),
        call(['mig', '-i', '0', '-cgi', '9,9', '-C'], (255, fixture('gh200-96gb_cgi_insufficient.txt'), ''))]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'3g.20gb': 2})]),
                                        calls)
    assert failed
    assert result['msg'].startswith('nvidia-smi mig -i 0 -cgi 9,9 -C failed on GPU 0 (NVIDIA A100-SXM4-40GB')
    assert 'Insufficient Resources' in result['msg']
    assert result['changed'] is True
    assert result['actions'] == ['nvidia-smi mig -i 0 -dci', 'nvidia-smi mig -i 0 -dgi',
                                 'nvidia-smi mig -i 0 -cgi 9,9 -C']
    assert result['reason'] == 'unknown'


def test_destroy_refused_while_in_use(monkeypatch):
    calls = [call(GPU_QUERY, H100), call(LGIP, H100_LGIP)] + H100_7X1G + [
        call(APPS_QUERY, H100_UUID + ', 9, trainer, 100\n'),
        call(['mig', '-i', '0', '-dci'], (255, fixture('rtx-pro-6000-blackwell_dgi_in_use.txt'), ''))]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main,
                                        dict(layouts=[dict(profiles={'7g.80gb': 1})], force=True), calls)
    assert failed
    assert 'In use by another client' in result['msg']
    assert result['changed'] is False
    assert result['actions'] == ['nvidia-smi mig -i 0 -dci']


def test_layout_still_differs_after_apply(monkeypatch):
    calls = [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, NO_CI), call(APPS_QUERY, ''),
             call(['mig', '-i', '0', '-cgi', '19,19,19,19,19,19,19', '-C'], fixture('h100-80gb-hbm3_cgi_7x1g.txt')),
             call(LGI, fixture('h100-80gb-hbm3_lgi_7x1g.txt')), call(LCI, NO_CI)]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 7})]),
                                        calls)
    assert failed
    assert result['msg'] == 'after applying, the MIG layout still differs on GPU 0 (NVIDIA H100 80GB HBM3, 0000:16:00.0)'
    assert result['changed'] is True


def test_create_output_with_fewer_instances_than_asked(monkeypatch):
    calls = [call(GPU_QUERY, A30), call(LGIP, fixture('a30_535_lgip.txt')), call(LGI, NO_GI), call(LCI, NO_CI),
             call(APPS_QUERY, ''),
             call(['mig', '-i', '0', '-cgi', '14,14', '-C'], fixture('a30_535_cgi_1g.txt'))]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.6gb': 2})]),
                                        calls)
    assert failed
    assert 'reported 1 GPU instances created on GPU 0 (NVIDIA A30, 0000:0b:00.0), expected 2' in result['msg']


@pytest.mark.parametrize('answer, reason', [
    ((9, '', "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"), 'driver_not_loaded'),
    ((18, 'Failed to initialize NVML: Driver/library version mismatch\n', ''), 'version_mismatch'),
    ((127, '', ''), 'not_installed'),
    ((124, '', ''), 'timeout'),
    ((14, 'WARNING: infoROM is corrupted at gpu 0000:16:00.0\n', ''), 'inforom_corrupted'),
])
def test_query_failures_are_classified(monkeypatch, answer, reason):
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 7})]),
                                        [call(GPU_QUERY, answer)])
    assert failed
    assert result['reason'] == reason


def test_listing_failure_other_than_empty_is_not_swallowed(monkeypatch):
    calls = [call(GPU_QUERY, H100), call(LGIP, H100_LGIP),
             call(LGI, (4, 'No GPU instances found: Insufficient Permissions\n', ''))]
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 7})]),
                                        calls)
    assert failed
    assert result['reason'] == 'insufficient_permissions'


@pytest.mark.parametrize('calls', [
    [call(GPU_QUERY, 'garbage\n')],
    [call(GPU_QUERY, H100), call(LGIP, 'Segmentation fault\n')],
    [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, '<html>oops</html>\n')],
    [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, '| Compute instances: |\n')],
    [call(GPU_QUERY, H100), call(LGIP, H100_LGIP), call(LGI, NO_GI), call(LCI, NO_CI), call(APPS_QUERY, 'a, b\n')],
], ids=['query', 'lgip', 'lgi', 'lci', 'compute-apps'])
def test_garbage_fails_cleanly(monkeypatch, calls):
    result, failed, _table = run_module(monkeypatch, nvidia_mig.main, dict(layouts=[dict(profiles={'1g.10gb': 7})]),
                                        calls)
    assert failed
    assert result['reason'] == 'unparsable_output'
    assert result['msg'].startswith('could not read the output of nvidia-smi ')


def test_layouts_required(monkeypatch):
    result, failed, table = run_module(monkeypatch, nvidia_mig.main, dict(), [])
    assert failed and 'layouts' in result['msg'] and table.ran == []
