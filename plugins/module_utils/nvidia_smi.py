# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure parsers for ``nvidia-smi`` output; no I/O, importable without a module.

Public names: ``parse_query_csv``, ``parse_xml``, ``parse_gpu_list``,
``parse_topology``, ``parse_nvlink_status``, ``classify_failure`` (with its
``Failure`` tuple), and the converters ``normalize_value``, ``to_number`` and
``normalize_pci_bus_id``.

``parse_xml`` and ``parse_query_csv`` return GPUs as the typed record of
``gpu_record`` (booleans for modes, numbers for quantities, strings for
identifiers, ``None`` for values nvidia-smi reports as unavailable such as
``[N/A]``, ``[Not Supported]`` or ``[Unknown Error]``); the CSV reader and the
converters live there because the MIG boot script reads nvidia-smi with them
too.

Every parser raises ``ValueError`` on output it cannot make sense of, so a
caller can turn it into a clean module failure instead of a traceback.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    normalize_pci_bus_id,
    normalize_value,
    parse_query_csv,
    to_bool_mode,
    to_float,
    to_int,
    to_number,
    to_pci_bus_id,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import (
    Failure,
    classify_failure,
)

# The failure classifier and the record's CSV reader and converters live in
# their own files; they are part of this module's public interface too.
__all__ = ['Failure', 'classify_failure', 'normalize_pci_bus_id', 'normalize_value', 'parse_gpu_list',
           'parse_nvlink_status', 'parse_query_csv', 'parse_topology', 'parse_xml', 'to_number']


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


def _first(convert, elem, *paths):
    """``convert`` applied to the first of ``paths`` that holds a value; the XML of each branch names some differently."""
    for path in paths:
        value = convert(_text(elem, path))
        if value is not None:
            return value
    return None


def _int(elem, *paths):
    return _first(to_int, elem, *paths)


def _float(elem, *paths):
    return _first(to_float, elem, *paths)


def _bool(elem, *paths):
    return _first(to_bool_mode, elem, *paths)


def _reading(text):
    # Counter sections mix numbers with flags (R550 sram_threshold_exceeded: No).
    number = to_number(text)
    if number is not None or normalize_value(text) is None:
        return number
    return to_bool_mode(text)


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
            result[child.tag] = _reading(child.text)
    return result


def _total(counters, keys):
    values = [counters[k] for k in keys if counters.get(k) is not None and not isinstance(counters[k], bool)]
    return sum(values) if values else None


def _uncorrectable_total(counters):
    # R535+ splits uncorrectable errors by memory (sram/dram, sometimes
    # parity/secded); older drivers count double-bit errors per location plus
    # a total. Sum whichever scheme the driver used.
    if 'double_bit_total' in counters:
        return _total(counters, ['double_bit_total'])
    return _total(counters, [k for k in counters if 'uncorrectable' in k and not k.startswith('sram_threshold')])


def _correctable_total(counters):
    if 'single_bit_total' in counters:
        return _total(counters, ['single_bit_total'])
    return _total(counters, [k for k in counters if k.endswith('_correctable') and 'uncorrectable' not in k])


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
        'single_bit_ecc': _int(node, 'multiple_single_bit_retirement/retired_count'),
        'double_bit_ecc': _int(node, 'double_bit_retirement/retired_count'),
        'pending': _bool(node, 'pending_retirement', 'pending_blacklist'),
    }


def _remapped_rows(gpu):
    node = gpu.find('remapped_rows')
    # GPUs before Ampere print <remapped_rows>N/A</remapped_rows>.
    if node is None or not len(node):
        return None
    return {
        'correctable': _int(node, 'remapped_row_corr'),
        'uncorrectable': _int(node, 'remapped_row_unc'),
        'pending': _bool(node, 'remapped_row_pending'),
        'failure': _bool(node, 'remapped_row_failure'),
        'bank_availability': dict((bucket, _int(node, 'row_remapper_histogram/row_remapper_histogram_' + bucket))
                                  for bucket in ('max', 'high', 'partial', 'low', 'none')),
    }


# Counter tags of <clocks_event_reasons_counters> (R535+) and their record keys.
_CLOCK_EVENT_COUNTERS = (('sw_power_cap', 'sw_power_cap'), ('sync_boost', 'sync_boost'),
                         ('sw_therm_slowdown', 'sw_thermal_slowdown'), ('hw_therm_slowdown', 'hw_thermal_slowdown'),
                         ('hw_power_brake', 'hw_power_brake_slowdown'))


def _clock_event_us(gpu):
    node = gpu.find('clocks_event_reasons_counters')
    if node is None:
        return None
    return dict((key, _int(node, 'clocks_event_reasons_counters_' + tag)) for tag, key in _CLOCK_EVENT_COUNTERS)


def _fabric(gpu):
    node = gpu.find('fabric')
    if node is None or not len(node):
        return None
    return {
        'state': _text(node, 'state'),
        'status': _text(node, 'status'),
        'clique_id': _text(node, 'cliqueId'),
        'cluster_uuid': _text(node, 'clusterUuid'),
        'health_summary': _text(node, 'health/summary'),
        'health_bandwidth': _text(node, 'health/bandwidth'),
        'route_recovery_in_progress': _text(node, 'health/route_recovery_in_progress'),
        'route_unhealthy': _text(node, 'health/route_unhealthy'),
        'access_timeout_recovery': _text(node, 'health/access_timeout_recovery'),
        'incorrect_configuration': _text(node, 'health/incorrect_configuration'),
    }


def _throttle_reasons(gpu):
    # R535 renamed clocks_throttle_reasons to clocks_event_reasons.
    for tag, prefix in (('clocks_event_reasons', 'clocks_event_reason_'),
                        ('clocks_throttle_reasons', 'clocks_throttle_reason_')):
        node = gpu.find(tag)
        if node is not None:
            return dict((child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag,
                         to_bool_mode(child.text)) for child in node if not len(child))
    return {}


def _clocks(node, names=('graphics', 'sm', 'mem', 'video')):
    if node is None:
        return {}
    return dict(('memory' if name == 'mem' else name, _int(node, '%s_clock' % name)) for name in names)


def _supported_clocks(gpu):
    result = []
    node = gpu.find('supported_clocks')
    if node is None:
        return result
    for mem in node.findall('supported_mem_clock'):
        graphics = [to_int(g.text) for g in mem.findall('supported_graphics_clock')]
        result.append({'memory_mhz': _int(mem, 'value'), 'graphics_mhz': [g for g in graphics if g is not None]})
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
        'draw_w': _float(node, 'power_draw', 'instant_power_draw', 'average_power_draw'),
        'draw_average_w': _float(node, 'average_power_draw'),
        'draw_instant_w': _float(node, 'instant_power_draw'),
        'limit_w': _float(node, 'current_power_limit', 'power_limit'),
        'limit_enforced_w': _float(node, 'enforced_power_limit', 'current_power_limit'),
        'limit_requested_w': _float(node, 'requested_power_limit', 'power_limit'),
        'limit_default_w': _float(node, 'default_power_limit'),
        'limit_min_w': _float(node, 'min_power_limit'),
        'limit_max_w': _float(node, 'max_power_limit'),
    }


def _pcie(gpu):
    pci = gpu.find('pci')
    link = pci.find('pci_gpu_link_info') if pci is not None else None
    return {
        'link_gen_current': _int(link, 'pcie_gen/current_link_gen'),
        'link_gen_max': _int(link, 'pcie_gen/max_link_gen'),
        'link_gen_device_current': _int(link, 'pcie_gen/device_current_link_gen'),
        'link_gen_device_max': _int(link, 'pcie_gen/max_device_link_gen'),
        'link_gen_host_max': _int(link, 'pcie_gen/max_host_link_gen'),
        'link_width_current': _int(link, 'link_widths/current_link_width'),
        'link_width_max': _int(link, 'link_widths/max_link_width'),
        'replay_counter': _int(pci, 'replay_counter'),
    }


def _temperature(gpu):
    node = gpu.find('temperature')
    return {
        'gpu_c': _int(node, 'gpu_temp'),
        'memory_c': _int(node, 'memory_temp'),
        'slowdown_c': _int(node, 'gpu_temp_slow_threshold'),
        'shutdown_c': _int(node, 'gpu_temp_max_threshold'),
        'max_operating_c': _int(node, 'gpu_temp_max_gpu_threshold'),
        'memory_max_c': _int(node, 'gpu_temp_max_mem_threshold'),
        # R560+ on some GPUs report headroom to the thermal limit instead of
        # absolute thresholds: tlimit is the current margin, the *_tlimit_*
        # thresholds are margins at which slowdown/shutdown start.
        'tlimit_c': _int(node, 'gpu_temp_tlimit'),
        'slowdown_tlimit_c': _int(node, 'gpu_temp_slow_tlimit_threshold'),
        'shutdown_tlimit_c': _int(node, 'gpu_temp_max_tlimit_threshold'),
    }


def _mig_devices(gpu):
    devices = []
    node = gpu.find('mig_devices')
    if node is None:
        return devices
    for dev in node.findall('mig_device'):
        shared = dev.find('device_attributes/shared')
        devices.append({
            'index': _int(dev, 'index'),
            'gpu_instance_id': _int(dev, 'gpu_instance_id'),
            'compute_instance_id': _int(dev, 'compute_instance_id'),
            'memory_total_mib': _int(dev, 'fb_memory_usage/total'),
            'memory_used_mib': _int(dev, 'fb_memory_usage/used'),
            'multiprocessor_count': _int(shared, 'multiprocessor_count'),
            'copy_engine_count': _int(shared, 'copy_engine_count'),
            'encoder_count': _int(shared, 'encoder_count'),
            'decoder_count': _int(shared, 'decoder_count'),
            'volatile_uncorrectable_sram': _int(dev, 'ecc_error_count/volatile_count/sram_uncorrectable'),
        })
    return devices


def _processes(gpu):
    result = []
    node = gpu.find('processes')
    if node is None:
        return result
    for proc in node.findall('process_info'):
        result.append({
            'pid': _int(proc, 'pid'),
            'type': _text(proc, 'type'),
            'name': _text(proc, 'process_name'),
            'used_memory_mib': _int(proc, 'used_memory'),
            'gpu_instance_id': _int(proc, 'gpu_instance_id'),
            'compute_instance_id': _int(proc, 'compute_instance_id'),
        })
    return result


def _identity(gpu):
    return {
        'name': _text(gpu, 'product_name'),
        'brand': _text(gpu, 'product_brand'),
        'architecture': _text(gpu, 'product_architecture'),
        'uuid': _text(gpu, 'uuid'),
        'serial': _text(gpu, 'serial'),
        'pci_bus_id': _first(to_pci_bus_id, gpu, 'pci/pci_bus_id') or to_pci_bus_id(gpu.get('id')),
        'pci_device_id': _text(gpu, 'pci/pci_device_id'),
        'pci_sub_system_id': _text(gpu, 'pci/pci_sub_system_id'),
        'minor_number': _int(gpu, 'minor_number'),
        'module_id': _int(gpu, 'gpu_module_id', 'platformInfo/module_id'),
        'vbios_version': _text(gpu, 'vbios_version'),
        'board_part_number': _text(gpu, 'board_part_number'),
        'gpu_part_number': _text(gpu, 'gpu_part_number'),
        'inforom_image_version': _text(gpu, 'inforom_version/img_version'),
        'inforom_oem_version': _text(gpu, 'inforom_version/oem_object'),
        'inforom_ecc_version': _text(gpu, 'inforom_version/ecc_object'),
        'inforom_power_version': _text(gpu, 'inforom_version/pwr_object'),
        'gsp_firmware_version': _text(gpu, 'gsp_firmware_version'),
        'virtualization_mode': _text(gpu, 'gpu_virtualization_mode/virtualization_mode'),
    }


def _modes(gpu):
    return {
        'persistence_mode': _bool(gpu, 'persistence_mode'),
        'display_mode': _bool(gpu, 'display_mode'),
        'display_active': _bool(gpu, 'display_active'),
        'display_attached': _bool(gpu, 'display_attached'),
        'accounting_mode': _bool(gpu, 'accounting_mode'),
        'multigpu_board': _bool(gpu, 'multigpu_board'),
        'addressing_mode': _text(gpu, 'addressing_mode'),
        'c2c_mode': _bool(gpu, 'c2c_mode'),
        'dram_encryption_mode_current': _bool(gpu, 'dram_encryption_mode/current_dram_encryption'),
        'dram_encryption_mode_pending': _bool(gpu, 'dram_encryption_mode/pending_dram_encryption'),
        'compute_mode': _text(gpu, 'compute_mode'),
        'performance_state': _text(gpu, 'performance_state'),
        'mig_mode_current': _bool(gpu, 'mig_mode/current_mig'),
        'mig_mode_pending': _bool(gpu, 'mig_mode/pending_mig'),
        'ecc_mode_current': _bool(gpu, 'ecc_mode/current_ecc'),
        'ecc_mode_pending': _bool(gpu, 'ecc_mode/pending_ecc'),
        'reset_required': _bool(gpu, 'gpu_reset_status/reset_required'),
        'drain_and_reset_recommended': _bool(gpu, 'gpu_reset_status/drain_and_reset_recommended'),
        'recovery_action': _text(gpu, 'gpu_recovery_action'),
    }


def _usage(gpu):
    usage = {
        'memory_total_mib': _int(gpu, 'fb_memory_usage/total'),
        'memory_used_mib': _int(gpu, 'fb_memory_usage/used'),
        'memory_free_mib': _int(gpu, 'fb_memory_usage/free'),
        'memory_reserved_mib': _int(gpu, 'fb_memory_usage/reserved'),
        'fan_speed_percent': _int(gpu, 'fan_speed'),
    }
    for engine in ('gpu', 'memory', 'encoder', 'decoder', 'jpeg', 'ofa'):
        usage['utilization_%s_percent' % engine] = _int(gpu, 'utilization/%s_util' % engine)
    return usage


def _gpu(index, gpu):
    """One ``<gpu>`` element as the record of ``gpu_record.GPU_RECORD``."""
    throttle = _throttle_reasons(gpu)
    record = {'index': index}
    record.update(_identity(gpu))
    record.update(_modes(gpu))
    record.update(_usage(gpu))
    record.update({
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
        'clock_event_us': _clock_event_us(gpu),
        'fabric': _fabric(gpu),
    })
    return record


def parse_xml(text):
    """Parse ``nvidia-smi -q -x`` output.

    Returns ``{"driver_version", "cuda_version", "attached_gpus", "timestamp",
    "gpus", "warnings"}``. ``gpus`` are in nvidia-smi index order (the order
    ``-q`` lists them in), each a record of ``gpu_record.GPU_RECORD``. Text
    printed before the XML document (``WARNING:`` lines) is returned in
    ``warnings``.

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
        'attached_gpus': _int(root, 'attached_gpus'),
        'gpus': [_gpu(index, gpu) for index, gpu in enumerate(root.findall('gpu'))],
        'warnings': warnings,
    }


# ------------------------------------------------------------------------ -L

_GPU_LINE = re.compile(r'^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')
_MIG_LINE = re.compile(r'^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s*'
                       r'(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')


def attach_processes(gpus, processes):
    """Copies of GPU records with their ``processes`` again.

    ``nvidia_smi_info`` returns a GPU's processes in one flat list (``processes``, with ``gpu_index``) and
    leaves them out of the records; a judge of the records puts them back. ``processes`` None (not
    gathered) leaves the records as they are.
    """
    if processes is None:
        return list(gpus)
    by_gpu = {}
    for proc in processes:
        by_gpu.setdefault(proc.get('gpu_index'), []).append(
            dict((key, value) for key, value in proc.items() if key not in ('gpu_index', 'gpu_uuid')))
    return [dict(gpu, processes=by_gpu.get(gpu.get('index'), [])) for gpu in gpus]


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

# The header is printed underlined on a terminal and in captures of one:
# ESC[4m ... ESC[0m around the line.
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;?]*[ -/]*[@-~]')
_AFFINITY_COLUMNS = (('CPU Affinity', 'cpu_affinity'), ('NUMA Affinity', 'numa_affinity'),
                     ('GPU NUMA ID', 'gpu_numa_id'))
_LINK_CODE = re.compile(r'^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|SOC|PSB|N/A)$')
_NIC_LEGEND = re.compile(r'^\s*(NIC\d+)\s*:\s*(\S+)\s*$')


def _topology_header(lines):
    for number, line in enumerate(lines):
        tokens = line.split()
        # The header row starts with blank space where rows start with their name.
        if 'GPU0' in tokens and (line[:1].isspace() or tokens[0] != 'GPU0'):
            return number
    raise ValueError('no GPU0 column header in nvidia-smi topo -m output')


def _header_columns(header):
    """Device column names, and the affinity keys in the order the header prints them."""
    # Affinity labels hold spaces, device names do not: cut the header at the
    # first label, then split the device part on tabs and spaces alike.
    found = sorted((header.find(label), key) for label, key in _AFFINITY_COLUMNS if label in header)
    cut = found[0][0] if found else len(header)
    return header[:cut].split(), [key for _position, key in found]


def _topology_row(line, devices, affinity_keys):
    # Cells are tab separated with padding (" X ", and an empty cell after
    # NUMA Affinity on R5xx); no value holds white space, so split on it.
    tokens = line.split()
    if tokens[0] not in devices:
        raise ValueError('unexpected row in nvidia-smi topo -m output: %r' % line)
    codes = tokens[1:1 + len(devices)]
    if len(codes) != len(devices) or not all(_LINK_CODE.match(c) for c in codes):
        raise ValueError('malformed link row in nvidia-smi topo -m output: %r' % line)
    row = {'name': tokens[0], 'links': dict(zip(devices, codes))}
    rest = [normalize_value(v) for v in tokens[1 + len(devices):]]
    for position, key in enumerate(affinity_keys):
        row[key] = rest[position] if position < len(rest) else None
    return row


def parse_topology(text):
    """Parse ``nvidia-smi topo -m`` (``--matrix``), as the terminal bytes or a plain capture.

    Returns ``{"devices": [...column names...], "gpus": [{"index", "name",
    "links": {"GPU1": "NV12", "NIC0": "PIX", ...}, "cpu_affinity",
    "numa_affinity", "gpu_numa_id"}], "nics": [{"name", "device", "links"}]}``.
    The link to itself is ``X``; ``N/A`` affinities become ``None``. The CPU
    affinity stays the text nvidia-smi prints (``0-47,96-143``);
    ``gpu_record.expand_cpu_list`` turns it into CPU ids.
    """
    lines = [_ANSI_ESCAPE.sub('', line) for line in (text or '').splitlines()]
    header_at = _topology_header(lines)
    devices, affinity_keys = _header_columns(lines[header_at])
    gpus, nics = [], []
    for line in lines[header_at + 1:]:
        if not line.strip():
            continue
        if line.split()[0] in ('Legend:', 'NIC'):
            break
        row = _topology_row(line, devices, affinity_keys)
        if row['name'].startswith('GPU'):
            suffix = row['name'][3:]
            gpus.append(dict({'index': int(suffix) if suffix.isdigit() else None, 'cpu_affinity': None,
                              'numa_affinity': None, 'gpu_numa_id': None}, **row))
        else:
            nics.append({'name': row['name'], 'device': None, 'links': row['links']})
    # "NIC Legend:" maps NICn column names to the RDMA device (mlx5_0, ...);
    # drivers before it named the columns after the devices themselves.
    legend = dict(match.groups() for match in (_NIC_LEGEND.match(line) for line in lines) if match)
    for nic in nics:
        nic['device'] = legend.get(nic['name'], None if nic['name'].startswith('NIC') else nic['name'])
    gpu_columns = [d for d in devices if d.startswith('GPU')]
    if not gpus or [g['name'] for g in gpus] != gpu_columns:
        # A matrix cut short (a hang killed by the timeout) must not pass for a smaller host.
        raise ValueError('nvidia-smi topo -m lists GPU columns %s but rows %s'
                         % (gpu_columns, [g['name'] for g in gpus]))
    return {'devices': devices, 'gpus': gpus, 'nics': nics}


# ------------------------------------------------------------- nvlink -s

_NVLINK_GPU = re.compile(r'^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]+?)\s*\))?\s*$')
_NVLINK_LINK = re.compile(r'^\s+Link\s+(?P<link>\d+):\s*(?P<state>.+?)\s*$')
# What nvidia-smi prints under a GPU instead of links, flush left on current
# drivers: "NVML: Unable to retrieve NVLink information as all links are
# inActive", "Nvlink queries are not supported for Devices in MIG mode",
# "Device does not have or support Nvlink".
_NVLINK_NOTE = re.compile(r'nvlink', re.I)
_NVLINK_UNKNOWN = re.compile(r'not supported|does not have', re.I)


def _nvlink_gpu_header(gpus, line):
    """Start a GPU of ``nvlink -s``/``-e`` output at its ``GPU n: name (UUID: ...)`` line; False for other lines."""
    match = _NVLINK_GPU.match(line)
    if match:
        gpus.append({'index': int(match.group('index')), 'name': match.group('name'),
                     'uuid': match.group('uuid'), 'links': [], 'note': None, 'links_known': True})
    return bool(match)


def _nvlink_note(gpus, line):
    """What nvidia-smi prints under a GPU instead of links; False for other lines."""
    if not gpus:
        return False
    gpus[-1]['note'] = line.strip()
    gpus[-1]['links_known'] = not _NVLINK_UNKNOWN.search(line)
    return True


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s``: per GPU, each link's state and speed.

    Returns ``[{"index", "name", "uuid", "links": [{"link", "active",
    "speed_gbps"}], "note", "links_known"}]``; an inactive link has ``active:
    false`` and no speed. ``note`` is what nvidia-smi printed instead of links
    (or ``None``). ``links_known`` is false where it says it cannot tell (MIG
    mode, a GPU without NVLink): an empty ``links`` list then says nothing
    about links being down, while "all links are inactive" does.
    """
    gpus = []
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        if _nvlink_gpu_header(gpus, line):
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
        if (line[:1].isspace() or _NVLINK_NOTE.search(line)) and _nvlink_note(gpus, line):
            continue
        raise ValueError('unexpected line in nvidia-smi nvlink -s output: %r' % line)
    return gpus


# ------------------------------------------------------------- nvlink -e

_NVLINK_COUNTER = re.compile(r'^\s+Link\s+(?P<link>\d+):\s*(?P<counter>[A-Za-z][A-Za-z ]*?)\s*:\s*(?P<value>.+?)\s*$')


def _counter_key(name):
    # "Replay Errors" -> replay, "CRC Errors" -> crc, "CRC Flit Errors" -> crc_flit
    words = name.strip().lower().split()
    if words and words[-1] == 'errors':
        words = words[:-1]
    return '_'.join(words)


def parse_nvlink_errors(text):
    """Parse ``nvidia-smi nvlink -e``: per GPU, each link's error counters.

    Real output (R535, A100) prints, under each ``GPU n: name (UUID: ...)``
    line, ``Link 0: Replay Errors: 0``, ``Link 0: Recovery Errors: 0`` and
    ``Link 0: CRC Errors: 0`` per link. Returns ``[{"index", "name", "uuid",
    "links": [{"link", "counters": {"replay": n, "recovery": n, "crc": n}}],
    "note", "links_known"}]``: counters keyed by their name without
    "Errors", ``None`` where nvidia-smi prints no value. A GPU whose links
    nvidia-smi cannot read has a ``note`` and no links, as with ``-s``.
    """
    gpus = []
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        if _nvlink_gpu_header(gpus, line):
            continue
        match = _NVLINK_COUNTER.match(line)
        if match and gpus:
            link = int(match.group('link'))
            entries = [entry for entry in gpus[-1]['links'] if entry['link'] == link]
            if not entries:
                entries = [{'link': link, 'counters': {}}]
                gpus[-1]['links'].append(entries[0])
            value = match.group('value')
            number = to_number(value)
            if number is None and normalize_value(value) is not None:
                raise ValueError('unexpected NVLink counter value %r in line %r' % (value, line))
            entries[0]['counters'][_counter_key(match.group('counter'))] = number
            continue
        if _NVLINK_NOTE.search(line) and _nvlink_note(gpus, line):
            continue
        raise ValueError('unexpected line in nvidia-smi nvlink -e output: %r' % line)
    return gpus
