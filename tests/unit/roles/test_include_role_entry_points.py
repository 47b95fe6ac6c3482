# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""No include_role picks its entry point from a host's variables.

ansible.builtin.include_role templates ``tasks_from`` once for all the hosts
it includes together (the included files are grouped without it), so an
entry point named by a host's fact ("apt" or "dnf") was the first host's for
every host: a Rocky host in a play that began with a Debian one configured an
apt repository (found by the first mixed Molecule run). A templated entry
point is allowed only as the task's own loop variable, which Ansible does
group by.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import ROLES_DIR

TOP = os.path.dirname(ROLES_DIR)
INCLUDE = ('ansible.builtin.include_role', 'include_role')
FROM_KEYS = ('tasks_from', 'vars_from', 'defaults_from', 'handlers_from')


def _includes(tasks):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in ('block', 'rescue', 'always'):
            yield from _includes(task.get(key))
        for module in INCLUDE:
            if isinstance(task.get(module), dict):
                yield task, task[module]


def _task_files():
    files = glob.glob(os.path.join(ROLES_DIR, '*', 'tasks', '*.yml'))
    files += glob.glob(os.path.join(TOP, 'playbooks', '*.yml')) + [os.path.join(TOP, 'site.yml')]
    return sorted(f for f in files if os.path.isfile(f))


def _all_includes():
    found = []
    for path in _task_files():
        with open(path) as handle:
            data = yaml.safe_load(handle)
        plays = data if isinstance(data, list) else []
        blocks = [plays]
        for play in plays:
            if isinstance(play, dict) and 'hosts' in play:
                blocks += [play.get(k) for k in ('pre_tasks', 'tasks', 'post_tasks', 'handlers')]
        for block in blocks:
            for task, args in _includes(block):
                found.append((os.path.relpath(path, TOP), task, args))
    return found


def test_the_scan_finds_the_repository_includes():
    names = {args.get('name') for _p, _t, args in _all_includes()}
    assert 'gpufleet.nvidia.repository' in names


@pytest.mark.parametrize('path, task, args', _all_includes(), ids=lambda v: v if isinstance(v, str) else '')
def test_entry_point_is_static_or_the_loop_variable(path, task, args):
    loop_var = (task.get('loop_control') or {}).get('loop_var', 'item')
    for key in FROM_KEYS + ('name',):
        value = args.get(key)
        if not isinstance(value, str) or '{{' not in value:
            continue
        assert 'loop' in task or 'with_items' in task, '%s: %s %s=%s is templated' % (path, task.get('name'), key, value)
        assert re.fullmatch(r'\{\{\s*%s\s*\}\}' % re.escape(loop_var), value.strip()), \
            '%s: %s %s=%s is not the loop variable %s' % (path, task.get('name'), key, value, loop_var)
