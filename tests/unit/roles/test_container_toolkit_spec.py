# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_toolkit role: the expressions of vars/main.yml that decide
the packages, the CVE gate, the repository, whether nvidia-ctk must configure
a runtime and the CDI mechanism, rendered with Ansible's own templar. The
runtime decision is checked against what the simulated nvidia-ctk writes, so
that a configured runtime is recognised as such (no change on a rerun). The
checks of the argument spec against the defaults, common to all roles, are in
test_role_argument_specs.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import sys
import tomllib

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.container_toolkit_cves import FilterModule
from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import REPO_ROOT, load, plain, render, role_variables, trust
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SimHost

ROLE = 'container_toolkit'
# NVIDIA's "NVIDIA CORPORATION (Open Source Projects)" key (RELIABILITY-SECURITY-FACTS C.1).
NVIDIA_CTK_KEY = 'C95B321B61E88C1809C4F759DDCAE044F796ECB0'
PACKAGES = ('nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools', 'libnvidia-container1')


def _load(*parts):
    return load(ROLE, *parts)


_filter = FilterModule().filters()['container_toolkit_cves']
# The role's CVE table (vars/cves.yml), which preflight loads before the check.
CVES = plain(_load('vars', 'cves.yml')['__container_toolkit_cves_data'])


def container_toolkit_cves(version):
    return _filter(version, CVES)


def _render(name, os_file='Debian.yml', **inputs):
    """A vars/main.yml (or vars/<OS>.yml) value with the defaults, overridden by inputs.

    The CVE list comes from the collection's filter (tested on its own in
    tests/unit/plugins/filter) over the role's table, called here directly:
    the templar of a unit test does not load collection plugins.
    """
    variables = role_variables(ROLE, 'main.yml', os_file)
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


@pytest.mark.parametrize('os_file, architecture, url', [
    ('Debian.yml', 'x86_64', 'http://m.example/lnc/stable/deb/amd64'),
    ('Debian.yml', 'aarch64', 'http://m.example/lnc/stable/deb/arm64'),
    # dnf expands $basearch itself.
    ('RedHat.yml', 'x86_64', 'http://m.example/lnc/stable/rpm/$basearch'),
])
def test_repository_source_url_per_package_manager(os_file, architecture, url):
    inputs = dict(container_toolkit_repo_base_url='http://m.example/lnc', ansible_facts={'architecture': architecture})
    assert _render('__container_toolkit_repo_source_url', os_file=os_file, **inputs) == url


@pytest.mark.parametrize('os_file, installed, missing', [
    ('Debian.yml', {}, list(PACKAGES)),
    ('Debian.yml', dict((name, '1.18.0-1') for name in PACKAGES), []),
    # Another revision is another version for dpkg.
    ('Debian.yml', {'nvidia-container-toolkit': '1.18.0-1.1', 'nvidia-container-toolkit-base': '1.17.8-1',
                    'libnvidia-container-tools': '1.18.0-1', 'libnvidia-container1': '1.18.0-1'},
     ['nvidia-container-toolkit', 'nvidia-container-toolkit-base']),
    # rpm releases may carry the distribution.
    ('RedHat.yml', {'nvidia-container-toolkit': '1.18.0-1.el9', 'nvidia-container-toolkit-base': '1.18.0-1',
                    'libnvidia-container-tools': '1.18.0-1', 'libnvidia-container1': '1.18.0-10'}, ['libnvidia-container1']),
])
def test_packages_missing_at_the_requested_version(os_file, installed, missing):
    assert _render('__container_toolkit_packages_missing', os_file=os_file, container_toolkit_version='1.18.0',
                   __container_toolkit_installed_packages=installed) == missing


def test_version_locks_from_versionlock_list():
    locks = ('# Added lock on Tue Dec  1 09:00:00 2026\n'
             'nvidia-container-toolkit-0:1.17.8-1.*\n'
             'nvidia-container-toolkit-base-0:1.18.0-1.*\n'
             'kernel-0:5.14.0-1.el9.*\n')
    inputs = dict(__container_toolkit_state={'contents': {'/etc/dnf/plugins/versionlock.list': locks}},
                  container_toolkit_version='1.18.0')
    assert _render('__container_toolkit_stale_locks', os_file='RedHat.yml', **inputs) == [
        'nvidia-container-toolkit-0:1.17.8-1.*']
    assert _render('__container_toolkit_unlocked', os_file='RedHat.yml', **inputs) == [
        'nvidia-container-toolkit', 'libnvidia-container-tools', 'libnvidia-container1']
    # Without holds every lock of the toolkit goes.
    assert _render('__container_toolkit_stale_locks', os_file='RedHat.yml', container_toolkit_hold_packages=False,
                   **inputs) == ['nvidia-container-toolkit-0:1.17.8-1.*', 'nvidia-container-toolkit-base-0:1.18.0-1.*']


@pytest.mark.parametrize('runtime, files', [
    ('docker', ['/etc/docker/daemon.json']),
    ('containerd', ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia.toml']),
    ('crio', ['/etc/crio/crio.conf', '/etc/crio/conf.d/99-nvidia.toml']),
])
def test_files_nvidia_ctk_may_write_per_runtime(runtime, files):
    assert _render('__container_toolkit_runtime_files')[runtime] == files


@pytest.mark.parametrize('changed, units, restartable, absent', [
    (['docker', 'containerd'], {'docker.service': {'load_state': 'loaded'}, 'containerd.service': {'load_state': 'not-found'}},
     ['docker'], ['containerd']),
    (['crio', 'crio'], {'crio.service': {'load_state': 'loaded'}}, ['crio'], []),
    # Not a systemd host: nothing to restart.
    (['containerd'], {}, [], ['containerd']),
    ([], {'docker.service': {'load_state': 'loaded'}}, [], []),
])
def test_handlers_restart_only_runtimes_with_a_service(changed, units, restartable, absent):
    inputs = dict(__container_toolkit_runtimes_changed=changed, __container_toolkit_state={'units': units})
    assert _render('__container_toolkit_restartable', **inputs) == restartable
    assert _render('__container_toolkit_not_installed', **inputs) == absent


@pytest.mark.parametrize('os_file', ['Debian.yml', 'RedHat.yml'])
def test_platform_data_covers_both_architectures(os_file):
    data = _load('vars', os_file)
    assert set(data['__container_toolkit_repo_archs']) == {'x86_64', 'aarch64'}


# --- Runtime configuration against the simulated nvidia-ctk ---------------------

SCENARIO_FILES = os.path.join(REPO_ROOT, 'molecule', 'nvidia_driver', 'files')
RUNTIME_FILES = {
    'docker': ['/etc/docker/daemon.json'],
    'containerd': ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia.toml'],
    'crio': ['/etc/crio/crio.conf', '/etc/crio/conf.d/99-nvidia.toml'],
}
CRI = 'io.containerd.grpc.v1.cri'


def _sim_host(tmp_path, version):
    """A root with the scenario's daemon.json and containerd config.toml and toolkit <version>."""
    host = SimHost(str(tmp_path))
    host.write('usr/share/nvidia-sim/container-toolkit-version', version + '\n')
    for name, dest in (('daemon.json', 'etc/docker/daemon.json'), ('config.toml', 'etc/containerd/config.toml')):
        os.makedirs(os.path.dirname(host.path(dest)), exist_ok=True)
        shutil.copy(os.path.join(SCENARIO_FILES, name), host.path(dest))
    return host


def _docs(host, runtimes):
    """What state.yml parses: every file of the runtimes, {} when absent."""
    docs = {}
    for runtime in runtimes:
        for path in RUNTIME_FILES[runtime]:
            target = host.path(path.lstrip('/'))
            if not os.path.exists(target):
                docs[path] = {}
                continue
            with open(target) as handle:
                text = handle.read()
            docs[path] = (json.loads(text) if path.endswith('.json') else tomllib.loads(text)) if text.strip() else {}
    return docs


def _status(docs, runtimes, version, set_as_default):
    return _render('__container_toolkit_runtime_status', __container_toolkit_runtimes=runtimes,
                   __container_toolkit_runtime_docs=docs, container_toolkit_version=version,
                   container_toolkit_accept_vulnerable_version=True, container_toolkit_set_as_default=set_as_default)


def _configure(host, runtime, set_as_default):
    result = host.run('nvidia-ctk', 'runtime', 'configure', '--runtime=' + runtime,
                      *(['--set-as-default'] if set_as_default else []))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize('version', ['1.18.0', '1.17.7'])
@pytest.mark.parametrize('set_as_default', [False, True])
@pytest.mark.parametrize('runtime', ['docker', 'containerd', 'crio'])
def test_what_nvidia_ctk_writes_counts_as_configured(tmp_path, runtime, version, set_as_default):
    host = _sim_host(tmp_path, version)
    assert _status(_docs(host, [runtime]), [runtime], version, set_as_default)[runtime]['configured'] is False
    _configure(host, runtime, set_as_default)
    status = _status(_docs(host, [runtime]), [runtime], version, set_as_default)[runtime]
    assert status['configured'] is True, status
    assert 'nvidia' in status['runtimes']
    drop_in = version == '1.18.0' and runtime != 'docker'
    assert status['target'] == RUNTIME_FILES[runtime][1 if drop_in else 0]


def test_a_runtime_configured_without_the_default_is_reconfigured_for_it(tmp_path):
    host = _sim_host(tmp_path, '1.18.0')
    for runtime in ('docker', 'containerd'):
        _configure(host, runtime, False)
    status = _status(_docs(host, ['docker', 'containerd']), ['docker', 'containerd'], '1.18.0', True)
    assert [status[r]['configured'] for r in ('docker', 'containerd')] == [False, False]


def test_containerd_without_the_import_of_the_drop_in_is_reconfigured(tmp_path):
    host = _sim_host(tmp_path, '1.18.0')
    _configure(host, 'containerd', False)
    docs = _docs(host, ['containerd'])
    docs['/etc/containerd/config.toml'].pop('imports')
    status = _status(docs, ['containerd'], '1.18.0', False)['containerd']
    assert status['configured'] is False
    # containerd does not read a drop-in it does not import.
    assert status['files'] == ['/etc/containerd/config.toml'] and status['runtimes'] == ['runc']


def test_nvidia_follows_the_cgroup_driver_of_runc(tmp_path):
    host = _sim_host(tmp_path, '1.18.0')
    _configure(host, 'containerd', False)
    docs = _docs(host, ['containerd'])
    docs['/etc/containerd/config.toml']['plugins'][CRI]['containerd']['runtimes']['runc']['options']['SystemdCgroup'] = False
    assert _status(docs, ['containerd'], '1.18.0', False)['containerd']['configured'] is False


def test_a_nvidia_runtime_with_another_binary_is_reconfigured(tmp_path):
    host = _sim_host(tmp_path, '1.18.0')
    _configure(host, 'docker', False)
    docs = _docs(host, ['docker'])
    docs['/etc/docker/daemon.json']['runtimes']['nvidia']['path'] = '/opt/old/nvidia-container-runtime'
    assert _status(docs, ['docker'], '1.18.0', False)['docker']['configured'] is False


# --- Toolkit settings and CDI ------------------------------------------------------

@pytest.mark.parametrize('doc, wrong', [
    ({}, ['nvidia-container-runtime.log-level = "debug"', 'features.disable-cuda-compat-lib-hook = true']),
    ({'nvidia-container-runtime': {'log-level': 'debug'}, 'features': {'disable-cuda-compat-lib-hook': True}}, []),
    ({'nvidia-container-runtime': {'log-level': 'info'}, 'features': {'disable-cuda-compat-lib-hook': True}},
     ['nvidia-container-runtime.log-level = "debug"']),
])
def test_settings_config_toml_lacks(doc, wrong):
    inputs = dict(container_toolkit_version='1.17.7', container_toolkit_accept_vulnerable_version=True,
                  container_toolkit_config_settings={'nvidia-container-runtime.log-level': 'debug'},
                  __container_toolkit_config_doc=doc)
    assert _render('__container_toolkit_config_wrong', **inputs) == wrong


def test_a_list_setting_given_as_text_matches_the_toml_list():
    inputs = dict(container_toolkit_config_settings={'nvidia-container-runtime.runtimes': 'runc,crun'},
                  __container_toolkit_config_doc={'nvidia-container-runtime': {'runtimes': ['runc', 'crun']}})
    assert _render('__container_toolkit_config_wrong', **inputs) == []
    assert _render('__container_toolkit_set_args', **inputs) == ['--set', 'nvidia-container-runtime.runtimes=runc,crun']


def _gpu_info(mig_devices):
    gpus = [{'index': 0, 'uuid': 'GPU-a', 'mig_mode_current': bool(mig_devices)},
            {'index': 1, 'uuid': 'GPU-b', 'mig_mode_current': None}]
    return {'driver': {'version': '570.195.03'}, 'gpus': gpus, 'gpu_count': 2, 'mig_devices': mig_devices}


def test_mig_layout_groups_the_mig_devices_by_gpu():
    devices = [{'gpu_index': 0, 'gpu_uuid': 'GPU-a', 'gpu_instance_id': 3, 'compute_instance_id': 0,
                'memory_total_mib': 19968, 'multiprocessor_count': 14, 'memory_used_mib': 12}]
    assert _render('__container_toolkit_mig_layout', __container_toolkit_gpu_info=_gpu_info(devices)) == [
        {'uuid': 'GPU-a', 'mig': True, 'devices': [[3, 0, 19968, 14]]},
        {'uuid': 'GPU-b', 'mig': None, 'devices': []}]


def test_cdi_state_records_the_gpus_the_toolkit_and_its_configuration():
    inputs = dict(__container_toolkit_gpu_info=_gpu_info([]), container_toolkit_installed_version='1.18.0-1',
                  __container_toolkit_state={'contents': {'/etc/nvidia-container-runtime/config.toml': 'disable-require = false\n'}})
    wanted = _render('__container_toolkit_cdi_wanted', **inputs)
    assert wanted['spec'] == '/var/run/cdi/nvidia.yaml'
    assert wanted['gpu_uuids'] == ['GPU-a', 'GPU-b'] and wanted['driver_version'] == '570.195.03'
    # The checksum of the file as sha256sum prints it (what the state file always recorded).
    assert wanted['toolkit_config_sha256'] == '29d20b8907d52fc767cd4d0fcbc771770f6a280a2bc707992dba0b454bc80ab7'
    missing = dict(inputs)
    missing['__container_toolkit_state'] = {'contents': {'/etc/nvidia-container-runtime/config.toml': None}}
    assert _render('__container_toolkit_cdi_wanted', **missing)['toolkit_config_sha256'] == ''
