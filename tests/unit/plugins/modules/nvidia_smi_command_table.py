# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Table-driven ``run_command`` double for modules that call nvidia-smi.

Each case lists the nvidia-smi argument lists it expects, in order, with the
canned ``(rc, stdout, stderr)``. The double checks the full argv (the runner's
``timeout`` wrapper included) and the forced C locale, fails on any unexpected
or missing call, and records what ran so that tests can assert "no setter ran".
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import (
    AnsibleExitJson,
    AnsibleFailJson,
    patch_exits,
    set_module_args,
)

NVIDIA_SMI = '/usr/bin/nvidia-smi'
TIMEOUT = '/usr/bin/timeout'


def wrapped(args, timeout=30):
    """The argv the runner hands to run_command for ``nvidia-smi <args>``."""
    return [TIMEOUT, '--kill-after=5', str(timeout), NVIDIA_SMI] + list(args)


class CommandTable(object):
    def __init__(self, calls):
        self.expected = list(calls)
        self.ran = []

    def run_command(self, argv, **kwargs):
        env = kwargs.get('environ_update') or {}
        assert env.get('LC_ALL') == 'C', 'nvidia-smi must run with LC_ALL=C, got %r' % (env,)
        if not self.expected:
            pytest.fail('unexpected command: %r (already ran: %r)' % (argv, self.ran))
        args, rc, stdout, stderr = self.expected.pop(0)
        assert list(argv) == wrapped(args), 'expected nvidia-smi %r, got %r' % (args, argv)
        self.ran.append(list(args))
        return rc, stdout, stderr

    def assert_done(self):
        assert not self.expected, 'expected commands did not run: %r' % (self.expected,)


def run_module(monkeypatch, main, args, calls, check_mode=False, diff=False):
    """Run ``main()`` with ``args`` against the command table; return ``(result, failed, table)``."""
    from ansible.module_utils import basic

    table = CommandTable(calls)
    patch_exits(monkeypatch)
    # The runner checks that an absolute nvidia-smi path exists before running it.
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, 'exists', lambda path: path == NVIDIA_SMI or real_exists(path))
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **kw: {'nvidia-smi': NVIDIA_SMI, 'timeout': TIMEOUT}.get(name))
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', table.run_command)
    module_args = dict(args)
    module_args['_ansible_check_mode'] = check_mode
    module_args['_ansible_diff'] = diff
    try:
        with set_module_args(module_args):
            main()
    except AnsibleExitJson as exc:
        table.assert_done()
        return exc.result, False, table
    except AnsibleFailJson as exc:
        table.assert_done()
        return exc.result, True, table
    pytest.fail('module returned without exit_json or fail_json')
