# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures for tests of the simulated NVIDIA stack (tests/nvidia_sim).

``sim_root`` builds a throw-away host below a temporary NVIDIA_SIM_ROOT with
the real helper tools (nvidia-sim-hw, nvidia-sim-modload) and returns a
factory; the tools under test run as real subprocesses.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

# Other test packages import these from here (through the collection path).
try:
    from sim_hosts import SIM_BIN, SIM_DIR, SimHost, make_host
except ImportError:
    from ansible_collections.gpufleet.nvidia.tests.unit.simulator.sim_hosts import SIM_BIN, SIM_DIR, SimHost, make_host

__all__ = ['SIM_BIN', 'SIM_DIR', 'SimHost', 'make_host']


@pytest.fixture
def sim_root(tmp_path):
    """Factory: ``sim_root(profile, driver=..., flavour=..., load=True, nvml=True)`` -> SimHost (fresh root)."""
    hosts = []

    def make(profile='hgx_h100_8gpu', driver='570.195.03', flavour='open', load=True, nvml=True):
        hosts.append(make_host(str(tmp_path / ('root%d' % len(hosts))), profile, driver, flavour, load, nvml))
        return hosts[-1]

    yield make
    for host in hosts:
        host.cleanup()


@pytest.fixture(scope='session')
def shared_sim_root(tmp_path_factory):
    """Like ``sim_root`` but one cached host per arguments: only for tests that change nothing."""
    cache = {}
    base = tmp_path_factory.mktemp('shared-sim')

    def make(profile='hgx_h100_8gpu', driver='570.195.03', flavour='open', load=True, nvml=True):
        key = (profile, driver, flavour, load, nvml)
        if key not in cache:
            cache[key] = make_host(str(base / ('root%d' % len(cache))), profile, driver, flavour, load, nvml)
        return cache[key]

    return make
