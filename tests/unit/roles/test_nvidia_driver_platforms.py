# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nvidia_driver role on every platform it supports (the checks of the
argument spec against the defaults, common to all roles, are in
test_role_argument_specs.py).

Ubuntu and RHEL cannot be converged here (their archives are unreachable), so
the role's own data is resolved the way the role resolves it: the vars file
chosen by the role's first_found list (vars/main.yml), loaded over the
defaults, and the role's expressions rendered with Ansible's templar for the
facts of each platform. The expected values are NVIDIA's documented ones
(repository URL per distribution and architecture, key file and full
fingerprint, driver package names or dnf module stream).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    TypedInputs, load, render, role_path, role_variables, trust)

NVIDIA = 'https://developer.download.nvidia.com/compute/cuda/repos'
# Full fingerprints: NVIDIA's cuda-repo-management SIGNATURES.md transcripts
# (3bf863cc, d42d0685) and the key file of the debian13 repository (8793f200).
DEB_KEY = 'EB693B3035CD5710E231E123A4B469963BF863CC'
DEBIAN13_KEY = '02182E60104FCDC26EAE1B8597A5D4CB8793F200'
RPM_KEY = '610C7B14E068A878070DA4E99CD0A493D42D0685'


def _facts(distribution, version, os_family, architecture='x86_64'):
    return {
        'distribution': distribution,
        'distribution_version': version,
        'distribution_major_version': version.split('.')[0],
        'os_family': os_family,
        'architecture': architecture,
        'kernel': '6.1.0-28-amd64',
    }


def _first_found(role, candidates):
    for candidate in candidates:
        if os.path.isfile(role_path(role, 'vars', candidate)):
            return candidate
    return None


class CudaRepository(object):
    """The repository role's cuda_platform entry point on one platform, fed the
    nvidia_driver inputs the way the driver's preflight passes them."""

    def __init__(self, facts, **driver_inputs):
        driver = dict(trust(load('nvidia_driver', 'defaults', 'main.yml')))
        driver.update(trust(driver_inputs))
        driver['__nvidia_driver_inputs'] = TypedInputs('nvidia_driver')
        self.variables = role_variables('repository', 'main.yml')
        self.variables['ansible_facts'] = facts
        for task in load('nvidia_driver', 'tasks', 'preflight.yml'):
            if task.get('ansible.builtin.include_role', {}).get('tasks_from') == 'cuda_platform':
                for name, value in task['vars'].items():
                    self.variables[name] = render(trust_as_template(value), dict(driver, ansible_facts=facts))
        self.vars_file = _first_found('repository', render(trust(self.variables['__repository_cuda_vars_files']),
                                                           self.variables))
        if self.vars_file:
            self.variables.update(trust(load('repository', 'vars', self.vars_file)))

    def render(self, name):
        return render(trust_as_template('{{ %s }}' % name), self.variables)

    @property
    def supported(self):
        return self.vars_file is not None and bool(self.render('__repository_cuda_supported'))


class Role(object):
    """The role's variables on one platform, as the role would see them."""

    def __init__(self, facts, **inputs):
        self.repository = CudaRepository(facts, **inputs)
        self.variables = role_variables('nvidia_driver', 'main.yml')
        self.variables['ansible_facts'] = facts
        self.variables.update(trust(inputs))
        self.variables['repository_cuda'] = {'package_manager': self.repository.render('__repository_cuda_package_manager')
                                             if self.repository.vars_file else ''}
        self.vars_file = _first_found('nvidia_driver', self.render('__nvidia_driver_os_vars_files'))
        if self.vars_file:
            # include_vars outranks role vars and defaults.
            self.variables.update(trust(load('nvidia_driver', 'vars', self.vars_file)))

    def render(self, name):
        return render(trust_as_template('{{ %s }}' % name), self.variables)

    @property
    def supported(self):
        return self.vars_file is not None and self.repository.supported

    def packages(self, flavour, branch):
        self.variables['nvidia_driver_flavour'] = flavour
        self.variables['nvidia_driver_branch'] = branch
        return list(self.render('__nvidia_driver_package_names'))


PLATFORMS = {
    'ubuntu2204-x86_64': (_facts('Ubuntu', '22.04', 'Debian'), 'cuda_Ubuntu.yml', 'ubuntu2204/x86_64', '3bf863cc.pub', DEB_KEY),
    'ubuntu2204-sbsa': (_facts('Ubuntu', '22.04', 'Debian', 'aarch64'), 'cuda_Ubuntu.yml', 'ubuntu2204/sbsa', '3bf863cc.pub',
                        DEB_KEY),
    'ubuntu2404-x86_64': (_facts('Ubuntu', '24.04', 'Debian'), 'cuda_Ubuntu.yml', 'ubuntu2404/x86_64', '3bf863cc.pub', DEB_KEY),
    'ubuntu2404-sbsa': (_facts('Ubuntu', '24.04', 'Debian', 'aarch64'), 'cuda_Ubuntu.yml', 'ubuntu2404/sbsa', '3bf863cc.pub',
                        DEB_KEY),
    'debian12-x86_64': (_facts('Debian', '12.8', 'Debian'), 'cuda_Debian_12.yml', 'debian12/x86_64', '3bf863cc.pub', DEB_KEY),
    'debian13-x86_64': (_facts('Debian', '13.1', 'Debian'), 'cuda_Debian_13.yml', 'debian13/x86_64', '8793F200.pub',
                        DEBIAN13_KEY),
    'rhel8-x86_64': (_facts('RedHat', '8.10', 'RedHat'), 'cuda_RedHat.yml', 'rhel8/x86_64', 'D42D0685.pub', RPM_KEY),
    'rhel9-x86_64': (_facts('RedHat', '9.4', 'RedHat'), 'cuda_RedHat.yml', 'rhel9/x86_64', 'D42D0685.pub', RPM_KEY),
    'rhel9-sbsa': (_facts('RedHat', '9.4', 'RedHat', 'aarch64'), 'cuda_RedHat.yml', 'rhel9/sbsa', 'D42D0685.pub', RPM_KEY),
    'rocky8-x86_64': (_facts('Rocky', '8.9', 'RedHat'), 'cuda_RedHat.yml', 'rhel8/x86_64', 'D42D0685.pub', RPM_KEY),
    'rocky9-sbsa': (_facts('Rocky', '9.5', 'RedHat', 'aarch64'), 'cuda_RedHat.yml', 'rhel9/sbsa', 'D42D0685.pub', RPM_KEY),
}


@pytest.mark.parametrize('platform', sorted(PLATFORMS))
def test_platform_resolves_to_nvidias_repository_and_key(platform):
    facts, vars_file, path, key_file, fingerprint = PLATFORMS[platform]
    role = Role(facts)
    assert role.repository.vars_file == vars_file
    assert role.supported
    assert role.repository.render('__repository_cuda_url') == '%s/%s' % (NVIDIA, path)
    assert role.repository.render('__repository_cuda_key_url') == '%s/%s/%s' % (NVIDIA, path, key_file)
    assert role.repository.render('__repository_cuda_key_fingerprint') == fingerprint


@pytest.mark.parametrize('platform', ['debian12-x86_64', 'debian13-x86_64'])
def test_debian_packages(platform):
    role = Role(PLATFORMS[platform][0])
    assert role.render('__nvidia_driver_package_manager') == 'apt'
    # nvidia-open exists from 560; the pieces are named so that they can be pinned.
    assert role.packages('open', '580') == ['nvidia-open', 'nvidia-driver', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms']
    assert role.packages('open', '550') == ['nvidia-driver', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms']
    assert role.packages('proprietary', '570') == ['cuda-drivers-570', 'nvidia-driver', 'nvidia-driver-cuda',
                                                   'nvidia-kernel-dkms']
    assert role.render('__nvidia_driver_version_probe_package') == 'nvidia-driver'
    assert role.render('__nvidia_driver_kernel_headers_package') == 'linux-headers-6.1.0-28-amd64'


@pytest.mark.parametrize('platform', ['ubuntu2204-x86_64', 'ubuntu2404-sbsa'])
def test_ubuntu_packages(platform):
    role = Role(PLATFORMS[platform][0])
    assert role.render('__nvidia_driver_package_manager') == 'apt'
    assert role.packages('open', '580') == ['nvidia-open-580', 'nvidia-driver-580-open']
    assert role.packages('open', '550') == ['nvidia-driver-550-open']
    assert role.packages('proprietary', '570') == ['cuda-drivers-570', 'nvidia-driver-570']
    assert role.render('__nvidia_driver_version_probe_package') == 'nvidia-driver-570'
    # From 590 the names drop the branch; the version carries it.
    assert role.packages('open', '590') == ['nvidia-open', 'nvidia-driver-open']
    assert role.packages('proprietary', '595') == ['cuda-drivers', 'nvidia-driver']
    assert role.render('__nvidia_driver_version_probe_package') == 'nvidia-driver'


@pytest.mark.parametrize('platform', ['rhel8-x86_64', 'rhel9-sbsa', 'rocky9-sbsa'])
def test_rhel_module_streams_and_packages(platform):
    role = Role(PLATFORMS[platform][0])
    assert role.render('__nvidia_driver_package_manager') == 'dnf'
    assert role.packages('open', '580') == ['nvidia-open']
    assert role.render('__nvidia_driver_module_stream') == 'nvidia-driver:580-open'
    assert role.packages('proprietary', '570') == ['cuda-drivers']
    assert role.render('__nvidia_driver_module_stream') == 'nvidia-driver:570-dkms'
    assert role.render('__nvidia_driver_kernel_headers_package') == 'kernel-devel-6.1.0-28-amd64'
    assert role.render('__nvidia_driver_initramfs_command') == ['/usr/bin/dracut', '--force', '--regenerate-all']


@pytest.mark.parametrize('facts', [
    _facts('Debian', '11.9', 'Debian'),
    _facts('Ubuntu', '20.04', 'Debian'),
    _facts('Ubuntu', '23.10', 'Debian'),
    _facts('Rocky', '10.0', 'RedHat'),
    _facts('Fedora', '40', 'RedHat'),
    _facts('Amazon', '2023', 'RedHat'),
    _facts('SLES', '15.5', 'Suse'),
], ids=lambda f: '%s-%s' % (f['distribution'], f['distribution_version']))
def test_unsupported_platforms_are_recognised(facts):
    assert not Role(facts).supported


@pytest.mark.parametrize('platform', ['debian12-x86_64', 'debian13-x86_64'])
def test_debian_repositories_have_no_arm64(platform):
    facts = dict(PLATFORMS[platform][0], architecture='aarch64')
    role = Role(facts)
    assert role.repository.render('__repository_cuda_arch') == ''


def test_a_mirror_overrides_url_key_and_fingerprint():
    mirror = 'https://mirror.example.com/nvidia/cuda/repos/ubuntu2404/x86_64/'
    role = Role(PLATFORMS['ubuntu2404-x86_64'][0], nvidia_driver_repo_url=mirror,
                nvidia_driver_repo_key_fingerprint='eb69 3b30 35cd 5710 e231  e123 a4b4 6996 3bf8 63cc')
    assert role.repository.render('__repository_cuda_url') == mirror.rstrip('/')
    # The key is taken from the mirror, and the fingerprint is compared normalised.
    assert role.repository.render('__repository_cuda_key_url') == mirror + '3bf863cc.pub'
    assert role.repository.render('__repository_cuda_key_fingerprint') == DEB_KEY


def test_base_url_moves_every_distribution():
    role = Role(PLATFORMS['rhel9-x86_64'][0], nvidia_driver_repo_base_url='https://developer.download.nvidia.cn/compute/cuda/repos')
    assert role.repository.render('__repository_cuda_url') == 'https://developer.download.nvidia.cn/compute/cuda/repos/rhel9/x86_64'


def test_installed_driver_packages_are_recognised_for_holds():
    role = Role(PLATFORMS['debian12-x86_64'][0])
    pattern = role.render('__nvidia_driver_held_name_regex')
    import re
    for name in ('nvidia-driver', 'libnvidia-ml1', 'libcuda1', 'cuda-drivers-570', 'firmware-nvidia-gsp'):
        assert re.match(pattern, name), name
    for name in ('cuda-toolkit-12-8', 'libcudnn9-cuda-12', 'linux-headers-amd64'):
        assert not re.match(pattern, name), name


def test_el_kernel_module_package_is_held_too():
    """Regression (first run on a Rocky-shaped host): the held names came from
    the unattended-upgrades patterns only, so kmod-nvidia-*-dkms was never
    versionlocked on EL. NVIDIA's guide locks *nvidia*<branch>*."""
    import re
    role = Role(PLATFORMS['rhel9-x86_64'][0])
    pattern = role.render('__nvidia_driver_held_name_regex')
    for name in ('kmod-nvidia-open-dkms', 'kmod-nvidia-latest-dkms', 'nvidia-kmod-common', 'nvidia-open'):
        assert re.match(pattern, name), name
    assert not re.match(pattern, 'kernel-devel')
    debian = Role(PLATFORMS['debian12-x86_64'][0]).render('__nvidia_driver_held_name_regex')
    assert not re.match(debian, 'kmod-nvidia-open-dkms')


def test_module_options_merge_hardening_under_the_users_options():
    role = Role(PLATFORMS['debian12-x86_64'][0], nvidia_driver_device_file_hardening=True,
                __nvidia_driver_device_file_gid='997',
                nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileMode': '0640', 'NVreg_EnableStreamMemOPs': 1},
                                              'nvidia_uvm': {'uvm_perf_prefetch_enable': 0}})
    options = role.render('__nvidia_driver_module_options_effective')
    assert options['nvidia'] == {'NVreg_DeviceFileUID': 0, 'NVreg_DeviceFileGID': '997', 'NVreg_DeviceFileMode': '0640',
                                 'NVreg_RestrictProfilingToAdminUsers': 1, 'NVreg_EnableStreamMemOPs': 1}
    assert options['nvidia_uvm'] == {'uvm_perf_prefetch_enable': 0}
    plain = Role(PLATFORMS['debian12-x86_64'][0])
    assert plain.render('__nvidia_driver_module_options_effective') == {}
