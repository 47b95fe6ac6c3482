# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""host_state_info: which package database a host's packages are read from."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import host_state_info

ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n'
UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host with the given os-release and package databases."""
    def make(os_release, dpkg, rpm):
        path = tmp_path / 'os-release'
        path.write_text(os_release)
        real_exists, real_isdir = host_state_info.os.path.exists, host_state_info.os.path.isdir
        monkeypatch.setattr(host_state_info.os.path, 'exists',
                            lambda p: dpkg if p == '/var/lib/dpkg/status' else real_exists(p))
        monkeypatch.setattr(host_state_info.os.path, 'isdir',
                            lambda p: rpm if p in ('/var/lib/rpm', '/usr/lib/sysimage/rpm') else real_isdir(p))
        return str(path)
    return make


@pytest.mark.parametrize('os_release, dpkg, rpm, expected', [
    (DEBIAN, True, False, 'apt'),
    (UBUNTU, True, False, 'apt'),
    (ROCKY, False, True, 'dnf'),
    # Regression: a Rocky-shaped test host (Debian's userland with Debian's
    # dnf and rpm) has dpkg's status file too; its packages are rpm's.
    (ROCKY, True, True, 'dnf'),
    # A Debian host with rpm installed (alien, rpmbuild) keeps dpkg's.
    (DEBIAN, True, True, 'apt'),
    (UBUNTU, True, True, 'apt'),
    ('', False, True, 'dnf'),
    ('', False, False, 'none'),
])
def test_package_database_of_the_hosts_family(host, os_release, dpkg, rpm, expected):
    assert host_state_info._package_manager(host(os_release, dpkg, rpm)) == expected


def test_unreadable_os_release_falls_back_to_what_exists(host, tmp_path):
    host('', True, True)
    assert host_state_info._package_manager(str(tmp_path / 'missing')) == 'apt'


def test_filesystems_read_the_nearest_existing_parent(tmp_path):
    existing = host_state_info._filesystem(str(tmp_path))
    missing = host_state_info._filesystem(str(tmp_path / 'not' / 'there'))
    assert existing['path'] == str(tmp_path) and missing['path'] == str(tmp_path)
    assert 0 <= existing['free_mib'] <= existing['size_mib'] and existing['available_mib'] <= existing['free_mib']


STATUS = """Package: nvidia-kernel-dkms
Status: install ok half-configured
Version: 535.247.01-1~deb12u1

Package: libcuda1
Status: install ok unpacked
Version: 535.247.01-1~deb12u1

Package: nvidia-smi
Status: install ok installed
Version: 535.247.01-1~deb12u1

Package: old-config
Status: deinstall ok config-files
Version: 1.0

Package: nvidia-driver
Status: install reinstreq half-installed
Version: 535.247.01-1~deb12u1
"""


def test_package_work_reads_dpkgs_journal_and_unfinished_states(tmp_path):
    (tmp_path / 'updates').mkdir()
    (tmp_path / 'status').write_text(STATUS)
    assert host_state_info._dpkg_work(str(tmp_path)) == {
        'interrupted': False,
        'unfinished': {'nvidia-kernel-dkms': 'half-configured', 'libcuda1': 'unpacked',
                       'nvidia-driver': 'half-installed'}}
    # dpkg's journal entries are numbered files; its "tmp.i" scratch file is not one.
    (tmp_path / 'updates' / 'tmp.i').write_text('')
    assert host_state_info._dpkg_work(str(tmp_path))['interrupted'] is False
    (tmp_path / 'updates' / '0003').write_text('Package: libcuda1\n')
    assert host_state_info._dpkg_work(str(tmp_path))['interrupted'] is True


def test_package_work_of_a_clean_or_missing_database(tmp_path):
    assert host_state_info._dpkg_work(str(tmp_path)) == {'interrupted': False, 'unfinished': {}}
    (tmp_path / 'status').write_text("Package: a\nStatus: install ok installed\nVersion: 1\n")
    assert host_state_info._dpkg_work(str(tmp_path)) == {'interrupted': False, 'unfinished': {}}
