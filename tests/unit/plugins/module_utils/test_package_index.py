# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Package indexes as NVIDIA's repositories publish them, and dpkg's version order."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import bz2
import gzip
import lzma

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.package_index import (
    PackageIndexError, compare_versions, deb_versions, decompress, newest_first, repomd_primary_location,
    rpm_versions)

# The shape of a CUDA repository's Packages file (apt-ftparchive), two stanzas of one package.
PACKAGES = """Package: nvidia-driver
Version: 580.95.05-1
Architecture: amd64
Depends: nvidia-driver-libs (= 580.95.05-1)
Description: NVIDIA metapackage
 continued: Version: 1.0 is not a field

Package: nvidia-open
Version: 580.95.05-1
Architecture: amd64

Package: nvidia-driver
Version: 570.195.03-1
Architecture: amd64
"""

REPOMD = b"""<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo" xmlns:rpm="http://linux.duke.edu/metadata/rpm">
  <data type="filelists"><location href="repodata/0a-filelists.xml.gz"/></data>
  <data type="primary"><location href="repodata/1b-primary.xml.gz"/></data>
</repomd>
"""

PRIMARY = b"""<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="3">
<package type="rpm"><name>nvidia-driver</name><arch>x86_64</arch>
  <version epoch="3" ver="580.95.05" rel="1.el9"/></package>
<package type="rpm"><name>nvidia-driver</name><arch>x86_64</arch>
  <version epoch="3" ver="570.195.03" rel="1.el9"/></package>
<package type="rpm"><name>nvidia-container-toolkit-base</name><arch>x86_64</arch>
  <version epoch="0" ver="1.18.2" rel="1"/></package>
</metadata>
"""


def test_deb_index_versions_per_package():
    found = deb_versions(PACKAGES, ['nvidia-driver', 'cuda-drivers'])
    assert found == {'nvidia-driver': ['580.95.05-1', '570.195.03-1'], 'cuda-drivers': []}


def test_rpm_primary_list_versions_with_epochs():
    assert repomd_primary_location(REPOMD) == 'repodata/1b-primary.xml.gz'
    found = rpm_versions(PRIMARY, ['nvidia-driver', 'nvidia-container-toolkit-base'])
    assert found == {'nvidia-driver': ['3:580.95.05-1.el9', '3:570.195.03-1.el9'],
                     'nvidia-container-toolkit-base': ['1.18.2-1']}


@pytest.mark.parametrize('name, pack', [('Packages.gz', gzip.compress), ('Packages.xz', lzma.compress),
                                        ('primary.xml.bz2', bz2.compress), ('Packages', lambda data: data)])
def test_indexes_decompress_by_their_name(name, pack):
    assert decompress(name, pack(b'Package: x\n')) == b'Package: x\n'


def test_broken_indexes_are_refused_with_their_name():
    with pytest.raises(PackageIndexError, match='Packages.gz does not decompress'):
        decompress('Packages.gz', b'not gzip')
    with pytest.raises(PackageIndexError, match='zstd'):
        decompress('primary.xml.zst', b'\x28\xb5\x2f\xfd')
    with pytest.raises(PackageIndexError, match='names no primary'):
        repomd_primary_location(b'<repomd xmlns="http://linux.duke.edu/metadata/repo"/>')
    with pytest.raises(PackageIndexError, match='does not parse'):
        repomd_primary_location(b'<repomd')


@pytest.mark.parametrize('older, newer', [
    ('580.82.07-1', '580.95.05-1'),        # numbers, not text: 82 < 95
    ('580.95.05-1', '580.159.03-1'),       # 95 < 159
    ('570.195.03-1', '580.82.07-1'),
    ('1:4.2.3-1', '1:4.4.1-1'),
    ('2:0.1-1', '3:0.0.1-1'),             # the epoch first
    ('1.18.0~rc.1-1', '1.18.0-1'),         # ~ sorts before the release
    ('580.95.05-1', '580.95.05-1ubuntu1'),
    ('580.95.05', '580.95.05-1'),
])
def test_dpkg_version_order(older, newer):
    assert compare_versions(older, newer) == -1
    assert compare_versions(newer, older) == 1
    assert compare_versions(older, older) == 0


def test_newest_first_drops_repeats():
    assert newest_first(['580.82.07-1', '580.95.05-1', '570.195.03-1', '580.95.05-1']) == [
        '580.95.05-1', '580.82.07-1', '570.195.03-1']
