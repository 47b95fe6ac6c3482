# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cuda_min_driver and driver_branch filters against NVIDIA's published table.

The expected values below are typed in from "Table 3 CUDA Toolkit and Corresponding
Driver Versions" of the CUDA 13.2 release notes (as recorded in
shared/reference/NVIDIA-FACTS.md section 11), independently of the data module, so a
typo in either shows up as a failure.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.cuda_min_driver import FilterModule as CudaFilters
from ansible_collections.gpufleet.nvidia.plugins.filter.driver_branch import FilterModule as BranchFilters
from ansible_collections.gpufleet.nvidia.plugins.module_utils.cuda_matrix import (
    CUDA_TOOLKIT_DRIVER_TABLE,
    known_toolkit_versions,
)

cuda_min_driver = CudaFilters().filters()['cuda_min_driver']
driver_branch = BranchFilters().filters()['driver_branch']

# (release as NVIDIA names it, the same release as X.Y.Z, minimum Linux x86_64 driver)
PUBLISHED = [
    ('13.2 GA', '13.2.0', '595.45.04'),
    ('13.1 Update 1', '13.1.1', '590.48.01'),
    ('13.1 GA', '13.1.0', '590.44.01'),
    ('13.0 Update 2', '13.0.2', '580.95.05'),
    ('13.0 Update 1', '13.0.1', '580.82.07'),
    ('13.0 GA', '13.0.0', '580.65.06'),
    ('12.9 Update 1', '12.9.1', '575.57.08'),
    ('12.9 GA', '12.9.0', '575.51.03'),
    ('12.8 Update 1', '12.8.1', '570.124.06'),
    ('12.8 GA', '12.8.0', '570.26'),
    ('12.6 Update 3', '12.6.3', '560.35.05'),
    ('12.6 Update 2', '12.6.2', '560.35.03'),
    ('12.6 Update 1', '12.6.1', '560.35.03'),
    ('12.6 GA', '12.6.0', '560.28.03'),
    ('12.5 Update 1', '12.5.1', '555.42.06'),
    ('12.5 GA', '12.5.0', '555.42.02'),
    ('12.4 Update 1', '12.4.1', '550.54.15'),
    ('12.4 GA', '12.4.0', '550.54.14'),
    ('12.3 Update 1', '12.3.1', '545.23.08'),
    ('12.3 GA', '12.3.0', '545.23.06'),
    ('12.2 Update 2', '12.2.2', '535.104.05'),
    ('12.2 Update 1', '12.2.1', '535.86.09'),
    ('12.2 GA', '12.2.0', '535.54.03'),
    ('12.1 Update 1', '12.1.1', '530.30.02'),
    ('12.1 GA', '12.1.0', '530.30.02'),
    ('12.0 Update 1', '12.0.1', '525.85.12'),
    ('12.0 GA', '12.0.0', '525.60.13'),
    ('11.8 GA', '11.8.0', '520.61.05'),
    ('11.7 Update 1', '11.7.1', '515.48.07'),
    ('11.7 GA', '11.7.0', '515.43.04'),
    ('11.6 Update 2', '11.6.2', '510.47.03'),
    ('11.6 Update 1', '11.6.1', '510.47.03'),
    ('11.6 GA', '11.6.0', '510.39.01'),
    ('11.5 Update 2', '11.5.2', '495.29.05'),
    ('11.5 Update 1', '11.5.1', '495.29.05'),
    ('11.5 GA', '11.5.0', '495.29.05'),
    ('11.4 Update 4', '11.4.4', '470.82.01'),
    ('11.4 Update 3', '11.4.3', '470.82.01'),
    ('11.4 Update 2', '11.4.2', '470.57.02'),
    ('11.4 Update 1', '11.4.1', '470.57.02'),
    ('11.4.0 GA', '11.4.0', '470.42.01'),
    ('11.3.1 Update 1', '11.3.1', '465.19.01'),
    ('11.3.0 GA', '11.3.0', '465.19.01'),
    ('11.2.2 Update 2', '11.2.2', '460.32.03'),
    ('11.2.1 Update 1', '11.2.1', '460.32.03'),
    ('11.2.0 GA', '11.2.0', '460.27.03'),
    ('11.1.1 Update 1', '11.1.1', '455.32'),
    ('11.1 GA', '11.1.0', '455.23'),
    ('11.0.3 Update 1', '11.0.3', '450.51.06'),
    ('11.0.2 GA', '11.0.2', '450.51.05'),
    ('11.0.1 RC', '11.0.1', '450.36.06'),
]

GA = dict((release.split()[0].rsplit('.', 1)[0] if release.count('.') == 2 else release.split()[0], driver)
          for release, _full, driver in PUBLISHED if release.endswith(' GA'))


@pytest.mark.parametrize('release, full, driver', PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_every_published_row_by_name(release, full, driver):
    assert cuda_min_driver(release) == driver


@pytest.mark.parametrize('release, full, driver', PUBLISHED, ids=[p[1] for p in PUBLISHED])
def test_every_published_row_by_three_part_version(release, full, driver):
    assert cuda_min_driver(full) == driver


def test_table_has_exactly_the_published_rows():
    assert [(v, d) for v, _label, d in CUDA_TOOLKIT_DRIVER_TABLE] == [(full, d) for _r, full, d in PUBLISHED]


@pytest.mark.parametrize('version', sorted(GA))
def test_two_part_version_is_the_ga_minimum(version):
    assert cuda_min_driver(version) == GA[version]


def test_ga_of_11_0_is_11_0_2_not_the_release_candidate():
    assert cuda_min_driver('11.0') == '450.51.05'
    assert cuda_min_driver('11.0 RC') == '450.36.06'


def test_every_minor_from_11_0_to_13_2_is_known():
    expected = ['13.2', '13.1', '13.0', '12.9', '12.8', '12.6', '12.5', '12.4', '12.3', '12.2', '12.1', '12.0',
                '11.8', '11.7', '11.6', '11.5', '11.4', '11.3', '11.2', '11.1', '11.0']
    assert known_toolkit_versions() == expected


@pytest.mark.parametrize('spelling', ['12.8', ' 12.8 ', '12.8 GA', '12.8.0', 'v12.8', 'cuda-12.8', 'CUDA 12.8'])
def test_spellings_of_one_release(spelling):
    assert cuda_min_driver(spelling) == '570.26'


@pytest.mark.parametrize('spelling', ['12.8.1', '12.8 Update 1', '12.8 update 1', '12.8.1 Update 1'])
def test_spellings_of_an_update(spelling):
    assert cuda_min_driver(spelling) == '570.124.06'


@pytest.mark.parametrize('version, compat_min', [
    ('13.2', '580'), ('13.0', '580'), ('13.1.1', '580'), ('13', '580'), (13, '580'),
    ('12.8', '525'), ('12.0 Update 1', '525'), ('12', '525'),
    ('11.8', '450'), ('11.0', '450'),
])
def test_minor_version_compatibility(version, compat_min):
    assert cuda_min_driver(version, compat='minor') == compat_min


def test_minor_compat_accepts_versions_the_table_lacks():
    # Minor-version compatibility is a property of the major family, so a later 13.x still answers.
    assert cuda_min_driver('13.9', compat='minor') == '580'


def test_full_is_the_default():
    assert cuda_min_driver('13.0', compat='full') == cuda_min_driver('13.0') == '580.65.06'


@pytest.mark.parametrize('value, message', [
    ('13.3', 'CUDA toolkit 13.3 is not in the minimum-driver table (known: 13.2, 13.1'),
    ('10.2', 'CUDA toolkit 10.2 is not in the minimum-driver table'),
    ('12.7', 'CUDA toolkit 12.7 is not in the minimum-driver table'),
    ('12.8.2', 'CUDA toolkit 12.8.2 is not in the minimum-driver table; known releases of 12.8: 12.8.0 (GA), '
               '12.8.1 (Update 1)'),
    ('12.8 Update 5', 'known releases of 12.8'),
    ('12.8.1 GA', '12.8.1 is "Update 1", not "GA"'),
    ('11.0.0', 'known releases of 11.0: 11.0.1 (RC), 11.0.2 (GA), 11.0.3 (Update 1)'),
    ('twelve', 'cannot read CUDA toolkit version'),
    ('12', 'cannot read CUDA toolkit version'),
    ('', 'cannot read CUDA toolkit version'),
    (None, 'must be a string'),
    (12.8, 'was given as a number; quote it'),
])
def test_unknown_or_malformed_versions_fail_clearly(value, message):
    with pytest.raises(AnsibleFilterError, match='^cuda_min_driver: ') as err:
        cuda_min_driver(value)
    assert message in str(err.value)


@pytest.mark.parametrize('value, message', [
    ('10.2', 'no minor-version compatibility data for major version 10'),
    ('14.0', 'no minor-version compatibility data for major version 14'),
    ('x', 'cannot read CUDA toolkit version'),
])
def test_minor_compat_unknown_major(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        cuda_min_driver(value, compat='minor')


def test_bad_compat_keyword():
    with pytest.raises(AnsibleFilterError, match="compat must be one of full, minor, got 'major'"):
        cuda_min_driver('12.8', compat='major')


@pytest.mark.parametrize('version, branch', [
    ('570.195.03', '570'),
    ('580.65.06', '580'),
    ('570.26', '570'),
    ('470.82.01', '470'),
    ('595', '595'),
    (575, '575'),
    ('570.195.03-0ubuntu1', '570'),
    ('3:570.195.03-1', '570'),
    ('580.95.05-1.el9', '580'),
    (' 535.104.05 ', '535'),
    ('96.43.23', '96'),
])
def test_driver_branch(version, branch):
    assert driver_branch(version) == branch


@pytest.mark.parametrize('value', ['', 'latest', 'r570', '5', '.570', None, True])
def test_driver_branch_rejects_non_versions(value):
    with pytest.raises(AnsibleFilterError, match='^driver_branch: '):
        driver_branch(value)


def test_driver_branch_and_min_driver_compose():
    # The role check in issue 5: the installed branch against a toolkit family's minimum.
    assert int(driver_branch('575.57.08')) < int(cuda_min_driver('13.0', compat='minor'))
    assert int(driver_branch('580.95.05')) >= int(cuda_min_driver('13.0', compat='minor'))
