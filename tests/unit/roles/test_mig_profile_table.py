# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The table of MIG profiles per GPU model that the mig role checks a layout
against while MIG mode is off (plugins/module_utils/nvidia_mig.py), held
against what GPUs print: the real ``nvidia-smi mig -lgip`` and ``nvidia-smi -L``
captures of the test corpus (tests/unit/plugins/module_utils/fixtures, each
with its source in SOURCES.md) and the simulator's profiles, which are modelled
on them. The table itself comes from NVIDIA's documentation (its ``source``
fields); these tests catch a typo or a wrong count against real output.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import glob
import json
import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_mig import (
    MIG_PROFILE_TABLE,
    find_gpu_model,
    gpu_profiles_models,
    parse_gpu_instance_profiles,
    profile_slices,
    profile_short_name,
    validate_layout_for_model,
)
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import SIM_DIR

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'plugins', 'module_utils',
                        'fixtures')
MODELS = dict((model['model'], model) for model in MIG_PROFILE_TABLE)

# Each real -lgip capture, the table model of its GPU (SOURCES.md names the GPU), and the table's profiles
# its driver does not list: the A30's 2g.12gb+me came with R525 (the MIG User Guide's note), and those two
# captures are of an older or unstated driver.
LGIP_CAPTURES = [
    ('nvidia_mig/a100-sxm4-40gb_580_lgip.txt', 'A100 40GB', ()),
    ('nvidia_mig/a100-sxm4-40gb_x2_lgip_all_used.txt', 'A100 40GB', ()),
    ('real/mig-lgip/a100-sxm4-40gb_450.80.02_mpstest.txt', 'A100 40GB', ()),
    ('nvidia_mig/a30_535_lgip.txt', 'A30 24GB', ()),
    ('nvidia_mig/a30_lgip_all_used.txt', 'A30 24GB', ('2g.12gb+me',)),
    ('real/mig-lgip/a30_unknown_summerlo.txt', 'A30 24GB', ('2g.12gb+me',)),
    ('nvidia_mig/gh200-96gb_lgip.txt', 'H100 96GB', ()),
    ('real/mig-lgip/gh200-480gb_unknown_kfgh.txt', 'H100 96GB', ()),
    ('nvidia_mig/h100-80gb-hbm3_lgip.txt', 'H100 80GB', ()),
    ('nvidia_mig/rtx-pro-6000-blackwell_lgip.txt', 'RTX PRO 6000 Blackwell', ()),
]


def _read(relative):
    with open(os.path.join(FIXTURES, relative)) as handle:
        return handle.read()


@pytest.mark.parametrize('relative, label, not_listed', LGIP_CAPTURES, ids=[c[0] for c in LGIP_CAPTURES])
def test_real_lgip_captures_agree_with_the_table(relative, label, not_listed):
    model = MODELS[label]
    table = model['profiles']
    rows = parse_gpu_instance_profiles(_read(relative))
    assert rows
    for gpu in sorted(set(row['gpu'] for row in rows)):
        own = [row for row in rows if row['gpu'] == gpu]
        assert set(table) - set(row['name'] for row in own) == set(not_listed)
        whole = max(own, key=lambda row: row['memory_gib'])
        assert (whole['slices'], whole['total']) == (model['compute_slices'], 1)
        for row in own:
            entry = table[row['name']]
            assert (row['total'], row['slices']) == (entry['instances'], entry['slices']), row['name']
            # -lgip prints memory, not memory slices: its share of the whole GPU gives them.
            assert round(row['memory_gib'] / whole['memory_gib'] * model['memory_slices']) \
                == entry['memory_slices'], row['name']


def _simulated_models():
    for path in sorted(glob.glob(os.path.join(SIM_DIR, 'profiles', '*.json'))):
        with open(path) as handle:
            profile = json.load(handle)
        for name, model in sorted(profile['models'].items()):
            if model.get('mig'):
                yield '%s:%s' % (os.path.basename(path), name), model


SIMULATED = list(_simulated_models())


def test_the_simulator_has_mig_models():
    names = sorted(model['product_name'] for _id, model in SIMULATED)
    assert names == ['NVIDIA A100-SXM4-40GB', 'NVIDIA H100 80GB HBM3']


@pytest.mark.parametrize('simulated', [m for _i, m in SIMULATED], ids=[i for i, _m in SIMULATED])
def test_simulated_gpus_agree_with_the_table(simulated):
    model = find_gpu_model(simulated['product_name'], simulated['memory']['total_mib'])
    assert model is not None
    mig = simulated['mig']
    assert mig['memory_slices'] == model['memory_slices']
    assert dict((p['name'], (p['instances'], p['compute_slices'], p['size'])) for p in mig['profiles']) == dict(
        (name, (e['instances'], e['slices'], e['memory_slices'])) for name, e in model['profiles'].items())


def _query_gpu_captures():
    """(product name, memory.total MiB) of the real --query-gpu captures that print both."""
    found = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, 'real', 'query-gpu', '*.csv'))):
        with open(path) as handle:
            rows = list(csv.reader(handle))
        header = [re.sub(r'\s*\[.*\]$', '', cell.strip()) for cell in rows[0]]
        if 'name' not in header or 'memory.total' not in header:
            continue
        for row in rows[1:]:
            cells = dict(zip(header, [cell.strip() for cell in row]))
            found.append((os.path.basename(path), cells['name'], int(cells['memory.total'].split()[0])))
    return found


def test_real_gpus_find_their_model():
    models = dict((name, find_gpu_model(product, memory)) for name, product, memory in _query_gpu_captures())
    labels = dict((name, model['model'] if model else None) for name, model in models.items())
    assert labels['h100-80gb-hbm3_590.48.01_gpuexp-idle.csv'] == 'H100 80GB'
    assert labels['h200_590.48.01_gpuexp-idle.csv'] == 'H200 141GB'
    assert labels['l40s_595.80_gpuexp-idle.csv'] is None
    assert labels['rtx-2080-super_595.71.05_gpuexp-idle.csv'] is None


LIST_LINE = re.compile(r'^GPU \d+: (?P<name>.+?) \(UUID: ')
MIG_LINE = re.compile(r'^\s+MIG (?P<profile>\S+)\s+Device\s+\d+: ')
# The model of the GPUs in the real nvidia-smi -L captures with MIG devices (SOURCES.md).
LIST_MODELS = {'NVIDIA A100-SXM4-80GB': 'A100 80GB', 'NVIDIA H100 80GB HBM3': 'H100 80GB', 'NVIDIA H200': 'H200 141GB',
               'NVIDIA GH200 480GB': 'H100 96GB'}


def test_mig_devices_of_real_gpus_use_profiles_of_the_table():
    seen = set()
    for path in sorted(glob.glob(os.path.join(FIXTURES, 'real', 'list', '*.txt'))):
        product = None
        with open(path) as handle:
            for line in handle.read().splitlines():
                match = LIST_LINE.match(line)
                if match:
                    product = match.group('name')
                    continue
                match = MIG_LINE.match(line)
                if match:
                    # 1c.3g.71gb is a compute instance of a 3g.71gb GPU instance.
                    profile = re.sub(r'^\d+c\.', '', profile_short_name(match.group('profile')))
                    assert profile in MODELS[LIST_MODELS[product]]['profiles'], (path, product, profile)
                    seen.add(product)
    assert seen == set(LIST_MODELS)


def test_every_model_is_consistent_and_sourced():
    for model in MIG_PROFILE_TABLE:
        profiles = model['profiles']
        full = [name for name, entry in profiles.items()
                if (entry['slices'], entry['memory_slices']) == (model['compute_slices'], model['memory_slices'])]
        assert full and all(profiles[name]['instances'] == 1 for name in full), model['model']
        for name, entry in profiles.items():
            assert profile_slices(name) == entry['slices'], name
            assert re.match(r'^[0-9]+g\.[0-9]+gb', name), name
            # A profile's instances fit in the GPU by memory slices.
            assert 1 <= entry['instances'] * entry['memory_slices'] <= model['memory_slices'], name
            assert entry['instances'] * entry['slices'] <= model['compute_slices'], name
        assert 'https://' in model['source'], model['model']
        assert re.compile(model['names'])


# memory.total as the simulator and the real captures print it; for GPUs outside the corpus, the nominal size.
@pytest.mark.parametrize('product, memory, label', [
    ('NVIDIA A100-SXM4-40GB', 40960, 'A100 40GB'),
    ('A100-SXM4-40GB', 40960, 'A100 40GB'),  # R450 drivers print no "NVIDIA "
    ('NVIDIA A100-PCIE-40GB', 40960, 'A100 40GB'),
    ('NVIDIA A100-SXM4-80GB', 81920, 'A100 80GB'),
    ('NVIDIA A100 80GB PCIe', 81920, 'A100 80GB'),
    ('NVIDIA GH200 480GB', 96 * 1024, 'H100 96GB'),
    ('NVIDIA GH200 144G HBM3e', 144 * 1024, 'GH200 144GB'),
    ('NVIDIA A30', 24576, 'A30 24GB'),
    ('NVIDIA A30', None, 'A30 24GB'),  # one model of that name: memory not needed
    ('NVIDIA H100 80GB HBM3', 81559, 'H100 80GB'),
    ('NVIDIA H100 NVL', 94 * 1024, 'H100 94GB'),
    ('NVIDIA H200', 143771, 'H200 141GB'),
    ('NVIDIA H200 NVL', 141 * 1024, 'H200 141GB'),
    ('NVIDIA B200', 180 * 1024, 'B200 180GB'),
    ('NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition', 96 * 1024, 'RTX PRO 6000 Blackwell'),
    # Unknown, or several models of that name and no memory size to choose.
    ('NVIDIA H100 80GB HBM3', None, None),
    ('NVIDIA GH200 480GB', None, None),
    ('NVIDIA GB200', 186 * 1024, None),
    ('NVIDIA A100X', 81920, None),
    ('NVIDIA L40S', 46068, None),
    ('NVIDIA H100 80GB HBM3', 40960, None),
    ('', None, None),
])
def test_models_are_found_by_name_and_memory(product, memory, label):
    model = find_gpu_model(product, memory)
    assert (model['model'] if model else None) == label


def test_operator_models_come_first_and_check_names_and_counts_only():
    extra = gpu_profiles_models({'NVIDIA GB200': {'1g.23gb': '7', 'MIG 7g.186gb': 1},
                                 'nvidia h100 80gb hbm3': {'7g.80gb': 1}})
    gb200 = find_gpu_model('NVIDIA  GB200', 186 * 1024, extra)
    assert gb200['source'] == 'gpu_profiles' and gb200['model'] == 'NVIDIA GB200'
    assert find_gpu_model('NVIDIA H100 80GB HBM3', 81559, extra)['model'] == 'nvidia h100 80gb hbm3'
    label = 'GPU 0'
    assert validate_layout_for_model(label, {'1g.23gb': 7, '7g.186gb': 1}, gb200) == []
    assert validate_layout_for_model(label, {'1g.24gb': 1, '1g.23gb': 8}, gb200) == [
        'GPU 0: 8 x 1g.23gb requested but the GPU holds at most 7',
        'GPU 0: MIG profile 1g.24gb is not offered by the NVIDIA GB200; its profiles: 1g.23gb (up to 7), '
        '7g.186gb (up to 1)']


@pytest.mark.parametrize('gpu_profiles, message', [
    ({'NVIDIA GB200': {'1g.23gb': 0}}, 'NVIDIA GB200: the count for 1g.23gb must be a whole number >= 1, got 0'),
    ({'NVIDIA GB200': {'1g.23gb': True}}, 'the count for 1g.23gb must be a whole number >= 1, got True'),
    ({'NVIDIA GB200': {'seven': 7}}, "NVIDIA GB200: 'seven' is not a MIG profile name such as 1g.10gb"),
    ({'NVIDIA GB200': {}}, 'NVIDIA GB200: must map MIG profile names to the most instances of each'),
    ({' ': {'1g.23gb': 7}}, 'a key is empty'),
])
def test_operator_models_are_checked(gpu_profiles, message):
    with pytest.raises(ValueError) as raised:
        gpu_profiles_models(gpu_profiles)
    assert message in str(raised.value)


@pytest.mark.parametrize('label, desired, errors', [
    ('A100 40GB', {'4g.20gb': 1, '3g.20gb': 1}, []),
    ('A100 40GB', {'1g.5gb': 7}, []),
    ('A100 40GB', {'3g.20gb': 2, '7g.40gb': 0}, []),
    ('A100 40GB', {}, []),
    # Seven compute slices, but nine memory slices: two 3g take all eight.
    ('A100 40GB', {'3g.20gb': 2, '1g.5gb': 1},
     ['the layout needs 9 memory slices but the A100 40GB has 8 (1 x 1g.5gb, 2 x 3g.20gb)']),
    ('H100 80GB', {'4g.40gb': 1, '3g.40gb': 1, '1g.10gb': 1},
     ['the layout needs 8 compute slices but the H100 80GB has 7 (1 x 1g.10gb, 1 x 3g.40gb, 1 x 4g.40gb)',
      'the layout needs 9 memory slices but the H100 80GB has 8 (1 x 1g.10gb, 1 x 3g.40gb, 1 x 4g.40gb)']),
    ('H200 141GB', {'1g.35gb': 5}, ['5 x 1g.35gb requested but the GPU holds at most 4']),
    ('A30 24GB', {'2g.12gb': 2, '1g.6gb': 1}, ['the layout needs 5 compute slices but the A30 24GB has 4 '
                                               '(1 x 1g.6gb, 2 x 2g.12gb)',
                                               'the layout needs 5 memory slices but the A30 24GB has 4 '
                                               '(1 x 1g.6gb, 2 x 2g.12gb)']),
    ('RTX PRO 6000 Blackwell', {'2g.48gb': 1, '1g.24gb+gfx': 2}, []),
    ('B200 180GB', {'3g.90gb': -1}, ['the count for profile 3g.90gb must be a whole number >= 0, got -1']),
])
def test_layouts_against_the_table(label, desired, errors):
    found = validate_layout_for_model('GPU 0', desired, MODELS[label])
    assert [e[len('GPU 0: '):] for e in found] == errors
