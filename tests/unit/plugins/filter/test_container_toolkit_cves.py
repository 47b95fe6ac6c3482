# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_toolkit_cves filter (the container_toolkit role's CVE gate)
over the role's table, roles/container_toolkit/vars/cves.yml.

Expected fixed-in versions are typed in from NVIDIA's bulletins (the CVE
records of NVIDIA's PSIRT: CVE-2024-0132/0133 fixed in 1.16.2, 0134 in
1.17.0, 0135/0136/0137 in 1.17.1, CVE-2025-23359 in 1.17.4, CVE-2025-23266 and
23267 in 1.17.8), independently of the table.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

import os

import yaml

from ansible_collections.gpufleet.nvidia.plugins.filter.container_toolkit_cves import FilterModule

_filter = FilterModule().filters()['container_toolkit_cves']
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(REPO_ROOT, 'roles', 'container_toolkit', 'vars', 'cves.yml')) as _handle:
    TABLE = yaml.safe_load(_handle)['__container_toolkit_cves_data']

ALL_2024 = ['CVE-2024-0132', 'CVE-2024-0133', 'CVE-2024-0134', 'CVE-2024-0135', 'CVE-2024-0136', 'CVE-2024-0137']
FROM_1_17_1 = ['CVE-2025-23359', 'CVE-2025-23266', 'CVE-2025-23267']


def container_toolkit_cves(version, table=None):
    return _filter(version, TABLE if table is None else table)


def ids(version):
    return [cve['id'] for cve in container_toolkit_cves(version)]


@pytest.mark.parametrize('version, expected', [
    ('1.16.1', ALL_2024 + FROM_1_17_1),
    ('1.16.2', ALL_2024[2:] + FROM_1_17_1),
    ('1.17.0', ALL_2024[3:] + FROM_1_17_1),
    ('1.17.1', FROM_1_17_1),
    ('1.17.3', FROM_1_17_1),
    ('1.17.4', ['CVE-2025-23266', 'CVE-2025-23267']),
    ('1.17.7', ['CVE-2025-23266', 'CVE-2025-23267']),
    ('1.17.8', []),
    ('1.18.0', []),
    ('1.18.2', []),
    ('2.0.0', []),
    # 1.9.10 is older than 1.16.2: numbers, not text, are compared.
    ('1.9.10', ALL_2024 + FROM_1_17_1),
])
def test_each_release_is_exposed_to_the_cves_fixed_after_it(version, expected):
    assert ids(version) == expected


@pytest.mark.parametrize('version, expected', [
    # Package versions carry the revision; it does not change the release.
    ('1.17.7-1', ['CVE-2025-23266', 'CVE-2025-23267']),
    ('1.17.8-1', []),
    ('v1.17.8', []),
    (' 1.18.0 ', []),
    # A release candidate of the fixing release is not the fixing release.
    ('1.17.8~rc.1', ['CVE-2025-23266', 'CVE-2025-23267']),
    ('1.17.8~rc.1-1', ['CVE-2025-23266', 'CVE-2025-23267']),
    ('1.18.0~rc.2-1', []),
])
def test_package_and_prerelease_versions(version, expected):
    assert ids(version) == expected


def test_only_the_compat_hook_cve_has_a_published_mitigation():
    mitigations = dict((cve['id'], cve['mitigation']) for cve in container_toolkit_cves('1.16.0'))
    assert mitigations == dict([(cve, None) for cve in ALL_2024 + FROM_1_17_1],
                               **{'CVE-2025-23266': {'features.disable-cuda-compat-lib-hook': True}})


def test_each_entry_names_its_fix_and_what_it_allows():
    for cve in container_toolkit_cves('1.0.0'):
        assert set(cve) == {'id', 'fixed_in', 'cvss', 'bulletin', 'summary', 'mitigation'}
        assert cve['bulletin'].startswith('https://nvidia.custhelp.com/app/answers/detail/a_id/')
        assert cve['summary']
        assert ids(cve['fixed_in']) == [c for c in ids(cve['fixed_in']) if c != cve['id']]


def test_results_do_not_share_the_table():
    first = container_toolkit_cves('1.17.7')
    first[0]['mitigation']['features.disable-cuda-compat-lib-hook'] = False
    first[0]['fixed_in'] = '0'
    again = container_toolkit_cves('1.17.7')
    assert again[0]['mitigation'] == {'features.disable-cuda-compat-lib-hook': True}
    assert again[0]['fixed_in'] == '1.17.8'


@pytest.mark.parametrize('version', ['', 'latest', '1.17', '1.17.x', '1.17.7.1', 'one.two.three'])
def test_a_non_version_is_refused(version):
    with pytest.raises(AnsibleFilterError, match='not an NVIDIA Container Toolkit version'):
        container_toolkit_cves(version)


@pytest.mark.parametrize('version', [1.17, 118, None])
def test_a_number_is_refused(version):
    with pytest.raises(AnsibleFilterError, match='as a string'):
        container_toolkit_cves(version)


def test_the_table_is_data_the_filter_requires():
    with pytest.raises(AnsibleFilterError, match='name the CVE table'):
        _filter('1.17.7')
    with pytest.raises(AnsibleFilterError, match='needs an id and a fixed_in'):
        container_toolkit_cves('1.17.7', [{'id': 'CVE-1'}])
    with pytest.raises(AnsibleFilterError, match='list of CVE entries'):
        container_toolkit_cves('1.17.7', {'id': 'CVE-1'})
    assert [c['id'] for c in container_toolkit_cves('1.0.0', [{'id': 'B', 'fixed_in': '2.0.0'},
                                                              {'id': 'A', 'fixed_in': '1.5.0'}])] == ['A', 'B']
