# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: from_toml
short_description: Parse a TOML document
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Parses TOML text (TOML 1.0) into a dictionary, on the controller, with Python's C(tomllib) (or C(tomli) on
    controllers without it).
  - Meant for configuration files read from managed hosts with M(ansible.builtin.slurp), such as containerd's
    C(config.toml) or the NVIDIA Container Toolkit's C(config.toml), so that their content is checked without
    needing a TOML parser on the hosts.
  - Dates and times become ISO 8601 strings, so the result can be passed to C(to_json).
  - Fails with the parser's message (line and column) when the text is not valid TOML.
options:
  _input:
    description: TOML text. An empty text gives an empty dictionary.
    type: string
    required: true
"""

EXAMPLES = r"""
- name: Read containerd's configuration
  ansible.builtin.slurp:
    src: /etc/containerd/config.toml
  register: containerd_config

- name: Show the runtimes containerd's CRI plugin knows
  ansible.builtin.debug:
    msg: >-
      {{ (containerd_config.content | b64decode | gpufleet.nvidia.from_toml)
         .plugins['io.containerd.grpc.v1.cri'].containerd.runtimes.keys() | list }}
"""

RETURN = r"""
_value:
  description: The document as a dictionary.
  type: dictionary
"""

import datetime

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native, to_text

try:
    import tomllib as _toml
except ImportError:  # Python < 3.11 controllers
    try:
        import tomli as _toml
    except ImportError:
        _toml = None


def _plain(value):
    if isinstance(value, dict):
        return dict((key, _plain(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return value


def from_toml(text):
    if _toml is None:
        raise AnsibleFilterError('from_toml: the controller needs Python 3.11 or newer, or the tomli package')
    try:
        return _plain(_toml.loads(to_text(text, errors='surrogate_or_strict')))
    except _toml.TOMLDecodeError as exc:
        raise AnsibleFilterError('from_toml: not valid TOML: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'from_toml': from_toml}
