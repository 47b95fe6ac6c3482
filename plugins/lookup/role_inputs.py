# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: role_inputs
author: gpufleet maintainers (@gpufleet)
short_description: A role's or playbook's inputs, each converted once to its declared type
description:
  - Reads every option of one entry point of an argument spec (a role's C(meta/argument_specs.yml), or a
    playbook's spec file) from the task's variables and converts it to the type the spec declares, with the
    rules of the collection (see C(docs/security.md), "Operator input").
  - Strings from AWX surveys, INI inventories and C(-e key=value) become what they say; the string V(false) is
    the boolean false. Values that cannot be converted fail the task with one message that names every such
    variable and what it accepts, so nothing after it runs.
  - Returns one mapping, keyed by each option's name less the prefix, for the role to keep in a fact
    (C(__<role>_inputs)) and read instead of the raw variables, which an extra variable would keep as strings.
options:
  _terms:
    description: The entry point of the spec to read (V(main) for a role's main tasks).
    type: list
    elements: str
    default: [main]
  spec_file:
    description:
      - The file that holds C(argument_specs). Default C(<role_path>/meta/argument_specs.yml) of the role
        whose task calls the lookup.
    type: path
  source:
    description:
      - V(role) reads the calling role's spec (or O(spec_file)); V(playbooks) reads the collection's own
        C(playbooks/vars/argument_specs.yml), where the collection's playbooks declare their inputs (found next to
        this plugin, so that it works the same from a checkout, an installed collection and an imported playbook).
    type: str
    choices: [role, playbooks]
    default: role
  values:
    description:
      - Inputs given directly (name to value), read before the task's variables and converted the same way, for
        a caller that checks values it has not set as variables (the generated bad-input suite checks every
        spelling of every input this way, one loop per entry point).
    type: dict
    default: {}
  prefix:
    description:
      - Taken off each option's name for the key in the result. Default the role's name and C(_).
    type: str
"""

EXAMPLES = r"""
- name: Read the inputs
  ansible.builtin.set_fact:
    __nvidia_driver_inputs: "{{ lookup('gpufleet.nvidia.role_inputs', 'main') }}"

- name: Read the playbook's inputs
  ansible.builtin.set_fact:
    __gpufleet_upgrade_inputs: >-
      {{ lookup('gpufleet.nvidia.role_inputs', 'driver_upgrade',
                prefix='gpufleet_upgrade_') }}
"""

RETURN = r"""
_raw:
  description: One mapping from each defined option's name (less the prefix) to its typed value.
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.module_utils.common.yaml import yaml_load
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils.typed_inputs import convert_all


PLAYBOOK_SPECS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              'playbooks', 'vars', 'argument_specs.yml')


# Parsed specs by path and modification time: a play reads the same few
# specs once per host and role entry.
_SPECS = {}


def _read_spec(path):
    try:
        key = (path, os.stat(path).st_mtime_ns)
        if key not in _SPECS:
            with open(path) as handle:
                _SPECS[key] = yaml_load(handle) or {}
        return _SPECS[key]
    except Exception as error:  # pylint: disable=broad-except  # unreadable or not YAML: the spec's error
        raise AnsibleLookupError('cannot read the argument spec %s: %s' % (path, error))


def load_spec(path, entry):
    """The options of an argument spec file, as the entry point declares them."""
    data = _read_spec(path)
    specs = data.get('argument_specs') or {}
    if entry not in specs:
        raise AnsibleLookupError('%s has no entry point %r (it has: %s)' % (path, entry, ', '.join(sorted(specs))))
    # The role's shared variables (vars/main.yml) may read an option that
    # another entry point declares: every entry's options are converted, the
    # named entry's declaration first.
    options = {}
    for name in sorted(specs):
        for option, declared in (specs[name].get('options') or {}).items():
            # Required only where the entry itself requires it.
            options[option] = dict(declared or {}, required=False)
    options.update(specs[entry].get('options') or {})
    return options


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        entries = terms or ['main']
        role_path = variables.get('role_path')
        spec_file = self.get_option('spec_file')
        if self.get_option('source') == 'playbooks':
            spec_file = PLAYBOOK_SPECS
        elif not spec_file:
            if not role_path:
                raise AnsibleLookupError('role_inputs is called outside a role: name the spec_file')
            spec_file = os.path.join(role_path, 'meta', 'argument_specs.yml')
        prefix = self.get_option('prefix')
        if prefix is None:
            prefix = os.path.basename(role_path.rstrip('/')) + '_' if role_path else ''

        given = self.get_option('values') or {}

        def read(name):
            if name in given:
                return True, self._templar.template(given[name])
            if name not in variables:
                return False, None
            try:
                return True, self._templar.template(variables[name])
            except AnsibleError as error:
                # An input whose own template fails (an undefined variable in
                # the inventory's expression) is that input's error.
                raise AnsibleLookupError('%s cannot be read: %s' % (name, error.message))

        results = []
        for entry in entries:
            typed, errors = convert_all(load_spec(spec_file, entry), read, prefix)
            if errors:
                raise AnsibleLookupError('Input refused before any change: %s.' % '; '.join(errors))
            results.append(typed)
        return results
