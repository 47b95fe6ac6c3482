# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The driver's reboot counts as done only once the host finished booting.

A host answers (sshd, docker exec) before systemd has loaded the NVIDIA
module: reading /proc/driver/nvidia/version then finds no driver and the
role reported a failed upgrade (seen in the fleet scenario under load). The
reboot's test command asks systemd, with and without --wait (systemd 239 on
RHEL 8 has none), against a fake systemctl here.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import ROLES_DIR

ROLE = os.path.join(ROLES_DIR, 'nvidia_driver')


def _test_command():
    with open(os.path.join(ROLE, 'vars', 'main.yml')) as handle:
        return yaml.safe_load(handle)['__nvidia_driver_reboot_test_command']


def _reboot_task():
    with open(os.path.join(ROLE, 'tasks', 'reboot_required.yml')) as handle:
        tasks = yaml.safe_load(handle)
    # The reboot sits in nested blocks (its own has the rescue for a host that does not come back).
    pending = list(tasks)
    while pending:
        task = pending.pop(0)
        if 'ansible.builtin.reboot' in task:
            return task['ansible.builtin.reboot']
        pending.extend(task.get('block', []))
    raise AssertionError('no reboot task')


def test_the_reboot_waits_with_the_test_command():
    assert _reboot_task()['test_command'] == '{{ __nvidia_driver_reboot_test_command }}'


@pytest.mark.parametrize('wait_supported, state, done', [
    (True, 'running', True),
    (True, 'degraded', True),
    (True, 'starting', False),
    (True, 'maintenance', False),
    (False, 'running', True),
    (False, 'starting', False),
])
def test_the_test_command_accepts_only_a_finished_boot(tmp_path, wait_supported, state, done):
    # is-system-running exits 0 only for "running"; an unknown --wait is a usage error.
    fake = tmp_path / 'systemctl'
    fake.write_text('#!/bin/sh\n'
                    'if [ "$2" = --wait ] && [ %s = no ]; then echo "unknown option --wait" >&2; exit 1; fi\n'
                    'echo %s\n[ %s = running ]\n' % ('yes' if wait_supported else 'no', state, state))
    fake.chmod(0o755)
    env = dict(os.environ, PATH='%s:%s' % (tmp_path, os.environ['PATH']))
    result = subprocess.run(['sh', '-c', _test_command()], env=env, capture_output=True, check=False)
    assert (result.returncode == 0) is done, result
