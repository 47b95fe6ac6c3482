# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every call of the roles that can block is bounded, in every task and handler file.

* A wedged GPU or driver blocks nvidia-smi, dcgmi, nvidia-ctk (NVML), nvcc's
  driver checks and DKMS: each such command runs under coreutils timeout
  (SIGKILL after a grace period) or with a task timeout, so that it fails the
  role instead of hanging the play. The fault suite (molecule/faults, case 4)
  wedges nvidia-smi and dcgmi for real; this test covers every call.
* Another package manager (unattended-upgrades at first boot) holds the dpkg
  lock for minutes: apt and dnf tasks wait for it (lock_timeout), apt-get
  commands too (DPkg::Lock::Timeout), and dpkg --set-selections, which does
  not wait, is retried (fault suite, case 6).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import ROLES_DIR

BLOCKING = re.compile(r'(?<![\w-])(nvidia-smi|dcgmi|nvidia-ctk|nvcc|dkms)(?![\w-])'
                      r'|__dcgm_dcgmi\b|__container_toolkit_ctk\b|__fabric_manager_fabric_query\b')
COMMANDS = ('ansible.builtin.command', 'ansible.builtin.shell')
PACKAGE_MODULES = ('ansible.builtin.apt', 'ansible.builtin.dnf')
# An argv given as a template that starts with a role variable: "{{ __x + [...] }}" or "{{ __x }}".
ARGV_VARIABLE = re.compile(r'^\{\{\s*\(?\s*(__[a-z0-9_]+)')


def _tasks(tasks, path):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in ('block', 'rescue', 'always'):
            yield from _tasks(task.get(key), path)
        yield path, task


def _role_vars(path):
    """The role's vars/main.yml (argv prefixes such as __dcgm_timeout_argv live there)."""
    vars_file = os.path.join(ROLES_DIR, path.split(os.sep)[0], 'vars', 'main.yml')
    if not os.path.exists(vars_file):
        return {}
    with open(vars_file) as handle:
        return yaml.safe_load(handle) or {}


ALL = [case for path in sorted(glob.glob(os.path.join(ROLES_DIR, '*', 'tasks', '*.yml'))
                               + glob.glob(os.path.join(ROLES_DIR, '*', 'handlers', '*.yml')))
       for case in _tasks(yaml.safe_load(open(path)), os.path.relpath(path, ROLES_DIR))]


def _command(task):
    module = [m for m in COMMANDS if m in task]
    return task[module[0]] if module else None


def _argv(command):
    if isinstance(command, dict):
        return command.get('argv', command.get('cmd', command.get('_raw_params', '')))
    return command


def _text(task):
    return yaml.safe_dump({'cmd': _command(task), 'loop': task.get('loop')})


def _bounded(path, task):
    if task.get('timeout'):
        return True
    argv = _argv(_command(task))
    if isinstance(argv, list):
        return bool(argv) and str(argv[0]).rsplit('/', 1)[-1] == 'timeout'
    argv = str(argv).strip()
    if re.match(r'^timeout\s', argv):
        return True
    variable = ARGV_VARIABLE.match(argv)
    if variable:
        value = _role_vars(path).get(variable.group(1))
        return isinstance(value, list) and bool(value) and str(value[0]) == 'timeout'
    return False


BLOCKING_CASES = [(path, task) for path, task in ALL if _command(task) is not None and BLOCKING.search(_text(task))]
APT_GET_CASES = [(path, task) for path, task in ALL if _command(task) is not None
                 and re.search(r'(?<![\w-])apt-get(?![\w-])', _text(task)) and '--simulate' not in _text(task)]
PACKAGE_CASES = [(path, task) for path, task in ALL for module in PACKAGE_MODULES
                 if module in task and isinstance(task[module], dict)
                 and (task[module].get('name') or task[module].get('update_cache'))]
SELECTION_CASES = [(path, task) for path, task in ALL if 'ansible.builtin.dpkg_selections' in task
                   or (_command(task) is not None and re.search(r'apt-mark\W+(un)?hold', _text(task)))]


def _ids(cases):
    return ['%s: %s' % (path, task.get('name')) for path, task in cases]


def test_the_roles_have_such_calls():
    # The commands of the driver (dkms), toolkit (nvidia-ctk), CUDA (nvidia-smi, nvcc), DCGM (dcgmi) and Fabric Manager roles.
    assert len(BLOCKING_CASES) >= 12
    assert len(PACKAGE_CASES) >= 10 and len(SELECTION_CASES) >= 6 and APT_GET_CASES


@pytest.mark.parametrize('path, task', BLOCKING_CASES, ids=_ids(BLOCKING_CASES))
def test_calls_that_a_wedged_gpu_blocks_are_bounded(path, task):
    assert _bounded(path, task), '%s: "%s" runs %s without a timeout' % (path, task.get('name'), _argv(_command(task)))


@pytest.mark.parametrize('path, task', PACKAGE_CASES, ids=_ids(PACKAGE_CASES))
def test_package_tasks_wait_for_the_lock(path, task):
    module = [m for m in PACKAGE_MODULES if m in task][0]
    assert 'lock_timeout' in task[module], '%s: "%s" does not wait for the package lock' % (path, task.get('name'))


@pytest.mark.parametrize('path, task', APT_GET_CASES, ids=_ids(APT_GET_CASES))
def test_apt_get_commands_wait_for_the_lock(path, task):
    assert 'DPkg::Lock::Timeout=' in _text(task), '%s: "%s"' % (path, task.get('name'))


@pytest.mark.parametrize('path, task', SELECTION_CASES, ids=_ids(SELECTION_CASES))
def test_dpkg_selections_are_retried_while_the_lock_is_held(path, task):
    # dpkg --set-selections fails at once on a held lock: retried, 5 s apart,
    # on what dpkg said. apt-mark passes dpkg's stderr on; the dpkg_selections
    # module writes to a dpkg that may already have exited, and then answers
    # only "Error executing command." (the broken pipe), which no retry
    # condition can tell from another failure: CI lost an upgrade to it.
    assert 'ansible.builtin.dpkg_selections' not in task, \
        '%s: "%s" holds with dpkg_selections; use apt-mark' % (path, task.get('name'))
    register = task.get('register')
    assert register and task.get('retries') and task.get('delay'), '%s: "%s"' % (path, task.get('name'))
    until = str(task.get('until', ''))
    assert re.search(r'%s\.stderr\b.*search\(.lock.\)' % re.escape(register), until), \
        '%s: "%s": %s' % (path, task.get('name'), until)
