# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated nv-fabricmanager: version check against the loaded driver, NVSwitch presence."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

from daemon_helpers import SIM_DIR, Servers, pid_alive, read_pid, wait_for

CONFIG = '/usr/share/nvidia/nvswitch/fabricmanager.cfg'
PID_FILE = 'run/nvidia-fabricmanager/nv-fabricmanager.pid'


def install_fabricmanager(host, version):
    """What the simulated nvidia-fabricmanager package installs."""
    target = host.path(CONFIG.lstrip('/'))
    os.makedirs(os.path.dirname(target))
    shutil.copyfile(os.path.join(SIM_DIR, 'data', 'fabricmanager.cfg'), target)
    host.write('usr/share/nvidia-sim/fabricmanager-version', version + '\n')


def test_refuses_a_version_other_than_the_loaded_driver(sim_root):
    host = sim_root('hgx_h100_8gpu', driver='570.195.03')
    install_fabricmanager(host, '570.172.08')
    result = host.run('nv-fabricmanager', '-c', CONFIG)
    assert result.returncode == 1
    message = ('fabric manager NVIDIA GPU driver interface version 570.172.08 don\'t match with driver version '
               '570.195.03. Please update with matching NVIDIA driver package.')
    assert result.stderr == message + '\n'
    assert message in open(host.path('var/log/fabricmanager.log')).read()
    assert not os.path.exists(host.path(PID_FILE))


def test_upgrade_without_reboot_is_a_mismatch_too(sim_root):
    host = sim_root('hgx_h100_8gpu', driver='570.172.08')
    host.install_driver('570.195.03')
    install_fabricmanager(host, '570.195.03')
    result = host.run('nv-fabricmanager', '-c', CONFIG)
    assert result.returncode == 1
    assert 'interface version 570.195.03 don\'t match with driver version 570.172.08' in result.stderr


def test_runs_as_daemon_when_versions_match(sim_root):
    with Servers() as servers:
        host = sim_root('hgx_h100_8gpu')
        install_fabricmanager(host, '570.195.03')
        query = ('--query-gpu=fabric.state', '--format=csv,noheader')
        before = host.smi(*query).stdout
        result = host.run('nv-fabricmanager', '-c', CONFIG)
        assert (result.returncode, result.stderr) == (0, '')
        pid = servers.adopt(read_pid(host.path(PID_FILE)))
        assert pid_alive(pid)
        assert host.smi(*query).stdout != before
        log = open(host.path('var/log/fabricmanager.log')).read()
        assert 'Detected 4 NVSwitch devices' in log
        os.kill(pid, 15)
        assert wait_for(lambda: not pid_alive(pid))
        assert not os.path.exists(host.path(PID_FILE))
        assert host.smi(*query).stdout == before


def test_refuses_without_nvswitches(sim_root):
    host = sim_root('l40s_2gpu')
    install_fabricmanager(host, '570.195.03')
    result = host.run('nv-fabricmanager', '-c', CONFIG)
    assert result.returncode == 1
    assert result.stderr == ('request to query NVSwitch device information from NVSwitch driver failed with '
                             'error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n')


def test_needs_the_driver_and_its_config(sim_root):
    host = sim_root('hgx_h100_8gpu', load=False)
    install_fabricmanager(host, '570.195.03')
    assert host.run('nv-fabricmanager', '-c', CONFIG).returncode == 1
    missing = host.run('nv-fabricmanager', '-c', '/etc/nope.cfg')
    assert missing.returncode == 1 and '/etc/nope.cfg' in missing.stderr
    assert host.run('nv-fabricmanager', '--version').stdout == 'Fabric Manager version is : 570.195.03\n'


def test_foreground_when_daemonize_is_off(sim_root):
    with Servers() as servers:
        host = sim_root('hgx_h100_8gpu')
        install_fabricmanager(host, '570.195.03')
        config = host.path(CONFIG.lstrip('/'))
        with open(config) as handle:
            text = handle.read().replace('DAEMONIZE=1', 'DAEMONIZE=0')
        with open(config, 'w') as handle:
            handle.write(text)
        process = servers.start(host, 'nv-fabricmanager', '-c', CONFIG)
        assert wait_for(lambda: os.path.exists(host.path(PID_FILE)))
        assert read_pid(host.path(PID_FILE)) == process.pid
        assert servers.output(process)[0] == 0
