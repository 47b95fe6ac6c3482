# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The harness's nsenter connection keeps nsenter running when its child stops (a reboot's SIGSTOP sweep).

Real util-linux nsenter, entering this process's own PID namespace (so it forks, as it does for the
containers): its child stops itself, as systemd's shutdown stops every process for a moment.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import os
import shutil
import subprocess
import time

import pytest

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      'harness', 'connection_plugins', 'gpufleet_nsenter.py')
CHILD_STOPS = 'kill -STOP $$; echo continued'


def plugin():
    spec = importlib.util.spec_from_file_location('gpufleet_nsenter_under_test', PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nsenter(script):
    return subprocess.Popen(['nsenter', '--target', str(os.getpid()), '--pid', '--', 'sh', '-c', script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_stopped(module, proc, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if module._stopped(proc.pid):
            return True
        time.sleep(0.05)
    return False


pytestmark = pytest.mark.skipif(not shutil.which('nsenter') or os.geteuid() != 0,
                                reason='needs util-linux nsenter and root (the harness runs as root)')


def test_nsenter_stops_itself_when_its_child_stops_and_nobody_continues_it():
    module = plugin()
    proc = nsenter(CHILD_STOPS)
    try:
        assert wait_stopped(module, proc), 'nsenter did not pass the stop on (its job control changed?)'
        time.sleep(0.5)
        assert proc.poll() is None and module._stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_the_connection_continues_it_and_the_command_ends():
    module = plugin()
    proc = nsenter(CHILD_STOPS)
    module.continue_when_stopped(proc, interval=0.05)
    stdout, _stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and stdout.decode() == 'continued\n'


def test_a_command_that_never_stops_is_left_alone():
    module = plugin()
    proc = nsenter('echo plain')
    thread = module.continue_when_stopped(proc, interval=0.05)
    assert proc.communicate(timeout=30)[0].decode() == 'plain\n'
    thread.join(5)
    assert not thread.is_alive()
