# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every command of the roles whose output a task reads runs in the C locale.

apt-cache policy prints "Kandidat:" in German, dnf translates "Deleting
versionlock", dcgmi its tables: a role that reads them must set LC_ALL=C, or
a host with another locale takes the wrong branch. The package tools and dcgmi
are checked here, in every task file of every role.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import ROLES_DIR

TOOLS = re.compile(r'(?<![\w-])(apt-cache|apt-get|dnf|dpkg-query|dpkg|rpm|dcgmi)(?![\w-])')
COMMANDS = ('ansible.builtin.command', 'ansible.builtin.shell')


def _commands(tasks, path):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in ('block', 'rescue', 'always'):
            yield from _commands(task.get(key), path)
        for module in COMMANDS:
            if module in task:
                yield path, task


CASES = [case for path in sorted(glob.glob(os.path.join(ROLES_DIR, '*', 'tasks', '*.yml')))
         for case in _commands(yaml.safe_load(open(path)), os.path.relpath(path, ROLES_DIR))]
TOOL_CASES = [(path, task) for path, task in CASES
              if TOOLS.search(yaml.safe_dump({'cmd': task[[m for m in COMMANDS if m in task][0]],
                                              'loop': task.get('loop')}))]


def test_the_roles_run_package_tools():
    assert len(TOOL_CASES) >= 10


@pytest.mark.parametrize('path, task', TOOL_CASES, ids=['%s: %s' % (p, t.get('name')) for p, t in TOOL_CASES])
def test_package_tools_and_dcgmi_run_in_the_c_locale(path, task):
    assert (task.get('environment') or {}).get('LC_ALL') == 'C', '%s: %s' % (path, task.get('name'))
