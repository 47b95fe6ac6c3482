# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: cuda_min_driver
short_description: Minimum NVIDIA Linux driver for a CUDA toolkit version
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the minimum Linux x86_64 driver version NVIDIA publishes for a CUDA toolkit release, from
    "Table 3 CUDA Toolkit and Corresponding Driver Versions" of the CUDA 13.2 release notes
    (CUDA 11.0 through 13.2).
  - C(X.Y) (or C(X.Y GA)) answers for the GA release; C(X.Y.Z) or C(X.Y Update N) answers for that update.
    An update the table does not list is an error rather than a guess, because a later update may need a newer driver.
  - With O(compat=minor), returns the driver branch from which the toolkit's whole major family runs under
    CUDA minor-version compatibility (13.x from 580, 12.x from 525, 11.x from 450), with the feature limits
    NVIDIA documents for that mode (for example no JIT of newer PTX).
  - The data lives in C(plugins/module_utils/cuda_matrix.py) of this collection.
options:
  _input:
    description:
      - CUDA toolkit version, as a string such as V("12.8"), V("12.8.1") or V("12.8 Update 1").
      - Numbers are refused because V(12.10) would silently become V(12.1).
    type: string
    required: true
  compat:
    description:
      - V(full) gives the driver the toolkit release requires for all of its features.
      - V(minor) gives the minimum driver branch for minor-version compatibility of the toolkit's major family.
    type: string
    choices: [full, minor]
    default: full
seealso:
  - plugin: gpufleet.nvidia.driver_branch
    plugin_type: filter
  - name: CUDA Toolkit release notes
    description: Table 3 (toolkit and driver versions) and Table 2 (minor-version compatibility).
    link: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
"""

EXAMPLES = r"""
- name: Refuse a toolkit the installed driver cannot run
  ansible.builtin.assert:
    that:
      - nvidia_driver_version is version('12.8' | gpufleet.nvidia.cuda_min_driver, '>=')
    fail_msg: "CUDA 12.8 needs driver {{ '12.8' | gpufleet.nvidia.cuda_min_driver }} or newer"

- name: Minimum driver of a specific update
  ansible.builtin.debug:
    msg: "{{ '12.8.1' | gpufleet.nvidia.cuda_min_driver }}"
    # => '570.124.06'

- name: Minimum driver branch under minor-version compatibility
  ansible.builtin.debug:
    msg: "{{ '13.1' | gpufleet.nvidia.cuda_min_driver(compat='minor') }}"
    # => '580'
"""

RETURN = r"""
_value:
  description:
    - The minimum driver version, for example V(570.26), or with O(compat=minor) a branch such as V(525).
    - Compare it with the C(version) test, never as a string.
  type: string
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cuda_matrix import (
    CudaVersionError,
    family_min_driver,
    toolkit_min_driver,
)

_COMPAT_CHOICES = ('full', 'minor')


def cuda_min_driver(value, compat='full'):
    if compat not in _COMPAT_CHOICES:
        raise AnsibleFilterError(
            'cuda_min_driver: compat must be one of %s, got %r' % (', '.join(_COMPAT_CHOICES), compat))
    try:
        if compat == 'minor':
            return family_min_driver(value)
        return toolkit_min_driver(value)
    except CudaVersionError as exc:
        raise AnsibleFilterError('cuda_min_driver: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'cuda_min_driver': cuda_min_driver}
