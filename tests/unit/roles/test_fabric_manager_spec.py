# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fabric_manager role: argument specs against defaults, and the package
names per driver branch and platform, rendered with Ansible's own templar and
compared with NVIDIA's naming (NVIDIA-FACTS section 7) and with the simulated
repository, which carries NVIDIA's names."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import sys

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = 'fabric_manager'
ROLE_DIR = os.path.join(REPO_ROOT, 'roles', ROLE)
PYTHON_TYPES = {'str': str, 'int': int, 'bool': bool, 'list': list, 'dict': dict, 'path': str}
FACTS = {'fabric_manager_nvswitch_present', 'fabric_manager_nvswitches', 'fabric_manager_driver_version',
         'fabric_manager_installed_version'}

_LOADER = DataLoader()


def _trust(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trust(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _trust(v)) for k, v in value.items())
    return value


def _plain(value):
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


def _load(*parts):
    return _LOADER.load_from_file(os.path.join(ROLE_DIR, *parts))


def _options():
    return _load('meta', 'argument_specs.yml')['argument_specs']['main']['options']


def _render(name, os_file, **inputs):
    variables = dict(_trust(_load('defaults', 'main.yml')))
    variables.update(_trust(_load('vars', 'main.yml')))
    variables.update(_trust(_load('vars', os_file)))
    variables.update(_trust(inputs))
    return _plain(Templar(loader=_LOADER, variables=variables).template(variables[name]))


def _simulated_catalog():
    sys.path.insert(0, os.path.join(REPO_ROOT, 'tests', 'nvidia_sim', 'repo'))
    try:
        import catalog
        import catalog_drivers
    finally:
        sys.path.pop(0)
    return catalog, catalog_drivers


def test_every_default_is_declared_and_every_option_has_a_default():
    defaults = _load('defaults', 'main.yml')
    options = _options()
    assert sorted(set(defaults) - set(options)) == []
    assert sorted(set(options) - set(defaults)) == []
    assert [n for n, spec in options.items() if spec.get('required')] == []


def test_every_option_is_typed_described_and_defaults_match():
    defaults = _load('defaults', 'main.yml')
    for name, spec in _options().items():
        assert name.startswith(ROLE + '_'), name
        assert spec.get('description'), name
        value = _plain(defaults[name])
        expected = PYTHON_TYPES[spec['type']]
        assert isinstance(value, expected) and not (expected is int and isinstance(value, bool)), (name, value)
        if spec['type'] == 'list':
            assert all(isinstance(v, PYTHON_TYPES[spec['elements']]) for v in value), name
        assert value == _plain(spec['default']), name


def test_tasks_only_read_declared_inputs():
    declared = set(_load('defaults', 'main.yml')) | FACTS
    used = set()
    for sub in ('tasks', 'handlers', 'vars'):
        for name in os.listdir(os.path.join(ROLE_DIR, sub)):
            with open(os.path.join(ROLE_DIR, sub, name)) as handle:
                text = re.sub(r'(?m)^\s*tags:.*$', '', handle.read())
            used |= set(re.findall(r'(?<![_\w.])(%s_[a-z0-9_]*[a-z0-9])' % ROLE, text))
    assert sorted(used - declared) == []


def test_default_pci_ids_are_the_a100_and_h100_nvswitches():
    assert _load('defaults', 'main.yml')['fabric_manager_nvswitch_pci_ids'] == ['10de:1af1', '10de:22a3']


@pytest.mark.parametrize('os_file, driver, nscq, expected', [
    ('Debian.yml', '570.195.03', True, ['nvidia-fabricmanager-570', 'libnvidia-nscq-570']),
    ('Debian.yml', '535.261.03', True, ['nvidia-fabricmanager-535', 'libnvidia-nscq-535']),
    ('Debian.yml', '580.95.05', True, ['nvidia-fabricmanager', 'libnvidia-nscq']),
    ('Debian.yml', '590.48.01', False, ['nvidia-fabricmanager']),
    ('RedHat.yml', '570.195.03', True, ['nvidia-fabric-manager', 'libnvidia-nscq-570']),
    ('RedHat.yml', '580.95.05', True, ['nvidia-fabricmanager', 'libnvidia-nscq']),
    ('RedHat.yml', '550.163.01', False, ['nvidia-fabric-manager']),
])
def test_package_names_follow_the_driver_branch(os_file, driver, nscq, expected):
    names = _render('__fabric_manager_package_names', os_file, fabric_manager_driver_version=driver,
                    fabric_manager_install_nscq=nscq)
    assert names == expected


@pytest.mark.parametrize('branch', ['535', '550', '570', '580'])
def test_debian_names_are_those_of_the_simulated_repository(branch):
    catalog, catalog_drivers = _simulated_catalog()
    version = catalog.DRIVER_BRANCHES[branch][-1]
    packages = catalog_drivers.fabric_manager(branch, version, int(branch) >= catalog.UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH,
                                              catalog.PAYLOAD)
    names = _render('__fabric_manager_package_names', 'Debian.yml', fabric_manager_driver_version=version)
    assert sorted(names) == sorted(p.name for p in packages)
    assert _load('vars', 'main.yml')['__fabric_manager_unversioned_from_branch'] == catalog.UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH


@pytest.mark.parametrize('name, is_driver', [
    ('nvidia-driver', True),
    ('nvidia-driver-cuda', True),
    ('libcuda1', True),
    ('nvidia-utils-570', True),
    ('libnvidia-compute-580', True),
    ('nvidia-fabricmanager-570', False),
    ('nvidia-driver-pinning-570', False),
    ('nvidia-driver-570', False),
    ('libnvidia-nscq', False),
])
def test_driver_version_is_read_from_driver_packages_only(name, is_driver):
    regex = _load('vars', 'main.yml')['__fabric_manager_driver_package_regex'].strip()
    assert bool(re.match(regex, name)) is is_driver


@pytest.mark.parametrize('gpu, excluded', [
    ('NVIDIA GB200', True),
    ('NVIDIA GB300', True),
    ('NVIDIA H100 80GB HBM3', False),
    ('NVIDIA B200', False),
    ('NVIDIA A100-SXM4-80GB', False),
])
def test_grace_blackwell_gpus_keep_the_host_fabric_manager_off(gpu, excluded):
    assert bool(re.search(_load('vars', 'main.yml')['__fabric_manager_excluded_gpu_regex'], gpu)) is excluded


@pytest.mark.parametrize('os_file', ['Debian.yml', 'RedHat.yml'])
def test_platform_files_have_the_same_keys(os_file):
    data = _load('vars', os_file)
    assert set(data) == set(_load('vars', 'Debian.yml'))
    assert all(k.startswith('__fabric_manager_') for k in data)
