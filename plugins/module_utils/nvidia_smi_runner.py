# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run ``nvidia-smi`` from a module: argv only, C locale, always bounded in time.

Contract for callers:

* ``run_nvidia_smi(module, args, timeout=None, binary=None, check_rc=False)``
  returns ``(rc, stdout, stderr)``. ``binary`` defaults to the module's
  ``nvidia_smi_path`` parameter, then to ``nvidia-smi`` on PATH; ``timeout``
  defaults to the module's ``timeout`` parameter, then to
  ``DEFAULT_TIMEOUT``. A missing binary is reported as rc 127 (never raised)
  and a timeout as rc 124 with ``TIMEOUT_MARKER`` in stderr, so that
  ``classify_failure`` recognises both.
* ``fail_from_result(module, rc, stdout, stderr, cmd)`` fails the module with
  the classified ``reason`` and hint.
* ``NVIDIA_SMI_ARGUMENT_SPEC`` is the argument spec matching the
  ``gpufleet.nvidia.nvidia_smi`` doc fragment.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shlex
import time

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import (
    NOT_EXECUTABLE_RC,
    NOT_FOUND_RC,
    TIMEOUT_MARKER,
    TIMEOUT_RC,
    classify_failure,
)

DEFAULT_TIMEOUT = 30
# Grace period after SIGTERM before coreutils timeout sends SIGKILL: a GPU
# stuck in the kernel ignores SIGTERM, and the play must still move on.
KILL_AFTER = 5
# How a SIGKILL after --kill-after shows: 137 through a shell; -9 from
# run_command when the command ignored SIGTERM (a process stuck in the driver
# does) and timeout's SIGKILL to its process group ended timeout itself too.
_KILLED_RCS = (128 + 9, -9)

# nvidia-smi localises numbers and some texts; parsers expect the C locale.
C_LOCALE = {'LC_ALL': 'C', 'LANG': 'C'}

NVIDIA_SMI_ARGUMENT_SPEC = dict(
    nvidia_smi_path=dict(type='path'),
    timeout=dict(type='int', default=DEFAULT_TIMEOUT),
)


def _resolve_binary(module, binary):
    """Return ``(path, configured)``; ``configured`` paths were not looked up, so may not exist."""
    binary = binary or (module.params or {}).get('nvidia_smi_path')
    if binary:
        return binary, True
    return module.get_bin_path('nvidia-smi'), False


def _resolve_timeout(module, timeout):
    if timeout is None:
        timeout = (module.params or {}).get('timeout')
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if timeout <= 0:
        module.fail_json(msg='timeout must be a positive number of seconds, got %s' % timeout)
    return timeout


def format_command(cmd):
    """Render an argv for messages; strings pass through unchanged."""
    if isinstance(cmd, (list, tuple)):
        return ' '.join(shlex.quote(str(part)) for part in cmd)
    return cmd


def run_nvidia_smi(module, args, timeout=None, binary=None, check_rc=False):
    """Run nvidia-smi with ``args`` (a list) and return ``(rc, stdout, stderr)``."""
    args = [str(arg) for arg in args]
    timeout = _resolve_timeout(module, timeout)
    executable, configured = _resolve_binary(module, binary)
    if not executable:
        rc, stdout, stderr = NOT_FOUND_RC, '', 'nvidia-smi: command not found in PATH'
        if check_rc:
            fail_from_result(module, rc, stdout, stderr, ['nvidia-smi'] + args)
        return rc, stdout, stderr
    if configured and os.path.sep in executable and not os.path.exists(executable):
        rc, stdout, stderr = NOT_FOUND_RC, '', '%s: No such file or directory' % executable
        if check_rc:
            fail_from_result(module, rc, stdout, stderr, [executable] + args)
        return rc, stdout, stderr

    cmd = [executable] + args
    timeout_bin = module.get_bin_path('timeout')
    if timeout_bin:
        argv = [timeout_bin, '--kill-after=%d' % KILL_AFTER, str(timeout)] + cmd
    else:
        # Without coreutils there is nothing to bound the call with; say so
        # rather than silently risking a stuck play.
        module.warn('coreutils timeout not found: nvidia-smi runs without a time limit')
        argv = cmd

    started = time.monotonic()
    rc, stdout, stderr = module.run_command(argv, environ_update=dict(C_LOCALE))
    elapsed = time.monotonic() - started

    if timeout_bin:
        # 124 is timeout's own "timed out"; 137 or -9 is SIGKILL after
        # --kill-after. The elapsed check keeps an unrelated SIGKILL (OOM
        # killer) from passing for a timeout.
        if rc == TIMEOUT_RC or (rc in _KILLED_RCS and elapsed >= timeout):
            rc = TIMEOUT_RC
            stderr = '%s%s %s seconds' % (stderr + '\n' if stderr else '', TIMEOUT_MARKER, timeout)
        elif rc == NOT_FOUND_RC and not stderr:
            stderr = '%s: No such file or directory' % executable
        elif rc == NOT_EXECUTABLE_RC and not stderr:
            stderr = '%s: Permission denied' % executable
    if check_rc and rc != 0:
        fail_from_result(module, rc, stdout, stderr, cmd)
    return rc, stdout, stderr


def fail_from_result(module, rc, stdout, stderr, cmd, **extra):
    """Fail the module with the classified reason and hint of an nvidia-smi run."""
    failure = classify_failure(rc, stdout, stderr)
    reason, hint = failure.reason, failure.hint
    if reason is None:
        reason, hint = 'unknown', 'nvidia-smi exited %s but its output was not usable' % rc
    module.fail_json(msg=hint, reason=reason, pci_bus_id=failure.pci_bus_id, cmd=format_command(cmd), rc=rc,
                     stdout=stdout, stderr=stderr, **extra)
