# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated hosts for the simulator tests: ``make_host`` builds one below a
temporary NVIDIA_SIM_ROOT the way the Molecule harness prepares a container;
``SimHost`` runs the tools (real subprocesses) and reads state and call log.
The fixtures in conftest.py hand them out.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIM_DIR = os.path.join(REPO_ROOT, 'tests', 'nvidia_sim')
SIM_BIN = os.path.join(SIM_DIR, 'bin')
EXPECTED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'expected')
FROZEN_TIME = '1767225600'  # Thu Jan  1 00:00:00 2026 UTC


class SimHost(object):
    """A simulated host: run tools, read state and the call log."""

    def __init__(self, root):
        self.root = root
        self.started = []
        self.env = dict(os.environ, NVIDIA_SIM_ROOT=root, NVIDIA_SIM_LIB=SIM_DIR,
                        NVIDIA_SIM_TIME=FROZEN_TIME, TZ='UTC')

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def run(self, tool, *args):
        # -S as in the installed shebang: the simulator needs nothing beyond the stdlib.
        return subprocess.run([os.path.join(SIM_BIN, tool)] + [str(a) for a in args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=self.env, timeout=60, check=False)

    def smi(self, *args):
        return self.run('nvidia-smi', *args)

    def write(self, relative, content):
        target = self.path(relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'w') as handle:
            handle.write(content)

    def remove(self, relative):
        target = self.path(relative)
        if os.path.exists(target):
            os.remove(target)

    def install_driver(self, version, flavour='open', nvml=True):
        """What the fake driver packages write: nvidia-smi's driver version, the
        kernel module flavour and (libnvidia-ml1) the NVML library version."""
        self.write('usr/share/nvidia-sim/driver-version', version + '\n')
        self.write('usr/share/nvidia-sim/kernel-module-flavour', flavour + '\n')
        if nvml:
            self.write('usr/share/nvidia-sim/nvml-version', version + '\n')

    def remove_nvml(self):
        """The NVML library package removed (dpkg -r --force-depends libnvidia-ml1)."""
        self.remove('usr/share/nvidia-sim/nvml-version')

    def reboot(self):
        """/run is a tmpfs: a restart loses it, then the modload unit runs."""
        for relative in ('run/nvidia-sim/booted', 'run/nvidia-sim/loaded-driver'):
            self.remove(relative)
        return self.run('nvidia-sim-modload')

    def state(self):
        try:
            with open(self.path('var/lib/nvidia-sim/state.json')) as handle:
                return json.load(handle)
        except IOError:
            return {'gpus': {}}

    def calls(self, prog=None):
        try:
            with open(self.path('var/log/nvidia-sim/calls.log')) as handle:
                entries = [json.loads(line) for line in handle if line.strip()]
        except IOError:
            return []
        return [e for e in entries if prog is None or e['prog'] == prog]

    def start_workload(self, *args):
        result = self.run('nvidia-sim-workload', '--daemon', *args)
        assert result.returncode == 0, result.stderr
        pid = int(result.stdout.strip())
        self.started.append(pid)
        return pid

    def stop(self, pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            return
        record = self.path('run/nvidia-sim/processes/%d.json' % pid)
        deadline = time.time() + 30
        while os.path.exists(record) and time.time() < deadline:
            time.sleep(0.01)

    def cleanup(self):
        for pid in self.started:
            self.stop(pid)


SETUP = """
import sys
sys.path.insert(0, sys.argv[1])
from nvsim import tools
if tools.hw_main(['--profile', sys.argv[2]]) != 0:
    sys.exit(1)
if len(sys.argv) > 3:
    sys.exit(tools.modload_main([]))
"""


def make_host(root, profile='hgx_h100_8gpu', driver='570.195.03', flavour='open', load=True, nvml=True):
    """Prepare a simulated host below ``root`` the way the Molecule harness does.

    nvidia-sim-hw and nvidia-sim-modload run in one interpreter to keep the
    suite fast; test_smi_tools.py runs them through their own executables.
    """
    os.makedirs(root)
    host = SimHost(root)
    if driver:
        host.install_driver(driver, flavour, nvml)
    argv = [sys.executable, '-S', '-c', SETUP, SIM_DIR, profile] + (['load'] if driver and load else [])
    prepared = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=host.env, check=False)
    assert prepared.returncode == 0 or profile == 'driver_not_loaded', prepared.stderr
    return host
