# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: container_toolkit_cves
short_description: Published CVEs that affect an NVIDIA Container Toolkit version
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the entries of a CVE table (O(cves)) that a toolkit version is still exposed to, oldest fix first.
  - The table is data, not code - the container_toolkit role keeps NVIDIA's bulletins in
    C(roles/container_toolkit/vars/cves.yml) (every toolkit CVE since 2024, with the fixing release, CVSS, bulletin
    and mitigation).
  - A pre-release (C(1.17.8~rc.1)) counts as older than its release, because only the release is known to carry
    the fix.
  - Fails with a clear message for anything that is not a toolkit version, and for a table entry without an
    C(id) or a C(fixed_in) release.
options:
  _input:
    description:
      - Toolkit version, such as V(1.17.7), or a package version such as V(1.17.7-1) or V(1.18.0~rc.3-1).
    type: string
    required: true
  cves:
    description:
      - The CVE table, a list of entries with C(id), C(fixed_in) (the first toolkit release with the fix) and
        optionally C(summary), C(mitigation) (toolkit settings) and any other key, which is returned as given.
    type: list
    elements: dictionary
    required: true
seealso:
  - name: NVIDIA product security bulletins
    description: Security bulletins for the NVIDIA Container Toolkit.
    link: https://www.nvidia.com/en-us/security/
"""

EXAMPLES = r"""
- name: Refuse a toolkit pin with known container escapes
  ansible.builtin.assert:
    that: container_toolkit_version | gpufleet.nvidia.container_toolkit_cves(cve_table) | length == 0
    fail_msg: >-
      {{ container_toolkit_version }} is affected by
      {{ container_toolkit_version | gpufleet.nvidia.container_toolkit_cves(cve_table) | map(attribute='id') | join(', ') }}
  vars:
    cve_table:
      - {id: CVE-2025-23266, fixed_in: 1.17.8, mitigation: {features.disable-cuda-compat-lib-hook: true}}
"""

RETURN = r"""
_value:
  description: The entries of O(cves) the version is affected by, oldest fix first; empty when it is affected by none.
  type: list
  elements: dictionary
  contains:
    id:
      description: CVE identifier.
      type: string
      sample: CVE-2025-23266
    fixed_in:
      description: First toolkit release that fixes it.
      type: string
      sample: 1.17.8
    summary:
      description: What an attacker can do, in one sentence.
      type: string
    mitigation:
      description:
        - Toolkit settings (C(nvidia-ctk config --set) keys and values) that NVIDIA documents as a mitigation for
          hosts that cannot upgrade, or V(null) when there is none.
      type: dictionary
"""

import copy
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.six import string_types

_VERSION = re.compile(r'^v?(\d+)\.(\d+)\.(\d+)(~[0-9A-Za-z.]+)?(-[0-9A-Za-z.+~]+)?$')


def _version_key(text):
    """(major, minor, patch, released): a pre-release sorts before its release."""
    match = _VERSION.match(text.strip())
    if not match:
        raise AnsibleFilterError(
            'container_toolkit_cves: %r is not an NVIDIA Container Toolkit version such as 1.17.8' % (text[:60],))
    major, minor, patch, prerelease = match.group(1, 2, 3, 4)
    return int(major), int(minor), int(patch), 0 if prerelease else 1


def _entries(cves):
    if not isinstance(cves, (list, tuple)):
        raise AnsibleFilterError('container_toolkit_cves: cves must be the list of CVE entries, not %s'
                                 % type(cves).__name__)
    entries = []
    for number, cve in enumerate(cves, 1):
        if not isinstance(cve, dict) or not cve.get('id') or not isinstance(cve.get('fixed_in'), string_types):
            raise AnsibleFilterError('container_toolkit_cves: entry %d of cves needs an id and a fixed_in release '
                                     '(quoted), got %r' % (number, cve))
        entries.append((_version_key(cve['fixed_in']), cve))
    return sorted(entries, key=lambda item: item[0])


def container_toolkit_cves(version, cves=None):
    if not isinstance(version, string_types):
        raise AnsibleFilterError(
            'container_toolkit_cves: give the version as a string (%r is a %s)' % (version, type(version).__name__))
    if cves is None:
        raise AnsibleFilterError('container_toolkit_cves: name the CVE table, version | '
                                 'gpufleet.nvidia.container_toolkit_cves(cves)')
    key = _version_key(version)
    return [dict(copy.deepcopy(dict(cve)), mitigation=copy.deepcopy(cve.get('mitigation')))
            for fixed, cve in _entries(cves) if key < fixed]


class FilterModule(object):
    def filters(self):
        return {'container_toolkit_cves': container_toolkit_cves}
