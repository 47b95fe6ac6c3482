# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Bad inputs that no GPU could satisfy, and inputs that would undo the driver's hardening.

First section, MIG: a layout with a profile the GPU does not offer, refused
before MIG mode is enabled. The role reads nvidia-smi from PATH, which the
cases cannot point at a GPU, so the GPU cases drive the check the role's
preflight runs, gpufleet.nvidia.nvidia_mig with validate_only, through its
nvidia_smi_path: fixtures() prepares simulated A100 hosts (tests/nvidia_sim,
MIG mode on and off) and a wrapper per host that runs the simulated nvidia-smi
on it. tests/unit/roles/test_mig_layout_preflight.py runs the whole role on
the simulator for the same refusals. The role's own new input,
mig_gpu_profiles, is refused in its input checks.

Second section, nvidia_driver with nvidia_driver_device_file_hardening on: a
device file mode with permissions for others, and module options that set an
option the hardening sets (NVreg_RestrictProfilingToAdminUsers,
NVreg_DeviceFileUID/GID/Mode) to a weaker value. Each message names both the
variable and nvidia_driver_device_file_hardening; the cases alternate which of
the two they look for.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shlex

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.cases import module, role

LAYOUT = [{'profiles': {'3g.40gb': 2}}]
HARDENED = {'nvidia_driver_device_file_hardening': True}


def _smi_wrapper(host):
    """An executable that runs the simulated nvidia-smi on one simulated host, for nvidia_smi_path."""
    from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import SIM_BIN
    path = os.path.join(host.root, 'nvidia-smi')
    exports = ''.join('export %s=%s\n' % (name, shlex.quote(host.env[name]))
                      for name in ('NVIDIA_SIM_ROOT', 'NVIDIA_SIM_LIB', 'NVIDIA_SIM_TIME', 'TZ'))
    with open(path, 'w') as handle:
        handle.write('#!/bin/sh\n%sexec %s "$@"\n' % (exports, shlex.quote(os.path.join(SIM_BIN, 'nvidia-smi'))))
    os.chmod(path, 0o755)
    return path


def fixtures(root):
    """Placeholders: nvidia-smi of a simulated A100 40GB with MIG mode on, and of one with MIG mode off."""
    from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import make_host
    mig_on = make_host(os.path.join(root, 'sim-a100-mig-on'), 'a100_40gb_mig')
    mig_off = make_host(os.path.join(root, 'sim-a100-mig-off'), 'a100_40gb_mig')
    turned_off = mig_off.smi('-i', '0', '-mig', '0')
    assert turned_off.returncode == 0, turned_off.stdout + turned_off.stderr
    return {'@SMI_A100_MIG_ON@': _smi_wrapper(mig_on), '@SMI_A100_MIG_OFF@': _smi_wrapper(mig_off)}


CASES = [
    # --- mig: profiles the GPU does not offer --------------------------------------------------------
    # MIG mode on: checked against the GPU's own nvidia-smi mig -lgip.
    module('mig-validate-unknown-profile-a100-mig-on', 'nvidia_mig',
           {'layouts': [{'profiles': {'1g.5gb': 2, '5g.30gb': 1}}], 'validate_only': True,
            'nvidia_smi_path': '@SMI_A100_MIG_ON@'}, 'layouts[1]'),
    # MIG mode off: no -lgip; checked against the collection's table for the A100 40GB.
    module('mig-validate-unknown-profile-a100-mig-off', 'nvidia_mig',
           {'layouts': [{'profiles': {'1g.12gb': 7}}], 'validate_only': True,
            'nvidia_smi_path': '@SMI_A100_MIG_OFF@'}, 'layouts[1]'),
    module('mig-validate-too-many-slices-a100-mig-off', 'nvidia_mig',
           {'layouts': [{'gpus': ['0'], 'profiles': {'4g.20gb': 1, '3g.20gb': 1, '1g.5gb': 1}}], 'validate_only': True,
            'nvidia_smi_path': '@SMI_A100_MIG_OFF@'}, 'layouts[1]'),
    module('mig-validate-gpu-profiles-count-zero', 'nvidia_mig',
           {'layouts': LAYOUT, 'validate_only': True, 'gpu_profiles': {'NVIDIA GB200': {'1g.23gb': 0}},
            'nvidia_smi_path': '@SMI_A100_MIG_OFF@'}, 'gpu_profiles'),
    role('mig-gpu-profiles-list', 'mig', {'mig_layouts': LAYOUT, 'mig_gpu_profiles': ['NVIDIA GB200']},
         'mig_gpu_profiles'),
    role('mig-gpu-profiles-flat', 'mig', {'mig_layouts': LAYOUT, 'mig_gpu_profiles': {'NVIDIA GB200': 7}},
         'mig_gpu_profiles'),
    role('mig-gpu-profiles-count-zero', 'mig',
         {'mig_layouts': LAYOUT, 'mig_gpu_profiles': {'NVIDIA GB200': {'1g.23gb': 0}}}, 'mig_gpu_profiles'),
    role('mig-gpu-profiles-name', 'mig',
         {'mig_layouts': LAYOUT, 'mig_gpu_profiles': {'NVIDIA GB200': {'one slice': 7}}}, 'mig_gpu_profiles'),
    role('mig-gpu-profiles-empty-model', 'mig',
         {'mig_layouts': LAYOUT, 'mig_gpu_profiles': {'NVIDIA GB200': {}}}, 'mig_gpu_profiles'),

    # --- nvidia_driver: overrides that undo nvidia_driver_device_file_hardening -----------------------
    role('driver-hardening-mode-0666', 'nvidia_driver', dict(HARDENED, nvidia_driver_device_file_mode='0666'),
         'nvidia_driver_device_file_mode'),
    role('driver-hardening-mode-0604', 'nvidia_driver', dict(HARDENED, nvidia_driver_device_file_mode='0604'),
         'nvidia_driver_device_file_hardening'),
    role('driver-hardening-profiling-0', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_RestrictProfilingToAdminUsers': 0}}),
         'nvidia_driver_module_options'),
    role('driver-hardening-profiling-false', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_RestrictProfilingToAdminUsers': False}}),
         'nvidia_driver_device_file_hardening'),
    role('driver-hardening-option-mode-0666', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileMode': '0666'}}),
         'nvidia_driver_module_options'),
    # 438 is 0666 written in decimal, as the kernel reads an option without a leading 0.
    role('driver-hardening-option-mode-decimal', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileMode': 438}}),
         'nvidia_driver_device_file_hardening'),
    # Group write where nvidia_driver_device_file_mode grants the group read only.
    role('driver-hardening-option-mode-wider-group', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_device_file_mode='0640',
              nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileMode': '0660'}}),
         'nvidia_driver_device_file_mode'),
    role('driver-hardening-option-mode-hex', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileMode': '0x1b6'}}),
         'nvidia_driver_module_options'),
    role('driver-hardening-option-uid', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileUID': 1000}}),
         'nvidia_driver_module_options'),
    role('driver-hardening-option-gid', 'nvidia_driver',
         dict(HARDENED, nvidia_driver_module_options={'nvidia': {'NVreg_DeviceFileGID': 100}}),
         'nvidia_driver_device_file_group'),
]
