# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated DCGM 4: nv-hostengine listening for real, dcgmi tables, health and diagnostics."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import socket

from daemon_helpers import Servers, pid_alive, read_pid, start_hostengine, wait_for

NO_ENGINE = ('Error: unable to establish a connection to the specified host: %s\n'
             'Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n')


def profile_uuids(host):
    with open(host.path('usr/share/nvidia-sim/profiles/%s.json'
                        % open(host.path('etc/nvidia-sim/profile')).read().strip())) as handle:
        return [gpu['uuid'] for gpu in json.load(handle)['gpus']]


def dcgmi(host, port, *args):
    return host.run('dcgmi', *(args + ('--host', '127.0.0.1:%d' % port)))


def test_discovery_lists_gpus_and_nvswitches_of_hgx(sim_root):
    with Servers() as servers:
        host = sim_root('hgx_h100_8gpu')
        _unused, port = start_hostengine(servers, host)
        result = dcgmi(host, port, 'discovery', '-l')
        assert result.returncode == 0, result.stdout
        lines = result.stdout.splitlines()
        assert lines[0] == '8 GPUs found.'
        assert lines[1] == '+--------+' + '-' * 70 + '+'
        assert lines[2] == '| GPU ID | Device Information' + ' ' * 51 + '|'
        assert lines[4] == '| 0      | Name: NVIDIA H100 80GB HBM3'.ljust(80) + '|'
        assert lines[5] == '|        | PCI Bus ID: 00000000:18:00.0'.ljust(80) + '|'
        assert all(len(line) == 81 for line in lines[1:36])
        assert lines[36] == "4 NvSwitches found."
        uuids = [line.split('Device UUID: ')[1].rstrip(' |') for line in lines if 'Device UUID: ' in line]
        assert uuids == profile_uuids(host)
        switches = result.stdout.split('4 NvSwitches found.\n')[1].split('0 ConnectX found.')[0]
        assert switches == ('+-----------+\n| Switch ID |\n+-----------+\n| 0         |\n| 1         |\n'
                            '| 2         |\n| 3         |\n+-----------+\n')


def test_discovery_on_pcie_gpus_has_no_switches(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        _unused, port = start_hostengine(servers, host)
        result = dcgmi(host, port, 'discovery', '-l')
        assert result.stdout.startswith('2 GPUs found.\n')
        assert '0 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n+-----------+\n' in result.stdout


def test_dcgmi_without_engine_fails_like_the_real_one(sim_root):
    host = sim_root('l40s_2gpu')
    # A port nothing listens on: the default 5555 may be taken on a shared
    # loopback (host-networked test containers run real simulated engines).
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        target = 'localhost:%d' % probe.getsockname()[1]
    result = host.run('dcgmi', '--host', target, 'discovery', '-l')
    assert (result.returncode, result.stdout) == (235, NO_ENGINE % target)
    bad_args = host.run('dcgmi', 'health', '-s', 'pq')
    assert bad_args.returncode == 255 and 'Invalid flags detected' in bad_args.stderr


def test_engine_refuses_to_start_without_driver_or_after_upgrade(sim_root):
    with Servers() as servers:
        for host in (sim_root('l40s_2gpu', load=False), sim_root('l40s_2gpu', driver='570.172.08')):
            host.install_driver('570.195.03')
            process = servers.start(host, 'nv-hostengine', '-n', '-p', '0')
            returncode, stdout, _unused = servers.output(process, stop=False)
            assert (returncode, stdout) == (255, 'Error: Failed to initialize NVML\n')
            assert 'Cannot initialize the hostengine' in open(host.path('var/log/nv-hostengine.log')).read()


def test_health_watches_and_check(sim_root):
    with Servers() as servers:
        host = sim_root('hgx_h100_8gpu')
        _unused, port = start_hostengine(servers, host)
        not_enabled = dcgmi(host, port, 'health', '-c')
        assert (not_enabled.returncode, not_enabled.stdout) == (
            253, 'Error: Health watches not enabled. Please enable watches. \n')
        assert dcgmi(host, port, 'health', '--set', 'pmi').stdout == 'Health monitor systems set successfully.\n'
        fetched = dcgmi(host, port, 'health', '-f').stdout.splitlines()
        assert fetched[0] == 'Health monitor systems report'
        rows = dict((line[2:17].strip(), line[20:].strip(' |')) for line in fetched[2:-1])
        assert rows == {'PCIe': 'On', 'NVLINK': 'Off', 'Memory': 'On', 'SM': 'Off', 'InfoROM': 'On',
                        'Thermal': 'Off', 'Power': 'Off', 'Driver': 'Off', 'NvSwitch NF': 'Off', 'NvSwitch F': 'Off'}
        check = dcgmi(host, port, 'health', '-g', '0', '-c')
        assert check.returncode == 0
        assert check.stdout == (
            '+---------------------------+----------------------------------------------------------+\n'
            '| Health Monitor Report                                                                |\n'
            '+===========================+==========================================================+\n'
            '| Overall Health            | Healthy                                                  |\n'
            '+---------------------------+----------------------------------------------------------+\n')
        assert dcgmi(host, port, 'health', '-g', '7', '-c').stdout == (
            'Error: Unable to check health watches. Return: The Group is not found\n')


def test_health_reports_incidents_from_the_state(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        host.write('var/lib/nvidia-sim/state.json', json.dumps({'gpus': {'1': {'dcgm_health_incidents': [
            {'system': 'memory', 'health': 'Warning', 'message': 'Pending page retirements detected'}]}}}))
        _unused, port = start_hostengine(servers, host)
        dcgmi(host, port, 'health', '-s', 'a')
        report = dcgmi(host, port, 'health', '-c').stdout
        assert '| Overall Health            | Warning ' in report
        assert '| -> 1                      | Warning ' in report
        assert '|       -> Memory system    | Warning ' in report
        assert 'Pending page retirements detected' in report


def diag_test_names(table):
    names = []
    for line in table.splitlines():
        label = line[2:27].strip()
        if line.startswith('| ') and label and label not in ('Diagnostic', 'Warning', 'DCGM Version',
                                                             'Driver Version Detected', 'GPU Device IDs Detected'):
            names.append(label)
    return names


def test_diag_levels_run_the_dcgm4_tests(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        host.smi('-pm', '1')
        _unused, port = start_hostengine(servers, host)
        quick = dcgmi(host, port, 'diag', '-r', '1')
        assert quick.returncode == 0
        assert quick.stdout.splitlines()[:8] == [
            'Successfully ran diagnostic for group.',
            '+---------------------------+------------------------------------------------+',
            '| Diagnostic                | Result                                         |',
            '+===========================+================================================+',
            '|-----  Metadata  ----------+------------------------------------------------|',
            '| DCGM Version              | 4.4.2                                          |',
            '| Driver Version Detected   | 570.195.03                                     |',
            '| GPU Device IDs Detected   | 26b9, 26b9                                     |']
        assert diag_test_names(quick.stdout) == ['software']
        assert '|                           | GPU1: Pass                                     |' in quick.stdout
        assert diag_test_names(dcgmi(host, port, 'diag', '-r', 'medium').stdout) == ['software', 'memory', 'pcie']
        assert diag_test_names(dcgmi(host, port, 'diag', '-r', '3').stdout) == [
            'software', 'memory', 'diagnostic', 'nvbandwidth', 'pcie', 'memory_bandwidth', 'targeted_stress',
            'targeted_power']
        assert diag_test_names(dcgmi(host, port, 'diag', '-r', 'xlong', '-i', '0').stdout) == [
            'software', 'memory', 'diagnostic', 'nvbandwidth', 'memtest', 'pulse_test', 'pcie',
            'memory_bandwidth', 'targeted_stress', 'targeted_power']


def test_diag_fails_without_persistence_mode_and_reports_json(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        _unused, port = start_hostengine(servers, host)
        text = dcgmi(host, port, 'diag', '-r', '1')
        assert text.returncode == 226
        assert '| software                  | Fail                                           |' in text.stdout
        assert '| Warning                   | Persistence Mode: Persistence mode for GPU 0   |' in text.stdout
        result = dcgmi(host, port, 'diag', '-r', '2', '-j')
        assert result.returncode == 226
        assert '\t"DCGM Diagnostic" :\n\t{' in result.stdout
        document = json.loads(result.stdout)
        categories = document['DCGM Diagnostic']['test_categories']
        assert [c['category'] for c in categories] == ['Deployment', 'Hardware', 'Integration']
        software = categories[0]['tests'][0]
        assert software['name'] == 'software' and software['test_summary']['status'] == 'Fail'
        assert software['results'][0]['warnings'][0]['error_id'] == 29
        assert categories[1]['tests'][0]['results'][1] == {
            'entity_group': 'GPU', 'entity_group_id': 1, 'entity_id': 1, 'status': 'Pass'}
        assert document['metadata'] == {'Driver Version Detected': '570.195.03', 'version': '4.4.2'}
        assert [e['entity_id'] for e in document['entity_groups'][0]['entities']] == [0, 1]


def test_diag_failure_injected_through_the_state(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        host.smi('-pm', '1')
        state = host.state()
        state['gpus'].setdefault('1', {})['dcgm_diag_failures'] = {'memory': 'GPU 1 had uncorrectable memory errors'}
        host.write('var/lib/nvidia-sim/state.json', json.dumps(state))
        _unused, port = start_hostengine(servers, host)
        result = dcgmi(host, port, 'diag', '-r', '2')
        assert result.returncode == 226
        memory = result.stdout.split('| memory ')[1].split('+-----  Integration')[0]
        assert 'GPU 1 had uncorrectable memory errors' in memory.replace('  |\n|                           | ', '')
        assert 'GPU0: Pass' in memory and 'GPU1: Fail' in memory


def test_unix_socket_daemon_mode_and_terminate(sim_root):
    host = sim_root('l40s_2gpu')
    started = host.run('nv-hostengine', '-d', '/run/nv-hostengine.sock', '--pid', '/run/nvhe.pid')
    assert started.returncode == 0, started.stdout
    assert started.stdout == 'Started host engine version 4.4.2 using socket path: /run/nv-hostengine.sock\n'
    pid = read_pid(host.path('run/nvhe.pid'))
    try:
        assert pid_alive(pid)
        listed = host.run('dcgmi', 'discovery', '-l', '--host', 'unix:///run/nv-hostengine.sock')
        assert listed.stdout.startswith('2 GPUs found.\n')
        again = host.run('nv-hostengine', '--pid', '/run/nvhe.pid')
        assert (again.returncode, again.stdout) == (1, 'Host engine already running with pid %d\n' % pid)
    finally:
        stopped = host.run('nv-hostengine', '-t', '--pid', '/run/nvhe.pid')
    assert (stopped.returncode, stopped.stdout) == (0, 'Host engine successfully terminated.\n')
    assert wait_for(lambda: not pid_alive(pid))
    assert not os.path.exists(host.path('run/nv-hostengine.sock'))


def test_missing_service_account_is_refused(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        process = servers.start(host, 'nv-hostengine', '-n', '-p', '0', '--service-account', 'no-such-user-x1')
        returncode, stdout, _unused = servers.output(process, stop=False)
        assert returncode == 255 and "'no-such-user-x1' does not exist" in stdout
