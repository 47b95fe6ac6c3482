# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure parsers for ``nvidia-smi`` output; no I/O, importable without a module.

Public names: ``parse_query_csv``, ``parse_xml``, ``parse_gpu_list``,
``parse_topology``, ``parse_nvlink_status``, ``classify_failure`` (with its
``Failure`` tuple), ``normalize_value`` and ``to_number``.

Every parser raises ``ValueError`` on output it cannot make sense of, so a
caller can turn it into a clean module failure instead of a traceback.
Values that nvidia-smi reports as unavailable (``[N/A]``, ``[Not Supported]``,
``[Unknown Error]``, ``[GPU is lost]`` and the like) become ``None``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import (
    Failure,
    classify_failure,
)

# classify_failure lives with its hints in nvidia_smi_failures; it is part of
# this module's public interface too.
__all__ = ['Failure', 'classify_failure', 'normalize_value', 'parse_gpu_list', 'parse_nvlink_status',
           'parse_query_csv', 'parse_topology', 'parse_xml', 'to_number']

# Bare forms of the "no value" markers; the CSV output wraps them in brackets,
# the XML output (and older drivers) print them bare.
_UNAVAILABLE = frozenset(s.lower() for s in (
    'N/A', 'Not Supported', 'Unknown Error', 'Insufficient Permissions', 'GPU is lost',
    'GPU requires reset', 'Not Available', 'Requested functionality has been deprecated', 'Unknown',
))

_NUMBER_WITH_UNIT = re.compile(
    r'^(?P<num>[-+]?\d+(?:\.\d+)?)\s*'
    r'(?P<unit>MiB|GiB|KiB|MB|GB|KB|B|W|mW|MHz|GHz|C|%|KB/s|MB/s|GB/s|mV|V|us|ms|s|bank\(s\)|x)?$')

# CSV query fields whose values are identifiers or versions: they stay
# strings even when they look like numbers (serial 1320220040606, VBIOS
# 96.00.89.00.01, compute_cap 9.0 must never become 9).
_IDENTIFIER_FIELDS = frozenset((
    'name', 'gpu_name', 'serial', 'gpu_serial', 'uuid', 'gpu_uuid', 'pci.bus_id', 'gpu_bus_id', 'pci.domain',
    'pci.bus', 'pci.device', 'pci.device_id', 'pci.sub_device_id', 'vbios_version', 'driver_version',
    'board_part_number', 'gpu_part_number', 'compute_cap', 'inforom.img', 'inforom.image', 'inforom.oem',
    'inforom.ecc', 'inforom.pwr', 'inforom.power', 'board_id', 'gsp.version', 'gpu_module_id', 'module_id',
    'clocks_throttle_reasons.active', 'clocks_event_reasons.active', 'vbios', 'platform.chassis_serial_number',
))
_IDENTIFIER_PREFIXES = ('inforom.', 'pci.')
# Fields under the identifier prefixes that are real numbers.
_NUMERIC_UNDER_PREFIX = frozenset(('pci.baseClass', 'pci.subClass'))

_HEADER_CELL = re.compile(r'^[a-z_][a-z0-9_.]*$', re.I)
_HEADER_UNIT = re.compile(r'\s*\[[^\]]*\]$')


def _is_unavailable(text):
    # Any bracketed value is a status, never data: "[N/A]", "[GPU requires
    # reset]", and markers newer drivers may add.
    if text.startswith('[') and text.endswith(']'):
        return True
    return text.lower() in _UNAVAILABLE


def normalize_value(value):
    """Trim ``value``; return ``None`` for empty text and "no value" markers."""
    if value is None:
        return None
    value = value.strip()
    if not value or _is_unavailable(value):
        return None
    return value


def to_number(value):
    """Return ``value`` as int or float with its unit stripped, else ``None``.

    Hexadecimal and dotted values are not numbers here: they are bitmasks or
    identifiers and stay with the caller as text.
    """
    value = normalize_value(value)
    if value is None:
        return None
    match = _NUMBER_WITH_UNIT.match(value)
    if not match:
        return None
    num = match.group('num')
    return float(num) if '.' in num else int(num)


def _csv_value(field, raw):
    value = normalize_value(raw)
    if value is None:
        return None
    if field in _IDENTIFIER_FIELDS or (field.startswith(_IDENTIFIER_PREFIXES) and field not in _NUMERIC_UNDER_PREFIX):
        return value
    number = to_number(value)
    return value if number is None else number


def _split_fields(fields):
    if isinstance(fields, str):
        fields = fields.split(',')
    return [f.strip() for f in fields if f.strip()]


# --query-gpu prints the canonical name of an aliased field in its header.
_CANONICAL_FIELD = {'gpu_name': 'name', 'gpu_bus_id': 'pci.bus_id', 'gpu_serial': 'serial', 'gpu_uuid': 'uuid'}


def _looks_like_header(cells, fields):
    names = [_HEADER_UNIT.sub('', c) for c in cells]
    if all(n in (f, _CANONICAL_FIELD.get(f)) for n, f in zip(names, fields)):
        return True
    # Aliases not listed above: fall back to the shape. Header cells are
    # lower-case dotted or underscored field names; data rows carry numbers,
    # capitalised words (Enabled, Default, P0, NVIDIA ...) or [markers]. A lone
    # lower-case word (a process name such as "python") is data.
    return all(_HEADER_CELL.match(n) and n[0].islower() for n in names) and \
        any('.' in n or '_' in n for n in names)


def parse_query_csv(text, fields):
    """Parse ``--query-*=<fields> --format=csv[,noheader][,nounits]`` output.

    Returns one dict per line keyed by the exact names in ``fields`` (a list or
    the comma-separated string passed to nvidia-smi). A header line, when
    present, is recognised and skipped. Lines starting with ``WARNING:`` (which
    nvidia-smi prints, for example, for a corrupted infoROM) are skipped.
    """
    fields = _split_fields(fields)
    if not fields:
        raise ValueError('parse_query_csv needs at least one field')
    rows = []
    lines = [line for line in (text or '').splitlines() if line.strip() and not line.lstrip().startswith('WARNING:')]
    for number, cells in enumerate(csv.reader(lines, skipinitialspace=True)):
        cells = [c.strip() for c in cells]
        if len(cells) != len(fields):
            raise ValueError('line %d has %d values for %d fields: %r'
                             % (number + 1, len(cells), len(fields), lines[number]))
        if number == 0 and _looks_like_header(cells, fields):
            continue
        rows.append(dict((field, _csv_value(field, cell)) for field, cell in zip(fields, cells)))
    return rows


# --------------------------------------------------------------------------- XML

_DOCTYPE = re.compile(r'<!DOCTYPE[^>\[]*(\[.*?\])?\s*>', re.S)


def _text(elem, path):
    """Normalised text of the first element at ``path`` (``a/b``), else None."""
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    return normalize_value(found.text)


def _first(elem, *paths):
    for path in paths:
        value = _text(elem, path)
        if value is not None:
            return value
    return None


def _num(elem, *paths):
    for path in paths:
        value = to_number(_text(elem, path))
        if value is not None:
            return value
    return None


def _yes_no(value):
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ('yes', 'true', 'enabled', 'active'):
        return True
    if lowered in ('no', 'false', 'disabled', 'not active'):
        return False
    return None


def _counters(elem):
    """Flatten an element of numeric children into ``{"a_b": n}`` (None for N/A)."""
    result = {}
    if elem is None:
        return result
    for child in elem:
        if len(child):
            for key, value in _counters(child).items():
                result['%s_%s' % (child.tag, key)] = value
        else:
            result[child.tag] = to_number(child.text)
    return result


def _uncorrectable_total(counters):
    # R535+ splits uncorrectable errors by memory (sram/dram, sometimes
    # parity/secded); older drivers count double-bit errors per location plus
    # a total. Sum whichever scheme the driver used.
    if 'double_bit_total' in counters:
        keys = ['double_bit_total']
    else:
        keys = [k for k in counters if 'uncorrectable' in k and not k.startswith('sram_threshold')]
    values = [counters[k] for k in keys if counters.get(k) is not None]
    return sum(values) if values else None


def _correctable_total(counters):
    if 'single_bit_total' in counters:
        keys = ['single_bit_total']
    else:
        keys = [k for k in counters if k.endswith('_correctable') and 'uncorrectable' not in k]
    values = [counters[k] for k in keys if counters.get(k) is not None]
    return sum(values) if values else None


def _ecc(gpu):
    errors = gpu.find('ecc_errors')
    volatile = _counters(errors.find('volatile')) if errors is not None else {}
    aggregate = _counters(errors.find('aggregate')) if errors is not None else {}
    return {
        'volatile': volatile,
        'aggregate': aggregate,
        'volatile_corrected': _correctable_total(volatile),
        'volatile_uncorrected': _uncorrectable_total(volatile),
        'aggregate_corrected': _correctable_total(aggregate),
        'aggregate_uncorrected': _uncorrectable_total(aggregate),
    }


def _retired_pages(gpu):
    node = gpu.find('retired_pages')
    if node is None:
        return None
    return {
        'single_bit_ecc': _num(node, 'multiple_single_bit_retirement/retired_count'),
        'double_bit_ecc': _num(node, 'double_bit_retirement/retired_count'),
        'pending': _yes_no(_first(node, 'pending_retirement', 'pending_blacklist')),
    }


def _remapped_rows(gpu):
    node = gpu.find('remapped_rows')
    # GPUs before Ampere print <remapped_rows>N/A</remapped_rows>.
    if node is None or not len(node):
        return None
    return {
        'correctable': _num(node, 'remapped_row_corr'),
        'uncorrectable': _num(node, 'remapped_row_unc'),
        'pending': _yes_no(_text(node, 'remapped_row_pending')),
        'failure': _yes_no(_text(node, 'remapped_row_failure')),
    }


def _throttle_reasons(gpu):
    # R535 renamed clocks_throttle_reasons to clocks_event_reasons.
    for tag, prefix in (('clocks_event_reasons', 'clocks_event_reason_'),
                        ('clocks_throttle_reasons', 'clocks_throttle_reason_')):
        node = gpu.find(tag)
        if node is not None:
            return dict((child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag,
                         _yes_no(normalize_value(child.text))) for child in node)
    return {}


def _clocks(node, names=('graphics', 'sm', 'mem', 'video')):
    if node is None:
        return {}
    result = {}
    for name in names:
        value = to_number(_text(node, '%s_clock' % name))
        result['memory' if name == 'mem' else name] = value
    return result


def _supported_clocks(gpu):
    result = []
    node = gpu.find('supported_clocks')
    if node is None:
        return result
    for mem in node.findall('supported_mem_clock'):
        memory = to_number(_text(mem, 'value'))
        graphics = [to_number(g.text) for g in mem.findall('supported_graphics_clock')]
        result.append({'memory_mhz': memory, 'graphics_mhz': [g for g in graphics if g is not None]})
    return result


def _power(gpu):
    # gpu_power_readings since R535 (XML v12); power_readings before. R570+
    # report instant and average draw instead of a single power_draw.
    node = gpu.find('gpu_power_readings')
    if node is None:
        node = gpu.find('power_readings')
    if node is None:
        return {}
    return {
        'draw_w': _num(node, 'power_draw', 'instant_power_draw', 'average_power_draw'),
        'draw_average_w': _num(node, 'average_power_draw'),
        'limit_w': _num(node, 'current_power_limit', 'power_limit'),
        'limit_enforced_w': _num(node, 'enforced_power_limit', 'current_power_limit'),
        'limit_requested_w': _num(node, 'requested_power_limit', 'power_limit'),
        'limit_default_w': _num(node, 'default_power_limit'),
        'limit_min_w': _num(node, 'min_power_limit'),
        'limit_max_w': _num(node, 'max_power_limit'),
    }


def _pcie(gpu):
    pci = gpu.find('pci')
    link = pci.find('pci_gpu_link_info') if pci is not None else None
    return {
        'link_gen_current': _num(link, 'pcie_gen/current_link_gen'),
        'link_gen_max': _num(link, 'pcie_gen/max_link_gen'),
        'link_gen_device_max': _num(link, 'pcie_gen/max_device_link_gen'),
        'link_gen_host_max': _num(link, 'pcie_gen/max_host_link_gen'),
        'link_width_current': _num(link, 'link_widths/current_link_width'),
        'link_width_max': _num(link, 'link_widths/max_link_width'),
        'replay_counter': _num(pci, 'replay_counter'),
    }


def _temperature(gpu):
    node = gpu.find('temperature')
    return {
        'gpu_c': _num(node, 'gpu_temp'),
        'memory_c': _num(node, 'memory_temp'),
        'slowdown_c': _num(node, 'gpu_temp_slow_threshold'),
        'shutdown_c': _num(node, 'gpu_temp_max_threshold'),
        'max_operating_c': _num(node, 'gpu_temp_max_gpu_threshold'),
        'memory_max_c': _num(node, 'gpu_temp_max_mem_threshold'),
        # R560+ on some GPUs report headroom to the thermal limit instead of
        # absolute thresholds: tlimit is the current margin, the *_tlimit_*
        # thresholds are margins at which slowdown/shutdown start.
        'tlimit_c': _num(node, 'gpu_temp_tlimit'),
        'slowdown_tlimit_c': _num(node, 'gpu_temp_slow_tlimit_threshold'),
        'shutdown_tlimit_c': _num(node, 'gpu_temp_max_tlimit_threshold'),
    }


def _mig_devices(gpu):
    devices = []
    node = gpu.find('mig_devices')
    if node is None:
        return devices
    for dev in node.findall('mig_device'):
        shared = dev.find('device_attributes/shared')
        devices.append({
            'index': _num(dev, 'index'),
            'gpu_instance_id': _num(dev, 'gpu_instance_id'),
            'compute_instance_id': _num(dev, 'compute_instance_id'),
            'memory_total_mib': _num(dev, 'fb_memory_usage/total'),
            'memory_used_mib': _num(dev, 'fb_memory_usage/used'),
            'multiprocessor_count': _num(shared, 'multiprocessor_count'),
            'copy_engine_count': _num(shared, 'copy_engine_count'),
            'encoder_count': _num(shared, 'encoder_count'),
            'decoder_count': _num(shared, 'decoder_count'),
            'volatile_uncorrectable_sram': _num(dev, 'ecc_error_count/volatile_count/sram_uncorrectable'),
        })
    return devices


def _processes(gpu):
    result = []
    node = gpu.find('processes')
    if node is None:
        return result
    for proc in node.findall('process_info'):
        result.append({
            'pid': _num(proc, 'pid'),
            'type': _text(proc, 'type'),
            'name': _text(proc, 'process_name'),
            'used_memory_mib': _num(proc, 'used_memory'),
            'gpu_instance_id': _num(proc, 'gpu_instance_id'),
            'compute_instance_id': _num(proc, 'compute_instance_id'),
        })
    return result


def _gpu(index, gpu):
    throttle = _throttle_reasons(gpu)
    return {
        'index': index,
        'name': _text(gpu, 'product_name'),
        'brand': _text(gpu, 'product_brand'),
        'architecture': _text(gpu, 'product_architecture'),
        'uuid': _text(gpu, 'uuid'),
        'serial': _text(gpu, 'serial'),
        'pci_bus_id': _first(gpu, 'pci/pci_bus_id') or normalize_value(gpu.get('id')),
        'pci_device_id': _text(gpu, 'pci/pci_device_id'),
        'pci_sub_system_id': _text(gpu, 'pci/pci_sub_system_id'),
        'minor_number': _num(gpu, 'minor_number'),
        'module_id': _num(gpu, 'gpu_module_id', 'platformInfo/module_id'),
        'vbios_version': _text(gpu, 'vbios_version'),
        'board_part_number': _text(gpu, 'board_part_number'),
        'gpu_part_number': _text(gpu, 'gpu_part_number'),
        'inforom_image_version': _text(gpu, 'inforom_version/img_version'),
        'gsp_firmware_version': _text(gpu, 'gsp_firmware_version'),
        'virtualization_mode': _text(gpu, 'gpu_virtualization_mode/virtualization_mode'),
        'persistence_mode': _text(gpu, 'persistence_mode'),
        'compute_mode': _text(gpu, 'compute_mode'),
        'performance_state': _text(gpu, 'performance_state'),
        'mig_mode_current': _text(gpu, 'mig_mode/current_mig'),
        'mig_mode_pending': _text(gpu, 'mig_mode/pending_mig'),
        'ecc_mode_current': _text(gpu, 'ecc_mode/current_ecc'),
        'ecc_mode_pending': _text(gpu, 'ecc_mode/pending_ecc'),
        'reset_required': _yes_no(_text(gpu, 'gpu_reset_status/reset_required')),
        'drain_and_reset_recommended': _yes_no(_text(gpu, 'gpu_reset_status/drain_and_reset_recommended')),
        'recovery_action': _text(gpu, 'gpu_recovery_action'),
        'memory_total_mib': _num(gpu, 'fb_memory_usage/total'),
        'memory_used_mib': _num(gpu, 'fb_memory_usage/used'),
        'memory_free_mib': _num(gpu, 'fb_memory_usage/free'),
        'memory_reserved_mib': _num(gpu, 'fb_memory_usage/reserved'),
        'utilization_gpu_percent': _num(gpu, 'utilization/gpu_util'),
        'utilization_memory_percent': _num(gpu, 'utilization/memory_util'),
        'fan_speed_percent': _num(gpu, 'fan_speed'),
        'temperature': _temperature(gpu),
        'power': _power(gpu),
        'clocks': _clocks(gpu.find('clocks')),
        'clocks_max': _clocks(gpu.find('max_clocks')),
        'clocks_applications': _clocks(gpu.find('applications_clocks'), ('graphics', 'mem')),
        'clocks_default_applications': _clocks(gpu.find('default_applications_clocks'), ('graphics', 'mem')),
        'supported_clocks': _supported_clocks(gpu),
        'throttle_reasons': throttle,
        'throttle_reasons_active': sorted(name for name, active in throttle.items() if active),
        'pcie': _pcie(gpu),
        'ecc_errors': _ecc(gpu),
        'retired_pages': _retired_pages(gpu),
        'remapped_rows': _remapped_rows(gpu),
        'mig_devices': _mig_devices(gpu),
        'processes': _processes(gpu),
    }


def parse_xml(text):
    """Parse ``nvidia-smi -q -x`` output.

    Returns ``{"driver_version", "cuda_version", "attached_gpus", "timestamp",
    "gpus", "warnings"}``. ``gpus`` are in nvidia-smi index order (the order
    ``-q`` lists them in), each with the keys built by ``_gpu``. Text printed
    before the XML document (``WARNING:`` lines) is returned in ``warnings``.

    The DOCTYPE line is dropped before parsing and any entity declaration is
    refused, so no external entity or DTD is ever resolved.
    """
    text = text or ''
    start = text.find('<')
    if start < 0:
        raise ValueError('no XML document in nvidia-smi output')
    warnings = [line.strip() for line in text[:start].splitlines() if line.strip()]
    body = _DOCTYPE.sub('', text[start:], count=1)
    if '<!ENTITY' in body or '<!DOCTYPE' in body:
        raise ValueError('refusing XML with entity or DTD declarations')
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError('nvidia-smi XML does not parse: %s' % exc)
    if root.tag != 'nvidia_smi_log':
        raise ValueError('unexpected XML root element <%s>, expected <nvidia_smi_log>' % root.tag)
    return {
        'timestamp': _text(root, 'timestamp'),
        'driver_version': _text(root, 'driver_version'),
        'cuda_version': _text(root, 'cuda_version'),
        'attached_gpus': _num(root, 'attached_gpus'),
        'gpus': [_gpu(index, gpu) for index, gpu in enumerate(root.findall('gpu'))],
        'warnings': warnings,
    }


# ------------------------------------------------------------------------ -L

_GPU_LINE = re.compile(r'^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')
_MIG_LINE = re.compile(r'^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s*'
                       r'(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')


def parse_gpu_list(text):
    """Parse ``nvidia-smi -L``: GPUs with their MIG devices.

    Returns ``[{"index", "name", "uuid", "mig_devices": [{"profile",
    "device_index", "uuid"}]}]``. Older drivers print no UUID (``None``).
    """
    gpus = []
    for line in (text or '').splitlines():
        if not line.strip() or line.lstrip().startswith('WARNING:'):
            continue
        match = _GPU_LINE.match(line)
        if match:
            gpus.append({'index': int(match.group('index')), 'name': match.group('name'),
                         'uuid': match.group('uuid'), 'mig_devices': []})
            continue
        match = _MIG_LINE.match(line)
        if match and gpus:
            gpus[-1]['mig_devices'].append({'profile': match.group('profile'),
                                            'device_index': int(match.group('index')),
                                            'uuid': match.group('uuid')})
            continue
        raise ValueError('unexpected line in nvidia-smi -L output: %r' % line)
    return gpus


# ------------------------------------------------------------------ topo -m

_AFFINITY_COLUMNS = (('CPU Affinity', 'cpu_affinity'), ('NUMA Affinity', 'numa_affinity'),
                     ('GPU NUMA ID', 'gpu_numa_id'))
_LINK_CODE = re.compile(r'^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|SOC|PSB|N/A)$')


def parse_topology(text):
    """Parse ``nvidia-smi topo -m`` (``--matrix``).

    Returns ``{"devices": [...column names...], "gpus": [{"index", "name",
    "links": {"GPU1": "NV12", "NIC0": "PIX", ...}, "cpu_affinity",
    "numa_affinity", "gpu_numa_id"}], "nics": [{"name", "device", "links"}]}``.
    The link to itself is ``X``; ``N/A`` affinities become ``None``.
    """
    lines = (text or '').splitlines()
    header_at = None
    for number, line in enumerate(lines):
        # The header row starts with blank space where rows start with their name.
        if 'GPU0' in line.split() and (line[:1].isspace() or line.split()[0] != 'GPU0'):
            header_at = number
            break
    if header_at is None:
        raise ValueError('no GPU0 column header in nvidia-smi topo -m output')
    header = lines[header_at]
    cut = len(header)
    for label, _key in _AFFINITY_COLUMNS:
        pos = header.find(label)
        if 0 <= pos < cut:
            cut = pos
    devices = header[:cut].split()
    affinity_keys = [key for label, key in _AFFINITY_COLUMNS if label in header]
    gpus, nics = [], []
    nic_names = {}
    for line in lines[header_at + 1:]:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == 'Legend:':
            break
        if tokens[0] not in devices:
            raise ValueError('unexpected row in nvidia-smi topo -m output: %r' % line)
        codes = tokens[1:1 + len(devices)]
        if len(codes) != len(devices) or not all(_LINK_CODE.match(c) for c in codes):
            raise ValueError('malformed link row in nvidia-smi topo -m output: %r' % line)
        links = dict(zip(devices, codes))
        rest = [normalize_value(v) for v in tokens[1 + len(devices):]]
        if tokens[0].startswith('GPU'):
            entry = {'index': int(tokens[0][3:]) if tokens[0][3:].isdigit() else None, 'name': tokens[0],
                     'links': links, 'cpu_affinity': None, 'numa_affinity': None, 'gpu_numa_id': None}
            for pos, key in enumerate(affinity_keys):
                entry[key] = rest[pos] if pos < len(rest) else None
            gpus.append(entry)
        else:
            nics.append({'name': tokens[0], 'device': None, 'links': links})
    # "NIC Legend:" maps NICn column names to the RDMA device (mlx5_0, ...).
    for line in lines:
        match = re.match(r'^\s*(NIC\d+):\s*(\S+)\s*$', line)
        if match:
            nic_names[match.group(1)] = match.group(2)
    for nic in nics:
        nic['device'] = nic_names.get(nic['name'], nic['name'] if not nic['name'].startswith('NIC') else None)
    gpu_columns = [d for d in devices if d.startswith('GPU')]
    if not gpus or [g['name'] for g in gpus] != gpu_columns:
        # A matrix cut short (a hang killed by the timeout) must not pass for a smaller host.
        raise ValueError('nvidia-smi topo -m lists GPU columns %s but rows %s'
                         % (gpu_columns, [g['name'] for g in gpus]))
    return {'devices': devices, 'gpus': gpus, 'nics': nics}


# ------------------------------------------------------------- nvlink -s

_NVLINK_GPU = re.compile(r'^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')
_NVLINK_LINK = re.compile(r'^\s+Link\s+(?P<link>\d+):\s*(?P<state>.+?)\s*$')


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s``: per GPU, each link's state and speed.

    Returns ``[{"index", "name", "uuid", "links": [{"link", "active",
    "speed_gbps"}]}]``; an inactive link has ``active: false`` and no speed.
    GPUs without NVLink have an empty ``links`` list.
    """
    gpus = []
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        match = _NVLINK_GPU.match(line)
        if match:
            gpus.append({'index': int(match.group('index')), 'name': match.group('name'),
                         'uuid': match.group('uuid'), 'links': []})
            continue
        match = _NVLINK_LINK.match(line)
        if match and gpus:
            state = match.group('state')
            speed = re.match(r'^([\d.]+)\s*GB/s$', state)
            gpus[-1]['links'].append({
                'link': int(match.group('link')),
                'active': bool(speed) or state.lower().strip('<>') == 'active',
                'speed_gbps': float(speed.group(1)) if speed else None,
            })
            continue
        if gpus and line[:1].isspace():
            # Per-GPU notes such as "NVML: Unable to retrieve NVLink
            # information as all links are inActive" mean no active link.
            continue
        raise ValueError('unexpected line in nvidia-smi nvlink -s output: %r' % line)
    return gpus
