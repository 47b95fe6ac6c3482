#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/config_file.py);
# this file carries its documentation.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: config_file
short_description: Write a configuration file from a template or content, skipping files already in place
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - Renders O(src) (a template, found like M(ansible.builtin.template) finds it, with the same variables such as
    C(ansible_managed)) or takes O(content), and compares its SHA-1 checksum, O(mode), O(owner) and O(group) with
    O(known), a file record that M(gpufleet.nvidia.host_state_info) returned earlier in the play.
  - When they match, nothing runs on the host. Otherwise the file is written by M(ansible.builtin.copy), with its
    check mode, diff, O(validate) and atomic replacement; without O(known) that is always the case.
  - With O(state=absent) the file is removed, unless O(known) says it does not exist.
  - Pass a record read after every task that may have written the file; a stale record only costs the remote
    check a plain template would have made when it says the file differs, but would wrongly skip a file changed
    since it was read.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
options:
  dest:
    description: Path of the file on the host.
    type: path
    required: true
  src:
    description: Template to render, looked up in the role's C(templates/) directory like M(ansible.builtin.template).
    type: path
  content:
    description: The file's content, as is. Exactly one of O(src) and O(content) is required with O(state=present).
    type: str
  state:
    description: V(present) writes the file, V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: The file's mode, octal (V("0644")). Symbolic modes always take the remote path.
    type: raw
  owner:
    description: The file's owner.
    type: str
  group:
    description: The file's group.
    type: str
  validate:
    description: Command run on the new file before it replaces the old one, as in M(ansible.builtin.copy).
    type: str
  known:
    description:
      - The record of O(dest) from the RV(gpufleet.nvidia.host_state_info#module:files) return value, or that whole
        dictionary.
    type: dict
  compare_only:
    description:
      - Only compare the rendered file with O(known), which is then required, and return RV(differs); nothing runs on
        the host and the task never reports C(changed). A role's preflight uses it to plan its writes.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
  action:
    description: Runs on the controller and starts modules on the host only when the file must change.
    support: full
seealso:
  - module: gpufleet.nvidia.host_state_info
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Read the files the role manages
  gpufleet.nvidia.host_state_info:
    files: [/etc/modprobe.d/blacklist-nouveau.conf]
  register: state

- name: Blacklist nouveau
  gpufleet.nvidia.config_file:
    src: blacklist-nouveau.conf.j2
    dest: /etc/modprobe.d/blacklist-nouveau.conf
    owner: root
    group: root
    mode: "0644"
    known: "{{ state.files }}"
  notify: Rebuild the initramfs

- name: Plan the write in preflight, without touching the host
  gpufleet.nvidia.config_file:
    src: gres.conf.j2
    dest: /etc/slurm/gres.conf
    owner: root
    group: root
    mode: "0644"
    known: "{{ state.files }}"
    compare_only: true
  register: gres_conf_plan
"""

RETURN = r"""
dest:
  description: Path of the file.
  returned: always
  type: str
checksum:
  description: SHA-1 of the content written or found.
  returned: when O(state=present)
  type: str
differs:
  description: Whether the file on the host (as O(known) records it) differs from the one wanted.
  returned: when O(compare_only=true)
  type: bool
"""
