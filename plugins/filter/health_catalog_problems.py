# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: health_catalog_problems
short_description: What is wrong with an inventory's overrides of the health catalog
version_added: 0.3.0
author: gpufleet maintainers (@gpufleet)
description:
  - Checks C(health_thresholds) (the input) and C(health_check_overrides) (O(checks)) against the collection's health
    catalog (C(plugins/module_utils/health_catalog.py)) and returns one message per problem, each naming the unknown
    threshold, GPU model or finding code, or the value that is not a number, severity or action.
  - An empty list means the overrides are sound. The health role's preflight refuses any other.
options:
  _input:
    description: Thresholds by name, a number or a mapping of C(default) and GPU model keys to numbers.
    type: dict
    required: true
  checks:
    description: Finding codes mapped to C({severity, action}).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Refuse a misspelt threshold
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
  vars:
    problems: "{{ health_thresholds | gpufleet.nvidia.health_catalog_problems(health_check_overrides) }}"
"""

RETURN = r"""
_value:
  description: One message per problem, naming it; empty when the overrides are sound.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_catalog import check_overrides


def health_catalog_problems(thresholds, checks=None):
    if thresholds is not None and not isinstance(thresholds, dict):
        raise AnsibleFilterError('health_catalog_problems: the input must be a mapping of thresholds')
    return check_overrides(thresholds or {}, checks or {})


class FilterModule(object):
    def filters(self):
        return {'health_catalog_problems': health_catalog_problems}
