# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):

    # Descriptions of the attributes; combine with one of the support fragments below.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a changed status prediction without modifying the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode with the same arguments, the second run reports no change.
      - This assumes that the GPUs and driver have not changed in a relevant way in between.
"""

    # Read-only modules that gather data.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
    details:
      - This action does not modify state.
"""

    # Actions that run on the controller alone and change nothing on a host
    # (check_inputs, plan): what they support, in one place.
    CONTROLLER_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
  action:
    description: Runs on the controller only.
    support: full
"""

    # Read-only modules that also set ansible_facts; use with INFO_MODULE.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    # Modules that only work on Linux hosts with the NVIDIA driver.
    PLATFORM_LINUX_NVIDIA = r"""
options: {}
attributes:
  platform:
    description: Target operating systems and hardware this module works on.
    support: full
    platforms: linux
    details:
      - Needs NVIDIA GPUs and the NVIDIA Linux driver; without them the module reports the classified reason.
"""

    # Modules listed in the "nvidia" action group of meta/runtime.yml.
    ACTIONGROUP_NVIDIA = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/gpufleet.nvidia.nvidia) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - gpufleet.nvidia.nvidia
"""
