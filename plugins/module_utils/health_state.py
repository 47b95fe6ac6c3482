# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a node's health check remembers between runs.

Two things: the counters that mean something only as growth (PCIe replays,
HW slowdown time, NVLink error counters), and the kernel log events already
reported, so that an Xid is raised once and again only when it recurs. The
state is one small JSON document; ``MAX_EVENTS`` bounds it.

Standard library only and no import of the collection: the node-local health
check installs this file and runs without Ansible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import tempfile

VERSION = 1
# Reported kernel log events kept: the most recently reported win.
MAX_EVENTS = 256
# Codes whose findings come from the kernel log and are reported once.
_EVENT_PREFIXES = ('xid_', 'sxid_')
_EVENT_CODES = ('gpu_fell_off_bus',)


def empty():
    return {'version': VERSION, 'readings': {}, 'events': {}}


def load(path):
    """The state at ``path``; an empty state when the file is missing, unreadable or of another version
    (the next run then judges counters against the driver's totals and reports every event once more)."""
    try:
        with open(path) as handle:
            state = json.load(handle)
    except (IOError, OSError, ValueError):
        return empty()
    if not isinstance(state, dict) or state.get('version') != VERSION:
        return empty()
    state.setdefault('readings', {})
    state.setdefault('events', {})
    return state


def save(path, state):
    """Write ``state`` atomically, readable by root only."""
    folder = os.path.dirname(path) or '.'
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    handle, temporary = tempfile.mkstemp(prefix='.health-state.', dir=folder)
    try:
        with os.fdopen(handle, 'w') as out:
            json.dump(state, out, indent=1, sort_keys=True)
            out.write('\n')
        os.chmod(temporary, 0o600)
        os.rename(temporary, path)
    except Exception:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def readings(gpus, nvlink_errors, now):
    """The counters the next run compares with, per GPU UUID."""
    by_index = dict((status['index'], status) for status in nvlink_errors or ())
    result = {}
    for gpu in gpus:
        uuid = gpu.get('uuid')
        if not uuid:
            continue
        links = (by_index.get(gpu.get('index')) or {}).get('links') or []
        result[uuid] = {
            'pcie_replay_counter': (gpu.get('pcie') or {}).get('replay_counter'),
            'clock_event_us': dict(gpu.get('clock_event_us') or {}),
            'nvlink_errors': dict((str(link['link']), dict(link['counters'])) for link in links),
        }
    return {'time': now, 'gpus': result}


def advance(state, gpus, nvlink_errors, now, events):
    """The state to save after a run: this run's readings, or the last good ones when it read no GPU (so the
    next run still has counters to compare with), and the events remembered (``remember_events``)."""
    current = readings(gpus, nvlink_errors, now)
    if not gpus:
        current = (state or {}).get('readings') or current
    return dict(state or empty(), readings=current, events=events)


def is_event(finding):
    return finding['code'].startswith(_EVENT_PREFIXES) or finding['code'] in _EVENT_CODES


def _event_key(finding):
    where = (finding.get('gpu') or {}).get('pci_bus_id') or (finding.get('nvswitch') or {}).get('pci_bus_id')
    return '%s@%s' % (finding['code'], where)


def remember_events(findings, state, now):
    """Split ``findings`` into those to report and the kernel log events already reported.

    An event is already reported when the previous runs reported the same
    code on the same device with the same last log line and no more
    occurrences. Returns ``(report, already_reported, events)``, ``events``
    being the new ``state['events']``.
    """
    events = dict((state or {}).get('events') or {})
    report, already = [], []
    for finding in findings:
        if not is_event(finding):
            report.append(finding)
            continue
        key = _event_key(finding)
        seen = events.get(key)
        if (seen and seen.get('last_line') == finding.get('last_line')
                and (finding.get('count') or 0) <= (seen.get('count') or 0)):
            already.append(dict(finding, first_reported=seen.get('reported')))
            continue
        report.append(finding)
        events[key] = {'code': finding['code'], 'last_line': finding.get('last_line'), 'count': finding.get('count'),
                       'reported': now}
    if len(events) > MAX_EVENTS:
        newest = sorted(events, key=lambda name: events[name].get('reported') or 0, reverse=True)[:MAX_EVENTS]
        events = dict((name, events[name]) for name in newest)
    return report, already, events
