# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.nvidia_mig with validate_only, the check the mig role's
preflight runs before it enables MIG mode: a table of the nvidia-smi calls it
may make, answered from real ``-lgip`` captures (the command table of
tests/unit/plugins/modules). It reads the GPUs and, only when one has MIG
mode on, their profile list; nothing else, in check mode or not.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_mig
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.nvidia_smi_command_table import run_module

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'plugins', 'module_utils',
                        'fixtures', 'nvidia_mig')
QUERY = ['--query-gpu=index,uuid,pci.bus_id,name,mig.mode.current,mig.mode.pending,memory.total',
         '--format=csv,noheader,nounits']
LGIP = ['mig', '-lgip']

H100_ON = '0, GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763, 00000000:16:00.0, NVIDIA H100 80GB HBM3, Enabled, Enabled, 81559\n'
H100_OFF = ('1, GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a, 00000000:17:00.0, NVIDIA H100 80GB HBM3, Disabled, Disabled, '
            '81559\n')
H100_PENDING = ('1, GPU-0d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a, 00000000:17:00.0, NVIDIA H100 80GB HBM3, Disabled, '
                'Enabled, 81559\n')
GB200_OFF = '2, GPU-7c1b1e0a-2f3d-4e5a-9b8c-1d2e3f4a5b6c, 00000000:18:00.0, NVIDIA GB200, Disabled, Disabled, 190464\n'
L40S = '3, GPU-5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d, 00000000:19:00.0, NVIDIA L40S, [N/A], [N/A], 46068\n'


def _lgip():
    with open(os.path.join(FIXTURES, 'h100-80gb-hbm3_lgip.txt')) as handle:
        return handle.read()


def _run(monkeypatch, layouts, calls, check_mode=False, **extra):
    args = dict(layouts=layouts, validate_only=True, **extra)
    table_calls = [(argv, 0, answer, '') for argv, answer in calls]
    return run_module(monkeypatch, nvidia_mig.main, args, table_calls, check_mode=check_mode)


@pytest.mark.parametrize('check_mode', [False, True])
def test_mig_on_uses_the_gpu_list_and_mig_off_the_table(monkeypatch, check_mode):
    result, failed, table = _run(
        monkeypatch, [{'gpus': ['0'], 'profiles': {'1g.10gb': 7}}, {'gpus': ['1'], 'profiles': {'MIG 3g.40gb': 2}}],
        [(QUERY, H100_ON + H100_OFF), (LGIP, _lgip())], check_mode=check_mode)
    assert not failed, result
    assert result['changed'] is False and result['actions'] == []
    assert [(c['entry'], c['index'], c['mig_mode'], c['source'], c['model'], c['errors']) for c in result['checks']] \
        == [(1, 0, 'enabled', 'gpu', None, []), (2, 1, 'disabled', 'table', 'H100 80GB', [])]
    assert table.ran == [QUERY, LGIP]


def test_with_mig_mode_off_everywhere_no_profile_list_is_read(monkeypatch):
    result, failed, table = _run(monkeypatch, [{'profiles': {'3g.40gb': 2, '1g.10gb': 1}}], [(QUERY, H100_PENDING)])
    assert failed and result['reason'] == 'invalid_layout'
    assert result['msg'] == ('layouts[1]: GPU 1 (NVIDIA H100 80GB HBM3, 0000:17:00.0): the layout needs 9 memory '
                             'slices but the H100 80GB has 8 (1 x 1g.10gb, 2 x 3g.40gb)')
    assert result['checks'][0]['mig_mode'] == 'pending'
    assert table.ran == [QUERY]


def test_an_unknown_model_with_mig_mode_off_is_refused_unless_described(monkeypatch):
    layouts = [{'gpus': ['2'], 'profiles': {'1g.23gb': 7}}]
    result, failed, _table = _run(monkeypatch, layouts, [(QUERY, GB200_OFF)])
    assert failed and result['reason'] == 'unknown_gpu_model'
    assert result['checks'][0]['unknown_model'] is True
    assert result['msg'] == ('layouts[1]: GPU 2 (NVIDIA GB200, 0000:18:00.0) has MIG mode disabled, and the table of '
                             'MIG profiles does not know its model (NVIDIA GB200 with 190464 MiB of memory)')

    described = {'NVIDIA GB200': {'1g.23gb': 7, '7g.186gb': 1}}
    result, failed, _table = _run(monkeypatch, layouts, [(QUERY, GB200_OFF)], gpu_profiles=described)
    assert not failed, result
    assert (result['checks'][0]['source'], result['checks'][0]['model']) == ('gpu_profiles', 'NVIDIA GB200')

    # Nothing to check in a layout that names no profile: MIG mode can be enabled on any model.
    result, failed, _table = _run(monkeypatch, [{'gpus': ['2'], 'profiles': {}}], [(QUERY, GB200_OFF)])
    assert not failed, result
    assert result['checks'][0]['source'] is None and result['checks'][0]['errors'] == []


def test_every_problem_is_reported_at_once(monkeypatch):
    result, failed, _table = _run(
        monkeypatch, [{'gpus': ['0'], 'profiles': {'1g.5gb': 1}}, {'gpus': ['2'], 'profiles': {'1g.23gb': 7}},
                      {'gpus': ['3'], 'profiles': {}}],
        [(QUERY, H100_ON + H100_OFF + GB200_OFF + L40S), (LGIP, _lgip())])
    assert failed and result['reason'] == 'invalid_layout'
    assert [(c['index'], len(c['errors']), c['unknown_model']) for c in result['checks']] == [
        (0, 1, False), (2, 1, True), (3, 1, False)]
    assert 'layouts[1]: GPU 0 (NVIDIA H100 80GB HBM3, 0000:16:00.0): MIG profile 1g.5gb is not offered' in result['msg']
    assert 'layouts[3]: GPU 3 (NVIDIA L40S, 0000:19:00.0) does not support MIG' in result['msg']


def test_a_wrong_gpu_profiles_is_refused_before_nvidia_smi_runs(monkeypatch):
    result, failed, table = _run(monkeypatch, [{'profiles': {'1g.23gb': 7}}], [],
                                 gpu_profiles={'NVIDIA GB200': {'1g.23gb': 'seven'}})
    assert failed
    assert result['msg'] == "gpu_profiles: NVIDIA GB200: the count for 1g.23gb must be a whole number >= 1, got 'seven'"
    assert table.ran == []
