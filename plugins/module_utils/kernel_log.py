# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Find NVIDIA GPU and NVSwitch fault reports in kernel log text.

Accepts the output of ``dmesg`` (raw ``[  123.456]`` or ``-T`` ctime stamps),
``journalctl -k`` (short, short-iso and short-precise, with or without an
embedded ``[uptime]`` stamp), syslog files and ``/dev/kmsg`` records. Lines
the driver writes look like::

    NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM ...
    nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress ...
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    PCI_ADDRESS_IN_TEXT as _PCI,
    normalize_pci_bus_id,
)

# With MIG enabled the driver names the GPU instance too: "(PCI:0000:01:00 GPU-I:05)".
_XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?(?P<pci>' + _PCI + r')(?:\s+GPU-I:(?P<gi>\d+))?[^)]*\): (?P<code>\d+)'
                     r'(?:,\s*(?P<rest>.*))?$')
_SXID_RE = re.compile(r'(?P<switch>nvidia-nvswitch\d+): SXid \(PCI:(?P<pci>' + _PCI + r')\): (?P<code>\d+)'
                      r'(?:,\s*(?P<rest>.*))?$')
# The driver prints this next to Xid 79 and, without any Xid, when a process
# opens a GPU that is already gone; the multi-line form spreads it over three
# "NVRM:" lines, the first of which carries the address.
_OFF_BUS_RE = re.compile(r'NVRM: GPU (?:at PCI:)?(?P<pci>' + _PCI + r'):? (?:GPU )?has fallen off the bus')
_OFF_BUS_HEAD_RE = re.compile(r'NVRM: The NVIDIA GPU (?P<pci>' + _PCI + r')\s*$')
_OFF_BUS_TAIL_RE = re.compile(r'NVRM: .*fallen off the bus')

_PID_RE = re.compile(r"^pid=(?:'(?P<quoted>[^']*)'|(?P<plain>[^,]*))\s*(?:,\s*|$)")
_NAME_RE = re.compile(r"^name=(?:'(?P<quoted>[^']*)'|(?P<plain>[^,]*))\s*(?:,\s*|$)")
# NVSwitch drivers log one SXid over several lines; only the first one names
# the severity, the others repeat the code with register data.
_SXID_CONTINUATION_RE = re.compile(r'^(Severity \d+|Data \{)')

_UPTIME_RE = re.compile(r'\[\s*(?P<uptime>\d+\.\d+)\]')
_TIMESTAMP_RES = (
    # journalctl -o short-iso / short-iso-precise, RFC 3339 syslog
    re.compile(r'^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s'),
    # dmesg -T / dmesg --ctime
    re.compile(r'^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]'),
    # journalctl -o short / short-precise, BSD syslog
    re.compile(r'^(?P<ts>[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?)\s'),
)
_UNKNOWN = ('', '<unknown>', 'unknown')
_OFF_BUS_LOOKAHEAD = 3


def _line_times(line, match_start):
    prefix = line[:match_start]
    timestamp = None
    for pattern in _TIMESTAMP_RES:
        found = pattern.search(prefix)
        if found:
            timestamp = found.group('ts')
            break
    uptime = _UPTIME_RE.search(prefix)
    return timestamp, float(uptime.group('uptime')) if uptime else None


def _take_field(regex, text):
    match = regex.match(text)
    if not match:
        return None, text
    value = match.group('quoted') if match.group('quoted') is not None else match.group('plain')
    value = value.strip()
    return (None if value in _UNKNOWN else value), text[match.end():]


def _xid_event(line, match):
    rest = (match.group('rest') or '').strip()
    pid, rest = _take_field(_PID_RE, rest)
    process, rest = _take_field(_NAME_RE, rest)
    timestamp, uptime = _line_times(line, match.start())
    return {
        'kind': 'xid',
        'code': int(match.group('code')),
        'pci_bus_id': normalize_pci_bus_id(match.group('pci')),
        'gpu_instance': int(match.group('gi')) if match.group('gi') else None,
        'pid': int(pid) if pid and pid.isdigit() else None,
        'process': process,
        'message': rest,
        'timestamp': timestamp,
        'uptime_seconds': uptime,
        'line': line.strip(),
    }


def _sxid_event(line, match):
    rest = (match.group('rest') or '').strip()
    if _SXID_CONTINUATION_RE.match(rest):
        return None
    head = rest.split(',', 1)[0].strip().lower()
    fatal = True if head == 'fatal' else False if head == 'non-fatal' else None
    timestamp, uptime = _line_times(line, match.start())
    return {
        'kind': 'sxid',
        'code': int(match.group('code')),
        'pci_bus_id': normalize_pci_bus_id(match.group('pci')),
        'switch': match.group('switch'),
        'fatal': fatal,
        'message': rest,
        'timestamp': timestamp,
        'uptime_seconds': uptime,
        'line': line.strip(),
    }


def _off_bus_event(line, pci, match_start):
    timestamp, uptime = _line_times(line, match_start)
    return {
        'kind': 'fallen_off_bus',
        'code': None,
        'pci_bus_id': normalize_pci_bus_id(pci),
        'message': 'GPU has fallen off the bus',
        'timestamp': timestamp,
        'uptime_seconds': uptime,
        'line': line.strip(),
    }


def parse_xid_events(kernel_log_text):
    """Return the Xid, SXid and fallen-off-the-bus events found in ``kernel_log_text``, in log order.

    Each event is a dict with ``kind`` (``xid``, ``sxid`` or ``fallen_off_bus``), ``code``
    (int, ``None`` for ``fallen_off_bus``), ``pci_bus_id`` (spelt as in every GPU record,
    see ``gpu_record.normalize_pci_bus_id``), ``message``, ``timestamp`` (the wall-clock
    text of the line, or ``None``), ``uptime_seconds`` (the kernel's seconds-since-boot stamp, or
    ``None``) and ``line``. Xid events add ``pid`` and ``process`` (``None`` when the
    driver logged ``<unknown>`` or nothing) and ``gpu_instance`` (the MIG GPU instance
    id, or ``None``); SXid events add ``switch`` and ``fatal``
    (``True``, ``False`` or ``None`` when the line does not say).
    """
    events = []
    lines = (kernel_log_text or '').splitlines()
    for number, line in enumerate(lines):
        match = _XID_RE.search(line)
        if match:
            events.append(_xid_event(line, match))
            continue
        match = _SXID_RE.search(line)
        if match:
            event = _sxid_event(line, match)
            if event:
                events.append(event)
            continue
        match = _OFF_BUS_RE.search(line)
        if match:
            events.append(_off_bus_event(line, match.group('pci'), match.start()))
            continue
        match = _OFF_BUS_HEAD_RE.search(line)
        if match and any(_OFF_BUS_TAIL_RE.search(following)
                         for following in lines[number + 1:number + 1 + _OFF_BUS_LOOKAHEAD]):
            events.append(_off_bus_event(line, match.group('pci'), match.start()))
    return events


def events_within(events, uptime_now, window_seconds):
    """Keep events logged less than ``window_seconds`` before ``uptime_now`` (both in seconds since boot).

    Events without a seconds-since-boot stamp are kept: their age is unknown,
    and dropping a fault report is worse than reporting an old one.
    """
    if window_seconds is None or uptime_now is None:
        return list(events)
    oldest = uptime_now - window_seconds
    return [event for event in events if event.get('uptime_seconds') is None or event['uptime_seconds'] >= oldest]
