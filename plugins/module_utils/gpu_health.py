# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Turn GPU readings and kernel log events into health findings.

Pure functions: no command runs here. ``evaluate`` takes GPU records as
``nvidia_smi.parse_xml`` returns them (``gpu_record.GPU_RECORD``; it reads the
keys in ``HEALTH_FIELDS``), parsed kernel log events (``parse_xid_events``) and
NVLink states (``nvidia_smi.parse_nvlink_status``), and returns findings::

    {'code': 'xid_79', 'severity': 'critical',
     'gpu': {'index': 0, 'uuid': 'GPU-...', 'pci_bus_id': '0000:3b:00.0'},
     'evidence': '...', 'advice': '...'}

Severity means: ``critical`` take the node (or GPU) out of service now;
``warning`` needs an operator but work may continue; ``info`` worth knowing.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import normalize_pci_bus_id
from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernel_log import (
    events_within,
    parse_xid_events,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.xid_catalog import (
    CATEGORY_ADVICE,
    CATEGORY_SEVERITY,
    catalog_codes,
    xid_info,
)

# The kernel log parser and the Xid catalogue live in their own files and are
# part of this module's public interface.
__all__ = [
    'CATEGORY_ADVICE', 'CATEGORY_SEVERITY', 'CRITICAL', 'DEFAULT_THRESHOLDS', 'HEALTH_FIELDS', 'INFO', 'SEVERITIES',
    'WARNING', 'catalog_codes', 'evaluate', 'events_within', 'health_view', 'is_healthy', 'parse_duration',
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
    'drain_and_reset_recommended', 'recovery_action',
)

DEFAULT_THRESHOLDS = {
    'temperature_margin_c': 5,
    'max_smi_seconds': 10.0,
    'require_persistence': True,
    'ignore_xids': (),
    'ecc_aggregate_uncorrectable_max': None,
    'check_pcie': True,
    'pcie_gen_min_utilization': 50,
    'nvlink_expected_active': None,
}

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


def _merge_thresholds(thresholds):
    merged = dict(DEFAULT_THRESHOLDS)
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise ValueError('unknown health threshold %r' % key)
        if value is not None or key in ('ecc_aggregate_uncorrectable_max', 'nvlink_expected_active'):
            merged[key] = value
    return merged


def _ecc_findings(gpu, limits):
    findings = []
    volatile = _reading(gpu, 'ecc_errors', 'volatile_uncorrected')
    if _positive(volatile):
        findings.append(_finding(
            'ecc_uncorrectable_volatile', CRITICAL, gpu,
            '%s: %s uncorrectable ECC errors since the driver was loaded.' % (_label(gpu), volatile),
            xid_info(48).advice))
    aggregate = _reading(gpu, 'ecc_errors', 'aggregate_uncorrected')
    if _positive(aggregate):
        limit = limits['ecc_aggregate_uncorrectable_max']
        over = limit is not None and aggregate > limit
        findings.append(_finding(
            'ecc_uncorrectable_history', WARNING if over else INFO, gpu,
            '%s: %s uncorrectable ECC errors over the GPU\'s lifetime%s.'
            % (_label(gpu), aggregate, ' (limit %s)' % limit if over else ''),
            'Lifetime counts include errors already repaired by page retirement or row remapping. '
            'Compare with the fleet; replace the GPU if the count keeps growing.'))
    return findings


def _memory_repair_findings(gpu):
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
    if _reading(gpu, 'retired_pages', 'pending') is True:
        findings.append(_finding(
            'retired_pages_pending', WARNING, gpu,
            '%s: memory pages are pending retirement; they are retired when the driver reloads.' % _label(gpu),
            'Reset the GPU or reboot at the next maintenance window so the pages are retired.'))
    return findings


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
        elif headroom <= margin:
            findings.append(_finding(
                'temperature_near_slowdown', WARNING, gpu,
                '%s: within %s C of its slowdown temperature (%s).' % (_label(gpu), margin, reading),
                'Check the cooling before the GPU starts to throttle.', **extra))
    reasons = gpu.get('throttle_reasons') or {}
    specific = False
    for reason, severity, evidence, advice in _THROTTLE_FINDINGS:
        if reasons.get(reason) is True:
            specific = specific or reason.startswith('hw_')
            findings.append(_finding(reason, severity, gpu, '%s: %s' % (_label(gpu), evidence), advice))
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
    if (_positive(gen) and _positive(gen_max) and gen < gen_max
            and isinstance(utilization, (int, float)) and utilization >= limits['pcie_gen_min_utilization']):
        findings.append(_finding(
            'pcie_link_gen_degraded', WARNING, gpu,
            '%s: PCIe link runs at generation %s of a possible %s while the GPU is %s%% busy.'
            % (_label(gpu), gen, gen_max, utilization),
            'A busy GPU should train its link to the highest generation the slot supports; check BIOS PCIe '
            'settings, risers and retimers, and reseat the card.'))
    return findings


def _recovery_findings(gpu, explained):
    action = gpu.get('recovery_action')
    if action and action.strip().lower() not in ('none', '0'):
        return [_finding(
            'gpu_recovery_action', CRITICAL, gpu,
            '%s: the driver requests the recovery action "%s".' % (_label(gpu), action),
            'Follow the requested action: drain the node, then reset the GPU or reboot as named; check the '
            'kernel log for the Xid that caused it.', recovery_action=action)]
    if gpu.get('drain_and_reset_recommended') is True:
        return [_finding(
            'gpu_drain_and_reset_recommended', CRITICAL, gpu,
            '%s: the driver recommends draining the node and resetting the GPU.' % _label(gpu),
            'Drain the node, stop the processes on the GPU and reset it (nvidia-smi -r -i <gpu>) or reboot.')]
    # A pending remap or page retirement also sets "reset required"; the
    # finding for it already says so.
    if gpu.get('reset_required') is True and not explained:
        return [_finding(
            'gpu_reset_required', WARNING, gpu, '%s: the driver reports that the GPU needs a reset.' % _label(gpu),
            'Reset the GPU (nvidia-smi -r -i <gpu>) or reboot at the next maintenance window.')]
    return []


def _gpu_findings(gpu, limits):
    findings = []
    findings.extend(_ecc_findings(gpu, limits))
    repairs = _memory_repair_findings(gpu)
    findings.extend(repairs)
    findings.extend(_recovery_findings(gpu, explained=bool(repairs)))
    findings.extend(_thermal_findings(gpu, limits))
    if limits['check_pcie']:
        findings.extend(_pcie_findings(gpu, limits))
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
                info.advice, xid=code, xid_name=info.name, meaning=info.meaning, action=info.category,
                count=len(group), first_seen=first_seen, last_seen=last_seen))
        elif kind == 'fallen_off_bus':
            if pci in xid79_devices:
                continue
            info = xid_info(79)
            findings.append(_finding(
                'gpu_fell_off_bus', CRITICAL, gpu,
                '%s: the driver reports the GPU has fallen off the bus (%s); last: %s'
                % (_label(gpu), times, group[-1]['line']),
                info.advice, count=len(group), first_seen=first_seen, last_seen=last_seen))
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
                count=len(group), first_seen=first_seen, last_seen=last_seen))
    return findings


def _model(index, gpus_by_index, nvlink):
    return (gpus_by_index.get(index) or {}).get('name') or (nvlink.get(index) or {}).get('name')


def _nvlink_findings(gpus, nvlink, expected):
    gpus_by_index = dict((gpu.get('index'), gpu) for gpu in gpus)
    # A GPU whose NVLink state nvidia-smi cannot tell (MIG mode, no NVLink) is not judged.
    untold = set(status['index'] for status in nvlink if not status.get('links_known', True))
    nvlink = dict((status['index'], status) for status in nvlink if status['index'] not in untold)
    active = {}
    for index, status in nvlink.items():
        active[index] = [link['link'] for link in status.get('links', []) if link['active'] is True]
    candidates = (set(active) | set(i for i in gpus_by_index if i is not None)) - untold
    if expected is None:
        # Without a stated expectation, the best-connected GPU of the host sets
        # it for GPUs of the same model: a host whose GPUs report no active
        # link uses no NVLink at all, and a display or inference card next to
        # SXM boards has none to lose.
        expected = max([len(links) for links in active.values()] or [0])
        models = set(_model(index, gpus_by_index, nvlink) for index, links in active.items()
                     if expected and len(links) == expected)
        candidates = set(index for index in candidates if _model(index, gpus_by_index, nvlink) in models)
    if not expected:
        return []
    findings = []
    for index in sorted(candidates):
        status = nvlink.get(index)
        gpu = gpus_by_index.get(index) or {'index': index, 'uuid': (status or {}).get('uuid'), 'pci_bus_id': None}
        up = active.get(index, [])
        if len(up) >= expected:
            continue
        down = [link['link'] for link in (status or {}).get('links', []) if link['active'] is not True]
        findings.append(_finding(
            'nvlink_down', CRITICAL, gpu,
            '%s: %s of %s expected NVLinks active%s.'
            % (_label(gpu), len(up), expected,
               '; not active: %s' % ', '.join(str(link) for link in down) if down else
               '; nvidia-smi reported no NVLink state for it'),
            'Multi-GPU jobs lose NVLink bandwidth or hang. Drain the node, check nvidia-smi nvlink -e and, on '
            'NVSwitch systems, nvidia-fabricmanager; reset the GPUs or reboot, and have the link repaired if '
            'it stays down.', nvlink_active=len(up), nvlink_expected=expected))
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
             smi_failure=None, smi_seconds=None, kernel_log_error=None, smi_warnings=(), nvlink_error=None):
    """Return the findings for one host, most severe first.

    ``gpus``: GPU records (``gpu_record.GPU_RECORD``, as ``parse_xml`` or ``health_view`` give them).
    ``xid_events``: events from ``parse_xid_events`` (already limited to the window of interest).
    ``thresholds``: overrides for ``DEFAULT_THRESHOLDS``; unknown keys raise ``ValueError``.
    ``expected_count``: number of GPUs the host must have, or ``None``.
    ``nvlink``: result of ``nvidia_smi.parse_nvlink_status`` (a list) or ``None`` when not checked.
    ``smi_failure``: ``{'reason', 'hint', 'rc', 'pci_bus_id', 'stdout', 'stderr'}`` when nvidia-smi failed.
    ``smi_seconds``: wall time of the nvidia-smi reading.
    ``kernel_log_error``: text saying why the kernel log could not be read.
    ``smi_warnings``: ``WARNING:`` lines nvidia-smi printed next to a usable answer.
    ``nvlink_error``: ``(severity, text)`` when the NVLink state could not be read.
    """
    limits = _merge_thresholds(thresholds)
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
        findings.extend(_gpu_findings(gpu, limits))
    findings.extend(_xid_findings(gpus, xid_events or (), set(limits['ignore_xids'] or ())))
    if nvlink is not None:
        findings.extend(_nvlink_findings(gpus, nvlink, limits['nvlink_expected_active']))
    if nvlink_error:
        severity, text = nvlink_error
        findings.append(_finding(
            'nvlink_state_unavailable', severity, None, 'The NVLink state could not be read: %s' % text,
            'Run nvidia-smi nvlink -s on the host; set check_nvlink to never on hosts without NVLink.'))
    if kernel_log_error:
        findings.append(_finding(
            'kernel_log_unavailable', WARNING, None,
            'The kernel log could not be read, so Xid errors were not checked: %s' % kernel_log_error,
            'Run the task with become: true, or choose another kernel_log_source (or none to skip the check).'))
    return sort_findings(findings)


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
