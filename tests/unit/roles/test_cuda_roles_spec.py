# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cuda_toolkit and cudnn roles: the expressions of vars/main.yml that
choose versions and packages.

Defaults that are templates (they follow the nvidia_driver or cuda_toolkit
role's variables when those are defined) are rendered with Ansible's own
templar with those variables here; rendered without them they must give the
argument spec's default, which test_role_argument_specs.py checks with the
rest of the argument spec against the defaults, for every role.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    load, plain, render, rendered_defaults, role_path, role_variables, trust)

ROLES = ('cuda_toolkit', 'cudnn')
SUPPORTED_OS_FILES = ('Debian_12.yml', 'Debian_13.yml', 'Ubuntu_22.yml', 'Ubuntu_24.yml', 'RedHat_8.yml', 'RedHat_9.yml')


@pytest.mark.parametrize('role', ROLES)
def test_each_supported_platform_has_a_vars_file(role):
    # What the files hold is checked for every role in test_role_argument_specs.py.
    for name in SUPPORTED_OS_FILES:
        assert os.path.isfile(role_path(role, 'vars', name)), name


def test_cuda_toolkit_repository_follows_the_driver_role():
    rendered = rendered_defaults(
        'cuda_toolkit',
        nvidia_driver_repo_manage=False,
        nvidia_driver_repo_url='https://mirror.example/cuda/repos/debian12/x86_64',
        nvidia_driver_repo_base_url='https://mirror.example/cuda/repos',
        nvidia_driver_repo_key_url='https://mirror.example/key.asc',
        nvidia_driver_repo_key_fingerprint='EB693B3035CD5710E231E123A4B469963BF863CC',
        nvidia_driver_package_lock_timeout=60,
    )
    assert rendered['cuda_toolkit_repo_manage'] is False
    assert rendered['cuda_toolkit_repo_url'] == 'https://mirror.example/cuda/repos/debian12/x86_64'
    assert rendered['cuda_toolkit_repo_base_url'] == 'https://mirror.example/cuda/repos'
    assert rendered['cuda_toolkit_repo_key_url'] == 'https://mirror.example/key.asc'
    assert rendered['cuda_toolkit_repo_key_fingerprint'] == 'EB693B3035CD5710E231E123A4B469963BF863CC'
    assert rendered['cuda_toolkit_package_lock_timeout'] == 60


@pytest.mark.parametrize('driver_vars, expected', [
    ({}, ''),
    ({'nvidia_driver_branch': '570', 'nvidia_driver_version': ''}, '570'),
    ({'nvidia_driver_branch': '580', 'nvidia_driver_version': '580.95.05'}, '580.95.05'),
    # YAML may hand over a number.
    ({'nvidia_driver_branch': 580}, '580'),
])
def test_cuda_toolkit_requested_driver_follows_the_driver_role(driver_vars, expected):
    assert rendered_defaults('cuda_toolkit', **driver_vars)['cuda_toolkit_driver_version'] == expected


def _cuda_toolkit_vars(**inputs):
    variables = role_variables('cuda_toolkit', 'main.yml')
    variables.update(trust(inputs))
    return variables


@pytest.mark.parametrize('versions, default, expected_sorted, expected_default', [
    (['12.8'], '', ['12.8'], '12.8'),
    (['12.8', '13.0', '12.4'], '', ['13.0', '12.8', '12.4'], '13.0'),
    # By number, not by text: 12.10 is newer than 12.9.
    (['12.9', '12.10'], '', ['12.10', '12.9'], '12.10'),
    (['12.4', '12.8'], '12.4', ['12.8', '12.4'], '12.4'),
])
def test_cuda_toolkit_default_is_the_newest_unless_chosen(versions, default, expected_sorted, expected_default):
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=versions, cuda_toolkit_default_version=default)
    assert plain(render(variables['__cuda_toolkit_versions_sorted'], variables)) == expected_sorted
    assert plain(render(variables['__cuda_toolkit_default'], variables)) == expected_default


def test_cuda_toolkit_package_names():
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8', '13.0'])
    assert plain(render(variables['__cuda_toolkit_packages'], variables)) == ['cuda-toolkit-12-8', 'cuda-toolkit-13-0']


@pytest.mark.parametrize('name, is_driver', [
    ('nvidia-driver', True), ('nvidia-driver-cuda', True), ('cuda-drivers-570', True), ('cuda-drivers', True),
    ('nvidia-open', True), ('libcuda1', True), ('libnvidia-compute-570', True), ('nvidia-kernel-open-dkms', True),
    ('kmod-nvidia-open-dkms', True), ('nvidia-smi', True),
    ('cuda-toolkit-12-8', False), ('cuda-compat-13-0', False), ('cuda-cudart-12-8', False),
    ('libcudnn9-cuda-12', False), ('cuda-toolkit-config-common', False),
])
def test_cuda_toolkit_driver_package_pattern(name, is_driver):
    variables = _cuda_toolkit_vars()
    regex = render(variables['__cuda_toolkit_driver_package_regex'], variables)
    assert bool(re.match(regex, name)) is is_driver


def _cudnn_vars(os_file='Debian_12.yml', cuda_major='12', **inputs):
    variables = role_variables('cudnn', 'main.yml', os_file)
    variables['__cudnn_cuda_major'] = cuda_major
    variables.update(trust(inputs))
    return variables


@pytest.mark.parametrize('os_file, inputs, expected', [
    # Unversioned: the runtime alone, or NVIDIA's full meta package with headers.
    ('Debian_12.yml', {}, ['libcudnn9-cuda-12']),
    ('Debian_12.yml', {'cudnn_dev': True}, ['cudnn9-cuda-12']),
    # Versioned: runtime (and headers) pinned, any revision of an exact version.
    ('Debian_12.yml', {'cudnn_version': '9.13.0.50'}, ['libcudnn9-cuda-12=9.13.0.50-*']),
    ('Debian_12.yml', {'cudnn_version': '9.13.0.50', 'cudnn_dev': True},
     ['libcudnn9-cuda-12=9.13.0.50-*', 'libcudnn9-dev-cuda-12=9.13.0.50-*']),
    ('Debian_12.yml', {'cudnn_version': '9.10'}, ['libcudnn9-cuda-12=9.10.*']),
    ('Debian_12.yml', {'cudnn_version': '9.13.0.50-1'}, ['libcudnn9-cuda-12=9.13.0.50-1']),
    ('RedHat_9.yml', {'cudnn_version': '9.13.0.50', 'cudnn_dev': True},
     ['libcudnn9-cuda-12-9.13.0.50-*', 'libcudnn9-devel-cuda-12-9.13.0.50-*']),
])
def test_cudnn_package_selection(os_file, inputs, expected):
    variables = _cudnn_vars(os_file, **inputs)
    assert plain(render(variables['__cudnn_package_specs'], variables)) == expected


@pytest.mark.parametrize('name, ours', [
    ('libcudnn9-cuda-12', True), ('libcudnn9-dev-cuda-12', True), ('libcudnn9-headers-cuda-12', True),
    ('libcudnn9-static-cuda-12', True), ('cudnn9-cuda-12', True),
    ('libcudnn9-cuda-13', False), ('cudnn9-cuda-13', False), ('libcudnn8', False), ('cudnn9', False),
])
def test_cudnn_holds_only_its_cuda_major(name, ours):
    variables = _cudnn_vars(cuda_major='12')
    regex = render(variables['__cudnn_package_regex'], variables).strip()
    assert bool(re.match(regex, name)) is ours


@pytest.mark.parametrize('toolkit_default, expected', [({}, ''), ({'cuda_toolkit_default': '12.8'}, '12'),
                                                       ({'cuda_toolkit_default': '13.0'}, '13')])
def test_cudnn_cuda_major_follows_the_default_toolkit(toolkit_default, expected):
    assert rendered_defaults('cudnn', **toolkit_default)['cudnn_cuda_major'] == expected


def test_cuda_toolkit_removal_takes_every_package_of_the_unlisted_toolkit():
    # cuda-toolkit-X-Y-config-common owns /usr/local/cuda-X.Y/version.json:
    # left installed, the toolkit's directory (and its alternatives) would stay.
    tasks = load('cuda_toolkit', 'tasks', 'remove.yml')
    expression = [t for t in tasks if t['name'] == 'Work out their packages'][0]['ansible.builtin.set_fact']
    installed = ['cuda-toolkit-12-8', 'cuda-toolkit-13-0', 'cuda-nvcc-13-0', 'cuda-cudart-13-0', 'libcublas-13-0',
                 'cuda-compat-13-0', 'cuda-toolkit-13-0-config-common', 'cuda-toolkit-13-config-common',
                 'cuda-toolkit-config-common', 'cuda-nvcc-12-8', 'cuda-toolkit-12-8-config-common',
                 'nvidia-driver', 'libcudnn9-cuda-13']
    variables = trust({'ansible_facts': {'packages': {name: [{'version': '1'}] for name in installed}},
                       '__cuda_toolkit_unlisted': ['13.0']})
    assert plain(render(trust(expression['__cuda_toolkit_remove_packages']), variables)) == [
        'cuda-compat-13-0', 'cuda-cudart-13-0', 'cuda-nvcc-13-0', 'cuda-toolkit-13-0',
        'cuda-toolkit-13-0-config-common', 'libcublas-13-0']
