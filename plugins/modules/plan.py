#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/plan.py);
# this file carries its documentation.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: plan
short_description: Show what a role's apply stages will change, once, on the controller
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - A role of this collection reads the host, works out its plan, and includes each apply stage only when the
    plan gives it work. This action shows that plan in one task, in place of a check-mode message beside each act
    task.
  - The entries of O(changes) that are empty, V(false) or null are left out; the others are the plan. With none
    left, the role has nothing to change.
  - The plan is printed (as a debug message is, without C(-v)) in check mode, and in a real run when it has
    something to change or a note. A converged host in a real run gets a quiet C(ok).
  - In check mode the task reports C(changed) when the plan has work, since the act tasks that check mode cannot
    run (C(apt-mark), C(nvidia-ctk)) are skipped there. In a real run it never reports C(changed); the act tasks do.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.CONTROLLER_ONLY
options:
  role:
    description: The role whose plan this is, named in the message.
    type: str
    required: true
  changes:
    description:
      - What the apply stages change, by subject (V(packages), V(holds), V(runtimes), ...), as strings, lists or
        booleans. Lists are joined with commas in the message.
    type: dict
    default: {}
  notes:
    description:
      - What the plan cannot show or do now, one sentence each (in check mode, what depends on a step check mode
        cannot take). Empty strings are left out, so that a note can be written as a conditional expression.
    type: list
    elements: str
    default: []
  warnings:
    description: Risks the operator accepted or must know about, shown as Ansible warnings. Empty strings are left out.
    type: list
    elements: str
    default: []
seealso:
  - module: ansible.builtin.debug
"""

EXAMPLES = r"""
- name: Plan
  gpufleet.nvidia.plan:
    role: container_toolkit
    changes:
      packages: "{{ __container_toolkit_packages_missing }}"
      runtimes: "{{ __container_toolkit_runtimes_unconfigured }}"
    notes:
      - "{{ 'The repository is not configured yet: a real run configures it first.' if not repository_ready else '' }}"
    warnings:
      - "{{ 'Version 1.17.7 is affected by CVE-2025-23266, accepted by container_toolkit_accept_vulnerable_version.'
            if __container_toolkit_open_cves else '' }}"
"""

RETURN = r"""
plan:
  description: The plan as shown.
  returned: always
  type: dict
  contains:
    role:
      description: The role.
      type: str
    changes:
      description: The entries of O(changes) that are work.
      type: dict
    notes:
      description: The notes that are not empty.
      type: list
      elements: str
msg:
  description: The plan in one sentence, followed by its notes.
  returned: always
  type: str
"""
