# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):

    # Options shared by every module that runs nvidia-smi; the matching
    # argument spec is NVIDIA_SMI_ARGUMENT_SPEC in module_utils/nvidia_smi_runner.py.
    DOCUMENTATION = r"""
options:
  nvidia_smi_path:
    description:
      - Path to the C(nvidia-smi) binary on the target.
      - When not set, C(nvidia-smi) is looked up in E(PATH) and the standard system directories.
    type: path
  timeout:
    description:
      - Seconds each C(nvidia-smi) call may take before it is stopped (SIGTERM, then SIGKILL five seconds later).
      - A call that runs into the timeout fails with reason C(timeout); a hanging C(nvidia-smi) is treated as
        a finding about the node, not waited out.
      - Uses coreutils C(timeout) on the target; without it the module warns and runs unbounded.
    type: int
    default: 30
notes:
  - C(nvidia-smi) runs with E(LC_ALL=C) and E(LANG=C) so that its output parses the same on every host.
  - Failures are returned with a short C(reason) code and a hint; the codes are V(not_installed),
    V(not_executable), V(driver_not_loaded), V(no_devices), V(version_mismatch), V(nvml_missing),
    V(nvml_unknown_error), V(insufficient_permissions), V(inforom_corrupted), V(gpu_lost), V(gpu_requires_reset),
    V(gpu_unreadable), V(timeout), V(invalid_argument), V(not_supported), V(not_found), V(power_cables),
    V(kernel_interrupt), V(not_implemented), V(unparsable_output) and V(unknown).
  - "Where the message names a GPU (C(Unable to determine the device handle for GPU0000:07:00.0: GPU requires
    reset)), the failure also carries C(pci_bus_id), that GPU's normalised PCI bus id."
requirements:
  - The NVIDIA driver utilities (C(nvidia-smi)) on the target.
"""
