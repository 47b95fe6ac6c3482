# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The dcgm and dcgm_exporter roles: the expressions of vars/ that build
package names and command lines, what they make of the one state read
(tasks/state.yml: which packages are missing, whether systemd must be asked,
whether the host engine listens), the bounded dcgmi commands, the templates
they render, and the Grafana dashboard and Prometheus snippet the exporter
role ships.

Expressions and templates are rendered with Ansible's own templar, from the
role's defaults plus the inputs of each case. The checks of the argument spec
against the defaults, common to all roles, are in test_role_argument_specs.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import io
import json
import os
import re

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    load as _load, plain as _plain, render, role_path as _path, role_variables, trust as _trust)

ROLES = ('dcgm', 'dcgm_exporter')
OS_FILES = ('Debian.yml', 'RedHat.yml')
DEBIAN_12 = {'distribution': 'Debian', 'distribution_major_version': '12', 'os_family': 'Debian'}


def _defaults(role):
    return _trust(_load(role, 'defaults', 'main.yml'))


def _variables(role, os_file='Debian.yml', **inputs):
    # The exporter's preflight loads DCGM's field names (vars/dcgm_fields.yml).
    variables = role_variables(role, 'main.yml', os_file, *(['dcgm_fields.yml'] if role == 'dcgm_exporter' else []))
    variables['ansible_facts'] = dict(DEBIAN_12)
    variables['ansible_managed'] = 'Ansible managed'
    variables.update(_trust(inputs))
    return variables


def _render(value, variables):
    return _plain(render(value, variables))


def _expr(role, name, os_file='Debian.yml', **inputs):
    variables = _variables(role, os_file, **inputs)
    return _render(variables[name], variables)


def _task(role, file_name, task_name):
    return [task for task in _load(role, 'tasks', file_name) if task['name'] == task_name][0]


def _set_fact(role, file_name, task_name, **inputs):
    """The facts a set_fact task of the role sets, rendered with its task vars over the inputs."""
    task = _task(role, file_name, task_name)
    variables = _variables(role, **inputs)
    variables.update(_trust(task.get('vars', {})))
    return dict((key, _render(_trust(value), variables)) for key, value in task['ansible.builtin.set_fact'].items())


def _template(role, name, **inputs):
    with open(_path(role, 'templates', name)) as handle:
        source = trust_as_template(handle.read())
    return _render(source, _variables(role, **inputs))


# --- platforms ----------------------------------------------------------------------------

@pytest.mark.parametrize('role', ROLES)
def test_each_package_manager_has_a_vars_file(role):
    # What the files hold is checked for every role in test_role_argument_specs.py.
    for name in OS_FILES:
        assert os.path.isfile(_path(role, 'vars', name)), name


@pytest.mark.parametrize('role', ROLES)
def test_platform_support(role):
    for facts, supported in [
        (DEBIAN_12, True),
        ({'distribution': 'Debian', 'distribution_major_version': '13', 'os_family': 'Debian'}, True),
        ({'distribution': 'Ubuntu', 'distribution_major_version': '24', 'os_family': 'Debian'}, True),
        ({'distribution': 'Rocky', 'distribution_major_version': '9', 'os_family': 'RedHat'}, True),
        ({'distribution': 'Debian', 'distribution_major_version': '11', 'os_family': 'Debian'}, False),
        ({'distribution': 'Fedora', 'distribution_major_version': '41', 'os_family': 'RedHat'}, False),
    ]:
        assert _expr(role, '__%s_platform_supported' % role, ansible_facts=facts) is supported, facts


# --- dcgm: packages ------------------------------------------------------------------------

@pytest.mark.parametrize('os_file, inputs, expected', [
    # The driver's CUDA major picks the plugin; nothing installed, no pin: newest.
    ('Debian.yml', {'__dcgm_driver_cuda_major': '12'},
     ['datacenter-gpu-manager-4-core', 'datacenter-gpu-manager-4-proprietary', 'datacenter-gpu-manager-4-cuda12']),
    # dcgm_cuda_major overrides the driver.
    ('Debian.yml', {'__dcgm_driver_cuda_major': '12', 'dcgm_cuda_major': '13'},
     ['datacenter-gpu-manager-4-core', 'datacenter-gpu-manager-4-proprietary', 'datacenter-gpu-manager-4-cuda13']),
    # An upstream version pins every package, extras included, to any revision (epoch 1).
    ('Debian.yml', {'__dcgm_driver_cuda_major': '13', 'dcgm_version': '4.4.1',
                    'dcgm_extra_packages': ['datacenter-gpu-manager-4-proprietary-cuda13']},
     ['datacenter-gpu-manager-4-core=1:4.4.1-*', 'datacenter-gpu-manager-4-proprietary=1:4.4.1-*',
      'datacenter-gpu-manager-4-cuda13=1:4.4.1-*', 'datacenter-gpu-manager-4-proprietary-cuda13=1:4.4.1-*']),
    # An installed DCGM keeps its exact version when none is asked for.
    ('Debian.yml', {'__dcgm_driver_cuda_major': '12', '__dcgm_installed_version': '1:4.2.3-1'},
     ['datacenter-gpu-manager-4-core=1:4.2.3-1', 'datacenter-gpu-manager-4-proprietary=1:4.2.3-1',
      'datacenter-gpu-manager-4-cuda12=1:4.2.3-1']),
    # An explicit version wins over the installed one.
    ('Debian.yml', {'__dcgm_driver_cuda_major': '12', '__dcgm_installed_version': '1:4.2.3-1',
                    'dcgm_version': '1:4.4.1-1'},
     ['datacenter-gpu-manager-4-core=1:4.4.1-1', 'datacenter-gpu-manager-4-proprietary=1:4.4.1-1',
      'datacenter-gpu-manager-4-cuda12=1:4.4.1-1']),
    ('RedHat.yml', {'__dcgm_driver_cuda_major': '12', 'dcgm_version': '1:4.4.1'},
     ['datacenter-gpu-manager-4-core-4.4.1', 'datacenter-gpu-manager-4-proprietary-4.4.1',
      'datacenter-gpu-manager-4-cuda12-4.4.1']),
])
def test_dcgm_package_specs(os_file, inputs, expected):
    assert _expr('dcgm', '__dcgm_package_specs', os_file, **inputs) == expected


def _installed(version, *names):
    return dict((name, {'version': version, 'installed': True, 'held': False, 'status': 'installed'}) for name in names)


CORE, PROPRIETARY = 'datacenter-gpu-manager-4-core', 'datacenter-gpu-manager-4-proprietary'
CUDA12, CUDA13 = 'datacenter-gpu-manager-4-cuda12', 'datacenter-gpu-manager-4-cuda13'


@pytest.mark.parametrize('os_file, installed, inputs, missing', [
    # Nothing installed: everything, at the newest version.
    ('Debian.yml', {}, {}, [CORE, PROPRIETARY, CUDA12]),
    # Converged: the package manager is not run.
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12), {}, []),
    # A plugin for another CUDA major does not count; nor one at another version than -core.
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA13), {}, [CUDA12]),
    ('Debian.yml', dict(_installed('1:4.4.1-1', CORE, PROPRIETARY), **_installed('1:4.2.3-1', CUDA12)), {}, [CUDA12]),
    # An upstream version is satisfied by any epoch and revision of it ...
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12), {'dcgm_version': '4.4.1'}, []),
    # ... an exact one only by itself, and another version by none.
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12), {'dcgm_version': '1:4.4.1-2'},
     [CORE, PROPRIETARY, CUDA12]),
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12), {'dcgm_version': '4.4.10'},
     [CORE, PROPRIETARY, CUDA12]),
    # Extra packages join the installed set's version.
    ('Debian.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12),
     {'dcgm_extra_packages': ['datacenter-gpu-manager-4-proprietary-cuda12']},
     ['datacenter-gpu-manager-4-proprietary-cuda12']),
    # rpm versions carry the epoch the same way.
    ('RedHat.yml', _installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12), {'dcgm_version': '4.4.1'}, []),
])
def test_dcgm_installs_only_what_is_missing(os_file, installed, inputs, missing):
    version = installed.get(CORE, {}).get('version', '')
    assert _expr('dcgm', '__dcgm_packages_missing', os_file, __dcgm_driver_cuda_major='12', __dcgm_installed=installed,
                 __dcgm_installed_version=version, **inputs) == missing


STATE = {
    'packages': dict(_installed('1:4.4.1-1', CORE, PROPRIETARY, CUDA12),
                     **{'datacenter-gpu-manager': {'version': '1:3.3.9', 'installed': False, 'held': False,
                                                   'status': 'config-files'}}),
    'files': {},
    'units': {'nvidia-dcgm.service': {'load_state': 'loaded', 'active_state': 'active', 'unit_file_state': 'enabled',
                                      'drop_in_paths': ['/etc/systemd/system/nvidia-dcgm.service.d/10-gpufleet-listener.conf']}},
    'globs': {'/run/sim/nvswitch/devices/*': ['/run/sim/nvswitch/devices/0000:05:00.0',
                                              '/run/sim/nvswitch/devices/0000:06:00.0']},
}


def test_dcgm_state_read_gives_the_installed_dcgm_the_nvswitches_and_the_driver():
    smi = {'failure': None, 'driver': {'version': '580.95.05', 'cuda_version': '13.0'},
           'gpus': [{'index': 0, 'uuid': 'GPU-a'}, {'index': 1, 'uuid': 'GPU-b'}]}
    facts = _set_fact('dcgm', 'state.yml', 'Record the installed DCGM, the unit, the NVSwitches and the driver',
                      __dcgm_state=STATE, __dcgm_smi=smi, dcgm_nvswitch_devices_path='/run/sim/nvswitch/devices/')
    assert facts['__dcgm_installed_version'] == '1:4.4.1-1'
    # Only installed packages count: DCGM 3's left-over configuration is not DCGM 3.
    assert sorted(facts['__dcgm_installed']) == [CORE, CUDA12, PROPRIETARY]
    assert facts['__dcgm_legacy_installed'] == []
    assert facts['__dcgm_unit']['active_state'] == 'active'
    assert facts['__dcgm_nvswitches'] == ['0000:05:00.0', '0000:06:00.0']
    assert facts['__dcgm_driver_ready'] is True
    assert facts['__dcgm_driver_cuda_major'] == '13'
    assert facts['__dcgm_gpus'] == ['GPU-a', 'GPU-b']


def test_dcgm_state_read_without_a_driver_or_nvswitches():
    state = dict(STATE, packages=_installed('1:3.3.9', 'datacenter-gpu-manager'), units={},
                 globs={'/proc/driver/nvidia-nvswitch/devices/*': []})
    smi = {'failure': {'reason': 'not_installed', 'hint': 'x'}, 'driver': {'version': None, 'cuda_version': None},
           'gpus': []}
    facts = _set_fact('dcgm', 'state.yml', 'Record the installed DCGM, the unit, the NVSwitches and the driver',
                      __dcgm_state=state, __dcgm_smi=smi)
    assert facts['__dcgm_installed_version'] == ''
    assert facts['__dcgm_legacy_installed'] == ['datacenter-gpu-manager']
    assert facts['__dcgm_unit'] == {}
    assert facts['__dcgm_nvswitches'] == []
    assert facts['__dcgm_driver_ready'] is False
    assert facts['__dcgm_driver_cuda_major'] == ''
    assert facts['__dcgm_gpus'] == []


SKIPPED = {'changed': False, 'skipped': True}
UNCHANGED = {'changed': False}
CHANGED = {'changed': True}
ACTIVE_DCGM = STATE['units']['nvidia-dcgm.service']


@pytest.mark.parametrize('unit, install, dropin, needed', [
    # Converged: systemd is not asked.
    (ACTIVE_DCGM, SKIPPED, UNCHANGED, False),
    (ACTIVE_DCGM, CHANGED, UNCHANGED, True),
    (ACTIVE_DCGM, SKIPPED, CHANGED, True),
    (dict(ACTIVE_DCGM, active_state='failed'), SKIPPED, UNCHANGED, True),
    (dict(ACTIVE_DCGM, unit_file_state='disabled'), SKIPPED, UNCHANGED, True),
    # The drop-in is on disk but systemd has not read it.
    (dict(ACTIVE_DCGM, drop_in_paths=[]), SKIPPED, UNCHANGED, True),
    # No such unit yet (or no systemd).
    ({}, SKIPPED, UNCHANGED, True),
])
def test_dcgm_service_is_asked_only_when_something_differs(unit, install, dropin, needed):
    assert _expr('dcgm', '__dcgm_service_needed', __dcgm_unit=unit, __dcgm_install=install, __dcgm_dropin=dropin) is needed


@pytest.mark.parametrize('file_name, task_name, inputs, argv', [
    ('verify.yml', 'List the devices the host engine discovers', {},
     ['timeout', '--kill-after=5', '30', '/usr/bin/dcgmi', 'discovery', '--host',
      'unix:///run/nvidia-dcgm/nv-hostengine.sock', '--list']),
    ('health.yml', "Read the host engine's health watches", {'dcgm_port': 5565, 'dcgm_unix_socket': ''},
     ['timeout', '--kill-after=5', '30', '/usr/bin/dcgmi', 'health', '--host', '127.0.0.1:5565', '--fetch', '--json']),
    ('health.yml', 'Set the health watches', {'dcgm_health_watches': 'pmt', 'dcgm_unix_socket': ''},
     ['timeout', '--kill-after=5', '30', '/usr/bin/dcgmi', 'health', '--host', '127.0.0.1:5555', '--set', 'pmt']),
    ('diag.yml', 'Run the DCGM diagnostic', {'dcgm_diag_level': 1, 'dcgm_unix_socket': ''},
     ['timeout', '--kill-after=5', '300', '/usr/bin/dcgmi', 'diag', '--host', '127.0.0.1:5555', '--run', '1', '--json']),
    ('diag.yml', 'Run the DCGM diagnostic', {'dcgm_diag_level': 3, 'dcgm_unix_socket': '/run/nvidia-dcgm/engine'},
     ['timeout', '--kill-after=5', '7200', '/usr/bin/dcgmi', 'diag', '--host', 'unix:///run/nvidia-dcgm/engine',
      '--run', '3', '--json']),
])
def test_every_dcgmi_call_is_bounded(file_name, task_name, inputs, argv):
    task = _task('dcgm', file_name, task_name)
    variables = _variables('dcgm', **inputs)
    variables.update(_trust(task.get('vars', {})))
    assert _render(_trust(task['ansible.builtin.command']['argv']), variables) == argv
    if 'until' in task:
        # A timed-out call ends the retries at once: a wedged engine is not waited out 15 times.
        for rc, done in [(0, True), (1, False), (124, True), (137, True)]:
            variables[task['register']] = {'rc': rc}
            assert _render(_trust('{{ %s }}' % task['until']), variables) is done, rc


@pytest.mark.parametrize('level', [1, 2, 3, 4])
def test_every_diagnostic_level_has_a_bound(level):
    timeouts = _expr('dcgm', '__dcgm_diag_timeouts')
    assert timeouts[level] > 0
    assert level == 1 or timeouts[level] > timeouts[level - 1]


# --- input rules (gpufleet.nvidia.check_inputs in tasks/preflight.yml) -------------------

def _broken_rules(role, task_name, **inputs):
    """The variables whose rules fail, as the check_inputs action evaluates them."""
    task = _task(role, 'preflight.yml', task_name)
    variables = _variables(role, **inputs)
    variables.update(_trust(task.get('vars', {})))

    def holds(conditions):
        conditions = conditions if isinstance(conditions, list) else [conditions]
        return all(_render(_trust('{{ (%s) | bool }}' % c), variables) for c in conditions)

    broken = []
    for rule in task['gpufleet.nvidia.check_inputs']['rules']:
        # Ansible renders every rule's message with the task's arguments, broken or not.
        msg = _render(_trust(rule['msg']), variables)
        if holds(rule.get('when', [])) and not holds(rule['that']):
            broken.append((_render(_trust(rule['var']), variables), msg))
    return broken


BCRYPT = '$2b$10$abcdefghijklmnopqrstuu0123456789ABCDEFGHIJKLMNOPQRSTU'
METRIC = {'name': 'DCGM_FI_DEV_POWER_MGMT_LIMIT', 'type': 'gauge', 'help': 'Power limit (in W).'}


@pytest.mark.parametrize('role, task_name, inputs, var, words', [
    ('dcgm', 'Check the inputs', {'dcgm_version': '3.3.9'}, 'dcgm_version', 'DCGM 4'),
    ('dcgm', 'Check the inputs', {'dcgm_extra_packages': ['datacenter-gpu-manager']}, 'dcgm_extra_packages', 'DCGM 4'),
    ('dcgm', 'Check the inputs', {'dcgm_port': 0}, 'dcgm_port', '65535'),
    ('dcgm', 'Check the inputs', {'dcgm_unix_socket': 'run/engine'}, 'dcgm_unix_socket', 'absolute'),
    ('dcgm', 'Check the inputs', {'dcgm_listen_address': '10.0.0.0/8'}, 'dcgm_listen_address', 'one address'),
    ('dcgm', 'Check the inputs', {'dcgm_health_watches': 'px'}, 'dcgm_health_watches', 'letters'),
    # The host-engine API has no authentication: not on the network without consent.
    ('dcgm', 'Check the inputs', {'dcgm_unix_socket': '', 'dcgm_listen_address': 'ALL'}, 'dcgm_listen_address',
     'dcgm_allow_insecure_listen'),
    ('dcgm', 'Check the inputs', {'dcgm_unix_socket_group': 'GPU users'}, 'dcgm_unix_socket_group', 'group name'),
    ('dcgm', 'Check the inputs', {'dcgm_diag_level': 5}, 'dcgm_diag_level', 'null'),
    ('dcgm', 'Check the inputs', {'dcgm_diag_level': 2}, 'dcgm_diag_level', 'dcgm_diag_allow_long: true'),
    ('dcgm', 'Check the inputs', {'dcgm_package_lock_timeout': -1}, 'dcgm_package_lock_timeout', 'seconds'),
    ('dcgm', 'Check the CUDA plugin package and the installed DCGM',
     {'__dcgm_driver_ready': True, '__dcgm_driver_cuda_major': '', '__dcgm_smi': {'driver': {'cuda_version': None}},
      '__dcgm_legacy_installed': []}, 'dcgm_cuda_major', '11, 12 or 13'),
    ('dcgm', 'Check the CUDA plugin package and the installed DCGM',
     {'__dcgm_driver_ready': True, '__dcgm_driver_cuda_major': '12', '__dcgm_smi': {'driver': {'cuda_version': '12.8'}},
      '__dcgm_legacy_installed': ['datacenter-gpu-manager']}, 'dcgm_remove_legacy', 'datacenter-gpu-manager'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_port': 70000}, 'dcgm_exporter_port', '65535'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_listen_address': '10.0.0.0/8'},
     'dcgm_exporter_listen_address', 'one address'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_listen_address': ''}, 'dcgm_exporter_listen_address',
     'dcgm_exporter_allow_insecure_listen'),
    ('dcgm_exporter', 'Check the inputs',
     {'dcgm_exporter_listen_address': '10.0.0.12', 'dcgm_exporter_web_config': {
         'tls_server_config': {'cert_file': '/etc/x.crt', 'key_file': '/etc/x.key'}}},
     'dcgm_exporter_listen_address', 'sets no basic auth'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_user': 'GPU Exporter'}, 'dcgm_exporter_user', 'account name'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_extra_counters': [dict(METRIC, name='DCGM_FI_DEV_GPU_UTILISATION')]},
     'dcgm_exporter_extra_counters', 'DCGM_FI_DEV_GPU_UTILISATION'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_collect_interval': 0},
     'dcgm_exporter_collect_interval', 'milliseconds'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_version': 'latest'}, 'dcgm_exporter_version', '4.1.3'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_hostengine': 'unix:/run/engine'},
     'dcgm_exporter_hostengine', 'unix:///path'),
    ('dcgm_exporter', 'Check the inputs',
     {'dcgm_exporter_extra_counters': [dict(METRIC, name='POWER_MGMT_LIMIT')]}, 'dcgm_exporter_extra_counters',
     'DCGM_FI_'),
    ('dcgm_exporter', 'Check the inputs',
     {'dcgm_exporter_extra_counters': [dict(METRIC, help='two\nlines')]}, 'dcgm_exporter_extra_counters', 'one-line'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_counters': [dict(METRIC, type='enum')]},
     'dcgm_exporter_counters', 'type'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_extra_counters': [dict(METRIC, name='DCGM_FI_DEV_GPU_UTIL')]},
     'dcgm_exporter_extra_counters', 'once'),
    ('dcgm_exporter', 'Check the inputs',
     {'dcgm_exporter_counters': [{'name': 'DCGM_FI_DRIVER_VERSION', 'type': 'label', 'help': 'Driver.'}]},
     'dcgm_exporter_counters', 'not a label'),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_web_config': {'basic_auth_users': {'prometheus': BCRYPT}}},
     'dcgm_exporter_verify_username', 'dcgm_exporter_verify: false'),
    ('dcgm_exporter', 'Check the web configuration', {'dcgm_exporter_web_config': {'basic_auth_users': {'p': 'secret'}}},
     'dcgm_exporter_web_config', 'bcrypt'),
    ('dcgm_exporter', 'Check the web configuration',
     {'dcgm_exporter_web_config': {'tls_server_config': {'cert_file': '/etc/x.crt'}}}, 'dcgm_exporter_web_config',
     'key_file'),
    ('dcgm_exporter', 'Check the web configuration', {'dcgm_exporter_web_config': {'tls_config': {}}},
     'dcgm_exporter_web_config', 'takes'),
])
def test_each_bad_input_breaks_the_rule_that_names_it(role, task_name, inputs, var, words):
    broken = _broken_rules(role, task_name, **inputs)
    assert [name for name, _msg in broken] == [var], broken
    assert words in broken[0][1]


@pytest.mark.parametrize('role, task_name, inputs', [
    ('dcgm', 'Check the inputs', {}),
    ('dcgm', 'Check the inputs', {'dcgm_diag_level': 3, 'dcgm_diag_allow_long': True, 'dcgm_health_watches': 'a',
                                  'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine', 'dcgm_version': '1:4.4.1-1'}),
    # Without a driver (check mode) the driver-dependent rules are not evaluated.
    ('dcgm', 'Check the CUDA plugin package and the installed DCGM',
     {'__dcgm_driver_ready': False, '__dcgm_smi': {'driver': {'cuda_version': None}},
      '__dcgm_legacy_installed': ['datacenter-gpu-manager']}),
    ('dcgm', 'Check the CUDA plugin package and the installed DCGM',
     {'__dcgm_driver_ready': True, '__dcgm_driver_cuda_major': '13', '__dcgm_smi': {'driver': {'cuda_version': '13.0'}},
      '__dcgm_legacy_installed': ['datacenter-gpu-manager'], 'dcgm_remove_legacy': True}),
    ('dcgm_exporter', 'Check the inputs', {}),
    ('dcgm_exporter', 'Check the inputs', {'dcgm_exporter_extra_counters': [METRIC],
                                           'dcgm_exporter_hostengine': 'unix:///run/nvidia-dcgm/engine.sock',
                                           'dcgm_exporter_web_config': {'basic_auth_users': {'prometheus': BCRYPT}},
                                           'dcgm_exporter_verify_username': 'prometheus',
                                           'dcgm_exporter_verify_password': 'x'}),
    ('dcgm_exporter', 'Check the web configuration', {}),
    ('dcgm_exporter', 'Check the web configuration',
     {'dcgm_exporter_web_config': {'tls_server_config': {'cert_file': '/etc/x.crt', 'key_file': '/etc/x.key'},
                                   'basic_auth_users': {'prometheus': BCRYPT}}}),
])
def test_good_inputs_break_no_rule(role, task_name, inputs):
    assert _broken_rules(role, task_name, **inputs) == []


def test_the_web_configuration_is_never_shown():
    # An excerpt of the value would show the bcrypt hashes: every rule about it is secret (the message still
    # names the variable), and the task that writes it logs nothing.
    for task_name in ('Check the web configuration', TLS_CHECK):
        rules = _task('dcgm_exporter', 'preflight.yml', task_name)['gpufleet.nvidia.check_inputs']['rules']
        assert all(rule.get('secret') is True for rule in rules if rule['var'] == 'dcgm_exporter_web_config'), task_name
    assert _task('dcgm_exporter', 'configure.yml', 'Write the web configuration (TLS, basic auth)')['no_log'] is True


# --- listeners in extra arguments, socket places, ports, units and paths --------------------

@pytest.mark.parametrize('args, words', [
    (['--bind-interface', 'ALL'], 'dcgm_listen_address'),
    (['-b', '0.0.0.0'], 'dcgm_listen_address'),
    (['--bind-interface=ALL'], 'dcgm_listen_address'),
    (['--denylist-modules', '3', '-p', '5556'], 'dcgm_port'),
    (['--port=5556'], 'dcgm_port'),
    (['--domain-socket', '/tmp/nv-hostengine'], 'dcgm_unix_socket'),
    # -d alone: nv-hostengine's default socket, /tmp/nv-hostengine.
    (['-d'], 'dcgm_unix_socket'),
    (['--service-account', 'root'], 'dcgm_service_account'),
    (['-n'], 'foreground'),
    (['--term'], 'stops a running engine'),
])
def test_dcgm_extra_args_may_not_set_the_listener(args, words):
    broken = _broken_rules('dcgm', 'Check the inputs', dcgm_extra_args=args)
    assert [name for name, _msg in broken] == ['dcgm_extra_args'], broken
    assert words in broken[0][1]
    # The message says which argument it refuses.
    assert [a for a in args if a.startswith('-') and a != '--denylist-modules'][0] in broken[0][1]


@pytest.mark.parametrize('args, words', [
    (['-a', '0.0.0.0:9400'], 'dcgm_exporter_listen_address'),
    (['--address', ':9400'], 'dcgm_exporter_listen_address'),
    (['-a=:9400'], 'dcgm_exporter_listen_address'),
    (['--address=:9400'], 'dcgm_exporter_listen_address'),
    # Go's flag parser takes one dash for a long name too.
    (['-address', ':9400'], 'dcgm_exporter_listen_address'),
    (['--web-systemd-socket'], 'systemd socket units'),
    (['--web-config-file', '/etc/dcgm-exporter/open.yml'], 'dcgm_exporter_web_config'),
    (['--config-file=/etc/dcgm-exporter/config.yaml'], 'configuration file'),
    (['-r', 'localhost:5555'], 'dcgm_exporter_hostengine'),
    (['--kubernetes', '--collect-interval=10'], 'dcgm_exporter_collect_interval'),
    (['-f', '/etc/dcgm-exporter/default-counters.csv'], 'dcgm_exporter_counters'),
])
def test_exporter_extra_args_may_not_set_the_listener(args, words):
    broken = _broken_rules('dcgm_exporter', 'Check the inputs', dcgm_exporter_extra_args=args)
    assert [name for name, _msg in broken] == ['dcgm_exporter_extra_args'], broken
    assert words in broken[0][1]
    assert 'TLS and basic auth' in broken[0][1]


@pytest.mark.parametrize('role, inputs', [
    ('dcgm', {'dcgm_extra_args': ['--denylist-modules', '3', '--log-level', 'WARN', '--pid', '/run/nvhostengine.pid']}),
    ('dcgm', {'dcgm_extra_args': ['--home-dir', '/var/lib/dcgm', '--log-filename', '/var/log/nv-hostengine.log']}),
    ('dcgm_exporter', {'dcgm_exporter_extra_args': ['--kubernetes', '-d', 'g', '--no-hostname', '--web-read-timeout',
                                                    '10s', '--enable-dcgm-log', '--address-family-is-no-flag']}),
])
def test_extra_args_that_set_no_listener_pass(role, inputs):
    assert _broken_rules(role, 'Check the inputs', **inputs) == []


@pytest.mark.parametrize('socket', [
    '/tmp/nv-hostengine.sock', '/var/tmp/nv-hostengine.sock', '/dev/shm/nv-hostengine.sock',
    # Shared directories of /run: systemd would chmod them and delete them when the engine stops.
    '/run/lock/nv-hostengine.sock', '/run/systemd/nv-hostengine.sock', '/run/nv-hostengine.sock',
    # The exporter's own runtime directory; deeper than one level; through the /var/run link.
    '/run/nvidia-dcgm-exporter/nv-hostengine.sock', '/run/nvidia-dcgm/sub/nv-hostengine.sock',
    '/var/run/nvidia-dcgm/nv-hostengine.sock', '/run/nvidia-dcgm/..', '/var/lib/dcgm/engine.sock',
])
def test_a_socket_only_where_systemd_makes_the_engine_a_directory(socket):
    broken = _broken_rules('dcgm', 'Check the inputs', dcgm_unix_socket=socket)
    assert [name for name, _msg in broken] == ['dcgm_unix_socket'], broken
    assert '/run/nvidia-dcgm/nv-hostengine.sock' in broken[0][1]
    # The exporter, reading the same socket, refuses it too, naming where it comes from.
    for inputs, var in [({'dcgm_unix_socket': socket}, 'dcgm_unix_socket'),
                        ({'dcgm_exporter_hostengine': 'unix://' + socket}, 'dcgm_exporter_hostengine')]:
        broken = _broken_rules('dcgm_exporter', 'Check the inputs', **inputs)
        assert [name for name, _msg in broken] == [var], (inputs, broken)
        assert socket in broken[0][1] and 'private /tmp' in broken[0][1]


@pytest.mark.parametrize('socket', ['/run/nvidia-dcgm/nv-hostengine.sock', '/run/dcgm/engine', '/run/nvidia-dcgm-2/x.sock'])
def test_sockets_in_the_engines_own_directory_pass(socket):
    assert _broken_rules('dcgm', 'Check the inputs', dcgm_unix_socket=socket) == []
    assert _broken_rules('dcgm_exporter', 'Check the inputs', dcgm_unix_socket=socket) == []
    assert _expr('dcgm', '__dcgm_runtime_directory', dcgm_unix_socket=socket) == socket.split('/')[2]


def test_both_roles_hold_the_socket_to_the_same_place():
    assert _expr('dcgm', '__dcgm_socket_pattern') == _expr('dcgm_exporter', '__dcgm_exporter_socket_pattern')


@pytest.mark.parametrize('inputs, clash', [
    # The exporter's port as the inventory sets it (raw, as INI gives it), or its default when the play runs it.
    ({'dcgm_unix_socket': '', 'dcgm_port': 9401, 'dcgm_exporter_port': '9401'}, True),
    ({'dcgm_unix_socket': '', 'dcgm_port': 9400, 'ansible_play_role_names': ['gpufleet.nvidia.dcgm', 'gpufleet.nvidia.dcgm_exporter']},
     True),
    ({'dcgm_unix_socket': '', 'dcgm_port': 9400, 'ansible_play_role_names': ['dcgm', 'dcgm_exporter']}, True),
    # No exporter on this host that the role can see; or no TCP port at all.
    ({'dcgm_unix_socket': '', 'dcgm_port': 9400, 'ansible_play_role_names': ['gpufleet.nvidia.dcgm']}, False),
    ({'dcgm_port': 9400, 'dcgm_exporter_port': 9400}, False),
    ({'dcgm_unix_socket': '', 'dcgm_port': 5555, 'dcgm_exporter_port': 9400}, False),
])
def test_dcgm_port_may_not_be_the_exporters(inputs, clash):
    broken = _broken_rules('dcgm', 'Check the inputs', **inputs)
    assert [name for name, _msg in broken] == (['dcgm_port'] if clash else []), broken
    if clash:
        assert 'dcgm_exporter_port' in broken[0][1]


@pytest.mark.parametrize('inputs, clash, words', [
    ({'dcgm_unix_socket': '', 'dcgm_port': 9400}, True, 'dcgm_port'),
    # dcgm_port raw from an INI inventory.
    ({'dcgm_unix_socket': '', 'dcgm_port': '9401', 'dcgm_exporter_port': 9401}, True, 'dcgm_port'),
    ({'dcgm_exporter_hostengine': '127.0.0.1:9400'}, True, 'dcgm_exporter_hostengine 127.0.0.1:9400'),
    ({'dcgm_exporter_hostengine': '[::1]:9400'}, True, 'dcgm_exporter_hostengine'),
    ({'dcgm_exporter_hostengine': 'gpu01:9400', 'inventory_hostname': 'gpu01'}, True, 'dcgm_exporter_hostengine'),
    ({'dcgm_exporter_hostengine': '10.0.0.5:9400', 'ansible_facts': dict(DEBIAN_12, all_ipv4_addresses=['10.0.0.5'])},
     True, 'dcgm_exporter_hostengine'),
    # An engine on another host; an engine on its socket; another port.
    ({'dcgm_exporter_hostengine': 'gpu-mgmt:9400'}, False, ''),
    ({'dcgm_port': 9400}, False, ''),
    ({'dcgm_unix_socket': '', 'dcgm_port': 5555}, False, ''),
])
def test_exporter_port_may_not_be_the_host_engines(inputs, clash, words):
    broken = _broken_rules('dcgm_exporter', 'Check the inputs', **inputs)
    assert [name for name, _msg in broken] == (['dcgm_exporter_port'] if clash else []), broken
    if clash:
        assert words in broken[0][1]


@pytest.mark.parametrize('role, inputs, var, words', [
    # Milliseconds: 30 meant seconds, 30000000 microseconds.
    ('dcgm_exporter', {'dcgm_exporter_collect_interval': 99}, 'dcgm_exporter_collect_interval', '100 to 3600000'),
    ('dcgm_exporter', {'dcgm_exporter_collect_interval': 30}, 'dcgm_exporter_collect_interval', 'milliseconds'),
    ('dcgm_exporter', {'dcgm_exporter_collect_interval': 30000000}, 'dcgm_exporter_collect_interval', 'milliseconds'),
    ('dcgm_exporter', {'dcgm_exporter_package_lock_timeout': 0}, 'dcgm_exporter_package_lock_timeout', '1 to 86400'),
    ('dcgm', {'dcgm_package_lock_timeout': 0}, 'dcgm_package_lock_timeout', '1 to 86400'),
    ('dcgm', {'dcgm_package_lock_timeout': 300000}, 'dcgm_package_lock_timeout', 'seconds'),
    # Paths must be absolute.
    ('dcgm', {'dcgm_nvswitch_devices_path': 'proc/driver/nvidia-nvswitch/devices'}, 'dcgm_nvswitch_devices_path',
     'absolute'),
    ('dcgm_exporter', {'dcgm_exporter_verify_ca_path': 'ca.crt'}, 'dcgm_exporter_verify_ca_path', 'absolute'),
])
def test_units_and_paths(role, inputs, var, words):
    broken = _broken_rules(role, 'Check the inputs', **inputs)
    assert [name for name, _msg in broken] == [var], broken
    assert words in broken[0][1]


@pytest.mark.parametrize('interval', [100, 30000, 3600000])
def test_exporter_intervals_in_range_pass(interval):
    assert _broken_rules('dcgm_exporter', 'Check the inputs', dcgm_exporter_collect_interval=interval) == []


def test_relative_tls_paths_are_refused():
    config = {'tls_server_config': {'cert_file': '/etc/dcgm-exporter/tls.crt', 'key_file': 'tls.key'},
              'basic_auth_users': {'prometheus': BCRYPT}}
    broken = _broken_rules('dcgm_exporter', 'Check the web configuration', dcgm_exporter_web_config=config)
    assert [name for name, _msg in broken] == ['dcgm_exporter_web_config'], broken
    assert 'not absolute: key_file' in broken[0][1]
    # The message never shows the configuration (it holds the hashes).
    assert BCRYPT not in broken[0][1]


# --- dcgm_exporter: the TLS pair, read on the host before any restart ---------------------

TLS_CHECK = "Check the TLS files exist, the key is root's alone and belongs to a certificate in its validity"
TLS_READ = "Read whether the TLS key belongs to the certificate, and the certificate's validity"


@pytest.fixture(scope='module')
def tls_files(tmp_path_factory):
    """Self-signed certificates and keys: a matching pair, keys of other certificates (same and other type),
    an expired certificate, one not valid yet, one valid past 2049 (GeneralizedTime), an encrypted key, a DER
    certificate and a chain whose first certificate is the key's."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    root = tmp_path_factory.mktemp('tls')
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u'127.0.0.1')])
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def certificate(owner, start, end):
        return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(owner.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
                .sign(owner, hashes.SHA256()))

    def pem(cert):
        return cert.public_bytes(serialization.Encoding.PEM)

    def private(owner, encryption=serialization.NoEncryption()):
        return owner.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

    files = {
        'good.crt': pem(certificate(key, now - day, now + 30 * day)),
        'chain.crt': pem(certificate(key, now - day, now + 30 * day)) + pem(certificate(other, now - day, now + day)),
        'expired.crt': pem(certificate(key, now - 30 * day, now - day)),
        'future.crt': pem(certificate(key, now + day, now + 30 * day)),
        'y2060.crt': pem(certificate(key, now - day, datetime.datetime(2060, 1, 1, tzinfo=datetime.timezone.utc))),
        'der.crt': certificate(key, now - day, now + day).public_bytes(serialization.Encoding.DER),
        'good.key': private(key),
        'other.key': private(other),
        'rsa.key': private(rsa_key),
        'encrypted.key': private(key, serialization.BestAvailableEncryption(b'secret')),
    }
    for file_name, data in files.items():
        (root / file_name).write_bytes(data)
    return str(root)


def _tls_read(tls_files, cert, key):
    """What the role's read prints for the pair, run here with this Python (the host's, on a host)."""
    import subprocess
    import sys
    script = _expr('dcgm_exporter', '__dcgm_exporter_tls_check_script')
    result = subprocess.run([sys.executable, '-c', script, os.path.join(tls_files, cert), os.path.join(tls_files, key)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return {'rc': result.returncode, 'stdout': result.stdout, 'stderr': result.stderr}


def _tls_broken(tls_files, cert, key, read=None):
    cert_path, key_path = os.path.join(tls_files, cert), os.path.join(tls_files, key)
    files = dict((path, {'exists': True, 'type': 'file', 'owner': 'root', 'mode': '0600'}) for path in (cert_path, key_path))
    return _broken_rules('dcgm_exporter', TLS_CHECK, ansible_check_mode=False,
                         dcgm_exporter_web_config={'tls_server_config': {'cert_file': cert_path, 'key_file': key_path}},
                         __dcgm_exporter_state={'files': files},
                         __dcgm_exporter_tls_read=read if read is not None else _tls_read(tls_files, cert, key))


@pytest.mark.parametrize('cert, key, words', [
    ('good.crt', 'other.key', 'key_file that does not belong to its certificate'),
    ('good.crt', 'rsa.key', 'key_file that does not belong to its certificate'),
    ('chain.crt', 'other.key', 'key_file that does not belong to its certificate'),
    ('good.crt', 'encrypted.key', 'key_file that cannot be loaded with its certificate'),
    ('expired.crt', 'good.key', 'has an expired tls_server_config.cert_file'),
    ('future.crt', 'good.key', 'cert_file not valid yet'),
    ('der.crt', 'good.key', 'cert_file that holds no PEM certificate'),
    ('good.key', 'good.key', 'cert_file that holds no PEM certificate'),
])
def test_a_tls_pair_that_would_fail_after_the_restart_is_refused(tls_files, cert, key, words):
    broken = _tls_broken(tls_files, cert, key)
    assert broken and set(name for name, _msg in broken) == {'dcgm_exporter_web_config'}, broken
    assert any(words in msg for _name, msg in broken), broken
    assert any(os.path.join(tls_files, cert) in msg for _name, msg in broken), broken


@pytest.mark.parametrize('cert', ['good.crt', 'chain.crt', 'y2060.crt'])
def test_a_matching_pair_in_its_validity_passes(tls_files, cert):
    read = _tls_read(tls_files, cert, 'good.key')
    assert read['rc'] == 0 and json.loads(read['stdout'])['pair'] == 'ok', read
    assert _tls_broken(tls_files, cert, 'good.key', read) == []


def test_the_certificates_dates_are_read_from_its_encoding(tls_files):
    from cryptography import x509
    with open(os.path.join(tls_files, 'y2060.crt'), 'rb') as handle:
        expected = x509.load_pem_x509_certificate(handle.read())
    read = json.loads(_tls_read(tls_files, 'y2060.crt', 'good.key')['stdout'])
    assert read['not_after'] == int(expected.not_valid_after_utc.timestamp())
    assert read['not_before'] == int(expected.not_valid_before_utc.timestamp())
    assert read['not_after_text'] == '2060-01-01 00:00:00 UTC'


def test_a_read_that_crashed_is_reported_naming_the_input(tls_files):
    broken = _tls_broken(tls_files, 'good.crt', 'good.key',
                         {'rc': 127, 'stdout': '', 'stderr': 'python3: No such file or directory'})
    assert [name for name, _msg in broken] == ['dcgm_exporter_web_config'], broken
    assert 'could not be read (python3: No such file or directory)' in broken[0][1]


def test_the_tls_read_changes_nothing_and_runs_in_check_mode():
    task = _task('dcgm_exporter', 'preflight.yml', TLS_READ)
    assert task['changed_when'] is False and task['check_mode'] is False and task['failed_when'] is False
    names = [t['name'] for t in _load('dcgm_exporter', 'tasks', 'preflight.yml')]
    # Read, then judged with the other checks of the files, all before the role's first change.
    assert names.index(TLS_READ) + 1 == names.index(TLS_CHECK)


# --- dcgm: host engine command line and dcgmi target ----------------------------------

@pytest.mark.parametrize('inputs, args, host, runtime_dir', [
    # The default: a Unix socket in a directory systemd creates below /run.
    ({}, ['-n', '--service-account', 'nvidia-dcgm', '--domain-socket', '/run/nvidia-dcgm/nv-hostengine.sock'],
     'unix:///run/nvidia-dcgm/nv-hostengine.sock', 'nvidia-dcgm'),
    # dcgm_unix_socket empty: TCP.
    ({'dcgm_unix_socket': ''}, ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', '127.0.0.1', '--port', '5555'],
     '127.0.0.1:5555', ''),
    ({'dcgm_port': 5565, 'dcgm_service_account': '', 'dcgm_unix_socket': ''},
     ['-n', '--bind-interface', '127.0.0.1', '--port', '5565'], '127.0.0.1:5565', ''),
    # Bound to everything, dcgmi still talks over loopback.
    ({'dcgm_listen_address': 'ALL', 'dcgm_unix_socket': ''},
     ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', 'ALL', '--port', '5555'], '127.0.0.1:5555', ''),
    ({'dcgm_listen_address': '::1', 'dcgm_unix_socket': ''},
     ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', '::1', '--port', '5555'], '[::1]:5555', ''),
    # A socket replaces TCP; one directly below /run gets its directory from systemd.
    ({'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine', 'dcgm_extra_args': ['--denylist-modules', '3']},
     ['-n', '--service-account', 'nvidia-dcgm', '--domain-socket', '/run/nvidia-dcgm/nv-hostengine',
      '--denylist-modules', '3'], 'unix:///run/nvidia-dcgm/nv-hostengine', 'nvidia-dcgm'),
    ({'dcgm_unix_socket': '/run/dcgm/engine.sock'},
     ['-n', '--service-account', 'nvidia-dcgm', '--domain-socket', '/run/dcgm/engine.sock'],
     'unix:///run/dcgm/engine.sock', 'dcgm'),
])
def test_dcgm_listener(inputs, args, host, runtime_dir):
    assert _expr('dcgm', '__dcgm_hostengine_args', **inputs) == args
    assert _expr('dcgm', '__dcgm_dcgmi_host', **inputs) == host
    assert _expr('dcgm', '__dcgm_runtime_directory', **inputs) == runtime_dir


def _execstart(text):
    return [line[len('ExecStart='):] for line in text.splitlines() if line.startswith('ExecStart=')]


def test_dcgm_dropin_clears_then_sets_execstart():
    text = _template('dcgm', 'nvidia-dcgm-listener.conf.j2', dcgm_port=5565, dcgm_unix_socket='')
    assert text.splitlines()[0].startswith('#')
    assert '[Service]' in text
    assert _execstart(text) == ['', '/usr/bin/nv-hostengine -n --service-account nvidia-dcgm '
                                    '--bind-interface 127.0.0.1 --port 5565']
    assert 'RuntimeDirectory' not in text and 'Group=' not in text


def test_dcgm_default_socket_is_root_and_its_groups_alone():
    text = _template('dcgm', 'nvidia-dcgm-listener.conf.j2')
    assert _execstart(text)[1] == ('/usr/bin/nv-hostengine -n --service-account nvidia-dcgm --domain-socket '
                                   '/run/nvidia-dcgm/nv-hostengine.sock')
    lines = text.splitlines()
    for line in ('Group=nvidia-dcgm-clients', 'UMask=0007', 'RuntimeDirectory=nvidia-dcgm', 'RuntimeDirectoryMode=0750'):
        assert line in lines, line
    # Every socket preflight accepts gets its directory from systemd (the others are refused: see below).
    text = _template('dcgm', 'nvidia-dcgm-listener.conf.j2', dcgm_unix_socket='/run/dcgm-monitoring/engine.sock',
                     dcgm_unix_socket_group='gpu-monitoring')
    for line in ('Group=gpu-monitoring', 'RuntimeDirectory=dcgm-monitoring', 'RuntimeDirectoryMode=0750'):
        assert line in text.splitlines(), line


def test_dcgm_dropin_escapes_arguments_for_systemd():
    text = _template('dcgm', 'nvidia-dcgm-listener.conf.j2', dcgm_unix_socket='/run/nvidia-dcgm/nv-hostengine',
                     dcgm_extra_args=['--log-filename', '/var/log/dcgm %h.log', '--home-dir', '$HOME'])
    assert _execstart(text)[1] == ('/usr/bin/nv-hostengine -n --service-account nvidia-dcgm --domain-socket '
                                   '/run/nvidia-dcgm/nv-hostengine --log-filename "/var/log/dcgm %%h.log" '
                                   '--home-dir "$$HOME"')
    assert 'RuntimeDirectory=nvidia-dcgm\n' in text


# --- dcgm: health watches ----------------------------------------------------------------

@pytest.mark.parametrize('letters, expected', [
    ('a', ['InfoROM', 'Memory', 'NVLINK', 'PCIe', 'Power', 'Thermal']),
    ('pmt', ['Memory', 'PCIe', 'Power', 'Thermal']),
    ('n', ['NVLINK']),
])
def test_dcgm_health_watch_names(letters, expected):
    assert _expr('dcgm', '__dcgm_health_desired', dcgm_health_watches=letters) == expected


# --- dcgm_exporter: command line -----------------------------------------------------------

@pytest.mark.parametrize('inputs, target', [
    # The dcgm role's default, its Unix socket (a port alone does not switch it off).
    ({}, 'unix:///run/nvidia-dcgm/nv-hostengine.sock'),
    ({'dcgm_port': 5565}, 'unix:///run/nvidia-dcgm/nv-hostengine.sock'),
    # Follows the dcgm role's listener when its variables are set.
    ({'dcgm_port': 5565, 'dcgm_unix_socket': ''}, '127.0.0.1:5565'),
    ({'dcgm_listen_address': 'ALL', 'dcgm_port': 5555, 'dcgm_unix_socket': ''}, '127.0.0.1:5555'),
    ({'dcgm_listen_address': '::1', 'dcgm_unix_socket': ''}, '[::1]:5555'),
    ({'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine', 'dcgm_port': 5565}, 'unix:///run/nvidia-dcgm/nv-hostengine'),
    ({'dcgm_unix_socket': ''}, '127.0.0.1:5555'),
    # An explicit target wins.
    ({'dcgm_exporter_hostengine': 'gpu-mgmt:5555', 'dcgm_port': 5565}, 'gpu-mgmt:5555'),
])
def test_exporter_reads_the_dcgm_roles_host_engine(inputs, target):
    assert _expr('dcgm_exporter', '__dcgm_exporter_hostengine_effective', **inputs) == target


def test_exporter_command_line():
    args = _expr('dcgm_exporter', '__dcgm_exporter_args')
    assert args == ['-f', '/etc/dcgm-exporter/gpufleet-counters.csv', '-a', '127.0.0.1:9400',
                    '-r', 'unix:///run/nvidia-dcgm/nv-hostengine.sock', '-c', '30000']
    args = _expr('dcgm_exporter', '__dcgm_exporter_args', dcgm_exporter_listen_address='::', dcgm_exporter_port=9401,
                 dcgm_exporter_web_config={'basic_auth_users': {'prometheus': '$2y$10$x'}},
                 dcgm_exporter_extra_args=['--kubernetes'], dcgm_unix_socket='')
    # The web configuration is read from the copy in the exporter's runtime directory.
    assert args == ['-f', '/etc/dcgm-exporter/gpufleet-counters.csv', '-a', '[::]:9401', '-r', '127.0.0.1:5555',
                    '-c', '30000', '--web-config-file', '/run/nvidia-dcgm-exporter/web-config.yml', '--kubernetes']


def test_exporter_dropin_sets_remote_mode_and_restarts_with_the_host_engine():
    text = _template('dcgm_exporter', 'nvidia-dcgm-exporter.conf.j2', dcgm_exporter_port=9401, dcgm_port=5565,
                     dcgm_unix_socket='')
    assert _execstart(text) == ['', '/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/gpufleet-counters.csv '
                                    '-a 127.0.0.1:9401 -r 127.0.0.1:5565 -c 30000']
    assert 'PartOf=nvidia-dcgm.service' in text
    assert 'Restart=on-failure' in text


@pytest.mark.parametrize('inputs, url', [
    ({}, 'http://127.0.0.1:9400/metrics'),
    ({'dcgm_exporter_listen_address': '', 'dcgm_exporter_port': 9401}, 'http://127.0.0.1:9401/metrics'),
    ({'dcgm_exporter_listen_address': '::'}, 'http://[::1]:9400/metrics'),
    ({'dcgm_exporter_listen_address': '10.0.0.5',
      'dcgm_exporter_web_config': {'tls_server_config': {'cert_file': 'a', 'key_file': 'b'}}},
     'https://10.0.0.5:9400/metrics'),
])
def test_exporter_verification_url(inputs, url):
    assert _expr('dcgm_exporter', '__dcgm_exporter_metrics_url', **inputs) == url


@pytest.mark.parametrize('name, version, spec', [
    ('Debian.yml', '', 'datacenter-gpu-manager-exporter'),
    ('Debian.yml', '4.1.3', 'datacenter-gpu-manager-exporter=4.1.3-*'),
    ('Debian.yml', '4.1.3-1', 'datacenter-gpu-manager-exporter=4.1.3-1'),
    ('RedHat.yml', '4.1.3', 'datacenter-gpu-manager-exporter-4.1.3'),
])
def test_exporter_package_spec(name, version, spec):
    assert _expr('dcgm_exporter', '__dcgm_exporter_package_spec', name, dcgm_exporter_version=version) == spec


@pytest.mark.parametrize('os_file, version, installed, missing', [
    ('Debian.yml', '', '', True),
    # Installed, no version asked: never moved.
    ('Debian.yml', '', '4.1.1-1', False),
    ('Debian.yml', '4.1.1', '4.1.1-1', False),
    ('Debian.yml', '4.1.3', '4.1.1-1', True),
    ('Debian.yml', '4.1.1-2', '4.1.1-1', True),
    ('Debian.yml', '4.1.1-1', '4.1.1-1', False),
    ('RedHat.yml', '4.1.1', '1:4.1.1-1', False),
])
def test_exporter_installs_only_when_missing(os_file, version, installed, missing):
    assert _expr('dcgm_exporter', '__dcgm_exporter_package_missing', os_file, dcgm_exporter_version=version,
                 __dcgm_exporter_installed_version=installed) is missing


ACTIVE_EXPORTER = {'active_state': 'active', 'unit_file_state': 'enabled',
                   'drop_in_paths': ['/etc/systemd/system/nvidia-dcgm-exporter.service.d/10-gpufleet.conf']}


@pytest.mark.parametrize('unit, install, dropin, needed', [
    (ACTIVE_EXPORTER, SKIPPED, UNCHANGED, False),
    (ACTIVE_EXPORTER, CHANGED, UNCHANGED, True),
    (ACTIVE_EXPORTER, SKIPPED, CHANGED, True),
    (dict(ACTIVE_EXPORTER, active_state='activating'), SKIPPED, UNCHANGED, True),
    (dict(ACTIVE_EXPORTER, drop_in_paths=['/run/systemd/system/nvidia-dcgm-exporter.service.d/x.conf']),
     SKIPPED, UNCHANGED, True),
    ({}, SKIPPED, UNCHANGED, True),
])
def test_exporter_service_is_asked_only_when_something_differs(unit, install, dropin, needed):
    assert _expr('dcgm_exporter', '__dcgm_exporter_service_needed', __dcgm_exporter_unit=unit,
                 __dcgm_exporter_install=install, __dcgm_exporter_dropin=dropin) is needed


# /proc/net/tcp and tcp6 of a host with the DCGM engines of two scenarios
# (127.0.0.1:5555 and 5565 = 0x15B3, 0x15BD), a wildcard sshd (0.0.0.0:22),
# an established connection to 5566 and a wildcard IPv6 listener on 5575.
PROC_NET_TCP = (
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
    '   0: 0100007F:15B3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 677315 1 0 100 0 0 10 0\n'
    '   1: 0100007F:15BD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 676080 1 0 100 0 0 10 0\n'
    '   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1120 1 0 100 0 0 10 0\n'
    '   3: 0100007F:A2C4 0100007F:15BE 01 00000000:00000000 02:000A7E2B 00000000     0        0 701811 2 0 20 4 30 10 -1\n'
)
PROC_NET_TCP6 = (
    '  sl  local_address                         remote_address                        st tx_queue rx_queue\n'
    '   0: 00000000000000000000000000000000:15C7 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000\n'
)


@pytest.mark.parametrize('inputs, contents, listening', [
    ({'dcgm_unix_socket': ''}, ['/proc/net/tcp'], True),
    ({'dcgm_port': 5565, 'dcgm_unix_socket': ''}, ['/proc/net/tcp'], True),
    # 5566 only appears as the remote end of a connection.
    ({'dcgm_port': 5566, 'dcgm_unix_socket': ''}, ['/proc/net/tcp'], False),
    # sshd's wildcard listener answers on loopback too.
    ({'dcgm_exporter_hostengine': 'localhost:22'}, ['/proc/net/tcp'], True),
    ({'dcgm_exporter_hostengine': '[::1]:5575'}, ['/proc/net/tcp6'], True),
    ({'dcgm_exporter_hostengine': '[::1]:5555'}, ['/proc/net/tcp6'], False),
    # Another host: the kernel of this one cannot tell, wait_for asks.
    ({'dcgm_exporter_hostengine': 'gpu-mgmt:5555'}, [], False),
    ({'dcgm_listen_address': '10.0.0.5', 'dcgm_unix_socket': ''}, [], False),
])
def test_exporter_sees_a_local_host_engine_listen_in_the_socket_table(inputs, contents, listening):
    assert _expr('dcgm_exporter', '__dcgm_exporter_state_contents', **inputs) == contents
    state = {'packages': {}, 'units': {}, 'files': {},
             'contents': {'/proc/net/tcp': PROC_NET_TCP, '/proc/net/tcp6': PROC_NET_TCP6}}
    facts = _set_fact('dcgm_exporter', 'state.yml',
                      'Record the installed exporter, its unit and whether the host engine listens',
                      __dcgm_exporter_state=state, **inputs)
    assert facts['__dcgm_exporter_engine_listening'] is listening
    assert facts['__dcgm_exporter_installed_version'] == ''
    assert facts['__dcgm_exporter_unit'] == {}


@pytest.mark.parametrize('exists, listening', [(True, True), (False, False)])
def test_exporter_sees_a_host_engine_socket(exists, listening):
    inputs = {'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine'}
    assert _expr('dcgm_exporter', '__dcgm_exporter_state_contents', **inputs) == []
    assert '/run/nvidia-dcgm/nv-hostengine' in _expr('dcgm_exporter', '__dcgm_exporter_state_files', **inputs)
    state = {'packages': _installed('4.1.1-1', 'datacenter-gpu-manager-exporter'), 'units': {}, 'contents': {},
             'files': {'/run/nvidia-dcgm/nv-hostengine': {'exists': exists, 'type': 'other'}}}
    facts = _set_fact('dcgm_exporter', 'state.yml',
                      'Record the installed exporter, its unit and whether the host engine listens',
                      __dcgm_exporter_state=state, **inputs)
    assert facts['__dcgm_exporter_engine_listening'] is listening
    assert facts['__dcgm_exporter_installed_version'] == '4.1.1-1'


# --- dcgm_exporter: files it writes -----------------------------------------------------

def _csv_records(text):
    lines = [line for line in text.splitlines() if line and not line.startswith('#')]
    return list(csv.reader(io.StringIO('\n'.join(lines))))


def test_counters_csv_holds_the_defaults_and_the_extra_counters():
    extra = [{'name': 'DCGM_FI_DEV_POWER_MGMT_LIMIT', 'type': 'gauge', 'help': 'Power limit, enforced (in W).'},
             {'name': 'DCGM_FI_DEV_NAME', 'type': 'label', 'help': 'Say "model".'}]
    text = _template('dcgm_exporter', 'counters.csv.j2', dcgm_exporter_extra_counters=extra)
    records = _csv_records(text)
    expected = _plain(_defaults('dcgm_exporter')['dcgm_exporter_counters']) + extra
    assert records == [[c['name'], c['type'], c['help']] for c in expected]
    # No space after a comma: the exporter's CSV reader would keep it.
    assert all(not field.startswith(' ') for record in records for field in record)


def test_default_counters_cover_the_dashboard_and_the_issue():
    names = {c['name'] for c in _plain(_defaults('dcgm_exporter')['dcgm_exporter_counters'])}
    for wanted in ('DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_GPU_TEMP',
                   'DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL',
                   'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL'):
        assert wanted in names
    # Fields that some GPUs leave blank would fail the per-GPU check by default.
    assert not names & {'DCGM_FI_DEV_MEMORY_TEMP', 'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL'}


def test_web_config_renders_the_dictionary():
    config = {'tls_server_config': {'cert_file': '/etc/dcgm-exporter/tls.crt', 'key_file': '/etc/dcgm-exporter/tls.key'},
              'basic_auth_users': {'prometheus': '$2b$10$abcdefghijklmnopqrstuu0123456789ABCDEFGHIJKLMNOPQRSTU'}}
    text = _template('dcgm_exporter', 'web-config.yml.j2', dcgm_exporter_web_config=config)
    # The TLS files are the copies systemd makes into the exporter's runtime directory.
    assert yaml.safe_load(text) == dict(config, tls_server_config={'cert_file': '/run/nvidia-dcgm-exporter/tls.crt',
                                                                   'key_file': '/run/nvidia-dcgm-exporter/tls.key'})
    # ... at every start, as root ("+"), readable by the exporter's account alone.
    dropin = _template('dcgm_exporter', 'nvidia-dcgm-exporter.conf.j2', dcgm_exporter_web_config=config)
    assert ('ExecStartPre=+/usr/bin/install -m 0400 -o nvidia-dcgm-exporter -g nvidia-dcgm-exporter '
            '/etc/dcgm-exporter/tls.key /run/nvidia-dcgm-exporter/tls.key') in dropin.splitlines()
    assert ('ExecStartPre=+/usr/bin/install -m 0400 -o nvidia-dcgm-exporter -g nvidia-dcgm-exporter '
            '/etc/dcgm-exporter/gpufleet-web-config.yml /run/nvidia-dcgm-exporter/web-config.yml') in dropin.splitlines()
    for line in ('User=nvidia-dcgm-exporter', 'SupplementaryGroups=nvidia-dcgm-clients', 'RuntimeDirectoryMode=0700',
                 'CapabilityBoundingSet=', 'ProtectSystem=strict', 'NoNewPrivileges=yes'):
        assert line in dropin.splitlines(), line


# --- dcgm_exporter: shipped dashboard and scrape snippet -------------------------------

def _files(name):
    return _path('dcgm_exporter', 'files', name)


def _dashboard():
    with open(_files('grafana-dashboard.json')) as handle:
        return json.load(handle)


def _queries(dashboard):
    for panel in dashboard['panels']:
        for target in panel.get('targets', []):
            yield panel, target['expr']


def test_dashboard_panels_cover_the_issue():
    exprs = ' '.join(expr for _unused, expr in _queries(_dashboard()))
    for metric in ('DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_POWER_USAGE',
                   'DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL'):
        assert metric in exprs, metric


def test_dashboard_reads_only_default_counters_per_host_and_gpu():
    dashboard = _dashboard()
    names = {c['name'] for c in _plain(_defaults('dcgm_exporter')['dcgm_exporter_counters'])}
    for panel, expr in _queries(dashboard):
        assert set(re.findall(r'\bDCGM_[A-Z0-9_]+', expr)) <= names, (panel['title'], expr)
        # Every selector narrows to the chosen hosts and GPUs.
        for selector in re.findall(r'DCGM_[A-Z0-9_]+(\{[^}]*\})', expr):
            assert 'Hostname=~"$Hostname"' in selector and 'gpu=~"$gpu"' in selector, expr
    variables = {v['name']: v for v in dashboard['templating']['list']}
    assert {'datasource', 'Hostname', 'gpu'} <= set(variables)
    ids = [panel['id'] for panel in dashboard['panels']]
    assert len(ids) == len(set(ids))
    legends = [t.get('legendFormat', '') for p in dashboard['panels'] for t in p.get('targets', [])]
    assert all('{{Hostname}}' in legend and '{{gpu}}' in legend for legend in legends if legend)
    table = [p for p in dashboard['panels'] if p['type'] == 'table'][0]
    assert 'UUID' in table['transformations'][0]['options']['indexByName']


def test_prometheus_snippet_is_a_scrape_config():
    with open(_files('prometheus-scrape.yml')) as handle:
        snippet = yaml.safe_load(handle)
    job = snippet['scrape_configs'][0]
    assert job['metrics_path'] == '/metrics'
    # The exporter's labels clash with no target label (prometheus-scrape.yml says why).
    assert 'honor_labels' not in job
    assert job['file_sd_configs'][0]['files']
    # No faster than the exporter samples by default (30000 ms).
    assert int(job['scrape_interval'].rstrip('s')) * 1000 >= _defaults('dcgm_exporter')['dcgm_exporter_collect_interval']


def _verify_task_vars(name):
    tasks = _load('dcgm_exporter', 'tasks', 'verify.yml')
    return [task for task in tasks if task['name'] == name][0]['vars']


METRICS = '''# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n1",DCGM_FI_DRIVER_VERSION="580.95.05"} 3
DCGM_FI_DEV_GPU_UTIL{UUID="GPU-b",gpu="1",Hostname="n1"} 0
DCGM_FI_DEV_GPU_UTIL_EXTRA{gpu="2",UUID="GPU-c"} 0
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7"} 10
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",GPU_I_PROFILE="1g.10gb",GPU_I_ID="8"} 12
'''


@pytest.mark.parametrize('counter, gpus, missing', [
    # gpu as the first label or a later one; another metric sharing the prefix does not count.
    ('DCGM_FI_DEV_GPU_UTIL', ['0', '1', '2'], ['2']),
    # MIG: one sample per GPU instance, still one GPU.
    ('DCGM_FI_DEV_FB_USED', ['0', '1'], ['1']),
    ('DCGM_FI_DEV_GPU_TEMP', ['0'], ['0']),
])
def test_exporter_check_finds_the_samples_of_each_gpu(counter, gpus, missing):
    task_vars = _trust(_verify_task_vars('Check every counter is exported for every GPU'))
    variables = _variables('dcgm_exporter', item={'name': counter, 'type': 'gauge', 'help': 'x'},
                           __dcgm_exporter_metrics={'content': METRICS},
                           __dcgm_exporter_smi={'gpus': [{'index': int(g)} for g in gpus]})
    variables.update(task_vars)
    assert _render(task_vars['__dcgm_exporter_missing'], variables) == missing


def test_exporter_check_finds_label_counters():
    task = [t for t in _load('dcgm_exporter', 'tasks', 'verify.yml')
            if t['name'] == 'Check every label counter labels the samples'][0]
    that = trust_as_template('{{ %s }}' % task['ansible.builtin.assert']['that'])
    for name, present in [('DCGM_FI_DRIVER_VERSION', True), ('DCGM_FI_DEV_SERIAL', False)]:
        variables = _variables('dcgm_exporter', item={'name': name}, __dcgm_exporter_metrics={'content': METRICS})
        assert _render(that, variables) is present


# dcgmi discovery --list as DCGM 4 prints it (two GPUs shown of an HGX board).
DISCOVERY = '''2 GPUs found.
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: NVIDIA H100 80GB HBM3                                          |
|        | PCI Bus ID: 00000000:18:00.0                                         |
|        | Device UUID: GPU-2e82308d-2e7d-5512-80ac-7f0cca15fd1f                |
+--------+----------------------------------------------------------------------+
| 1      | Name: NVIDIA H100 80GB HBM3                                          |
|        | PCI Bus ID: 00000000:2A:00.0                                         |
|        | Device UUID: GPU-a112006b-f951-e077-a08d-19c1f74db127                |
+--------+----------------------------------------------------------------------+
4 NvSwitches found.
+-----------+
| Switch ID |
+-----------+
| 0         |
| 1         |
| 2         |
| 3         |
+-----------+
0 ConnectX found.
'''


def _dcgm_verify_vars(name):
    return _trust([task for task in _load('dcgm', 'tasks', 'verify.yml') if task['name'] == name][0]['vars'])


@pytest.mark.parametrize('stdout, gpus, switches', [
    (DISCOVERY, ['GPU-2e82308d-2e7d-5512-80ac-7f0cca15fd1f', 'GPU-a112006b-f951-e077-a08d-19c1f74db127'], 4),
    ('1 GPU found.\n| 0 | Device UUID: GPU-0c1c896a-d01d-e13f-8df8-558d6bb76cd0 |\n0 NvSwitches found.\n',
     ['GPU-0c1c896a-d01d-e13f-8df8-558d6bb76cd0'], 0),
    ('Error: unable to establish a connection to the specified host: 127.0.0.1:5555\n', [], 0),
])
def test_dcgm_discovery_parsing(stdout, gpus, switches):
    gpu_vars = _dcgm_verify_vars('Check that DCGM discovers every GPU')
    switch_vars = _dcgm_verify_vars('Check that DCGM discovers every NVSwitch')
    variables = _variables('dcgm', __dcgm_discovery={'stdout': stdout})
    variables.update(gpu_vars)
    variables.update(switch_vars)
    assert _render(gpu_vars['__dcgm_found_gpus'], variables) == len(gpus)
    assert _render(gpu_vars['__dcgm_found_uuids'], variables) == gpus
    assert int(_render(switch_vars['__dcgm_found_switches'], variables)) == switches


# dcgmi diag -r 1 --json as DCGM 4 writes it: GPU 0 without persistence mode.
DIAG = {
    'DCGM Diagnostic': {'test_categories': [{'category': 'Deployment', 'tests': [{
        'name': 'software',
        'results': [
            {'entity_group': 'GPU', 'entity_group_id': 1, 'entity_id': 0, 'status': 'Fail',
             'warnings': [{'error_category': 8, 'error_id': 29, 'error_severity': 5,
                           'warning': 'Persistence Mode: Persistence mode for GPU 0 is disabled.'}]},
            {'entity_group': 'GPU', 'entity_group_id': 1, 'entity_id': 1, 'status': 'Pass'}],
        'test_summary': {'status': 'Fail'}}]}]},
    'entity_groups': [{'entities': [{'device_id': '2330', 'entity_id': 0, 'serial_num': '1'}],
                       'entity_group': 'GPU', 'entity_group_id': 1}],
    'metadata': {'Driver Version Detected': '570.195.03', 'version': '4.4.1'},
}


def _run_diag_summary(document, level=1):
    """The set_fact steps of tasks/diag.yml, in order, as Ansible runs them."""
    tasks = dict((task['name'], task) for task in _load('dcgm', 'tasks', 'diag.yml'))
    variables = _variables('dcgm', dcgm_diag_level=level, __dcgm_diag_document=document, __dcgm_diag_tests=[])
    summarise = tasks['Summarise each test']
    for item in _render(_trust(summarise['loop']), variables):
        variables['item'] = item
        variables['__dcgm_diag_tests'] = _render(
            _trust(summarise['ansible.builtin.set_fact']['__dcgm_diag_tests']), variables)
    result = tasks['Return the diagnostic result']['ansible.builtin.set_fact']['dcgm_diag_result']
    return dict((key, _render(_trust(value), variables)) for key, value in result.items())


def test_dcgm_diag_result_is_parsed():
    result = _run_diag_summary(DIAG)
    assert result == {
        'level': 1, 'passed': False, 'failed_tests': ['software'], 'dcgm_version': '4.4.1',
        'driver_version': '570.195.03',
        'tests': [{'name': 'software', 'category': 'Deployment', 'status': 'Fail', 'gpus': {0: 'Fail', 1: 'Pass'},
                   'messages': ['Persistence Mode: Persistence mode for GPU 0 is disabled.']}]}


def test_dcgm_diag_result_passes_when_no_test_fails():
    document = json.loads(json.dumps(DIAG))
    software = document['DCGM Diagnostic']['test_categories'][0]['tests'][0]
    software['results'][0] = {'entity_id': 0, 'status': 'Pass'}
    software['test_summary']['status'] = 'Pass'
    document['DCGM Diagnostic']['test_categories'].append({'category': 'Integration', 'tests': [
        {'name': 'pcie', 'results': [{'entity_id': 0, 'status': 'Skip'}], 'test_summary': {'status': 'Skip'}}]})
    result = _run_diag_summary(document, level=2)
    assert result['passed'] is True and result['failed_tests'] == [] and result['level'] == 2
    assert [(t['name'], t['category'], t['status']) for t in result['tests']] == [
        ('software', 'Deployment', 'Pass'), ('pcie', 'Integration', 'Skip')]


# --- dcgm: a pinned version must be offered before DCGM 3 is removed ------------------------

MADISON = [
    ' datacenter-gpu-manager-4-core | 1:4.4.1-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages',
    ' datacenter-gpu-manager-4-core | 1:4.2.3-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages',
    'datacenter-gpu-manager-4-proprietary | 1:4.4.1-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages',
    'datacenter-gpu-manager-4-cuda12 | 1:4.2.3-1 | http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64  Packages',
]


@pytest.mark.parametrize('version, unavailable', [
    ('4.4.1', ['datacenter-gpu-manager-4-cuda12']),
    ('1:4.2.3-1', ['datacenter-gpu-manager-4-proprietary']),
    ('4.5.0', ['datacenter-gpu-manager-4-core', 'datacenter-gpu-manager-4-proprietary', 'datacenter-gpu-manager-4-cuda12']),
])
def test_a_pinned_dcgm_version_must_be_offered(version, unavailable):
    task = _task('dcgm', 'version_offered.yml', 'Check every DCGM package is offered at the version')
    variables = _variables('dcgm', dcgm_version=version, __dcgm_driver_cuda_major='12', __dcgm_installed={},
                           __dcgm_offered={'stdout_lines': MADISON})
    variables.update(_trust(task['vars']))
    assert _render(_trust('{{ __dcgm_unavailable }}'), variables) == unavailable


# dnf repoquery with the role's --qf (vars/RedHat.yml): "name|epoch:version-release".
REPOQUERY = [
    'datacenter-gpu-manager-4-core|1:4.4.1-1',
    'datacenter-gpu-manager-4-core|1:4.2.3-1',
    'datacenter-gpu-manager-4-proprietary|1:4.4.1-1',
    'datacenter-gpu-manager-4-cuda13|1:4.4.1-1',
    'datacenter-gpu-manager-4-cuda12|1:4.4.1-1',
]


@pytest.mark.parametrize('installed_core, unavailable', [
    # An installed DCGM keeps its version, as rpm reports it (epoch included): the
    # new CUDA plugin must be offered at it. Before the epoch was read from dnf,
    # "1:4.4.1-1" matched no offered "4.4.1-1" (the fleet's Rocky-shaped HGX, 570 -> 580).
    ('1:4.4.1-1', []),
    ('1:4.2.3-1', ['datacenter-gpu-manager-4-proprietary', 'datacenter-gpu-manager-4-cuda13']),
])
def test_the_installed_dcgm_version_is_found_among_dnfs_offers(installed_core, unavailable):
    task = _task('dcgm', 'version_offered.yml', 'Check every DCGM package is offered at the version')
    variables = _variables('dcgm', __dcgm_driver_cuda_major='13', __dcgm_offered={'stdout_lines': REPOQUERY},
                           __dcgm_installed={'datacenter-gpu-manager-4-core': {'version': installed_core}},
                           __dcgm_installed_version=installed_core)
    variables.update(_trust(task['vars']))
    assert _render(_trust('{{ __dcgm_unavailable }}'), variables) == unavailable
    assert _load(_path('dcgm', 'vars', 'RedHat.yml'))['__dcgm_offered_command'][-1] == (
        '%{name}|%{epoch}:%{version}-%{release}')
