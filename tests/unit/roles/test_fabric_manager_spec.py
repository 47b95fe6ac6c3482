# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fabric_manager role: the package names per driver branch and platform,
rendered with Ansible's own templar and compared with NVIDIA's naming
(NVIDIA-FACTS section 7) and with the simulated repository, which carries
NVIDIA's names. The checks of the argument spec against the defaults and of
the platform files, common to all roles, are in test_role_argument_specs.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import REPO_ROOT, load, plain, render, role_variables, trust

ROLE = 'fabric_manager'


def _load(*parts):
    return load(ROLE, *parts)


def _render(name, os_file, **inputs):
    variables = role_variables(ROLE, 'main.yml', os_file)
    variables.update(trust(inputs))
    return plain(render(variables[name], variables))


def _simulated_catalog():
    sys.path.insert(0, os.path.join(REPO_ROOT, 'tests', 'nvidia_sim', 'repo'))
    try:
        import catalog
        import catalog_drivers
    finally:
        sys.path.pop(0)
    return catalog, catalog_drivers


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
