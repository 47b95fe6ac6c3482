# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: health_drain_plan
short_description: Which unhealthy nodes to drain in one run, within a share of the fleet
version_added: 0.3.0
author: gpufleet maintainers (@gpufleet)
description:
  - The health role's drain brake. Takes, per host of the play, its C(gpu_health) result and its C(drain_state)
    (the gpufleet.nvidia.drain role's C(read) entry point) and returns which unhealthy nodes to drain now and which
    to leave alone, each with why.
  - Nodes already drained are not drained again and do not count against the brake - by this collection
    (C(already)) or by someone else (C(foreign); never touched, never undrained).
  - The others are drained costliest need first - the highest action of the ladder among the findings that make the
    node unhealthy (V(rma), V(reboot), V(reset), V(drain); a failed validation check counts as V(drain)), then the
    most critical findings, then by name - up to O(share) percent of O(total), rounded down; the rest are C(braked).
options:
  _input:
    description: Host names mapped to C({healthy, findings, checks, drain_state}).
    type: dict
    required: true
  share:
    description: The most nodes drained in one run, in percent of O(total).
    type: int
    required: true
  total:
    description: Number of hosts the share is taken of (the play's hosts).
    type: int
    required: true
  fail_on:
    description: The lowest finding severity that makes a node unhealthy (the health role's C(health_fail_on)).
    type: str
    default: warning
"""

EXAMPLES = r"""
- name: Plan the drains of this run
  ansible.builtin.set_fact:
    plan: >-
      {{ dict(ansible_play_hosts | map('extract', hostvars, 'gpu_health') | zip(ansible_play_hosts))
         | gpufleet.nvidia.health_drain_plan(10, ansible_play_hosts_all | length) }}
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - C(drain) and C(braked) - lists of C({host, need}); C(already) and C(foreign) - lists of C({host, reason});
      C(limit) - how many nodes this run may drain; C(share) and C(total) as given; C(message) - one line per node
      left alone and why, after a line on the brake.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.fleet_health import drain_plan


def health_drain_plan(nodes, share, total, fail_on='warning'):
    if not isinstance(nodes, dict):
        raise AnsibleFilterError('health_drain_plan: the input must map host names to their gpu_health and drain_state')
    try:
        return drain_plan(nodes, int(share), int(total), fail_on)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('health_drain_plan: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'health_drain_plan': health_drain_plan}
