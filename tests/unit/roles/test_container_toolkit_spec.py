# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_toolkit role: the expressions of vars/main.yml that decide
the packages, the CVE gate and the CDI mechanism, rendered with Ansible's own
templar. The checks of the argument spec against the defaults, common to all
roles, are in test_role_argument_specs.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.container_toolkit_cves import FilterModule
from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import REPO_ROOT, load, plain, render, role_variables, trust

ROLE = 'container_toolkit'
# NVIDIA's "NVIDIA CORPORATION (Open Source Projects)" key (RELIABILITY-SECURITY-FACTS C.1).
NVIDIA_CTK_KEY = 'C95B321B61E88C1809C4F759DDCAE044F796ECB0'


def _load(*parts):
    return load(ROLE, *parts)


container_toolkit_cves = FilterModule().filters()['container_toolkit_cves']


def _render(name, **inputs):
    """A vars/main.yml (or vars/<OS>.yml) value with the defaults, overridden by inputs.

    The CVE list comes from the collection's filter (tested on its own in
    tests/unit/plugins/filter), called here directly: the templar of a unit
    test does not load collection plugins.
    """
    variables = role_variables(ROLE, 'main.yml', 'Debian.yml')
    variables.update(trust(inputs))
    version = str(inputs.get('container_toolkit_version', variables['container_toolkit_version'])).split('-', maxsplit=1)[0]
    variables['__container_toolkit_open_cves'] = container_toolkit_cves(version)
    return plain(render(variables[name], variables))


def test_the_default_version_is_free_of_published_cves_and_in_the_simulated_repository():
    assert container_toolkit_cves(_load('defaults', 'main.yml')['container_toolkit_version']) == []
    sys.path.insert(0, os.path.join(REPO_ROOT, 'tests', 'nvidia_sim', 'repo'))
    try:
        import catalog
    finally:
        sys.path.pop(0)
    assert _load('defaults', 'main.yml')['container_toolkit_version'] in catalog.CONTAINER_TOOLKIT_VERSIONS


def test_the_default_key_is_nvidias():
    assert _load('defaults', 'main.yml')['container_toolkit_repo_key_fingerprint'] == NVIDIA_CTK_KEY
    assert _render('__container_toolkit_repo_key_fingerprint', container_toolkit_repo_key_fingerprint='c95b 321b 61e8') == 'C95B321B61E8'


@pytest.mark.parametrize('version, package_version, refresh', [
    ('1.18.0', '1.18.0-1', True),
    ('1.18.0-1', '1.18.0-1', True),
    ('1.17.8', '1.17.8-1', False),
    ('1.17.8-2', '1.17.8-2', False),
    ('1.19.1', '1.19.1-1', True),
])
def test_package_version_and_cdi_mechanism(version, package_version, refresh):
    assert _render('__container_toolkit_package_version', container_toolkit_version=version) == package_version
    assert _render('__container_toolkit_cdi_refresh', container_toolkit_version=version) is refresh
    spec = '/var/run/cdi/nvidia.yaml' if refresh else '/etc/cdi/nvidia.yaml'
    assert _render('__container_toolkit_cdi_spec', container_toolkit_version=version) == spec


def test_an_accepted_vulnerable_version_gets_the_mitigation_on_top_of_the_settings():
    inputs = dict(container_toolkit_version='1.17.7', container_toolkit_accept_vulnerable_version=True,
                  container_toolkit_config_settings={'nvidia-container-runtime.log-level': 'debug'})
    assert _render('__container_toolkit_fixed_in', **inputs) == '1.17.8'
    assert _render('__container_toolkit_config_settings_effective', **inputs) == {
        'nvidia-container-runtime.log-level': 'debug',
        'features.disable-cuda-compat-lib-hook': True,
    }


def test_a_user_setting_cannot_switch_the_mitigation_off():
    inputs = dict(container_toolkit_version='1.17.7', container_toolkit_accept_vulnerable_version=True,
                  container_toolkit_config_settings={'features.disable-cuda-compat-lib-hook': False})
    assert _render('__container_toolkit_config_settings_effective', **inputs) == {
        'features.disable-cuda-compat-lib-hook': True}


@pytest.mark.parametrize('version, accept', [('1.17.7', False), ('1.18.0', True), ('1.18.0', False)])
def test_no_mitigation_without_an_accepted_vulnerable_version(version, accept):
    inputs = dict(container_toolkit_version=version, container_toolkit_accept_vulnerable_version=accept)
    assert _render('__container_toolkit_mitigation_settings', **inputs) == {}


def test_repository_urls_follow_the_base_url():
    inputs = dict(container_toolkit_repo_base_url='http://mirror.example/libnvidia-container/',
                  container_toolkit_repo_channel='experimental')
    assert _render('__container_toolkit_repo_url', **inputs) == 'http://mirror.example/libnvidia-container/experimental'
    assert _render('__container_toolkit_repo_key_url_effective', **inputs) == 'http://mirror.example/libnvidia-container/gpgkey'
    assert _render('__container_toolkit_repo_key_url_effective', container_toolkit_repo_key_url='http://k/key.asc') == 'http://k/key.asc'


@pytest.mark.parametrize('runtime, files', [
    ('docker', ['/etc/docker/daemon.json']),
    ('containerd', ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia.toml']),
    ('crio', ['/etc/crio/crio.conf', '/etc/crio/conf.d/99-nvidia.toml']),
])
def test_files_nvidia_ctk_may_write_per_runtime(runtime, files):
    assert _render('__container_toolkit_runtime_files', __container_toolkit_runtime=runtime) == files


@pytest.mark.parametrize('changed, services, restartable, absent', [
    (['docker', 'containerd'], {'docker.service': {'status': 'enabled'}}, ['docker'], ['containerd']),
    (['crio', 'crio'], {'crio.service': {'status': 'disabled'}}, ['crio'], []),
    (['containerd'], {'containerd.service': {'status': 'not-found'}}, [], ['containerd']),
    ([], {'docker.service': {'status': 'enabled'}}, [], []),
])
def test_handlers_restart_only_runtimes_with_a_service(changed, services, restartable, absent):
    inputs = dict(__container_toolkit_runtimes_changed=changed, ansible_facts={'services': services})
    assert _render('__container_toolkit_restartable', **inputs) == restartable
    assert _render('__container_toolkit_not_installed', **inputs) == absent


@pytest.mark.parametrize('os_file', ['Debian.yml', 'RedHat.yml'])
def test_platform_data_covers_both_architectures(os_file):
    data = _load('vars', os_file)
    assert set(data['__container_toolkit_repo_archs']) == {'x86_64', 'aarch64'}
