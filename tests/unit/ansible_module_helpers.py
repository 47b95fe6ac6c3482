# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers for module unit tests, importable as
``ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers``.

Use ``set_module_args`` as a context manager around ``main()`` and the
``module_exits`` fixture (from ``tests/unit/conftest.py``) to turn
``exit_json``/``fail_json`` into ``AnsibleExitJson``/``AnsibleFailJson``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

try:
    from ansible.module_utils.testing import patch_module_args as _patch_module_args
except ImportError:  # ansible-core < 2.19
    _patch_module_args = None


class _ModuleArgs(object):
    """Context manager exposing args to ``AnsibleModule`` for any ansible-core."""

    def __init__(self, args):
        self._args = dict(args or {})
        self._ctx = None

    def __enter__(self):
        self._args.setdefault('_ansible_remote_tmp', '/tmp')
        self._args.setdefault('_ansible_keep_remote_files', False)
        if _patch_module_args is not None:
            self._ctx = _patch_module_args(self._args)
            return self._ctx.__enter__()
        from unittest import mock
        from ansible.module_utils import basic
        from ansible.module_utils.common.text.converters import to_bytes
        self._ctx = mock.patch.object(basic, '_ANSIBLE_ARGS',
                                      to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': self._args})))
        return self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def set_module_args(args):
    """Return a context manager: ``with set_module_args({...}): module.main()``."""
    return _ModuleArgs(args)


class AnsibleExitJson(Exception):
    """Raised by the patched ``exit_json``; ``.result`` holds the module result."""

    def __init__(self, result):
        super(AnsibleExitJson, self).__init__(result)
        self.result = result


class AnsibleFailJson(Exception):
    """Raised by the patched ``fail_json``; ``.result`` holds the module result."""

    def __init__(self, result):
        super(AnsibleFailJson, self).__init__(result)
        self.result = result


def patch_exits(monkeypatch):
    """Make ``AnsibleModule.exit_json``/``fail_json`` raise instead of exiting."""
    from ansible.module_utils import basic

    def exit_json(self, **kwargs):
        kwargs.setdefault('changed', False)
        raise AnsibleExitJson(kwargs)

    def fail_json(self, msg=None, **kwargs):
        kwargs['failed'] = True
        kwargs['msg'] = msg
        raise AnsibleFailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)
    return AnsibleExitJson, AnsibleFailJson
