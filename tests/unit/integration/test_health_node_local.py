# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node-local health check (roles/health/files/gpufleet_health_node.py) without a controller.

Installed as the role installs it - the script and exactly the role's list of
module_utils files in one folder - and run by the system's python3 in
isolated mode (-I: no site packages, no Ansible), against the simulated GPUs
(the simulator's nvidia-smi). What is real here: the script, the collection's
checks, and, in the last test, Debian's prometheus-node-exporter serving the
textfile and a real Prometheus scraping it and evaluating the shipped alert
rules. What is simulated: the GPUs, and scontrol in the --slurm tests (the
fleet scenario drains a node with the real slurmd).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.loading import REPO_ROOT
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import SIM_BIN, make_host

ROLE_VARS = os.path.join(REPO_ROOT, 'roles', 'health', 'vars', 'main.yml')
SCRIPT = os.path.join(REPO_ROOT, 'roles', 'health', 'files', 'gpufleet_health_node.py')
ALERTS = os.path.join(REPO_ROOT, 'roles', 'health', 'files', 'gpufleet-health-alerts.yml')
PYTHON = '/usr/bin/python3'
XID_79 = '[  812.345678] NVRM: Xid (PCI:0000:3a:00): 79, pid=0, name=, GPU has fallen off the bus.\n'
# A stand-in for scontrol: it records its arguments and answers "show node" with the state in $FAKE_STATE.
FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> "$FAKE_LOG"
case "$1 $2" in
  "--oneliner show") echo "NodeName=$4 Arch=x86_64 State=${FAKE_STATE:-IDLE} Reason=${FAKE_REASON:-}" ;;
esac
"""


@pytest.fixture
def node(tmp_path):
    """The installed check, a simulated HGX node and the script's configuration."""
    libraries = yaml.safe_load(open(ROLE_VARS))['__health_node_libraries']
    lib = tmp_path / 'lib'
    lib.mkdir()
    shutil.copy(SCRIPT, str(lib))
    for name in libraries:
        shutil.copy(os.path.join(REPO_ROOT, 'plugins', 'module_utils', name + '.py'), str(lib))
    host = make_host(str(tmp_path / 'hgx'), 'hgx_h100_8gpu')
    host.smi('-pm', '1')
    host.write('run/nvidia-fabricmanager/nv-fabricmanager.pid', '%d\n' % os.getpid())
    host.write('var/log/kern.log', 'kernel: Linux version 6.1.0\n')
    scontrol = tmp_path / 'scontrol'
    scontrol.write_text(FAKE_SCONTROL)
    scontrol.chmod(0o755)
    config = {'nvidia_smi': os.path.join(SIM_BIN, 'nvidia-smi'), 'expected_gpu_count': 8,
              'kernel_log_source': 'file', 'kernel_log_path': host.path('var/log/kern.log'),
              'state_path': str(tmp_path / 'state' / 'health-state-node.json'), 'scontrol': str(scontrol),
              'slurm_node': 'hgx01'}
    (tmp_path / 'health-node.json').write_text(json.dumps(config))
    textfiles = tmp_path / 'textfile'
    textfiles.mkdir()
    yield {'lib': lib, 'host': host, 'config': tmp_path / 'health-node.json', 'log': tmp_path / 'scontrol.log',
           'textfiles': textfiles, 'tmp': tmp_path}
    host.cleanup()


def check(node, *args, **env):
    environment = dict(node['host'].env, FAKE_LOG=str(node['log']), **env)
    started = time.monotonic()
    done = subprocess.run([PYTHON, '-I', str(node['lib'] / 'gpufleet_health_node.py'), '--config', str(node['config'])]
                          + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=environment, timeout=120, check=False)
    done.seconds = time.monotonic() - started
    return done


def scontrol_calls(node):
    return node['log'].read_text().splitlines() if node['log'].exists() else []


def metrics(node):
    return (node['textfiles'] / 'gpufleet_health.prom').read_text()


def test_a_healthy_node_exits_0_and_writes_its_series(node):
    done = check(node, '--slurm', '--textfile', str(node['textfiles']))
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'gpufleet-health: healthy, 0 finding(s)' in done.stdout
    text = metrics(node)
    assert 'gpufleet_health_healthy 1' in text and 'gpufleet_health_finding{' not in text
    assert 'gpufleet_health_last_run_timestamp_seconds ' in text
    # Healthy: Slurm is asked only for the node's state (whether a job runs), nothing is changed.
    assert scontrol_calls(node) == ['--oneliner show node hgx01']


def test_an_xid_drains_the_node_once_and_is_remembered(node):
    bus = node['host'].smi('-i', '0', '--query-gpu=pci.bus_id', '--format=csv,noheader').stdout.strip()
    node['host'].write('var/log/kern.log', XID_79.replace('0000:3a:00', bus[-12:-2].lower()))
    done = check(node, '--slurm', '--textfile', str(node['textfiles']))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'critical xid_79 (reboot)' in done.stdout
    assert scontrol_calls(node) == ['--oneliner show node hgx01',
                                    'update NodeName=hgx01 State=DRAIN Reason=gpufleet: gpu health: xid_79']
    text = metrics(node)
    assert ('gpufleet_health_finding{code="xid_79",severity="critical",action="reboot",source="nvidia-xid",gpu="0"} 1'
            in text) and 'gpufleet_health_healthy 0' in text
    # Slurm runs the program every HealthCheckInterval: the same Xid is not raised again, nothing more is asked.
    again = check(node, '--slurm', '--textfile', str(node['textfiles']))
    assert again.returncode == 0 and 'already reported: xid_79' in again.stdout
    assert scontrol_calls(node)[2:] == ['--oneliner show node hgx01'] and 'xid_79' not in metrics(node)


def test_gpu_processes_on_a_node_without_a_job(node):
    pid = node['host'].start_workload('--gpu', '2', '--memory', '4096', '--name', 'python3')
    try:
        busy = check(node, '--slurm', FAKE_STATE='ALLOCATED')
        assert busy.returncode == 0, busy.stdout + busy.stderr
        idle = check(node, '--slurm', FAKE_STATE='IDLE')
        assert idle.returncode == 1 and 'warning gpu_busy_while_idle (drain)' in idle.stdout, idle.stdout
        assert 'pid %d' % pid in idle.stdout
        assert scontrol_calls(node)[-1] == (
            'update NodeName=hgx01 State=DRAIN Reason=gpufleet: gpu health: gpu_busy_while_idle')
    finally:
        node['host'].stop(pid)


def test_a_node_drained_by_someone_else_keeps_its_reason(node):
    node['host'].write('var/log/kern.log', XID_79)
    done = check(node, '--slurm', FAKE_STATE='IDLE+DRAIN', FAKE_REASON='fan_replacement')
    assert done.returncode == 1 and 'is already drained (IDLE+DRAIN); its reason is left as it is' in done.stdout
    assert scontrol_calls(node) == ['--oneliner show node hgx01']


def test_a_bad_configuration_stops_with_its_name(node):
    config = json.loads(node['config'].read_text())
    node['config'].write_text(json.dumps(dict(config, thresholds={'nvlink_crc_error_max': 1})))
    done = check(node)
    assert done.returncode == 2 and "unknown threshold 'nvlink_crc_error_max'" in done.stderr
    node['config'].write_text(json.dumps(dict(config, colour='red')))
    assert "unknown setting(s) colour" in check(node).stderr


def test_the_check_finishes_well_inside_slurms_limit(node):
    """Slurm 22.05 kills a HealthCheckProgram after 60 s. Recorded, not asserted against a time (the
    simulator's nvidia-smi is not the driver's); the benchmark keeps the figure."""
    done = check(node, '--slurm', '--textfile', str(node['textfiles']))
    assert done.returncode == 0
    run_seconds = float([line for line in metrics(node).splitlines()
                         if line.startswith('gpufleet_health_run_seconds ')][0].split()[1])
    assert 0 < run_seconds <= done.seconds
    print('node-local health check: %.2f s wall, %.2f s inside the script' % (done.seconds, run_seconds))


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _query(port, expression):
    url = 'http://127.0.0.1:%d/api/v1/query?query=%s' % (port, urllib.request.quote(expression))
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read().decode())['data']['result']


def test_real_node_exporter_serves_the_finding_and_real_prometheus_alerts_on_it(node):
    exporter, prometheus = shutil.which('prometheus-node-exporter'), shutil.which('prometheus')
    assert exporter and prometheus, "Debian's prometheus and prometheus-node-exporter come with make setup"
    bus = node['host'].smi('-i', '0', '--query-gpu=pci.bus_id', '--format=csv,noheader').stdout.strip()
    node['host'].write('var/log/kern.log', XID_79.replace('0000:3a:00', bus[-12:-2].lower()))
    assert check(node, '--textfile', str(node['textfiles'])).returncode == 1
    exporter_port, prometheus_port = _free_port(), _free_port()
    rules = yaml.safe_load(open(ALERTS))
    # The shipped rules, with the critical alert's waiting period cut so a test can see it fire.
    rules['groups'][0]['rules'][0]['for'] = '1s'
    (node['tmp'] / 'rules.yml').write_text(yaml.safe_dump(rules))
    (node['tmp'] / 'prometheus.yml').write_text(yaml.safe_dump({
        'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
        'rule_files': [str(node['tmp'] / 'rules.yml')],
        'scrape_configs': [{'job_name': 'node', 'static_configs': [{'targets': ['127.0.0.1:%d' % exporter_port]}]}]}))
    processes = [
        subprocess.Popen([exporter, '--web.listen-address=127.0.0.1:%d' % exporter_port, '--collector.disable-defaults',
                          '--collector.textfile', '--collector.textfile.directory=%s' % node['textfiles']],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([prometheus, '--config.file=%s' % (node['tmp'] / 'prometheus.yml'),
                          '--storage.tsdb.path=%s' % (node['tmp'] / 'tsdb'),
                          '--web.listen-address=127.0.0.1:%d' % prometheus_port],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        series, alerts = [], []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (series and alerts):
            time.sleep(1)
            try:
                series = _query(prometheus_port, 'gpufleet_health_finding')
                alerts = _query(prometheus_port, 'ALERTS{alertname="GpuHealthCritical",alertstate="firing"}')
            except (IOError, OSError, ValueError):
                continue
        assert [s['metric']['code'] for s in series] == ['xid_79'], series
        labels = series[0]['metric']
        assert (labels['severity'], labels['action'], labels['source'], labels['gpu']) == (
            'critical', 'reboot', 'nvidia-xid', '0') and labels['job'] == 'node'
        assert [a['metric']['code'] for a in alerts] == ['xid_79'], alerts
        assert _query(prometheus_port, 'gpufleet_health_healthy')[0]['value'][1] == '0'
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
