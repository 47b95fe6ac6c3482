# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Health results (the ``gpu_health`` the health role sets per host) for the report tests.

``demo_results`` reads the three GPU profiles of the demo fleet from the
simulated nvidia-smi (real ``-q -x`` output, parsed by the collection) and
judges them with the collection's health checks, one node with an Xid in its
kernel log; ``synthetic_results`` makes a fleet of any size, cheaply.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import (
    evaluate,
    is_healthy,
    parse_xid_events,
    summarize,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_xml

DEMO_PROFILES = (('gpufleet-demo-hgx01', 'hgx_h100_8gpu'), ('gpufleet-demo-l40s01', 'l40s_2gpu'),
                 ('gpufleet-demo-a100mig01', 'a100_40gb_mig'))
DEMO_XID = ('2026-01-10T09:12:44+0000 gpufleet-demo-a100mig01 kernel: NVRM: Xid (PCI:0000:00:04): 79, pid=0, '
            'GPU has fallen off the bus.\n')


def checks(dcgm='pass', cdi='pass', gpus=8):
    reasons = {'pass': 'DCGM diagnostic level 1 passed: software, pcie, memory.',
               'fail': 'DCGM diagnostic level 1 failed: memory (GPU 1 had uncorrectable memory errors)'}
    return [
        {'name': 'driver', 'status': 'pass', 'reason': 'nvidia-smi answers: %d GPUs, driver 570.195.03.' % gpus,
         'details': {}},
        {'name': 'cdi', 'status': cdi, 'reason': 'The CDI specification names all %d GPUs (nvidia.com/gpu).' % gpus
         if cdi == 'pass' else 'The CDI specification does not name GPU-1; regenerate it with nvidia-ctk cdi generate.',
         'details': {}},
        {'name': 'container', 'status': 'skipped', 'reason': 'No image named (container_image).', 'details': {}},
        {'name': 'dcgm_diag', 'status': dcgm, 'reason': reasons[dcgm], 'details': {}},
        {'name': 'framework', 'status': 'skipped',
         'reason': 'No container image or virtualenv named (framework_image, framework_virtualenv).', 'details': {}},
    ]


def result_for(gpus, driver, findings, host_checks, mig_devices=(), seconds=0.31):
    summary = summarize(findings)
    return {
        'healthy': is_healthy(findings) and not any(c['status'] == 'fail' for c in host_checks),
        'driver': driver, 'gpus': gpus, 'mig_devices': list(mig_devices), 'gpu_failure': None,
        'nvidia_smi_seconds': seconds, 'findings': findings, 'summary': summary,
        'kernel_log': {'source': 'journal', 'window_seconds': 86400, 'events': 0}, 'checks': host_checks,
        'expected': {'gpu_count': len(gpus), 'gpu_model': '', 'driver_branch': '570', 'mig_layout': [],
                     'persistence': True, 'ecc': 'enabled'},
    }


def demo_results(root):
    """The demo fleet, read from the simulator below ``root`` (a fresh directory)."""
    from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import make_host
    results = {}
    for name, profile in DEMO_PROFILES:
        host = make_host(os.path.join(root, name), profile)
        host.smi('-pm', '1')
        if profile == 'hgx_h100_8gpu':
            # nvidia-fabricmanager runs on the NVSwitch node (a live pid is what the simulator reads); without it
            # the fabric is "Not Started", a critical finding, as on a real HGX.
            host.write('run/nvidia-fabricmanager/nv-fabricmanager.pid', '%d\n' % os.getpid())
        if profile == 'l40s_2gpu':
            # One GPU of the L40S node lost persistence mode: a warning.
            host.smi('-pm', '0', '-i', '1')
        if profile == 'a100_40gb_mig':
            host.smi('mig', '-cgi', '9,9', '-C')
        report = parse_xml(host.smi('-q', '-x').stdout)
        gpus, mig_devices = [], []
        for gpu in report['gpus']:
            for device in gpu.pop('mig_devices'):
                mig_devices.append(dict(device, gpu_index=gpu['index'], gpu_uuid=gpu['uuid'], profile='3g.20gb'))
            gpu.pop('processes')
            gpus.append(gpu)
        events = parse_xid_events(DEMO_XID) if profile == 'a100_40gb_mig' else []
        findings = evaluate(gpus, events, smi_seconds=0.31)
        driver = {'version': report['driver_version'], 'branch': report['driver_version'].split('.', maxsplit=1)[0],
                  'cuda_version': report['cuda_version']}
        results[name] = result_for(gpus, driver, findings, checks(gpus=len(gpus)), mig_devices)
    return results


def synthetic_gpu(index, model, memory_mib, host_number):
    return {
        'index': index, 'name': model, 'uuid': 'GPU-%08x-0000-4000-8000-%012x' % (host_number, index),
        'pci_bus_id': '0000:%02x:00.0' % (0x18 + index * 0x10), 'persistence_mode': host_number % 97 != 5,
        'mig_mode_current': False if 'A100' in model else None, 'mig_mode_pending': False if 'A100' in model else None,
        'ecc_mode_current': True, 'ecc_mode_pending': True, 'memory_total_mib': memory_mib,
        'memory_used_mib': (host_number * 7919 + index * 104729) % memory_mib,
        'temperature': {'gpu_c': 30 + (host_number + index) % 55, 'slowdown_c': 89},
        'power': {'draw_w': 70.0 + (host_number * 13 + index) % 500, 'limit_w': 700.0},
        'throttle_reasons_active': ['gpu_idle'] if (host_number + index) % 3 else [],
        'supported_clocks': [{'memory_mhz': 2619, 'graphics_mhz': list(range(1980, 300, -15))}],
    }


def synthetic_results(count):
    """``count`` hosts: 8x H100, 2x L40S and 1x A100 nodes on two drivers; some unhealthy, some without data."""
    shapes = (('NVIDIA H100 80GB HBM3', 81559, 8), ('NVIDIA L40S', 46068, 2), ('NVIDIA A100-SXM4-40GB', 40960, 1))
    results = {}
    for number in range(count):
        name = 'gpu-node-%03d.example.com' % number
        if number % 50 == 49:
            results[name] = None
            continue
        model, memory, per_host = shapes[number % 3]
        gpus = [synthetic_gpu(i, model, memory, number) for i in range(per_host)]
        version = '570.195.03' if number % 7 else '550.163.01'
        driver = {'version': version, 'branch': version.split('.', maxsplit=1)[0], 'cuda_version': '12.8' if number % 7 else '12.4'}
        events = parse_xid_events('[ 812.5] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n') \
            if number % 41 == 3 else []
        findings = evaluate(copy.deepcopy(gpus), events)
        results[name] = result_for(gpus, driver, findings, checks('fail' if number % 83 == 11 else 'pass', gpus=per_host))
    return results
