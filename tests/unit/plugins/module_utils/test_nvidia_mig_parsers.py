# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parsers of ``nvidia-smi mig`` output against real captures (see fixtures/nvidia_mig/SOURCES.md)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_mig import (
    MigParseError,
    current_layout,
    describe_layout,
    expand_desired,
    is_empty_listing,
    is_full_compute_instance,
    layout_counts,
    layout_matches,
    parse_compute_instances,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_mig_command_output,
    profile_short_name,
    profile_slices,
    validate_layout,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'nvidia_mig')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ---------------------------------------------------------------- -lgip

# (fixture, gpus, number of profiles per GPU, {name: (id, free, total, memory GiB, slices)} spot checks)
LGIP_CASES = [
    ('a100-sxm4-40gb_580_lgip.txt', [0], 7, {
        '1g.5gb': (19, 0, 7, 4.75, 1), '1g.5gb+me': (20, 0, 1, 4.75, 1), '1g.10gb': (15, 0, 4, 9.75, 1),
        '3g.20gb': (9, 0, 2, 19.62, 3), '7g.40gb': (0, 0, 1, 39.38, 7)}),
    ('a100-sxm4-40gb_x2_lgip_all_used.txt', [0, 1], 7, {
        '2g.10gb': (14, 0, 3, 9.62, 2), '4g.20gb': (5, 0, 1, 19.5, 4), '7g.40gb': (0, 0, 1, 39.25, 7)}),
    ('h100-80gb-hbm3_lgip.txt', [0], 7, {
        '1g.10gb': (19, 7, 7, 9.75, 1), '1g.20gb': (15, 4, 4, 19.62, 1), '3g.40gb': (9, 2, 2, 39.5, 3),
        '7g.80gb': (0, 1, 1, 79.25, 7)}),
    ('a30_535_lgip.txt', [0], 5, {
        '1g.6gb': (14, 4, 4, 5.81, 1), '2g.12gb+me': (6, 1, 1, 11.69, 2), '4g.24gb': (0, 1, 1, 23.44, 4)}),
    ('a30_lgip_all_used.txt', [0], 4, {'1g.6gb': (14, 0, 4, 5.81, 1), '4g.24gb': (0, 0, 1, 23.5, 4)}),
    ('gh200-96gb_lgip.txt', [0], 7, {
        '1g.12gb': (19, 7, 7, 11.0, 1), '1g.24gb': (15, 4, 4, 23.0, 1), '7g.96gb': (0, 1, 1, 93.0, 7)}),
    ('rtx-pro-6000-blackwell_lgip.txt', [0], 11, {
        '1g.24gb+me.all': (65, 1, 1, 23.62, 1), '1g.24gb-me': (67, 4, 4, 23.62, 1),
        '2g.48gb+gfx': (35, 2, 2, 47.38, 2), '4g.96gb': (0, 1, 1, 95.12, 4), '4g.96gb+gfx': (32, 1, 1, 95.12, 4)}),
]


@pytest.mark.parametrize('name, gpus, per_gpu, spot', LGIP_CASES, ids=[c[0] for c in LGIP_CASES])
def test_lgip_real_outputs(name, gpus, per_gpu, spot):
    profiles = parse_gpu_instance_profiles(fixture(name))
    assert sorted(set(p['gpu'] for p in profiles)) == gpus
    for gpu in gpus:
        assert len([p for p in profiles if p['gpu'] == gpu]) == per_gpu
    by_name = dict((p['name'], p) for p in profiles if p['gpu'] == gpus[-1])
    for profile, (pid, free, total, memory, slices) in spot.items():
        row = by_name[profile]
        assert (row['profile_id'], row['free'], row['total'], row['memory_gib'], row['slices']) == \
            (pid, free, total, memory, slices)
        assert row['p2p'] is False


def test_lgip_second_line_fills_ce_jpeg_ofa():
    profiles = parse_gpu_instance_profiles(fixture('h100-80gb-hbm3_lgip.txt'))
    whole = [p for p in profiles if p['name'] == '7g.80gb'][0]
    assert (whole['sm'], whole['dec'], whole['enc'], whole['ce'], whole['jpeg'], whole['ofa']) == (132, 7, 0, 8, 7, 1)
    one = [p for p in profiles if p['name'] == '1g.10gb+me'][0]
    assert (one['ce'], one['jpeg'], one['ofa']) == (1, 1, 1)


def test_lgip_mig_disabled_is_empty():
    assert parse_gpu_instance_profiles(fixture('mig_disabled.txt')) == []
    assert is_empty_listing(fixture('mig_disabled.txt'))


# ---------------------------------------------------------------- -lgi

LGI_CASES = [
    ('a100-sxm4-40gb_580_lgi_mixed.txt', [(9, '1g.5gb', 19, 6, 1), (3, '2g.10gb', 14, 4, 2), (2, '4g.20gb', 5, 0, 4)]),
    ('a100-sxm4-40gb_mig-user-guide_lgi_2x3g.txt', [(1, '3g.20gb', 9, 4, 4), (2, '3g.20gb', 9, 0, 4)]),
    ('h100-80gb-hbm3_lgi_7x1g.txt', [(gi, '1g.10gb', 19, gi - 7, 1) for gi in range(7, 14)]),
    ('a30_535_lgi_mixed.txt', [(3, '1g.6gb', 14, 0, 1), (4, '1g.6gb', 14, 1, 1), (2, '2g.12gb', 5, 2, 2)]),
    ('a30_lgi_4x1g.txt', [(gi, '1g.6gb', 14, gi - 3, 1) for gi in range(3, 7)]),
    ('rtx-pro-6000-blackwell_lgi_mixed.txt', [(5, '1g.24gb', 14, 6, 3), (6, '1g.24gb', 14, 9, 3), (1, '2g.48gb', 5, 0, 6)]),
]


@pytest.mark.parametrize('name, expected', LGI_CASES, ids=[c[0] for c in LGI_CASES])
def test_lgi_real_outputs(name, expected):
    instances = parse_gpu_instances(fixture(name))
    got = [(i['gpu_instance_id'], i['name'], i['profile_id'], i['placement']['start'], i['placement']['size'])
           for i in instances]
    assert got == expected
    assert all(i['gpu'] == 0 for i in instances)


@pytest.mark.parametrize('name', ['a30_535_lgi_none.txt', 'mig_disabled.txt'])
def test_lgi_empty_messages(name):
    assert parse_gpu_instances(fixture(name)) == []
    assert is_empty_listing(fixture(name))


# ---------------------------------------------------------------- -lci

def test_lci_with_partial_compute_instances():
    cis = parse_compute_instances(fixture('a100-sxm4-40gb_580_lci_mixed.txt'))
    got = [(c['gpu_instance_id'], c['name'], c['profile_id'], c['compute_instance_id'], c['placement']) for c in cis]
    assert got == [
        (9, '1g.5gb', 0, 0, {'start': 0, 'size': 1}),
        (3, '1c.2g.10gb', 0, 0, {'start': 0, 'size': 1}),
        (3, '1c.2g.10gb', 0, 1, {'start': 1, 'size': 1}),
        (2, '4g.20gb', 3, 0, {'start': 0, 'size': 4}),
    ]


def test_lci_without_placement_column():
    cis = parse_compute_instances(fixture('a100_mig-user-guide_lci_no_placement.txt'))
    assert [(c['gpu_instance_id'], c['compute_instance_id'], c['placement']) for c in cis] == \
        [(1, 0, None), (1, 1, None), (1, 2, None)]
    assert all(c['name'] == '1c.3g.20gb' for c in cis)


@pytest.mark.parametrize('name, count, gi_ids', [
    ('h100-80gb-hbm3_lci_7x1g.txt', 7, list(range(7, 14))),
    ('rtx-pro-6000-blackwell_lci_4x1g.txt', 4, [3, 4, 5, 6]),
])
def test_lci_one_full_instance_per_gi(name, count, gi_ids):
    cis = parse_compute_instances(fixture(name))
    assert len(cis) == count
    assert [c['gpu_instance_id'] for c in cis] == gi_ids
    assert all(c['compute_instance_id'] == 0 and is_full_compute_instance(c['name']) for c in cis)


# ---------------------------------------------------------------- command output

def test_cgi_output_lists_gpu_and_compute_instances():
    out = parse_mig_command_output(fixture('h100-80gb-hbm3_cgi_7x1g.txt'))
    assert [g['gpu_instance_id'] for g in out['created_gpu_instances']] == [13, 11, 12, 7, 8, 9, 10]
    assert all(g['name'] == '1g.10gb' and g['profile_id'] == 19 for g in out['created_gpu_instances'])
    assert [(c['gpu_instance_id'], c['compute_instance_id'], c['profile_id'])
            for c in out['created_compute_instances']][:2] == [(13, 0, 0), (11, 0, 0)]
    assert out['errors'] == []


def test_cgi_output_mixed_profiles():
    out = parse_mig_command_output(fixture('rtx-pro-6000-blackwell_cgi_mixed.txt'))
    assert [(g['gpu_instance_id'], g['name'], g['profile_id']) for g in out['created_gpu_instances']] == \
        [(1, '2g.48gb', 5), (5, '1g.24gb', 14), (6, '1g.24gb', 14)]
    assert [c['profile_id'] for c in out['created_compute_instances']] == [1, 0, 0]


def test_cci_output_without_compute_instance_id():
    out = parse_mig_command_output(fixture('a100_mig-user-guide_cci_no_ci_id.txt'))
    assert len(out['created_compute_instances']) == 3
    assert all(c['compute_instance_id'] is None and c['gpu_instance_id'] == 1 and c['name'] == '1c.3g.20gb'
               for c in out['created_compute_instances'])


def test_destroy_output():
    out = parse_mig_command_output(fixture('a100_mig-user-guide_dci_dgi.txt'))
    assert [(c['gpu_instance_id'], c['compute_instance_id']) for c in out['destroyed_compute_instances']] == \
        [(1, 0), (1, 1), (1, 2)]
    assert [g['gpu_instance_id'] for g in out['destroyed_gpu_instances']] == [1, 2]
    out = parse_mig_command_output(fixture('h100-80gb-hbm3_dgi_7x1g.txt'))
    assert [g['gpu_instance_id'] for g in out['destroyed_gpu_instances']] == list(range(7, 14))


@pytest.mark.parametrize('name, reason', [
    ('gh200-96gb_cgi_in_use.txt', 'In use by another client'),
    ('gh200-96gb_cgi_insufficient.txt', 'Insufficient Resources'),
    ('rtx-pro-6000-blackwell_dgi_in_use.txt', 'In use by another client'),
])
def test_failure_lines_are_collected(name, reason):
    out = parse_mig_command_output(fixture(name))
    assert len(out['errors']) == 2
    assert all(reason in line for line in out['errors'])
    assert out['created_gpu_instances'] == [] and out['destroyed_gpu_instances'] == []


# ---------------------------------------------------------------- garbage

@pytest.mark.parametrize('parser', [parse_gpu_instance_profiles, parse_gpu_instances, parse_compute_instances])
@pytest.mark.parametrize('text', [
    'Segmentation fault',
    '<html>proxy error</html>',
    '+------+\n| GPU instances: |\n| no body at all |\n',
])
def test_garbage_raises_parse_error(parser, text):
    with pytest.raises(MigParseError):
        parser(text)


def test_changed_row_format_raises_instead_of_dropping_rows():
    text = fixture('h100-80gb-hbm3_lgi_7x1g.txt').replace('|   0  MIG 1g.10gb         19        9', '|   0  MIG')
    with pytest.raises(MigParseError, match='unrecognised GPU instance row'):
        parse_gpu_instances(text)


@pytest.mark.parametrize('parser', [parse_gpu_instance_profiles, parse_gpu_instances, parse_compute_instances])
def test_empty_output_is_empty(parser):
    assert parser('') == []
    assert parser(None) == []


# ---------------------------------------------------------------- names and planning helpers

@pytest.mark.parametrize('raw, short, slices', [
    ('MIG 1g.10gb', '1g.10gb', 1),
    ('3g.40gb', '3g.40gb', 3),
    ('MIG 1g.24gb+me.all', '1g.24gb+me.all', 1),
    ('mig 7G.80GB', '7g.80gb', 7),
    ('1c.2g.10gb', '1c.2g.10gb', 2),
    ('bogus', 'bogus', None),
])
def test_profile_names(raw, short, slices):
    assert profile_short_name(raw) == short
    assert profile_slices(raw) == slices


def test_current_layout_and_counts_from_real_listings():
    gis = parse_gpu_instances(fixture('a100-sxm4-40gb_580_lgi_mixed.txt'))
    cis = parse_compute_instances(fixture('a100-sxm4-40gb_580_lci_mixed.txt'))
    layout = current_layout(0, gis, cis)
    assert [gi['gpu_instance_id'] for gi in layout] == [2, 3, 9]
    assert describe_layout(layout) == ['1g.5gb', '2g.10gb', '4g.20gb']
    # GI 3 holds two 1c.2g.10gb compute instances: it never matches a declared layout.
    assert layout_counts(layout) == ({'4g.20gb': 1, '1g.5gb': 1}, 1)
    assert not layout_matches(layout, {'4g.20gb': 1, '2g.10gb': 1, '1g.5gb': 1})


def test_layout_matches_seven_full_instances():
    layout = current_layout(0, parse_gpu_instances(fixture('h100-80gb-hbm3_lgi_7x1g.txt')),
                            parse_compute_instances(fixture('h100-80gb-hbm3_lci_7x1g.txt')))
    assert layout_matches(layout, {'1g.10gb': 7})
    assert layout_matches(layout, {'1g.10gb': 7, '3g.40gb': 0})
    assert not layout_matches(layout, {'1g.10gb': 6})
    assert not layout_matches(current_layout(1, [], []), {'1g.10gb': 1})
    assert layout_matches(current_layout(1, [], []), {})


def test_gpu_instance_without_compute_instance_does_not_match():
    layout = current_layout(0, parse_gpu_instances(fixture('h100-80gb-hbm3_lgi_7x1g.txt')), [])
    assert layout_counts(layout) == ({}, 7)


def test_expand_desired_largest_first():
    assert expand_desired({'1g.10gb': 2, '3g.40gb': 1, '2g.20gb': 1}) == ['3g.40gb', '2g.20gb', '1g.10gb', '1g.10gb']
    assert expand_desired({}) == []


H100 = parse_gpu_instance_profiles(fixture('h100-80gb-hbm3_lgip.txt'))
A30 = parse_gpu_instance_profiles(fixture('a30_535_lgip.txt'))


@pytest.mark.parametrize('profiles, desired', [
    (H100, {'1g.10gb': 7}),
    (H100, {'3g.40gb': 2}),
    (H100, {'4g.40gb': 1, '3g.40gb': 1}),
    (H100, {'3g.40gb': 1, '2g.20gb': 1, '1g.10gb': 2}),
    (H100, {'1g.20gb': 4}),
    (H100, {'7g.80gb': 1}),
    (H100, {}),
    (A30, {'1g.6gb': 4}),
    (A30, {'2g.12gb': 1, '1g.6gb': 2}),
    (A30, {'4g.24gb': 1}),
])
def test_valid_layouts(profiles, desired):
    assert validate_layout('GPU 0', desired, profiles) == []


@pytest.mark.parametrize('profiles, desired, message', [
    (H100, {'1g.5gb': 1}, 'MIG profile 1g.5gb is not offered by this GPU; available: 1g.10gb (ID 19, up to 7)'),
    (H100, {'1g.10gb': 8}, '8 x 1g.10gb requested but the GPU holds at most 7'),
    (H100, {'3g.40gb': 2, '1g.10gb': 2}, 'needs 8 compute slices but the GPU has 7'),
    (H100, {'4g.40gb': 1, '1g.20gb': 3}, 'needs 98.36 GiB of GPU memory but the GPU has 79.25 GiB'),
    (A30, {'2g.12gb': 2, '1g.6gb': 1}, 'needs 5 compute slices but the GPU has 4'),
    (A30, {'1g.6gb': -1}, 'must be a whole number >= 0'),
])
def test_invalid_layouts(profiles, desired, message):
    errors = validate_layout('GPU 0 (NVIDIA H100)', desired, profiles)
    assert errors
    assert any(message in error for error in errors), errors
    assert all(error.startswith('GPU 0 (NVIDIA H100)') for error in errors)
