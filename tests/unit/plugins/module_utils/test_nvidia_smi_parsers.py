# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parser tests driven by real nvidia-smi outputs (see fixtures/nvidia_smi/SOURCES.md)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import nvidia_smi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import compact_cpu_list, expand_cpu_list
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import HINTS

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'nvidia_smi')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def dig(data, path):
    """Follow a dotted path through dicts and lists; a final ``#`` is the length."""
    for part in path.split('.'):
        if part == '#':
            return len(data)
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


# --------------------------------------------------------------- values

@pytest.mark.parametrize('raw', [
    '[N/A]', 'N/A', '[Not Supported]', 'Not Supported', '[Unknown Error]', '[Insufficient Permissions]',
    '[GPU is lost]', '[GPU requires reset]', 'Requested functionality has been deprecated', '', '   ', None,
])
def test_unavailable_markers_become_none(raw):
    assert nvidia_smi.normalize_value(raw) is None


@pytest.mark.parametrize('raw, number', [
    ('81559 MiB', 81559),
    ('67.03 W', 67.03),
    ('16x', 16),
    ('-5 C', -5),
    ('9 %', 9),
    ('4000 KB/s', 4000),
    ('912.500 mV', 912.5),
    ('512 bank(s)', 512),
    ('25483012608 us', 25483012608),
    (' 42 ', 42),
    ('0x0000000000000001', None),
    ('96.00.89.00.01', None),
    ('Enabled', None),
    ('[N/A]', None),
])
def test_to_number_strips_units_and_refuses_identifiers(raw, number):
    assert nvidia_smi.to_number(raw) == number
    assert type(nvidia_smi.to_number(raw)) is type(number)


# ------------------------------------------------------------------ CSV

T4_FIELDS = ['driver_version', 'count', 'name', 'serial', 'uuid', 'pci.bus_id', 'index', 'fan.speed', 'pstate',
             'memory.total', 'memory.used', 'memory.free', 'utilization.memory', 'utilization.gpu',
             'temperature.gpu']
# The same GPU record keys as parse_xml's (see gpu_record.GPU_RECORD).
T4_ROW = {
    'driver_version': '440.100', 'count': 1, 'name': 'Tesla T4', 'serial': '1325219083788',
    'uuid': 'GPU-bbd3f1b1-660a-44b0-911f-169e11579607', 'pci_bus_id': '0000:af:00.0', 'index': 0,
    'fan_speed_percent': None, 'performance_state': 'P0', 'memory_total_mib': 15109, 'memory_used_mib': 2003,
    'memory_free_mib': 13106, 'utilization_memory_percent': 9, 'utilization_gpu_percent': 36,
    'temperature': {'gpu_c': 45},
}
TITAN_FIELDS = 'index,uuid,name,temperature.gpu,utilization.gpu,memory.used,memory.total'

CSV_CASES = [
    ('tesla-t4_440_query-gpu.csv', T4_FIELDS, 'gpu', [T4_ROW]),
    ('tesla-t4_440_query-compute-apps.csv', 'timestamp,gpu_name,gpu_bus_id,pid,process_name,used_gpu_memory',
     'compute-apps', [{
         'timestamp': '2020/10/27 19:41:10.301', 'gpu_name': 'Tesla T4', 'gpu_pci_bus_id': '0000:af:00.0',
         'pid': 6662, 'name': '/usr/local/bin/ffmpeg', 'used_memory_mib': 761}]),
    ('rtx-5070-ti_595_query-gpu.csv',
     ['name', 'driver_version', 'compute_cap', 'memory.total', 'power.limit', 'power.default_limit'], 'gpu', [{
         'name': 'NVIDIA GeForce RTX 5070 Ti', 'driver_version': '595.84', 'compute_cap': '12.0',
         'memory_total_mib': 16303, 'power': {'limit_w': None, 'limit_default_w': None}}]),
    # The header prints the canonical names of the aliases that were queried.
    ('h100-sxm_unknown_query-gpu.csv', 'gpu_name,gpu_bus_id,vbios_version', 'gpu', [
        {'name': 'NVIDIA H100 80GB HBM3', 'pci_bus_id': '0000:04:00.0', 'vbios_version': '96.00.89.00.01'},
        {'name': 'NVIDIA H100 80GB HBM3', 'pci_bus_id': '0000:8b:00.0', 'vbios_version': '96.00.89.00.01'},
    ]),
    ('h200_unknown_query-gpu.csv', 'name,memory.total,pcie.link.gen.max,pcie.link.width.max', 'gpu',
     [{'name': 'NVIDIA H200', 'memory_total_mib': 143771, 'pcie': {'link_gen_max': 5, 'link_width_max': 16}}] * 8),
    ('rtx-4090_unknown_query-gpu.csv', 'name,memory.total,pcie.link.gen.max,pcie.link.width.max', 'gpu',
     [{'name': 'NVIDIA GeForce RTX 4090', 'memory_total_mib': 24564,
       'pcie': {'link_gen_max': 4, 'link_width_max': 16}}]),
    ('gtx-titan-x_unknown_query-gpu-noheader-nounits.csv', TITAN_FIELDS, 'gpu', [
        {'index': 0, 'uuid': 'GPU-10fb0fbd-2696-43f3-467f-d280d906a107', 'name': 'GeForce GTX TITAN X',
         'temperature': {'gpu_c': 80}, 'utilization_gpu_percent': 76, 'memory_used_mib': 8000,
         'memory_total_mib': 12287},
        {'index': 1, 'uuid': 'GPU-d1df4664-bb44-189c-7ad0-ab86c8cb30e2', 'name': 'GeForce GTX TITAN X',
         'temperature': {'gpu_c': 36}, 'utilization_gpu_percent': 0, 'memory_used_mib': 9000,
         'memory_total_mib': 12287},
        {'index': 2, 'uuid': 'GPU-50205d95-57b6-f541-2bcb-86c09afed564', 'name': 'GeForce GTX TITAN X',
         'temperature': {'gpu_c': 71}, 'utilization_gpu_percent': None, 'memory_used_mib': 8520,
         'memory_total_mib': 12287},
    ]),
]


@pytest.mark.parametrize('name, fields, query, rows', CSV_CASES, ids=[case[0] for case in CSV_CASES])
def test_parse_query_csv_fixtures(name, fields, query, rows):
    assert nvidia_smi.parse_query_csv(fixture(name), fields, query=query) == rows


def _nounits(text):
    # What --format=csv,nounits prints for the same query: no "[unit]" in the
    # header, no unit after the values.
    lines = text.splitlines()
    header = ', '.join(cell.split(' [')[0] for cell in lines[0].split(', '))
    rows = [', '.join(cell.split(' ')[0] if cell[:1].isdigit() else cell for cell in line.split(', '))
            for line in lines[1:]]
    return '\n'.join([header] + rows) + '\n'


@pytest.mark.parametrize('variant', ['csv', 'csv,noheader', 'csv,nounits', 'csv,noheader,nounits'])
def test_parse_query_csv_format_variants_agree(variant):
    text = fixture('tesla-t4_440_query-gpu.csv')
    if 'nounits' in variant:
        text = _nounits(text)
    if 'noheader' in variant:
        text = text.split('\n', 1)[1]
    assert nvidia_smi.parse_query_csv(text, T4_FIELDS) == [T4_ROW]


def test_parse_query_csv_keeps_a_lone_lowercase_value_as_data():
    # A process name such as "python" is lower case like a header cell.
    assert nvidia_smi.parse_query_csv('python\n', ['process_name'], query='compute-apps') == [{'name': 'python'}]


def test_parse_query_csv_skips_warning_lines():
    text = 'WARNING: infoROM is corrupted at gpu 0000:AF:00.0\n' + fixture('tesla-t4_440_query-gpu.csv')
    assert nvidia_smi.parse_query_csv(text, T4_FIELDS) == [T4_ROW]


@pytest.mark.parametrize('text', [
    '0, Tesla T4\n',
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    'NVIDIA driver is installed and running.\n',
])
def test_parse_query_csv_rejects_rows_of_the_wrong_width(text):
    with pytest.raises(ValueError):
        nvidia_smi.parse_query_csv(text, T4_FIELDS)


def test_parse_query_csv_needs_fields():
    with pytest.raises(ValueError):
        nvidia_smi.parse_query_csv('0\n', '')


# ------------------------------------------------------------------ XML

XML_CASES = [
    ('a100-sxm4-80gb_535_q.xml', {
        'driver_version': '535.54.03', 'cuda_version': '12.2', 'attached_gpus': 4, 'gpus.#': 1, 'warnings': [],
        'gpus.0.index': 0,
        'gpus.0.name': 'NVIDIA A100-SXM4-80GB',
        'gpus.0.architecture': 'Ampere',
        'gpus.0.uuid': 'GPU-513536b6-7d19-9063-b049-1e69664bb298',
        'gpus.0.serial': '1650522003820',
        'gpus.0.pci_bus_id': '0000:01:00.0',
        'gpus.0.vbios_version': '92.00.36.00.02',
        'gpus.0.board_part_number': '692-2G506-0212-002',
        'gpus.0.module_id': 4,
        'gpus.0.persistence_mode': False,
        'gpus.0.compute_mode': 'Default',
        'gpus.0.mig_mode_current': True,
        'gpus.0.mig_mode_pending': True,
        'gpus.0.ecc_mode_current': True,
        'gpus.0.reset_required': False,
        'gpus.0.memory_total_mib': 81920,
        'gpus.0.memory_reserved_mib': 869,
        'gpus.0.utilization_gpu_percent': None,
        'gpus.0.temperature.gpu_c': 27,
        'gpus.0.temperature.slowdown_c': 89,
        'gpus.0.temperature.shutdown_c': 92,
        'gpus.0.temperature.tlimit_c': None,
        'gpus.0.power.draw_w': 67.03,
        'gpus.0.power.limit_w': 500.0,
        'gpus.0.power.limit_min_w': 100.0,
        'gpus.0.clocks': {'graphics': 1275, 'sm': 1275, 'memory': 1593, 'video': 1275},
        'gpus.0.clocks_max.graphics': 1410,
        'gpus.0.clocks_applications': {'graphics': 1275, 'memory': 1593},
        'gpus.0.supported_clocks.0.memory_mhz': 1593,
        'gpus.0.supported_clocks.0.graphics_mhz.#': 81,
        'gpus.0.supported_clocks.0.graphics_mhz.0': 1410,
        'gpus.0.throttle_reasons.hw_slowdown': False,
        'gpus.0.throttle_reasons_active': [],
        'gpus.0.pcie': {'link_gen_current': 4, 'link_gen_max': 4, 'link_gen_device_current': 4,
                        'link_gen_device_max': 4, 'link_gen_host_max': 4, 'link_width_current': 16,
                        'link_width_max': 16, 'replay_counter': 0},
        'gpus.0.ecc_errors.volatile.dram_uncorrectable': 0,
        'gpus.0.ecc_errors.aggregate_uncorrected': 0,
        'gpus.0.retired_pages': {'single_bit_ecc': None, 'double_bit_ecc': None, 'pending': None},
        'gpus.0.remapped_rows': None,
        'gpus.0.mig_devices.#': 4,
        'gpus.0.mig_devices.0': {
            'index': 0, 'gpu_instance_id': 3, 'compute_instance_id': 0, 'memory_total_mib': 19968,
            'memory_used_mib': 12, 'multiprocessor_count': 14, 'copy_engine_count': 1, 'encoder_count': 0,
            'decoder_count': 1, 'volatile_uncorrectable_sram': 0},
        'gpus.0.mig_devices.3.gpu_instance_id': 6,
        'gpus.0.processes': [],
    }),
    ('tesla-t4_515_q.xml', {
        'driver_version': '515.105.01', 'cuda_version': '11.7', 'attached_gpus': 1, 'gpus.#': 1,
        'gpus.0.name': 'Tesla T4',
        'gpus.0.serial': '0000000000000',
        'gpus.0.pci_bus_id': '0000:00:1e.0',
        'gpus.0.virtualization_mode': 'Pass-Through',
        'gpus.0.mig_mode_current': None,
        'gpus.0.mig_devices': [],
        'gpus.0.ecc_mode_current': True,
        'gpus.0.reset_required': None,
        'gpus.0.temperature.slowdown_c': 93,
        'gpus.0.temperature.memory_c': None,
        # Before R535 the limits sit in <power_readings> as power_limit/enforced_power_limit.
        'gpus.0.power': {'draw_w': 26.78, 'draw_average_w': None, 'draw_instant_w': None, 'limit_w': 70.0,
                         'limit_enforced_w': 70.0,
                         'limit_requested_w': 70.0, 'limit_default_w': 70.0, 'limit_min_w': 60.0,
                         'limit_max_w': 70.0},
        # ... and throttle reasons are clocks_throttle_reasons.
        'gpus.0.throttle_reasons.sw_power_cap': False,
        'gpus.0.throttle_reasons.#': 9,
        'gpus.0.pcie.link_width_current': 8,
        'gpus.0.pcie.link_width_max': 16,
        'gpus.0.pcie.link_gen_device_max': None,
        'gpus.0.retired_pages': {'single_bit_ecc': 0, 'double_bit_ecc': 0, 'pending': False},
        'gpus.0.supported_clocks.#': 2,
        'gpus.0.supported_clocks.1': {'memory_mhz': 405, 'graphics_mhz': list(range(645, 299, -15))},
        'gpus.0.processes': [
            {'pid': 675, 'type': 'G', 'name': '/usr/lib/xorg/Xorg', 'used_memory_mib': 22, 'gpu_instance_id': None,
             'compute_instance_id': None},
            {'pid': 5762, 'type': 'C', 'name': 'python', 'used_memory_mib': 1005, 'gpu_instance_id': None,
             'compute_instance_id': None},
        ],
    }),
    ('rtx-pro-6000-blackwell_590_q.xml', {
        'driver_version': '590.44.01', 'cuda_version': '13.1', 'gpus.#': 1,
        'gpus.0.architecture': 'Blackwell',
        'gpus.0.serial': '0123456789012',
        'gpus.0.vbios_version': '98.02.6A.00.03',
        'gpus.0.module_id': 1,
        'gpus.0.persistence_mode': True,
        'gpus.0.mig_mode_current': None,
        'gpus.0.ecc_mode_current': False,
        'gpus.0.recovery_action': 'None',
        'gpus.0.fan_speed_percent': 30,
        # R590 reports the margin to the thermal limit instead of absolute thresholds.
        'gpus.0.temperature': {'gpu_c': 24, 'memory_c': None, 'slowdown_c': None, 'shutdown_c': None,
                               'max_operating_c': None, 'memory_max_c': None, 'tlimit_c': 68,
                               'slowdown_tlimit_c': -2, 'shutdown_tlimit_c': -5},
        'gpus.0.power.draw_w': 3.99,
        'gpus.0.power.draw_average_w': 3.97,
        'gpus.0.power.limit_max_w': 325.0,
        # "Requested functionality has been deprecated" is no value.
        'gpus.0.clocks_applications': {'graphics': None, 'memory': None},
        'gpus.0.pcie.link_gen_current': 1,
        'gpus.0.pcie.link_gen_max': 4,
        'gpus.0.pcie.link_gen_device_max': 5,
        'gpus.0.ecc_errors.volatile_uncorrected': None,
        'gpus.0.ecc_errors.volatile.sram_uncorrectable_parity': None,
        'gpus.0.remapped_rows': {'correctable': 0, 'uncorrectable': 0, 'pending': False, 'failure': False,
                                 'bank_availability': {'max': 512, 'high': 0, 'partial': 0, 'low': 0, 'none': 0}},
        # Time each clock event reason was active, in microseconds (R535+ XML).
        'gpus.0.clock_event_us': {'sw_power_cap': 25483012608, 'sync_boost': 0, 'sw_thermal_slowdown': 0,
                                  'hw_thermal_slowdown': 0, 'hw_power_brake_slowdown': 0},
        # A GPU outside an NVLink fabric: every fabric field N/A.
        'gpus.0.fabric': dict.fromkeys(('state', 'status', 'clique_id', 'cluster_uuid', 'health_summary',
                                        'health_bandwidth', 'route_recovery_in_progress', 'route_unhealthy',
                                        'access_timeout_recovery', 'incorrect_configuration')),
        'gpus.0.mig_devices': [],
        'gpus.0.processes.0.name': '/root/src/llama.cpp/build/bin/llama-server',
        'gpus.0.processes.0.used_memory_mib': 65710,
    }),
    ('tesla-v100s-pcie-32gb_460_q.xml', {
        'driver_version': '460.73.01', 'cuda_version': '11.2', 'attached_gpus': 8, 'gpus.#': 1,
        'gpus.0.name': 'Tesla V100S-PCIE-32GB',
        'gpus.0.serial': '1562920006088',
        'gpus.0.utilization_gpu_percent': 97,
        'gpus.0.memory_reserved_mib': None,
        'gpus.0.temperature.slowdown_c': 87,
        'gpus.0.power.draw_w': 232.8,
        'gpus.0.clocks_applications': {'graphics': 1245, 'memory': 1107},
        'gpus.0.supported_clocks.0.graphics_mhz.0': 1597,
        'gpus.0.supported_clocks.0.graphics_mhz.1': 1590,
        # Pre-Ampere layout: single_bit/double_bit per memory location, plus totals.
        'gpus.0.ecc_errors.volatile.double_bit_total': 0,
        'gpus.0.ecc_errors.volatile.double_bit_texture_memory': None,
        'gpus.0.ecc_errors.volatile.single_bit_device_memory': 0,
        'gpus.0.ecc_errors.volatile_uncorrected': 0,
        'gpus.0.ecc_errors.aggregate_corrected': 0,
        'gpus.0.retired_pages.pending': False,
        'gpus.0.remapped_rows': None,
        'gpus.0.processes': [],
    }),
]


@pytest.mark.parametrize('name, expected', XML_CASES, ids=[case[0] for case in XML_CASES])
def test_parse_xml_fixtures(name, expected):
    report = nvidia_smi.parse_xml(fixture(name))
    for path, value in expected.items():
        assert dig(report, path) == value, path


@pytest.mark.parametrize('name', [case[0] for case in XML_CASES])
def test_parse_xml_keeps_identifiers_as_strings(name):
    for gpu in nvidia_smi.parse_xml(fixture(name))['gpus']:
        for key in ('serial', 'uuid', 'pci_bus_id', 'vbios_version', 'pci_device_id'):
            assert isinstance(gpu[key], str), key


def _with_ecc_errors(text, volatile_dbe):
    return text.replace('<double_bit>\n                    <device_memory>0</device_memory>',
                        '<double_bit>\n                    <device_memory>%d</device_memory>' % volatile_dbe, 1) \
        .replace('<total>0</total>\n                </double_bit>',
                 '<total>%d</total>\n                </double_bit>' % volatile_dbe, 1)


def test_parse_xml_sums_uncorrectable_errors_of_the_old_layout():
    report = nvidia_smi.parse_xml(_with_ecc_errors(fixture('tesla-v100s-pcie-32gb_460_q.xml'), 3))
    assert report['gpus'][0]['ecc_errors']['volatile_uncorrected'] == 3
    assert report['gpus'][0]['ecc_errors']['aggregate_uncorrected'] == 0


def test_parse_xml_returns_warning_lines_printed_before_the_document():
    text = 'WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n' + fixture('tesla-t4_515_q.xml')
    report = nvidia_smi.parse_xml(text)
    assert report['warnings'] == ['WARNING: infoROM is corrupted at gpu 0000:00:1E.0']
    assert report['gpus'][0]['name'] == 'Tesla T4'


def test_parse_xml_marks_gpus_that_are_lost():
    text = fixture('tesla-t4_515_q.xml').replace('<gpu_temp>40 C</gpu_temp>', '<gpu_temp>[GPU is lost]</gpu_temp>')
    assert nvidia_smi.parse_xml(text)['gpus'][0]['temperature']['gpu_c'] is None


@pytest.mark.parametrize('text', [
    '',
    'No devices were found',
    '<nvidia_smi_log><gpu>',
    '<?xml version="1.0" ?><html></html>',
    # An entity pointing at a local file must never be resolved.
    '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
    '<nvidia_smi_log><driver_version>&e;</driver_version></nvidia_smi_log>',
    '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">'
    '<!ENTITY lol "lol"><nvidia_smi_log></nvidia_smi_log>',
])
def test_parse_xml_rejects_garbage_and_entities(text):
    with pytest.raises(ValueError):
        nvidia_smi.parse_xml(text)


# ------------------------------------------------------------------- -L

LIST_CASES = [
    ('dgx-station-a100-80gb_unknown_list.txt', {
        '#': 4,
        '0.name': 'NVIDIA A100-SXM4-80GB',
        '0.uuid': 'GPU-9434a402-0d94-4ef8-93d0-0528ee662e9c',
        '0.mig_devices.#': 7,
        '0.mig_devices.0': {'profile': '1g.10gb', 'device_index': 0,
                            'uuid': 'MIG-e138a708-679d-5075-ab88-ba8e298ec5d3'},
        '0.mig_devices.6.device_index': 6,
        '1.mig_devices': [],
        '2.name': 'NVIDIA DGX Display',
        '3.index': 3,
    }),
    ('a100-80gb-pcie_unknown_list.txt', {
        '#': 1, '0.name': 'NVIDIA A100 80GB PCIe', '0.mig_devices.#': 7,
        '0.mig_devices.5.uuid': 'MIG-9f4615ad-051d-5aee-8b41-3bda83bff7bb',
    }),
    ('a100-sxm4-80gb_unknown_list-3g40gb.txt', {
        '#': 1, '0.mig_devices': [{'profile': '3g.40gb', 'device_index': 0,
                                   'uuid': 'MIG-dcf43e8e-5d19-5fa8-8b1d-8aaca1e467f0'}],
    }),
]


@pytest.mark.parametrize('name, expected', LIST_CASES, ids=[case[0] for case in LIST_CASES])
def test_parse_gpu_list_fixtures(name, expected):
    listed = nvidia_smi.parse_gpu_list(fixture(name))
    for path, value in expected.items():
        assert dig(listed, path) == value, path


def test_parse_gpu_list_reads_r450_mig_uuids_and_lines_without_uuid():
    # R450/R460 named MIG devices after their GPU; very old drivers print no UUID.
    text = ('GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n'
            '  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)\n'
            'GPU 1: Tesla K80\n')
    assert nvidia_smi.parse_gpu_list(text) == [
        {'index': 0, 'name': 'A100-SXM4-40GB', 'uuid': 'GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77',
         'mig_devices': [{'profile': '1g.5gb', 'device_index': 0,
                          'uuid': 'MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0'}]},
        {'index': 1, 'name': 'Tesla K80', 'uuid': None, 'mig_devices': []},
    ]


@pytest.mark.parametrize('text', [
    'No devices were found\n',
    '  MIG 1g.10gb     Device  0: (UUID: MIG-e138a708-679d-5075-ab88-ba8e298ec5d3)\n',
])
def test_parse_gpu_list_rejects_unexpected_lines(text):
    with pytest.raises(ValueError):
        nvidia_smi.parse_gpu_list(text)


def test_parse_gpu_list_of_nothing_is_empty():
    assert nvidia_smi.parse_gpu_list('') == []


# ------------------------------------------------------------- topo -m

TOPOLOGY_CASES = [
    ('tesla-v100-sxm2-32gb_580_topo.txt', {
        'devices.#': 9, 'gpus.#': 8, 'nics.#': 1,
        'gpus.0.links.GPU1': 'NV1', 'gpus.0.links.GPU3': 'NV2', 'gpus.0.links.GPU5': 'SYS',
        'gpus.0.links.NIC0': 'NODE', 'gpus.0.cpu_affinity': '0-19,40-59', 'gpus.0.numa_affinity': '0',
        'gpus.0.gpu_numa_id': None, 'gpus.7.cpu_affinity': '20-39,60-79', 'gpus.7.numa_affinity': '1',
        'nics.0.name': 'NIC0', 'nics.0.device': 'mlx5_2', 'nics.0.links.GPU4': 'SYS',
    }),
    ('tesla-v100-sxm2-16gb_470_topo.txt', {
        'devices': ['GPU%d' % i for i in range(8)] + ['mlx5_0', 'mlx5_1'], 'gpus.#': 8,
        'gpus.2.links.mlx5_0': 'PIX', 'gpus.6.links.GPU7': 'NV1', 'gpus.0.numa_affinity': '0',
        'gpus.4.cpu_affinity': '24-47,72-95', 'gpus.4.gpu_numa_id': None,
        'nics.1.device': 'mlx5_1', 'nics.1.links.GPU6': 'PIX',
    }),
    ('h200-hgx_unknown_topo.txt', {
        'devices.#': 20, 'gpus.#': 8, 'nics.#': 12,
        'gpus.3.links.GPU7': 'NV18', 'gpus.3.links.NIC5': 'PXB', 'gpus.5.numa_affinity': '1',
        'gpus.0.cpu_affinity': '0-55,112-167', 'nics.11.device': 'mlx5_11', 'nics.7.links.NIC8': 'PIX',
    }),
    ('a100-sxm4-40gb_unknown_topo.txt', {
        'devices.#': 8, 'nics': [], 'gpus.0.links.GPU7': 'NV12', 'gpus.7.numa_affinity': '1',
    }),
    ('titan-v_unknown_topo.txt', {
        'gpus.0.links.GPU1': 'PIX', 'gpus.0.links.GPU2': 'PHB', 'gpus.0.links.GPU4': 'SYS',
        'gpus.5.cpu_affinity': '14-27,42-55', 'gpus.5.numa_affinity': None, 'nics': [],
    }),
]


@pytest.mark.parametrize('name, expected', TOPOLOGY_CASES, ids=[case[0] for case in TOPOLOGY_CASES])
def test_parse_topology_fixtures(name, expected):
    topology = nvidia_smi.parse_topology(fixture(name))
    for path, value in expected.items():
        assert dig(topology, path) == value, path


@pytest.mark.parametrize('name', [case[0] for case in TOPOLOGY_CASES])
def test_parse_topology_matrix_is_symmetric_with_self_on_the_diagonal(name):
    topology = nvidia_smi.parse_topology(fixture(name))
    rows = dict((entry['name'], entry['links']) for entry in topology['gpus'] + topology['nics'])
    for this, links in rows.items():
        assert links[this] == 'X'
        for other, code in links.items():
            assert rows[other][this] == code, (this, other)


def _as_printed(text):
    # nvidia-smi underlines the header row with ESC[4m ... ESC[0m, on a
    # terminal or not; the fixtures above were copied from rendered pages.
    lines = text.split('\n')
    at = next(n for n, line in enumerate(lines) if line.startswith('\t'))
    lines[at] = '\x1b[4m' + lines[at] + '\x1b[0m'
    return '\n'.join(lines)


@pytest.mark.parametrize('name', [case[0] for case in TOPOLOGY_CASES])
def test_parse_topology_reads_the_bytes_nvidia_smi_prints(name):
    assert nvidia_smi.parse_topology(_as_printed(fixture(name))) == nvidia_smi.parse_topology(fixture(name))


# Byte layout of a six-GPU PCIe host as nvidia-smi 5xx prints it: escapes
# around the header, tab-padded cells that do not line up with the header,
# an empty cell between NUMA Affinity and GPU NUMA ID, a NIC column and row,
# and the NIC Legend after the link legend.
SIX_GPU_TOPOLOGY = (
    '\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n'
    'GPU0\t X \tPIX\tNODE\tNODE\tSYS\tSYS\tNODE\t0-23,48-71\t0\t\tN/A\n'
    'GPU1\tPIX\t X \tNODE\tNODE\tSYS\tSYS\tNODE\t0-23,48-71\t0\t\tN/A\n'
    'GPU2\tNODE\tNODE\t X \tPIX\tSYS\tSYS\tPIX\t0-23,48-71\t0\t\tN/A\n'
    'GPU3\tNODE\tNODE\tPIX\t X \tSYS\tSYS\tPIX\t0-23,48-71\t0\t\tN/A\n'
    'GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tSYS\t24-47,72-95\t1\t\tN/A\n'
    'GPU5\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tSYS\t24-47,72-95\t1\t\tN/A\n'
    'NIC0\tNODE\tNODE\tPIX\tPIX\tSYS\tSYS\t X \t\t\t\t\n'
    '\n'
    'Legend:\n'
    '\n'
    '  X    = Self\n'
    '  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n'
    '  PIX  = Connection traversing at most a single PCIe bridge\n'
    '  NV#  = Connection traversing a bonded set of # NVLinks\n'
    '\n'
    'NIC Legend:\n'
    '\n'
    '  NIC0: mlx5_0\n'
)


def test_parse_topology_of_escaped_tab_padded_output():
    topology = nvidia_smi.parse_topology(SIX_GPU_TOPOLOGY)
    assert topology['devices'] == ['GPU0', 'GPU1', 'GPU2', 'GPU3', 'GPU4', 'GPU5', 'NIC0']
    assert [gpu['index'] for gpu in topology['gpus']] == [0, 1, 2, 3, 4, 5]
    assert topology['gpus'][4] == {
        'index': 4, 'name': 'GPU4', 'cpu_affinity': '24-47,72-95', 'numa_affinity': '1', 'gpu_numa_id': None,
        'links': {'GPU0': 'SYS', 'GPU1': 'SYS', 'GPU2': 'SYS', 'GPU3': 'SYS', 'GPU4': 'X', 'GPU5': 'PIX',
                  'NIC0': 'SYS'}}
    assert topology['nics'] == [{'name': 'NIC0', 'device': 'mlx5_0', 'links': {
        'GPU0': 'NODE', 'GPU1': 'NODE', 'GPU2': 'PIX', 'GPU3': 'PIX', 'GPU4': 'SYS', 'GPU5': 'SYS', 'NIC0': 'X'}}]
    # The affinity feeds Slurm's gres.conf Cores=: it expands to CPU ids and back.
    cpus = expand_cpu_list(topology['gpus'][0]['cpu_affinity'])
    assert len(cpus) == 48 and cpus[23:25] == [23, 48]
    assert compact_cpu_list(cpus) == '0-23,48-71'


@pytest.mark.parametrize('text', [
    '',
    'GPU0\tX\n',
    '\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-31\n',
    '\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tFOO\t0-31\nGPU1\tFOO\t X \t0-31\n',
    '\tGPU0\tGPU1\tCPU Affinity\nGPU9\t X \tNV4\t0-31\n',
])
def test_parse_topology_rejects_garbage(text):
    with pytest.raises(ValueError):
        nvidia_smi.parse_topology(text)


# ------------------------------------------------------------ nvlink -s

def test_parse_nvlink_status_v100():
    gpus = nvidia_smi.parse_nvlink_status(fixture('tesla-v100-sxm2-32gb_580_nvlink.txt'))
    assert len(gpus) == 8
    assert gpus[7]['uuid'] == 'GPU-b0d45f0b-6922-8af3-6b29-8826de10b235'
    assert all(len(gpu['links']) == 6 for gpu in gpus)
    assert gpus[0]['links'][5] == {'link': 5, 'active': True, 'speed_gbps': 25.781}


def test_parse_nvlink_status_inactive_link_and_gpu_without_links():
    # H100 PCIe with a bridge, one link down (output quoted in a public note),
    # followed by a GPU that has no NVLink at all.
    text = ('GPU 0: NVIDIA H100 PCIe (UUID: GPU-a1bf2ff6-a98d-edac-a422-0bd80fbd9724)\n'
            '\t Link 0: 26.562 GB/s\n'
            '\t Link 3: 26.562 GB/s\n'
            '\t Link 4: <inactive>\n'
            'GPU 1: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n')
    gpus = nvidia_smi.parse_nvlink_status(text)
    assert gpus[0]['links'] == [
        {'link': 0, 'active': True, 'speed_gbps': 26.562},
        {'link': 3, 'active': True, 'speed_gbps': 26.562},
        {'link': 4, 'active': False, 'speed_gbps': None},
    ]
    assert gpus[1]['links'] == []


@pytest.mark.parametrize('note, known', [
    # Flush left, as current drivers print them under the GPU line.
    ('NVML: Unable to retrieve NVLink information as all links are inactive', True),
    ('NVML: Unable to retrieve Nvlink information as all links are inActive', True),
    ('Nvlink queries are not supported for Devices in MIG mode', False),
    ('Device does not have or support Nvlink', False),
    ('\tNVML: Unable to retrieve NVLink information as all links are inActive', True),
])
def test_parse_nvlink_status_notes_instead_of_links(note, known):
    text = 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a1bf2ff6-a98d-edac-a422-0bd80fbd9724)\n%s\n' % note
    gpu = nvidia_smi.parse_nvlink_status(text)[0]
    assert (gpu['links'], gpu['note'], gpu['links_known']) == ([], note.strip(), known)


def test_parse_nvlink_status_rejects_garbage():
    with pytest.raises(ValueError):
        nvidia_smi.parse_nvlink_status('Failed to initialize NVML: Unknown Error\n')


# --------------------------------------------------------- failure classes

DRIVER_NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
                     'the latest NVIDIA driver is installed and running.\n')
MISMATCH = 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.126\n'
NVML_MISSING = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
                'Display Driver is properly installed and present in your system.\nPlease also try adding '
                'directory that contains libnvidia-ml.so to your system PATH.\n')

FAILURE_CASES = [
    # (id, rc, stdout, stderr, reason)
    ('not on PATH', 127, '', 'nvidia-smi: command not found in PATH', 'not_installed'),
    ('configured path missing', 127, '', '/opt/nvidia/bin/nvidia-smi: No such file or directory', 'not_installed'),
    ('coreutils could not exec', 127, '', "timeout: failed to run command '/usr/bin/nvidia-smi': No such file or "
                                          'directory', 'not_installed'),
    ('not executable', 126, '', "timeout: failed to run command '/usr/bin/nvidia-smi': Permission denied",
     'not_executable'),
    ('driver not loaded', 9, DRIVER_NOT_LOADED, '', 'driver_not_loaded'),
    ('driver not loaded, rc only', 9, '', '', 'driver_not_loaded'),
    ('no devices', 6, 'No devices were found\n', '', 'no_devices'),
    ('no devices, exit 0 on old branches', 0, 'No devices were found\n', '', 'no_devices'),
    ('version mismatch', 18, MISMATCH, '', 'version_mismatch'),
    ('version mismatch, old exit code', 255, MISMATCH, '', 'version_mismatch'),
    ('version mismatch through a wrapper exiting 1', 1, '', MISMATCH, 'version_mismatch'),
    ('NVML missing', 12, NVML_MISSING, '', 'nvml_missing'),
    ('NVML missing, rc only', 12, '', '', 'nvml_missing'),
    ('insufficient permissions', 4, 'Failed to initialize NVML: Insufficient Permissions\n', '',
     'insufficient_permissions'),
    ('infoROM corrupted', 14, 'WARNING: infoROM is corrupted at gpu 0000:02:00.0\n', '', 'inforom_corrupted'),
    ('infoROM warning with exit 0', 0, 'WARNING: infoROM is corrupted at gpu 0000:02:00.0\nTesla T4, 0\n', '',
     'inforom_corrupted'),
    ('fell off the bus', 15, 'Unable to determine the device handle for GPU0000:01:00.0: GPU has fallen off the '
                             'bus.\n', '', 'gpu_lost'),
    ('GPU is lost', 15, 'Unable to determine the device handle for GPU 0000:04:00.0: GPU is lost.  Reboot the system '
                        'to recover this GPU\n', '', 'gpu_lost'),
    ('NVML unknown error in a container', 255, 'Failed to initialize NVML: Unknown Error\n', '',
     'nvml_unknown_error'),
    ('device handle: GPU requires reset', 255, 'Unable to determine the device handle for GPU0000:07:00.0: GPU '
                                               'requires reset\n', '', 'gpu_requires_reset'),
    ('device handle: unknown error', 255, 'Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n',
     '', 'gpu_unreadable'),
    # Printed next to the other GPUs' output, with exit 0, by some branches.
    ('device handle: unknown error, exit 0', 0, 'Unable to determine the device handle for GPU0000:07:00.0: Unknown '
                                                'Error\n0, NVIDIA A100-SXM4-80GB\n', '', 'gpu_unreadable'),
    ('timed out (runner marker)', 124, '', 'nvidia-smi timed out after 30 seconds', 'timeout'),
    ('timed out, rc only', 124, '', '', 'timeout'),
    ('invalid argument', 2, 'Field "foo.bar" is not a valid field to query.\n', '', 'invalid_argument'),
    ('not supported', 3, 'Setting persistence mode is not supported for GPU 00000000:01:00.0.\n', '',
     'not_supported'),
    ('object not found', 6, 'No MIG-enabled devices found.\n', '', 'not_found'),
    ('power cables', 8, '', '', 'power_cables'),
    ('kernel interrupt', 10, '', '', 'kernel_interrupt'),
    ('not implemented', 13, '', '', 'not_implemented'),
    ('anything else', 1, 'Segmentation fault\n', '', 'unknown'),
    # Text beats the exit code: the message names the real cause.
    ('mismatch reported with rc 9', 9, MISMATCH, '', 'version_mismatch'),
]


@pytest.mark.parametrize('rc, stdout, stderr, reason', [case[1:] for case in FAILURE_CASES],
                         ids=[case[0] for case in FAILURE_CASES])
def test_classify_failure(rc, stdout, stderr, reason):
    failure = nvidia_smi.classify_failure(rc, stdout, stderr)
    assert failure.reason == reason
    assert failure.hint == HINTS[reason]


def test_every_failure_class_has_a_case():
    assert set(HINTS) == set(case[-1] for case in FAILURE_CASES)


def test_a_clean_run_is_no_failure():
    assert nvidia_smi.classify_failure(0, fixture('tesla-t4_440_query-gpu.csv'), '') == (None, None, None)


@pytest.mark.parametrize('rc, text, reason, pci', [
    (255, 'Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n', 'gpu_unreadable',
     '0000:07:00.0'),
    (15, 'Unable to determine the device handle for GPU 00000000:3B:00.0: GPU is lost.  Reboot the system to '
         'recover this GPU\n', 'gpu_lost', '0000:3b:00.0'),
    (255, 'Unable to determine the device handle for gpu 0000:C1:00.0: GPU requires reset\n', 'gpu_requires_reset',
     '0000:c1:00.0'),
    (14, 'WARNING: infoROM is corrupted at gpu 0000:02:00.0\n', 'inforom_corrupted', '0000:02:00.0'),
    # The exit code decides, the text still names the GPU.
    (3, 'Setting persistence mode is not supported for GPU 00000000:01:00.0.\n', 'not_supported', '0000:01:00.0'),
    # Messages about the whole host name no GPU; a version is no bus id.
    (18, MISMATCH, 'version_mismatch', None),
    (9, DRIVER_NOT_LOADED, 'driver_not_loaded', None),
    (12, NVML_MISSING, 'nvml_missing', None),
    (6, 'No devices were found\n', 'no_devices', None),
    (4, 'Failed to initialize NVML: Insufficient Permissions\n', 'insufficient_permissions', None),
    (255, 'Failed to initialize NVML: Unknown Error\n', 'nvml_unknown_error', None),
])
def test_classified_failure_names_the_gpu_of_the_message(rc, text, reason, pci):
    failure = nvidia_smi.classify_failure(rc, text, '')
    assert (failure.reason, failure.pci_bus_id) == (reason, pci)


def test_the_gpu_named_is_that_of_the_matching_line():
    # Another GPU's address on another line is not the failing GPU.
    text = ('GPU 00000000:01:00.0: Persistence mode is already Enabled.\n'
            'Unable to determine the device handle for GPU0000:07:00.0: GPU requires reset\n')
    assert nvidia_smi.classify_failure(255, text, '').pci_bus_id == '0000:07:00.0'
