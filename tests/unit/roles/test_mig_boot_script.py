# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role's boot script against the simulated nvidia-smi.

The script is installed the way the role installs it (next to copies of
module_utils/nvidia_mig.py and module_utils/gpu_record.py) and run as a subprocess against a simulated host
under a temporary NVIDIA_SIM_ROOT; the simulator's call log shows which
nvidia-smi commands it ran.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO_ROOT, 'roles', 'mig', 'files', 'gpufleet_mig_layout.py')
LIBRARIES = [os.path.join(REPO_ROOT, 'plugins', 'module_utils', name) for name in ('nvidia_mig.py', 'gpu_record.py')]
A100_UUID = 'GPU-33de42c1-a73b-3927-6cbc-f1e43c551384'
MUTATING = ('-cgi', '-dgi', '-dci', '-cci')


class BootHost(object):
    """A simulated host with the boot script installed."""

    def __init__(self, sim, install_dir):
        self.sim = sim
        self.install_dir = install_dir
        os.makedirs(install_dir)
        for source in [SCRIPT] + LIBRARIES:
            shutil.copy(source, install_dir)
        self.config = os.path.join(install_dir, 'mig-layout.json')

    def write_config(self, layouts, version=1):
        with open(self.config, 'w') as handle:
            json.dump({'version': version, 'layouts': layouts}, handle)

    def boot_script(self, *args):
        argv = [sys.executable, os.path.join(self.install_dir, 'gpufleet_mig_layout.py'), '--config', self.config,
                '--nvidia-smi', os.path.join(SIM_BIN, 'nvidia-smi')] + list(args)
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=self.sim.env, timeout=120, check=False)

    def instances(self, gpu=0):
        """Profile names of the GPU instances, sorted, from the simulator's own listing."""
        listing = self.sim.smi('mig', '-i', str(gpu), '-lgi').stdout
        return sorted(line.split()[3] for line in listing.splitlines() if line.startswith('|') and ' MIG ' in line)

    def mutations(self):
        return [c['argv'] for c in self.sim.calls('nvidia-smi') if any(flag in c['argv'] for flag in MUTATING)]


@pytest.fixture
def boot_host(tmp_path):
    hosts = []

    def make(profile='a100_40gb_mig', **kwargs):
        number = len(hosts)
        sim = make_host(str(tmp_path / ('root%d' % number)), profile, **kwargs)
        hosts.append(BootHost(sim, str(tmp_path / ('install%d' % number))))
        return hosts[-1]

    yield make
    for host in hosts:
        host.sim.cleanup()


def test_creates_the_layout_and_then_changes_nothing(boot_host):
    host = boot_host()
    host.write_config([{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}])
    first = host.boot_script()
    assert first.returncode == 0, first.stdout + first.stderr
    assert host.instances() == ['3g.20gb', '3g.20gb']
    assert host.mutations() == [['mig', '-i', '0', '-cgi', '9,9', '-C']]
    assert 'GPU 0 (0000:00:04.0): created 2 x 3g.20gb' in first.stdout

    again = host.boot_script()
    assert again.returncode == 0, again.stdout
    assert 'already has its MIG layout: 2 x 3g.20gb' in again.stdout
    assert len(host.mutations()) == 1


def test_a_reboot_drops_the_instances_and_the_script_recreates_them(boot_host):
    host = boot_host()
    host.write_config([{'gpus': None, 'profiles': {'1g.5gb': 7}}])
    assert host.boot_script().returncode == 0
    host.sim.reboot()
    assert host.instances() == []
    result = host.boot_script()
    assert result.returncode == 0, result.stdout
    assert host.instances() == ['1g.5gb'] * 7
    # Every GPU instance got its compute instance.
    assert host.sim.smi('-L').stdout.count('MIG 1g.5gb') == 7


def test_a_different_layout_is_replaced_as_a_whole(boot_host):
    host = boot_host()
    assert host.sim.smi('mig', '-cgi', '19,19,19,19,19,19,19', '-C').returncode == 0
    host.write_config([{'gpus': [A100_UUID], 'profiles': {'MIG 4g.20gb': 1, '2g.10gb': 1, '1g.5gb': 1}}])
    result = host.boot_script()
    assert result.returncode == 0, result.stdout
    assert host.instances() == ['1g.5gb', '2g.10gb', '4g.20gb']
    # Compute instances first, then GPU instances, then the largest profile first.
    assert host.mutations()[-3:] == [['mig', '-i', '0', '-dci'], ['mig', '-i', '0', '-dgi'],
                                     ['mig', '-i', '0', '-cgi', '5,14,19', '-C']]


def test_a_gpu_instance_without_its_compute_instance_does_not_match(boot_host):
    host = boot_host()
    assert host.sim.smi('mig', '-cgi', '9,9').returncode == 0
    host.write_config([{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}])
    result = host.boot_script()
    assert result.returncode == 0, result.stdout
    assert host.mutations()[-2:] == [['mig', '-i', '0', '-dgi'], ['mig', '-i', '0', '-cgi', '9,9', '-C']]
    assert host.sim.smi('-L').stdout.count('MIG 3g.20gb') == 2


def test_an_empty_profile_mapping_removes_every_instance(boot_host):
    host = boot_host()
    assert host.sim.smi('mig', '-cgi', '9,9', '-C').returncode == 0
    host.write_config([{'gpus': ['0'], 'profiles': {}}])
    result = host.boot_script()
    assert result.returncode == 0, result.stdout
    assert host.instances() == []


def test_check_reports_a_difference_and_changes_nothing(boot_host):
    host = boot_host()
    host.write_config([{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}])
    result = host.boot_script('--check')
    assert result.returncode == 2
    assert 'differs: has no instances, wants 2 x 3g.20gb' in result.stdout
    assert host.mutations() == []
    assert host.boot_script().returncode == 0
    assert host.boot_script('--check').returncode == 0


def test_gpus_are_selected_by_pci_bus_id_and_each_gets_its_entry(boot_host):
    host = boot_host('hgx_h100_8gpu')
    assert host.sim.smi('-i', '0,1', '-mig', '1').returncode == 0
    host.write_config([{'gpus': ['0000:18:00.0'], 'profiles': {'1g.10gb': 7}},
                       {'gpus': ['2a:00.0'], 'profiles': {'3g.40gb': 2}}])
    result = host.boot_script()
    assert result.returncode == 0, result.stdout
    assert host.instances(0) == ['1g.10gb'] * 7
    assert host.instances(1) == ['3g.40gb', '3g.40gb']


def test_a_gpu_without_mig_mode_is_an_error_and_the_others_are_still_handled(boot_host):
    host = boot_host('hgx_h100_8gpu')
    assert host.sim.smi('-i', '1', '-mig', '1').returncode == 0
    host.write_config([{'gpus': ['0', '1'], 'profiles': {'7g.80gb': 1}}])
    result = host.boot_script()
    assert result.returncode == 1
    assert 'GPU 0 (0000:18:00.0) has MIG mode disabled' in result.stdout
    assert host.instances(1) == ['7g.80gb']


@pytest.mark.parametrize('name', ['trainer', 'python train.py --gpus 0,1'])
def test_a_gpu_with_compute_processes_is_left_alone(boot_host, name):
    host = boot_host()
    assert host.sim.smi('mig', '-cgi', '9,9', '-C').returncode == 0
    # nvidia-smi prints a comma in a process name unquoted: the GPU record's reader takes it back.
    host.sim.start_workload('--gpu', '0', '--memory', '1024', '--name', name)
    host.write_config([{'gpus': ['0'], 'profiles': {'7g.40gb': 1}}])
    result = host.boot_script()
    assert result.returncode == 1
    assert 'runs compute processes' in result.stdout and name in result.stdout
    assert host.instances() == ['3g.20gb', '3g.20gb']
    assert host.mutations() == [['mig', '-cgi', '9,9', '-C']]


@pytest.mark.parametrize('layouts, message', [
    ([{'gpus': ['0'], 'profiles': {'9g.99gb': 1}}], 'MIG profile 9g.99gb is not offered by this GPU'),
    ([{'gpus': ['0'], 'profiles': {'3g.20gb': 3}}], '3 x 3g.20gb requested but the GPU holds at most 2'),
    ([{'gpus': ['0'], 'profiles': {'4g.20gb': 1, '3g.20gb': 2}}], 'needs 10 compute slices but the GPU has 7'),
    ([{'gpus': ['3'], 'profiles': {'1g.5gb': 1}}], 'no GPU matches 3; present: 0 (0000:00:04.0)'),
    ([{'gpus': ['eth0'], 'profiles': {'1g.5gb': 1}}], "'eth0' is neither a GPU index, a GPU UUID nor a PCI bus id"),
    ([{'gpus': ['0'], 'profiles': {'1g.5gb': 1}}, {'gpus': [A100_UUID], 'profiles': {'1g.5gb': 2}}],
     'GPU 0 (0000:00:04.0) is in layouts[1] and layouts[2]'),
])
def test_invalid_layouts_fail_with_a_message(boot_host, layouts, message):
    host = boot_host()
    host.write_config(layouts)
    result = host.boot_script()
    assert result.returncode == 1
    assert message in result.stdout
    # The first entry of the duplicate case is applied; the others change nothing.
    assert len(host.mutations()) == (1 if len(layouts) == 2 else 0)


@pytest.mark.parametrize('content, message', [
    ('{"version": 2, "layouts": []}', 'must be an object with "version": 1'),
    ('{"version": 1, "layouts": [{"gpus": [0]}]}', 'layouts[1] must be an object with a "profiles" object'),
    ('{"version": 1, "layouts": [{"gpus": [], "profiles": {}}]}', '"gpus" must be null (every GPU) or a non-empty'),
    ('{"version": 1, "layouts": [{"profiles": {"1g.5gb": -1}}]}', 'the count of 1g.5gb must be a whole number'),
    ('{"version": 1, "layouts": [{"profiles": {"1g.5gb": true}}]}', 'the count of 1g.5gb must be a whole number'),
    ('{"version": 1, "layouts": [', 'is not valid JSON'),
])
def test_config_errors(boot_host, content, message):
    host = boot_host()
    with open(host.config, 'w') as handle:
        handle.write(content)
    for args in ((), ('--check-config',)):
        result = host.boot_script(*args)
        assert result.returncode == 1
        assert message in result.stdout
    assert host.sim.calls('nvidia-smi') == []


def test_check_config_accepts_the_roles_file_without_running_nvidia_smi(boot_host):
    host = boot_host()
    host.write_config([{'gpus': None, 'profiles': {'MIG 1g.5gb': 2, '1G.5GB': 1}}])
    assert host.boot_script('--check-config').returncode == 0
    assert host.sim.calls('nvidia-smi') == []
    # Both spellings name one profile.
    assert host.boot_script().returncode == 0
    assert host.instances() == ['1g.5gb'] * 3


def test_without_the_driver_it_fails_after_the_wait(boot_host):
    host = boot_host(load=False)
    host.write_config([{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}])
    result = host.boot_script('--wait-driver', '0')
    assert result.returncode == 1
    assert 'nvidia-smi does not answer (exit 9)' in result.stdout


def test_at_boot_it_waits_for_the_driver_to_load(boot_host):
    host = boot_host(load=False)
    host.write_config([{'gpus': ['0'], 'profiles': {'3g.20gb': 2}}])
    loader = threading.Timer(1.0, host.sim.run, args=('nvidia-sim-modload',))
    loader.start()
    try:
        result = host.boot_script('--wait-driver', '60')
    finally:
        loader.join()
    assert result.returncode == 0, result.stdout
    assert host.instances() == ['3g.20gb', '3g.20gb']
