# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_toolkit role: argument specs against defaults, and the
expressions of vars/main.yml that decide the packages, the CVE gate and the
CDI mechanism, rendered with Ansible's own templar."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import sys

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.nvidia.plugins.filter.container_toolkit_cves import FilterModule

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = 'container_toolkit'
ROLE_DIR = os.path.join(REPO_ROOT, 'roles', ROLE)
PYTHON_TYPES = {'str': str, 'int': int, 'bool': bool, 'list': list, 'dict': dict, 'path': str}
# Results the role sets for later roles and plays (not inputs).
FACTS = {'container_toolkit_installed_version', 'container_toolkit_configured_runtimes', 'container_toolkit_cdi_spec'}
# NVIDIA's "NVIDIA CORPORATION (Open Source Projects)" key (RELIABILITY-SECURITY-FACTS C.1).
NVIDIA_CTK_KEY = 'C95B321B61E88C1809C4F759DDCAE044F796ECB0'

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


container_toolkit_cves = FilterModule().filters()['container_toolkit_cves']


def _render(name, **inputs):
    """A vars/main.yml (or vars/<OS>.yml) value with the defaults, overridden by inputs.

    The CVE list comes from the collection's filter (tested on its own in
    tests/unit/plugins/filter), called here directly: the templar of a unit
    test does not load collection plugins.
    """
    variables = dict(_trust(_load('defaults', 'main.yml')))
    variables.update(_trust(_load('vars', 'main.yml')))
    variables.update(_trust(_load('vars', 'Debian.yml')))
    variables.update(_trust(inputs))
    version = str(inputs.get('container_toolkit_version', variables['container_toolkit_version'])).split('-', maxsplit=1)[0]
    variables['__container_toolkit_open_cves'] = container_toolkit_cves(version)
    return _plain(Templar(loader=_LOADER, variables=variables).template(variables[name]))


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
        if value is None:
            # Only "detect on the host" inputs may be null, and then not be required.
            assert name == 'container_toolkit_runtimes' and 'default' not in spec, name
            continue
        expected = PYTHON_TYPES[spec['type']]
        assert isinstance(value, expected) and not (expected is int and isinstance(value, bool)), (name, value)
        if spec['type'] == 'list':
            assert all(isinstance(v, PYTHON_TYPES[spec['elements']]) for v in value), name
        if 'choices' in spec:
            assert value in spec['choices'], name
        assert value == _plain(spec['default']), name


def test_tasks_only_read_declared_inputs():
    declared = set(_load('defaults', 'main.yml')) | FACTS
    used = set()
    for sub in ('tasks', 'handlers', 'vars'):
        for name in os.listdir(os.path.join(ROLE_DIR, sub)):
            with open(os.path.join(ROLE_DIR, sub, name)) as handle:
                text = re.sub(r'(?m)^\s*tags:.*$', '', handle.read())
            # gpufleet.nvidia.container_toolkit_cves is a filter, not a variable.
            used |= set(re.findall(r'(?<![_\w.])(%s_[a-z0-9_]*[a-z0-9])' % ROLE, text))
    assert sorted(used - declared) == []


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
    assert all(k.startswith('__container_toolkit_') for k in data)
    assert set(data['__container_toolkit_repo_archs']) == {'x86_64', 'aarch64'}
