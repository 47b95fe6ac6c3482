# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What an NVIDIA Xid means and what an operator does about it.

Names follow NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors); the
action categories follow the triage that fleet operators apply in practice:
NVIDIA's Health Validation and Kubernetes device plugin, gpud's per-Xid
notes and the GPU memory error management guide. Codes the catalogue marks
as unused, and codes newer than this table, fall back to ``investigate``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import collections
import re

XidInfo = collections.namedtuple('XidInfo', ['code', 'name', 'category', 'severity', 'meaning', 'advice'])

DRAIN = 'drain'
RESET = 'reset'
RESET_WHEN_CONVENIENT = 'reset_when_convenient'
TREND = 'trend'
APPLICATION = 'application'
INVESTIGATE = 'investigate'

CATEGORY_SEVERITY = {
    DRAIN: 'critical',
    RESET: 'critical',
    RESET_WHEN_CONVENIENT: 'warning',
    INVESTIGATE: 'warning',
    TREND: 'info',
    APPLICATION: 'info',
}

CATEGORY_ADVICE = {
    DRAIN: 'Drain the node: stop scheduling work on it, let or make running jobs end, then reset the GPU or reboot. '
           'Run DCGM diagnostics (dcgmi diag -r 2 or higher) before returning it to service and open a hardware '
           'case if it happens again.',
    RESET: 'Work on this GPU is likely failing. Stop the processes using it and reset it (nvidia-smi -r -i <gpu>) '
           'or reboot the node; contact NVIDIA support if it recurs.',
    RESET_WHEN_CONVENIENT: 'Running jobs may continue. Reset the GPU or reboot at the next maintenance window '
                           'so that the pending memory repair takes effect.',
    TREND: 'Informational: track how often it appears on this GPU and replace the GPU only if the rate keeps rising.',
    APPLICATION: 'Reported against an application, not the node: look at the process named in the log line '
                 '(illegal memory access, killed or crashed job). Investigate the GPU only if it repeats across '
                 'unrelated jobs.',
    INVESTIGATE: 'Not a known drain condition. Read the kernel log around this event and the NVIDIA Xid catalogue '
                 'entry; contact NVIDIA support if it repeats.',
}

# code: (name, category, meaning, advice or None for the category's advice)
_CATALOG = {
    8: ('GPU stopped processing', INVESTIGATE,
        'A channel stopped making progress and timed out.', None),
    13: ('Graphics engine exception', APPLICATION,
         'A GPU kernel raised an exception, typically an out-of-range memory access or an illegal instruction.',
         None),
    31: ('GPU memory page fault', APPLICATION,
         'The GPU memory management unit faulted on an address the process had not mapped; usually an '
         'application or library bug.', None),
    32: ('Invalid or corrupted push buffer stream', INVESTIGATE,
         'The command stream sent to the GPU was corrupted; can come from the application, the driver or '
         'the PCIe path.', None),
    43: ('GPU stopped processing', APPLICATION,
         'The driver stopped a channel after an application fault; the GPU itself stays usable.', None),
    44: ('Graphics engine fault during context switch', INVESTIGATE,
         'The graphics engine faulted while switching contexts.', None),
    45: ('Preemptive cleanup', APPLICATION,
         'The driver tore down a process\'s GPU contexts, because the process was killed or after an earlier '
         'error; the Xid logged before it names the cause.', None),
    46: ('GPU stopped processing', RESET,
         'The GPU stopped processing work and did not recover.', None),
    48: ('Double-bit ECC error', DRAIN,
         'An uncorrectable (double-bit) ECC error hit GPU memory; data in use by applications may be corrupt.',
         'Drain the node, reset the GPU (or reboot) so the affected memory is retired or remapped, and check '
         'the remapped rows or retired pages afterwards; service the GPU if it recurs.'),
    54: ('Auxiliary power not connected', INVESTIGATE,
         'The GPU reports that an auxiliary power cable is not connected.',
         'Check the GPU power cables and the power supply; the GPU runs limited or not at all until fixed.'),
    61: ('Internal micro-controller breakpoint', RESET,
         'An internal GPU micro-controller hit a breakpoint or warning condition.',
         'Reset the GPU or reboot the node; inspect the hardware if it recurs.'),
    62: ('Internal micro-controller halt', RESET,
         'An internal GPU micro-controller halted.',
         'Reset the GPU or reboot the node; inspect the hardware if it recurs.'),
    63: ('Memory page retirement or row remapping event', RESET_WHEN_CONVENIENT,
         'The GPU recorded a page retirement (before Ampere) or a row remap (Ampere and newer) after an ECC error.',
         None),
    64: ('Memory page retirement or row remapping failure', DRAIN,
         'The GPU failed to record a page retirement or row remap, so the faulty memory is still in use.',
         'Drain and reboot the node now; inspect or replace the GPU if it happens again.'),
    68: ('Video decoder exception', APPLICATION,
         'The NVDEC video decoder engine raised an exception, usually caused by the stream being decoded.', None),
    69: ('Graphics engine class error', INVESTIGATE,
         'The graphics engine reported an invalid class or method.', None),
    74: ('NVLink error', DRAIN,
         'An NVLink reported a fatal error; traffic over the link is lost.',
         'Drain the node and reset the GPUs or reboot; check the link (nvidia-smi nvlink -e) and have the '
         'NVLink hardware repaired if it persists.'),
    79: ('GPU has fallen off the bus', DRAIN,
         'The driver lost access to the GPU over PCIe; every job on it fails and the GPU usually cannot be reset.',
         'Drain and reboot the node; if it recurs, check power, cooling, the riser and the PCIe slot and open '
         'a hardware case.'),
    92: ('High single-bit ECC error rate', TREND,
         'Correctable single-bit ECC errors occur at a high rate; they are corrected and do not affect results.',
         None),
    93: ('InfoROM wear limit exceeded', INVESTIGATE,
         'The InfoROM exceeded its provisioned write limit (non-fatal).', None),
    94: ('Contained ECC error', RESET_WHEN_CONVENIENT,
         'An uncorrectable ECC error was contained to the application that used the memory; other '
         'applications keep running.',
         'Restart only the affected application; reset the GPU or reboot at a convenient time so the row '
         'remap takes effect.'),
    95: ('Uncontained ECC error', DRAIN,
         'An uncorrectable ECC error could not be contained; every application on the GPU may be affected.',
         'Drain the node and reset the GPU now (reboot immediately when MIG is off); check remapped rows '
         'afterwards.'),
    109: ('Context switch timeout', RESET,
          'The GPU did not complete a context switch in time.', None),
    110: ('Security fault', RESET,
          'The GPU reported a security fault.', None),
    119: ('GSP RPC timeout', DRAIN,
          'The GPU System Processor firmware did not answer the driver in time; the GPU is unusable until '
          'it is reset.',
          'Drain and reboot the node; if it repeats, update the driver or inspect the GPU (the GSP firmware can '
          'be disabled only with the proprietary kernel modules).'),
    120: ('GSP error', DRAIN,
          'The GPU System Processor firmware reported an error.',
          'Drain and reboot the node; if it repeats, update the driver or inspect the GPU.'),
    121: ('C2C link error', INVESTIGATE,
          'The chip-to-chip link between the Grace CPU and the GPU reported an error.', None),
    136: ('Link training failed', RESET,
          'An NVLink failed to train.', None),
    137: ('NVLink privilege error', INVESTIGATE,
          'An NVLink access violated privilege rules.', None),
    140: ('Unrecovered ECC error', RESET,
          'An ECC error escaped recovery.', None),
    143: ('GPU initialisation error', RESET,
          'The GPU failed to initialise.', None),
    144: ('NVLink SAW error', INVESTIGATE, 'NVLink (fifth generation) SAW unit error; the severity depends on '
          'the sub-code in the log line.', None),
    145: ('NVLink RLW error', INVESTIGATE, 'NVLink (fifth generation) RLW unit error; the severity depends on '
          'the sub-code in the log line.', None),
    146: ('NVLink TLW error', INVESTIGATE, 'NVLink (fifth generation) TLW unit error.', None),
    147: ('NVLink TREX error', INVESTIGATE, 'NVLink (fifth generation) TREX unit error.', None),
    148: ('NVLink NVLPW_CTRL error', INVESTIGATE, 'NVLink (fifth generation) power control error.', None),
    149: ('NVLink NETIR error', INVESTIGATE, 'NVLink (fifth generation) network interface error.', None),
    150: ('NVLink MSE error', INVESTIGATE, 'NVLink (fifth generation) MSE error.', None),
    154: ('GPU recovery action changed', INVESTIGATE,
          'The driver changed the recovery action the GPU needs; the action is named in the log line.', None),
    155: ('NVLink software-defined error', RESET, 'An NVLink software-defined error.', None),
    156: ('Resource retirement event', RESET, 'The GPU retired a hardware resource.', None),
    157: ('Resource retirement failure', INVESTIGATE, 'The GPU failed to retire a hardware resource.', None),
    158: ('GPU fatal timeout', RESET, 'The GPU hit a fatal timeout.', None),
}

# Xid 154 names the recovery action the GPU now needs, e.g. "changed from
# 0x0 (None) to 0x4 (Drain and Reset)": its category comes from that target.
_RECOVERY_ACTION_RE = re.compile(r'\bto\s+0x[0-9a-fA-F]+\s*\(([^)]*)\)')
_RECOVERY_ACTIONS = (
    (re.compile(r'^none$', re.I), TREND),
    (re.compile(r'reboot|drain', re.I), DRAIN),
    (re.compile(r'reset', re.I), RESET),
)


def recovery_target(message):
    """The recovery action an Xid 154 line names ("Drain and Reset"), or ``None``."""
    match = _RECOVERY_ACTION_RE.search(message or '')
    return match.group(1).strip() if match else None


def xid_info(code, message=None):
    """Return ``XidInfo`` for an Xid code; ``message`` refines codes whose log text carries the action."""
    entry = _CATALOG.get(code)
    if entry is None:
        name, category, meaning, advice = ('Xid %s' % code, INVESTIGATE,
                                           'This Xid is not in the catalogue of this collection.', None)
    else:
        name, category, meaning, advice = entry
    if code == 154 and message:
        match = _RECOVERY_ACTION_RE.search(message)
        if match:
            target = match.group(1).strip()
            for pattern, action_category in _RECOVERY_ACTIONS:
                if pattern.search(target):
                    category = action_category
                    advice = 'The driver now requires: %s. ' % target + CATEGORY_ADVICE[category]
                    break
    return XidInfo(code, name, category, CATEGORY_SEVERITY[category], meaning, advice or CATEGORY_ADVICE[category])


def catalog_codes():
    """Codes with a dedicated entry, sorted."""
    return sorted(_CATALOG)
