# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The typed GPU record that every gpufleet.nvidia plugin, and the MIG boot script, reads nvidia-smi into.

One GPU reading has one shape whichever nvidia-smi output it comes from
(``-q -x`` through ``nvidia_smi.parse_xml``, ``--query-gpu`` through
``parse_query_csv`` here): the keys of ``GPU_RECORD``, each holding a value
of the type named there or ``None`` where nvidia-smi reports no value. Modes
are booleans, quantities are numbers without their unit, identifiers (UUID,
serial, VBIOS, PCI ids, versions) stay strings even when they look like
numbers, and a PCI bus id has one spelling, ``normalize_pci_bus_id``'s.

Standard library only and no import of the collection: the mig role installs
this file next to its boot script, which runs at boot without Ansible.
Converters raise ``ValueError`` on text they cannot type, so a caller can
turn a format change into a clean failure instead of a wrong value.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import re

# ---------------------------------------------------------------- the record

# Shape of one GPU. Leaf values are the Python type of a reported value; a
# dict is a nested section, ``{'*': t}`` a section whose keys vary with the
# driver, ``[t]`` a list. Every leaf may also be None.
TEMPERATURE = dict.fromkeys(('gpu_c', 'memory_c', 'slowdown_c', 'shutdown_c', 'max_operating_c', 'memory_max_c',
                             'tlimit_c', 'slowdown_tlimit_c', 'shutdown_tlimit_c'), int)
POWER = dict.fromkeys(('draw_w', 'draw_average_w', 'draw_instant_w', 'limit_w', 'limit_enforced_w',
                       'limit_requested_w', 'limit_default_w', 'limit_min_w', 'limit_max_w'), float)
CLOCKS = dict.fromkeys(('graphics', 'sm', 'memory', 'video'), int)
APPLICATION_CLOCKS = dict.fromkeys(('graphics', 'memory'), int)
PCIE = dict.fromkeys(('link_gen_current', 'link_gen_max', 'link_gen_device_current', 'link_gen_device_max',
                      'link_gen_host_max', 'link_width_current', 'link_width_max', 'replay_counter'), int)
# Counters are numbers; R550+ adds threshold flags (sram_threshold_exceeded) among them.
ECC_COUNTERS = {'*': (int, bool)}
ECC_ERRORS = dict(dict.fromkeys(('volatile_corrected', 'volatile_uncorrected', 'aggregate_corrected',
                                 'aggregate_uncorrected'), int), volatile=ECC_COUNTERS, aggregate=ECC_COUNTERS)
RETIRED_PAGES = {'single_bit_ecc': int, 'double_bit_ecc': int, 'pending': bool}
# bank_availability: the remap availability histogram, banks per bucket of spare rows left.
REMAPPED_ROWS = {'correctable': int, 'uncorrectable': int, 'pending': bool, 'failure': bool,
                 'bank_availability': dict.fromkeys(('max', 'high', 'partial', 'low', 'none'), int)}
# Time each clock event reason was active since the driver loaded, in microseconds (R535+).
CLOCK_EVENT_US = dict.fromkeys(('sw_power_cap', 'sync_boost', 'sw_thermal_slowdown', 'hw_thermal_slowdown',
                                'hw_power_brake_slowdown'), int)
# NVLink fabric registration and health (NVSwitch and multi-node NVLink systems); the
# health words stay text as the driver prints them.
FABRIC = dict.fromkeys(('state', 'status', 'clique_id', 'cluster_uuid', 'health_summary', 'health_bandwidth',
                        'route_recovery_in_progress', 'route_unhealthy', 'access_timeout_recovery',
                        'incorrect_configuration'), str)
MIG_DEVICE = dict.fromkeys(('index', 'gpu_instance_id', 'compute_instance_id', 'memory_total_mib', 'memory_used_mib',
                            'multiprocessor_count', 'copy_engine_count', 'encoder_count', 'decoder_count',
                            'volatile_uncorrectable_sram'), int)
PROCESS = {'pid': int, 'type': str, 'name': str, 'used_memory_mib': int, 'gpu_instance_id': int,
           'compute_instance_id': int}
SUPPORTED_CLOCK = {'memory_mhz': int, 'graphics_mhz': [int]}

GPU_RECORD = {}
GPU_RECORD.update(dict.fromkeys((
    'index', 'minor_number', 'module_id', 'memory_total_mib', 'memory_used_mib', 'memory_free_mib',
    'memory_reserved_mib', 'utilization_gpu_percent', 'utilization_memory_percent', 'utilization_encoder_percent',
    'utilization_decoder_percent', 'utilization_jpeg_percent', 'utilization_ofa_percent', 'fan_speed_percent'), int))
GPU_RECORD.update(dict.fromkeys((
    'name', 'brand', 'architecture', 'uuid', 'serial', 'pci_bus_id', 'pci_device_id', 'pci_sub_system_id',
    'vbios_version', 'board_part_number', 'gpu_part_number', 'inforom_image_version', 'inforom_oem_version',
    'inforom_ecc_version', 'inforom_power_version', 'gsp_firmware_version', 'virtualization_mode', 'compute_mode',
    'performance_state', 'recovery_action', 'addressing_mode'), str))
GPU_RECORD.update(dict.fromkeys((
    'persistence_mode', 'display_mode', 'display_active', 'display_attached', 'accounting_mode', 'multigpu_board',
    'mig_mode_current', 'mig_mode_pending', 'ecc_mode_current', 'ecc_mode_pending', 'dram_encryption_mode_current',
    'dram_encryption_mode_pending', 'c2c_mode', 'gsp_mode_current', 'gsp_mode_default', 'reset_required',
    'drain_and_reset_recommended'), bool))
GPU_RECORD.update(
    temperature=TEMPERATURE, power=POWER, clocks=CLOCKS, clocks_max=CLOCKS, clocks_applications=APPLICATION_CLOCKS,
    clocks_default_applications=APPLICATION_CLOCKS, supported_clocks=[SUPPORTED_CLOCK], throttle_reasons={'*': bool},
    throttle_reasons_active=[str], pcie=PCIE, ecc_errors=ECC_ERRORS, retired_pages=RETIRED_PAGES,
    remapped_rows=REMAPPED_ROWS, mig_devices=[MIG_DEVICE], processes=[PROCESS], clock_event_us=CLOCK_EVENT_US,
    fabric=FABRIC)

# ---------------------------------------------------------------- converters

# Bare forms of the "no value" markers; the CSV output wraps them in brackets,
# the XML output (and older drivers) print them bare.
_UNAVAILABLE = frozenset(s.lower() for s in (
    'N/A', 'Not Supported', 'Unknown Error', 'Insufficient Permissions', 'GPU is lost',
    'GPU requires reset', 'Not Available', 'Requested functionality has been deprecated', 'Unknown',
))

_MODE_WORDS = {
    'enabled': True, 'disabled': False, 'on': True, 'off': False, 'yes': True, 'no': False,
    'true': True, 'false': False, 'active': True, 'not active': False,
}

_NUMBER_WITH_UNIT = re.compile(
    r'^(?P<num>[-+]?\d+(?:\.\d+)?)\s*'
    r'(?P<unit>MiB|GiB|KiB|MB|GB|KB|B|W|mW|J|mJ|MHz|GHz|KHz|kHz|Hz|C|%|KB/s|MB/s|GB/s|mV|V|us|ms|s|bank\(s\)|x)?$')

# A PCI address inside running text (kernel log lines, nvidia-smi messages):
# nvidia-smi prints an 8-digit domain, the kernel a 4-digit one, and the
# kernel leaves out the function. normalize_pci_bus_id spells what it finds.
PCI_ADDRESS_IN_TEXT = r'[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?'

_PCI_ADDRESS = re.compile(r'^(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<device>[0-9a-f]{1,2})'
                          r'(?:\.(?P<function>[0-7]))?$')


def is_unavailable(text):
    """True for the markers nvidia-smi prints instead of a value (``[N/A]``, ``Not Supported`` ...)."""
    # Any bracketed value is a status, never data: "[GPU requires reset]", and
    # markers newer drivers may add.
    text = text.strip()
    if text.startswith('[') and text.endswith(']'):
        return True
    return text.lower() in _UNAVAILABLE


def normalize_value(value):
    """Trim ``value``; return ``None`` for empty text and "no value" markers."""
    if value is None:
        return None
    value = str(value).strip()
    if not value or is_unavailable(value):
        return None
    return value


def to_bool_mode(value):
    """``Enabled``/``Disabled``, ``On``/``Off``, ``Yes``/``No``, ``Active``/``Not Active`` -> bool; no value -> None.

    Raises ``ValueError`` for any other word: a mode nvidia-smi spells in a
    new way must not pass for "off".
    """
    if value is None or isinstance(value, bool):
        return value
    text = normalize_value(value)
    if text is None:
        return None
    try:
        return _MODE_WORDS[text.lower()]
    except KeyError:
        raise ValueError('unexpected mode value %r' % (value,))


def to_number(value):
    """Return ``value`` as int or float with its unit stripped, else ``None``.

    Hexadecimal and dotted values are not numbers here: they are bitmasks or
    identifiers and stay with the caller as text. This is the lenient probe;
    ``to_int`` and ``to_float`` are the typed converters.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    value = normalize_value(value)
    if value is None:
        return None
    match = _NUMBER_WITH_UNIT.match(value)
    if not match:
        return None
    num = match.group('num')
    return float(num) if '.' in num else int(num)


def _typed_number(value):
    number = to_number(value)
    if number is None and normalize_value(value) is not None:
        raise ValueError('expected a number, got %r' % (value,))
    return number


def to_int(value):
    """A count or integral quantity (``81920 MiB``, ``16x``, ``45 C``) as int; no value -> None.

    Raises ``ValueError`` for text that is no number, and for a fraction: a
    field that always was whole and suddenly is not has changed meaning.
    """
    number = _typed_number(value)
    if number is None:
        return None
    if isinstance(number, float):
        if not number.is_integer():
            raise ValueError('expected a whole number, got %r' % (value,))
        number = int(number)
    return number


def to_float(value):
    """A measured quantity (``67.03 W``, ``500 W``) as float; no value -> None. Raises ``ValueError`` for text."""
    number = _typed_number(value)
    return None if number is None else float(number)


def to_text(value):
    """Identifiers and words stay text, trimmed; no value -> None."""
    return normalize_value(value)


def normalize_pci_bus_id(value):
    """Return ``dddd:bb:dd.f`` in lower case for any PCI address spelling, or ``None``.

    nvidia-smi prints ``00000000:07:00.0``, the kernel log ``PCI:0000:07:00``
    (function 0 implied), lspci ``07:00.0`` (domain 0 implied): all name
    ``0000:07:00.0``.
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    if text.startswith('pci:'):
        text = text[4:]
    match = _PCI_ADDRESS.match(text)
    # A PCI device number has five bits: 00-1f.
    if not match or int(match.group('device'), 16) > 0x1f:
        return None
    return '%04x:%02x:%02x.%s' % (int(match.group('domain') or '0', 16), int(match.group('bus'), 16),
                                  int(match.group('device'), 16), match.group('function') or '0')


def to_pci_bus_id(value):
    """The PCI bus id of a reading, normalised; no value -> None. Raises ``ValueError`` for anything else."""
    text = normalize_value(value)
    if text is None:
        return None
    normal = normalize_pci_bus_id(text)
    if normal is None:
        raise ValueError('unexpected PCI bus id %r' % (value,))
    return normal


def expand_cpu_list(text):
    """``0-47,96-143`` (a CPU affinity as topo -m and the kernel print it) -> sorted CPU ids; no value -> None."""
    text = normalize_value(text)
    if text is None:
        return None
    cpus = set()
    for part in text.split(','):
        match = re.match(r'^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$', part)
        if not match or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
            raise ValueError('%r is not a CPU list such as 0-47,96-143' % (text,))
        first = int(match.group(1))
        cpus.update(range(first, int(match.group(2) or first) + 1))
    return sorted(cpus)


def compact_cpu_list(cpus):
    """CPU ids -> ``0-47,96-143``, the form of Slurm's ``Cores=`` and ``CpuList`` (and of the kernel's cpulist)."""
    ranges = []
    for cpu in sorted(set(int(c) for c in cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in ranges)


CONVERTERS = {
    'str': to_text,
    # Free text that may hold commas (process names); see parse_query_csv.
    'text': to_text,
    'pci': to_pci_bus_id,
    'int': to_int,
    'float': to_float,
    'bool': to_bool_mode,
}

# ------------------------------------------------------------- --query-* CSV

# Query fields -> (path in the record, kind of converter), per query. Aliases
# nvidia-smi accepts map to the same place. Fields not listed keep their own
# name and are typed by shape (see _unmapped_value).
_GPU_QUERY = {
    'timestamp': (('timestamp',), 'str'),
    'driver_version': (('driver_version',), 'str'),
    'count': (('count',), 'int'),
    'index': (('index',), 'int'),
    # GPU product names carry no comma, but name is the one free-text field of a GPU row.
    'name': (('name',), 'text'),
    'gpu_name': (('name',), 'text'),
    'serial': (('serial',), 'str'),
    'gpu_serial': (('serial',), 'str'),
    'uuid': (('uuid',), 'str'),
    'gpu_uuid': (('uuid',), 'str'),
    'pci.bus_id': (('pci_bus_id',), 'pci'),
    'gpu_bus_id': (('pci_bus_id',), 'pci'),
    'pci.domain': (('pci_domain',), 'str'),
    'pci.bus': (('pci_bus',), 'str'),
    'pci.device': (('pci_device',), 'str'),
    'pci.device_id': (('pci_device_id',), 'str'),
    'pci.sub_device_id': (('pci_sub_system_id',), 'str'),
    'vbios_version': (('vbios_version',), 'str'),
    'inforom.img': (('inforom_image_version',), 'str'),
    'inforom.image': (('inforom_image_version',), 'str'),
    'inforom.oem': (('inforom_oem_version',), 'str'),
    'inforom.ecc': (('inforom_ecc_version',), 'str'),
    'inforom.pwr': (('inforom_power_version',), 'str'),
    'inforom.power': (('inforom_power_version',), 'str'),
    'compute_cap': (('compute_cap',), 'str'),
    'persistence_mode': (('persistence_mode',), 'bool'),
    'display_mode': (('display_mode',), 'bool'),
    'display_active': (('display_active',), 'bool'),
    'display_attached': (('display_attached',), 'bool'),
    'addressing_mode': (('addressing_mode',), 'str'),
    'gpu_recovery_action': (('recovery_action',), 'str'),
    'dramEncryption.mode.current': (('dram_encryption_mode_current',), 'bool'),
    'dramEncryption.mode.pending': (('dram_encryption_mode_pending',), 'bool'),
    'c2c.mode': (('c2c_mode',), 'bool'),
    'gsp.mode.current': (('gsp_mode_current',), 'bool'),
    'gsp.mode.default': (('gsp_mode_default',), 'bool'),
    'platform.module_id': (('module_id',), 'int'),
    'accounting.mode': (('accounting_mode',), 'bool'),
    'compute_mode': (('compute_mode',), 'str'),
    'pstate': (('performance_state',), 'str'),
    'mig.mode.current': (('mig_mode_current',), 'bool'),
    'mig.mode.pending': (('mig_mode_pending',), 'bool'),
    'ecc.mode.current': (('ecc_mode_current',), 'bool'),
    'ecc.mode.pending': (('ecc_mode_pending',), 'bool'),
    'reset_status.reset_required': (('reset_required',), 'bool'),
    'reset_status.drain_and_reset_recommended': (('drain_and_reset_recommended',), 'bool'),
    'fan.speed': (('fan_speed_percent',), 'int'),
    'memory.total': (('memory_total_mib',), 'int'),
    'memory.used': (('memory_used_mib',), 'int'),
    'memory.free': (('memory_free_mib',), 'int'),
    'memory.reserved': (('memory_reserved_mib',), 'int'),
    'utilization.gpu': (('utilization_gpu_percent',), 'int'),
    'utilization.memory': (('utilization_memory_percent',), 'int'),
    'utilization.encoder': (('utilization_encoder_percent',), 'int'),
    'utilization.decoder': (('utilization_decoder_percent',), 'int'),
    'utilization.jpeg': (('utilization_jpeg_percent',), 'int'),
    'utilization.ofa': (('utilization_ofa_percent',), 'int'),
    'temperature.gpu': (('temperature', 'gpu_c'), 'int'),
    'temperature.memory': (('temperature', 'memory_c'), 'int'),
    'temperature.gpu.tlimit': (('temperature', 'tlimit_c'), 'int'),
    'power.draw': (('power', 'draw_w'), 'float'),
    'power.draw.average': (('power', 'draw_average_w'), 'float'),
    'power.draw.instant': (('power', 'draw_instant_w'), 'float'),
    'power.limit': (('power', 'limit_w'), 'float'),
    'enforced.power.limit': (('power', 'limit_enforced_w'), 'float'),
    'power.default_limit': (('power', 'limit_default_w'), 'float'),
    'power.min_limit': (('power', 'limit_min_w'), 'float'),
    'power.max_limit': (('power', 'limit_max_w'), 'float'),
    'pcie.link.gen.current': (('pcie', 'link_gen_current'), 'int'),
    'pcie.link.gen.gpucurrent': (('pcie', 'link_gen_device_current'), 'int'),
    'pcie.link.gen.max': (('pcie', 'link_gen_max'), 'int'),
    'pcie.link.gen.gpumax': (('pcie', 'link_gen_device_max'), 'int'),
    'pcie.link.gen.hostmax': (('pcie', 'link_gen_host_max'), 'int'),
    'pcie.link.width.current': (('pcie', 'link_width_current'), 'int'),
    'pcie.link.width.max': (('pcie', 'link_width_max'), 'int'),
    'retired_pages.single_bit_ecc.count': (('retired_pages', 'single_bit_ecc'), 'int'),
    'retired_pages.sbe': (('retired_pages', 'single_bit_ecc'), 'int'),
    'retired_pages.double_bit.count': (('retired_pages', 'double_bit_ecc'), 'int'),
    'retired_pages.dbe': (('retired_pages', 'double_bit_ecc'), 'int'),
    'retired_pages.pending': (('retired_pages', 'pending'), 'bool'),
    'remapped_rows.correctable': (('remapped_rows', 'correctable'), 'int'),
    'remapped_rows.uncorrectable': (('remapped_rows', 'uncorrectable'), 'int'),
    'remapped_rows.pending': (('remapped_rows', 'pending'), 'bool'),
    'remapped_rows.failure': (('remapped_rows', 'failure'), 'bool'),
}


def _ecc_fields():
    # Totals are the record's ecc_errors totals; per-location counters go
    # under ecc_errors.volatile/aggregate with the names -q -x gives them
    # (sram/dram since R535, single_bit_/double_bit_<location> before).
    table = {}
    for scope in ('volatile', 'aggregate'):
        for kind, suffix, prefix in (('corrected', '_correctable', 'single_bit_'),
                                     ('uncorrected', '_uncorrectable', 'double_bit_')):
            field = 'ecc.errors.%s.%s.' % (kind, scope)
            table[field + 'total'] = (('ecc_errors', '%s_%s' % (scope, kind)), 'int')
            for memory in ('dram', 'sram'):
                table[field + memory] = (('ecc_errors', scope, memory + suffix), 'int')
            for location in ('device_memory', 'register_file', 'l1_cache', 'l2_cache', 'texture_memory', 'cbu'):
                table[field + location] = (('ecc_errors', scope, prefix + location), 'int')
            if kind == 'uncorrected':
                for check in ('parity', 'secded'):
                    table[field + 'sram.' + check] = (('ecc_errors', scope, 'sram_uncorrectable_' + check), 'int')
    table['ecc.errors.uncorrected.aggregate.sram.thresholdExceeded'] = (
        ('ecc_errors', 'aggregate', 'sram_threshold_exceeded'), 'bool')
    return table


def _clock_fields():
    # clocks.gr and clocks.current.graphics are one field; so are .mem and .memory.
    spellings = {'graphics': ('gr', 'graphics'), 'sm': ('sm',), 'memory': ('mem', 'memory'), 'video': ('video',)}
    sections = (('clocks', ('clocks.', 'clocks.current.'), CLOCKS), ('clocks_max', ('clocks.max.',), CLOCKS),
                ('clocks_applications', ('clocks.applications.',), APPLICATION_CLOCKS),
                ('clocks_default_applications', ('clocks.default_applications.',), APPLICATION_CLOCKS))
    table = {}
    for section, prefixes, keys in sections:
        for key in keys:
            for prefix in prefixes:
                for spelling in spellings[key]:
                    table[prefix + spelling] = ((section, key), 'int')
    return table


def _throttle_fields():
    # R535 renamed clocks_throttle_reasons.* to clocks_event_reasons.*: one record section for both.
    reasons = ('gpu_idle', 'applications_clocks_setting', 'sw_power_cap', 'hw_slowdown', 'hw_thermal_slowdown',
               'hw_power_brake_slowdown', 'sw_thermal_slowdown', 'sync_boost')
    return dict((family + reason, (('throttle_reasons', reason), 'bool'))
                for family in ('clocks_event_reasons.', 'clocks_throttle_reasons.') for reason in reasons)


_GPU_QUERY.update(_clock_fields())
_GPU_QUERY.update(_throttle_fields())
_GPU_QUERY.update(_ecc_fields())

# The GPU a row of another query is about: its keys are prefixed gpu_.
_ROW_GPU = {
    'timestamp': (('timestamp',), 'str'),
    'gpu_name': (('gpu_name',), 'str'),
    'gpu_bus_id': (('gpu_pci_bus_id',), 'pci'),
    'gpu_serial': (('gpu_serial',), 'str'),
    'gpu_uuid': (('gpu_uuid',), 'str'),
}

# --query-compute-apps rows are process records (the keys of GPU_RECORD's
# processes). GPU product names carry no comma, so the process name is the
# one free-text field.
_APPS_QUERY = dict(_ROW_GPU, **{
    'pid': (('pid',), 'int'),
    'process_name': (('name',), 'text'),
    'name': (('name',), 'text'),
    'used_gpu_memory': (('used_memory_mib',), 'int'),
    'used_memory': (('used_memory_mib',), 'int'),
})

_SUPPORTED_CLOCKS_QUERY = dict(_ROW_GPU, memory=(('memory_mhz',), 'int'), graphics=(('graphics_mhz',), 'int'))

_REMAPPED_ROWS_QUERY = dict(_ROW_GPU, **dict(
    ('remapped_rows.' + key, (('remapped_rows', key), kind))
    for key, kind in (('correctable', 'int'), ('uncorrectable', 'int'), ('pending', 'bool'), ('failure', 'bool'))))

QUERIES = {
    'gpu': _GPU_QUERY,
    'compute-apps': _APPS_QUERY,
    'accounted-apps': _APPS_QUERY,
    'supported-clocks': _SUPPORTED_CLOCKS_QUERY,
    'remapped-rows': _REMAPPED_ROWS_QUERY,
}

# Identifiers among the fields no table names: they stay text even when they
# look like numbers (gsp.version 570.195.03, inforom versions 1.1).
_IDENTIFIER_FIELDS = frozenset(('gsp.version', 'board_id', 'board_part_number', 'gpu_part_number',
                                'clocks_throttle_reasons.active', 'clocks_event_reasons.active',
                                'clocks_throttle_reasons.supported', 'clocks_event_reasons.supported'))
_IDENTIFIER_PREFIXES = ('inforom.', 'pci.', 'platform.', 'vgpu_')
# kmd_version 610.62 is a version, not the number 610.62.
_IDENTIFIER_SUFFIXES = ('version', 'Uuid', 'uuid', 'guid', 'serial_number')
_NUMERIC_UNDER_PREFIX = frozenset(('pci.baseClass', 'pci.subClass'))

_HEADER_CELL = re.compile(r'^[a-z_][a-z0-9_.]*$', re.I)
_HEADER_UNIT = re.compile(r'\s*\[[^\]]*\]$')


def _unmapped_value(field, raw):
    value = normalize_value(raw)
    if value is None:
        return None
    if field in _IDENTIFIER_FIELDS or field.endswith(_IDENTIFIER_SUFFIXES) or (
            field.startswith(_IDENTIFIER_PREFIXES) and field not in _NUMERIC_UNDER_PREFIX):
        return value
    # A mode the table does not name yet is still a mode: no free text is
    # among these fields (the tables map every free-text one).
    if value.lower() in _MODE_WORDS:
        return _MODE_WORDS[value.lower()]
    number = to_number(value)
    return value if number is None else number


def _split_fields(fields):
    if isinstance(fields, str):
        fields = fields.split(',')
    return [f.strip() for f in fields if f.strip()]


def _looks_like_header(cells, fields, table):
    names = [_HEADER_UNIT.sub('', c.strip()) for c in cells]
    # The header prints the canonical name of an aliased field (gpu_name -> name).
    if all(n == f or (n in table and f in table and table[n][0] == table[f][0]) for n, f in zip(names, fields)):
        return True
    # Aliases not in the table: fall back to the shape. Header cells are
    # lower-case dotted or underscored field names; data rows carry numbers,
    # capitalised words (Enabled, Default, P0, NVIDIA ...) or [markers]. A lone
    # lower-case word (a process name such as "python") is data.
    return all(_HEADER_CELL.match(n) and n[0].islower() for n in names) and \
        any('.' in n or '_' in n for n in names)


def _fit_cells(cells, kinds, line):
    """Rejoin a free-text value that held commas; nvidia-smi never quotes a cell."""
    extra = len(cells) - len(kinds)
    if extra == 0:
        return cells
    free = [at for at, kind in enumerate(kinds) if kind == 'text']
    if extra < 0 or len(free) != 1:
        raise ValueError('line has %d values for %d fields%s: %r' % (
            len(cells), len(kinds),
            ' (a value holds a comma, and only a query with exactly one free-text field can say which)'
            if extra > 0 else '', line))
    at = free[0]
    return cells[:at] + [','.join(cells[at:at + extra + 1])] + cells[at + extra + 1:]


def _place(record, path, value):
    for key in path[:-1]:
        record = record.setdefault(key, {})
    record[path[-1]] = value


def _row(fields, table, cells):
    record = {}
    for field, raw in zip(fields, cells):
        if field in table:
            path, kind = table[field]
            try:
                value = CONVERTERS[kind](raw)
            except ValueError as exc:
                raise ValueError('%s: %s' % (field, exc))
            _place(record, path, value)
        else:
            record[field] = _unmapped_value(field, raw)
    return record


def parse_query_csv(text, fields=None, query='gpu'):
    """Parse ``--query-<query>=<fields> --format=csv[,noheader][,nounits]`` output into records.

    ``fields`` is the list (or the comma-separated string) passed to
    nvidia-smi; ``None`` takes them from the header line, which must then be
    there. ``query`` names the table of ``QUERIES`` that maps fields onto the
    record: ``gpu`` rows are GPU records (``pci.bus_id`` -> ``pci_bus_id``,
    normalised; ``memory.total`` -> ``memory_total_mib``; ``power.limit`` ->
    ``power.limit_w``; ``persistence_mode`` -> bool ...), ``compute-apps`` rows
    are process records. Fields outside the table keep their name, typed by
    shape. A header line, when present, is skipped, and so are ``WARNING:``
    lines (a corrupted infoROM, for example).

    nvidia-smi never quotes a cell, so a value holding a comma (a process name
    such as ``python train.py --a,b``) makes a row longer than the fields: the
    one free-text field of the query takes the extra cells back. A query with
    two free-text fields cannot be read that way and raises ``ValueError``.
    """
    if query not in QUERIES:
        raise ValueError('unknown nvidia-smi query %r; known: %s' % (query, ', '.join(sorted(QUERIES))))
    table = QUERIES[query]
    lines = [line for line in (text or '').splitlines() if line.strip() and not line.lstrip().startswith('WARNING:')]
    # QUOTE_NONE: nvidia-smi never quotes, so a quote is part of the value.
    rows = list(csv.reader(lines, quoting=csv.QUOTE_NONE))
    if fields is None:
        if not rows:
            return []
        fields = [_HEADER_UNIT.sub('', cell.strip()) for cell in rows[0]]
    fields = _split_fields(fields)
    if not fields:
        raise ValueError('parse_query_csv needs at least one field')
    kinds = [table[field][1] if field in table else 'str' for field in fields]
    records = []
    for number, cells in enumerate(rows):
        if number == 0 and len(cells) == len(fields) and _looks_like_header(cells, fields, table):
            continue
        try:
            records.append(_row(fields, table, _fit_cells(cells, kinds, lines[number])))
        except ValueError as exc:
            raise ValueError('line %d: %s' % (number + 1, exc))
    return records
