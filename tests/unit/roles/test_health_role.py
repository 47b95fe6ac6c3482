# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of the health role beyond the generic argument-spec test: its README, its validate
entry point, the defaults that follow other roles' inputs, and the thin playbook."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    LOADER, REPO_ROOT, defaults, entry_points, load, rendered_defaults, role_path)


def test_the_readme_lists_every_variable():
    with open(role_path('health', 'README.md')) as handle:
        readme = handle.read()
    missing = [name for name in defaults('health') if '| `%s` |' % name not in readme]
    assert missing == []


def test_the_validate_entry_point_takes_the_main_entry_points_options_unchanged():
    specs = entry_points('health')
    assert set(specs) == {'main', 'validate'}
    main, validate = specs['main']['options'], specs['validate']['options']
    assert set(validate) <= set(main)
    for name, option in validate.items():
        assert option == main[name], name
    for task_file in ('validate', 'main', 'preflight', 'gather', 'judge', 'checks', 'report', 'drain'):
        assert os.path.isfile(role_path('health', 'tasks', task_file + '.yml')), task_file


@pytest.mark.parametrize('extra, expected', [
    # The dcgm role's default: its Unix socket.
    ({}, {'health_expected_gpu_count': 0, 'health_expected_driver_branch': '',
          'health_dcgm_host': 'unix:///run/nvidia-dcgm/nv-hostengine.sock'}),
    # dcgm_unix_socket empty: its TCP listener.
    ({'nvidia_driver_expected_gpu_count': 8, 'nvidia_driver_branch': 570, 'dcgm_port': 5570, 'dcgm_unix_socket': ''},
     {'health_expected_gpu_count': 8, 'health_expected_driver_branch': '570', 'health_dcgm_host': '127.0.0.1:5570'}),
    ({'nvidia_driver_expected_gpu_count': None, 'dcgm_listen_address': 'ALL', 'dcgm_unix_socket': ''},
     {'health_expected_gpu_count': 0, 'health_dcgm_host': '127.0.0.1:5555'}),
    ({'dcgm_listen_address': '10.0.0.5', 'dcgm_port': 5600, 'dcgm_unix_socket': ''},
     {'health_dcgm_host': '10.0.0.5:5600'}),
    # A port alone does not switch the socket off, as in the dcgm role.
    ({'dcgm_port': 5570}, {'health_dcgm_host': 'unix:///run/nvidia-dcgm/nv-hostengine.sock'}),
    ({'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine'},
     {'health_dcgm_host': 'unix:///run/nvidia-dcgm/nv-hostengine'}),
])
def test_defaults_follow_the_driver_and_dcgm_roles_inputs(extra, expected):
    rendered = rendered_defaults('health', **extra)
    assert dict((name, rendered[name]) for name in expected) == expected


def test_nothing_is_drained_by_default_and_the_drain_role_is_called_as_agreed():
    assert defaults('health')['health_drain_unhealthy'] is False
    assert defaults('health')['health_drain_hook'] == 'none'
    main = load('health', 'tasks', 'main.yml')
    drain_stage = [task for task in main if task.get('ansible.builtin.import_tasks') == 'drain.yml'][0]
    assert drain_stage['when'] == '__health_inputs.drain_unhealthy'
    tasks = load('health', 'tasks', 'drain.yml')
    read, drain = [task for task in tasks if 'ansible.builtin.include_role' in task]
    # First the read-only state of the unhealthy nodes, then the drain of the nodes the brake lets through.
    assert read['ansible.builtin.include_role'] == {'name': 'gpufleet.nvidia.drain', 'tasks_from': 'read'}
    # Unless the idle check read it already in this run, from the same hook.
    assert set(read['vars']) == {'drain_hook'}
    assert read['when'] == "not gpu_health.healthy and __health_inputs.node_idle_from != 'drain_hook'"
    assert drain['ansible.builtin.include_role'] == {'name': 'gpufleet.nvidia.drain', 'tasks_from': 'drain'}
    assert set(drain['vars']) == {'drain_hook', 'drain_reason'}
    assert '__health_drain_plan.drain' in drain['when']
    assert defaults('health')['health_drain_max_share'] == 10


def test_the_playbook_is_one_play_of_the_role():
    plays = LOADER.load_from_file(os.path.join(REPO_ROOT, 'playbooks', 'health.yml'))
    assert len(plays) == 1 and plays[0]['hosts'] == 'gpu_nodes'
    assert plays[0]['roles'] == [{'role': 'gpufleet.nvidia.health'}]
    assert 'tasks' not in plays[0] and plays[0]['gather_facts'] is False
