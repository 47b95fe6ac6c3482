# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role: the layout options, platform data, and the templates that
turn mig_layouts into the boot file and the boot unit, rendered with Ansible's
own templar. The checks of the argument spec against the defaults, common to
all roles, are in test_role_argument_specs.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    REPO_ROOT, load, options, plain, render, role_path, role_variables, trust)

ROLE_DIR = role_path('mig')
PLATFORM_FILES = ('Debian.yml', 'Ubuntu.yml', 'RedHat.yml', 'RedHat_8.yml')


def _load(*parts):
    return load('mig', *parts)


def _role_vars(**overrides):
    variables = role_variables('mig', 'main.yml', 'Debian.yml')
    variables['role_path'] = ROLE_DIR
    variables.update(trust(overrides))
    return variables


def _render(value, variables):
    return plain(render(trust(value), variables))


def test_layout_entries_are_specified_like_the_nvidia_mig_module():
    sub = options('mig')['mig_layouts']['options']
    assert sub['gpus'] == dict(sub['gpus'], type='list', elements='str')
    assert sub['profiles']['type'] == 'dict' and sub['profiles']['required'] is True


def test_every_platform_file_names_a_python():
    for name in PLATFORM_FILES:
        data = _load('vars', name)
        assert set(data) == {'__mig_platform_python'}, name
        assert data['__mig_platform_python'].startswith('/'), name
    assert _load('vars', 'RedHat_8.yml')['__mig_platform_python'] == '/usr/libexec/platform-python'


def _task(file_name, task_name):
    for task in _load('tasks', file_name):
        if task.get('name') == task_name:
            return task
    raise AssertionError('no task %r in %s' % (task_name, file_name))


def _normalise(layouts):
    expression = _task('preflight.yml', 'Normalise the layouts')['ansible.builtin.set_fact']['__mig_config_layouts']
    result = []
    for entry in layouts:
        result = _render(expression, _role_vars(mig_layouts=layouts, item=entry, __mig_config_layouts=result))
    return result


def test_layouts_are_normalised_for_the_module_and_the_boot_file():
    layouts = [
        {'gpus': [0, ' 1 '], 'profiles': {'MIG 3g.40gb': 1, '1G.10GB': '2'}},
        {'profiles': {'7g.80gb': 1}},
        {'gpus': ['00000000:87:00.0'], 'profiles': {}},
    ]
    assert _normalise(layouts) == [
        {'gpus': ['0', '1'], 'profiles': {'3g.40gb': 1, '1g.10gb': 2}},
        {'gpus': None, 'profiles': {'7g.80gb': 1}},
        {'gpus': ['00000000:87:00.0'], 'profiles': {}},
    ]


def test_the_boot_file_is_the_json_the_boot_script_reads():
    task = _task('boot.yml', 'Write the layout the boot script applies')['gpufleet.nvidia.config_file']
    layouts = [{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}]
    text = _render(task['content'], _role_vars(__mig_config_layouts=layouts))
    assert json.loads(text) == {'version': 1, 'layouts': layouts}
    assert text.endswith('}\n')
    validate = _render(task['validate'], _role_vars())
    assert validate == '/usr/bin/python3 /usr/local/lib/gpufleet-mig/gpufleet_mig_layout.py --check-config --config %s'


def _unit(**overrides):
    with open(os.path.join(ROLE_DIR, 'templates', 'gpufleet-mig-layout.service.j2')) as handle:
        source = handle.read()
    return _render(source, _role_vars(ansible_managed='managed', **overrides))


def _directives(unit):
    pairs = [line.split('=', 1) for line in unit.splitlines() if '=' in line and not line.startswith('#')]
    return dict((key, value) for key, value in pairs)


def test_boot_unit_orders_itself_between_gpu_bring_up_and_gpu_users():
    directives = _directives(_unit())
    assert directives['After'].split() == ['systemd-modules-load.service', 'nvidia-persistenced.service',
                                           'nvidia-fabricmanager.service']
    assert directives['Before'].split() == ['nvidia-dcgm.service', 'nvidia-dcgm-exporter.service', 'docker.service',
                                            'containerd.service', 'kubelet.service', 'nvidia-cdi-refresh.service']
    assert directives['Type'] == 'oneshot' and directives['RemainAfterExit'] == 'yes'
    assert directives['ExecStart'] == ('/usr/bin/python3 /usr/local/lib/gpufleet-mig/gpufleet_mig_layout.py '
                                       '--config /etc/gpufleet/mig-layout.json --wait-driver 120 --timeout 60')
    assert directives['ConditionPathExists'] == '/etc/gpufleet/mig-layout.json'
    assert directives['WantedBy'] == 'multi-user.target'
    # Long enough for the driver wait and every call the script makes.
    assert int(directives['TimeoutStartSec']) > 120 + 60


def test_boot_unit_follows_the_inputs():
    unit = _unit(mig_before_services=[], mig_after_services=['nvidia-sim-modload.service'],
                 mig_boot_python='/opt/python/bin/python3', mig_config_path='/srv/mig.json')
    directives = _directives(unit)
    assert 'Before' not in directives
    assert directives['After'] == 'systemd-modules-load.service nvidia-sim-modload.service'
    assert directives['ExecStart'].startswith('/opt/python/bin/python3 ')
    assert '--config /srv/mig.json' in directives['ExecStart']


@pytest.mark.parametrize('services, expected', [
    (['nvsm', 'nvidia-dcgm.service'], ['nvsm.service', 'nvidia-dcgm.service']),
    (['dcgm-exporter'], ['dcgm-exporter.service']),
])
def test_reset_services_are_compared_as_unit_names(services, expected):
    variables = _role_vars(mig_reset_stop_services=services)
    assert _render(variables['__mig_reset_stop_units'], variables) == expected


@pytest.mark.parametrize('source_var, path_var, name', [
    ('__mig_library_src', '__mig_library_path', 'nvidia_mig.py'),
    ('__mig_record_src', '__mig_record_path', 'gpu_record.py'),
])
def test_boot_script_libraries_are_the_collection_module_utils(source_var, path_var, name):
    variables = _role_vars()
    source = os.path.normpath(_render(variables[source_var], variables))
    assert source == os.path.join(REPO_ROOT, 'plugins', 'module_utils', name)
    assert os.path.isfile(source)
    # Beside the script, which imports it from its own directory.
    script_dir = os.path.dirname(_render(variables['__mig_script_path'], variables))
    assert _render(variables[path_var], variables) == os.path.join(script_dir, name)
    # Installed as they are, by the task that installs the script.
    code = [dict((k, os.path.normpath(v)) for k, v in entry.items())
            for entry in _render(variables['__mig_boot_code'], variables)]
    assert {'src': source, 'dest': os.path.join(script_dir, name)} in code
    assert {'src': os.path.join(ROLE_DIR, 'files', 'gpufleet_mig_layout.py'),
            'dest': os.path.join(script_dir, 'gpufleet_mig_layout.py')} in code
    task = _task('boot.yml', 'Install the boot script and the collection code it plans with')
    assert task['loop'] == '{{ __mig_boot_code }}'
    assert task['gpufleet.nvidia.config_file'] == {
        'content': "{{ lookup('ansible.builtin.file', item.src, rstrip=false) }}", 'dest': '{{ item.dest }}',
        'owner': 'root', 'group': 'root', 'mode': '0644', 'known': '{{ __mig_state.files }}'}
