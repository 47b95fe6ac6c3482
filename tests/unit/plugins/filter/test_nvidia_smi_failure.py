# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_smi_failure: a registered command result classified like the
modules classify nvidia-smi (module_utils/nvidia_smi_failures.py), cases as
data: (registered result, expected reason)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.nvidia_smi_failure import FilterModule
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import HINTS

nvidia_smi_failure = FilterModule().filters()['nvidia_smi_failure']


@pytest.mark.parametrize('result, reason', [
    ({'rc': 0, 'stdout': '0, Completed, Success\n1, Completed, Success', 'stderr': ''}, None),
    # A driver older than the field.
    ({'rc': 2, 'stdout': 'Field "fabric.state" is not a valid field to query.\n\n', 'stderr': ''}, 'invalid_argument'),
    ({'rc': 9, 'stdout': '',
      'stderr': "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                'Make sure that the latest NVIDIA driver is installed and running.'},
     'driver_not_loaded'),
    ({'rc': 18, 'stdout': 'Failed to initialize NVML: Driver/library version mismatch', 'stderr': ''}, 'version_mismatch'),
    # Reported with exit 0 by some branches: still a failure.
    ({'rc': 0, 'stdout': 'Failed to initialize NVML: Driver/library version mismatch', 'stderr': ''}, 'version_mismatch'),
    # coreutils timeout around nvidia-smi.
    ({'rc': 124, 'stdout': '', 'stderr': ''}, 'timeout'),
    # Killed after timeout's grace period: a shell says 137; run_command says -9 when nvidia-smi
    # ignored SIGTERM (stuck in the driver) and timeout's SIGKILL to its group ended timeout too.
    ({'rc': 137, 'stdout': '', 'stderr': '', 'cmd': ['timeout', '--kill-after=5', '60', 'nvidia-smi', '-L']}, 'timeout'),
    ({'rc': -9, 'stdout': '', 'stderr': '', 'cmd': ['/usr/bin/timeout', '--kill-after=5', '60', 'nvidia-smi']}, 'timeout'),
    ({'rc': -9, 'stdout': '', 'stderr': '', 'cmd': 'timeout 60 nvidia-smi -L'}, 'timeout'),
    # Without a timeout around it, a SIGKILL is someone else's (the OOM killer).
    ({'rc': -9, 'stdout': '', 'stderr': '', 'cmd': ['nvidia-smi', '-L']}, 'unknown'),
    ({'rc': 127, 'stdout': '', 'stderr': "timeout: failed to run command 'nvidia-smi': No such file or directory"},
     'not_installed'),
    # ansible.builtin.command could not start the program at all.
    ({'rc': 2, 'stdout': '', 'stderr': '', 'msg': "[Errno 2] No such file or directory: b'nvidia-smi'", 'failed': True},
     'not_installed'),
    ({'rc': 13, 'stdout': '', 'stderr': '', 'msg': "[Errno 13] Permission denied: b'nvidia-smi'", 'failed': True},
     'not_executable'),
    ({'rc': 1, 'stdout': '', 'stderr': 'something new'}, 'unknown'),
])
def test_results_are_classified_like_the_modules_do(result, reason):
    failure = nvidia_smi_failure(result)
    assert failure['reason'] == reason
    assert failure['hint'] == (HINTS[reason] if reason else None)
    assert set(failure) == {'reason', 'hint', 'pci_bus_id', 'rc'}


@pytest.mark.parametrize('value', [None, 'rc=2', ['rc', 2], {'changed': False}, {'rc': 'two'}])
def test_anything_but_a_command_result_is_refused(value):
    with pytest.raises(AnsibleFilterError, match='nvidia_smi_failure'):
        nvidia_smi_failure(value)
