# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: nvidia_smi_failure
short_description: Classify the result of an nvidia-smi command the way the collection's modules do
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - Takes the registered result of an M(ansible.builtin.command) task that ran C(nvidia-smi) (usually with
    C(failed_when) set to V(false)) and returns the reason code and operator hint that
    M(gpufleet.nvidia.nvidia_smi_info) reports in its C(failure) for the same exit code and output.
  - The reason is V(null) when the command succeeded and its output carries no failure message.
  - A command that could not be started at all (the result has only C(msg), such as
    V([Errno 2] No such file or directory)) is classified like the shell's exit codes 127 and 126.
  - A command run under coreutils C(timeout) (its C(cmd) starts with C(timeout)) that was killed after the grace
    period (exit 137, or V(-9) when the command ignored SIGTERM, as one stuck in the driver does) is a V(timeout),
    like exit 124.
options:
  _input:
    description: The registered result, with C(rc), C(stdout) and C(stderr).
    type: dict
    required: true
seealso:
  - module: gpufleet.nvidia.nvidia_smi_info
"""

EXAMPLES = r"""
- name: Ask for a field that older drivers do not know
  ansible.builtin.command:
    argv: [nvidia-smi, "--query-gpu=index,fabric.state", "--format=csv,noheader"]
  register: fabric
  changed_when: false
  failed_when: false

- name: Fail on anything but an unknown field
  ansible.builtin.fail:
    msg: "nvidia-smi failed ({{ failure.reason }}): {{ failure.hint }}"
  vars:
    failure: "{{ fabric | gpufleet.nvidia.nvidia_smi_failure }}"
  when: failure.reason is not none and fabric.stdout is not search('is not a valid field')
"""

RETURN = r"""
_value:
  description:
    - C(reason) (such as V(driver_not_loaded), V(version_mismatch), V(timeout), V(invalid_argument); V(null) on
      success), C(hint) (what to do), C(pci_bus_id) (the GPU the message names, where the classifier reports one,
      else V(null)) and C(rc).
  type: dict
  sample: {"reason": "driver_not_loaded", "hint": "The NVIDIA kernel driver is not loaded. ...", "pci_bus_id": null, "rc": 9}
"""

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import TIMEOUT_RC, classify_failure

# AnsibleModule.run_command reports a program it could not start as
# "[Errno N] ..." with rc N; the shell says 127 (not found) and 126 (not executable).
_ERRNO = re.compile(r'^\[Errno (\d+)\]')
_SHELL_RC_BY_ERRNO = {2: 127, 13: 126}
# SIGKILL after timeout's --kill-after: 137 through a shell, -9 from run_command.
_KILLED_RCS = (137, -9)


def _under_timeout(cmd):
    first = cmd[0] if isinstance(cmd, (list, tuple)) and cmd else (to_text(cmd).split() or [''])[0] if cmd else ''
    return to_text(first).rsplit('/', 1)[-1] == 'timeout'


def nvidia_smi_failure(result):
    if not isinstance(result, Mapping) or ('rc' not in result and 'msg' not in result):
        raise AnsibleFilterError('nvidia_smi_failure: expects the registered result of a command task (rc, stdout, '
                                 'stderr), got %r' % (type(result).__name__,))
    stdout = to_text(result.get('stdout') or '')
    stderr = to_text(result.get('stderr') or '')
    rc = result.get('rc')
    started = _ERRNO.match(to_text(result.get('msg') or ''))
    if started and not stdout and not stderr:
        rc = _SHELL_RC_BY_ERRNO.get(int(started.group(1)), rc)
        stderr = to_text(result.get('msg'))
    try:
        rc = int(rc if rc is not None else 1)
    except (TypeError, ValueError):
        raise AnsibleFilterError('nvidia_smi_failure: rc must be a number, got %r' % (rc,))
    if rc in _KILLED_RCS and _under_timeout(result.get('cmd')):
        rc = TIMEOUT_RC
    failure = classify_failure(rc, stdout, stderr)
    return {'reason': failure.reason, 'hint': failure.hint, 'pci_bus_id': getattr(failure, 'pci_bus_id', None), 'rc': rc}


class FilterModule(object):
    def filters(self):
        return {'nvidia_smi_failure': nvidia_smi_failure}
