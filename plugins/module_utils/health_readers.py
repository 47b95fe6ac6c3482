# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading what the health checks judge besides the GPU records: NVLink state and counters, the kernel log.

One reading for every caller that can run a command: the nvidia_gpu_health
module (through AnsibleModule) and the node-local health check (through
subprocess, without Ansible). The callers pass how a command runs; what is
run, in which order, and what a failure means is decided here once.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernel_log import events_within, parse_xid_events
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import (
    classify_failure,
    parse_nvlink_errors,
    parse_nvlink_status,
)

NVLINK_ARGS = ['nvlink', '-s']
NVLINK_ERROR_ARGS = ['nvlink', '-e']


def first_line(text):
    lines = (text or '').strip().splitlines()
    return lines[0] if lines else ''


def uptime():
    """Seconds since boot, or None."""
    try:
        with open('/proc/uptime') as handle:
            return float(handle.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        return None


def _nvlink_output(run_smi, args, parse, severity):
    """(parsed or None, nvlink_error or None) of one nvidia-smi nvlink call."""
    rc, stdout, stderr = run_smi(args)
    command = 'nvidia-smi %s' % ' '.join(args)
    if rc != 0:
        failure = classify_failure(rc, stdout, stderr)
        return None, (severity, '%s failed with rc %s (%s): %s'
                      % (command, rc, failure.reason, first_line(stderr or stdout)))
    try:
        return parse(stdout), None
    except ValueError as exc:
        return None, (severity, '%s output not understood: %s' % (command, exc))


def read_nvlink(mode, gpu_count, run_smi):
    """(NVLink status list or None, error counters or None, nvlink_error or None, number of nvidia-smi calls).

    ``mode``: never, auto (hosts with 2+ GPUs) or always. ``run_smi(args)`` runs nvidia-smi with args and
    returns ``(rc, stdout, stderr)``.
    """
    if mode == 'never' or (mode == 'auto' and gpu_count < 2):
        return None, None, None, 0
    # In auto mode a host may well have no NVLink; failing to read it then is only worth a note.
    severity = 'warning' if mode == 'always' else 'info'
    status, error = _nvlink_output(run_smi, NVLINK_ARGS, parse_nvlink_status, severity)
    if error:
        return None, None, error, 1
    # Error counters only where a GPU has a link to count on.
    if not any(gpu['links'] for gpu in status):
        return status, None, None, 1
    counters, error = _nvlink_output(run_smi, NVLINK_ERROR_ARGS, parse_nvlink_errors, severity)
    return status, counters, error, 2


def read_kernel_log(source, path, window, run_reader, seconds_since_boot=uptime):
    """(Xid events, the source read, error text or None).

    ``source``: auto (the journal, else dmesg), journal, dmesg, file (``path``) or none. ``window``:
    seconds to look back, or None for the whole boot. ``run_reader(binary, args)`` returns ``(text, None)``
    or ``(None, error text)``. A file that cannot be read raises IOError/OSError: the caller says so.
    """
    if source == 'none':
        return [], 'none', None
    if source == 'file':
        with open(path, 'rb') as handle:
            return parse_xid_events(handle.read().decode('utf-8', 'replace')), 'file', None
    journal_text = None
    if source in ('auto', 'journal'):
        args = ['-k', '--no-pager', '--quiet', '--output=short-iso']
        if window is not None:
            args.append('--since=-%ds' % window)
        text, error = run_reader('journalctl', args)
        # A journal without kernel messages (containers, volatile storage
        # that lost them) says nothing; dmesg may still know.
        if source == 'journal' or (text is not None and text.strip()):
            return (parse_xid_events(text), 'journal', None) if error is None else ([], 'none', error)
        journal_text = text
    text, error = run_reader('dmesg', [])
    if error:
        if source == 'auto' and journal_text is not None:
            return [], 'journal', None
        return [], 'none', error
    return events_within(parse_xid_events(text), seconds_since_boot(), window), 'dmesg', None
