# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated nvidia-persistenced: forking, pid file, persistence mode, driver checks."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from daemon_helpers import SIM_DIR, Servers, pid_alive, read_pid, wait_for

PID_FILE = 'run/nvidia-persistenced/nvidia-persistenced.pid'
FAILED = 'nvidia-persistenced failed to initialize. Check syslog for more details.\n'


def daemon_mode(host, monkeypatch):
    """What the simulator's nvidia-smi is told about the daemon's persistence mode."""
    monkeypatch.syspath_prepend(SIM_DIR)
    monkeypatch.setenv('NVIDIA_SIM_ROOT', host.root)
    from nvsim import persistenced
    return persistenced.daemon_persistence_mode()


def start(servers, host, *args):
    result = host.run('nvidia-persistenced', *args)
    assert result.returncode == 0, result.stderr
    return servers.adopt(read_pid(host.path(PID_FILE)))


def test_forks_keeps_pid_file_and_cleans_up_on_sigterm(sim_root, monkeypatch):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        pid = start(servers, host, '--no-persistence-mode', '--verbose')
        assert pid_alive(pid) and pid != os.getpid()
        assert os.path.exists(host.path('run/nvidia-persistenced/socket'))
        assert daemon_mode(host, monkeypatch) is False
        log = open(host.path('var/log/nvidia-sim/nvidia-persistenced.log')).read()
        assert 'Started (%d)' % pid in log
        assert 'device 0000:4A:00.0 - registered' in log and 'device 0000:CA:00.0 - registered' in log
        assert 'persistence mode enabled' not in log
        assert host.calls('nvidia-persistenced')[-1]['argv'] == ['--no-persistence-mode', '--verbose']

        os.kill(pid, 15)
        assert wait_for(lambda: not pid_alive(pid))
        assert not os.path.exists(host.path('run/nvidia-persistenced'))
        assert daemon_mode(host, monkeypatch) is None


def test_default_persistence_mode_shows_in_nvidia_smi(sim_root, monkeypatch):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        query = ('--query-gpu=persistence_mode', '--format=csv,noheader')
        assert host.smi(*query).stdout == 'Disabled\nDisabled\n'
        pid = start(servers, host)
        assert daemon_mode(host, monkeypatch) is True
        assert host.smi(*query).stdout == 'Enabled\nEnabled\n'
        os.kill(pid, 15)
        assert wait_for(lambda: not pid_alive(pid))
        assert host.smi(*query).stdout == 'Disabled\nDisabled\n'


def test_fails_without_loaded_driver(sim_root):
    host = sim_root('l40s_2gpu', load=False)
    result = host.run('nvidia-persistenced', '--verbose')
    assert result.returncode == 1
    assert result.stderr == FAILED
    log = open(host.path('var/log/nvidia-sim/nvidia-persistenced.log')).read()
    assert ('Failed to query NVIDIA devices. Please ensure that the NVIDIA device files (/dev/nvidia*) '
            'exist, and that user %d has read and write permissions for those files.' % os.getuid()) in log
    assert not os.path.exists(host.path(PID_FILE))


def test_fails_after_driver_upgrade_without_reboot(sim_root):
    host = sim_root('l40s_2gpu', driver='570.172.08')
    host.install_driver('570.195.03')
    result = host.run('nvidia-persistenced')
    assert (result.returncode, result.stderr) == (1, FAILED)


def test_second_instance_cannot_take_the_pid_file(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        pid = start(servers, host)
        second = host.run('nvidia-persistenced')
        assert (second.returncode, second.stderr) == (1, FAILED)
        assert read_pid(host.path(PID_FILE)) == pid and pid_alive(pid)
        assert 'Failed to lock PID file' in open(host.path('var/log/nvidia-sim/nvidia-persistenced.log')).read()


def test_options_like_the_real_tool(sim_root):
    host = sim_root('l40s_2gpu')
    unknown_user = host.run('nvidia-persistenced', '--user', 'no-such-user-x1')
    assert unknown_user.returncode == 1
    assert "ERROR: Failed to find user ID of user 'no-such-user-x1'" in unknown_user.stderr
    version = host.run('nvidia-persistenced', '--version')
    assert version.returncode == 0 and 'nvidia-persistenced:  version 570.195.03' in version.stdout
    # The real parser reports a bad option and still exits 0.
    bogus = host.run('nvidia-persistenced', '--bogus')
    assert bogus.returncode == 0 and 'Invalid commandline' in bogus.stderr
    assert not os.path.exists(host.path(PID_FILE))


def test_foreground_mode_does_not_fork(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        process = servers.start(host, 'nvidia-persistenced', '--foreground')
        assert wait_for(lambda: os.path.exists(host.path(PID_FILE)))
        assert read_pid(host.path(PID_FILE)) == process.pid
        returncode, _unused1, _unused2 = servers.output(process)
        assert returncode == 0
        assert not os.path.exists(host.path(PID_FILE))
