# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The acceptance tests that load the GPUs: nvbandwidth and NCCL's all_reduce_perf on one node.

What the tools print, and how a result is judged against the health catalog's
per-model minimums. Running them is the gpu_validation module's business;
this file only reads text and compares numbers, so every rule is tested
without a GPU.

nvbandwidth's plain-text layout (one block per test case) is the one its
output.cpp and inline_common.h write (NVIDIA/nvbandwidth @66746a3, v0.8):
``Running <test>.``, the description, a header of column labels, one row per
source with a value or ``N/A`` per column, a blank line, ``SUM <test> <sum>``.
A test whose filter rejects the host prints ``Waived: `` without its name,
and a test that failed prints ``Error: <message>`` after its ``Running``
line. The plain text is read rather than ``-j``, which only exists from
v0.5 on.

all_reduce_perf's footer is the one src/util.cu writeResultFooter writes
(NVIDIA/nccl-tests @a0b82b2): ``# Out of bounds values : <n> OK|FAILED`` and
``# Avg bus bandwidth    : <%g> [OK|FAILED]``; releases before the optional
check print a trailing blank after the number.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# nvbandwidth test cases, as Azure's check_gpu_bw runs them (azure_gpu_bandwidth.nhc):
# copy engine memcpy, each direction between the host and every GPU, then
# every pair of GPUs reading from each other.
NVBANDWIDTH_HOST_TESTS = ('host_to_device_memcpy_ce', 'device_to_host_memcpy_ce')
NVBANDWIDTH_PEER_TEST = 'device_to_device_memcpy_read_ce'
NVBANDWIDTH_SAMPLES = 10

# GPUs per node on which the catalog's all-reduce minimums were measured
# (Azure's ND sizes: eight GPUs on an NVSwitch board, four on GB200). A node
# with another count is not judged against them; the operator's own value
# in health_thresholds is used on any count.
ALLREDUCE_MEASURED_GPUS = {'A100': 8, 'H100': 8, 'H200': 8, 'GB200': 4}

_RUNNING = re.compile(r'^Running (?P<name>\S+?)\.\s*$')
_STATUS = re.compile(r'^(?P<status>Waived|Error|ERROR|Not Found):\s*(?P<message>.*)$')
_SUM = re.compile(r'^SUM (?P<name>\S+) (?P<sum>\S+)\s*$')
_VERSION = re.compile(r'^nvbandwidth Version:\s*(?P<version>\S+)')
_NUMBER = re.compile(r'^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$')

_OUT_OF_BOUNDS = re.compile(r'^#\s*Out of bounds values\s*:\s*(?P<count>[0-9]+)\s*(?P<verdict>OK|FAILED)?\s*$')
_AVG_BUSBW = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)\s*(?P<verdict>OK|FAILED)?\s*$')
_NCCL_TESTS_VERSION = re.compile(r'^#\s*nccl-tests version (?P<version>\S+)')
_NGPUS = re.compile(r'^#\s*nThread (?P<threads>[0-9]+) nGpus (?P<gpus>[0-9]+) minBytes (?P<min>[0-9]+) '
                    r'maxBytes (?P<max>[0-9]+)')
_RANK = re.compile(r'^#\s*Rank\s+[0-9]+ ')


class AcceptanceOutputError(ValueError):
    """The tool's output does not have the layout this file reads."""


def _value(cell):
    if cell == 'N/A':
        return None
    if not _NUMBER.match(cell):
        raise AcceptanceOutputError('%r is neither a number nor N/A' % cell)
    return float(cell)


def parse_nvbandwidth(text):
    """``{'version', 'tests': {name: {'status', 'message', 'description', 'columns', 'rows', 'sum'}}}``.

    ``status``: ``passed`` (a matrix was printed), ``error`` (``Error:`` after its
    ``Running`` line) or ``incomplete`` (started, no matrix). ``rows``: ``[(label,
    [value or None, ...])]``, one value per column label. Test cases that were
    waived or unknown do not appear: their plain-text status line has no name.
    Raises AcceptanceOutputError on a matrix it cannot read.
    """
    lines = (text or '').splitlines()
    result = {'version': None, 'tests': {}}
    current = None
    position = 0
    while position < len(lines):
        line = lines[position].rstrip()
        position += 1
        version = _VERSION.match(line)
        if version:
            result['version'] = version.group('version')
            continue
        running = _RUNNING.match(line)
        if running:
            current = {'status': 'incomplete', 'message': '', 'description': None, 'columns': [], 'rows': [],
                       'sum': None}
            result['tests'][running.group('name')] = current
            continue
        status = _STATUS.match(line)
        if status:
            if current is not None and current['status'] == 'incomplete' and status.group('status') != 'Waived':
                current['status'] = 'error'
                current['message'] = status.group('message').strip()
            current = None
            continue
        summed = _SUM.match(line)
        if summed and summed.group('name') in result['tests']:
            try:
                result['tests'][summed.group('name')]['sum'] = float(summed.group('sum'))
            except ValueError:
                raise AcceptanceOutputError('SUM line of %s has no number: %r' % (summed.group('name'), line))
            current = None
            continue
        if current is None or current['description'] is not None or not line.strip():
            continue
        # The description, then the column labels, then one row per source until a blank line.
        current['description'] = line.strip()
        if position >= len(lines):
            raise AcceptanceOutputError('%s: no matrix after its description' % line.strip())
        current['columns'] = lines[position].split()
        position += 1
        while position < len(lines) and lines[position].strip():
            cells = lines[position].split()
            position += 1
            if len(cells) != len(current['columns']) + 1:
                raise AcceptanceOutputError('a row of %d values under %d columns: %r'
                                            % (len(cells) - 1, len(current['columns']), lines[position - 1]))
            current['rows'].append((cells[0], [_value(cell) for cell in cells[1:]]))
        if not current['rows']:
            raise AcceptanceOutputError('%s: a matrix without rows' % current['description'])
        current['status'] = 'passed'
    return result


def _cells(test, peer):
    """(row label, column label, value or None) of every cell; between GPUs, a GPU with itself is skipped
    (N/A in current releases, 0.00 in older ones)."""
    for label, values in test['rows']:
        for column, value in zip(test['columns'], values):
            if not (peer and label == column):
                yield label, column, value


def judge_nvbandwidth(parsed, host_min, peer_min):
    """What falls short of the minimums: ``(problems, lowest)``.

    ``problems``: ``[{'test', 'row', 'column', 'value', 'minimum', 'message'}]``. ``row`` and ``column`` are
    the matrix's labels (the CPU and a GPU between the host and a GPU, two GPUs between GPUs); a cell
    below its minimum has its ``value``, a cell nvbandwidth could not measure has ``value`` None (N/A:
    between two GPUs, no peer access). A test that was asked for and printed no matrix is one problem with
    ``row`` and ``column`` None. ``lowest``: ``{test: lowest measured value}``, for the evidence. A minimum
    of ``None`` leaves its tests unjudged.
    """
    problems, lowest = [], {}
    wanted = [(name, host_min) for name in NVBANDWIDTH_HOST_TESTS if host_min is not None]
    if peer_min is not None:
        wanted.append((NVBANDWIDTH_PEER_TEST, peer_min))
    for name, minimum in wanted:
        test = parsed['tests'].get(name)
        if test is None or test['status'] != 'passed':
            problems.append({'test': name, 'row': None, 'column': None, 'value': None, 'minimum': minimum,
                             'message': (test or {}).get('message') or 'no result (waived or not run)'})
            continue
        cells = list(_cells(test, name == NVBANDWIDTH_PEER_TEST))
        measured = [value for _row, _column, value in cells if value is not None]
        if measured:
            lowest[name] = min(measured)
        for row, column, value in cells:
            if value is None:
                problems.append({'test': name, 'row': row, 'column': column, 'value': None, 'minimum': minimum,
                                 'message': 'not measured (N/A)'})
            elif value < minimum:
                problems.append({'test': name, 'row': row, 'column': column, 'value': value, 'minimum': minimum,
                                 'message': ''})
    return problems, lowest


def parse_all_reduce(text):
    """``{'version', 'gpus', 'min_bytes', 'max_bytes', 'ranks', 'out_of_bounds', 'busbw'}`` of all_reduce_perf.

    ``out_of_bounds`` and ``busbw`` are None when the footer is missing (the
    test stopped before its end). Raises AcceptanceOutputError on a footer
    whose number cannot be read.
    """
    result = {'version': None, 'gpus': None, 'min_bytes': None, 'max_bytes': None, 'ranks': 0,
              'out_of_bounds': None, 'busbw': None}
    for raw in (text or '').splitlines():
        line = raw.strip()
        version = _NCCL_TESTS_VERSION.match(line)
        if version:
            result['version'] = version.group('version')
        header = _NGPUS.match(line)
        if header:
            result['gpus'] = int(header.group('threads')) * int(header.group('gpus'))
            result['min_bytes'], result['max_bytes'] = int(header.group('min')), int(header.group('max'))
        if _RANK.match(line):
            result['ranks'] += 1
        bounds = _OUT_OF_BOUNDS.match(line)
        if bounds:
            result['out_of_bounds'] = int(bounds.group('count'))
        busbw = _AVG_BUSBW.match(line)
        if busbw:
            try:
                result['busbw'] = float(busbw.group('value'))
            except ValueError:
                raise AcceptanceOutputError('the average bus bandwidth is not a number: %r' % line)
    return result


_SIZE = re.compile(r'^(?P<number>[0-9]+)(?P<unit>[KMG]?)$')


def size_bytes(text):
    """Bytes of an nccl-tests size (``8G``, ``512M``, ``1048576``); raises ValueError."""
    match = _SIZE.match(str(text).strip())
    if not match or int(match.group('number')) <= 0:
        raise ValueError('%r is not a size such as 8G, 512M or a number of bytes' % (text,))
    return int(match.group('number')) * {'': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[match.group('unit')]


def allreduce_size(gpus, wanted='auto'):
    """The message size all_reduce_perf runs with: ``wanted``, or with ``auto`` what Azure's checks use:
    16G where every GPU has at least 64 GiB, else 8G (all_reduce_perf with -c 1 holds three buffers)."""
    if wanted != 'auto':
        return wanted
    totals = [gpu.get('memory_total_mib') for gpu in gpus]
    if totals and all(isinstance(total, int) and total >= 64 * 1024 for total in totals):
        return '16G'
    return '8G'
