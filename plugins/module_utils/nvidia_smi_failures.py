# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Classify a failed ``nvidia-smi`` run into a reason code, an operator hint and the GPU it names.

Exit codes follow the RETURN VALUE section of the nvidia-smi man page. Message
texts are matched before exit codes because the same failure exits differently
across driver branches and wrappers (a version mismatch exits 18 on current
drivers, 255 on old ones, and shell wrappers flatten everything to 1).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import collections
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    PCI_ADDRESS_IN_TEXT,
    normalize_pci_bus_id,
)

# pci_bus_id: the normalised PCI bus id of the GPU the message names, else None.
Failure = collections.namedtuple('Failure', ['reason', 'hint', 'pci_bus_id'])

TIMEOUT_RC = 124
NOT_EXECUTABLE_RC = 126
NOT_FOUND_RC = 127
TIMEOUT_MARKER = 'nvidia-smi timed out after'

HINTS = {
    'timeout':
        'nvidia-smi did not answer within the timeout. A hang usually means a GPU or the driver is wedged '
        '(check the kernel log for Xid errors) or, without nvidia-persistenced, a very slow driver '
        'initialisation; enable nvidia-persistenced and investigate the node before scheduling work on it.',
    'not_installed':
        'nvidia-smi is not installed or not on PATH. Install the NVIDIA driver utilities (for example the '
        'nvidia-utils or nvidia-driver package) or set nvidia_smi_path.',
    'not_executable':
        'The nvidia-smi file exists but cannot be executed; check its permissions and that it is built '
        'for this architecture.',
    'version_mismatch':
        'The loaded kernel module and the user-space NVML library come from different driver versions, '
        'usually after a driver package upgrade. Reboot the node, or unload and reload the nvidia kernel '
        'modules once no process uses the GPUs.',
    'nvml_missing':
        'The NVML library (libnvidia-ml.so) is missing. Reinstall the NVIDIA driver user-space libraries '
        'that match the loaded kernel module.',
    'driver_not_loaded':
        'The NVIDIA kernel driver is not loaded. Check that the driver is built for the running kernel '
        '(DKMS, Secure Boot module signing), then load it with modprobe nvidia or reboot after an install.',
    'insufficient_permissions':
        'nvidia-smi lacks permission for this operation. Run it as root (become: true) or give the user '
        'access to the /dev/nvidia* device nodes.',
    'inforom_corrupted':
        'A GPU reports a corrupted infoROM, so data it stores (ECC and retired page records) is '
        'unreliable. Drain the node and have the GPU serviced.',
    'gpu_lost':
        'A GPU has fallen off the bus and stays unusable until the node reboots. Drain the node, look for '
        'Xid 79 in the kernel log and reboot; if it repeats, check power, cooling and the PCIe slot.',
    'gpu_requires_reset':
        'A GPU needs a reset before the driver can use it again (after an uncorrectable error or a recovery '
        'the driver started). Drain the node, stop the processes on that GPU and reset it (nvidia-smi -r -i '
        '<bus id>) or reboot; check the kernel log for the Xid that caused it.',
    'gpu_unreadable':
        'The driver lists a GPU it cannot open (nvidia-smi could not get its device handle). Drain the node and '
        'check the kernel log for Xid and RmInitAdapter messages about that PCI bus id; a reboot usually '
        'brings it back, a repeat means a hardware case.',
    'no_devices':
        'The driver is loaded but sees no NVIDIA GPU. Check that the GPUs are on the PCI bus '
        '(lspci -d 10de:), passed through to this VM, and not bound to another driver such as vfio-pci.',
    'nvml_unknown_error':
        'NVML failed to initialise with an unknown error. In containers this usually means the cgroup '
        'device rules lost access to /dev/nvidia*; on a host, check the kernel log and reload the driver.',
    'invalid_argument':
        'nvidia-smi rejected its arguments; the installed driver may not know this query field or '
        'option. Compare with nvidia-smi --help-query-gpu on the target.',
    'not_supported':
        'The requested operation is not available on this GPU.',
    'not_found':
        'The requested GPU or object was not found; check the index, UUID or PCI bus id.',
    'power_cables':
        'External power cables of a GPU are not attached. Check the GPU power connectors.',
    'kernel_interrupt':
        'The kernel detected an interrupt issue with a GPU. Check the kernel log for Xid errors and '
        'drain the node.',
    'not_implemented':
        'This driver does not implement the NVML function behind the request; upgrade the driver or '
        'avoid this query on this GPU.',
    'unknown':
        'nvidia-smi failed for an unrecognised reason. Read stdout and stderr and check the kernel log '
        'for NVRM or Xid messages.',
}

# Ordered: the first match wins, so specific messages precede the generic ones
# that may appear next to them.
_TEXT_RULES = (
    ('timeout', re.compile(re.escape(TIMEOUT_MARKER), re.I)),
    ('not_installed', re.compile(r'nvidia-smi: (command )?not found|nvidia-smi.*No such file or directory', re.I)),
    ('version_mismatch', re.compile(r'Driver/library version mismatch', re.I)),
    ('nvml_missing', re.compile(r"couldn't find libnvidia-ml\.so|libnvidia-ml\.so[.0-9]*: cannot open", re.I)),
    ('driver_not_loaded', re.compile(r"couldn't communicate with the NVIDIA driver|Driver Not Loaded", re.I)),
    ('insufficient_permissions', re.compile(r'Insufficient Permissions', re.I)),
    ('inforom_corrupted', re.compile(r'infoROM is corrupted', re.I)),
    ('gpu_lost', re.compile(r'GPU is lost|fallen off the bus', re.I)),
    ('gpu_requires_reset', re.compile(r'GPU requires reset', re.I)),
    ('no_devices', re.compile(r'No devices were found', re.I)),
    # Exit 255 on some branches (Windows 591: "ERROR: Option -m is missing its value").
    ('invalid_argument', re.compile(r'^ERROR: Option .* is missing its value|is not a valid field to query|'
                                    r'Invalid combination of input arguments', re.I | re.M)),
    ('nvml_unknown_error', re.compile(r'Failed to initialize NVML: Unknown Error', re.I)),
    # "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"
    # and other reasons the rules above do not name.
    ('gpu_unreadable', re.compile(r'Unable to determine the device handle for', re.I)),
)

# nvidia-smi names a GPU in messages glued to "GPU" or not: "GPU0000:07:00.0",
# "GPU 00000000:04:00.0", "at gpu 0000:02:00.0".
_PCI_IN_TEXT = re.compile(r'(?<![0-9a-f:])(%s)(?![0-9a-f:])' % PCI_ADDRESS_IN_TEXT, re.I)

# Failures that nvidia-smi reports while still exiting 0 on some branches, or
# that no caller should ever treat as a usable result.
_FATAL_EVEN_WITH_RC_0 = frozenset((
    'version_mismatch', 'nvml_missing', 'driver_not_loaded', 'inforom_corrupted', 'gpu_lost', 'no_devices',
    'nvml_unknown_error', 'gpu_requires_reset', 'gpu_unreadable',
))

_REASON_BY_RC = {
    2: 'invalid_argument',
    3: 'not_supported',
    4: 'insufficient_permissions',
    6: 'not_found',
    8: 'power_cables',
    9: 'driver_not_loaded',
    10: 'kernel_interrupt',
    12: 'nvml_missing',
    13: 'not_implemented',
    14: 'inforom_corrupted',
    15: 'gpu_lost',
    18: 'version_mismatch',
    TIMEOUT_RC: 'timeout',
    NOT_EXECUTABLE_RC: 'not_executable',
    NOT_FOUND_RC: 'not_installed',
}


def _named_gpu(text, match):
    """The PCI bus id on the line of ``match``, normalised, or None."""
    start = text.rfind('\n', 0, match.start()) + 1
    end = text.find('\n', match.end())
    found = _PCI_IN_TEXT.search(text[start:end if end >= 0 else len(text)])
    return normalize_pci_bus_id(found.group(1)) if found else None


def classify_failure(rc, stdout, stderr):
    """Return ``Failure(reason, hint, pci_bus_id)`` for the result of an nvidia-smi run.

    ``reason`` is ``None`` (and ``hint`` too) only when ``rc`` is 0 and the
    output carries no known failure message. Any other non-zero exit yields at
    least ``unknown``. ``pci_bus_id`` is the GPU the matched message names
    (``Unable to determine the device handle for GPU0000:07:00.0: ...``,
    ``infoROM is corrupted at gpu 0000:02:00.0``), normalised, else ``None``.
    """
    text = '%s\n%s' % (stdout or '', stderr or '')
    for reason, pattern in _TEXT_RULES:
        match = pattern.search(text)
        if match and (rc != 0 or reason in _FATAL_EVEN_WITH_RC_0):
            return Failure(reason, HINTS[reason], _named_gpu(text, match))
    if rc == 0:
        return Failure(None, None, None)
    reason = _REASON_BY_RC.get(rc, 'unknown')
    # "... is not supported for GPU 00000000:01:00.0." names the GPU too.
    found = _PCI_IN_TEXT.search(text)
    return Failure(reason, HINTS[reason], normalize_pci_bus_id(found.group(1)) if found else None)
