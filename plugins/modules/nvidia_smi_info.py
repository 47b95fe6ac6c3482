#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_smi_info
short_description: Read NVIDIA driver, GPU, MIG, process, topology and NVLink data with nvidia-smi
version_added: 0.1.0
description:
  - Reads what C(nvidia-smi) reports about the NVIDIA driver and every GPU of the host and returns it as plain return
    values. Like every C(_info) module it sets no C(ansible_facts); O(ignore:register) the result to use it in later
    tasks (see the examples).
  - Each GPU is the collection's typed GPU record, the same one M(gpufleet.nvidia.nvidia_smi) and
    M(gpufleet.nvidia.nvidia_gpu_health) return, so a key has the same type in all of them.
  - Per GPU it returns identity (name, UUID, serial, PCI bus id, VBIOS), memory, temperatures and thresholds, power
    draw and limits, clocks and supported clocks, persistence, compute, ECC and MIG modes (current and pending),
    active throttle reasons, PCIe generation and width (current against maximum), ECC error counts, retired pages
    and remapped rows.
  - The default O(gather) costs exactly one C(nvidia-smi) process (C(nvidia-smi -q -x)); each further subset costs
    at most one more.
  - Without a usable driver or GPU the module does not crash. It fails with a short RV(failure.reason) code and a
    hint, or, with O(fail_on_error=false), returns empty data and the reason.
author:
  - gpufleet maintainers (@gpufleet)
options:
  gather:
    description:
      - What to gather.
      - V(gpus) returns RV(gpus) and the summary keys (RV(gpu_count), RV(product), RV(memory_mib), RV(mig_capable)).
      - V(mig) returns RV(mig_devices) (GPU and compute instance ids, memory and engines of each MIG device).
      - V(processes) returns RV(processes), the processes using each GPU.
      - V(gpus), V(mig) and V(processes) all come from the same single C(nvidia-smi -q -x) call.
      - V(mig_uuids) adds the UUID and profile name (for example V(1g.10gb)) of each MIG device from C(nvidia-smi -L),
        one more process. The XML report does not carry them.
      - V(topology) returns RV(topology) from C(nvidia-smi topo -m), one more process.
      - V(nvlink) returns RV(nvlink) from C(nvidia-smi nvlink -s), one more process.
    type: list
    elements: str
    choices: [gpus, mig, processes, mig_uuids, topology, nvlink]
    default: [gpus, mig]
  fail_on_error:
    description:
      - When V(true), any C(nvidia-smi) failure fails the task with the classified C(reason) and a hint.
      - When V(false), the module succeeds and returns empty data (RV(gpus) is V([]), RV(gpu_count) is V(0)) with
        RV(failure) set, so that plays can branch on hosts without a working GPU stack.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.nvidia.nvidia_smi
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.INFO_MODULE
  - gpufleet.nvidia.attributes.PLATFORM_LINUX_NVIDIA
  - gpufleet.nvidia.attributes.ACTIONGROUP_NVIDIA
notes:
  - The default uses the XML report rather than one C(--query-gpu) CSV call although the CSV call is much faster
    (milliseconds against a few hundred milliseconds with persistence mode on). Only the XML report carries the MIG
    devices, supported clocks, retired pages and remapped rows together, in one process; the GPUs are read
    once per play, so its cost is small next to the round trip, and the timeout bounds it.
  - "Earlier development versions also returned the data as the C(ansible_facts.nvidia) fact. Register the result
    instead, C(register: gpu_info), and read C(gpu_info.gpus), C(gpu_info.driver.version) and so on."
  - Without nvidia-persistenced every C(nvidia-smi) call may take seconds while the driver initialises the GPUs.
seealso:
  - module: gpufleet.nvidia.nvidia_gpu_health
  - module: gpufleet.nvidia.nvidia_smi
"""

EXAMPLES = r"""
- name: Read the GPUs (one nvidia-smi process)
  gpufleet.nvidia.nvidia_smi_info:
  register: gpu_info

- name: Show the driver and the GPU models
  ansible.builtin.debug:
    msg: "{{ gpu_info.driver.version }}: {{ gpu_info.gpus | map(attribute='name') | list }}"

- name: List the GPUs without persistence mode (modes are booleans)
  ansible.builtin.debug:
    msg: "{{ gpu_info.gpus | rejectattr('persistence_mode') | map(attribute='pci_bus_id') | list }}"

- name: Gather everything, including the topology matrix and NVLink state
  gpufleet.nvidia.nvidia_smi_info:
    gather: [gpus, mig, mig_uuids, processes, topology, nvlink]
    timeout: 60
  register: gpu_everything

- name: Tolerate hosts without a working driver
  gpufleet.nvidia.nvidia_smi_info:
    fail_on_error: false
  register: gpu_probe

- name: Report why a host has no usable GPU
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ gpu_probe.failure.reason }} - {{ gpu_probe.failure.hint }}"
  when: gpu_probe.failure is not none

- name: Keep the data as a host variable for later plays, where facts are wanted
  ansible.builtin.set_fact:
    nvidia: "{{ gpu_probe }}"
    cacheable: true

- name: Use a non-standard nvidia-smi location
  gpufleet.nvidia.nvidia_smi_info:
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi
  register: gpu_info_custom
"""

RETURN = r"""
driver:
  description:
    - The NVIDIA driver. Values are V(null) when the driver was not queried (O(gather) without V(gpus), V(mig) and
      V(processes)) or could not be read.
  returned: always
  type: dict
  contains:
    version:
      description: Driver version as reported by nvidia-smi.
      type: str
      sample: 535.54.03
    branch:
      description: Driver branch, the major version.
      type: str
      sample: "535"
    cuda_version:
      description: Highest CUDA version the driver supports; V(null) on drivers that do not report it.
      type: str
      sample: "12.2"
  sample: {"version": "535.54.03", "branch": "535", "cuda_version": "12.2"}
gpu_count:
  description: Number of GPUs in RV(gpus); V(0) on failure with O(fail_on_error=false); V(null) when GPUs were not queried.
  returned: always
  type: int
  sample: 8
product:
  description:
    - Product name of the first GPU, as GPU feature discovery's C(nvidia.com/gpu.product) label.
    - V(null) when the GPUs were not queried or could not be read; the same holds for RV(memory_mib),
      RV(mig_capable) and RV(mig_enabled).
  returned: always
  type: str
  sample: NVIDIA A100-SXM4-80GB
memory_mib:
  description: Total memory of the first GPU in MiB, as C(nvidia.com/gpu.memory).
  returned: always
  type: int
  sample: 81920
mig_capable:
  description: Whether any GPU supports MIG (its MIG mode is not V(N/A)), as C(nvidia.com/mig.capable).
  returned: always
  type: bool
  sample: true
mig_enabled:
  description: Whether any GPU currently runs in MIG mode.
  returned: always
  type: bool
  sample: true
gpus:
  description:
    - One entry per GPU, in nvidia-smi index order, the collection's typed GPU record. Values the GPU or driver does
      not report (C(N/A), C(Not Supported), C(Unknown Error)) are V(null). Identifiers stay strings; measurements
      are numbers without units; modes that are on or off are booleans.
    - Modes with more than two values stay the words nvidia-smi prints, such as the compute mode V(Default) or
      V(Exclusive_Process).
  returned: when O(gather) contains V(gpus)
  type: list
  elements: dict
  contains:
    index:
      description: nvidia-smi index of the GPU.
      type: int
    name:
      description: Product name.
      type: str
    brand:
      description: Product brand.
      type: str
    architecture:
      description: GPU architecture, on drivers that report it.
      type: str
    uuid:
      description: GPU UUID.
      type: str
    serial:
      description: Board serial number, a string even when it looks like a number.
      type: str
    pci_bus_id:
      description:
        - PCI bus id, normalised to the lower-case C(dddd:bb:dd.f) form (V(0000:07:00.0)) that the kernel log and
          lspci use; nvidia-smi prints it as V(00000000:07:00.0).
      type: str
    pci_device_id:
      description: PCI device and vendor id.
      type: str
    pci_sub_system_id:
      description: PCI subsystem id.
      type: str
    minor_number:
      description: Minor number of the C(/dev/nvidiaN) device.
      type: int
    module_id:
      description: Module id on multi-GPU boards (HGX); V(null) elsewhere.
      type: int
    vbios_version:
      description: VBIOS version.
      type: str
    board_part_number:
      description: Board part number.
      type: str
    gpu_part_number:
      description: GPU part number.
      type: str
    inforom_image_version:
      description: InfoROM image version.
      type: str
    inforom_oem_version:
      description: Version of the OEM object of the infoROM.
      type: str
    inforom_ecc_version:
      description: Version of the ECC object of the infoROM.
      type: str
    inforom_power_version:
      description: Version of the power object of the infoROM.
      type: str
    gsp_firmware_version:
      description: GSP firmware version, when the GPU runs GSP firmware.
      type: str
    virtualization_mode:
      description: Virtualization mode, for example V(None) on bare metal or V(Pass-Through) in a VM.
      type: str
    persistence_mode:
      description: Whether persistence mode is on.
      type: bool
    display_mode:
      description: Whether a display can be attached (nvidia-smi's C(Display Mode)).
      type: bool
    display_active:
      description: Whether a display is initialised on the GPU.
      type: bool
    display_attached:
      description: Whether a display is attached to the GPU (R570+).
      type: bool
    accounting_mode:
      description: Whether process accounting is on.
      type: bool
    multigpu_board:
      description: Whether the GPU is part of a multi-GPU board.
      type: bool
    addressing_mode:
      description: Memory addressing mode on drivers that report it, for example V(HMM) or V(None).
      type: str
    c2c_mode:
      description: Whether the chip-to-chip link (Grace Hopper) is on; V(null) elsewhere.
      type: bool
    dram_encryption_mode_current:
      description: Whether DRAM encryption is on, on GPUs that support it.
      type: bool
    dram_encryption_mode_pending:
      description: Whether DRAM encryption is on after the next reboot.
      type: bool
    compute_mode:
      description: Compute mode.
      type: str
    performance_state:
      description: Performance state, V(P0) to V(P12).
      type: str
    mig_mode_current:
      description: Whether MIG mode is on; V(null) on GPUs without MIG.
      type: bool
    mig_mode_pending:
      description: Whether MIG mode is on after the next GPU reset; V(null) on GPUs without MIG.
      type: bool
    ecc_mode_current:
      description: Whether ECC is on; V(null) on GPUs without ECC.
      type: bool
    ecc_mode_pending:
      description: Whether ECC is on after the next reboot.
      type: bool
    reset_required:
      description: Whether the driver asks for a GPU reset.
      type: bool
    drain_and_reset_recommended:
      description: Whether the driver recommends draining the GPU and resetting it.
      type: bool
    recovery_action:
      description: Recovery action the driver requests (R550+), V(None) when none.
      type: str
    memory_total_mib:
      description: Total framebuffer memory in MiB.
      type: int
    memory_used_mib:
      description: Used framebuffer memory in MiB.
      type: int
    memory_free_mib:
      description: Free framebuffer memory in MiB.
      type: int
    memory_reserved_mib:
      description: Memory reserved by the driver in MiB.
      type: int
    utilization_gpu_percent:
      description: GPU utilisation in percent.
      type: int
    utilization_memory_percent:
      description: Memory utilisation in percent.
      type: int
    utilization_encoder_percent:
      description: Video encoder utilisation in percent.
      type: int
    utilization_decoder_percent:
      description: Video decoder utilisation in percent.
      type: int
    utilization_jpeg_percent:
      description: JPEG engine utilisation in percent, on GPUs that have one.
      type: int
    utilization_ofa_percent:
      description: Optical flow accelerator utilisation in percent, on GPUs that have one.
      type: int
    fan_speed_percent:
      description: Fan speed in percent; V(null) on passively cooled GPUs.
      type: int
    temperature:
      description:
        - Temperatures in degrees Celsius. C(slowdown_c), C(shutdown_c) and C(max_operating_c) are the thresholds at
          which the GPU slows down, shuts down, and the highest operating temperature.
        - Drivers that report thermal margins instead (T.Limit) fill C(tlimit_c) with the current margin and
          C(slowdown_tlimit_c) and C(shutdown_tlimit_c) with the margins at which slowdown and shutdown start.
      type: dict
      sample: {"gpu_c": 27, "memory_c": 44, "slowdown_c": 89, "shutdown_c": 92, "max_operating_c": 85,
               "memory_max_c": 95, "tlimit_c": null, "slowdown_tlimit_c": null, "shutdown_tlimit_c": null}
    power:
      description:
        - Power draw and limits in watts, always floats. C(draw_w) is the draw the driver reports first (instant
          draw on R570+, where C(draw_instant_w) and C(draw_average_w) are given as well).
      type: dict
      sample: {"draw_w": 67.03, "draw_average_w": null, "draw_instant_w": null, "limit_w": 500.0, "limit_enforced_w": 500.0,
               "limit_requested_w": 500.0, "limit_default_w": 500.0, "limit_min_w": 100.0, "limit_max_w": 500.0}
    clocks:
      description: Current clocks in MHz.
      type: dict
      sample: {"graphics": 1275, "sm": 1275, "memory": 1593, "video": 1275}
    clocks_max:
      description: Maximum clocks in MHz.
      type: dict
      sample: {"graphics": 1410, "sm": 1410, "memory": 1593, "video": 1290}
    clocks_applications:
      description: Application clocks in MHz; V(null) values where the driver deprecated them.
      type: dict
      sample: {"graphics": 1275, "memory": 1593}
    clocks_default_applications:
      description: Default application clocks in MHz.
      type: dict
      sample: {"graphics": 1275, "memory": 1593}
    supported_clocks:
      description: Supported graphics clocks (MHz) for each supported memory clock (MHz).
      type: list
      elements: dict
      sample: [{"memory_mhz": 1593, "graphics_mhz": [1410, 1395, 1380]}]
    throttle_reasons:
      description: Each clock event (throttle) reason and whether it is active now.
      type: dict
      sample: {"gpu_idle": false, "sw_power_cap": false, "hw_slowdown": false, "hw_thermal_slowdown": false}
    throttle_reasons_active:
      description: Names of the active throttle reasons, sorted.
      type: list
      elements: str
      sample: ["sw_power_cap"]
    pcie:
      description: PCIe link generation and width, current against maximum, and the replay counter.
      type: dict
      sample: {"link_gen_current": 4, "link_gen_max": 4, "link_gen_device_current": 4, "link_gen_device_max": 4,
               "link_gen_host_max": 4,
               "link_width_current": 16, "link_width_max": 16, "replay_counter": 0}
    ecc_errors:
      description:
        - ECC error counters as the driver groups them (C(volatile) since the last driver load, C(aggregate) over the
          GPU's life), and totals of corrected and uncorrected errors in each.
      type: dict
      sample: {"volatile": {"sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 0,
                            "dram_uncorrectable": 0},
               "aggregate": {"sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 0,
                             "dram_uncorrectable": 0},
               "volatile_corrected": 0, "volatile_uncorrected": 0, "aggregate_corrected": 0,
               "aggregate_uncorrected": 0}
    retired_pages:
      description: Pages retired for single- and double-bit ECC errors and whether a retirement is pending.
      type: dict
      sample: {"single_bit_ecc": 0, "double_bit_ecc": 0, "pending": false}
    remapped_rows:
      description: Row remapping counts and state on GPUs that remap rows (Ampere and later), else V(null).
      type: dict
      sample: {"correctable": 0, "uncorrectable": 0, "pending": false, "failure": false}
  sample:
    - index: 0
      name: NVIDIA A100-SXM4-80GB
      uuid: GPU-513536b6-7d19-9063-b049-1e69664bb298
      serial: "1650522003820"
      pci_bus_id: "0000:01:00.0"
      persistence_mode: false
      mig_mode_current: true
      ecc_mode_current: true
      memory_total_mib: 81920
mig_devices:
  description: MIG devices of all GPUs.
  returned: when O(gather) contains V(mig) or V(mig_uuids)
  type: list
  elements: dict
  contains:
    gpu_index:
      description: Index of the parent GPU.
      type: int
    gpu_uuid:
      description: UUID of the parent GPU.
      type: str
    index:
      description: MIG device index on its GPU.
      type: int
    gpu_instance_id:
      description: GPU instance id.
      type: int
    compute_instance_id:
      description: Compute instance id.
      type: int
    memory_total_mib:
      description: Memory of the MIG device in MiB.
      type: int
    memory_used_mib:
      description: Used memory in MiB.
      type: int
    multiprocessor_count:
      description: Streaming multiprocessors of the MIG device.
      type: int
    copy_engine_count:
      description: Copy engines.
      type: int
    encoder_count:
      description: Video encoders.
      type: int
    decoder_count:
      description: Video decoders.
      type: int
    volatile_uncorrectable_sram:
      description: Volatile uncorrectable SRAM ECC errors of the MIG device.
      type: int
    uuid:
      description: MIG device UUID; V(null) unless O(gather) contains V(mig_uuids).
      type: str
    profile:
      description: MIG profile name; V(null) unless O(gather) contains V(mig_uuids).
      type: str
  sample:
    - gpu_index: 0
      gpu_uuid: GPU-513536b6-7d19-9063-b049-1e69664bb298
      index: 0
      gpu_instance_id: 3
      compute_instance_id: 0
      memory_total_mib: 19968
      multiprocessor_count: 14
      uuid: MIG-e138a708-679d-5075-ab88-ba8e298ec5d3
      profile: 1g.20gb
processes:
  description: Processes using the GPUs, compute (C(C)), graphics (C(G)) or both (C(C+G)).
  returned: when O(gather) contains V(processes)
  type: list
  elements: dict
  contains:
    gpu_index:
      description: Index of the GPU.
      type: int
    gpu_uuid:
      description: UUID of the GPU.
      type: str
    pid:
      description: Process id.
      type: int
    type:
      description: Process type.
      type: str
    name:
      description: Process name or path.
      type: str
    used_memory_mib:
      description: GPU memory used by the process in MiB.
      type: int
    gpu_instance_id:
      description: GPU instance of the process on MIG GPUs, else V(null).
      type: int
    compute_instance_id:
      description: Compute instance of the process on MIG GPUs, else V(null).
      type: int
  sample:
    - gpu_index: 0
      gpu_uuid: GPU-d37e67a5-91dd-3774-a5cb-99096249601a
      pid: 5762
      type: C
      name: python
      used_memory_mib: 1005
      gpu_instance_id: null
      compute_instance_id: null
topology:
  description:
    - The C(nvidia-smi topo -m) matrix. Link codes are C(X) (self), C(NV<n>) (a bond of <n> NVLinks), C(PIX),
      C(PXB), C(PHB), C(NODE) and C(SYS) (PCIe paths from nearest to farthest).
  returned: when O(gather) contains V(topology)
  type: dict
  contains:
    devices:
      description: Column names of the matrix, GPUs then NICs.
      type: list
      elements: str
    gpus:
      description: One entry per GPU row with C(index), C(name), C(links) (column name to link code),
        C(cpu_affinity), C(numa_affinity) and C(gpu_numa_id) (V(null) when not reported).
      type: list
      elements: dict
    nics:
      description: One entry per NIC row with C(name), C(device) (RDMA device such as V(mlx5_0)) and C(links).
      type: list
      elements: dict
  sample:
    devices: [GPU0, GPU1]
    gpus:
      - index: 0
        name: GPU0
        links: {GPU0: X, GPU1: NV12}
        cpu_affinity: "0-23,48-71"
        numa_affinity: "0"
        gpu_numa_id: null
      - index: 1
        name: GPU1
        links: {GPU0: NV12, GPU1: X}
        cpu_affinity: "0-23,48-71"
        numa_affinity: "0"
        gpu_numa_id: null
    nics: []
nvlink:
  description: NVLink state of each GPU; GPUs without NVLink have no links.
  returned: when O(gather) contains V(nvlink)
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    name:
      description: GPU name.
      type: str
    uuid:
      description: GPU UUID.
      type: str
    links:
      description: Each link with C(link) (number), C(active) and C(speed_gbps) (V(null) when inactive).
      type: list
      elements: dict
    note:
      description:
        - "What nvidia-smi printed for the GPU instead of links, such as C(NVML: Unable to retrieve NVLink information
          as all links are inactive) or C(Nvlink queries are not supported for Devices in MIG mode); V(null) when it
          listed links."
      type: str
    links_known:
      description:
        - V(false) when nvidia-smi cannot tell the links of this GPU (MIG mode, a GPU without NVLink), so that an
          empty C(links) says nothing about links being down.
      type: bool
  sample:
    - index: 0
      name: Tesla V100-SXM2-32GB
      uuid: GPU-2b5fbbe0-802e-d2fd-c501-69ec52b11bb7
      links: [{link: 0, active: true, speed_gbps: 25.781}, {link: 1, active: false, speed_gbps: null}]
      note: null
      links_known: true
failure:
  description:
    - Why gathering stopped, when O(fail_on_error=false) and an nvidia-smi call failed; V(null) otherwise.
    - Data gathered before the failed call is still returned; the subsets after it keep their empty values.
    - C(reason) is one of the codes listed in the notes, C(hint) says what to do, C(pci_bus_id) names the GPU the
      message was about (or is V(null)), C(cmd) and C(rc) describe the failed call.
  returned: always
  type: dict
  contains:
    reason:
      description: Short reason code.
      type: str
      sample: driver_not_loaded
    hint:
      description: What the operator can do about it, after C(GPU <pci_bus_id>:) when the failure names a GPU.
      type: str
    pci_bus_id:
      description:
        - "Normalised PCI bus id of the GPU the message names, for example from C(Unable to determine the device
          handle for GPU0000:07:00.0: Unknown Error); V(null) when it names none."
      type: str
      sample: "0000:07:00.0"
    cmd:
      description: The nvidia-smi command that failed.
      type: str
      sample: nvidia-smi -q -x
    rc:
      description: Its exit code.
      type: int
      sample: 9
  sample: {"reason": "driver_not_loaded", "hint": "The NVIDIA kernel driver is not loaded. ...", "pci_bus_id": null,
           "cmd": "nvidia-smi -q -x", "rc": 9}
nvidia_smi_seconds:
  description:
    - Wall time of the C(nvidia-smi -q -x) call in seconds, also when it failed; V(null) when it did not run (O(gather)
      without V(gpus), V(mig) and V(processes), or no C(nvidia-smi) found).
    - M(gpufleet.nvidia.nvidia_gpu_health) judges it against its O(gpufleet.nvidia.nvidia_gpu_health#module:max_smi_seconds)
      when it is given this result as O(gpufleet.nvidia.nvidia_gpu_health#module:gpu_info).
  returned: always
  type: float
  sample: 0.412
  version_added: 0.2.0
nvidia_smi_warnings:
  description:
    - The C(WARNING:) lines C(nvidia-smi -q -x) printed before its report (a corrupted infoROM, for example); they are
      also shown as task warnings.
  returned: always
  type: list
  elements: str
  sample: ["WARNING: infoROM is corrupted at gpu 0000:00:1E.0"]
  version_added: 0.2.0
gathered:
  description: The subsets gathered, sorted.
  returned: always
  type: list
  elements: str
  sample: [gpus, mig]
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import (
    Failure,
    classify_failure,
    parse_gpu_list,
    parse_nvlink_status,
    parse_topology,
    parse_xml,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import NOT_FOUND_RC
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_runner import (
    NVIDIA_SMI_ARGUMENT_SPEC,
    format_command,
    run_nvidia_smi,
)

GATHER_CHOICES = ['gpus', 'mig', 'processes', 'mig_uuids', 'topology', 'nvlink']
# One `nvidia-smi -q -x` answers all three: it is the only single call that
# lists GPUs together with their MIG devices and processes.
XML_SUBSETS = frozenset(('gpus', 'mig', 'processes'))
XML_ARGS = ['-q', '-x']
LIST_ARGS = ['-L']
TOPOLOGY_ARGS = ['topo', '-m']
NVLINK_ARGS = ['nvlink', '-s']

UNPARSABLE_HINT = ('nvidia-smi answered, but its output could not be parsed ({error}). The driver may print a '
                   'format this collection does not know yet: keep the output and report it.')
# Failed calls return their output; an XML report of eight GPUs is megabytes.
MAX_OUTPUT_CHARS = 8000


class GatherFailed(Exception):
    """Stops gathering once a failure has been recorded (fail_on_error=false)."""


def _truncate(text):
    if text and len(text) > MAX_OUTPUT_CHARS:
        return text[:MAX_OUTPUT_CHARS] + '\n[... %d more characters]' % (len(text) - MAX_OUTPUT_CHARS)
    return text


class NvidiaSmiInfo(object):

    def __init__(self, module):
        self.module = module
        self.gather = set(module.params['gather'])
        self.failure = None
        self.seconds = None
        self.warnings = []

    def _fail(self, failure, args, rc, stdout, stderr):
        cmd = format_command(['nvidia-smi'] + args)
        # Roles quote the hint: on a node of eight GPUs it must say which one.
        hint = ('GPU %s: %s' % (failure.pci_bus_id, failure.hint)) if failure.pci_bus_id else failure.hint
        if self.module.params['fail_on_error']:
            self.module.fail_json(msg=hint, reason=failure.reason, pci_bus_id=failure.pci_bus_id, cmd=cmd,
                                  rc=rc, stdout=_truncate(stdout), stderr=_truncate(stderr))
        self.failure = dict(reason=failure.reason, hint=hint, pci_bus_id=failure.pci_bus_id, cmd=cmd, rc=rc)
        raise GatherFailed()

    def _call(self, args, parser, timed=False):
        started = time.monotonic()
        rc, stdout, stderr = run_nvidia_smi(self.module, args)
        # A binary that is not there (rc 127 before anything ran) took no time worth reporting.
        if timed and rc != NOT_FOUND_RC:
            self.seconds = round(time.monotonic() - started, 3)
        if rc != 0:
            self._fail(classify_failure(rc, stdout, stderr), args, rc, stdout, stderr)
        try:
            return parser(stdout)
        except ValueError as exc:
            # Known messages printed with rc 0 (some branches report "No
            # devices were found" that way) beat the generic parse error.
            failure = classify_failure(rc, stdout, stderr)
            if failure.reason:
                self._fail(failure, args, rc, stdout, stderr)
            self._fail(Failure('unparsable_output', UNPARSABLE_HINT.format(error=exc), None), args, rc, stdout, stderr)

    def _report(self):
        report = self._call(XML_ARGS, parse_xml, timed=True)
        if not report['gpus']:
            self._fail(classify_failure(6, 'No devices were found', ''), XML_ARGS, 0, '', '')
        self.warnings = report['warnings']
        for warning in report['warnings']:
            self.module.warn('nvidia-smi: %s' % warning)
        return report

    def read(self):
        data = _empty_result(self.gather)
        try:
            if self.gather & XML_SUBSETS:
                self._add_report(data, self._report())
            if 'mig_uuids' in self.gather:
                _merge_gpu_list(data, self._call(LIST_ARGS, parse_gpu_list))
            if 'topology' in self.gather:
                data['topology'] = self._call(TOPOLOGY_ARGS, parse_topology)
            if 'nvlink' in self.gather:
                data['nvlink'] = self._call(NVLINK_ARGS, parse_nvlink_status)
        except GatherFailed:
            # Keep what earlier calls gathered: a host whose topology query
            # fails still has valid GPU data.
            data['failure'] = self.failure
        data['nvidia_smi_seconds'] = self.seconds
        data['nvidia_smi_warnings'] = self.warnings
        return data

    def _add_report(self, data, report):
        version = report['driver_version']
        data['driver'] = dict(version=version, branch=version.split('.')[0] if version else None,
                              cuda_version=report['cuda_version'])
        gpus = report['gpus']
        mig_devices, processes = [], []
        for gpu in gpus:
            parent = dict(gpu_index=gpu['index'], gpu_uuid=gpu['uuid'])
            for device in gpu.pop('mig_devices'):
                mig_devices.append(dict(parent, uuid=None, profile=None, **device))
            for proc in gpu.pop('processes'):
                processes.append(dict(parent, **proc))
        first = gpus[0]
        data.update(
            gpu_count=len(gpus),
            product=first['name'],
            memory_mib=first['memory_total_mib'],
            mig_capable=any(gpu['mig_mode_current'] is not None for gpu in gpus),
            mig_enabled=any(gpu['mig_mode_current'] is True for gpu in gpus),
        )
        if 'gpus' in self.gather:
            data['gpus'] = gpus
        if 'mig_devices' in data:
            data['mig_devices'] = mig_devices
        if 'processes' in self.gather:
            data['processes'] = processes


def _empty_result(gather):
    data = dict(
        driver=dict(version=None, branch=None, cuda_version=None),
        gpu_count=0 if gather & XML_SUBSETS else None,
        product=None,
        memory_mib=None,
        mig_capable=None,
        mig_enabled=None,
        failure=None,
        gathered=sorted(gather),
    )
    if 'gpus' in gather:
        data['gpus'] = []
    if 'mig' in gather or 'mig_uuids' in gather:
        data['mig_devices'] = []
    if 'processes' in gather:
        data['processes'] = []
    if 'topology' in gather:
        data['topology'] = dict(devices=[], gpus=[], nics=[])
    if 'nvlink' in gather:
        data['nvlink'] = []
    return data


_MIG_DEVICE_KEYS = dict.fromkeys((
    'gpu_instance_id', 'compute_instance_id', 'memory_total_mib', 'memory_used_mib', 'multiprocessor_count',
    'copy_engine_count', 'encoder_count', 'decoder_count', 'volatile_uncorrectable_sram'))


def _merge_gpu_list(data, listed):
    """Add UUID and profile from ``nvidia-smi -L`` to the MIG devices of the XML report."""
    by_key = dict(((dev['gpu_index'], dev['index']), dev) for dev in data['mig_devices'])
    for gpu in listed:
        for mig in gpu['mig_devices']:
            device = by_key.get((gpu['index'], mig['device_index']))
            if device is None:
                # Only -L ran (gather without mig), or a MIG device appeared
                # between the two calls: report what -L knows.
                device = dict(_MIG_DEVICE_KEYS, gpu_index=gpu['index'], gpu_uuid=gpu['uuid'],
                              index=mig['device_index'])
                data['mig_devices'].append(device)
            device.update(uuid=mig['uuid'], profile=mig['profile'])


def main():
    argument_spec = dict(
        gather=dict(type='list', elements='str', choices=GATHER_CHOICES, default=['gpus', 'mig']),
        fail_on_error=dict(type='bool', default=True),
    )
    argument_spec.update(NVIDIA_SMI_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    data = NvidiaSmiInfo(module).read()
    module.exit_json(changed=False, **data)


if __name__ == '__main__':
    main()
