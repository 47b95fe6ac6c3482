# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-sim-hw and nvidia-sim-modload: the files other simulated tools rely on."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'nvidia_sim')
PROFILE_NAMES = sorted(f[:-5] for f in os.listdir(os.path.join(SIM_DIR, 'profiles')) if f.endswith('.json'))


def read(host, relative):
    with open(host.path(relative)) as handle:
        return handle.read()


def test_hw_writes_profile_and_pci_tree(sim_root):
    host = sim_root('hgx_h100_8gpu', driver=None)
    assert read(host, 'etc/nvidia-sim/profile') == 'hgx_h100_8gpu\n'
    assert os.path.isfile(host.path('usr/share/nvidia-sim/profiles/hgx_h100_8gpu.json'))
    devices = host.path('var/lib/nvidia-sim/hw/sys/bus/pci/devices')
    assert len(os.listdir(devices)) == 12
    gpu = os.path.join(devices, '0000:18:00.0')
    assert [read(host, os.path.join(gpu, f)) for f in ('vendor', 'device', 'class', 'subsystem_device')] == [
        '0x10de\n', '0x2330\n', '0x030200\n', '0x16c1\n']
    assert read(host, os.path.join(devices, '0000:05:00.0', 'device')) == '0x22a3\n'


def test_hw_list_and_unknown_profile(sim_root):
    host = sim_root('no_gpu', driver=None)
    assert host.run('nvidia-sim-hw', '--list').stdout.split() == PROFILE_NAMES
    unknown = host.run('nvidia-sim-hw', '--profile', 'dgx_b300')
    assert unknown.returncode == 1 and "unknown GPU profile 'dgx_b300'" in unknown.stderr


def test_modload_writes_version_files_and_nvswitch_devices(sim_root):
    host = sim_root('hgx_h100_8gpu', driver='570.195.03', flavour='open')
    assert read(host, 'run/nvidia-sim/loaded-driver') == '570.195.03\n'
    version = read(host, 'run/nvidia-sim/proc/driver/nvidia/version')
    assert version.startswith('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.195.03  ')
    assert sorted(os.listdir(host.path('run/nvidia-sim/proc/driver/nvidia-nvswitch/devices'))) == [
        '0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0']
    assert host.run('nvidia-sim-modload', '--unload').returncode == 0
    assert not os.path.exists(host.path('run/nvidia-sim/loaded-driver'))
    assert host.smi('-L').returncode == 9


def test_modload_proprietary_flavour(sim_root):
    host = sim_root('l40s_2gpu', driver='535.247.01', flavour='proprietary')
    assert read(host, 'run/nvidia-sim/proc/driver/nvidia/version').startswith(
        'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.247.01  ')
    assert not os.path.exists(host.path('run/nvidia-sim/proc/driver/nvidia-nvswitch/devices'))
    gsp = host.smi('-q', '-i', '0').stdout
    assert '    GSP Firmware Version                  : N/A\n' in gsp


def test_modload_reads_the_prebuilt_modules_flavour(sim_root):
    # Canonical's prebuilt modules (linux-restricted-modules) mark their flavour per
    # kernel; a DKMS package's marker, when one is installed too, wins as depmod ranks
    # updates/dkms first.
    host = sim_root('l40s_2gpu', driver='570.195.03', load=False)
    host.remove('usr/share/nvidia-sim/kernel-module-flavour')
    host.write('usr/share/nvidia-sim/prebuilt-kernel-module-flavour/6.8.0-60-generic', 'proprietary\n')
    assert host.run('nvidia-sim-modload').returncode == 0
    assert read(host, 'run/nvidia-sim/proc/driver/nvidia/version').startswith(
        'NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.195.03  ')
    host.write('usr/share/nvidia-sim/kernel-module-flavour', 'open\n')
    assert host.run('nvidia-sim-modload', '--unload').returncode == 0
    assert host.run('nvidia-sim-modload').returncode == 0
    assert read(host, 'run/nvidia-sim/proc/driver/nvidia/version').startswith(
        'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.195.03  ')


def test_fabric_state_follows_fabric_manager(sim_root):
    host = sim_root('hgx_h100_8gpu')
    fields = ['-i', '0', '--query-gpu=fabric.state,fabric.status', '--format=csv,noheader']
    assert host.smi(*fields).stdout == 'Not Started, [N/A]\n'
    host.write('run/nvidia-fabricmanager/nv-fabricmanager.pid', '%d\n' % os.getpid())
    assert host.smi(*fields).stdout == 'Completed, Success\n'


def test_every_profile_is_complete(sim_root):
    required = set(['product_name', 'pci_device_id', 'memory', 'power', 'clocks', 'supported_clocks', 'temperature',
                    'pcie', 'ecc', 'remapped_rows', 'nvlink', 'mig', 'inforom', 'vbios_version'])
    for name in PROFILE_NAMES:
        with open(os.path.join(SIM_DIR, 'profiles', name + '.json')) as handle:
            profile = json.load(handle)
        for model in profile['models'].values():
            assert required <= set(model), name
            assert model['power']['min_w'] <= model['power']['default_w'] <= model['power']['max_w']
        uuids = [gpu['uuid'] for gpu in profile['gpus']]
        assert len(set(uuids)) == len(uuids)
        assert all(gpu['model'] in profile['models'] for gpu in profile['gpus'])
