# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Loading and rendering a role's files the way Ansible does, shared by the
role tests: files are read with Ansible's DataLoader, and values rendered with
Ansible's own templar once marked as trusted templates."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.nvidia.plugins.module_utils.typed_inputs import convert_all

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES_DIR = os.path.join(REPO_ROOT, 'roles')
# Every role of the collection, so that a new role is covered by the generic checks.
ROLE_NAMES = tuple(sorted(os.path.basename(os.path.dirname(path)) for path in glob.glob(os.path.join(ROLES_DIR, '*', ''))))

LOADER = DataLoader()


def role_path(role, *parts):
    return os.path.join(ROLES_DIR, role, *parts)


def load(role, *parts):
    """A YAML file of the role, as Ansible loads it (values not yet trusted as templates)."""
    return LOADER.load_from_file(role_path(role, *parts))


def defaults(role):
    return load(role, 'defaults', 'main.yml')


def entry_points(role):
    return load(role, 'meta', 'argument_specs.yml')['argument_specs']


def is_internal(role):
    """Internal roles (such as repository) have entry points for other roles, and no main one."""
    return 'main' not in entry_points(role)


def options(role):
    """The options of the main entry point; for internal roles, of every entry point."""
    specs = entry_points(role)
    if 'main' in specs:
        return specs['main']['options']
    merged = {}
    for spec in specs.values():
        merged.update(spec.get('options', {}))
    return merged


def trust(value):
    """Strings (also inside lists and dicts) marked as templates, as Ansible treats role files."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trust(v) for v in value]
    if isinstance(value, dict):
        return dict((k, trust(v)) for k, v in value.items())
    return value


def plain(value):
    """Tagged Ansible values as plain Python ones, for comparisons and type checks."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return dict((plain(k), plain(v)) for k, v in value.items())
    return value


def render(value, variables):
    """value rendered by Ansible's templar with variables (not converted to plain values)."""
    return Templar(loader=LOADER, variables=_resolved(variables)).template(value)


class TypedInputs(object):
    """Stands for __<role>_inputs until a value is rendered: then it becomes what the role's entry task sets,
    converted by the same code (typed_inputs.convert_all) from the variables as they are at that moment, so
    that inputs a test sets after role_variables() are converted too."""

    def __init__(self, role):
        self.role = role

    # The merged options of every entry point, per role: read once, since
    # DataLoader deep-copies a cached file on every load and a test renders
    # thousands of values (most of the role tests' time went there).
    _options = {}

    def resolve(self, variables):
        options = self._options.get(self.role)
        if options is None:
            options = {}
            specs = entry_points(self.role)
            for name in sorted(specs):
                options.update(specs[name].get('options') or {})
            self._options[self.role] = options
        templar = Templar(loader=LOADER, variables=variables)

        def read(name):
            if name not in variables:
                return False, None
            value = variables[name]
            # Most inputs of a test are plain values: only templates go through the templar.
            return True, plain(templar.template(value) if _has_template(value) else value)

        typed, errors = convert_all(options, read, self.role + '_')
        # A test that renders one variable need not set every required input.
        errors = [error for error in errors if not error.endswith(' is required')]
        if errors:
            raise ValueError('; '.join(errors))
        return typed


def _has_template(value):
    if isinstance(value, str):
        return '{{' in value or '{%' in value
    if isinstance(value, (list, tuple)):
        return any(_has_template(item) for item in value)
    if isinstance(value, dict):
        return any(_has_template(key) or _has_template(item) for key, item in value.items())
    return False


def _resolved(variables):
    if not any(isinstance(value, TypedInputs) for value in variables.values()):
        return variables
    resolved = dict(variables)
    for name, value in variables.items():
        if isinstance(value, TypedInputs):
            resolved[name] = value.resolve(variables)
    return resolved


def role_variables(role, *vars_files):
    """The role's defaults overlaid with the named files of its vars/, all trusted as templates, and the
    typed inputs the role's entry task sets."""
    variables = dict(trust(defaults(role)))
    variables['__%s_inputs' % role] = TypedInputs(role)
    for name in vars_files:
        variables.update(trust(load(role, 'vars', name)))
    return variables


def rendered_defaults(role, **extra):
    """The role's defaults as plain values, templates rendered from the defaults and the extra variables."""
    role_defaults = trust(defaults(role))
    variables = dict(role_defaults, **trust(extra))
    return dict((name, plain(render(value, variables))) for name, value in role_defaults.items())
