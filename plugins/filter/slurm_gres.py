# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: slurm_gres
short_description: Slurm gres.conf and slurm.conf lines of a node's GPUs
version_added: 0.3.0
author: gpufleet maintainers (@gpufleet)
description:
  - Takes the registered result of M(gpufleet.nvidia.nvidia_smi_info) (gathered with V(gpus), V(mig), V(mig_uuids)
    and V(topology)) and returns the node's C(gres.conf) lines and the matching C(slurm.conf) C(NodeName) line.
  - Each GPU becomes C(NodeName=<node> Name=gpu Type=<type> File=/dev/nvidia<minor> Cores=<cores>); a GPU in MIG mode
    becomes one C(MultipleFiles=/dev/nvidia<minor>,/dev/nvidia-caps/nvidia-cap<gi>,/dev/nvidia-caps/nvidia-cap<ci>)
    line per MIG device, of type C(<type>_<profile>).
  - C(Cores=) holds Slurm's logical core indexes, mapped from the GPU's CPU affinity (C(nvidia-smi topo -m)) through
    the output of C(lscpu --parse=CPU,CORE,SOCKET).
options:
  _input:
    description: The registered result of M(gpufleet.nvidia.nvidia_smi_info).
    type: dict
    required: true
  lscpu:
    description: Output of C(lscpu --parse=CPU,CORE,SOCKET) on the node; empty for no C(Cores=) and no CPU layout.
    type: string
    default: ""
  node:
    description: The node's name in Slurm.
    type: string
    required: true
  type_map:
    description: GPU names (as nvidia-smi prints them) mapped to the GRES type to use instead of the derived one.
    type: dict
    default: {}
  autodetect:
    description: V(nvml) writes C(AutoDetect=nvml) instead of the device lines (slurmd then asks NVML itself).
    type: string
    choices: [off, nvml]
    default: "off"
  cores:
    description: Give each GPU its C(Cores=).
    type: boolean
    default: true
  mig:
    description: Describe the MIG devices of GPUs in MIG mode (otherwise such GPUs are left out).
    type: boolean
    default: true
  real_memory_mib:
    description: C(RealMemory=) of the C(NodeName) line; 0 leaves it out.
    type: integer
    default: 0
  node_options:
    description: More C(key=value) options of the C(NodeName) line (C(Feature), C(Weight)).
    type: dict
    default: {}
seealso:
  - module: gpufleet.nvidia.nvidia_smi_info
"""

EXAMPLES = r"""
- name: Read the GPUs, MIG devices and topology
  gpufleet.nvidia.nvidia_smi_info:
    gather: [gpus, mig, mig_uuids, topology]
  register: gpus

- name: Read the CPU layout
  ansible.builtin.command:
    argv:
      - lscpu
      - --parse=CPU,CORE,SOCKET
  register: lscpu
  changed_when: false

- name: Show the node's gres.conf lines
  ansible.builtin.debug:
    msg: "{{ (gpus | gpufleet.nvidia.slurm_gres(node=inventory_hostname_short, lscpu=lscpu.stdout)).conf_lines }}"
    # => ['NodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55', ...]
"""

RETURN = r"""
_value:
  description:
    - C(conf_lines) (the C(gres.conf) lines), C(node_line) (the C(slurm.conf) line), C(devices) (each with
      C(gpu_index), C(mig), C(type), C(files), C(cores), C(uuid)), C(count), C(types) (type to count),
      C(topology) (C(cpus), C(sockets), C(cores_per_socket), C(threads_per_core)) and C(warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.slurm_gres import SlurmGresError, build


def slurm_gres(smi, node, lscpu='', type_map=None, autodetect='off', cores=True, mig=True, real_memory_mib=0,
               node_options=None):
    if not isinstance(smi, dict) or 'gpus' not in smi:
        raise AnsibleFilterError('slurm_gres: the input must be the registered result of gpufleet.nvidia.nvidia_smi_info')
    if autodetect not in ('off', 'nvml'):
        raise AnsibleFilterError('slurm_gres: autodetect must be off or nvml, not %r' % (autodetect,))
    try:
        return build(smi, lscpu, node, type_map=type_map, autodetect=autodetect, with_cores=cores, with_mig=mig,
                     real_memory_mib=int(real_memory_mib or 0), node_options=node_options)
    except (SlurmGresError, ValueError) as exc:
        raise AnsibleFilterError('slurm_gres: %s' % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {'slurm_gres': slurm_gres}
