# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The dcgm and dcgm_exporter roles: the expressions of vars/ that build
package names and command lines, the templates they render, and the Grafana
dashboard and Prometheus snippet the exporter role ships.

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
    variables = role_variables(role, 'main.yml', os_file)
    variables['ansible_facts'] = dict(DEBIAN_12)
    variables['ansible_managed'] = 'Ansible managed'
    variables.update(_trust(inputs))
    return variables


def _render(value, variables):
    return _plain(render(value, variables))


def _expr(role, name, os_file='Debian.yml', **inputs):
    variables = _variables(role, os_file, **inputs)
    return _render(variables[name], variables)


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
