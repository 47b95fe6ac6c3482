# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: driver_branch
short_description: Branch of an NVIDIA driver version
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the branch of an NVIDIA Linux driver version, its first component (V(570.195.03) gives V(570)).
  - Also reads distribution package versions such as V(570.195.03-0ubuntu1) or V(3:570.195.03-1).
  - Fails with a clear message for anything that is not a driver version.
options:
  _input:
    description: Driver version, for example from C(nvidia-smi --query-gpu=driver_version).
    type: string
    required: true
seealso:
  - plugin: gpufleet.nvidia.cuda_min_driver
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Pin the driver packages to the running branch
  ansible.builtin.set_fact:
    nvidia_driver_branch: "{{ '570.195.03' | gpufleet.nvidia.driver_branch }}"
    # => '570'

- name: Is the driver recent enough for any CUDA 13.x toolkit (minor-version compatibility)?
  ansible.builtin.debug:
    msg: "{{ (driver | gpufleet.nvidia.driver_branch) is version('13.0' | gpufleet.nvidia.cuda_min_driver(compat='minor'), '>=') }}"
  vars:
    driver: 580.95.05
"""

RETURN = r"""
_value:
  description: The driver branch, for example V(570).
  type: string
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cuda_matrix import (
    CudaVersionError,
    driver_branch as _driver_branch,
)


def driver_branch(value):
    try:
        return _driver_branch(value)
    except CudaVersionError as exc:
        raise AnsibleFilterError('driver_branch: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'driver_branch': driver_branch}
