# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fabric_manager role: the package names per driver branch and platform,
rendered with Ansible's own templar and compared with NVIDIA's naming
(NVIDIA-FACTS section 7) and with the simulated repository, which carries
NVIDIA's names; what the role derives from its one state read (NVSwitches,
packages to install, dnf locks) and from the fabric query of its
verification. The checks of the argument spec against the defaults and of
the platform files, common to all roles, are in test_role_argument_specs.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.nvidia_smi_failure import FilterModule
from ansible_collections.gpufleet.nvidia.plugins.module_utils.cuda_matrix import driver_branch
from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import REPO_ROOT, load, plain, render, role_variables, trust

ROLE = 'fabric_manager'
nvidia_smi_failure = FilterModule().filters()['nvidia_smi_failure']


def _load(*parts):
    return load(ROLE, *parts)


def _render(name, os_file, **inputs):
    variables = role_variables(ROLE, 'main.yml', os_file)
    if 'fabric_manager_driver_version' in inputs:
        # What the preflight records beside the driver version, with the collection's one
        # reading of a branch (the driver_branch filter is this function).
        inputs.setdefault('__fabric_manager_branch', driver_branch(inputs['fabric_manager_driver_version']))
    variables.update(trust(inputs))
    return plain(render(variables[name], variables))


def test_the_preflight_records_the_branch_with_the_driver_branch_filter():
    tasks = _load('tasks', 'preflight.yml')
    recorded = [task for task in _walk(tasks) if '__fabric_manager_branch' in (task.get('ansible.builtin.set_fact') or {})]
    expressions = [task['ansible.builtin.set_fact']['__fabric_manager_branch'] for task in recorded]
    assert '' in expressions  # initialised before the role can stop early
    assert any('gpufleet.nvidia.driver_branch' in str(e) for e in expressions)
    assert '__fabric_manager_branch' not in _load('vars', 'main.yml')


def _walk(tasks):
    for task in tasks or []:
        yield task
        for key in ('block', 'rescue', 'always'):
            yield from _walk(task.get(key))


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


def _state_task(name):
    for task in _load('tasks', 'state.yml'):
        if task['name'] == name:
            return task
    raise AssertionError('no task %r in tasks/state.yml' % name)


def _state_read(pci_devices=(), nvswitch_entries=(), packages=None, units=None):
    glob = '/proc/driver/nvidia-nvswitch/devices/*'
    return {'pci_devices': list(pci_devices), 'globs': {glob: list(nvswitch_entries)}, 'packages': packages or {},
            'units': units or {}, 'contents': {}, 'files': {}}


def _work_out(state_read, **inputs):
    """The facts of the set_fact after the state read, rendered from a state read as host_state_info returns it."""
    task = _state_task('Work out the NVSwitches and the installed driver and Fabric Manager')
    variables = role_variables(ROLE, 'main.yml', 'Debian.yml')
    variables.update(trust(task.get('vars', {})))
    variables.update(trust(inputs))
    variables['__fabric_manager_state_read'] = state_read
    return dict((name, plain(render(trust(value), variables))) for name, value in task['ansible.builtin.set_fact'].items()
                if name != '__fabric_manager_state')


def _pci(address, device, kind):
    classes = {'gpu': '0x030200', 'nvswitch': '0x068000', 'other': '0x040300'}
    return {'address': address, 'vendor': '0x10de', 'device': device, 'class': classes[kind], 'kind': kind}


HGX_PCI = [_pci('0000:05:00.0', '0x22a3', 'nvswitch'), _pci('0000:06:00.0', '0x22a3', 'nvswitch'),
           _pci('0000:18:00.0', '0x2330', 'gpu'), _pci('0000:19:00.1', '0x22a3', 'other')]


def test_nvswitches_are_the_listed_ids_of_the_nvswitch_class():
    facts = _work_out(_state_read(HGX_PCI + [_pci('0000:07:00.0', '0x2901', 'nvswitch')]))
    # Not the GPU, not a function of another class with a switch id, not an unlisted switch.
    assert facts['fabric_manager_nvswitches'] == ['0000:05:00.0', '0000:06:00.0']
    assert facts['fabric_manager_nvswitch_present'] is True


def test_the_nvswitch_driver_list_wins_over_the_pci_bus():
    entries = ['/proc/driver/nvidia-nvswitch/devices/0000:08:00.0', '/proc/driver/nvidia-nvswitch/devices/0000:07:00.0']
    facts = _work_out(_state_read(HGX_PCI, entries), fabric_manager_nvswitch_devices_path='/proc/driver/nvidia-nvswitch/devices/')
    assert facts['fabric_manager_nvswitches'] == ['0000:07:00.0', '0000:08:00.0']
    # Switches the driver lists count even without an id in fabric_manager_nvswitch_pci_ids.
    facts = _work_out(_state_read([], entries), fabric_manager_nvswitch_pci_ids=[])
    assert facts['fabric_manager_nvswitch_present'] is True


def test_upper_case_ids_and_a_host_without_switches():
    facts = _work_out(_state_read(HGX_PCI), fabric_manager_nvswitch_pci_ids=['10DE:22A3'])
    assert facts['fabric_manager_nvswitches'] == ['0000:05:00.0', '0000:06:00.0']
    facts = _work_out(_state_read([_pci('0000:4a:00.0', '0x26b9', 'gpu')]))
    assert facts['fabric_manager_nvswitches'] == [] and facts['fabric_manager_nvswitch_present'] is False


def _pkg(version, held=True):
    return {'version': version, 'installed': True, 'held': held, 'status': 'installed'}


def test_driver_and_fabric_manager_versions_come_from_the_installed_packages():
    packages = {'nvidia-driver': _pkg('570.195.03-1'), 'nvidia-driver-pinning-570': _pkg('570.195.03-1'),
                'nvidia-fabricmanager-570': _pkg('1:570.172.08-1'),
                'libnvidia-nscq-570': {'version': '570.172.08-1', 'installed': False, 'held': False, 'status': 'config-files'}}
    facts = _work_out(_state_read(HGX_PCI, packages=packages))
    assert facts['__fabric_manager_driver_packages_version'] == '570.195.03'
    assert facts['fabric_manager_installed_version'] == '570.172.08'
    assert sorted(facts['__fabric_manager_installed']) == ['nvidia-driver', 'nvidia-driver-pinning-570', 'nvidia-fabricmanager-570']
    assert facts['__fabric_manager_unit_state']['load_state'] == 'not-found'


def _derived(name, installed, contents='', **inputs):
    variables = role_variables(ROLE, 'main.yml', 'RedHat.yml' if contents else 'Debian.yml')
    inputs = dict({'fabric_manager_driver_version': '570.195.03'}, **inputs)
    inputs.setdefault('__fabric_manager_branch', driver_branch(inputs['fabric_manager_driver_version']))
    variables.update(trust(inputs))
    variables['__fabric_manager_installed'] = installed
    variables['__fabric_manager_state'] = {'contents': {'/etc/dnf/plugins/versionlock.list': contents}}
    return plain(render(variables[name], variables))


@pytest.mark.parametrize('installed, missing', [
    ({}, ['nvidia-fabricmanager-570', 'libnvidia-nscq-570']),
    ({'nvidia-fabricmanager-570': _pkg('570.195.03-1'), 'libnvidia-nscq-570': _pkg('570.195.03-1')}, []),
    # Another version, with an epoch, or not held: only the version counts here.
    ({'nvidia-fabricmanager-570': _pkg('570.172.08-1'), 'libnvidia-nscq-570': _pkg('1:570.195.03-1', held=False)},
     ['nvidia-fabricmanager-570']),
])
def test_apt_runs_only_for_packages_missing_at_the_drivers_version(installed, missing):
    assert _derived('__fabric_manager_packages_missing', installed) == missing


def test_only_packages_not_held_yet_are_held():
    installed = {'nvidia-fabricmanager-570': _pkg('570.195.03-1'), 'libnvidia-nscq-570': _pkg('570.195.03-1', held=False)}
    assert _derived('__fabric_manager_held', installed) == ['nvidia-fabricmanager-570']


def test_dnf_locks_of_another_version_are_stale_and_the_unlocked_get_locked():
    locks = ('# Added by dnf versionlock\n'
             'nvidia-fabric-manager-0:570.172.08-1.*\n'
             'libnvidia-nscq-570-0:570.195.03-1.*\n'
             'nvidia-driver-3:570.195.03-1.el9.*\n')
    assert _derived('__fabric_manager_stale_locks', {}, locks) == ['nvidia-fabric-manager-0:570.172.08-1.*']
    assert _derived('__fabric_manager_unlocked', {}, locks) == ['nvidia-fabric-manager']
    # Without holds every own lock goes.
    assert _derived('__fabric_manager_stale_locks', {}, locks, fabric_manager_hold_packages=False) == [
        'nvidia-fabric-manager-0:570.172.08-1.*', 'libnvidia-nscq-570-0:570.195.03-1.*']


def _fabric(rc, stdout, stderr=''):
    """__fabric_manager_fabric_unsupported for a registered fabric query (the filter called directly: the
    templar of a unit test does not load collection plugins)."""
    result = {'rc': rc, 'stdout': stdout, 'stderr': stderr, 'stdout_lines': stdout.splitlines()}
    variables = role_variables(ROLE, 'main.yml')
    variables['__fabric_manager_fabric'] = result
    variables['__fabric_manager_fabric_failure'] = nvidia_smi_failure(result)
    return plain(render(variables['__fabric_manager_fabric_unsupported'], variables))


@pytest.mark.parametrize('rc, stdout, stderr, unsupported', [
    (0, '0, Completed, Success', '', False),
    (2, 'Field "fabric.state" is not a valid field to query.\n\n', '', True),
    (2, 'Field "fabric.status" is not a valid field to query.\n\n', '', True),
    # Not the fabric field, or a failure of nvidia-smi: not "not reported by this driver".
    (2, 'Field "bogus" is not a valid field to query.\n\n', '', False),
    (9, '', "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", False),
    (18, 'Failed to initialize NVML: Driver/library version mismatch', '', False),
    (124, '', '', False),
])
def test_only_an_unknown_fabric_field_counts_as_not_reported(rc, stdout, stderr, unsupported):
    assert _fabric(rc, stdout, stderr) is unsupported
