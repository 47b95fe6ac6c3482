# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated compute processes (nvidia-sim-workload) as nvidia-smi reports them."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import xml.dom.minidom


def test_workload_shows_up_everywhere_and_goes_away_on_sigterm(sim_root):
    host = sim_root('hgx_h100_8gpu')
    pid = host.start_workload('--gpu', '5', '--memory', '30000', '--name', '/usr/bin/python3')
    apps = host.smi('--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id', '--format=csv')
    uuid = host.smi('-i', '5', '--query-gpu=uuid', '--format=csv,noheader').stdout.strip()
    assert apps.stdout == ('pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id\n'
                           '%d, /usr/bin/python3, 30000 MiB, %s, 00000000:AB:00.0\n' % (pid, uuid))
    used = host.smi('-i', '5', '--query-gpu=memory.used,memory.free,utilization.gpu,clocks_event_reasons.gpu_idle',
                    '--format=csv,noheader')
    assert used.stdout == '30000 MiB, 51008 MiB, 100 %, Not Active\n'
    summary = host.smi('-i', '5').stdout
    assert '|    5   N/A  N/A  %15d      C   /usr/bin/python3' % pid in summary
    document = xml.dom.minidom.parseString(host.smi('-q', '-x', '-i', '5').stdout)
    assert document.getElementsByTagName('pid')[0].firstChild.data == str(pid)
    assert document.getElementsByTagName('used_memory')[0].firstChild.data == '30000 MiB'
    text = host.smi('-q', '-d', 'PIDS', '-i', '5').stdout
    assert '        Process ID                        : %d\n' % pid in text
    host.stop(pid)
    assert not os.path.exists(host.path('run/nvidia-sim/processes/%d.json' % pid))
    empty = host.smi('--query-compute-apps=pid', '--format=csv,noheader')
    assert (empty.returncode, empty.stdout) == (0, '')


def test_stale_process_records_are_ignored(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('run/nvidia-sim/processes/999999.json',
               '{"pid": 999999, "gpu": 0, "used_memory": 10, "name": "ghost", "type": "C"}\n')
    assert host.smi('--query-compute-apps=pid', '--format=csv,noheader').stdout == ''
    assert host.smi('-r').returncode == 0


def test_workload_fails_like_cuda(sim_root):
    host = sim_root('l40s_2gpu')
    host.smi('-i', '0', '-c', '2')
    prohibited = host.run('nvidia-sim-workload', '--gpu', '0', '--daemon')
    assert prohibited.returncode == 1
    assert prohibited.stderr == 'CUDA error: all CUDA-capable devices are busy or unavailable\n'
    host.smi('-i', '1', '-c', '3')
    host.start_workload('--gpu', '1', '--memory', '100')
    exclusive = host.run('nvidia-sim-workload', '--gpu', '1', '--daemon')
    assert exclusive.stderr == 'CUDA error: all CUDA-capable devices are busy or unavailable\n'
    assert host.run('nvidia-sim-workload', '--gpu', '7').stderr == 'CUDA error: invalid device ordinal\n'
    host.smi('-i', '0', '-c', '0')
    too_big = host.run('nvidia-sim-workload', '--gpu', '0', '--memory', '99999', '--daemon')
    assert too_big.stderr == 'CUDA error: out of memory\n'


def test_workload_needs_mig_devices_when_mig_is_on(sim_root):
    host = sim_root('a100_40gb_mig')
    result = host.run('nvidia-sim-workload', '--gpu', '0', '--daemon')
    assert (result.returncode, result.stderr) == (1, 'CUDA error: no CUDA-capable device is detected\n')
    host.smi('mig', '-cgi', '19', '-C')
    host.start_workload('--gpu', '0', '--memory', '64')


def test_workload_with_duration_cleans_up(sim_root):
    host = sim_root('l40s_2gpu')
    result = host.run('nvidia-sim-workload', '--gpu', '0', '--memory', '10', '--duration', '0.2')
    assert result.returncode == 0
    assert os.listdir(host.path('run/nvidia-sim/processes')) == []
