# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nvidia_driver role's input rules that keep nvidia_driver_device_file_hardening
from being undone: by a device file mode with permissions for others, or by
nvidia_driver_module_options that set an option the hardening writes
(NVreg_RestrictProfilingToAdminUsers, NVreg_DeviceFileUID/GID/Mode) to a weaker
value. The rules of preflight's "Check the inputs" task that apply with the
hardening on are evaluated here the way gpufleet.nvidia.check_inputs does, with
Ansible's templar and the role's defaults: refused values name both variables,
and values as strict as the hardening or stricter (or anything with the hardening
off) pass. The bad-input table (tests/unit/bad_inputs/cases_mig.py) runs the
refusals through the role itself.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    LOADER, _resolved, load, role_variables, trust)

HARDENED = {'nvidia_driver_device_file_hardening': True}


def _rules():
    task = [t for t in load('nvidia_driver', 'tasks', 'preflight.yml') if t.get('name') == 'Check the inputs'][0]
    rules = task['gpufleet.nvidia.check_inputs']['rules']
    return [r for r in rules if 'device_file_hardening' in str(r.get('when', ''))]


def _listed(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _refusals(**inputs):
    """Messages of the hardening rules that the inputs break, as check_inputs words them."""
    variables = role_variables('nvidia_driver', 'main.yml')
    variables.update(trust(inputs))
    templar = Templar(loader=LOADER, variables=_resolved(variables))

    def holds(conditions):
        return all(templar.evaluate_conditional(trust_as_template(c)) for c in conditions)

    messages = []
    for rule in _rules():
        try:
            if not holds(_listed(rule.get('when'))) or holds(_listed(rule['that'])):
                continue
        except Exception:  # pylint: disable=broad-except
            # check_inputs counts a rule whose test breaks on the value as broken.
            pass
        messages.append('%s %s' % (rule['var'], ' '.join(templar.template(trust_as_template(rule['msg'])).split())))
    return messages


def test_the_rules_cover_the_options_the_hardening_writes():
    text = ' '.join(str(rule) for rule in _rules())
    for option in ('NVreg_RestrictProfilingToAdminUsers', 'NVreg_DeviceFileUID', 'NVreg_DeviceFileGID',
                   'NVreg_DeviceFileMode'):
        assert option in text, option
    hardening = load('nvidia_driver', 'vars', 'main.yml')['__nvidia_driver_hardening_options']['nvidia']
    assert sorted(hardening) == ['NVreg_DeviceFileGID', 'NVreg_DeviceFileMode', 'NVreg_DeviceFileUID',
                                 'NVreg_RestrictProfilingToAdminUsers']


@pytest.mark.parametrize('inputs, variable, fragment', [
    ({'nvidia_driver_device_file_mode': '0666'}, 'nvidia_driver_device_file_mode', 'its last digit'),
    ({'nvidia_driver_device_file_mode': '0661'}, 'nvidia_driver_device_file_mode', 'its last digit'),
    ({'nvidia_driver_device_file_mode': '604'}, 'nvidia_driver_device_file_mode', 'its last digit'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_RestrictProfilingToAdminUsers': 0}}},
     'nvidia_driver_module_options', 'NVreg_RestrictProfilingToAdminUsers to another value than 1'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_RestrictProfilingToAdminUsers': '0'}}},
     'nvidia_driver_module_options', 'NVreg_RestrictProfilingToAdminUsers to another value than 1'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileUID': 1000}}},
     'nvidia_driver_module_options', 'NVreg_DeviceFileUID'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileGID': 0}}},
     'nvidia_driver_module_options', 'NVreg_DeviceFileGID'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0666'}}},
     'nvidia_driver_module_options', 'grants more than nvidia_driver_device_file_mode ("0660")'),
    # 438 and "438" are 0666 as the kernel reads an option without a leading 0.
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': 438}}},
     'nvidia_driver_module_options', 'NVreg_DeviceFileMode'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '438'}}},
     'nvidia_driver_module_options', 'NVreg_DeviceFileMode'),
    ({'nvidia_driver_device_file_mode': '0600', 'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0640'}}},
     'nvidia_driver_module_options', 'grants more than nvidia_driver_device_file_mode ("0600")'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0670'}}},
     'nvidia_driver_module_options', 'NVreg_DeviceFileMode'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0x1b0'}}},
     'nvidia_driver_module_options', 'no file mode'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': 4096}}},
     'nvidia_driver_module_options', 'no file mode'),
    ({'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': 'rw-rw----'}}},
     'nvidia_driver_module_options', 'no file mode'),
])
def test_overrides_weaker_than_the_hardening_are_refused_naming_both_variables(inputs, variable, fragment):
    messages = _refusals(**dict(HARDENED, **inputs))
    assert len(messages) == 1, messages
    assert messages[0].startswith(variable + ' ')
    assert fragment in messages[0]
    assert 'nvidia_driver_device_file_hardening' in messages[0]


@pytest.mark.parametrize('inputs', [
    {},
    {'nvidia_driver_device_file_mode': '0640'},
    {'nvidia_driver_device_file_mode': '600'},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_RestrictProfilingToAdminUsers': 1}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_RestrictProfilingToAdminUsers': '1'}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileUID': 0}}},
    # The same mode in the three spellings the kernel reads, and stricter ones.
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0660'}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': 432}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '432'}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': '0600'}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_DeviceFileMode': 0}}},
    {'nvidia_driver_module_options': {'nvidia': {'NVreg_EnableStreamMemOPs': 1},
                                      'nvidia_uvm': {'uvm_perf_prefetch_enable': 0}}},
])
def test_overrides_as_strict_as_the_hardening_pass(inputs):
    assert _refusals(**dict(HARDENED, **inputs)) == []


def test_without_the_hardening_the_options_are_the_operators():
    assert _refusals(nvidia_driver_device_file_mode='0666', nvidia_driver_module_options={'nvidia': {
        'NVreg_RestrictProfilingToAdminUsers': 0, 'NVreg_DeviceFileUID': 1000, 'NVreg_DeviceFileGID': 44,
        'NVreg_DeviceFileMode': '0666'}}) == []
