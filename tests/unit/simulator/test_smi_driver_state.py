# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver life cycle as nvidia-smi sees it: not loaded, upgrade mismatch, reboot, call log."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess

import pytest

SIM_BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       'nvidia_sim', 'bin')
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n\n")
NO_NVML = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
           "Display Driver is properly installed and present in your system.\n"
           "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n")
EVERY_FORMAT = (('-L',), (), ('-q',), ('-q', '-x'), ('--query-gpu=name', '--format=csv'),
                ('--query-compute-apps=pid', '--format=csv'), ('topo', '-m'), ('nvlink', '-s'), ('mig', '-lgip'),
                ('-i', '0', '-q'), ('--frobnicate',), ('-pm', '1'))


def test_module_not_loaded_yet(sim_root):
    host = sim_root('l40s_2gpu', load=False)
    result = host.smi('-L')
    assert (result.returncode, result.stdout) == (9, NO_DRIVER)
    assert host.run('nvidia-sim-modload', '--if-not-loaded').returncode == 0
    assert host.smi('-L').returncode == 0


def test_no_driver_installed_at_all(sim_root):
    # Without the driver packages there is no libnvidia-ml.so.1 either: exit 12, as the real tool.
    host = sim_root('hgx_h100_8gpu', driver=None)
    assert host.smi('-q').returncode == 12
    modload = host.run('nvidia-sim-modload')
    assert modload.returncode == 1 and 'Module nvidia not found' in modload.stderr


def test_upgrade_without_reboot_is_a_version_mismatch_until_reboot(sim_root):
    host = sim_root('hgx_h100_8gpu', driver='570.172.08')
    host.install_driver('570.195.03')
    assert host.run('nvidia-sim-modload', '--if-not-loaded').returncode == 0
    for args in (('-L',), ('--query-gpu=driver_version', '--format=csv'), ('topo', '-m'), ('mig', '-lgi')):
        result = host.smi(*args)
        assert result.returncode == 18, args
        assert result.stdout == ('Failed to initialize NVML: Driver/library version mismatch\n'
                                 'NVML library version: 570.195\n')
    host.reboot()
    result = host.smi('--query-gpu=driver_version', '--format=csv,noheader', '-i', '0')
    assert (result.returncode, result.stdout) == (0, '570.195.03\n')


@pytest.mark.parametrize('driver,cuda', [('535.247.01', '12.2'), ('550.163.01', '12.4'),
                                         ('570.195.03', '12.8'), ('580.95.05', '13.0')])
def test_cuda_version_follows_the_loaded_branch(sim_root, driver, cuda):
    host = sim_root('l40s_2gpu', driver=driver)
    header = host.smi('-q', '-d', 'MEMORY').stdout.splitlines()[4:6]
    assert [line.split(': ')[1] for line in header] == [driver, cuda]


def test_driver_reload_refused_while_gpu_in_use(sim_root):
    host = sim_root('l40s_2gpu', driver='570.172.08')
    pid = host.start_workload('--gpu', '0', '--memory', '512')
    host.install_driver('570.195.03')
    refused = host.run('nvidia-sim-modload')
    assert refused.returncode == 1 and 'in use' in refused.stderr
    assert host.smi('-L').returncode == 18
    host.stop(pid)
    assert host.run('nvidia-sim-modload').returncode == 0
    assert host.smi('-L').returncode == 0


def test_driver_not_loaded_profile_never_loads(sim_root):
    host = sim_root('driver_not_loaded')
    modload = host.run('nvidia-sim-modload')
    assert modload.returncode == 1 and "could not insert 'nvidia': No such device" in modload.stderr
    assert host.run('nvidia-sim-modload', '--if-not-loaded').returncode == 0
    assert (host.smi('-pm', '1').returncode, host.state()) == (9, {'gpus': {}})


def test_every_invocation_is_logged_once(sim_root):
    host = sim_root('no_gpu')
    before = len(host.calls('nvidia-smi'))
    host.smi('-L')
    host.smi('--query-gpu=name', '--format=csv')
    host.smi('mig', '-lgi')
    calls = host.calls('nvidia-smi')[before:]
    assert [c['argv'] for c in calls] == [['-L'], ['--query-gpu=name', '--format=csv'], ['mig', '-lgi']]
    assert all(isinstance(c['ts'], float) and isinstance(c['pid'], int) for c in calls)
    assert [c['prog'] for c in host.calls()][:2] == ['nvidia-sim-hw', 'nvidia-sim-modload']


def test_missing_profile_is_a_clear_simulator_error(sim_root):
    host = sim_root('l40s_2gpu')
    host.remove('etc/nvidia-sim/profile')
    result = host.smi('-L')
    assert result.returncode == 255
    assert 'no GPU profile configured' in result.stderr and 'l40s_2gpu' in result.stderr


def test_installed_shebang_runs(sim_root):
    if not os.path.exists('/usr/bin/python3'):
        pytest.skip('no /usr/bin/python3 on this host')
    host = sim_root('a100_40gb_mig')
    result = subprocess.run([os.path.join(SIM_BIN, 'nvidia-smi'), '-L'], env=host.env, stdout=subprocess.PIPE,
                            universal_newlines=True, check=False)
    assert result.returncode == 0 and result.stdout.startswith('GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-')


@pytest.mark.parametrize('args', EVERY_FORMAT, ids=[' '.join(a) or 'summary' for a in EVERY_FORMAT])
def test_nvml_library_missing_wins_over_everything(sim_root, args):
    host = sim_root('l40s_2gpu')
    host.remove_nvml()
    result = host.smi(*args)
    assert (result.returncode, result.stdout, result.stderr) == (12, NO_NVML, '')


@pytest.mark.parametrize('args', EVERY_FORMAT, ids=[' '.join(a) or 'summary' for a in EVERY_FORMAT])
def test_driver_not_loaded_wins_over_argument_errors(sim_root, args):
    host = sim_root('l40s_2gpu', load=False)
    result = host.smi(*args)
    assert (result.returncode, result.stdout, result.stderr) == (9, NO_DRIVER, '')


def test_help_needs_no_nvml_and_takes_no_other_option(sim_root):
    host = sim_root('l40s_2gpu', load=False)
    host.remove_nvml()
    assert host.smi('-h').returncode == 0 and host.smi('--help', '-h').returncode == 0
    refused = host.smi('--frobnicate', '-h')
    assert (refused.returncode, refused.stdout) == (
        2, "ERROR: Option --frobnicate is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n")
    assert host.smi('-h', '--id=0').stdout.startswith('ERROR: Option --id=0 is not valid')
    # After a sub-command -h is the sub-command's: NVML comes first.
    assert host.smi('topo', '-h').returncode == 12


def test_smi_and_nvml_of_different_drivers(sim_root):
    host = sim_root('l40s_2gpu', driver='570.195.03')
    host.write('usr/share/nvidia-sim/driver-version', '570.172.08\n')
    result = host.smi('-L')
    assert (result.returncode, result.stdout) == (
        255, 'Mismatch in versions between nvidia-smi and NVML.\n'
             'Are you sure you are using nvidia-smi provided with the driver?\n')


def test_unreadable_gpu_is_reported_and_skipped(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('var/lib/nvidia-sim/state.json', '{"gpus": {"0": {"nvml_device_error": "Unknown Error"}}}\n')
    message = 'Unable to determine the device handle for GPU0000:4A:00.0: Unknown Error\n'
    listed = host.smi('-L')
    assert listed.returncode == 255
    assert listed.stdout.startswith(message) and listed.stdout.count('\n') == 2 and 'GPU 1: NVIDIA L40S' in listed.stdout
    only = host.smi('-i', '0', '--query-gpu=name', '--format=csv,noheader')
    assert (only.returncode, only.stdout) == (255, message)
    other = host.smi('-i', '1', '--query-gpu=index', '--format=csv,noheader')
    assert (other.returncode, other.stdout) == (0, '1\n')
