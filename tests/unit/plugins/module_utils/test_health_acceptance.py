# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading nvbandwidth and all_reduce_perf, and judging them: on nvbandwidth's real README captures and on
outputs composed in the tools' own layouts (fixtures/acceptance/SOURCES.md says which is which)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_acceptance import (
    AcceptanceOutputError,
    allreduce_size,
    judge_nvbandwidth,
    parse_all_reduce,
    parse_nvbandwidth,
    size_bytes,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'acceptance')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_real_readme_captures_parse_without_header_or_sum_lines():
    h2d = parse_nvbandwidth(fixture('nvbandwidth-readme-h2d-8gpu.txt'))
    test = h2d['tests']['host_to_device_memcpy_ce']
    assert test['status'] == 'passed' and test['sum'] is None and h2d['version'] is None
    assert test['description'] == 'memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)'
    assert test['columns'] == [str(n) for n in range(8)]
    assert test['rows'] == [('0', [26.03, 25.94, 25.97, 26.00, 26.19, 25.95, 26.00, 25.97])]
    write = parse_nvbandwidth(fixture('nvbandwidth-readme-d2d-write-8gpu.txt'))['tests']['device_to_device_memcpy_write_ce']
    assert len(write['rows']) == 8
    assert write['rows'][6] == ('6', [274.89, 276.41, 276.38, 276.67, 276.41, 276.26, 0.0, 276.33])
    bidir = parse_nvbandwidth(fixture('nvbandwidth-readme-h2d-bidir-8gpu.txt'))
    assert bidir['tests']['host_to_device_bidirectional_memcpy_ce']['rows'][0][1][3] == 19.59


def test_real_readme_h2d_against_the_catalog_minimums():
    parsed = parse_nvbandwidth(fixture('nvbandwidth-readme-h2d-8gpu.txt'))
    # 26 GB/s: above A100's 21, below H100's 48 on every GPU.
    assert judge_nvbandwidth(parsed, 21, None) == ([{'test': 'device_to_host_memcpy_ce', 'row': None, 'column': None,
                                                     'value': None, 'minimum': 21,
                                                     'message': 'no result (waived or not run)'}],
                                                   {'host_to_device_memcpy_ce': 25.94})
    only_h2d = dict(parsed, tests=dict(parsed['tests'], device_to_host_memcpy_ce=parsed['tests']['host_to_device_memcpy_ce']))
    problems, lowest = judge_nvbandwidth(only_h2d, 48, None)
    assert len(problems) == 16 and all(p['value'] < 48 and p['row'] == '0' for p in problems)
    assert lowest == {'host_to_device_memcpy_ce': 25.94, 'device_to_host_memcpy_ce': 25.94}


def test_composed_v08_output_with_header_sum_and_na_diagonal():
    parsed = parse_nvbandwidth(fixture('nvbandwidth-composed-h100-8gpu.txt'))
    assert parsed['version'] == 'v0.8'
    assert sorted(parsed['tests']) == ['device_to_device_memcpy_read_ce', 'device_to_host_memcpy_ce',
                                       'host_to_device_memcpy_ce']
    peer = parsed['tests']['device_to_device_memcpy_read_ce']
    assert peer['rows'][3][1][3] is None and all(v is not None for i, v in enumerate(peer['rows'][3][1]) if i != 3)
    assert peer['sum'] == pytest.approx(sum(v for _label, row in peer['rows'] for v in row if v is not None), abs=0.05)
    problems, lowest = judge_nvbandwidth(parsed, 48, 335)
    assert problems == [] and lowest['device_to_device_memcpy_read_ce'] > 335 and lowest['host_to_device_memcpy_ce'] > 48


def _slow(text, test, row, column, value):
    """The composed output with one cell of one test replaced."""
    lines = text.splitlines(True)
    start = lines.index('Running %s.\n' % test)
    index = start + 3 + row
    cells = lines[index].split()
    cells[column + 1] = value
    lines[index] = cells[0] + ''.join('%10s' % cell for cell in cells[1:]) + '\n'
    return ''.join(lines)


def test_a_slow_gpu_and_a_pair_without_peer_access_are_named():
    text = _slow(fixture('nvbandwidth-composed-h100-8gpu.txt'), 'host_to_device_memcpy_ce', 0, 5, '12.40')
    text = _slow(text, 'device_to_device_memcpy_read_ce', 2, 6, 'N/A')
    text = _slow(text, 'device_to_device_memcpy_read_ce', 2, 7, '101.00')
    problems, _lowest = judge_nvbandwidth(parse_nvbandwidth(text), 48, 335)
    assert [(p['test'], p['row'], p['column'], p['value']) for p in problems] == [
        ('host_to_device_memcpy_ce', '0', '5', 12.4),
        ('device_to_device_memcpy_read_ce', '2', '6', None),
        ('device_to_device_memcpy_read_ce', '2', '7', 101.0)]
    # Unjudged without a minimum.
    assert judge_nvbandwidth(parse_nvbandwidth(text), None, None) == ([], {})


def test_errors_and_waived_tests():
    text = ('Running host_to_device_memcpy_ce.\nError: CUDA_ERROR_NO_DEVICE\n'
            'Waived: \n')
    parsed = parse_nvbandwidth(text)
    assert parsed['tests'] == {'host_to_device_memcpy_ce': {
        'status': 'error', 'message': 'CUDA_ERROR_NO_DEVICE', 'description': None, 'columns': [], 'rows': [],
        'sum': None}}
    problems, _lowest = judge_nvbandwidth(parsed, 48, 335)
    assert [(p['test'], p['message']) for p in problems] == [
        ('host_to_device_memcpy_ce', 'CUDA_ERROR_NO_DEVICE'),
        ('device_to_host_memcpy_ce', 'no result (waived or not run)'),
        ('device_to_device_memcpy_read_ce', 'no result (waived or not run)')]


@pytest.mark.parametrize('text', [
    'Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n   0    1\n0  26.03\n',
    'Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n   0\n0  fast\n',
    'Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n',
    'Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n   0\n\n',
])
def test_matrices_it_cannot_read_raise(text):
    with pytest.raises(AcceptanceOutputError):
        parse_nvbandwidth(text)


def test_all_reduce_perf_composed_output():
    parsed = parse_all_reduce(fixture('all_reduce_perf-composed-h100-8gpu.txt'))
    assert parsed == {'version': '2.17.6', 'gpus': 8, 'min_bytes': 17179869184, 'max_bytes': 17179869184,
                      'ranks': 8, 'out_of_bounds': 0, 'busbw': 473.425}


@pytest.mark.parametrize('footer, bounds, busbw', [
    # Releases before NCCL_TESTS_MIN_BW print a blank after the number; later ones OK or FAILED when it is set.
    ('# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 448.212\n#\n', 0, 448.212),
    ('# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 194.675 \n#\n', 0, 194.675),
    ('# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 401.5 FAILED\n', 3, 401.5),
    ('# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.2e+02 OK\n', 0, 120.0),
    # Stopped before its footer (a CUDA or NCCL failure).
    ('all_reduce_perf: common.cu:1000 NCCL failure common.cu 1000 \'unhandled cuda error\'\n', None, None),
])
def test_all_reduce_perf_footers(footer, bounds, busbw):
    parsed = parse_all_reduce('# nThread 1 nGpus 8 minBytes 268435456 maxBytes 2147483648 step: 2(factor)\n' + footer)
    assert (parsed['out_of_bounds'], parsed['busbw'], parsed['gpus']) == (bounds, busbw, 8)


def test_all_reduce_perf_footer_without_a_number_raises():
    with pytest.raises(AcceptanceOutputError):
        parse_all_reduce('# Avg bus bandwidth    : nan-ish\n')


@pytest.mark.parametrize('text, expected', [('16G', 16 << 30), ('512M', 512 << 20), ('8', 8), ('64K', 64 << 10)])
def test_sizes(text, expected):
    assert size_bytes(text) == expected


@pytest.mark.parametrize('text', ['', '0', '16GB', '-1G', '1.5G', 'auto'])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        size_bytes(text)


def test_auto_size_follows_gpu_memory():
    assert allreduce_size([{'memory_total_mib': 81559}] * 8) == '16G'
    assert allreduce_size([{'memory_total_mib': 40960}] * 8) == '8G'
    assert allreduce_size([{'memory_total_mib': None}]) == '8G'
    assert allreduce_size([{'memory_total_mib': 81559}], '4G') == '4G'
