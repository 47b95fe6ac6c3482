# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm's view of a node's GPUs, built from what nvidia_smi_info and lscpu report.

``build(smi, lscpu_text, node, ...)`` returns the ``gres.conf`` lines of the
node (``NodeName=<node> Name=gpu Type=<type> File=/dev/nvidia<minor>
Cores=<cores>``, or one ``MultipleFiles=`` line per MIG device, or
``AutoDetect=nvml``) and the ``slurm.conf`` line describing the node
(``NodeName=<node> CPUs=... Gres=gpu:<type>:<count>``).

Slurm's ``Cores=`` are *logical core indexes* (core 0 is the first core of the
first socket, as ``lstopo -l`` numbers them), not the CPU (hyperthread) ids
that ``nvidia-smi topo -m`` prints as a GPU's CPU affinity. The CPU ids are
mapped to cores through ``lscpu --parse=CPU,CORE,SOCKET``, whose lines give
each CPU's core and socket.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import compact_cpu_list, expand_cpu_list

# Words of GPU names that name the vendor or the product line, not the model.
_VENDOR_WORDS = ('nvidia', 'tesla', 'quadro', 'geforce')
_TYPE_CHARS = re.compile(r'[^a-z0-9_.]+')
# /proc/driver/nvidia-caps/mig-minors: minors 1 and 2 are the MIG config and
# monitor capabilities; then each GPU (by minor number) owns 15 GPU instances
# of 9 minors each (the instance's access file, then its 8 compute instances).
_CAPS_PER_GPU = 135
_CAPS_PER_GPU_INSTANCE = 9


class SlurmGresError(ValueError):
    """Input that cannot describe the node (a malformed lscpu line, a CPU the lscpu list lacks)."""


def model_type(name, type_map=None):
    """A GPU name as a Slurm GRES type: ``NVIDIA H100 80GB HBM3`` -> ``h100``, ``NVIDIA RTX A6000`` -> ``rtx_a6000``.

    The vendor and product-line words are dropped; the model is the first
    word holding a digit (cut at its first dash: ``A100-SXM4-40GB`` ->
    ``a100``), with the words before it. ``type_map`` (GPU name -> type) wins.
    """
    if type_map and name in type_map:
        return str(type_map[name])
    words = [w for w in (name or '').split() if w.lower() not in _VENDOR_WORDS]
    picked = []
    for word in words:
        piece = word.split('-')[0] if '-' in word and re.search(r'\d', word.split('-')[0]) else word
        picked.append(piece)
        if re.search(r'\d', piece):
            break
    slug = _TYPE_CHARS.sub('_', '_'.join(picked).lower()).strip('_')
    if not slug:
        raise SlurmGresError('cannot make a GRES type of the GPU name %r; name it in the type map' % (name,))
    return slug


def parse_lscpu(text):
    """``lscpu --parse=CPU,CORE,SOCKET`` -> ``{cpu: (socket, core)}`` (comment lines skipped)."""
    cpus = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        fields = line.split(',')
        if len(fields) < 3 or not all(f.strip().isdigit() for f in fields[:3]):
            raise SlurmGresError('unexpected lscpu --parse=CPU,CORE,SOCKET line %r' % (line,))
        cpus[int(fields[0])] = (int(fields[2]), int(fields[1]))
    return cpus


def cpu_topology(cpus):
    """Sockets, cores, threads of a parsed lscpu list, and each CPU's logical core index (Slurm's numbering)."""
    if not cpus:
        return None
    cores = sorted(set(cpus.values()))
    index = dict((core, number) for number, core in enumerate(cores))
    sockets = sorted(set(socket for socket, _core in cores))
    return {
        'cpus': len(cpus),
        'sockets': len(sockets),
        'cores_per_socket': len(cores) // len(sockets),
        'threads_per_core': len(cpus) // len(cores),
        'core_of_cpu': dict((cpu, index[core]) for cpu, core in cpus.items()),
    }


def slurm_cores(cpu_affinity, topology):
    """A CPU affinity (``0-55,112-167``) as Slurm's ``Cores=`` (``0-55``); None when unknown."""
    cpus = expand_cpu_list(cpu_affinity)
    if cpus is None or topology is None:
        return None
    missing = [cpu for cpu in cpus if cpu not in topology['core_of_cpu']]
    if missing:
        raise SlurmGresError('the CPU affinity %s names CPU(s) %s that lscpu does not list (%d CPUs)'
                             % (cpu_affinity, compact_cpu_list(missing), topology['cpus']))
    return compact_cpu_list(topology['core_of_cpu'][cpu] for cpu in cpus)


def mig_cap_minors(gpu_minor, gpu_instance_id, compute_instance_id):
    """Minor numbers of /dev/nvidia-caps/nvidia-cap<N> for a MIG device's GPU and compute instance."""
    base = 3 + gpu_minor * _CAPS_PER_GPU + gpu_instance_id * _CAPS_PER_GPU_INSTANCE
    return base, base + 1 + compute_instance_id


def _affinities(smi):
    rows = (smi.get('topology') or {}).get('gpus') or []
    return dict((row.get('index'), row.get('cpu_affinity')) for row in rows)


def _devices(smi, type_map, topology, with_cores, with_mig, warnings):
    affinity = _affinities(smi)
    migs = smi.get('mig_devices') or []
    devices = []
    for gpu in sorted(smi.get('gpus') or [], key=lambda g: g['index']):
        minor = gpu.get('minor_number')
        minor = gpu['index'] if minor is None else minor
        gpu_type = model_type(gpu.get('name'), type_map)
        cores = slurm_cores(affinity.get(gpu['index']), topology) if with_cores else None
        node = '/dev/nvidia%d' % minor
        if gpu.get('mig_mode_current'):
            own = [m for m in migs if m.get('gpu_index') == gpu['index']]
            if not with_mig:
                warnings.append('GPU %d (%s) is in MIG mode and MIG devices are not wanted: it is left out'
                                % (gpu['index'], gpu.get('pci_bus_id')))
                continue
            if not own:
                warnings.append('GPU %d (%s) is in MIG mode without MIG devices: it offers Slurm nothing'
                                % (gpu['index'], gpu.get('pci_bus_id')))
                continue
            for mig in sorted(own, key=lambda m: (m['gpu_instance_id'], m['compute_instance_id'])):
                if not mig.get('profile'):
                    raise SlurmGresError('MIG device %s of GPU %d has no profile name (gather mig_uuids)'
                                         % (mig.get('index'), gpu['index']))
                gi_minor, ci_minor = mig_cap_minors(minor, mig['gpu_instance_id'], mig['compute_instance_id'])
                devices.append({'gpu_index': gpu['index'], 'mig': True, 'type': gpu_type + '_' + mig['profile'],
                                'files': [node, '/dev/nvidia-caps/nvidia-cap%d' % gi_minor,
                                          '/dev/nvidia-caps/nvidia-cap%d' % ci_minor],
                                'cores': cores, 'uuid': mig.get('uuid')})
        else:
            devices.append({'gpu_index': gpu['index'], 'mig': False, 'type': gpu_type, 'files': [node],
                            'cores': cores, 'uuid': gpu.get('uuid')})
    return devices


def _conf_line(node, device):
    files = device['files']
    line = 'NodeName=%s Name=gpu Type=%s %s' % (
        node, device['type'], ('File=%s' % files[0]) if len(files) == 1 else ('MultipleFiles=%s' % ','.join(files)))
    if device['cores']:
        line += ' Cores=%s' % device['cores']
    return line


def _type_counts(devices):
    counts = {}
    for device in devices:
        counts[device['type']] = counts.get(device['type'], 0) + 1
    return counts


def node_line(node, topology, real_memory_mib, counts, extra=None):
    """The ``slurm.conf`` NodeName line: hardware (when known), memory, GRES, then the operator's options."""
    parts = ['NodeName=%s' % node]
    if topology:
        parts += ['CPUs=%d' % topology['cpus'], 'Boards=1', 'SocketsPerBoard=%d' % topology['sockets'],
                  'CoresPerSocket=%d' % topology['cores_per_socket'], 'ThreadsPerCore=%d' % topology['threads_per_core']]
    if real_memory_mib:
        parts.append('RealMemory=%d' % real_memory_mib)
    if counts:
        parts.append('Gres=' + ','.join('gpu:%s:%d' % (t, counts[t]) for t in sorted(counts)))
    for key in sorted(extra or {}):
        parts.append('%s=%s' % (key, extra[key]))
    return ' '.join(parts)


def build(smi, lscpu_text, node, type_map=None, autodetect='off', with_cores=True, with_mig=True,
          real_memory_mib=None, node_options=None):
    """Everything Slurm needs to know of the node's GPUs, as data and as configuration lines."""
    warnings = []
    topology = cpu_topology(parse_lscpu(lscpu_text)) if lscpu_text else None
    if with_cores and topology is None:
        warnings.append('no CPU topology (lscpu) was given: the GPUs get no Cores=')
    devices = _devices(smi, type_map or {}, topology, with_cores, with_mig, warnings)
    counts = _type_counts(devices)
    if autodetect == 'nvml':
        lines = ['NodeName=%s AutoDetect=nvml' % node]
    else:
        lines = [_conf_line(node, device) for device in devices]
    return {
        'node': node,
        'autodetect': autodetect,
        'devices': devices,
        'count': len(devices),
        'types': counts,
        'conf_lines': lines,
        'node_line': node_line(node, topology, real_memory_mib, counts, node_options),
        'topology': dict((k, v) for k, v in (topology or {}).items() if k != 'core_of_cpu') or None,
        'warnings': warnings,
    }
