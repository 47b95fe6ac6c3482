# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The typed GPU record: converters, the PCI bus id spelling, CPU lists and the --query CSV reader."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import gpu_record
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    GPU_RECORD,
    PROCESS,
    QUERIES,
    compact_cpu_list,
    expand_cpu_list,
    normalize_pci_bus_id,
    parse_query_csv,
    to_bool_mode,
    to_float,
    to_int,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_xml
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.record_checks import leaves, type_errors

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'nvidia_smi')
XML_FIXTURES = sorted(name for name in os.listdir(FIXTURES) if name.endswith('.xml'))


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.mark.parametrize('raw, value', [
    ('Enabled', True), ('Disabled', False), ('On', True), ('Off', False), ('Yes', True), ('No', False),
    ('Active', True), ('Not Active', False), (' enabled ', True), (True, True), (False, False),
    ('[N/A]', None), ('N/A', None), ('[Not Supported]', None), ('', None), (None, None), ('[Unknown Error]', None),
])
def test_to_bool_mode(raw, value):
    assert to_bool_mode(raw) is value


@pytest.mark.parametrize('raw', ['Maybe', 'Default', '1'])
def test_to_bool_mode_refuses_other_words(raw):
    with pytest.raises(ValueError):
        to_bool_mode(raw)


@pytest.mark.parametrize('raw, value', [
    ('81920 MiB', 81920), ('16x', 16), ('45 C', 45), ('-2 C', -2), ('1410 MHz', 1410), ('4', 4), ('512.0', 512),
    ('[N/A]', None), ('', None),
])
def test_to_int(raw, value):
    assert to_int(raw) == value
    assert type(to_int(raw)) is type(value)


@pytest.mark.parametrize('raw', ['lots', '12.5 MiB', '0x0001', 'Enabled'])
def test_to_int_refuses_text_and_fractions(raw):
    with pytest.raises(ValueError):
        to_int(raw)


@pytest.mark.parametrize('raw, value', [('67.03 W', 67.03), ('500 W', 500.0), ('300.00', 300.0), ('[N/A]', None)])
def test_to_float(raw, value):
    assert to_float(raw) == value
    assert type(to_float(raw)) is type(value)


@pytest.mark.parametrize('value, expected', [
    # nvidia-smi, lspci -D, the kernel log (function implied), lspci (domain implied)
    ('00000000:07:00.0', '0000:07:00.0'),
    ('00000000:3B:00.0', '0000:3b:00.0'),
    ('0000:07:00.0', '0000:07:00.0'),
    ('PCI:0000:3b:00', '0000:3b:00.0'),
    ('0009:01:00', '0009:01:00.0'),
    ('3b:00.0', '0000:3b:00.0'),
    (' 0f:00.1 ', '0000:0f:00.1'),
    ('not a pci id', None),
    ('0000:07:00.9', None),
    ('0000:07:20.0', None),
    ('', None),
    (None, None),
])
def test_normalize_pci_bus_id(value, expected):
    assert normalize_pci_bus_id(value) == expected


@pytest.mark.parametrize('text, cpus', [
    ('0-3,8-9', [0, 1, 2, 3, 8, 9]),
    ('5', [5]),
    ('0-1, 4', [0, 1, 4]),
    ('N/A', None),
    (None, None),
])
def test_expand_cpu_list(text, cpus):
    assert expand_cpu_list(text) == cpus


def test_cpu_lists_round_trip_in_slurm_form():
    cpus = expand_cpu_list('0-47,96-143')
    assert len(cpus) == 96 and cpus[47:49] == [47, 96]
    assert compact_cpu_list(cpus) == '0-47,96-143'
    assert compact_cpu_list([3, 1, 2, 7]) == '1-3,7'
    assert compact_cpu_list([]) == ''


@pytest.mark.parametrize('text', ['0-', '4-2', 'a-b', '0;1'])
def test_expand_cpu_list_refuses_garbage(text):
    with pytest.raises(ValueError):
        expand_cpu_list(text)


# ---------------------------------------------------------------- the record

@pytest.mark.parametrize('name', XML_FIXTURES)
def test_parse_xml_gives_well_typed_records(name):
    for gpu in parse_xml(fixture(name))['gpus']:
        assert type_errors(gpu, GPU_RECORD) == []


def _record_type(path):
    shape = GPU_RECORD
    for key in path:
        shape = shape[key] if key in shape else shape['*']
    return shape


@pytest.mark.parametrize('field', sorted(QUERIES['gpu']))
def test_query_fields_land_on_record_keys_of_the_same_type(field):
    path, kind = QUERIES['gpu'][field]
    expected = {'str': str, 'text': str, 'pci': str, 'int': int, 'float': float, 'bool': bool}[kind]
    if path[0] in GPU_RECORD:
        record_type = _record_type(path)
        assert expected in (record_type if isinstance(record_type, tuple) else (record_type,)), field
    else:
        # Keys only a CSV row has (driver_version, count, compute_cap, pci parts) are identifiers or counts.
        assert kind in ('str', 'int'), field


def test_every_mapped_query_field_lands_inside_the_record():
    fields = [f for f, (path, _kind) in QUERIES['gpu'].items() if path[0] in GPU_RECORD]
    row = ', '.join('[N/A]' for _field in fields)
    csv_gpu = parse_query_csv(row + '\n', fields)[0]
    # type_errors names any key the record does not have.
    assert type_errors(csv_gpu, GPU_RECORD) == []
    assert all(value is None for value in leaves(csv_gpu).values())


def test_xml_and_csv_readings_of_one_gpu_agree():
    # Values of the Tesla T4 of tesla-t4_515_q.xml, printed as --query-gpu would print them.
    xml_gpu = parse_xml(fixture('tesla-t4_515_q.xml'))['gpus'][0]
    fields = ('index,pci.bus_id,persistence_mode,ecc.mode.current,mig.mode.current,memory.total,power.limit,'
              'temperature.gpu,pcie.link.width.current,clocks_throttle_reasons.sw_power_cap')
    text = '0, 00000000:00:1E.0, %s, Enabled, [N/A], 15360 MiB, 70.00 W, %d, 8, Not Active\n' % (
        'Enabled' if xml_gpu['persistence_mode'] else 'Disabled', xml_gpu['temperature']['gpu_c'])
    csv_gpu = parse_query_csv(text, fields)[0]
    csv_leaves, xml_leaves = leaves(csv_gpu), leaves(xml_gpu)
    for key, value in csv_leaves.items():
        assert xml_leaves[key] == value and type(xml_leaves[key]) is type(value), key


def test_compute_apps_rows_are_process_records():
    rows = parse_query_csv('GPU-1, 1234, python train.py, 1024 MiB\n', 'gpu_uuid,pid,process_name,used_gpu_memory',
                           query='compute-apps')
    assert rows == [{'gpu_uuid': 'GPU-1', 'pid': 1234, 'name': 'python train.py', 'used_memory_mib': 1024}]
    assert type_errors(dict((k, v) for k, v in rows[0].items() if k in PROCESS), PROCESS) == []


# ------------------------------------------------------- commas in free text

@pytest.mark.parametrize('line, name', [
    ('1234, python train.py --a,b, 1024 MiB', 'python train.py --a,b'),
    ('1234, python -c "x, y = 1, 2", 1024 MiB', 'python -c "x, y = 1, 2"'),
    ('1234, /usr/bin/python3, 1024 MiB', '/usr/bin/python3'),
])
def test_the_process_name_takes_back_the_commas_it_holds(line, name):
    rows = parse_query_csv(line + '\n', 'pid,process_name,used_gpu_memory', query='compute-apps')
    assert rows == [{'pid': 1234, 'name': name, 'used_memory_mib': 1024}]


def test_commas_in_the_process_name_with_a_header_and_gpu_columns():
    text = ('gpu_name, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]\n'
            'NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 4242, torchrun --nproc,8 train.py, 30000 MiB\n')
    rows = parse_query_csv(text, 'gpu_name,gpu_bus_id,pid,process_name,used_gpu_memory', query='compute-apps')
    assert rows == [{'gpu_name': 'NVIDIA A100-SXM4-80GB', 'gpu_pci_bus_id': '0000:07:00.0', 'pid': 4242,
                     'name': 'torchrun --nproc,8 train.py', 'used_memory_mib': 30000}]


def test_fields_can_come_from_the_header():
    text = 'pid, process_name, used_gpu_memory [MiB]\n7, a,b, 3 MiB\n'
    assert parse_query_csv(text, None, query='compute-apps') == [{'pid': 7, 'name': 'a,b', 'used_memory_mib': 3}]
    assert parse_query_csv('', None) == []


def test_a_gpu_row_lets_the_name_take_extra_commas():
    assert parse_query_csv('0, Some, GPU, 81920\n', 'index,name,memory.total') == [
        {'index': 0, 'name': 'Some, GPU', 'memory_total_mib': 81920}]


@pytest.mark.parametrize('text, fields, query', [
    # Two free-text fields: which one held the comma cannot be known.
    ('0, a, b, c\n', 'index,name,gpu_name', 'gpu'),
    # No free-text field at all.
    ('0, 1, 2\n', 'index,memory.total', 'gpu'),
    # Too few cells.
    ('0\n', 'index,memory.total', 'gpu'),
])
def test_rows_that_do_not_fit_are_refused(text, fields, query):
    with pytest.raises(ValueError):
        parse_query_csv(text, fields, query=query)


@pytest.mark.parametrize('text, fields', [
    ('0, Maybe\n', 'index,persistence_mode'),
    ('0, lots\n', 'index,power.limit'),
    ('0, 99:99\n', 'index,pci.bus_id'),
])
def test_values_that_do_not_type_are_refused(text, fields):
    with pytest.raises(ValueError):
        parse_query_csv(text, fields)


def test_unknown_query_is_refused():
    with pytest.raises(ValueError):
        parse_query_csv('1\n', 'x', query='bogus')


def test_fields_outside_the_table_keep_their_name_typed_by_shape():
    rows = parse_query_csv('570.195.03, 12, Supported, 0x0000000000000001\n',
                           'gsp.version,encoder.stats.sessionCount,power.management,clocks_event_reasons.active')
    assert rows == [{'gsp.version': '570.195.03', 'encoder.stats.sessionCount': 12, 'power.management': 'Supported',
                     'clocks_event_reasons.active': '0x0000000000000001'}]


def test_the_record_file_imports_nothing_of_ansible():
    # The mig role installs it next to its boot script, where no Ansible is.
    with open(gpu_record.__file__) as handle:
        source = handle.read()
    assert 'import ansible' not in source and 'from ansible' not in source
