# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cuda_toolkit and cudnn roles: argument specs against defaults, and the
expressions of vars/main.yml that choose versions and packages.

Defaults that are templates (they follow the nvidia_driver or cuda_toolkit
role's variables when those are defined) are rendered with Ansible's own
templar, once without those variables, which must give the argument spec's
default, and once with them.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ('cuda_toolkit', 'cudnn')
SUPPORTED_OS_FILES = ('Debian_12.yml', 'Debian_13.yml', 'Ubuntu_22.yml', 'Ubuntu_24.yml', 'RedHat_8.yml', 'RedHat_9.yml')
# Facts the roles set for later roles and plays (not inputs).
FACTS = {
    'cuda_toolkit': {'cuda_toolkit_installed', 'cuda_toolkit_default', 'cuda_toolkit_home',
                     'cuda_toolkit_forward_compat_versions', 'cuda_toolkit_nvcc_versions'},
    'cudnn': {'cudnn_installed_version', 'cudnn_installed_cuda_major', 'cudnn_packages'},
}
PYTHON_TYPES = {'str': str, 'int': int, 'bool': bool, 'list': list, 'dict': dict}

_LOADER = DataLoader()


def _trust(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trust(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _trust(v)) for k, v in value.items())
    return value


def _load(role, *parts):
    return _LOADER.load_from_file(os.path.join(REPO_ROOT, 'roles', role, *parts))


def _defaults(role):
    return _trust(_load(role, 'defaults', 'main.yml'))


def _options(role):
    return _load(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']


def _render(value, variables):
    return Templar(loader=_LOADER, variables=variables).template(value)


def _plain(value):
    """Tagged Ansible values as plain Python ones, for comparisons and type checks."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    return value


def _rendered_defaults(role, **extra):
    defaults = _defaults(role)
    variables = dict(defaults, **_trust(extra))
    return dict((name, _plain(_render(value, variables))) for name, value in defaults.items())


@pytest.mark.parametrize('role', ROLES)
def test_every_default_is_declared_and_every_option_has_a_default(role):
    defaults = set(_defaults(role))
    options = _options(role)
    assert sorted(defaults - set(options)) == [], 'defaults/main.yml variables missing from meta/argument_specs.yml'
    undefaulted = [name for name, spec in options.items() if name not in defaults and spec.get('required')]
    assert undefaulted == [], 'required options are not allowed: every input has a default'
    optional_without_default = [name for name, spec in options.items() if name not in defaults]
    assert optional_without_default == [], 'options without a default in defaults/main.yml'


@pytest.mark.parametrize('role', ROLES)
def test_every_option_is_prefixed_typed_and_described(role):
    for name, spec in _options(role).items():
        assert name.startswith(role + '_'), name
        assert spec.get('type') in PYTHON_TYPES, (name, spec.get('type'))
        assert spec.get('description'), name
        if spec['type'] == 'list':
            assert spec.get('elements') in PYTHON_TYPES, name


@pytest.mark.parametrize('role', ROLES)
def test_rendered_defaults_have_the_declared_type_and_the_spec_default(role):
    rendered = _rendered_defaults(role)
    for name, spec in _options(role).items():
        value = rendered[name]
        expected_type = PYTHON_TYPES[spec['type']]
        assert isinstance(value, expected_type), (name, value, spec['type'])
        if expected_type is int:
            assert not isinstance(value, bool), name
        if spec['type'] == 'list':
            element_type = PYTHON_TYPES[spec['elements']]
            assert all(isinstance(v, element_type) for v in value), name
        if 'choices' in spec:
            assert value in spec['choices'], (name, value, spec['choices'])
        assert value == _plain(spec.get('default')), (name, value, spec.get('default'))


@pytest.mark.parametrize('role', ROLES)
def test_tasks_and_templates_only_read_declared_inputs(role):
    # A misspelt input would silently be undefined (or the fact of the same name).
    declared = set(_defaults(role)) | FACTS[role]
    used = set()
    role_dir = os.path.join(REPO_ROOT, 'roles', role)
    for sub in ('tasks', 'templates', 'handlers', 'vars'):
        folder = os.path.join(role_dir, sub)
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            with open(os.path.join(folder, name)) as handle:
                # Tag names share the prefix but are not variables.
                text = re.sub(r'(?m)^\s*tags:.*$', '', handle.read())
                used |= set(re.findall(r'(?<![_\w])(%s_[a-z0-9_]*[a-z0-9])' % role, text))
    assert sorted(used - declared) == []


@pytest.mark.parametrize('role', ROLES)
def test_each_supported_platform_has_the_same_data(role):
    keys = None
    for name in SUPPORTED_OS_FILES:
        data = _load(role, 'vars', name)
        assert all(k.startswith('__%s_' % role) for k in data), name
        if keys is None:
            keys = set(data)
        assert set(data) == keys, name


def test_cuda_toolkit_repository_follows_the_driver_role():
    rendered = _rendered_defaults(
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
    assert _rendered_defaults('cuda_toolkit', **driver_vars)['cuda_toolkit_driver_version'] == expected


def _cuda_toolkit_vars(**inputs):
    variables = dict(_defaults('cuda_toolkit'), **_trust(_load('cuda_toolkit', 'vars', 'main.yml')))
    variables.update(_trust(inputs))
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
    assert _plain(_render(variables['__cuda_toolkit_versions_sorted'], variables)) == expected_sorted
    assert _plain(_render(variables['__cuda_toolkit_default'], variables)) == expected_default


def test_cuda_toolkit_package_names():
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8', '13.0'])
    assert _plain(_render(variables['__cuda_toolkit_packages'], variables)) == ['cuda-toolkit-12-8', 'cuda-toolkit-13-0']


@pytest.mark.parametrize('name, is_driver', [
    ('nvidia-driver', True), ('nvidia-driver-cuda', True), ('cuda-drivers-570', True), ('cuda-drivers', True),
    ('nvidia-open', True), ('libcuda1', True), ('libnvidia-compute-570', True), ('nvidia-kernel-open-dkms', True),
    ('kmod-nvidia-open-dkms', True), ('nvidia-smi', True),
    ('cuda-toolkit-12-8', False), ('cuda-compat-13-0', False), ('cuda-cudart-12-8', False),
    ('libcudnn9-cuda-12', False), ('cuda-toolkit-config-common', False),
])
def test_cuda_toolkit_driver_package_pattern(name, is_driver):
    variables = _cuda_toolkit_vars()
    regex = _render(variables['__cuda_toolkit_driver_package_regex'], variables)
    assert bool(re.match(regex, name)) is is_driver


def _cudnn_vars(os_file='Debian_12.yml', cuda_major='12', **inputs):
    variables = dict(_defaults('cudnn'), **_trust(_load('cudnn', 'vars', 'main.yml')))
    variables.update(_trust(_load('cudnn', 'vars', os_file)))
    variables['__cudnn_cuda_major'] = cuda_major
    variables.update(_trust(inputs))
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
    assert _plain(_render(variables['__cudnn_package_specs'], variables)) == expected


@pytest.mark.parametrize('name, ours', [
    ('libcudnn9-cuda-12', True), ('libcudnn9-dev-cuda-12', True), ('libcudnn9-headers-cuda-12', True),
    ('libcudnn9-static-cuda-12', True), ('cudnn9-cuda-12', True),
    ('libcudnn9-cuda-13', False), ('cudnn9-cuda-13', False), ('libcudnn8', False), ('cudnn9', False),
])
def test_cudnn_holds_only_its_cuda_major(name, ours):
    variables = _cudnn_vars(cuda_major='12')
    regex = _render(variables['__cudnn_package_regex'], variables).strip()
    assert bool(re.match(regex, name)) is ours


@pytest.mark.parametrize('toolkit_default, expected', [({}, ''), ({'cuda_toolkit_default': '12.8'}, '12'),
                                                       ({'cuda_toolkit_default': '13.0'}, '13')])
def test_cudnn_cuda_major_follows_the_default_toolkit(toolkit_default, expected):
    assert _rendered_defaults('cudnn', **toolkit_default)['cudnn_cuda_major'] == expected
