# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every role's argument spec against its defaults, the variables its files
read, and its platform data; one set of checks for all roles under roles/.

Defaults that are templates (cuda_toolkit and cudnn follow the variables of
the roles they build on when those are defined) are rendered with Ansible's
own templar from the defaults alone, which must give the argument spec's
default. Role-specific checks live in the test files of each role.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    ROLE_NAMES, defaults, entry_points, is_internal, load, options, plain, rendered_defaults, role_path)

SPEC_TYPES = {'str': str, 'path': str, 'int': int, 'bool': bool, 'list': list, 'dict': dict}
# The spec checks of these roles never accepted the 'path' type (nor 'path'
# elements); kept so that nothing they refused before passes now.
ROLES_WITHOUT_PATH_TYPE = ('cuda_toolkit', 'cudnn', 'dcgm', 'dcgm_exporter')
# The only defaults that may be null ("detect on the host", "no expectation"),
# and whether the argument spec writes that null as "default: null" (True) or
# leaves the default out (False).
NULL_DEFAULTS = {
    'container_toolkit_runtimes': False,
    'dcgm_diag_level': True,
    'nvidia_driver_expected_gpu_count': False,
}
# Names with a role's prefix that its files may use without declaring them as
# inputs: facts the role sets for later roles and plays, and words of the
# collection's modules and filters.
NOT_INPUTS = {
    'container_toolkit': {'container_toolkit_installed_version', 'container_toolkit_configured_runtimes',
                          'container_toolkit_cdi_spec',
                          # The gpufleet.nvidia.container_toolkit_cves filter.
                          'container_toolkit_cves'},
    'cuda_toolkit': {'cuda_toolkit_installed', 'cuda_toolkit_default', 'cuda_toolkit_home',
                     'cuda_toolkit_forward_compat_versions', 'cuda_toolkit_nvcc_versions'},
    'cudnn': {'cudnn_installed_version', 'cudnn_installed_cuda_major', 'cudnn_packages'},
    'dcgm': {'dcgm_diag_result'},
    # The result of the read entry point, for the playbooks that decide whom to drain.
    'drain': {'drain_state'},
    # The gpufleet.nvidia.health_catalog_problems and health_drain_plan filters, the catalog's module_utils file.
    'health': {'health_catalog_problems', 'health_catalog', 'health_drain_plan', 'health_state', 'health_readers'},
    # The results of the internal role's entry points, read by the roles that include it.
    'repository': {'repository_changed', 'repository_ready', 'repository_cuda', 'repository_key'},
    'fabric_manager': {'fabric_manager_nvswitch_present', 'fabric_manager_nvswitches', 'fabric_manager_driver_version',
                       'fabric_manager_installed_version'},
    # Parameters, return keys and failure reasons of the nvidia_smi, nvidia_mig
    # and nvidia_smi_info modules.
    'mig': {'mig_mode', 'mig_devices', 'mig_uuids', 'mig_disabled'},
    'nvidia_driver': {'nvidia_driver_installed_flavour', 'nvidia_driver_installed_version', 'nvidia_driver_loaded_flavour',
                      'nvidia_driver_loaded_version', 'nvidia_driver_reboot_reason', 'nvidia_driver_reboot_required',
                      'nvidia_driver_boot_kernel'},
}
# Roles whose platform files (vars/ other than main.yml) hold data of one
# package manager only, so they do not all have the same keys: a dnf module
# stream against an apt version probe package (nvidia_driver).
PLATFORM_KEYS_DIFFER = ('nvidia_driver',)


def _spec_types(role):
    if role in ROLES_WITHOUT_PATH_TYPE:
        return dict((name, kind) for name, kind in SPEC_TYPES.items() if name != 'path')
    return SPEC_TYPES


# vars/ files that hold data the role loads itself (security floors, CVE and
# field tables), not per-platform values.
DATA_FILES = {'security_floors.yml', 'cves.yml', 'dcgm_fields.yml'}


def _platform_files(role):
    return sorted(name for name in os.listdir(role_path(role, 'vars'))
                  if name.endswith('.yml') and name != 'main.yml' and name not in DATA_FILES)


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_data_files_are_internal_to_the_role(role):
    for name in sorted(DATA_FILES & set(os.listdir(role_path(role, 'vars')))):
        data = load(role, 'vars', name)
        assert all(key.startswith('__%s_' % role) for key in data), name


def test_the_roles_are_found():
    # An empty glob would leave every check below without a case.
    assert 'nvidia_driver' in ROLE_NAMES, ROLE_NAMES


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_every_default_is_declared_and_every_option_has_a_default(role):
    names, spec = set(defaults(role)), options(role)
    required = set(name for name, option in spec.items() if option.get('required'))
    assert sorted(names - set(spec)) == [], 'defaults/main.yml variables missing from meta/argument_specs.yml'
    assert sorted(set(spec) - names - required) == [], 'options without a default in defaults/main.yml'
    # Only an internal role's entry points may require inputs: their caller is a role of this collection.
    assert not required or is_internal(role), 'every input has a default: %s' % sorted(required)
    assert not required & names, 'required inputs cannot have defaults: %s' % sorted(required & names)


@pytest.mark.parametrize('role', [r for r in ROLE_NAMES if is_internal(r)])
def test_internal_roles_have_no_main_entry_point_and_a_prefix(role):
    # Entry points of an internal role are called with include_role tasks_from; nobody runs it as a role.
    assert not os.path.exists(role_path(role, 'tasks', 'main.yml'))
    for entry in entry_points(role):
        assert os.path.isfile(role_path(role, 'tasks', entry + '.yml')), entry


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_every_option_is_prefixed_typed_and_described(role):
    types = _spec_types(role)
    for name, option in options(role).items():
        assert name.startswith(role + '_'), name
        assert option.get('description'), '%s has no description' % name
        assert option.get('type') in types, (name, option.get('type'))
        if option['type'] == 'list':
            assert option.get('elements') in types, name


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_defaults_have_the_declared_type_choices_and_the_spec_default(role):
    types = _spec_types(role)
    rendered = rendered_defaults(role)
    for name, option in options(role).items():
        if option.get('required'):
            continue
        value = rendered[name]
        if value is None:
            assert name in NULL_DEFAULTS, '%s defaults to null' % name
            assert ('default' in option) is NULL_DEFAULTS[name] and option.get('default') is None, name
            # Ansible's argument validation checks choices against null too,
            # so a null default must come without choices (preflight checks it).
            assert 'choices' not in option and not option.get('required', False), name
            continue
        expected_type = types[option['type']]
        assert isinstance(value, expected_type) and not (expected_type is int and isinstance(value, bool)), \
            '%s: %r is not of type %s' % (name, value, option['type'])
        if option['type'] == 'list':
            element_type = types[option['elements']]
            assert all(isinstance(item, element_type) for item in value), name
        if 'choices' in option:
            assert value in option['choices'], (name, value, option['choices'])
        assert 'default' in option, '%s: the argument spec documents no default' % name
        assert value == plain(option['default']), '%s: argument spec default %r, defaults/main.yml %r' % (
            name, option['default'], value)


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_list_of_dict_defaults_fit_their_suboptions(role):
    types = _spec_types(role)
    role_defaults = defaults(role)
    for name, option in options(role).items():
        if option['type'] != 'list' or option.get('elements') != 'dict':
            continue
        suboptions = option['options']
        for entry in plain(role_defaults[name]):
            assert set(entry) == set(suboptions), (name, entry)
            for key, sub in suboptions.items():
                assert isinstance(entry[key], types[sub['type']]), (name, key)
                if 'choices' in sub:
                    assert entry[key] in sub['choices'], (name, entry)


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_tasks_templates_handlers_and_vars_only_read_declared_inputs(role):
    # A misspelt input would silently be undefined (or the fact of the same name).
    declared = set(defaults(role)) | set(options(role)) | NOT_INPUTS.get(role, set())
    # Roles named <role>_<something> (dcgm_exporter for dcgm) share the prefix.
    other_prefixes = tuple(other + '_' for other in ROLE_NAMES if other.startswith(role + '_'))
    assert os.path.isdir(role_path(role, 'tasks')), role
    used = set()
    for sub in ('tasks', 'templates', 'handlers', 'vars'):
        folder = role_path(role, sub)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as handle:
                # Tag names share the prefix but are not variables.
                text = re.sub(r'(?m)^\s*tags:.*$', '', handle.read())
            used |= set(re.findall(r'(?<![_\w])(%s_[a-z0-9_]*[a-z0-9])' % role, text))
    used = set(name for name in used if not name.startswith(other_prefixes))
    assert sorted(used - declared) == []


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_platform_data_is_internal_to_the_role(role):
    for name in _platform_files(role):
        data = load(role, 'vars', name)
        assert all(key.startswith('__%s_' % role) for key in data), name


@pytest.mark.parametrize('role', [r for r in ROLE_NAMES if r not in PLATFORM_KEYS_DIFFER])
def test_every_platform_file_has_the_same_keys(role):
    keys = dict((name, set(load(role, 'vars', name))) for name in _platform_files(role))
    every_key = set().union(*keys.values())
    for name, names in keys.items():
        assert names == every_key, (name, sorted(every_key - names))
