# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_driver_source: distribution, resolved the way the role resolves it:
vars/<OS>.yml, then vars/distribution_<distribution>.yml over it (as
preflight's include_vars does), rendered with Ansible's templar for the facts
of each platform. The expected names are the distributions' own: Debian's
nvidia-graphics-drivers and nvidia-open-gpu-kernel-modules binaries
(bookworm 535, trixie 550), Ubuntu's server branches
(nvidia-driver-<branch>-server[-open], linux-modules-nvidia-<branch>-server[-open]-<flavour>,
nvidia-dkms-<branch>-server[-open]). Ubuntu's archive cannot be reached here,
so its naming is checked against package lists as apt-cache pkgnames prints them.

The rules of preflight for the source are evaluated as the role's
check_inputs task evaluates them (conditions rendered with the templar).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import load, plain, render, role_path, trust
from ansible_collections.gpufleet.nvidia.tests.unit.roles.test_nvidia_driver_platforms import Role, _facts


class DistributionRole(Role):
    """The role with nvidia_driver_source distribution (or another source) on one platform."""

    def __init__(self, facts, state=None, names=None, **inputs):
        inputs.setdefault('nvidia_driver_source', 'distribution')
        super(DistributionRole, self).__init__(facts, **inputs)
        self.distribution_file = None
        if self.render('nvidia_driver_source') == 'distribution':
            name = self.render('__nvidia_driver_source_vars_file')
            if os.path.isfile(role_path('nvidia_driver', 'vars', name)):
                self.distribution_file = name
                self.variables.update(trust(load('nvidia_driver', 'vars', name)))
        self.variables['__nvidia_driver_state'] = state or {'contents': {}, 'files': {}, 'globs': {}}
        if names is not None:
            # set_fact of tasks/distribution_offer.yml.
            self.variables['__nvidia_driver_distribution_names'] = names

    def value(self, name):
        return plain(self.render(name))

    def packages(self, flavour=None, branch=None):
        if flavour:
            self.variables['nvidia_driver_flavour'] = flavour
        if branch:
            self.variables['nvidia_driver_branch'] = branch
        return plain(self.render('__nvidia_driver_package_names'))


def _debian(major, release, kernel='6.1.0-28-amd64'):
    facts = _facts('Debian', '%s.1' % major, 'Debian')
    facts.update(distribution_release=release, kernel=kernel)
    return facts


def _ubuntu(version, kernel):
    facts = _facts('Ubuntu', version, 'Debian')
    facts.update(distribution_release={'22.04': 'jammy', '24.04': 'noble'}[version], kernel=kernel)
    return facts


DEBIAN = {'12': _debian('12', 'bookworm'), '13': _debian('13', 'trixie', '6.12.48+deb13-amd64')}
COMMON = ['firmware-nvidia-gsp', 'nvidia-smi', 'libnvidia-ml1', 'libcuda1', 'nvidia-persistenced']


def _rules(task_name):
    for task in load('nvidia_driver', 'tasks', 'preflight.yml') + load('nvidia_driver', 'tasks', 'distribution_offer.yml'):
        if task.get('name') == task_name:
            return task['gpufleet.nvidia.check_inputs']['rules']
        for inner in task.get('block', []):
            if inner.get('name') == task_name:
                return inner['gpufleet.nvidia.check_inputs']['rules']
    raise KeyError(task_name)


def _broken(role, task_name):
    """(variable, message) of each rule of the check_inputs task that the role's variables break."""
    broken = []
    for rule in _rules(task_name):
        conditions = rule.get('when', [])
        conditions = conditions if isinstance(conditions, list) else [conditions]
        if not all(role.render('(%s) | bool' % c) for c in conditions):
            continue
        that = rule['that'] if isinstance(rule['that'], list) else [rule['that']]
        if not all(role.render('(%s) | bool' % c) for c in that):
            broken.append((rule['var'], ' '.join(str(render(trust_as_template(rule['msg']), role.variables)).split())))
    return broken


# --- Debian -----------------------------------------------------------------

@pytest.mark.parametrize('major,branch', [('12', '535'), ('13', '550')])
def test_debian_packages_of_each_flavour(major, branch):
    role = DistributionRole(DEBIAN[major], nvidia_driver_branch=branch)
    assert role.distribution_file == 'distribution_Debian.yml'
    assert role.value('__nvidia_driver_distribution_branch') == branch
    assert role.packages('proprietary') == ['nvidia-kernel-dkms'] + COMMON
    assert role.value('__nvidia_driver_version_probe_package') == 'nvidia-kernel-dkms'
    assert role.packages('open') == ['nvidia-open-kernel-dkms'] + COMMON
    assert role.value('__nvidia_driver_version_probe_package') == 'nvidia-open-kernel-dkms'
    # Never the CUDA repository's meta packages, nor the X server driver.
    assert not [name for name in role.packages() if name.startswith('cuda-') or name == 'nvidia-driver']
    assert role.value('__nvidia_driver_dkms_packages') == ['dkms']
    assert role.value('__nvidia_driver_builds_modules') is True


def test_debian_persistenced_is_not_pinned_to_the_driver_version():
    role = DistributionRole(DEBIAN['12'], nvidia_driver_branch='535', nvidia_driver_flavour='proprietary')
    role.variables['__nvidia_driver_target_version'] = '535.261.03'
    specs = role.value('__nvidia_driver_package_specs')
    assert specs == ['nvidia-kernel-dkms=535.261.03-*', 'firmware-nvidia-gsp=535.261.03-*', 'nvidia-smi=535.261.03-*',
                     'libnvidia-ml1=535.261.03-*', 'libcuda1=535.261.03-*', 'nvidia-persistenced']
    # Installed at its own version it is present; the driver packages are at the driver's.
    installed = dict((name, {'version': '535.261.03-1~deb12u1', 'installed': True})
                     for name in ['nvidia-kernel-dkms', 'firmware-nvidia-gsp', 'nvidia-smi', 'libnvidia-ml1', 'libcuda1'])
    installed['nvidia-persistenced'] = {'version': '535.171.04-1~deb12u1', 'installed': True}
    role.variables['__nvidia_driver_installed_packages'] = installed
    assert role.value('__nvidia_driver_packages_missing') == []
    del installed['nvidia-persistenced']
    assert role.value('__nvidia_driver_packages_missing') == ['nvidia-persistenced']
    installed['nvidia-smi']['version'] = '535.247.01-1~deb12u1'
    assert role.value('__nvidia_driver_packages_missing') == ['nvidia-smi', 'nvidia-persistenced']


def test_debian_installed_version_flavour_and_holds_patterns():
    role = DistributionRole(DEBIAN['13'], nvidia_driver_branch='550')
    version_regex = role.value('__nvidia_driver_version_package_regex')
    for name in ('nvidia-kernel-dkms', 'nvidia-open-kernel-dkms', 'libnvidia-ml1', 'nvidia-smi', 'libcuda1'):
        assert re.match(version_regex, name), name
    # Its own version would misreport the driver's.
    assert not re.match(version_regex, 'nvidia-persistenced')
    markers = role.value('__nvidia_driver_flavour_markers')
    assert re.match(markers['open'], 'nvidia-open-kernel-dkms') and not re.match(markers['open'], 'nvidia-kernel-dkms')
    assert re.match(markers['proprietary'], 'nvidia-kernel-dkms')
    assert not re.match(markers['proprietary'], 'nvidia-open-kernel-dkms')
    held = role.value('__nvidia_driver_held_name_regex')
    for name in COMMON + ['nvidia-kernel-dkms', 'nvidia-open-kernel-dkms', 'nvidia-kernel-support']:
        assert re.match(held, name), name


DEB822 = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

# A disabled and a source-only entry are not copied.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
"""

SOURCES_LIST = """# deb cdrom:[Debian GNU/Linux 12.8.0 _Bookworm_]/ bookworm main
deb http://ftp.de.debian.org/debian/ bookworm main
deb-src http://ftp.de.debian.org/debian/ bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb http://ftp.de.debian.org/debian/ bookworm-updates main
deb [signed-by=/etc/apt/keyrings/local.gpg] http://mirror.internal/debian bookworm-backports main
"""


def _state(deb822=None, sources_list=None):
    return {'contents': {'/etc/apt/sources.list.d/debian.sources': deb822, '/etc/apt/sources.list': sources_list},
            'files': {}, 'globs': {}}


def test_debian_source_on_the_hosts_deb822_mirror_and_suites():
    role = DistributionRole(DEBIAN['12'], state=_state(deb822=DEB822), nvidia_driver_branch='535')
    keyring = '/usr/share/keyrings/debian-archive-keyring.gpg'
    assert role.value('__nvidia_driver_distribution_entries') == [
        {'uris': 'http://deb.debian.org/debian', 'suites': ['bookworm', 'bookworm-updates'], 'signed_by': keyring},
        {'uris': 'http://deb.debian.org/debian-security', 'suites': ['bookworm-security'], 'signed_by': keyring},
    ]
    assert role.value('__nvidia_driver_distribution_source_file') == '/etc/apt/sources.list.d/gpufleet-debian-nonfree.sources'
    assert role.value('__nvidia_driver_distribution_source_content') == (
        '# Managed by Ansible (gpufleet.nvidia.nvidia_driver role); local changes are overwritten.\n'
        "# Debian's NVIDIA driver packages (nvidia_driver_source: distribution).\n"
        'X-Repolib-Name: gpufleet-debian-nonfree\nTypes: deb\nURIs: http://deb.debian.org/debian\n'
        'Suites: bookworm bookworm-updates\nComponents: contrib non-free non-free-firmware\nSigned-By: %s\n'
        '\n'
        'X-Repolib-Name: gpufleet-debian-nonfree\nTypes: deb\nURIs: http://deb.debian.org/debian-security\n'
        'Suites: bookworm-security\nComponents: contrib non-free non-free-firmware\nSigned-By: %s\n' % (keyring, keyring))


def test_debian_source_on_the_hosts_sources_list():
    role = DistributionRole(DEBIAN['12'], state=_state(sources_list=SOURCES_LIST), nvidia_driver_branch='535')
    keyring = '/usr/share/keyrings/debian-archive-keyring.gpg'
    # Backports are left out; the two lines of one mirror become one entry.
    assert role.value('__nvidia_driver_distribution_entries') == [
        {'uris': 'http://ftp.de.debian.org/debian', 'suites': ['bookworm', 'bookworm-updates'], 'signed_by': keyring},
        {'uris': 'http://security.debian.org/debian-security', 'suites': ['bookworm-security'], 'signed_by': keyring},
    ]


def test_debian_mirror_input_replaces_the_hosts_mirror_but_not_security():
    role = DistributionRole(DEBIAN['13'], state=_state(deb822=DEB822.replace('bookworm', 'trixie')), nvidia_driver_branch='550',
                            nvidia_driver_distribution_mirror='http://mirror.example.com/debian/')
    entries = role.value('__nvidia_driver_distribution_entries')
    assert [(e['uris'], e['suites']) for e in entries] == [
        ('http://mirror.example.com/debian', ['trixie', 'trixie-updates']),
        ('http://deb.debian.org/debian-security', ['trixie-security'])]
    # Without any Debian entry on the host, the mirror alone.
    alone = DistributionRole(DEBIAN['13'], nvidia_driver_branch='550', nvidia_driver_distribution_mirror='http://mirror.example.com/debian')
    assert alone.value('__nvidia_driver_distribution_entries') == [
        {'uris': 'http://mirror.example.com/debian', 'suites': ['trixie', 'trixie-updates'],
         'signed_by': '/usr/share/keyrings/debian-archive-keyring.gpg'}]


# --- Ubuntu -----------------------------------------------------------------

# apt-cache pkgnames nvidia-driver- / linux-modules-nvidia- (abridged): the
# archive has prebuilt modules for the generic and aws flavours, none for lowlatency.
UBUNTU_NAMES = {
    '22.04': ['nvidia-driver-535-server', 'nvidia-driver-535-server-open', 'nvidia-driver-550-server',
              'nvidia-driver-550-server-open', 'nvidia-driver-570-server', 'nvidia-driver-570-server-open',
              'nvidia-driver-535', 'nvidia-driver-550-open',
              'linux-modules-nvidia-535-server-generic', 'linux-modules-nvidia-535-server-open-generic',
              'linux-modules-nvidia-570-server-generic', 'linux-modules-nvidia-570-server-open-generic',
              'linux-modules-nvidia-570-server-aws', 'linux-modules-nvidia-570-server-open-aws',
              'linux-modules-nvidia-570-server-6.8.0-45-generic'],
    '24.04': ['nvidia-driver-550-server', 'nvidia-driver-550-server-open', 'nvidia-driver-570-server',
              'nvidia-driver-570-server-open', 'nvidia-driver-580-server', 'nvidia-driver-580-server-open',
              'linux-modules-nvidia-570-server-generic', 'linux-modules-nvidia-570-server-open-generic',
              'linux-modules-nvidia-580-server-open-generic', 'linux-modules-nvidia-580-server-open-aws',
              'linux-modules-nvidia-580-server-aws'],
}

UBUNTU_CASES = [
    # version, kernel, flavour, branch, packages. Prebuilt: the userland without
    # DKMS, nvidia-smi and the flavour's module meta (ubuntu-drivers --gpgpu);
    # else the headless set, which builds the module with DKMS.
    ('22.04', '5.15.0-105-generic', 'open', '570',
     ['nvidia-headless-no-dkms-570-server-open', 'nvidia-utils-570-server', 'linux-modules-nvidia-570-server-open-generic']),
    ('22.04', '5.15.0-105-generic', 'proprietary', '535',
     ['nvidia-headless-no-dkms-535-server', 'nvidia-utils-535-server', 'linux-modules-nvidia-535-server-generic']),
    ('22.04', '6.8.0-1015-aws', 'proprietary', '570',
     ['nvidia-headless-no-dkms-570-server', 'nvidia-utils-570-server', 'linux-modules-nvidia-570-server-aws']),
    # No prebuilt module for this branch and flavour: DKMS.
    ('22.04', '6.8.0-1015-aws', 'open', '535', ['nvidia-headless-535-server-open', 'nvidia-utils-535-server']),
    ('22.04', '5.15.0-105-lowlatency', 'open', '570', ['nvidia-headless-570-server-open', 'nvidia-utils-570-server']),
    ('24.04', '6.8.0-45-generic', 'open', '580',
     ['nvidia-headless-no-dkms-580-server-open', 'nvidia-utils-580-server', 'linux-modules-nvidia-580-server-open-generic']),
    ('24.04', '6.8.0-45-generic', 'open', '570',
     ['nvidia-headless-no-dkms-570-server-open', 'nvidia-utils-570-server', 'linux-modules-nvidia-570-server-open-generic']),
    ('24.04', '6.8.0-1015-aws', 'open', '580',
     ['nvidia-headless-no-dkms-580-server-open', 'nvidia-utils-580-server', 'linux-modules-nvidia-580-server-open-aws']),
    ('24.04', '6.8.0-1015-aws', 'proprietary', '580',
     ['nvidia-headless-no-dkms-580-server', 'nvidia-utils-580-server', 'linux-modules-nvidia-580-server-aws']),
    ('24.04', '6.8.0-45-lowlatency', 'proprietary', '570', ['nvidia-headless-570-server', 'nvidia-utils-570-server']),
    ('24.04', '6.8.0-45-generic', 'proprietary', '580', ['nvidia-headless-580-server', 'nvidia-utils-580-server']),
]


@pytest.mark.parametrize('version,kernel,flavour,branch,expected', UBUNTU_CASES,
                         ids=['%s-%s-%s-%s' % c[:4] for c in UBUNTU_CASES])
def test_ubuntu_packages(version, kernel, flavour, branch, expected):
    role = DistributionRole(_ubuntu(version, kernel), names=UBUNTU_NAMES[version], nvidia_driver_branch=branch,
                            nvidia_driver_flavour=flavour)
    assert role.distribution_file == 'distribution_Ubuntu.yml'
    assert role.packages() == expected
    prebuilt = expected[-1].startswith('linux-modules-')
    assert role.value('__nvidia_driver_prebuilt_modules') is prebuilt
    assert role.value('__nvidia_driver_builds_modules') is (not prebuilt)
    # Prebuilt modules are signed by Canonical: Secure Boot needs no key; no DKMS, no headers.
    assert role.value('__nvidia_driver_signed_modules') is prebuilt
    assert role.value('__nvidia_driver_dkms_packages') == ([] if prebuilt else ['dkms'])
    # Never the graphics meta package: it adds the X server driver and depends
    # on the DKMS package, which would build the module beside the prebuilt one.
    assert not any(name.startswith('nvidia-driver-') for name in expected)
    # The modules' meta package has the kernel's version: asked for without the driver's.
    assert role.value('__nvidia_driver_unpinned_packages') == ([expected[-1]] if prebuilt else [])
    role.variables['__nvidia_driver_target_version'] = '%s.172.08' % branch
    specs = role.value('__nvidia_driver_package_specs')
    assert specs[:2] == ['%s=%s.172.08-*' % (name, branch) for name in expected[:2]]
    assert specs[2:] == expected[2:]
    # The versions on offer are read from the package both sets share.
    suffix = '-server-open' if flavour == 'open' else '-server'
    assert role.value('__nvidia_driver_version_probe_package') == 'nvidia-headless-no-dkms-%s%s' % (branch, suffix)


# The flavour as ubuntu-drivers finds it: the installed kernel meta package
# first (what the next boot follows), the running kernel's flavour when it is
# among them or when no meta is installed. A kernel whose release has no
# Ubuntu flavour (a test host's, "6.18.44-fc-v1252") takes the meta's.
@pytest.mark.parametrize('kernel,installed,flavour', [
    ('6.18.44-fc-v1252', ['linux-image-generic', 'linux-image-6.8.0-60-generic'], 'generic'),
    ('6.8.0-1015-aws', ['linux-image-aws', 'linux-image-generic'], 'aws'),
    ('6.8.0-45-generic', ['linux-image-aws'], 'aws'),
    ('6.8.0-45-generic', ['linux-image-virtual', 'linux-image-unsigned-6.8.0-45-generic'], 'generic'),
    ('5.15.0-105-generic', ['linux-image-generic-hwe-22.04'], 'generic-hwe-22.04'),
    ('6.8.0-45-lowlatency', [], 'lowlatency'),
])
def test_ubuntu_kernel_flavour_from_the_installed_meta_package(kernel, installed, flavour):
    role = DistributionRole(_ubuntu('24.04', kernel), names=UBUNTU_NAMES['24.04'])
    role.variables['__nvidia_driver_installed_packages'] = {name: {'version': '6.8.0-60.63', 'held': False}
                                                            for name in installed}
    assert role.value('__nvidia_driver_ubuntu_kernel_flavour') == flavour


@pytest.mark.parametrize('kernel,flavour', [('6.8.0-45-generic', 'generic'), ('6.8.0-1015-aws', 'aws'),
                                            ('5.15.0-105-lowlatency', 'lowlatency'), ('6.8.0-1012-nvidia', 'nvidia'),
                                            ('6.8.0-1020-azure-fde', 'azure-fde'), ('6.8.0', '')])
def test_ubuntu_kernel_flavour(kernel, flavour):
    role = DistributionRole(_ubuntu('24.04', kernel), names=UBUNTU_NAMES['24.04'])
    assert role.value('__nvidia_driver_ubuntu_kernel_flavour') == flavour


def test_ubuntu_branches_offered_per_flavour_and_markers():
    role = DistributionRole(_ubuntu('22.04', '5.15.0-105-generic'), names=UBUNTU_NAMES['22.04'], nvidia_driver_flavour='open')
    assert role.value('__nvidia_driver_distribution_branches_offered') == ['535', '550', '570']
    markers = role.value('__nvidia_driver_flavour_markers')
    assert re.match(markers['open'], 'linux-modules-nvidia-570-server-open-generic')
    assert re.match(markers['open'], 'linux-modules-nvidia-570-server-open-6.8.0-45-generic')
    assert re.match(markers['open'], 'nvidia-dkms-570-server-open')
    assert not re.match(markers['open'], 'linux-modules-nvidia-570-server-generic')
    assert re.match(markers['proprietary'], 'linux-modules-nvidia-570-server-6.8.0-45-generic')
    assert re.match(markers['proprietary'], 'nvidia-dkms-570-server')
    assert not re.match(markers['proprietary'], 'linux-modules-nvidia-570-server-open-generic')
    assert not re.match(markers['proprietary'], 'nvidia-dkms-570-server-open')
    # The prebuilt set has no DKMS package: its kernel source package tells the flavour.
    assert re.match(markers['open'], 'nvidia-kernel-source-570-server-open')
    assert re.match(markers['proprietary'], 'nvidia-kernel-source-570-server')
    assert not re.match(markers['proprietary'], 'nvidia-kernel-source-570-server-open')
    version_regex = role.value('__nvidia_driver_version_package_regex')
    assert re.match(version_regex, 'libnvidia-compute-570-server') and re.match(version_regex, 'nvidia-utils-570-server')
    # The state read also lists the prebuilt module packages.
    role.variables['nvidia_driver_upgrade_stop_services'] = []
    assert 'linux-modules-nvidia-*' in role.value('__nvidia_driver_state_packages')


def test_ubuntu_packages_named_by_the_inventory_are_not_prebuilt():
    role = DistributionRole(_ubuntu('24.04', '6.8.0-45-generic'), names=UBUNTU_NAMES['24.04'], nvidia_driver_branch='570',
                            nvidia_driver_packages=['nvidia-headless-no-dkms-570-server', 'nvidia-utils-570-server'])
    assert role.packages() == ['nvidia-headless-no-dkms-570-server', 'nvidia-utils-570-server']
    assert role.value('__nvidia_driver_prebuilt_modules') is False


# --- Preflight rules ----------------------------------------------------------

def _platform_role(facts, **inputs):
    role = DistributionRole(facts, **inputs)
    # What the repository role's cuda_platform entry point resolves (supported platforms).
    role.variables['repository_cuda'] = dict(role.variables['repository_cuda'], supported=role.repository.supported,
                                             arch=role.repository.render('__repository_cuda_arch')
                                             if role.repository.vars_file else '', distro='', archs_published=[])
    return role


@pytest.mark.parametrize('major,wrong,offered', [('12', '580', '535'), ('12', '550', '535'), ('13', '535', '550')])
def test_preflight_refuses_a_branch_debian_does_not_offer(major, wrong, offered):
    role = _platform_role(DEBIAN[major], nvidia_driver_branch=wrong)
    broken = _broken(role, 'Check the platform')
    assert [var for var, _msg in broken] == ['nvidia_driver_branch'], broken
    message = broken[0][1]
    assert 'offers only branch %s' % offered in message and 'nvidia_driver_branch: "%s"' % offered in message, message


@pytest.mark.parametrize('major,branch', [('12', '535'), ('13', '550')])
def test_preflight_accepts_debians_branch_also_on_arm64(major, branch):
    # NVIDIA has no CUDA repository for Debian on arm64; Debian packages the driver for it.
    role = _platform_role(dict(DEBIAN[major], architecture='aarch64'), nvidia_driver_branch=branch)
    assert _broken(role, 'Check the platform') == []


@pytest.mark.parametrize('distribution,version', [('RedHat', '9.4'), ('Rocky', '8.9')])
def test_preflight_refuses_the_distribution_source_on_rhel(distribution, version):
    role = _platform_role(_facts(distribution, version, 'RedHat'))
    assert role.distribution_file is None
    broken = _broken(role, 'Check the platform')
    assert [var for var, _msg in broken] == ['nvidia_driver_source'], broken
    assert 'not offered on %s' % distribution in broken[0][1] and 'nvidia_driver_source: nvidia' in broken[0][1]


def test_the_nvidia_source_is_unchanged_by_the_distribution_rules():
    role = _platform_role(DEBIAN['12'], nvidia_driver_source='nvidia', nvidia_driver_branch='580')
    assert role.distribution_file is None
    assert _broken(role, 'Check the platform') == []
    assert role.packages('open', '580') == ['nvidia-open', 'nvidia-driver', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms']
    role.variables['__nvidia_driver_target_version'] = '580.95.05'
    assert role.value('__nvidia_driver_package_specs') == [
        'nvidia-open=580.95.05-*', 'nvidia-driver=580.95.05-*', 'nvidia-driver-cuda=580.95.05-*',
        'nvidia-kernel-open-dkms=580.95.05-*']
    assert role.value('__nvidia_driver_builds_modules') is True
    assert role.value('__nvidia_driver_signed_modules') is False


def test_preflight_refuses_a_missing_debian_mirror_and_keyring():
    keyring = '/usr/share/keyrings/debian-archive-keyring.gpg'
    state = _state()
    state['files'] = {keyring: {'exists': False}}
    role = DistributionRole(DEBIAN['12'], state=state, nvidia_driver_branch='535')
    broken = _broken(role, 'Check the Debian mirror and keyring for the non-free components')
    assert [var for var, _msg in broken] == ['nvidia_driver_distribution_mirror', 'nvidia_driver_source'], broken
    assert 'http://deb.debian.org/debian' in broken[0][1] and 'debian-archive-keyring' in broken[1][1]
    state = _state(deb822=DEB822)
    state['files'] = {keyring: {'exists': True}}
    role = DistributionRole(DEBIAN['12'], state=state, nvidia_driver_branch='535')
    assert _broken(role, 'Check the Debian mirror and keyring for the non-free components') == []


def test_preflight_refuses_a_branch_ubuntus_archive_does_not_offer():
    role = DistributionRole(_ubuntu('24.04', '6.8.0-45-generic'), names=UBUNTU_NAMES['24.04'], nvidia_driver_branch='535')
    broken = _broken(role, 'Check the archive offers the branch')
    assert [var for var, _msg in broken] == ['nvidia_driver_branch'], broken
    assert 'nvidia-driver-535-server-open' in broken[0][1] and '550, 570, 580' in broken[0][1], broken[0][1]
    role = DistributionRole(_ubuntu('24.04', '6.8.0-45-generic'), names=UBUNTU_NAMES['24.04'], nvidia_driver_branch='580')
    assert _broken(role, 'Check the archive offers the branch') == []


# --- Kernels DKMS builds for ---------------------------------------------------

def _kernels(inputs, boot, build, running='6.6.87-host'):
    """__nvidia_driver_kernels as state.yml sets it."""
    role = DistributionRole(dict(DEBIAN['12'], kernel=running), nvidia_driver_branch='535', **inputs)
    # host_state_info's kernels: those with an image in /boot (module_utils/kernels.py).
    role.variables['__nvidia_driver_state'] = {'globs': {'/lib/modules/*/build': ['/lib/modules/%s/build' % k for k in build]},
                                               'kernels': [{'release': k} for k in boot],
                                               'contents': {}, 'files': {}}
    for task in load('nvidia_driver', 'tasks', 'state.yml'):
        facts = task.get('ansible.builtin.set_fact', {})
        if '__nvidia_driver_kernels' in facts:
            return plain(render(trust_as_template(facts['__nvidia_driver_kernels']), role.variables))
    raise KeyError('__nvidia_driver_kernels')


def test_kernels_with_headers_packages_are_those_installed_not_the_containers_host_kernel():
    # A container: the host's kernel runs, Debian's headers are installed, no image.
    assert _kernels({'nvidia_driver_kernel_headers_packages': ['linux-headers-amd64']}, [], ['6.1.0-40-amd64']) == [
        '6.1.0-40-amd64']
    # A host: the running kernel is installed (/boot), a newer one waits for the reboot.
    assert _kernels({'nvidia_driver_kernel_headers_packages': ['linux-headers-amd64']},
                    ['6.1.0-39-amd64', '6.1.0-40-amd64'], ['6.1.0-40-amd64'], running='6.1.0-39-amd64') == [
        '6.1.0-39-amd64', '6.1.0-40-amd64']
    # Without the input, as before: the running kernel and those in /boot.
    assert _kernels({}, ['6.1.0-40-amd64'], ['6.1.0-40-amd64']) == ['6.1.0-40-amd64', '6.6.87-host']


def test_headers_packages_replace_the_running_kernels_headers():
    role = DistributionRole(DEBIAN['12'], nvidia_driver_branch='535', nvidia_driver_kernel_headers_packages=['linux-headers-amd64'])
    role.variables.update(__nvidia_driver_installed_packages={}, __nvidia_driver_headers_present=False)
    assert role.value('__nvidia_driver_build_packages_missing') == ['dkms', 'linux-headers-amd64']
    role.variables['__nvidia_driver_installed_packages'] = {'dkms': {}, 'linux-headers-amd64': {}}
    assert role.value('__nvidia_driver_build_packages_missing') == []
    plain_role = DistributionRole(DEBIAN['12'], nvidia_driver_source='nvidia')
    plain_role.variables.update(__nvidia_driver_installed_packages={}, __nvidia_driver_headers_present=False)
    assert plain_role.value('__nvidia_driver_build_packages_missing') == ['dkms', 'linux-headers-6.1.0-28-amd64']
