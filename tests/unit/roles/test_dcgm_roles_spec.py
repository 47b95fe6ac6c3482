# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The dcgm and dcgm_exporter roles: argument specs against defaults, the
expressions of vars/ that build package names and command lines, the
templates they render, and the Grafana dashboard and Prometheus snippet the
exporter role ships.

Expressions and templates are rendered with Ansible's own templar, from the
role's defaults plus the inputs of each case.
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

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ('dcgm', 'dcgm_exporter')
OS_FILES = ('Debian.yml', 'RedHat.yml')
# Facts the roles set for later roles and plays (not inputs).
FACTS = {'dcgm': {'dcgm_diag_result'}, 'dcgm_exporter': set()}
PYTHON_TYPES = {'str': str, 'int': int, 'bool': bool, 'list': list, 'dict': dict}
DEBIAN_12 = {'distribution': 'Debian', 'distribution_major_version': '12', 'os_family': 'Debian'}

_LOADER = DataLoader()


def _trust(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trust(v) for v in value]
    if isinstance(value, dict):
        return dict((k, _trust(v)) for k, v in value.items())
    return value


def _plain(value):
    """Tagged Ansible values as plain Python ones, for comparisons and type checks."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return dict((_plain(k), _plain(v)) for k, v in value.items())
    return value


def _path(role, *parts):
    return os.path.join(REPO_ROOT, 'roles', role, *parts)


def _load(role, *parts):
    return _LOADER.load_from_file(_path(role, *parts))


def _defaults(role):
    return _trust(_load(role, 'defaults', 'main.yml'))


def _options(role):
    return _load(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']


def _variables(role, os_file='Debian.yml', **inputs):
    variables = dict(_defaults(role))
    variables.update(_trust(_load(role, 'vars', 'main.yml')))
    variables.update(_trust(_load(role, 'vars', os_file)))
    variables['ansible_facts'] = dict(DEBIAN_12)
    variables['ansible_managed'] = 'Ansible managed'
    variables.update(_trust(inputs))
    return variables


def _render(value, variables):
    return _plain(Templar(loader=_LOADER, variables=variables).template(value))


def _expr(role, name, os_file='Debian.yml', **inputs):
    variables = _variables(role, os_file, **inputs)
    return _render(variables[name], variables)


def _template(role, name, **inputs):
    with open(_path(role, 'templates', name)) as handle:
        source = trust_as_template(handle.read())
    return _render(source, _variables(role, **inputs))


# --- argument specs against defaults ---------------------------------------------------

@pytest.mark.parametrize('role', ROLES)
def test_every_default_is_declared_and_every_option_has_a_default(role):
    defaults = set(_defaults(role))
    options = _options(role)
    assert sorted(defaults - set(options)) == [], 'defaults/main.yml variables missing from meta/argument_specs.yml'
    assert sorted(set(options) - defaults) == [], 'options without a default in defaults/main.yml'
    assert [name for name, spec in options.items() if spec.get('required')] == []


@pytest.mark.parametrize('role', ROLES)
def test_every_option_is_prefixed_typed_and_described(role):
    for name, spec in _options(role).items():
        assert name.startswith(role + '_'), name
        assert spec.get('type') in PYTHON_TYPES, (name, spec.get('type'))
        assert spec.get('description'), name
        if spec['type'] == 'list':
            assert spec.get('elements') in PYTHON_TYPES, name


@pytest.mark.parametrize('role', ROLES)
def test_defaults_have_the_declared_type_and_the_spec_default(role):
    defaults = _defaults(role)
    for name, spec in _options(role).items():
        value = _plain(defaults[name])
        assert value == _plain(spec.get('default')), (name, value, spec.get('default'))
        if value is None:
            # Ansible's argument validation checks choices against null too,
            # so a null default must come without choices (preflight checks it).
            assert 'choices' not in spec, name
            continue
        expected_type = PYTHON_TYPES[spec['type']]
        assert isinstance(value, expected_type), (name, value, spec['type'])
        if expected_type is int:
            assert not isinstance(value, bool), name
        if spec['type'] == 'list':
            assert all(isinstance(v, PYTHON_TYPES[spec['elements']]) for v in value), name
        if 'choices' in spec:
            assert value in spec['choices'], (name, value, spec['choices'])


@pytest.mark.parametrize('role', ROLES)
def test_list_of_dict_defaults_fit_their_suboptions(role):
    for name, spec in _options(role).items():
        if spec['type'] != 'list' or spec.get('elements') != 'dict':
            continue
        suboptions = spec['options']
        for entry in _plain(_defaults(role)[name]):
            assert set(entry) == set(suboptions), (name, entry)
            for key, sub in suboptions.items():
                assert isinstance(entry[key], PYTHON_TYPES[sub['type']]), (name, key)
                if 'choices' in sub:
                    assert entry[key] in sub['choices'], (name, entry)


@pytest.mark.parametrize('role', ROLES)
def test_tasks_and_templates_only_read_declared_inputs(role):
    # A misspelt input would silently be undefined (or the fact of the same name).
    declared = set(_defaults(role)) | FACTS[role]
    used = set()
    for sub in ('tasks', 'templates', 'handlers', 'vars'):
        folder = _path(role, sub)
        for name in os.listdir(folder):
            with open(os.path.join(folder, name)) as handle:
                text = re.sub(r'(?m)^\s*tags:.*$', '', handle.read())
                used |= set(re.findall(r'(?<![_\w])(%s_[a-z0-9_]*[a-z0-9])' % role, text))
    if role == 'dcgm':
        # The exporter role's variables share the prefix.
        used = set(name for name in used if not name.startswith('dcgm_exporter_'))
    assert sorted(used - declared) == []


@pytest.mark.parametrize('role', ROLES)
def test_each_package_manager_has_the_same_data(role):
    keys = [set(_load(role, 'vars', name)) for name in OS_FILES]
    assert all(k == keys[0] for k in keys)
    assert all(name.startswith('__%s_' % role) for name in keys[0])


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


# --- dcgm: host engine command line and dcgmi target ----------------------------------

@pytest.mark.parametrize('inputs, args, host, runtime_dir', [
    ({}, ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', '127.0.0.1', '--port', '5555'],
     '127.0.0.1:5555', ''),
    ({'dcgm_port': 5565, 'dcgm_service_account': ''}, ['-n', '--bind-interface', '127.0.0.1', '--port', '5565'],
     '127.0.0.1:5565', ''),
    # Bound to everything, dcgmi still talks over loopback.
    ({'dcgm_listen_address': 'ALL'},
     ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', 'ALL', '--port', '5555'], '127.0.0.1:5555', ''),
    ({'dcgm_listen_address': '::1'},
     ['-n', '--service-account', 'nvidia-dcgm', '--bind-interface', '::1', '--port', '5555'], '[::1]:5555', ''),
    # A socket replaces TCP; one directly below /run gets its directory from systemd.
    ({'dcgm_unix_socket': '/run/nvidia-dcgm/nv-hostengine', 'dcgm_extra_args': ['--denylist-modules', '3']},
     ['-n', '--service-account', 'nvidia-dcgm', '--domain-socket', '/run/nvidia-dcgm/nv-hostengine',
      '--denylist-modules', '3'], 'unix:///run/nvidia-dcgm/nv-hostengine', 'nvidia-dcgm'),
    ({'dcgm_unix_socket': '/var/lib/dcgm/engine.sock'},
     ['-n', '--service-account', 'nvidia-dcgm', '--domain-socket', '/var/lib/dcgm/engine.sock'],
     'unix:///var/lib/dcgm/engine.sock', ''),
])
def test_dcgm_listener(inputs, args, host, runtime_dir):
    assert _expr('dcgm', '__dcgm_hostengine_args', **inputs) == args
    assert _expr('dcgm', '__dcgm_dcgmi_host', **inputs) == host
    assert _expr('dcgm', '__dcgm_runtime_directory', **inputs) == runtime_dir


def _execstart(text):
    return [line[len('ExecStart='):] for line in text.splitlines() if line.startswith('ExecStart=')]


def test_dcgm_dropin_clears_then_sets_execstart():
    text = _template('dcgm', 'nvidia-dcgm-listener.conf.j2', dcgm_port=5565)
    assert text.splitlines()[0].startswith('#')
    assert '[Service]' in text
    assert _execstart(text) == ['', '/usr/bin/nv-hostengine -n --service-account nvidia-dcgm '
                                    '--bind-interface 127.0.0.1 --port 5565']
    assert 'RuntimeDirectory' not in text


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
    ({}, '127.0.0.1:5555'),
    # Follows the dcgm role's listener when its variables are set.
    ({'dcgm_port': 5565}, '127.0.0.1:5565'),
    ({'dcgm_listen_address': 'ALL', 'dcgm_port': 5555}, '127.0.0.1:5555'),
    ({'dcgm_listen_address': '::1'}, '[::1]:5555'),
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
                    '-r', '127.0.0.1:5555', '-c', '30000']
    args = _expr('dcgm_exporter', '__dcgm_exporter_args', dcgm_exporter_listen_address='::', dcgm_exporter_port=9401,
                 dcgm_exporter_web_config={'basic_auth_users': {'prometheus': '$2y$10$x'}},
                 dcgm_exporter_extra_args=['--kubernetes'])
    assert args == ['-f', '/etc/dcgm-exporter/gpufleet-counters.csv', '-a', '[::]:9401', '-r', '127.0.0.1:5555',
                    '-c', '30000', '--web-config-file', '/etc/dcgm-exporter/gpufleet-web-config.yml', '--kubernetes']


def test_exporter_dropin_sets_remote_mode_and_restarts_with_the_host_engine():
    text = _template('dcgm_exporter', 'nvidia-dcgm-exporter.conf.j2', dcgm_exporter_port=9401, dcgm_port=5565)
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
    assert yaml.safe_load(text) == config


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
    assert job['honor_labels'] is True
    assert job['file_sd_configs'][0]['files']
    # No faster than the exporter samples by default (30000 ms).
    assert int(job['scrape_interval'].rstrip('s')) * 1000 >= _defaults('dcgm_exporter')['dcgm_exporter_collect_interval']
