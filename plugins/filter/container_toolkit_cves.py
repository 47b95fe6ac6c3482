# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: container_toolkit_cves
short_description: Published container-escape CVEs that affect an NVIDIA Container Toolkit version
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns the NVIDIA Container Toolkit CVEs that a toolkit version is still exposed to, oldest fix first.
  - Covers CVE-2024-0132 (fixed in 1.16.2), CVE-2025-23359 (fixed in 1.17.4), CVE-2025-23266 and CVE-2025-23267
    (both fixed in 1.17.8), from NVIDIA's security bulletins.
  - A pre-release (C(1.17.8~rc.1)) counts as older than its release, because only the release is known to carry
    the fix.
  - Fails with a clear message for anything that is not a toolkit version.
options:
  _input:
    description:
      - Toolkit version, such as V(1.17.7), or a package version such as V(1.17.7-1) or V(1.18.0~rc.3-1).
    type: string
    required: true
seealso:
  - name: NVIDIA product security bulletins
    description: Security bulletins for the NVIDIA Container Toolkit.
    link: https://www.nvidia.com/en-us/security/
"""

EXAMPLES = r"""
- name: Refuse a toolkit pin with known container escapes
  ansible.builtin.assert:
    that: container_toolkit_version | gpufleet.nvidia.container_toolkit_cves | length == 0
    fail_msg: >-
      {{ container_toolkit_version }} is affected by
      {{ container_toolkit_version | gpufleet.nvidia.container_toolkit_cves | map(attribute='id') | join(', ') }}

- name: Settings that mitigate what an accepted old version is exposed to
  ansible.builtin.debug:
    msg: "{{ '1.17.7' | gpufleet.nvidia.container_toolkit_cves | map(attribute='mitigation') | select | list }}"
    # => [{'features.disable-cuda-compat-lib-hook': True}]
"""

RETURN = r"""
_value:
  description: One entry per CVE the version is affected by; empty when it is affected by none.
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

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.six import string_types

# From NVIDIA's security bulletins (RELIABILITY-SECURITY-FACTS C.3), oldest fix first.
CONTAINER_TOOLKIT_CVES = (
    {
        'id': 'CVE-2024-0132',
        'fixed_in': '1.16.2',
        'summary': 'time-of-check/time-of-use race: a crafted container image can reach the host file system '
                   '(CVSS 9.0)',
        'mitigation': None,
    },
    {
        'id': 'CVE-2025-23359',
        'fixed_in': '1.17.4',
        'summary': 'bypass of the CVE-2024-0132 fix: a crafted container image can reach the host file system '
                   '(CVSS 8.3)',
        'mitigation': None,
    },
    {
        'id': 'CVE-2025-23266',
        'fixed_in': '1.17.8',
        'summary': '"NVIDIAScape": the enable-cuda-compat createContainer hook honours LD_PRELOAD from the image, '
                   'giving a container root on the host (CVSS 9.0)',
        'mitigation': {'features.disable-cuda-compat-lib-hook': True},
    },
    {
        'id': 'CVE-2025-23267',
        'fixed_in': '1.17.8',
        'summary': 'the update-ldcache hook follows symbolic links from the image, allowing data tampering '
                   'and denial of service on the host',
        'mitigation': None,
    },
)

_VERSION = re.compile(r'^v?(\d+)\.(\d+)\.(\d+)(~[0-9A-Za-z.]+)?(-[0-9A-Za-z.+~]+)?$')


def _version_key(text):
    """(major, minor, patch, released): a pre-release sorts before its release."""
    match = _VERSION.match(text.strip())
    if not match:
        raise AnsibleFilterError(
            'container_toolkit_cves: %r is not an NVIDIA Container Toolkit version such as 1.17.8' % (text,))
    major, minor, patch, prerelease = match.group(1, 2, 3, 4)
    return int(major), int(minor), int(patch), 0 if prerelease else 1


def container_toolkit_cves(version):
    if not isinstance(version, string_types):
        raise AnsibleFilterError(
            'container_toolkit_cves: give the version as a string (%r is a %s)' % (version, type(version).__name__))
    key = _version_key(version)
    return [dict(cve, mitigation=dict(cve['mitigation']) if cve['mitigation'] else None)
            for cve in CONTAINER_TOOLKIT_CVES if key < _version_key(cve['fixed_in'])]


class FilterModule(object):
    def filters(self):
        return {'container_toolkit_cves': container_toolkit_cves}
