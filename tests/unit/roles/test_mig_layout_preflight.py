# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role refuses, in preflight, a layout the GPUs cannot hold: run by
ansible-playbook on this machine against the simulated nvidia-smi (the
A100 and H100 profiles of tests/nvidia_sim, and one fictional model that the
collection's profile table does not know).

Refused means before the first change: the call log of the simulated
nvidia-smi shows no MIG mode request, no GPU reset and no instance created or
destroyed, and MIG mode is as it was. Layouts that fit go through, MIG mode off
included, so that the table does not refuse what the GPU accepts.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.test_mig_role_on_simulator import run_case_plays
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import SETUP, SIM_DIR, SimHost, make_host

# A MIG-capable GPU of a model the table does not have: the simulated A100's
# profiles under a made-up product name, MIG mode off.
UNKNOWN_MODEL = 'NVIDIA Example X1'
# What changes a GPU: MIG mode requests, resets, instances created or destroyed.
CHANGING = ('-mig', '-r', '--gpu-reset', '-cgi', '-dgi', '-cci', '-dci')


def _unknown_model_host(root):
    with open(os.path.join(SIM_DIR, 'profiles', 'a100_40gb_mig.json')) as handle:
        profile = json.load(handle)
    profile = copy.deepcopy(profile)
    profile['description'] = 'A fictional MIG GPU model for the mig role tests (the A100 40GB data renamed).'
    for model in profile['models'].values():
        model['product_name'] = UNKNOWN_MODEL
        model['mig']['default_enabled'] = False
    profiles_dir = os.path.join(root, 'usr', 'share', 'nvidia-sim', 'profiles')
    os.makedirs(profiles_dir)
    with open(os.path.join(profiles_dir, 'example_mig_gpu.json'), 'w') as handle:
        json.dump(profile, handle)
    host = SimHost(root)
    host.install_driver('570.195.03')
    prepared = subprocess.run([sys.executable, '-S', '-c', SETUP, SIM_DIR, 'example_mig_gpu', 'load'],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=host.env, check=False)
    assert prepared.returncode == 0, prepared.stderr
    return host


@pytest.fixture
def run_cases(tmp_path):
    def run(cases):
        sims = {}
        for name, case in sorted(cases.items()):
            root = str(tmp_path / name)
            sim = _unknown_model_host(root) if case['profile'] == 'unknown' else make_host(root, case['profile'])
            for args in case.get('setup', []):
                done = sim.smi(*args)
                assert done.returncode == 0, done.stdout + done.stderr
            sim.calls_before = len(sim.calls('nvidia-smi'))
            sims[name] = sim
        outcome, _output = run_case_plays(tmp_path, dict((name, (sims[name], case['vars']))
                                                         for name, case in cases.items()))
        return outcome, sims

    return run


def _flat(text):
    return ' '.join(text.split())


def _changes(sim):
    """nvidia-smi calls of the role run that change a GPU."""
    calls = sim.calls('nvidia-smi')[sim.calls_before:]
    return [c['argv'] for c in calls if any(arg in CHANGING for arg in c['argv'])]


def _mig_mode(sim, gpu=0):
    return sim.smi('-i', str(gpu), '--query-gpu=mig.mode.current', '--format=csv,noheader').stdout.strip()


def test_layouts_the_gpus_cannot_hold_are_refused_before_any_change(run_cases):
    outcome, sims = run_cases({
        # MIG mode on: the GPU's own list.
        'a100_on_unknown_profile': {'profile': 'a100_40gb_mig',
                                    'vars': {'mig_layouts': [{'gpus': [0], 'profiles': {'1g.10gb': 2, '5g.30gb': 1}}]}},
        # MIG mode off: the table (an H100 NVL profile on an A100).
        'a100_off_unknown_profile': {'profile': 'a100_40gb_mig', 'setup': [('-i', '0', '-mig', '0')],
                                     'vars': {'mig_layouts': [{'profiles': {'1g.12gb': 7}}]}},
        # Two 3g.40gb take every memory slice of an H100: no room for a 1g.10gb, although 7 compute slices remain.
        'h100_off_too_many_slices': {'profile': 'hgx_h100_8gpu',
                                     'vars': {'mig_layouts': [{'gpus': [0], 'profiles': {'3g.40gb': 2, '1g.10gb': 1}},
                                                              {'gpus': [1], 'profiles': {'1g.10gb+me': 2}}]}},
        'unknown_model_off': {'profile': 'unknown', 'vars': {'mig_layouts': [{'profiles': {'1g.5gb': 7}}]}},
        'unknown_model_described_too_many': {
            'profile': 'unknown',
            'vars': {'mig_layouts': [{'profiles': {'1g.5gb': 8}}],
                     'mig_gpu_profiles': {UNKNOWN_MODEL: {'1g.5gb': 7, '7g.40gb': 1}}}},
    })
    messages = dict((name, _flat(result.get('msg', ''))) for name, result in outcome.items())
    assert all(result['failed'] for result in outcome.values()), outcome

    assert messages['a100_on_unknown_profile'].startswith(
        'mig_layouts[1] (checked against the profiles the GPU lists, nvidia-smi mig -lgip): GPU 0 '
        '(NVIDIA A100-SXM4-40GB, ')
    assert 'MIG profile 5g.30gb is not offered by this GPU; available: 1g.5gb (ID 19, up to 7)' \
        in messages['a100_on_unknown_profile']
    assert 'Change mig_layouts to profiles and counts the GPU offers' in messages['a100_on_unknown_profile']
    assert messages['a100_on_unknown_profile'].endswith('Nothing was changed.')

    assert messages['a100_off_unknown_profile'].startswith(
        "mig_layouts[1] (MIG mode disabled, checked against the collection's MIG profile table for the A100 40GB): "
        'GPU 0 (NVIDIA A100-SXM4-40GB, ')
    assert ('MIG profile 1g.12gb is not offered by the A100 40GB; its profiles: 1g.5gb (up to 7), 1g.5gb+me (up to 1), '
            '1g.10gb (up to 4), 2g.10gb (up to 3), 3g.20gb (up to 2), 4g.20gb (up to 1), 7g.40gb (up to 1).'
            in messages['a100_off_unknown_profile'])

    assert ("mig_layouts[1] (MIG mode disabled, checked against the collection's MIG profile table for the H100 80GB)"
            in messages['h100_off_too_many_slices'])
    assert ('the layout needs 9 memory slices but the H100 80GB has 8 (1 x 1g.10gb, 2 x 3g.40gb)'
            in messages['h100_off_too_many_slices'])
    # Every wrong entry is named in the same run.
    assert '2 x 1g.10gb+me requested but the GPU holds at most 1' in messages['h100_off_too_many_slices']
    assert 'mig_layouts[2] (' in messages['h100_off_too_many_slices']

    unknown = messages['unknown_model_off']
    assert unknown.startswith('mig_layouts[1] (MIG mode disabled): GPU 0 (%s, ' % UNKNOWN_MODEL)
    assert ('has MIG mode disabled, and the table of MIG profiles does not know its model (%s with 40960 MiB of '
            'memory).' % UNKNOWN_MODEL in unknown)
    assert 'Either enable MIG mode on GPU(s) 0 first' in unknown
    assert 'nvidia-smi -i 0 -mig 1' in unknown and 'profiles: {}' in unknown
    assert 'or describe %s in mig_gpu_profiles, for example {"%s": ' % (UNKNOWN_MODEL, UNKNOWN_MODEL) in unknown
    assert 'Change mig_layouts' not in unknown

    assert ('mig_layouts[1] (MIG mode disabled, checked against mig_gpu_profiles["%s"]): ' % UNKNOWN_MODEL
            in messages['unknown_model_described_too_many'])
    assert '8 x 1g.5gb requested but the GPU holds at most 7' in messages['unknown_model_described_too_many']

    for name, sim in sims.items():
        assert _changes(sim) == [], name
    assert _mig_mode(sims['a100_on_unknown_profile']) == 'Enabled'
    for name in ('a100_off_unknown_profile', 'h100_off_too_many_slices', 'unknown_model_off',
                 'unknown_model_described_too_many'):
        assert _mig_mode(sims[name]) == 'Disabled', name


def test_layouts_that_fit_go_through_with_mig_mode_off(run_cases):
    outcome, sims = run_cases({
        # Every compute and memory slice of an H100, checked against the table, then created.
        'h100_off_fits': {'profile': 'hgx_h100_8gpu', 'vars': {'mig_layouts': [{'gpus': [0], 'profiles': {'3g.40gb': 2}}]}},
        'unknown_model_described': {
            'profile': 'unknown',
            'vars': {'mig_layouts': [{'profiles': {'1g.5gb': 7}}],
                     'mig_gpu_profiles': {UNKNOWN_MODEL: {'1g.5gb': 7, '7g.40gb': 1}}}},
        # No profile named: nothing to check, MIG mode is enabled and no instance created.
        'unknown_model_empty_layout': {'profile': 'unknown', 'vars': {'mig_layouts': [{'profiles': {}}]}},
    })
    assert outcome == dict((name, {'failed': False}) for name in outcome), outcome
    assert sims['h100_off_fits'].smi('-L').stdout.count('MIG 3g.40gb') == 2
    assert sims['unknown_model_described'].smi('-L').stdout.count('MIG 1g.5gb') == 7
    assert _mig_mode(sims['unknown_model_empty_layout']) == 'Enabled'
    assert 'UUID: MIG-' not in sims['unknown_model_empty_layout'].smi('-L').stdout
