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
    installed = ['cuda-toolkit-12-8', 'cuda-toolkit-13-0', 'cuda-nvcc-13-0', 'cuda-cudart-13-0', 'libcublas-13-0',
                 'cuda-compat-13-0', 'cuda-toolkit-13-0-config-common', 'cuda-toolkit-13-config-common',
                 'cuda-toolkit-config-common', 'cuda-nvcc-12-8', 'cuda-toolkit-12-8-config-common',
                 'nvidia-driver', 'libcudnn9-cuda-13']
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8'])
    # The state read (host_state_info packages); a package removed with its configuration left is not installed.
    records = dict((name, {'version': '1', 'installed': True, 'held': False, 'status': 'installed'}) for name in installed)
    records['libcublas-13-1'] = {'version': '1', 'installed': False, 'held': False, 'status': 'config-files'}
    variables['__cuda_toolkit_state'] = trust({'packages': records})
    assert plain(render(variables['__cuda_toolkit_unlisted'], variables)) == ['13.0']
    assert plain(render(variables['__cuda_toolkit_remove_packages'], variables)) == [
        'cuda-compat-13-0', 'cuda-cudart-13-0', 'cuda-nvcc-13-0', 'cuda-toolkit-13-0',
        'cuda-toolkit-13-0-config-common', 'libcublas-13-0']


# The link groups as the state read returns them: the link in
# /etc/alternatives (the selected member) and update-alternatives' record
# (mode, link, follower name and link lines, empty line, then per member its
# path, its priority and one line per follower).
ADMIN = '/var/lib/dpkg/alternatives/'
LINKS = '/etc/alternatives/'


def _link(target):
    return {'exists': True, 'type': 'link', 'target': target}


def _directory():
    return {'exists': True, 'type': 'directory'}


def _toolkit_state(contents, files, existing):
    files = dict({LINKS + 'cuda': {'exists': False}, LINKS + 'cuda-12': {'exists': False},
                  LINKS + 'cuda-13': {'exists': False}}, **files)
    return {'packages': {}, 'files': files, 'contents': contents,
            'globs': {'/usr/local/cuda-*': existing, '/var/lib/apt/lists/*_Packages*': []}}


def _alternatives(variables, state):
    variables['__cuda_toolkit_state_read'] = variables['__cuda_toolkit_state'] = trust(state)
    tasks = load('cuda_toolkit', 'tasks', 'state.yml')
    expression = [t for t in tasks if t['name'] == 'Keep what was read and work out the link groups'][0]
    alternatives = plain(render(trust(expression['ansible.builtin.set_fact']['__cuda_toolkit_alternatives']), variables))
    variables['__cuda_toolkit_alternatives'] = trust(alternatives)
    return alternatives


def test_cuda_toolkit_reads_the_link_groups_from_their_records():
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8', '13.0'])
    variables.update(trust(load('cuda_toolkit', 'vars', 'Debian_12.yml')))
    state = _toolkit_state(
        contents={ADMIN + 'cuda': 'manual\n/usr/local/cuda\n\n/usr/local/cuda-12.8\n1208\n/usr/local/cuda-13.0\n1300\n\n',
                  # A follower link: each member has one more line (empty where it has none).
                  ADMIN + 'cuda-12': 'auto\n/usr/local/cuda-12\nnvcc-12\n/usr/bin/nvcc-12\n\n'
                                     '/usr/local/cuda-12.8\n1208\n/usr/local/cuda-12.8/bin/nvcc\n/opt/cuda-12.9\n1209\n\n\n',
                  ADMIN + 'cuda-13': None},
        files={LINKS + 'cuda': _link('/usr/local/cuda-13.0'), LINKS + 'cuda-12': _link('/opt/cuda-12.9')},
        existing=[])
    assert _alternatives(variables, state) == {
        'cuda': {'mode': 'manual', 'members': ['/usr/local/cuda-12.8', '/usr/local/cuda-13.0'], 'current': '/usr/local/cuda-13.0'},
        'cuda-12': {'mode': 'auto', 'members': ['/usr/local/cuda-12.8', '/opt/cuda-12.9'], 'current': '/opt/cuda-12.9'},
        'cuda-13': {'mode': '', 'members': [], 'current': ''},
    }


def test_cuda_toolkit_registers_missing_members_and_drops_gone_ones():
    # 12.8 and 13.0 listed and installed; 12.4 was removed by hand but is still a member of "cuda" and "cuda-12";
    # /opt/cuda-12.9 was registered by hand and exists; 13.0 is in no group yet.
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8', '13.0'])
    variables.update(trust(load('cuda_toolkit', 'vars', 'Debian_12.yml')))
    state = _toolkit_state(
        contents={ADMIN + 'cuda': 'manual\n/usr/local/cuda\n\n/usr/local/cuda-12.8\n1208\n/usr/local/cuda-12.4\n1204\n\n',
                  ADMIN + 'cuda-12': 'auto\n/usr/local/cuda-12\n\n/usr/local/cuda-12.4\n1204\n/opt/cuda-12.9\n1209\n\n',
                  ADMIN + 'cuda-13': None},
        files={'/usr/local/cuda-12.8': _directory(), '/usr/local/cuda-13.0': _directory(),
               LINKS + 'cuda': _link('/usr/local/cuda-12.8')},
        existing=['/usr/local/cuda-12', '/usr/local/cuda-12.8', '/usr/local/cuda-13.0'])
    _alternatives(variables, state)
    assert plain(render(variables['__cuda_toolkit_present'], variables)) == ['12.8', '13.0']
    assert plain(render(variables['__cuda_toolkit_alt_members_elsewhere'], variables)) == ['/opt/cuda-12.9']
    variables['__cuda_toolkit_alt_elsewhere'] = trust({'files': {'/opt/cuda-12.9': _directory()}})
    assert plain(render(variables['__cuda_toolkit_alt_register'], variables)) == [
        {'group': 'cuda', 'path': '/usr/local/cuda-13.0', 'priority': 1300},
        {'group': 'cuda-12', 'path': '/usr/local/cuda-12.8', 'priority': 1208},
        {'group': 'cuda-13', 'path': '/usr/local/cuda-13.0', 'priority': 1300}]
    assert plain(render(variables['__cuda_toolkit_alt_drop'], variables)) == [
        {'group': 'cuda', 'path': '/usr/local/cuda-12.4'}, {'group': 'cuda-12', 'path': '/usr/local/cuda-12.4'}]


def test_cuda_toolkit_looks_after_the_link_group_of_a_removed_major():
    variables = _cuda_toolkit_vars(cuda_toolkit_versions=['12.8'])
    assert plain(render(variables['__cuda_toolkit_alternative_groups'], variables)) == ['cuda', 'cuda-12']
    variables['__cuda_toolkit_removed'] = trust(['13.0'])
    assert plain(render(variables['__cuda_toolkit_alternative_groups'], variables)) == ['cuda', 'cuda-12', 'cuda-13']


@pytest.mark.parametrize('remove_unlisted, extra', [(False, []), (True, ['lib*-[0-9]*-[0-9]*', 'gds-tools-*', 'nsight-*'])])
def test_cuda_toolkit_reads_the_component_packages_only_to_remove_them(remove_unlisted, extra):
    variables = _cuda_toolkit_vars(cuda_toolkit_remove_unlisted=remove_unlisted)
    patterns = plain(render(variables['__cuda_toolkit_state_packages'], variables))
    assert patterns[0] == 'cuda-*' and 'libcuda1*' in patterns and 'nvidia-driver*' in patterns
    assert [p for p in patterns if p in ('lib*-[0-9]*-[0-9]*', 'gds-tools-*', 'nsight-*')] == extra


def _installed(**versions):
    return dict((name, {'version': version, 'installed': True, 'held': name.endswith('held'), 'status': 'installed'})
                for name, version in versions.items())


@pytest.mark.parametrize('inputs, installed, missing', [
    # Unversioned: any installed version will do.
    ({}, {}, ['libcudnn9-cuda-12']),
    ({}, {'libcudnn9-cuda-12': '9.8.0.87-1'}, []),
    ({'cudnn_dev': True}, {'libcudnn9-cuda-12': '9.13.0.50-1'}, ['cudnn9-cuda-12']),
    # Versioned: only a matching version will do.
    ({'cudnn_version': '9.10'}, {'libcudnn9-cuda-12': '9.10.2.21-1'}, []),
    ({'cudnn_version': '9.10'}, {'libcudnn9-cuda-12': '9.13.0.50-1'}, ['libcudnn9-cuda-12']),
    ({'cudnn_version': '9.10', 'cudnn_dev': True}, {'libcudnn9-cuda-12': '9.10.2.21-1', 'libcudnn9-dev-cuda-12': '9.8.0.87-1'},
     ['libcudnn9-dev-cuda-12']),
    ({'cudnn_version': '9.10.2.21'}, {'libcudnn9-cuda-12': '1:9.10.2.21-1'}, []),
    ({'cudnn_version': '9.10.2.21-2'}, {'libcudnn9-cuda-12': '9.10.2.21-1'}, ['libcudnn9-cuda-12']),
])
def test_cudnn_installs_only_what_is_missing(inputs, installed, missing):
    variables = _cudnn_vars(**inputs)
    variables['__cudnn_state'] = trust({'packages': _installed(**installed), 'files': {}})
    assert plain(render(variables['__cudnn_packages_missing'], variables)) == missing


def test_cudnn_knows_its_packages_and_their_holds():
    variables = _cudnn_vars()
    packages = _installed(**{'libcudnn9-cuda-12': '9.10.2.21-1', 'libcudnn9-dev-cuda-12': '9.10.2.21-1',
                             'libcudnn9-cuda-13': '9.10.2.21-1'})
    packages['libcudnn9-cuda-12']['held'] = True
    packages['libcudnn9-static-cuda-12'] = {'version': '9.10.2.21-1', 'installed': False, 'held': True, 'status': 'config-files'}
    variables['__cudnn_state'] = trust({'packages': packages, 'files': {}})
    assert plain(render(variables['__cudnn_installed_ours'], variables)) == ['libcudnn9-cuda-12', 'libcudnn9-dev-cuda-12']
    assert plain(render(variables['__cudnn_held_ours'], variables)) == ['libcudnn9-cuda-12']
    assert plain(render(variables['__cudnn_installed_version'], variables)) == '9.10.2.21'


@pytest.mark.parametrize('files, toolkit', [
    ({'/usr/local/cuda': _link('/etc/alternatives/cuda'), '/etc/alternatives/cuda': _link('/usr/local/cuda-12.8')}, '12.8'),
    ({'/usr/local/cuda': _link('cuda-13.0'), '/etc/alternatives/cuda': {'exists': False}}, '13.0'),
    # A runfile install's directory, or nothing: no default toolkit.
    ({'/usr/local/cuda': _directory(), '/etc/alternatives/cuda': {'exists': False}}, ''),
    ({'/usr/local/cuda': {'exists': False}, '/etc/alternatives/cuda': {'exists': False}}, ''),
])
def test_cudnn_follows_usr_local_cuda_to_the_default_toolkit(files, toolkit):
    variables = _cudnn_vars()
    variables['__cudnn_state'] = trust({'packages': {}, 'files': files})
    assert plain(render(variables['__cudnn_toolkit_from_link'], variables)) == toolkit


MADISON = """libcudnn9-cuda-12 | 9.13.0.50-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages
libcudnn9-cuda-12 | 9.10.2.21-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages
libcudnn9-dev-cuda-12 | 9.10.2.21-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages
"""


@pytest.mark.parametrize('inputs, unavailable', [
    ({'cudnn_version': '9.10', 'cudnn_dev': True}, []),
    ({'cudnn_version': '9.13.0.50'}, []),
    ({'cudnn_version': '9.13', 'cudnn_dev': True}, ['libcudnn9-dev-cuda-12 9.13 (offered: 9.10.2.21-1)']),
    ({'cudnn_dev': True}, ['cudnn9-cuda-12 (in no configured repository)']),
])
def test_cudnn_says_what_the_repositories_cannot_provide(inputs, unavailable):
    variables = _cudnn_vars(**inputs)
    variables['__cudnn_madison'] = trust({'stdout': MADISON})
    block = [t for t in load('cudnn', 'tasks', 'install_apt.yml') if t['name'] == 'Install cuDNN'][0]['block']
    expression = [t for t in block if t['name'] == 'Record what the repositories cannot provide'][0]
    assert plain(render(trust(expression['ansible.builtin.set_fact']['__cudnn_unavailable']), variables)) == unavailable
