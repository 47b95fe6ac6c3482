#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/gpu_health_report.py);
# this file carries its documentation.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_health_report
short_description: Write the GPU fleet health report on the controller
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - Collects the C(gpu_health) result the gpufleet.nvidia.health role sets on each host of O(hosts) and writes, into
    O(dest) on the controller, C(gpu-health.json) for machines and C(gpu-health.html), one self-contained page for
    people. Hosts without a result (unreachable, or failed before the health stage) are reported as without data.
  - "The page holds fleet totals per GPU model and per driver version, the findings grouped by code and action
    (with how many hosts and GPUs each has), every finding coloured by severity with its action, source, evidence and
    advice, one row per host (status, finding counts, validation checks with their reasons) and one row per GPU
    (model, driver, CUDA, VBIOS, InfoROM, GSP firmware, memory used and total, temperature, power draw and limit,
    persistence, MIG and ECC modes, throttle reasons). Every table sorts by a click on a column, and filters narrow
    the page to hosts by name or status and the findings by action, so that a fleet of hundreds of nodes stays
    readable."
  - "Fleet checks, which need every node: the VBIOS, InfoROM, GSP firmware and driver versions per GPU model, with
    the odd ones out (C(fleet_version_mismatch)), and GPUs far from the median of their model - idle temperature,
    enforced power limit, maximum SM clock (C(fleet_outlier_temperature), C(fleet_outlier_power_limit),
    C(fleet_outlier_clocks)). They are relative, so they need no absolute threshold; they are reported with
    C(fleet=true) and never make a node unhealthy on their own (the odd one out may be the only one that is right)."
  - The page loads nothing. Its style and script are inline, it names no external URL, font or image, and its
    Content-Security-Policy forbids any fetch, so it opens the same offline, attached to a ticket, or from AWX.
  - Returns RV(table), a compact text table for the job output, and RV(stats), the data for M(ansible.builtin.set_stats).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
options:
  hosts:
    description: Inventory names of the hosts of the report, usually C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  dest:
    description:
      - Directory on the controller for the two files, created when missing; relative paths are relative to the
        directory C(ansible-playbook) runs in. Existing files are replaced in one rename each.
      - Empty, nothing is written (the table and stats are still returned).
    type: str
    default: ""
  fact:
    description: Host variable holding each host's result.
    type: str
    default: gpu_health
  title:
    description: Title of the page.
    type: str
    default: GPU fleet health
  generated:
    description: Time stamp shown as the generation time; by default the current UTC time.
    type: str
  thresholds:
    description:
      - Thresholds of the health catalog for the fleet checks (C(fleet_min_gpus), C(fleet_outlier_temperature_c),
        C(fleet_outlier_power_limit_percent), C(fleet_outlier_clocks_percent)), in the form of
        M(gpufleet.nvidia.nvidia_gpu_health)'s O(gpufleet.nvidia.nvidia_gpu_health#module:thresholds); the health role
        passes C(health_thresholds). An unknown name fails the task.
    type: dict
    default: {}
    version_added: 0.3.0
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is written; the table and stats are returned.
  diff_mode:
    support: none
  idempotent:
    support: N/A
    details:
      - The report is output, not managed state; each run replaces it and reports no change.
  action:
    description: Runs on the controller only.
    support: full
seealso:
  - module: gpufleet.nvidia.nvidia_gpu_health
  - module: gpufleet.nvidia.gpu_validation
"""

EXAMPLES = r"""
- name: Write the fleet report
  gpufleet.nvidia.gpu_health_report:
    hosts: "{{ ansible_play_hosts_all }}"
    dest: ./gpu-health-report
  run_once: true
  register: report

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ report.table }}"
  run_once: true

- name: Hand the summary to AWX
  ansible.builtin.set_stats:
    data:
      gpu_health: "{{ report.stats }}"
  run_once: true
"""

RETURN = r"""
table:
  description: Lines of the fleet table, unhealthy hosts first, then the findings of each unhealthy host and a total.
  returned: always
  type: list
  elements: str
stats:
  description:
    - Totals, the files, the unhealthy hosts and those without data, and per host its status, finding codes and
      failed checks.
  returned: always
  type: dict
files:
  description: Paths of the files written, C(json) and C(html); empty when nothing was written.
  returned: always
  type: dict
  sample: {"json": "/srv/awx/project/gpu-health-report/gpu-health.json",
           "html": "/srv/awx/project/gpu-health-report/gpu-health.html"}
totals:
  description: Hosts (healthy, unhealthy, without data), GPUs, findings per severity and failed checks.
  returned: always
  type: dict
unhealthy_hosts:
  description: Hosts with a finding at or above the role's severity threshold or a failed check.
  returned: always
  type: list
  elements: str
hosts_without_data:
  description: Hosts that gave no result.
  returned: always
  type: list
  elements: str
"""
