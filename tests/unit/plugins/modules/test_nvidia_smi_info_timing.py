# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_smi_info returns what nvidia_gpu_health needs to judge its reading: time and warnings."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules import test_nvidia_smi_info
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.test_nvidia_smi_info import (
    DRIVER_NOT_LOADED,
    fixture,
)

# The fixture of the module's own tests: the same mocked run_command and command script.
run = test_nvidia_smi_info.run


def test_the_xml_report_is_timed_and_its_warnings_returned(run):  # pylint: disable=redefined-outer-name
    text = 'WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n' + fixture('tesla-t4_515_q.xml')
    result, _commands, _warnings = run({}, [(['-q', '-x'], (0, text, ''))])
    assert isinstance(result['nvidia_smi_seconds'], float) and result['nvidia_smi_seconds'] >= 0
    assert result['nvidia_smi_warnings'] == ['WARNING: infoROM is corrupted at gpu 0000:00:1E.0']


def test_a_failed_report_is_timed_too(run):  # pylint: disable=redefined-outer-name
    result, _commands, _warnings = run({'fail_on_error': False}, [(['-q', '-x'], (9, DRIVER_NOT_LOADED, ''))])
    assert isinstance(result['nvidia_smi_seconds'], float)
    assert result['nvidia_smi_warnings'] == []


def test_no_report_no_time(run):  # pylint: disable=redefined-outer-name
    result, _commands, _warnings = run({'gather': ['topology']},
                                       [(['topo', '-m'], (0, fixture('titan-v_unknown_topo.txt'), ''))])
    assert result['nvidia_smi_seconds'] is None and result['nvidia_smi_warnings'] == []
