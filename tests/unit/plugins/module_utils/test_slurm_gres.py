# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm GRES lines from nvidia_smi_info results and lscpu output.

The CPU layouts are the two ways Linux numbers hyperthreads on x86 servers:
siblings a core count apart (Intel and AMD servers: CPU 0 and 112 share core
0 on a 2 x 56-core host) and siblings next to each other (some BIOSes and
VMs: CPU 0 and 1 share core 0). Slurm's Cores= are logical core indexes, so
both layouts must give the same Cores= for the same socket.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.slurm_gres import FilterModule
from ansible_collections.gpufleet.nvidia.plugins.module_utils.slurm_gres import (
    SlurmGresError, build, cpu_topology, mig_cap_minors, model_type, parse_lscpu, slurm_cores)

slurm_gres_filter = FilterModule().filters()['slurm_gres']

LSCPU_HEADER = ('# The following is the parsable format, which can be fed to other\n'
                '# programs. Each different item in every column has an unique ID\n'
                '# starting usually from zero.\n# CPU,Core,Socket\n')


def lscpu_offset(sockets, cores_per_socket, threads=2):
    """Siblings cores apart: CPU c is core c % cores."""
    cores = sockets * cores_per_socket
    return LSCPU_HEADER + ''.join('%d,%d,%d\n' % (cpu, cpu % cores, (cpu % cores) // cores_per_socket)
                                  for cpu in range(cores * threads))


def lscpu_adjacent(sockets, cores_per_socket, threads=2):
    """Siblings next to each other: CPU c is core c // threads."""
    cores = sockets * cores_per_socket
    return LSCPU_HEADER + ''.join('%d,%d,%d\n' % (cpu, cpu // threads, (cpu // threads) // cores_per_socket)
                                  for cpu in range(cores * threads))


@pytest.mark.parametrize('name, expected', [
    ('NVIDIA H100 80GB HBM3', 'h100'),
    ('NVIDIA H100 NVL', 'h100'),
    ('NVIDIA A100-SXM4-40GB', 'a100'),
    ('NVIDIA A100 80GB PCIe', 'a100'),
    ('NVIDIA L40S', 'l40s'),
    ('Tesla V100-SXM2-32GB', 'v100'),
    ('Tesla T4', 't4'),
    ('NVIDIA RTX A6000', 'rtx_a6000'),
    ('NVIDIA GeForce RTX 4090', 'rtx_4090'),
    ('NVIDIA GH200 480GB', 'gh200'),
    ('NVIDIA B200', 'b200'),
])
def test_model_type(name, expected):
    assert model_type(name) == expected


def test_model_type_map_wins_and_nameless_gpus_are_refused():
    assert model_type('NVIDIA H100 NVL', {'NVIDIA H100 NVL': 'h100nvl'}) == 'h100nvl'
    with pytest.raises(SlurmGresError):
        model_type('NVIDIA')


def test_lscpu_is_read_and_refused_when_malformed():
    assert parse_lscpu(LSCPU_HEADER + '0,0,0\n1,0,0\n') == {0: (0, 0), 1: (0, 0)}
    with pytest.raises(SlurmGresError):
        parse_lscpu('0;0;0\n')


@pytest.mark.parametrize('layout', [lscpu_offset, lscpu_adjacent])
def test_topology_of_a_two_socket_host(layout):
    topology = cpu_topology(parse_lscpu(layout(2, 56)))
    assert (topology['cpus'], topology['sockets'], topology['cores_per_socket'], topology['threads_per_core']) == \
        (224, 2, 56, 2)


def test_cpu_affinity_becomes_logical_cores_in_both_layouts():
    offset = cpu_topology(parse_lscpu(lscpu_offset(2, 56)))
    adjacent = cpu_topology(parse_lscpu(lscpu_adjacent(2, 56)))
    # What topo -m prints for a GPU on the first socket, in each numbering.
    assert slurm_cores('0-55,112-167', offset) == '0-55'
    assert slurm_cores('56-111,168-223', offset) == '56-111'
    assert slurm_cores('0-111', adjacent) == '0-55'
    assert slurm_cores('112-223', adjacent) == '56-111'
    # Without hyperthreads CPU and core ids are the same.
    single = cpu_topology(parse_lscpu(lscpu_offset(1, 12, threads=1)))
    assert slurm_cores('0-11', single) == '0-11'
    assert slurm_cores(None, single) is None and slurm_cores('N/A', single) is None


def test_cpu_affinity_beyond_the_listed_cpus_is_refused():
    with pytest.raises(SlurmGresError, match='lscpu does not list'):
        slurm_cores('0-55,112-167', cpu_topology(parse_lscpu(lscpu_offset(1, 2, threads=1))))


def test_mig_cap_minors_follow_nvidias_mig_minors_table():
    # /proc/driver/nvidia-caps/mig-minors: "config 1", "monitor 2", "gpu0/gi0/access 3",
    # "gpu0/gi0/ci0/access 4" ... "gpu0/gi1/access 12", ... "gpu1/gi0/access 138".
    assert mig_cap_minors(0, 0, 0) == (3, 4)
    assert mig_cap_minors(0, 1, 0) == (12, 13)
    assert mig_cap_minors(0, 2, 0) == (21, 22)
    assert mig_cap_minors(1, 0, 7) == (138, 146)


def _gpu(index, name, mig=False, minor=None, bus='0000:%02x:00.0'):
    return {'index': index, 'minor_number': index if minor is None else minor, 'name': name,
            'pci_bus_id': bus % (index + 0x18), 'uuid': 'GPU-%d' % index, 'mig_mode_current': mig}


def _topology(affinities):
    return {'gpus': [{'index': i, 'cpu_affinity': a} for i, a in enumerate(affinities)]}


HGX = {
    'gpus': [_gpu(i, 'NVIDIA H100 80GB HBM3') for i in range(8)],
    'mig_devices': [],
    'topology': _topology(['0-55,112-167'] * 4 + ['56-111,168-223'] * 4),
    'failure': None,
}


def test_hgx_node():
    result = build(HGX, lscpu_offset(2, 56), 'hgx01', real_memory_mib=2000000)
    assert result['conf_lines'][0] == 'NodeName=hgx01 Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55'
    assert result['conf_lines'][7] == 'NodeName=hgx01 Name=gpu Type=h100 File=/dev/nvidia7 Cores=56-111'
    assert result['count'] == 8 and result['types'] == {'h100': 8}
    assert result['node_line'] == ('NodeName=hgx01 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 '
                                   'ThreadsPerCore=2 RealMemory=2000000 Gres=gpu:h100:8')
    assert result['warnings'] == []


def test_device_files_follow_the_minor_number():
    smi = {'gpus': [_gpu(0, 'NVIDIA L40S', minor=1), _gpu(1, 'NVIDIA L40S', minor=0)], 'mig_devices': [],
           'topology': _topology(['0-31,64-95', '32-63,96-127'])}
    lines = build(smi, lscpu_offset(2, 32), 'l40s01')['conf_lines']
    assert lines == ['NodeName=l40s01 Name=gpu Type=l40s File=/dev/nvidia1 Cores=0-31',
                     'NodeName=l40s01 Name=gpu Type=l40s File=/dev/nvidia0 Cores=32-63']


A100_MIG = {
    'gpus': [_gpu(0, 'NVIDIA A100-SXM4-40GB', mig=True)],
    'mig_devices': [
        {'gpu_index': 0, 'index': 1, 'gpu_instance_id': 2, 'compute_instance_id': 0, 'profile': '3g.20gb', 'uuid': 'MIG-b'},
        {'gpu_index': 0, 'index': 0, 'gpu_instance_id': 1, 'compute_instance_id': 0, 'profile': '3g.20gb', 'uuid': 'MIG-a'},
    ],
    'topology': _topology(['0-11']),
}


def test_mig_devices():
    result = build(A100_MIG, lscpu_offset(1, 12, threads=1), 'a100', node_options={'Weight': 10, 'Feature': 'mig'})
    assert result['conf_lines'] == [
        'NodeName=a100 Name=gpu Type=a100_3g.20gb '
        'MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13 Cores=0-11',
        'NodeName=a100 Name=gpu Type=a100_3g.20gb '
        'MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22 Cores=0-11']
    assert result['types'] == {'a100_3g.20gb': 2}
    assert result['node_line'].endswith('Gres=gpu:a100_3g.20gb:2 Feature=mig Weight=10')
    assert [d['uuid'] for d in result['devices']] == ['MIG-a', 'MIG-b']


def test_mig_gpu_without_devices_or_unwanted_is_left_out_with_a_warning():
    empty = dict(A100_MIG, mig_devices=[])
    result = build(empty, '', 'a100', with_cores=False)
    assert result['conf_lines'] == [] and 'without MIG devices' in result['warnings'][0]
    result = build(A100_MIG, '', 'a100', with_cores=False, with_mig=False)
    assert result['count'] == 0 and 'MIG devices are not wanted' in result['warnings'][0]
    with pytest.raises(SlurmGresError, match='gather mig_uuids'):
        build(dict(A100_MIG, mig_devices=[dict(A100_MIG['mig_devices'][0], profile=None)]), '', 'a100', with_cores=False)


def test_autodetect_and_no_cores():
    result = build(HGX, '', 'hgx01', autodetect='nvml', with_cores=False)
    assert result['conf_lines'] == ['NodeName=hgx01 AutoDetect=nvml']
    assert result['node_line'] == 'NodeName=hgx01 Gres=gpu:h100:8'
    assert build(HGX, '', 'hgx01')['warnings'] == ['no CPU topology (lscpu) was given: the GPUs get no Cores=']


def test_filter():
    result = slurm_gres_filter(HGX, node='hgx01', lscpu=lscpu_offset(2, 56), real_memory_mib='0')
    assert result['count'] == 8 and 'RealMemory' not in result['node_line']
    with pytest.raises(AnsibleFilterError, match='registered result'):
        slurm_gres_filter({'failure': None}, node='x')
    with pytest.raises(AnsibleFilterError, match='autodetect'):
        slurm_gres_filter(HGX, node='x', autodetect='yes')
    with pytest.raises(AnsibleFilterError, match='lscpu does not list'):
        slurm_gres_filter(HGX, node='x', lscpu=lscpu_offset(1, 2, threads=1))
