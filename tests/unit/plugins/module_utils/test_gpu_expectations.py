# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The inventory's expectations (model, driver, ECC, MIG layout) against GPU records."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_expectations import (
    driver_matches,
    expectation_findings,
    layout_for,
    model_matches,
)


def gpu(index, name='NVIDIA A100-SXM4-40GB', **values):
    record = {'index': index, 'uuid': 'GPU-%04d' % index, 'pci_bus_id': '0000:%02x:00.0' % (index + 1), 'name': name,
              'ecc_mode_current': True, 'ecc_mode_pending': True, 'mig_mode_current': True}
    record.update(values)
    return record


def codes(findings):
    return [finding['code'] for finding in findings]


@pytest.mark.parametrize('version, expected, matches', [
    ('570.195.03', '570', True),
    ('570.195.03', '570.195', True),
    ('570.195.03', '570.195.03', True),
    ('570.195.03', '57', False),
    ('570.195.03', '570.19', False),
    ('550.163.01', '570', False),
])
def test_driver_matches_whole_parts(version, expected, matches):
    assert driver_matches(version, expected) is matches


def test_model_matches_ignoring_case():
    assert model_matches('NVIDIA H100 80GB HBM3', 'h100')
    assert not model_matches('NVIDIA L40S', 'H100')
    assert not model_matches(None, 'H100')


def test_nothing_expected_is_nothing_found():
    assert expectation_findings([gpu(0, ecc_mode_current=False)], '550.1.2') == []


def test_driver_model_and_ecc_findings_name_what_was_expected_and_found():
    gpus = [gpu(0), gpu(1, name='NVIDIA L40S', ecc_mode_current=False, ecc_mode_pending=True),
            gpu(2, ecc_mode_current=None, ecc_mode_pending=None)]
    findings = expectation_findings(gpus, '550.163.01', expected_model='A100', expected_driver='570',
                                    expected_ecc='enabled')
    assert codes(findings) == ['driver_branch_unexpected', 'gpu_model_unexpected', 'ecc_mode_unexpected']
    driver, model, ecc = findings
    assert (driver['gpu'], driver['expected'], driver['found']) == (None, '570', '550.163.01')
    assert model['gpu'] == {'index': 1, 'uuid': 'GPU-0001', 'pci_bus_id': '0000:02:00.0'}
    assert 'pending' in ecc['evidence'] and ecc['found'] == 'disabled'
    assert all(finding['severity'] == 'warning' and finding['advice'] for finding in findings)


def test_unknown_ecc_expectation_is_an_error():
    with pytest.raises(ValueError):
        expectation_findings([gpu(0)], expected_ecc='on')


def test_layout_entries_select_gpus_by_index_uuid_or_pci_bus_id():
    layout = [{'gpus': ['GPU-0001'], 'profiles': {'MIG 7g.40gb': 1}},
              {'gpus': ['00000000:03:00.0'], 'profiles': {'3g.20gb': 2, '1g.5gb': 0}},
              {'gpus': ['0'], 'profiles': {}},
              {'profiles': {'1g.5gb': 7}}]
    assert layout_for(gpu(1), layout) == {'7g.40gb': 1}
    assert layout_for(gpu(2), layout) == {'3g.20gb': 2}
    assert layout_for(gpu(0), layout) == {}
    assert layout_for(gpu(5), layout) == {'1g.5gb': 7}
    assert layout_for(gpu(5), layout[:3]) is None


def test_mig_layout_counts_profiles_per_gpu():
    gpus = [gpu(0), gpu(1), gpu(2, mig_mode_current=False), gpu(3, mig_mode_current=None)]
    devices = ([{'gpu_index': 0, 'profile': '3g.20gb'}] * 2 + [{'gpu_index': 1, 'profile': '3g.20gb'},
                                                               {'gpu_index': 1, 'profile': '1g.5gb'}])
    findings = expectation_findings(gpus, mig_devices=devices,
                                    expected_mig_layout=[{'gpus': None, 'profiles': {'3g.20gb': 2}}])
    assert [(f['code'], f['gpu']['index']) for f in findings] == [
        ('mig_layout_unexpected', 1), ('mig_mode_unexpected', 2), ('mig_mode_unexpected', 3)]
    assert (findings[0]['expected'], findings[0]['found']) == ('3g.20gb x2', '1g.5gb x1, 3g.20gb x1')
    assert findings[2]['found'] == 'MIG not supported'


def test_mig_layout_needs_profile_names():
    with pytest.raises(ValueError):
        expectation_findings([gpu(0)], mig_devices=None, expected_mig_layout=[{'profiles': {'1g.5gb': 1}}])
