# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Turn GPU readings and kernel log events into health findings.

Pure functions: no command runs here. ``evaluate`` takes GPU records as
``nvidia_smi.parse_xml`` returns them (``gpu_record.GPU_RECORD``; it reads the
keys in ``HEALTH_FIELDS``), parsed kernel log events (``parse_xid_events``),
NVLink states and error counters (``nvidia_smi.parse_nvlink_status`` and
``parse_nvlink_errors``) and the node's previous readings (``health_state``),
and returns findings::

    {'code': 'xid_79', 'severity': 'critical', 'action': 'reboot', 'source': 'nvidia-xid',
     'gpu': {'index': 0, 'uuid': 'GPU-...', 'pci_bus_id': '0000:3b:00.0'},
     'evidence': '...', 'advice': '...'}

Codes, severities, actions, sources and thresholds come from the health
catalog (``health_catalog``). Severity means: ``critical`` take the node (or
GPU) out of service now; ``warning`` needs an operator but work may continue;
``info`` worth knowing. The action is the rung of the catalog's ladder
(none, watch, drain, reset, reboot, rma) the finding calls for.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import normalize_pci_bus_id
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_catalog import (
    THRESHOLDS,
    XID_ACTIONS,
    XID_CATEGORY_ACTIONS,
    Catalog,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernel_log import (
    events_within,
    parse_xid_events,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.xid_catalog import (
    CATEGORY_ADVICE,
    CATEGORY_SEVERITY,
    catalog_codes,
    recovery_target as xid_recovery_target,
    xid_info,
)

# The kernel log parser and the Xid catalogue live in their own files and are
# part of this module's public interface.
__all__ = [
    'CATEGORY_ADVICE', 'CATEGORY_SEVERITY', 'CRITICAL', 'HEALTH_FIELDS', 'INFO', 'SEVERITIES', 'SWITCHES',
    'WARNING', 'Catalog', 'catalog_codes', 'evaluate', 'events_within', 'health_view', 'is_healthy', 'parse_duration',
    'parse_xid_events', 'sort_findings', 'summarize', 'xid_info',
]

CRITICAL = 'critical'
WARNING = 'warning'
INFO = 'info'
SEVERITIES = (CRITICAL, WARNING, INFO)
_RANK = {CRITICAL: 0, WARNING: 1, INFO: 2}

# Keys of the GPU record (gpu_record.GPU_RECORD) the checks read; every value
# may be None when the GPU or driver does not report it, and a None reading
# never yields a finding.
HEALTH_FIELDS = (
    'index', 'uuid', 'pci_bus_id', 'name', 'persistence_mode', 'temperature', 'utilization_gpu_percent',
    'ecc_errors', 'retired_pages', 'remapped_rows', 'throttle_reasons', 'pcie', 'reset_required',
    'drain_and_reset_recommended', 'recovery_action', 'clock_event_us', 'fabric', 'processes', 'memory_used_mib',
)

# What evaluate's ``thresholds`` may switch besides the catalog's thresholds.
SWITCHES = {
    'require_persistence': True,
    'ignore_xids': (),
    'check_pcie': True,
}

# Expected PCIe replays per minute and lane by link generation (DCGM's
# GetExpectedPcieReplayRate, a bit error rate of 1e-12): the limit is
# ceil(rate * lanes) unless health_thresholds names a number.
_PCIE_REPLAYS_PER_LANE_MINUTE = {1: 0.15, 2: 0.3, 3: 0.48, 4: 0.96, 5: 1.92, 6: 3.84}

_SMI_FAILURE_ADVICE_SUFFIX = ' Until nvidia-smi works, no other GPU check of this run means anything.'

_THROTTLE_FINDINGS = (
    ('hw_thermal_slowdown', CRITICAL, 'HW thermal slowdown is active: the GPU is too hot and its clocks are cut.',
     'Check the cooling of this GPU (fans, airflow, blocked inlets, cold aisle temperature, liquid loop) and '
     'drain the node until it runs below its slowdown temperature.'),
    ('hw_power_brake_slowdown', CRITICAL,
     'HW power brake slowdown is active: an external signal (usually the power supply) cut the clocks.',
     'Check the power supplies and power delivery of the node; drain it until the power brake clears.'),
    ('sw_thermal_slowdown', WARNING, 'SW thermal slowdown is active: the driver lowers clocks to stay within '
                                     'its thermal limits.',
     'Check the cooling of this GPU; sustained SW thermal slowdown costs performance.'),
)


def _gpu_ref(gpu):
    if gpu is None:
        return None
    return {'index': gpu.get('index'), 'uuid': gpu.get('uuid'), 'pci_bus_id': gpu.get('pci_bus_id')}


def _label(gpu):
    if gpu is None:
        return 'host'
    if gpu.get('index') is not None:
        return 'GPU %s (%s)' % (gpu['index'], gpu.get('pci_bus_id') or gpu.get('uuid') or 'unknown address')
    return 'GPU at %s' % (gpu.get('pci_bus_id') or 'an unknown address')


def _reading(gpu, section, key):
    return (gpu.get(section) or {}).get(key)


def _finding(code, severity, gpu, evidence, advice, **extra):
    finding = {'code': code, 'severity': severity, 'gpu': _gpu_ref(gpu), 'evidence': evidence, 'advice': advice}
    finding.update(extra)
    return finding


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(value):
    return _number(value) and value > 0


def _merge_thresholds(thresholds, catalog):
    """``(switches, catalog)``: the switches, and the catalog with the caller's threshold values applied to
    every GPU model (a module option set for the whole host beats the catalog's per-model values)."""
    switches = dict(SWITCHES)
    values = {}
    for key, value in (thresholds or {}).items():
        if key in SWITCHES:
            if value is not None:
                switches[key] = value
        elif key in THRESHOLDS:
            if value is not None:
                values[key] = value
        else:
            raise ValueError('unknown health threshold %r' % key)
    catalog = catalog if catalog is not None else Catalog()
    return switches, catalog.with_values(values) if values else catalog


class _Limits(object):
    """The switches and the catalog's thresholds, as seen for one GPU model."""

    def __init__(self, switches, catalog, gpu_name=None):
        self.switches = switches
        self.catalog = catalog
        self.gpu_name = gpu_name

    def __getitem__(self, key):
        if key in self.switches:
            return self.switches[key]
        return self.catalog.threshold(key, self.gpu_name)

    def cited(self, key):
        """``{'name', 'value', 'source'}`` of a threshold, for the finding that used it."""
        return {'name': key, 'value': self[key], 'source': self.catalog.threshold_source(key, self.gpu_name)}

    def for_gpu(self, gpu):
        return _Limits(self.switches, self.catalog, (gpu or {}).get('name'))


def _counter_sum(counters, prefix):
    values = [value for key, value in (counters or {}).items()
              if key.startswith(prefix) and _number(value)]
    return sum(values) if values else None


def _split_ecc(counters):
    """``(sram_uncorrectable, dram_uncorrectable, sram_correctable, dram_correctable)`` of a counter section
    that reports SRAM and DRAM apart (R535+ on Ampere and newer), else ``None``."""
    if not any(key.startswith(('sram_', 'dram_')) for key in counters or {}):
        return None
    return (_counter_sum(counters, 'sram_uncorrectable'), _counter_sum(counters, 'dram_uncorrectable'),
            _counter_sum(counters, 'sram_correctable'), _counter_sum(counters, 'dram_correctable'))


def _larger(*values):
    numbers = [value for value in values if _number(value)]
    return max(numbers) if numbers else None


def _ecc_findings(gpu, limits):
    findings = []
    errors = gpu.get('ecc_errors') or {}
    volatile_split = _split_ecc(errors.get('volatile'))
    aggregate_split = _split_ecc(errors.get('aggregate'))
    if volatile_split is not None:
        sram_unc, dram_unc = volatile_split[0], volatile_split[1]
        if _positive(sram_unc):
            findings.append(_finding(
                'ecc_sram_uncorrectable', CRITICAL, gpu,
                '%s: %s uncorrectable SRAM ECC errors since the driver was loaded.' % (_label(gpu), sram_unc),
                'An uncorrectable error in on-chip SRAM (L2, register files) is not repaired by row remapping. '
                'Drain the node and reset the GPU; if the driver then flags sram_threshold_exceeded, run the field '
                'diagnostics and replace the GPU.'))
        if _positive(dram_unc):
            findings.append(_finding(
                'ecc_uncorrectable_volatile', CRITICAL, gpu,
                '%s: %s uncorrectable DRAM (HBM) ECC errors since the driver was loaded.' % (_label(gpu), dram_unc),
                xid_info(48).advice))
    else:
        volatile = _reading(gpu, 'ecc_errors', 'volatile_uncorrected')
        if _positive(volatile):
            findings.append(_finding(
                'ecc_uncorrectable_volatile', CRITICAL, gpu,
                '%s: %s uncorrectable ECC errors since the driver was loaded.' % (_label(gpu), volatile),
                xid_info(48).advice))
    if any((errors.get(section) or {}).get('sram_threshold_exceeded') is True for section in ('volatile', 'aggregate')):
        findings.append(_finding(
            'ecc_sram_threshold_exceeded', CRITICAL, gpu,
            '%s: the driver reports that the SRAM ECC error threshold is exceeded (sram_threshold_exceeded).'
            % _label(gpu),
            'NVIDIA\'s resolution for this flag is the field diagnostic and, when it confirms, a replacement: drain '
            'the node and open a hardware case.'))
    aggregate = _reading(gpu, 'ecc_errors', 'aggregate_uncorrected')
    if _positive(aggregate):
        limit = limits['ecc_aggregate_uncorrectable_max']
        over = limit is not None and aggregate > limit
        findings.append(_finding(
            'ecc_uncorrectable_history', WARNING if over else INFO, gpu,
            '%s: %s uncorrectable ECC errors over the GPU\'s lifetime%s.'
            % (_label(gpu), aggregate, ' (limit %s)' % limit if over else ''),
            'Lifetime counts include errors already repaired by page retirement or row remapping. '
            'Compare with the fleet; replace the GPU if the count keeps growing.',
            **({'threshold': limits.cited('ecc_aggregate_uncorrectable_max')} if over else {})))
    # Correctable errors: the larger of the count since the driver loaded
    # and the lifetime count, as Azure's node health checks read them.
    if volatile_split is not None or aggregate_split is not None:
        sram_cor = _larger((volatile_split or (None,) * 4)[2], (aggregate_split or (None,) * 4)[2])
        dram_cor = _larger((volatile_split or (None,) * 4)[3], (aggregate_split or (None,) * 4)[3])
    else:
        sram_cor = None
        dram_cor = _larger(_reading(gpu, 'ecc_errors', 'volatile_corrected'),
                           _reading(gpu, 'ecc_errors', 'aggregate_corrected'))
    for code, kind, count, name in (('ecc_sram_correctable_high', 'SRAM', sram_cor, 'ecc_sram_correctable_max'),
                                    ('ecc_dram_correctable_high', 'DRAM', dram_cor, 'ecc_dram_correctable_max')):
        limit = limits[name]
        if _number(count) and limit is not None and count > limit:
            findings.append(_finding(
                code, WARNING, gpu,
                '%s: %s correctable %s ECC errors (limit %s).' % (_label(gpu), count, kind, limit),
                'Correctable errors are repaired, but a count this high means the memory is wearing out: drain '
                'the node, run DCGM diagnostics (dcgmi diag -r 3) and replace the GPU if they fail.',
                threshold=limits.cited(name)))
    return findings


def _memory_repair_findings(gpu, limits):
    findings = []
    if _reading(gpu, 'remapped_rows', 'failure') is True:
        findings.append(_finding(
            'remapped_rows_failure', CRITICAL, gpu,
            '%s: row remapping failed; faulty memory rows could not be replaced.' % _label(gpu),
            'Drain the node and replace the GPU (RMA); it has run out of spare memory rows or cannot '
            'remap them.'))
    uncorrectable = _reading(gpu, 'remapped_rows', 'uncorrectable')
    if _reading(gpu, 'remapped_rows', 'pending') is True:
        findings.append(_finding(
            'remapped_rows_pending', WARNING, gpu,
            '%s: a row remap is pending%s; it takes effect at the next GPU reset.'
            % (_label(gpu), ' (%s uncorrectable rows remapped so far)' % uncorrectable
               if _positive(uncorrectable) else ''),
            xid_info(63).advice))
    limit = limits['remapped_rows_uncorrectable_max']
    if _number(uncorrectable) and limit is not None and uncorrectable > limit:
        findings.append(_finding(
            'remapped_rows_uncorrectable_high', WARNING, gpu,
            '%s: %s rows remapped for uncorrectable errors (limit %s).' % (_label(gpu), uncorrectable, limit),
            'DCGM calls a GPU with this many uncorrectable remaps in a bad state: plan its replacement.',
            threshold=limits.cited('remapped_rows_uncorrectable_max')))
    banks = (gpu.get('remapped_rows') or {}).get('bank_availability') or {}
    exhausted = banks.get('none')
    limit = limits['remap_banks_exhausted_max']
    if _number(exhausted) and limit is not None and exhausted > limit:
        findings.append(_finding(
            'remapped_rows_spares_low', WARNING, gpu,
            '%s: %s memory bank%s without a spare row left (remap availability: %s).'
            % (_label(gpu), exhausted, '' if exhausted == 1 else 's',
               ', '.join('%s %s' % (bucket, banks.get(bucket)) for bucket in ('max', 'high', 'partial', 'low', 'none')
                         if banks.get(bucket) is not None)),
            'The next uncorrectable error in such a bank cannot be remapped and fails the GPU: plan its '
            'replacement before it does.', threshold=limits.cited('remap_banks_exhausted_max')))
    if _reading(gpu, 'retired_pages', 'pending') is True:
        findings.append(_finding(
            'retired_pages_pending', WARNING, gpu,
            '%s: memory pages are pending retirement; they are retired when the driver reloads.' % _label(gpu),
            'Reset the GPU or reboot at the next maintenance window so the pages are retired.'))
    retired = [_reading(gpu, 'retired_pages', key) for key in ('single_bit_ecc', 'double_bit_ecc')]
    limit = limits['retired_pages_max']
    if any(_number(count) for count in retired) and limit is not None:
        total = sum(count for count in retired if _number(count))
        if total > limit:
            findings.append(_finding(
                'retired_pages_limit', CRITICAL, gpu,
                '%s: %s memory pages retired (limit %s).' % (_label(gpu), total, limit),
                'The page retirement table is (nearly) full: DCGM fails such a GPU. Drain the node and replace '
                'the GPU.', threshold=limits.cited('retired_pages_max')))
    return findings


def _seconds(microseconds):
    return microseconds / 1000000.0


def _thermal_findings(gpu, limits):
    findings = []
    temperature = _reading(gpu, 'temperature', 'gpu_c')
    slowdown = _reading(gpu, 'temperature', 'slowdown_c')
    margin = limits['temperature_margin_c']
    if _number(temperature) and _number(slowdown):
        headroom = slowdown - temperature
        reading = '%s C against its slowdown temperature of %s C' % (temperature, slowdown)
    else:
        # Newer drivers report some GPUs only as margins to their thermal
        # limit (T.Limit): the current margin and the margin at which
        # slowdown starts (often negative) give the distance to slowdown.
        tlimit = _reading(gpu, 'temperature', 'tlimit_c')
        slowdown_tlimit = _reading(gpu, 'temperature', 'slowdown_tlimit_c')
        headroom = tlimit - slowdown_tlimit if _number(tlimit) and _number(slowdown_tlimit) else None
        reading = '%s C of headroom before slowdown (T.Limit margins)' % headroom
    if _number(headroom):
        extra = {'temperature_c': temperature, 'slowdown_temperature_c': slowdown, 'slowdown_headroom_c': headroom}
        if headroom <= 0:
            findings.append(_finding(
                'temperature_at_slowdown', CRITICAL, gpu,
                '%s: reached its slowdown temperature (%s).' % (_label(gpu), reading),
                'The GPU throttles itself to cool down. Check fans, airflow and inlet temperature and drain the '
                'node until it runs cooler.', **extra))
        elif margin is not None and headroom <= margin:
            findings.append(_finding(
                'temperature_near_slowdown', WARNING, gpu,
                '%s: within %s C of its slowdown temperature (%s).' % (_label(gpu), margin, reading),
                'Check the cooling before the GPU starts to throttle.', threshold=limits.cited('temperature_margin_c'),
                **extra))
    memory, memory_max = _reading(gpu, 'temperature', 'memory_c'), _reading(gpu, 'temperature', 'memory_max_c')
    memory_margin = limits['memory_temperature_margin_c']
    if _number(memory) and _number(memory_max):
        extra = {'memory_temperature_c': memory, 'memory_temperature_limit_c': memory_max}
        reading = 'HBM at %s C against its limit of %s C (GPU at %s C)' % (memory, memory_max, temperature)
        if memory >= memory_max:
            findings.append(_finding(
                'memory_temperature_at_limit', CRITICAL, gpu,
                '%s: %s; the GPU slows down to protect its memory.' % (_label(gpu), reading),
                'Check the cooling of the GPU\'s memory (airflow over the HBM side, liquid loop) and drain the '
                'node until it runs cooler.', **extra))
        elif memory_margin is not None and memory_max - memory <= memory_margin:
            findings.append(_finding(
                'memory_temperature_near_limit', WARNING, gpu,
                '%s: %s, within %s C.' % (_label(gpu), reading, memory_margin),
                'Check the cooling before the memory forces a slowdown.',
                threshold=limits.cited('memory_temperature_margin_c'), **extra))
    reasons = gpu.get('throttle_reasons') or {}
    counters = gpu.get('clock_event_us') or {}
    specific = False
    for reason, severity, evidence, advice in _THROTTLE_FINDINGS:
        if reasons.get(reason) is True:
            specific = specific or reason.startswith('hw_')
            spent = counters.get(reason)
            findings.append(_finding(
                reason, severity, gpu, '%s: %s%s' % (
                    _label(gpu), evidence,
                    ' It has been active for %.0f s in all since the driver was loaded.' % _seconds(spent)
                    if _number(spent) else ''),
                advice, **({'active_seconds': round(_seconds(spent), 3)} if _number(spent) else {})))
    # The generic HW slowdown flag is also raised by the thermal and power
    # brake cases; report it alone only when neither explains it.
    if reasons.get('hw_slowdown') is True and not specific:
        findings.append(_finding(
            'hw_slowdown', CRITICAL, gpu,
            '%s: HW slowdown is active: clocks are cut by half or more.' % _label(gpu),
            'HW slowdown is triggered by high temperature or by the power supply. Check cooling and power '
            'and drain the node until it clears.'))
    return findings


def _pcie_findings(gpu, limits):
    findings = []
    width, width_max = _reading(gpu, 'pcie', 'link_width_current'), _reading(gpu, 'pcie', 'link_width_max')
    if _positive(width) and _positive(width_max) and width < width_max:
        findings.append(_finding(
            'pcie_link_width_degraded', WARNING, gpu,
            '%s: PCIe link runs at x%s of a possible x%s.' % (_label(gpu), width, width_max),
            'A narrower link than the slot allows points to a badly seated card, riser or cable, or damaged '
            'lanes. Reseat or service the GPU at the next maintenance window.'))
    # GPUs lower their link generation when idle to save power, so a low
    # generation says nothing about an idle GPU; only a busy one should be
    # running at its maximum.
    gen, gen_max = _reading(gpu, 'pcie', 'link_gen_current'), _reading(gpu, 'pcie', 'link_gen_max')
    utilization = gpu.get('utilization_gpu_percent')
    floor = limits['pcie_gen_min_utilization']
    if (_positive(gen) and _positive(gen_max) and gen < gen_max and floor is not None
            and isinstance(utilization, (int, float)) and utilization >= floor):
        findings.append(_finding(
            'pcie_link_gen_degraded', WARNING, gpu,
            '%s: PCIe link runs at generation %s of a possible %s while the GPU is %s%% busy.'
            % (_label(gpu), gen, gen_max, utilization),
            'A busy GPU should train its link to the highest generation the slot supports; check BIOS PCIe '
            'settings, risers and retimers, and reseat the card.', threshold=limits.cited('pcie_gen_min_utilization')))
    return findings


def _recovery_target_action(text):
    lowered = (text or '').lower()
    for word, action in (('reboot', 'reboot'), ('reset', 'reset'), ('drain', 'drain')):
        if word in lowered:
            return action
    return 'watch'


def _recovery_findings(gpu, explained):
    action = gpu.get('recovery_action')
    if action and action.strip().lower() not in ('none', '0'):
        return [_finding(
            'gpu_recovery_action', CRITICAL, gpu,
            '%s: the driver requests the recovery action "%s".' % (_label(gpu), action),
            'Follow the requested action: drain the node, then reset the GPU or reboot as named; check the '
            'kernel log for the Xid that caused it.', recovery_action=action,
            action=_recovery_target_action(action))]
    if gpu.get('drain_and_reset_recommended') is True:
        return [_finding(
            'gpu_drain_and_reset_recommended', CRITICAL, gpu,
            '%s: the driver recommends draining the node and resetting the GPU.' % _label(gpu),
            'Drain the node, stop the processes on the GPU and reset it (nvidia-smi -r -i <gpu>) or reboot.')]
    if gpu.get('reset_required') is True and not explained:
        return [_finding(
            'gpu_reset_required', WARNING, gpu, '%s: the driver reports that the GPU needs a reset.' % _label(gpu),
            'Reset the GPU (nvidia-smi -r -i <gpu>) or reboot at the next maintenance window.')]
    return []


_TRUE_WORDS = ('true', 'yes')


def _fabric_findings(gpu):
    fabric = gpu.get('fabric') or {}
    state, status = fabric.get('state'), fabric.get('status')
    if state is None:
        return []
    findings = []
    if state.lower() != 'completed' or (status is not None and status.lower() != 'success'):
        findings.append(_finding(
            'fabric_not_ready', CRITICAL, gpu,
            '%s: NVLink fabric registration is "%s"%s.' % (
                _label(gpu), state, ' with status "%s"' % status if status is not None else ''),
            'GPUs join the NVLink fabric through nvidia-fabricmanager (HGX with NVSwitch) or IMEX and the NVLink '
            'switch trays (GB200): check those services and their logs; multi-GPU jobs fail until it completes.',
            fabric=dict(fabric)))
    problems = []
    summary = fabric.get('health_summary')
    if summary is not None and summary.lower() != 'healthy':
        problems.append('health summary "%s"' % summary)
    bandwidth = fabric.get('health_bandwidth')
    if bandwidth is not None and bandwidth.lower() != 'full':
        problems.append('bandwidth "%s"' % bandwidth)
    if (fabric.get('route_unhealthy') or '').lower() in _TRUE_WORDS:
        problems.append('a route is unhealthy')
    configuration = fabric.get('incorrect_configuration')
    if configuration is not None and configuration.lower() != 'none':
        problems.append('incorrect configuration "%s"' % configuration)
    if problems:
        findings.append(_finding(
            'fabric_unhealthy', CRITICAL, gpu,
            '%s: the NVLink fabric reports %s (clique %s).'
            % (_label(gpu), ', '.join(problems), fabric.get('clique_id')),
            'Drain the node; check the NVLink switch trays and the fabric manager (nvidia-smi -q -d FABRIC on '
            'every node of the clique), then reset the GPUs or reboot.', fabric=dict(fabric)))
    return findings


def _idle_findings(gpu, limits, node_idle):
    if node_idle is not True:
        return []
    processes = gpu.get('processes') or []
    used = gpu.get('memory_used_mib')
    limit = limits['idle_gpu_memory_used_mib_max']
    over = _number(used) and limit is not None and used > limit
    if not processes and not over:
        return []
    return [_finding(
        'gpu_busy_while_idle', WARNING, gpu,
        '%s: the scheduler runs no job on this node, yet %s.' % (_label(gpu), ' and '.join(part for part in (
            '%s process%s use%s the GPU (%s)' % (
                len(processes), '' if len(processes) == 1 else 'es', 's' if len(processes) == 1 else '',
                ', '.join('%s pid %s' % (proc.get('name'), proc.get('pid')) for proc in processes[:5]))
            if processes else '', '%s MiB of its memory is in use (limit %s MiB)' % (used, limit) if over else '')
            if part)),
        'A process left behind by an ended job holds the GPU and its memory: the next job fails or runs '
        'slowly. Drain the node, end the processes (or reset the GPU) and resume it.',
        processes=[{'pid': proc.get('pid'), 'name': proc.get('name')} for proc in processes],
        threshold=limits.cited('idle_gpu_memory_used_mib_max'))]


def _gpu_findings(gpu, limits, node_idle=None):
    limits = limits.for_gpu(gpu)
    findings = []
    findings.extend(_ecc_findings(gpu, limits))
    repairs = _memory_repair_findings(gpu, limits)
    findings.extend(repairs)
    # A pending or failed remap or page retirement also sets "reset required";
    # the finding for it already says so.
    explained = any(f['code'] in ('remapped_rows_pending', 'remapped_rows_failure', 'retired_pages_pending')
                    for f in repairs)
    findings.extend(_recovery_findings(gpu, explained=explained))
    findings.extend(_thermal_findings(gpu, limits))
    if limits['check_pcie']:
        findings.extend(_pcie_findings(gpu, limits))
    findings.extend(_fabric_findings(gpu))
    findings.extend(_idle_findings(gpu, limits, node_idle))
    if limits['require_persistence'] and gpu.get('persistence_mode') is False:
        findings.append(_finding(
            'persistence_mode_off', WARNING, gpu, '%s: persistence mode is off.' % _label(gpu),
            'Without persistence the driver re-initialises the GPU for every new client, which costs seconds '
            'per job and makes nvidia-smi slow. Enable and start nvidia-persistenced.'))
    return findings


def health_view(gpu):
    """The ``HEALTH_FIELDS`` of one GPU record: what a GPU was judged on, under the record's own keys."""
    return dict((key, gpu.get(key)) for key in HEALTH_FIELDS)


def _by_pci(gpus):
    table = {}
    for gpu in gpus:
        key = normalize_pci_bus_id(gpu.get('pci_bus_id'))
        if key:
            table[key] = gpu
    return table


def _when(event):
    if event.get('timestamp'):
        return event['timestamp']
    if event.get('uptime_seconds') is not None:
        return '%.6f s after boot' % event['uptime_seconds']
    return None


def _times(events):
    stamps = [stamp for stamp in (_when(event) for event in events) if stamp is not None]
    return (stamps[0], stamps[-1]) if stamps else (None, None)


def _xid_action(code, info, message):
    if code == 154 and message:
        target = xid_recovery_target(message)
        if target:
            return _recovery_target_action(target)
    return XID_ACTIONS.get(code, XID_CATEGORY_ACTIONS.get(info.category, 'watch'))


def _xid_findings(gpus, events, ignore):
    gpus_by_pci = _by_pci(gpus)
    groups = {}
    order = []
    for event in events:
        if event['kind'] == 'xid' and event['code'] in ignore:
            continue
        key = (event['kind'], event['pci_bus_id'], event['code'])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(event)
    xid79_devices = set(pci for kind, pci, code in order if kind == 'xid' and code == 79)

    findings = []
    for key in order:
        kind, pci, code = key
        group = groups[key]
        first_seen, last_seen = _times(group)
        gpu = gpus_by_pci.get(pci) or {'index': None, 'uuid': None, 'pci_bus_id': pci}
        times = '%s time%s' % (len(group), '' if len(group) == 1 else 's')
        if kind == 'xid':
            info = xid_info(code, group[-1].get('message'))
            findings.append(_finding(
                'xid_%s' % code, info.severity, gpu,
                '%s: Xid %s (%s) logged %s; last: %s' % (_label(gpu), code, info.name, times, group[-1]['line']),
                info.advice, xid=code, xid_name=info.name, meaning=info.meaning, xid_category=info.category,
                action=_xid_action(code, info, group[-1].get('message')),
                count=len(group), first_seen=first_seen, last_seen=last_seen, last_line=group[-1]['line']))
        elif kind == 'fallen_off_bus':
            if pci in xid79_devices:
                continue
            info = xid_info(79)
            findings.append(_finding(
                'gpu_fell_off_bus', CRITICAL, gpu,
                '%s: the driver reports the GPU has fallen off the bus (%s); last: %s'
                % (_label(gpu), times, group[-1]['line']),
                info.advice, count=len(group), first_seen=first_seen, last_seen=last_seen,
                last_line=group[-1]['line']))
        else:
            fatal = any(event.get('fatal') is True for event in group)
            kind_text = 'fatal' if fatal else (
                'non-fatal' if all(event.get('fatal') is False for event in group) else 'of unstated severity')
            findings.append(_finding(
                'sxid_%s' % code, CRITICAL if fatal else WARNING, None,
                'NVSwitch %s (%s): SXid %s %s logged %s; last: %s'
                % (group[-1].get('switch'), pci, code, kind_text, times, group[-1]['line']),
                'A fatal NVSwitch error takes its links down: drain the node and reboot it (or reset the GPUs and '
                'restart nvidia-fabricmanager), and contact support if it repeats.' if fatal else
                'Non-fatal NVSwitch errors are corrected; track them and check the NVLink fabric '
                '(nvidia-smi nvlink -e) if they repeat.',
                sxid=code, nvswitch={'name': group[-1].get('switch'), 'pci_bus_id': pci},
                action='reboot' if fatal else 'watch',
                count=len(group), first_seen=first_seen, last_seen=last_seen, last_line=group[-1]['line']))
    return findings


def _model(index, gpus_by_index, nvlink):
    return (gpus_by_index.get(index) or {}).get('name') or (nvlink.get(index) or {}).get('name')


def _nvlink_findings(gpus, nvlink, limits):
    gpus_by_index = dict((gpu.get('index'), gpu) for gpu in gpus)
    # A GPU whose NVLink state nvidia-smi cannot tell (MIG mode, no NVLink) is not judged.
    untold = set(status['index'] for status in nvlink if not status.get('links_known', True))
    nvlink = dict((status['index'], status) for status in nvlink if status['index'] not in untold)
    active = {}
    for index, status in nvlink.items():
        active[index] = [link['link'] for link in status.get('links', []) if link['active'] is True]
    candidates = (set(active) | set(i for i in gpus_by_index if i is not None)) - untold
    # The catalog names the links of a model (18 on H100 SXM); for a model it
    # does not know, the best-connected GPU of the same model on the host sets
    # the expectation: a host whose GPUs report no active link uses no NVLink
    # at all, and a display or inference card next to SXM boards has none to lose.
    expected = {}
    for index in candidates:
        model = _model(index, gpus_by_index, nvlink)
        expected[index] = limits.catalog.threshold('nvlink_expected_active', model)
    best = {}
    for index, links in active.items():
        model = _model(index, gpus_by_index, nvlink)
        best[model] = max(best.get(model, 0), len(links))
    findings = []
    for index in sorted(candidates):
        model = _model(index, gpus_by_index, nvlink)
        want = expected[index]
        cited = {'name': 'nvlink_expected_active', 'value': want,
                 'source': limits.catalog.threshold_source('nvlink_expected_active', model)}
        if want is None:
            want = best.get(model, 0)
            cited = {'name': 'nvlink_expected_active', 'value': want, 'source': 'host'}
        status = nvlink.get(index)
        gpu = gpus_by_index.get(index) or {'index': index, 'uuid': (status or {}).get('uuid'), 'pci_bus_id': None}
        up = active.get(index, [])
        if not want or len(up) >= want:
            continue
        down = [link['link'] for link in (status or {}).get('links', []) if link['active'] is not True]
        findings.append(_finding(
            'nvlink_down', CRITICAL, gpu,
            '%s: %s of %s expected NVLinks active%s.'
            % (_label(gpu), len(up), want,
               '; not active: %s' % ', '.join(str(link) for link in down) if down else
               '; nvidia-smi reported no NVLink state for it'),
            'Multi-GPU jobs lose NVLink bandwidth or hang. Drain the node, check nvidia-smi nvlink -e and, on '
            'NVSwitch systems, nvidia-fabricmanager; reset the GPUs or reboot, and have the link repaired if '
            'it stays down.', nvlink_active=len(up), nvlink_expected=want, threshold=cited))
    return findings


def _elapsed(previous, now):
    then = (previous or {}).get('time')
    if not _number(then) or not _number(now) or now <= then:
        return None
    return now - then


def _growth(current, before):
    """How much a counter grew; a counter that went down was reset (driver reload): its value is the growth."""
    if not _number(current):
        return None
    if not _number(before):
        return None
    return current - before if current >= before else current


def _previous_gpu(previous, gpu):
    return ((previous or {}).get('gpus') or {}).get(gpu.get('uuid') or '') or {}


def _history_findings(gpus, limits, previous, now):
    """Counters that only mean something as growth since the previous run: PCIe replays and HW slowdown time."""
    findings = []
    elapsed = _elapsed(previous, now)
    if elapsed is None:
        return findings
    for gpu in gpus:
        before = _previous_gpu(previous, gpu)
        gpu_limits = limits.for_gpu(gpu)
        replays = _growth(_reading(gpu, 'pcie', 'replay_counter'), before.get('pcie_replay_counter'))
        if _positive(replays):
            per_minute = replays * 60.0 / elapsed
            limit, cited = gpu_limits['pcie_replays_per_minute_max'], gpu_limits.cited('pcie_replays_per_minute_max')
            if limit is None:
                gen, width = _reading(gpu, 'pcie', 'link_gen_current'), _reading(gpu, 'pcie', 'link_width_current')
                if _positive(gen) and _positive(width):
                    rate = _PCIE_REPLAYS_PER_LANE_MINUTE[min(int(gen), 6)]
                    limit = int(math.ceil(rate * width))
                    cited = {'name': 'pcie_replays_per_minute_max', 'value': limit, 'source': 'nvidia-dcgm-health'}
            if limit is not None and per_minute > limit:
                findings.append(_finding(
                    'pcie_replays_growing', WARNING, gpu,
                    '%s: %s PCIe replays in the %.0f s since the previous run (%.1f a minute, limit %s).'
                    % (_label(gpu), replays, elapsed, per_minute, limit),
                    'Replays are PCIe packets sent again after a link error: a rising rate points to a riser, '
                    'retimer or slot going bad. Reseat the GPU at the next maintenance window; drain it if Xid 79 '
                    'follows.', threshold=cited, replays=replays, seconds=round(elapsed, 1)))
        counters = gpu.get('clock_event_us') or {}
        spent = [(reason, _growth(counters.get(reason), (before.get('clock_event_us') or {}).get(reason)))
                 for reason in ('hw_thermal_slowdown', 'hw_power_brake_slowdown')]
        spent = [(reason, grown) for reason, grown in spent if _positive(grown)]
        limit = gpu_limits['hw_slowdown_seconds_max']
        total = _seconds(sum(grown for _reason, grown in spent)) if spent else 0
        if spent and limit is not None and total > limit:
            findings.append(_finding(
                'hw_slowdown_recent', WARNING, gpu,
                '%s: HW slowdown was active for %.1f s of the %.0f s since the previous run (%s).'
                % (_label(gpu), total, elapsed, ', '.join('%s %.1f s' % (reason.replace('_', ' '), _seconds(grown))
                                                          for reason, grown in spent)),
                'The GPU cut its clocks for heat or power between the two runs, even if it does not now: check '
                'cooling and power supplies, and compare with the node\'s neighbours.',
                threshold=gpu_limits.cited('hw_slowdown_seconds_max'), seconds=round(total, 3)))
    return findings


_NVLINK_COUNTERS = (
    ('replay', 'nvlink_replay_errors', 'nvlink_replay_errors_max', 'replay'),
    ('recovery', 'nvlink_recovery_errors', 'nvlink_recovery_errors_max', 'recovery'),
    ('crc', 'nvlink_crc_errors', 'nvlink_crc_errors_max', 'CRC'),
)


def _link_counter(counters, key):
    # "CRC Errors" on current drivers; a driver that splits flit and data CRC
    # errors counts both as CRC.
    if key == 'crc':
        return _counter_sum(counters, 'crc')
    return counters.get(key)


def _nvlink_error_findings(gpus, nvlink_errors, limits, previous, now):
    findings = []
    gpus_by_index = dict((gpu.get('index'), gpu) for gpu in gpus)
    elapsed = _elapsed(previous, now)
    for status in nvlink_errors or ():
        gpu = gpus_by_index.get(status['index']) or {'index': status['index'], 'uuid': status.get('uuid'),
                                                     'pci_bus_id': None, 'name': status.get('name')}
        gpu_limits = limits.for_gpu(gpu)
        before_links = _previous_gpu(previous, gpu).get('nvlink_errors') or {}
        for key, code, limit_name, word in _NVLINK_COUNTERS:
            limit = gpu_limits[limit_name]
            if limit is None:
                continue
            worst = []
            for link in status.get('links', []):
                value = _link_counter(link['counters'], key)
                before = (before_links.get(str(link['link'])) or {}).get(key)
                # Growth since the previous run where there is one, else the
                # count since the driver loaded.
                counted = _growth(value, before) if elapsed is not None and _number(before) else value
                if _number(counted) and counted > limit:
                    worst.append((link['link'], counted))
            if not worst:
                continue
            rate = None
            severity = CRITICAL if key != 'crc' else WARNING
            action = 'reset' if key != 'crc' else 'watch'
            if key == 'crc' and elapsed is not None:
                rate = max(counted for _link, counted in worst) / elapsed
                if rate >= gpu_limits['nvlink_crc_errors_per_second_max']:
                    severity, action = CRITICAL, 'reset'
            findings.append(_finding(
                code, severity, gpu,
                '%s: NVLink %s errors %s: %s (limit %s per link)%s.'
                % (_label(gpu), word, 'since the previous run' if elapsed is not None and before_links else
                   'since the driver was loaded', ', '.join('link %s: %s' % pair for pair in worst), limit,
                   '; %.1f a second' % rate if rate is not None else ''),
                'Replay and recovery errors mean a link retrained or resent data: DCGM fails the GPU on them. '
                'Drain the node, reset the GPUs (or reboot) and have the link or NVSwitch tray inspected if they '
                'return.' if key != 'crc' else
                'CRC errors are corrected by replays; at 100 a second or more (DCGM\'s limit) they cost bandwidth '
                'and precede link failures. Track them and inspect the link if they keep growing.',
                action=action, links=[{'link': link, 'errors': count} for link, count in worst],
                threshold=gpu_limits.cited(limit_name)))
    return findings


def _smi_findings(smi_failure, smi_seconds, limits, smi_warnings):
    findings = []
    for warning in smi_warnings or ():
        findings.append(_finding(
            'nvidia_smi_warning', WARNING, None, 'nvidia-smi printed: %s' % warning,
            'nvidia-smi worked but warned about a GPU; a corrupted infoROM, for example, needs the GPU '
            'serviced. Read the warning and check that GPU.'))
    if smi_failure:
        reason = smi_failure.get('reason') or 'unknown'
        detail = (smi_failure.get('stderr') or smi_failure.get('stdout') or '').strip().splitlines()
        # "Unable to determine the device handle for GPU0000:07:00.0" names the GPU at fault.
        named = smi_failure.get('pci_bus_id')
        findings.append(_finding(
            'nvidia_smi_%s' % reason, CRITICAL, {'index': None, 'uuid': None, 'pci_bus_id': named} if named else None,
            'nvidia-smi failed with rc %s (%s)%s'
            % (smi_failure.get('rc'), reason, ': %s' % detail[0] if detail else ''),
            (smi_failure.get('hint') or 'Read the nvidia-smi output and the kernel log.') + _SMI_FAILURE_ADVICE_SUFFIX,
            reason=reason))
    limit = limits['max_smi_seconds']
    # A timeout is already a critical finding; calling it slow as well says nothing new.
    timed_out = bool(smi_failure) and smi_failure.get('reason') == 'timeout'
    if smi_seconds is not None and limit is not None and smi_seconds > limit and not timed_out:
        findings.append(_finding(
            'nvidia_smi_slow', WARNING, None,
            'nvidia-smi took %.1f s (limit %s s).' % (smi_seconds, limit),
            'A slow nvidia-smi usually means persistence is off (the driver initialises the GPUs for every '
            'call) or a GPU is struggling; start nvidia-persistenced and check the kernel log.',
            seconds=round(smi_seconds, 3)))
    return findings


def evaluate(gpus, xid_events=(), thresholds=None, expected_count=None, nvlink=None,
             smi_failure=None, smi_seconds=None, kernel_log_error=None, smi_warnings=(), nvlink_error=None,
             catalog=None, nvlink_errors=None, previous=None, now=None, node_idle=None):
    """Return the findings for one host, most severe first, each with its catalog action and source.

    ``gpus``: GPU records (``gpu_record.GPU_RECORD``, as ``parse_xml`` or ``health_view`` give them).
    ``xid_events``: events from ``parse_xid_events`` (already limited to the window of interest).
    ``thresholds``: the ``SWITCHES`` and catalog thresholds for the whole host (beating the catalog's
    per-model values); unknown keys raise ``ValueError``.
    ``expected_count``: number of GPUs the host must have, or ``None``.
    ``nvlink``: result of ``nvidia_smi.parse_nvlink_status`` (a list) or ``None`` when not checked.
    ``smi_failure``: ``{'reason', 'hint', 'rc', 'pci_bus_id', 'stdout', 'stderr'}`` when nvidia-smi failed.
    ``smi_seconds``: wall time of the nvidia-smi reading.
    ``kernel_log_error``: text saying why the kernel log could not be read.
    ``smi_warnings``: ``WARNING:`` lines nvidia-smi printed next to a usable answer.
    ``nvlink_error``: ``(severity, text)`` when the NVLink state could not be read.
    ``catalog``: ``health_catalog.Catalog`` with the operator's overrides (default: the shipped catalog).
    ``nvlink_errors``: result of ``nvidia_smi.parse_nvlink_errors`` or ``None`` when not read.
    ``previous``, ``now``: the node's readings of the previous run (``health_state.readings``) and the
    time of this one (seconds since the epoch), for counters judged by their growth.
    ``node_idle``: ``True`` when the scheduler runs no job on the node, ``None`` when unknown.
    """
    switches, catalog = _merge_thresholds(thresholds, catalog)
    limits = _Limits(switches, catalog)
    gpus = list(gpus or [])
    findings = []
    findings.extend(_smi_findings(smi_failure, smi_seconds, limits, smi_warnings))
    if expected_count is not None and not smi_failure and len(gpus) < expected_count:
        findings.append(_finding(
            'gpu_count_low', CRITICAL, None,
            'nvidia-smi sees %s of %s expected GPUs%s.'
            % (len(gpus), expected_count,
               ' (%s)' % ', '.join(str(gpu.get('pci_bus_id')) for gpu in gpus) if gpus else ''),
            'A missing GPU has usually fallen off the bus, failed to initialise or is bound to another driver. '
            'Check lspci -d 10de:, the kernel log (Xid 79, RmInitAdapter failed) and reboot; open a hardware '
            'case if it stays missing.', found=len(gpus), expected=expected_count))
    for gpu in gpus:
        findings.extend(_gpu_findings(gpu, limits, node_idle))
    findings.extend(_history_findings(gpus, limits, previous, now))
    findings.extend(_xid_findings(gpus, xid_events or (), set(limits['ignore_xids'] or ())))
    if nvlink is not None:
        findings.extend(_nvlink_findings(gpus, nvlink, limits))
    if nvlink_errors is not None:
        findings.extend(_nvlink_error_findings(gpus, nvlink_errors, limits, previous, now))
    if nvlink_error:
        severity, text = nvlink_error
        findings.append(_finding(
            'nvlink_state_unavailable', severity, None, 'The NVLink state could not be read: %s' % text,
            'Run nvidia-smi nvlink -s and -e on the host; set check_nvlink to never on hosts without NVLink.'))
    if kernel_log_error:
        findings.append(_finding(
            'kernel_log_unavailable', WARNING, None,
            'The kernel log could not be read, so Xid errors were not checked: %s' % kernel_log_error,
            'Run the task with become: true, or choose another kernel_log_source (or none to skip the check).'))
    return sort_findings([catalog.annotate(finding) for finding in findings])


_DURATION_UNITS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}


def parse_duration(text):
    """Seconds in ``30m``, ``24h``, ``7d``, ``1w`` or ``90`` (seconds); ``None`` for ``boot`` (no limit).

    Raises ``ValueError`` for anything else, including zero.
    """
    value = str(text).strip().lower()
    if value == 'boot':
        return None
    number, unit = value, 's'
    if value and value[-1] in _DURATION_UNITS:
        number, unit = value[:-1].strip(), value[-1]
    if not number.isdigit() or int(number) == 0:
        raise ValueError('%r is not a duration such as 30m, 24h, 7d or boot' % text)
    return int(number) * _DURATION_UNITS[unit]


def sort_findings(findings):
    """Most severe first, then host-wide before per-GPU, then by GPU index and code."""
    def key(finding):
        gpu = finding.get('gpu') or {}
        index = gpu.get('index')
        return (_RANK[finding['severity']], finding.get('gpu') is not None, index if index is not None else -1,
                finding['code'])
    return sorted(findings, key=key)


def summarize(findings):
    """Count findings per severity: ``{'critical': n, 'warning': n, 'info': n}``."""
    summary = dict((severity, 0) for severity in SEVERITIES)
    for finding in findings:
        summary[finding['severity']] += 1
    return summary


def is_healthy(findings, fail_on=WARNING):
    """``True`` when no finding is at or above ``fail_on`` severity."""
    if fail_on not in _RANK:
        raise ValueError('fail_on must be one of %s' % ', '.join(SEVERITIES))
    return not any(_RANK[finding['severity']] <= _RANK[fail_on] for finding in findings)
