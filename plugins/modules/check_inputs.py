#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/check_inputs.py);
# this file carries its documentation.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: check_inputs
short_description: Check every input rule of a role at once, on the controller
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - Evaluates each rule's O(rules[].that) conditions (where its O(rules[].when) conditions hold) and fails with
    every broken rule in one message, each naming its variable and an excerpt of the value given (JSON, cut to 60
    characters with the full length noted).
  - What a type cannot say (a driver branch of three or four digits, a fingerprint of 40 hexadecimal digits, two
    inputs that only make sense together) belongs here; types and choices belong in C(meta/argument_specs.yml).
  - A condition that cannot even be evaluated on the value given (a mapping where a number is wanted) counts as
    that rule broken.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.CONTROLLER_ONLY
options:
  rules:
    description: The rules, checked in order; all are checked even when one is broken.
    type: list
    elements: dict
    required: true
    suboptions:
      var:
        description: The variable (or expression) the rule is about, named in the message and shown in the excerpt.
        type: str
        required: true
      that:
        description: Conditions (as in M(ansible.builtin.assert)) that must all hold.
        type: list
        elements: str
        required: true
      msg:
        description: What the variable must be, following its name (V(must be three or four digits, such as "580")).
        type: str
        required: true
      when:
        description: Conditions under which the rule applies.
        type: list
        elements: str
      secret:
        description: Do not show the value in the message (passwords, private keys, password hashes).
        type: bool
        default: false
seealso:
  - module: ansible.builtin.assert
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the inputs
  gpufleet.nvidia.check_inputs:
    rules:
      - var: nvidia_driver_branch
        that: nvidia_driver_branch | string is match('^[0-9]{3,4}$')
        msg: must be a driver branch of three or four digits, such as "580" (quote it in YAML)
      - var: nvidia_driver_secure_boot_mok_cert
        that: nvidia_driver_secure_boot_mok_cert | length > 0
        when: nvidia_driver_secure_boot_mok_key | length > 0
        msg: must name the certificate of the key in nvidia_driver_secure_boot_mok_key
"""

RETURN = r"""
errors:
  description: The broken rules, each with C(var), C(msg) and C(value) (the excerpt).
  returned: always
  type: list
  elements: dict
checked:
  description: How many rules were given.
  returned: always
  type: int
"""
