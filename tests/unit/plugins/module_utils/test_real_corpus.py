# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every parser against every byte-exact real capture in fixtures/real (see its SOURCES.md and index.json).

Per capture: the parser for its format runs without an exception, every
"no value" spelling became None, identifiers stayed strings, booleans are
bools, and the number of GPUs parsed is the number the capture shows (counted
here from the text itself, not through the parser). A format this file has no
parser for fails, and so does a missing corpus: nothing is skipped.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import nvidia_mig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    GPU_RECORD,
    PROCESS,
    QUERIES,
    expand_cpu_list,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import (
    classify_failure,
    parse_gpu_list,
    parse_nvlink_status,
    parse_query_csv,
    parse_topology,
    parse_xml,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.record_checks import (
    UNAVAILABLE_TEXT,
    type_errors,
)

CORPUS = os.path.join(os.path.dirname(__file__), 'fixtures', 'real')
INDEX = os.path.join(CORPUS, 'index.json')
_NOT_CAPTURES = ('index.json', 'SOURCES.md', '.gitattributes')


def _index():
    if not os.path.isfile(INDEX):
        return []
    with open(INDEX) as handle:
        return json.load(handle)


ENTRIES = _index()


def _read(entry):
    # Bytes as captured; splitlines() takes CRLF captures (through a TTY) as they are.
    with open(os.path.join(CORPUS, entry['file']), 'rb') as handle:
        return handle.read().decode('utf-8')


def _lines(text):
    return [re.sub(r'\x1b\[[0-9;]*m', '', line) for line in text.splitlines()]


def _strings(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return [value] if isinstance(value, str) else []


def _no_marker_left(value, where):
    left = [text for text in _strings(value) if UNAVAILABLE_TEXT.match(text)]
    assert left == [], '%s: unavailable markers kept as text: %r' % (where, left)


_MODE_WORD = re.compile(r'^(Enabled|Disabled|Yes|No|On|Off|Active|Not Active)$', re.I)


def _no_mode_word_left(row, where):
    # Free text (a process named "yes") may be anything; every other mode is a bool.
    left = dict((key, value) for key, value in row.items()
                if key != 'name' and isinstance(value, str) and _MODE_WORD.match(value))
    assert left == {}, '%s: modes kept as words: %r' % (where, left)


# ------------------------------------------------------------------ formats

def check_xml(entry, text):
    report = parse_xml(text)
    for gpu in report['gpus']:
        assert type_errors(gpu, GPU_RECORD) == [], entry['file']
    assert len(report['gpus']) == len(re.findall(r'<gpu id=', text))
    if entry.get('gpus_in_file') is not None:
        assert len(report['gpus']) == entry['gpus_in_file']
    if entry.get('product_names'):
        assert set(gpu['name'] for gpu in report['gpus']) == set(entry['product_names'])
    if 'trimmed' not in entry['fidelity'] and report['attached_gpus'] is not None:
        assert report['attached_gpus'] == len(report['gpus'])
    if entry.get('mig'):
        assert any(gpu['mig_mode_current'] is True for gpu in report['gpus'])


def _data_lines(entry, text, fields):
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith('WARNING:')]
    has_header = fields is None or 'noheader' not in (entry.get('options') or 'csv')
    return lines[1:] if has_header else lines


def check_query(entry, text):
    query = entry['format'][len('query-'):]
    fields = entry.get('query_fields')
    rows = parse_query_csv(text, fields, query=query)
    assert len(rows) == len(_data_lines(entry, text, fields)), entry['file']
    table = QUERIES[query]
    for row in rows:
        _no_marker_left(row, entry['file'])
        _no_mode_word_left(row, entry['file'])
        if query == 'gpu':
            typed = dict((key, value) for key, value in row.items() if key in GPU_RECORD)
            assert type_errors(typed, GPU_RECORD) == [], entry['file']
        else:
            typed = dict((key, value) for key, value in row.items() if key in PROCESS)
            assert type_errors(typed, PROCESS) == [], entry['file']
            assert all(isinstance(row[key], str) for key in ('gpu_uuid', 'gpu_name', 'gpu_serial') if row.get(key))
        for field in fields or ():
            # Modes nvidia-smi prints as words are booleans in the record.
            if field in table and table[field][1] == 'bool':
                value = row
                for key in table[field][0]:
                    value = value[key]
                assert value is None or isinstance(value, bool), (entry['file'], field, value)
    if query == 'gpu' and rows and 'count' in rows[0] and 'trimmed' not in entry['fidelity']:
        assert set(row['count'] for row in rows) == {len(rows)}


def check_list(entry, text):
    gpus = parse_gpu_list(text)
    lines = text.splitlines()
    assert len(gpus) == len([line for line in lines if re.match(r'^GPU \d+:', line)])
    migs = sum(len(gpu['mig_devices']) for gpu in gpus)
    assert migs == len([line for line in lines if re.match(r'^\s+MIG ', line)])
    if entry.get('mig') is not None:
        assert (migs > 0) is entry['mig'], entry['file']
    for gpu in gpus:
        assert isinstance(gpu['index'], int) and isinstance(gpu['name'], str)


def check_topology(entry, text):
    topology = parse_topology(text)
    rows = [line for line in _lines(text) if re.match(r'^GPU\d+\s', line)]
    assert len(topology['gpus']) == len(rows) == len([d for d in topology['devices'] if d.startswith('GPU')])
    if entry.get('nics') is not None:
        assert bool(topology['nics']) is entry['nics'], entry['file']
    for gpu in topology['gpus']:
        _no_marker_left(gpu, entry['file'])
        # The affinity must be usable for Slurm's Cores=.
        if gpu['cpu_affinity'] is not None:
            assert expand_cpu_list(gpu['cpu_affinity'])


def check_nvlink(entry, text):
    gpus = parse_nvlink_status(text)
    assert len(gpus) == len([line for line in text.splitlines() if re.match(r'^GPU \d+:', line)])
    for gpu in gpus:
        for link in gpu['links']:
            assert isinstance(link['active'], bool) and isinstance(link['link'], int)
            assert link['speed_gbps'] is None or isinstance(link['speed_gbps'], float)


def check_mig(entry, text):
    parser = {'mig-lgip': nvidia_mig.parse_gpu_instance_profiles, 'mig-lgi': nvidia_mig.parse_gpu_instances,
              'mig-lci': nvidia_mig.parse_compute_instances}[entry['format']]
    rows = parser(text)
    # Every data row of the box table is one parsed row (profiles print a second, continuation line).
    data = [line for line in text.splitlines() if re.match(r'^\|\s*\d+\s+(\d+\s+)?MIG\s', line)]
    assert len(rows) == len(data), entry['file']
    assert all(isinstance(row['gpu'], int) for row in rows)


# What the known error captures must be classified as; new ones at least get a reason.
ERROR_REASONS = {
    'errors/unknown_unknown_chaelin-mismatch.txt': 'version_mismatch',
    'errors/unknown_unknown_cndocs-nvml-unknown.txt': 'nvml_unknown_error',
    'errors/rtx-2080-super_591.86_gpuexp-win-topo.txt': 'invalid_argument',
}


def check_errors(entry, text):
    # The capture failed; where the source does not state the exit code, any non-zero one.
    failure = classify_failure(entry.get('exit_code') or 1, text, '')
    assert failure.reason is not None
    if entry['file'] in ERROR_REASONS:
        assert failure.reason == ERROR_REASONS[entry['file']]
    if (entry.get('options') or '').startswith('mig '):
        assert nvidia_mig.parse_mig_command_output(text)['errors']


CHECKS = {
    'q-x': check_xml,
    'query-gpu': check_query,
    'query-compute-apps': check_query,
    'list': check_list,
    'topo': check_topology,
    'nvlink': check_nvlink,
    'mig-lgip': check_mig,
    'mig-lgi': check_mig,
    'mig-lci': check_mig,
    'errors': check_errors,
}


def test_the_corpus_is_there_and_fully_indexed():
    assert os.path.isfile(INDEX), (
        'The real nvidia-smi capture corpus is missing: expected %s (with index.json and SOURCES.md). Without it '
        'the parsers are tested on copied fixtures only.' % INDEX)
    listed = set(entry['file'] for entry in ENTRIES)
    on_disk = set()
    for folder, _dirs, files in os.walk(CORPUS):
        for name in files:
            path = os.path.relpath(os.path.join(folder, name), CORPUS)
            if path not in _NOT_CAPTURES:
                on_disk.add(path)
    assert on_disk == listed, 'files and index.json disagree: %s' % sorted(on_disk ^ listed)
    assert not [entry['format'] for entry in ENTRIES if entry['format'] not in CHECKS], 'formats without a parser'


@pytest.mark.parametrize('entry', ENTRIES, ids=[entry['file'] for entry in ENTRIES])
def test_real_capture(entry):
    assert entry['format'] in CHECKS, 'no parser check for format %r (%s)' % (entry['format'], entry['file'])
    CHECKS[entry['format']](entry, _read(entry))
