#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_gpu_health
short_description: Evaluate the health of the NVIDIA GPUs of a host, read-only
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads the GPUs with one C(nvidia-smi -q -x), the NVLink state and error counters with C(nvidia-smi nvlink -s)
    and C(nvidia-smi nvlink -e) where NVLink can exist, and the kernel log of the current boot, and returns
    findings, each with a stable O(ignore:code), a severity, the action an operator takes (a rung of the ladder
    V(none), V(watch), V(drain), V(reset), V(reboot), V(rma)), the source of that judgement, the GPU it concerns, the
    evidence and the advice.
  - Codes, severities, actions, thresholds and their sources come from the collection's health catalog
    (C(plugins/module_utils/health_catalog.py), documented in the health role's README), with per-GPU-model
    thresholds (H100, H200, B200, GB200, A100, L40S, L4, ...). O(thresholds) and O(check_overrides) change them for
    a site; an unknown name is refused.
  - With O(state_path), the module remembers between runs what it judged there - the counters that mean something
    only as growth (PCIe replays, HW slowdown time, NVLink errors) and the kernel log events it reported - so an Xid
    is raised once and again only when it recurs.
  - "Checks: Xid errors in the kernel log, with NVIDIA's meaning and the usual action (drain for Xid 48, 64, 74, 79,
    95, 119, 120; reset for 61, 62 and other codes NVIDIA marks C(RESET_GPU); reset when convenient for 63 and 94;
    trend for 92; application errors, not node faults, for 13, 31, 43, 45, 68); NVSwitch SXid errors; a GPU that fell
    off the bus; uncorrectable ECC errors; pending retired pages and remapped rows and remapping failures; the
    driver's recovery action and reset flags; temperature against the GPU's own slowdown threshold; active HW
    slowdown, HW thermal slowdown, HW power brake and SW thermal slowdown (with how long they were active); PCIe link
    width or (under load) generation below the maximum; NVLinks down against the model's link count; fewer GPUs
    than expected; persistence mode off; and C(nvidia-smi) itself failing (driver not loaded, version mismatch, GPU
    lost, ...), hanging or being slow."
  - "Also: SRAM and DRAM ECC errors apart, with correctable thresholds and the driver's SRAM threshold flag; row
    remapping close to its limit (banks without a spare row, uncorrectable remaps) and retired pages at their limit;
    HBM temperature against the memory's own limit; NVLink replay, recovery and CRC error counters; PCIe replays
    and HW slowdown time growing between runs; NVLink fabric registration and health (GB200); and, with
    O(node_idle), GPU processes or memory in use on a node without a job."
  - Never changes anything on the host. A broken driver is a finding, not a module failure, unless
    O(fail_when_unhealthy=true).
  - "Severities: V(critical) means take the node or GPU out of service now; V(warning) needs an operator but work may
    continue; V(info) is worth knowing and does not make the host unhealthy by default."
  - Only O(state_path) is written, and not in check mode; the module reports no change for it, since nothing the
    GPUs or services read changes.
extends_documentation_fragment:
  - gpufleet.nvidia.nvidia_smi
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.INFO_MODULE
  - gpufleet.nvidia.attributes.PLATFORM_LINUX_NVIDIA
options:
  gpu_info:
    description:
      - The registered result of a M(gpufleet.nvidia.nvidia_smi_info) call (with O(gpufleet.nvidia.nvidia_smi_info#module:gather)
        containing V(gpus), and O(gpufleet.nvidia.nvidia_smi_info#module:fail_on_error=false) so that a broken driver
        becomes a finding). The module then judges those GPU records, their C(nvidia-smi) failure, warnings and time,
        and runs no C(nvidia-smi -q -x) of its own; a play that needs the GPU records anyway reads each host with
        one C(nvidia-smi) process.
      - O(expected_mig_layout) needs the MIG profile names, so gather V(mig_uuids) as well for it.
      - Omitted, the module reads the GPUs itself with C(nvidia-smi -q -x).
    type: dict
    version_added: 0.2.0
  expected_gpu_model:
    description:
      - Text every GPU's product name must contain, ignoring case, for example V(H100) or V(NVIDIA L40S). A GPU of
        another model is a V(warning) (O(ignore:code=gpu_model_unexpected)).
      - When omitted or empty, the model is not checked.
    type: str
    version_added: 0.2.0
  expected_driver_branch:
    description:
      - The driver branch (V(570)) or version (V(570.195.03)) the host must run, compared by whole dot-separated
        parts. Another driver is a V(warning) (O(ignore:code=driver_branch_unexpected)).
      - When omitted or empty, the driver is not checked.
    type: str
    version_added: 0.2.0
  expected_ecc:
    description:
      - Whether ECC must be V(enabled) or V(disabled) on every GPU that supports ECC. A GPU in the other mode is a
        V(warning) (O(ignore:code=ecc_mode_unexpected)); the evidence says when the change is already pending.
      - When omitted, ECC modes are not checked.
    type: str
    choices: [enabled, disabled]
    version_added: 0.2.0
  expected_mig_layout:
    description:
      - The MIG layout the host must have, in the form of the mig role's C(mig_layouts), entries of O(expected_mig_layout[].gpus)
        and O(expected_mig_layout[].profiles). Each GPU is compared with the first entry that names it (or names no
        GPU).
      - A GPU with MIG mode off is a V(warning) (O(ignore:code=mig_mode_unexpected)), and so is one whose MIG devices,
        counted per profile, differ from the entry (O(ignore:code=mig_layout_unexpected)).
      - The XML report does not name MIG profiles, so the module reads them with C(nvidia-smi -L) (one more process),
        or from O(gpu_info) gathered with V(mig_uuids).
      - When omitted or empty, MIG layouts are not checked.
    type: list
    elements: dict
    version_added: 0.2.0
    suboptions:
      gpus:
        description: GPUs of this entry, as indexes, UUIDs or PCI bus ids; omitted, every GPU.
        type: list
        elements: str
      profiles:
        description: GPU instance profile names (V(3g.20gb)) mapped to the number of MIG devices of that profile.
        type: dict
        required: true
  expected_gpu_count:
    description:
      - Number of GPUs the host must have. Fewer is a V(critical) finding (O(ignore:code=gpu_count_low)).
      - When omitted, the GPU count is not checked.
    type: int
  thresholds:
    description:
      - Thresholds of the health catalog for this host, by name (V(nvlink_crc_errors_max),
        V(ecc_dram_correctable_max) ...). A value applies to every GPU model, or a mapping gives V(default) and
        values per model key (V(H100), V(H200), V(B200), V(GB200), V(GH200), V(A100), V(L40S), V(L4)); V(null)
        turns a threshold's check off.
      - An unknown threshold or model, or a value that is not a number of the threshold's unit, fails the task with
        its name. The individual options below (O(temperature_margin_c) ...) set the same thresholds for every model.
    type: dict
    default: {}
    version_added: 0.3.0
  check_overrides:
    description:
      - "Severity and/or action of finding codes for this host, for example C({persistence_mode_off: {severity:
        info}}) or C({xid_13: {action: watch}}). Codes of a family (V(xid_<N>), V(sxid_<N>), V(nvidia_smi_<reason>)) are
        accepted; an unknown code, severity or action fails the task with its name. Overridden findings carry
        C(source=inventory)."
    type: dict
    default: {}
    version_added: 0.3.0
  state_path:
    description:
      - File where the module keeps what it needs from one run to the next (counters, kernel log events already
        reported), read-write for root only. Omitted, every run stands alone - growth-based checks
        (O(ignore:code=pcie_replays_growing), O(ignore:code=hw_slowdown_recent)) are off and every Xid in
        O(xid_window) is reported every time.
      - An Xid already reported by a previous run is left out of RV(findings) and listed in RV(already_reported)
        until it recurs (a new last log line, or more occurrences).
    type: path
    version_added: 0.3.0
  node_idle:
    description:
      - V(true) when the scheduler runs no job on the node (the caller asks Slurm or Kubernetes). A GPU with
        processes, or more memory in use than the catalog's C(idle_gpu_memory_used_mib_max), is then a V(warning)
        (O(ignore:code=gpu_busy_while_idle)). Omitted, the check is off.
    type: bool
    version_added: 0.3.0
  temperature_margin_c:
    description:
      - A GPU whose temperature is within this many degrees Celsius of its own slowdown threshold gets a V(warning);
        at or above the threshold it gets a V(critical) finding.
      - The threshold is the one the GPU reports (C(GPU Slowdown Temp)), or its T.Limit margins on GPUs that report
        only those. GPUs that report neither are not judged on temperature.
      - Omitted, the catalog's C(temperature_margin_c) (5).
    type: int
  max_smi_seconds:
    description:
      - An C(nvidia-smi -q -x) that takes longer than this many seconds is a V(warning) (O(ignore:code=nvidia_smi_slow)),
        which usually means persistence is off or a GPU struggles.
      - Keep it below O(timeout); a call that reaches O(timeout) is stopped and is a V(critical) finding instead.
      - Omitted, the catalog's C(max_smi_seconds) (10).
    type: float
  require_persistence:
    description:
      - Report GPUs with persistence mode off as a V(warning).
    type: bool
    default: true
  ignore_xids:
    description:
      - Xid codes to leave out of the findings, for codes a site has triaged as harmless on its workloads.
    type: list
    elements: int
    default: []
  ecc_aggregate_uncorrectable_max:
    description:
      - Lifetime (aggregate) uncorrectable ECC errors are reported as V(info) because errors already repaired by row
        remapping or page retirement stay counted. Above this count they become a V(warning).
      - Volatile uncorrectable errors (since the driver loaded) are always V(critical).
    type: int
  check_kernel_modules:
    description:
      - Read the kernels installed in C(/boot) and report those whose C(modules.dep) lists no NVIDIA core module, on a
        host where at least one kernel has it, as C(kernel_without_nvidia_module).
      - "V(critical) for the kernel the bootloader starts by default (the newest), since the next reboot leaves the
        node without a GPU driver; V(warning) for the others."
      - The usual cause is a kernel update without the kernel's headers, so DKMS could not build the module.
    type: bool
    default: true
  check_pcie:
    description:
      - Compare the PCIe link width and generation of each GPU with the maximum it and the slot support.
      - A narrower link is always reported. A lower generation is reported only while the GPU is at least
        O(pcie_gen_min_utilization) percent busy, because GPUs lower their link generation when idle to save power.
      - Some cloud instances run their GPUs on a narrower link by design; set V(false) there.
    type: bool
    default: true
  pcie_gen_min_utilization:
    description:
      - GPU utilization, in percent, from which a PCIe link generation below the maximum counts as degraded.
      - GPUs in MIG mode report no utilization; their link generation is not judged.
      - Omitted, the catalog's C(pcie_gen_min_utilization) (50).
    type: int
  check_nvlink:
    description:
      - Whether to read the NVLink state and error counters with C(nvidia-smi nvlink -s) and C(nvidia-smi nvlink -e),
        two more C(nvidia-smi) processes (the counters only where a GPU lists links).
      - V(auto) reads it on hosts with two or more GPUs, because NVLink needs a peer and C(nvidia-smi -q -x) does not
        say whether a GPU has NVLink. V(always) also reads it on single-GPU hosts (for example GB200 compute trays);
        V(never) skips it.
      - A GPU with fewer active links than O(nvlink_expected_active), else the catalog's count for its model (12 on
        A100 SXM4, 18 on H100, H200, B200 and GB200), else the best connected GPU of the same model on the host, is a
        V(critical) finding (O(ignore:code=nvlink_down)). A host whose GPUs of an unknown model report no active link
        at all is taken to use no NVLink.
    type: str
    choices: [auto, always, never]
    default: auto
  nvlink_expected_active:
    description:
      - Number of active NVLinks every GPU must have, for example V(18) on H100 SXM or V(12) on A100 SXM.
    type: int
  kernel_log_source:
    description:
      - Where to look for Xid, SXid and fallen-off-the-bus messages.
      - V(journal) runs C(journalctl -k) (kernel messages of the current boot) limited to O(xid_window).
      - V(dmesg) reads the kernel ring buffer and keeps the messages younger than O(xid_window) by their
        seconds-since-boot stamps (messages without a stamp are kept).
      - V(auto) uses the journal when C(journalctl) works and returns kernel messages, else C(dmesg).
      - V(file) reads O(kernel_log_path) (a saved C(dmesg) or journal dump, for air-gapped triage and tests); every
        event in the file counts, because its stamps cannot be related to the current boot.
      - V(none) skips the kernel log.
      - Only the current boot is read, because rebooting is the remedy for most drain-class Xids.
      - Reading the kernel log usually needs root; when it cannot be read the module reports a V(warning)
        (O(ignore:code=kernel_log_unavailable)).
    type: str
    choices: [auto, journal, dmesg, file, none]
    default: auto
  kernel_log_path:
    description:
      - File read when O(kernel_log_source=file).
    type: path
  xid_window:
    description:
      - How far back to look in the kernel log, as a number with unit V(s), V(m), V(h), V(d) or V(w) (V(30m), V(24h),
        V(7d)), or V(boot) for the whole current boot.
    type: str
    default: 24h
  fail_on:
    description:
      - The lowest severity that makes RV(healthy) false.
    type: str
    choices: [critical, warning, info]
    default: warning
  fail_when_unhealthy:
    description:
      - Fail the task when the host is not healthy, with the findings in the result. By default the task succeeds and
        the caller decides from RV(healthy).
    type: bool
    default: false
notes:
  - "With O(gpu_info) the module runs no C(nvidia-smi -q -x): the GPUs are read once, by M(gpufleet.nvidia.nvidia_smi_info)."
  - "Cost: one C(nvidia-smi -q -x) per run, plus C(nvidia-smi nvlink -s) and C(nvidia-smi nvlink -e) where NVLink
    is checked, plus one
    C(journalctl) or C(dmesg). The XML report is slower than a C(--query-gpu) CSV query (hundreds of milliseconds
    instead of milliseconds on a GPU with persistence on), but it is the only single call that carries the slowdown
    thresholds, remapped rows, retired pages, throttle reasons, PCIe generation and width, and reset status
    together; the CSV route needs a second process for remapped rows and still lacks the thresholds."
  - Run with O(ignore:become=true) so that the kernel log and every GPU field can be read.
  - Suitable for Slurm C(HealthCheckProgram) style checks when O(timeout) stays well below the scheduler's limit
    (60 seconds in Slurm 22.05 to 25.11); the health role's node-local mode runs the same checks without Ansible.
seealso:
  - module: gpufleet.nvidia.nvidia_smi_info
  - name: NVIDIA Xid catalogue
    description: NVIDIA's list of Xid codes with their immediate and investigatory actions.
    link: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
  - name: NVIDIA GPU memory error management
    description: Row remapping, contained and uncontained ECC errors, and recovery actions.
    link: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html
"""

EXAMPLES = r"""
- name: Check the GPUs of an 8-GPU HGX node
  gpufleet.nvidia.nvidia_gpu_health:
    expected_gpu_count: 8
    nvlink_expected_active: 18
  become: true
  register: gpu_health

- name: Drain the node in Slurm when the GPUs are not healthy
  ansible.builtin.command:
    cmd: scontrol update nodename={{ inventory_hostname_short }} state=drain reason="gpu health {{ gpu_health.findings | map(attribute='code') | join(',') }}"
  delegate_to: "{{ groups['slurm_controller'][0] }}"
  when: not gpu_health.healthy
  changed_when: true

- name: Fail the play on critical findings only, looking at the last hour of kernel log
  gpufleet.nvidia.nvidia_gpu_health:
    xid_window: 1h
    fail_on: critical
    fail_when_unhealthy: true
  become: true

- name: Read the GPUs once, for the play and for the health check
  gpufleet.nvidia.nvidia_smi_info:
    fail_on_error: false
  become: true
  register: gpu_info

- name: Judge them against what the inventory expects, without another nvidia-smi -q -x
  gpufleet.nvidia.nvidia_gpu_health:
    gpu_info: "{{ gpu_info }}"
    expected_gpu_count: 8
    expected_gpu_model: H100
    expected_driver_branch: "570"
    expected_ecc: enabled
    check_nvlink: never
  become: true
  register: gpu_health

- name: Triage a saved dmesg dump from an air-gapped host
  gpufleet.nvidia.nvidia_gpu_health:
    kernel_log_source: file
    kernel_log_path: /srv/triage/node17-dmesg.txt
    ignore_xids: [13, 43]
  become: true
"""

RETURN = r"""
healthy:
  description: V(true) when no finding is at or above O(fail_on) severity.
  returned: always
  type: bool
  sample: false
findings:
  description:
    - What is wrong, most severe first. Every finding has O(ignore:code), O(ignore:severity), O(ignore:action),
      O(ignore:source), O(ignore:gpu), O(ignore:evidence) and O(ignore:advice); a finding judged against a threshold
      has O(ignore:threshold); some add details named after what they measure.
    - The codes, with their severity, action and source, are the health catalog's (the health role's README).
    - "Codes: V(xid_<N>), V(sxid_<N>), V(gpu_fell_off_bus), V(ecc_uncorrectable_volatile), V(ecc_uncorrectable_history),
      V(remapped_rows_failure), V(remapped_rows_pending), V(retired_pages_pending), V(gpu_recovery_action),
      V(gpu_drain_and_reset_recommended), V(gpu_reset_required), V(temperature_at_slowdown),
      V(temperature_near_slowdown), V(hw_slowdown), V(hw_thermal_slowdown), V(hw_power_brake_slowdown),
      V(sw_thermal_slowdown), V(pcie_link_width_degraded), V(pcie_link_gen_degraded), V(persistence_mode_off),
      V(nvlink_down), V(nvlink_state_unavailable), V(gpu_count_low), V(nvidia_smi_<reason>) (reasons as in the
      notes), V(nvidia_smi_slow), V(nvidia_smi_warning), V(kernel_log_unavailable) and V(kernel_without_nvidia_module) (which
      also carries C(kernel)); against the expectations
      V(gpu_model_unexpected), V(driver_branch_unexpected), V(ecc_mode_unexpected), V(mig_mode_unexpected) and
      V(mig_layout_unexpected), which also carry C(expected) and C(found)."
  returned: always
  type: list
  elements: dict
  contains:
    code:
      description: Stable identifier of the kind of finding.
      type: str
      sample: xid_79
    severity:
      description: V(critical), V(warning) or V(info).
      type: str
      sample: critical
    action:
      description: What the finding calls for, cheapest first - V(none), V(watch), V(drain), V(reset), V(reboot) or V(rma).
      type: str
      sample: reboot
    source:
      description:
        - Key of the reference the judgement comes from (the catalog's C(SOURCES), for example V(nvidia-xid),
          V(nvidia-dcgm-health), V(azurehpc-health-checks), V(nvidia-smi), V(gpufleet)), or V(inventory) when
          O(check_overrides) changed it.
      type: str
      sample: nvidia-xid
    threshold:
      description: The threshold the reading was judged against - C(name), C(value) and C(source) (V(inventory) for a
        site's value, V(host) for the best-connected GPU of the host).
      type: dict
      returned: for findings judged against a threshold
      sample: {"name": "nvlink_expected_active", "value": 18, "source": "nvidia-nvlink"}
    gpu:
      description:
        - The GPU concerned, with C(index), C(uuid) and C(pci_bus_id); C(null) for host-wide findings.
        - For an Xid on a GPU that nvidia-smi no longer lists, and for an C(nvidia_smi_*) finding whose message names
          a GPU (C(Unable to determine the device handle for GPU0000:07:00.0) ...), only C(pci_bus_id) is set.
      type: dict
      sample: {"index": 3, "uuid": "GPU-4b6ebbfe-8eac-8fed-1939-b4c545eafa7f", "pci_bus_id": "0000:3b:00.0"}
    evidence:
      description: What was seen, with the log line or reading.
      type: str
      sample: "GPU 3 (0000:3b:00.0): Xid 79 (GPU has fallen off the bus) logged 1 time; last: [12345.678901] NVRM:
        Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    advice:
      description: What an operator does about it.
      type: str
      sample: Drain and reboot the node; if it recurs, check power, cooling, the riser and the PCIe slot and open a
        hardware case.
    xid:
      description:
        - Xid code, for C(xid_*) findings; they also carry C(xid_name), C(meaning), C(xid_category) (V(drain),
          V(reset), V(reset_when_convenient), V(trend), V(application) or V(investigate)), C(count), C(first_seen),
          C(last_seen) and C(last_line).
        - C(first_seen) and C(last_seen) are the log's own time stamp text, or C(<seconds> s after boot) for raw
          C(dmesg) lines, or C(null).
      type: int
      returned: for Xid findings
      sample: 79
already_reported:
  description:
    - Kernel log events (C(xid_*), C(sxid_*), C(gpu_fell_off_bus)) a previous run already reported and that have not
      recurred since, with C(first_reported) (seconds since the epoch); only with O(state_path).
  returned: always
  type: list
  elements: dict
  sample: []
state:
  description: The memory kept in O(state_path) - C(path), C(previous_run) (seconds since the epoch, or C(null)) and
    C(written) (V(false) in check mode or without O(state_path)).
  returned: always
  type: dict
  sample: {"path": "/var/lib/gpufleet/health-state.json", "previous_run": 1764930000.0, "written": true}
summary:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {"critical": 1, "warning": 2, "info": 0}
gpus:
  description:
    - The readings each GPU was judged on, under the keys of the collection's GPU record (the same keys and types
      as RV(gpufleet.nvidia.nvidia_smi_info#module:gpus)); values the GPU does not report are C(null).
    - "Keys: C(index), C(uuid), C(pci_bus_id) (normalised, V(0000:01:00.0)), C(name), C(persistence_mode) (bool),
      C(temperature), C(utilization_gpu_percent), C(ecc_errors), C(retired_pages), C(remapped_rows),
      C(throttle_reasons), C(pcie), C(reset_required), C(drain_and_reset_recommended), C(recovery_action),
      C(clock_event_us), C(fabric), C(processes) and C(memory_used_mib)."
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      uuid: GPU-513536b6-7d19-9063-b049-1e69664bb298
      pci_bus_id: "0000:01:00.0"
      name: NVIDIA A100-SXM4-80GB
      persistence_mode: true
      temperature: {gpu_c: 34, slowdown_c: 89, shutdown_c: 92}
      utilization_gpu_percent: 0
      ecc_errors: {volatile_uncorrected: 0, aggregate_uncorrected: 0}
      remapped_rows: {correctable: 0, uncorrectable: 0, pending: false, failure: false}
      pcie: {link_gen_current: 4, link_gen_max: 4, link_width_current: 16, link_width_max: 16}
      reset_required: false
driver_version:
  description: Driver version nvidia-smi reported, or C(null) when it failed.
  returned: always
  type: str
  sample: 550.90.07
nvidia_smi_seconds:
  description:
    - Wall time of the C(nvidia-smi -q -x) call; with O(gpu_info), the time that call reported, or C(null).
  returned: always
  type: float
  sample: 0.412
nvidia_smi_calls:
  description:
    - Number of C(nvidia-smi) runs this module made (attempted, when the binary is missing); with O(gpu_info) only
      C(nvidia-smi nvlink -s) and C(nvidia-smi -L) count, so usually V(0).
  returned: always
  type: int
  sample: 2
kernel_log:
  description: How the kernel log was read.
  returned: always
  type: dict
  contains:
    source:
      description: V(journal), V(dmesg), V(file), or V(none) when it was skipped or could not be read.
      type: str
      sample: journal
    window_seconds:
      description: Look-back window in seconds, C(null) for the whole boot.
      type: int
      sample: 86400
    events:
      description: Number of Xid, SXid and fallen-off-the-bus messages found in the window, before O(ignore_xids).
      type: int
      sample: 3
"""

import platform
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils import health_readers, health_state
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_expectations import expectation_findings
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_readers import first_line as _first_line
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_readers import uptime as _uptime
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import (
    Catalog,
    evaluate,
    health_view,
    is_healthy,
    parse_duration,
    sort_findings,
    summarize,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernels import installed_kernels, module_findings
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import (
    attach_processes,
    classify_failure,
    parse_gpu_list,
    parse_xml,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import TIMEOUT_RC
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_runner import (
    NVIDIA_SMI_ARGUMENT_SPEC,
    format_command,
    run_nvidia_smi,
)

XML_ARGS = ['-q', '-x']
LIST_ARGS = ['-L']
_GPU_INFO_HINT = ('gpu_info must be the registered result of gpufleet.nvidia.nvidia_smi_info with gather containing '
                  'gpus (and fail_on_error: false)')
_UNPARSABLE_HINT = ('nvidia-smi answered, but not with the XML report of nvidia-smi -q -x. Check that '
                    'nvidia_smi_path points to the real NVIDIA binary and run nvidia-smi -q -x on the host.')


def read_gpus(module):
    """Return (gpu records, driver_version, smi_failure, smi_warnings, seconds)."""
    started = time.monotonic()
    rc, stdout, stderr = run_nvidia_smi(module, XML_ARGS)
    seconds = time.monotonic() - started
    failure = classify_failure(rc, stdout, stderr)
    if rc != 0 or (failure.reason and '<nvidia_smi_log' not in (stdout or '')):
        return [], None, {'reason': failure.reason or 'unknown', 'hint': failure.hint, 'rc': rc,
                          'pci_bus_id': failure.pci_bus_id, 'stdout': stdout, 'stderr': stderr}, [], seconds
    try:
        report = parse_xml(stdout)
    except ValueError as exc:
        module.fail_json(msg='%s (%s)' % (_UNPARSABLE_HINT, exc), reason='unparsable_output', rc=rc,
                         cmd=format_command(['nvidia-smi'] + XML_ARGS), stdout=stdout[:4000], stderr=stderr)
    return report['gpus'], report.get('driver_version'), None, report.get('warnings') or [], seconds


def gpus_from_info(module, info):
    """(gpu records, driver_version, smi_failure, smi_warnings, seconds, mig_devices) of an nvidia_smi_info result."""
    if not isinstance(info.get('gpus'), list) or 'gpus' not in (info.get('gathered') or ['gpus']):
        module.fail_json(msg=_GPU_INFO_HINT)
    gpus, failure = attach_processes(info['gpus'], info.get('processes')), info.get('failure')
    warnings = list(info.get('nvidia_smi_warnings') or [])
    mig_devices = info.get('mig_devices')
    smi_failure = None
    if failure and not gpus:
        smi_failure = {'reason': failure.get('reason') or 'unknown', 'hint': failure.get('hint'),
                       'rc': failure.get('rc'), 'pci_bus_id': failure.get('pci_bus_id'), 'stdout': '', 'stderr': ''}
    elif failure:
        # A later call of nvidia_smi_info failed (nvidia-smi -L, topo -m): the GPU records are sound.
        warnings.append('%s failed (%s): %s' % (failure.get('cmd'), failure.get('reason'), failure.get('hint')))
        mig_devices = None
    driver = info.get('driver') or {}
    return gpus, driver.get('version'), smi_failure, warnings, info.get('nvidia_smi_seconds'), mig_devices


def _profiles_known(mig_devices):
    return mig_devices is not None and all(device.get('profile') for device in mig_devices)


def read_mig_profiles(module, gpus):
    """MIG devices ``[{'gpu_index', 'profile'}]`` from ``nvidia-smi -L``, or None when it fails."""
    if not any(gpu.get('mig_mode_current') for gpu in gpus):
        return [], 0
    rc, stdout, _stderr = run_nvidia_smi(module, LIST_ARGS)
    if rc != 0:
        return None, 1
    try:
        listed = parse_gpu_list(stdout)
    except ValueError:
        return None, 1
    return [{'gpu_index': gpu['index'], 'profile': mig['profile']}
            for gpu in listed for mig in gpu['mig_devices']], 1


def read_nvlink(module, gpu_count):
    """Return (nvlink status list or None, error counters or None, nvlink_error or None, number of calls)."""
    return health_readers.read_nvlink(module.params['check_nvlink'], gpu_count,
                                      lambda args: run_nvidia_smi(module, args))


def _run_reader(module, binary_name, args):
    binary = module.get_bin_path(binary_name)
    if not binary:
        return None, '%s not found' % binary_name
    rc, stdout, stderr = run_nvidia_smi(module, args, binary=binary)
    if rc == TIMEOUT_RC:
        return None, '%s did not finish within %s seconds' % (binary_name, module.params['timeout'])
    if rc != 0:
        return None, '%s failed with rc %s: %s' % (binary_name, rc, _first_line(stderr or stdout))
    return stdout, None


def read_kernel_log(module, window):
    """Return (events, source, error)."""
    try:
        return health_readers.read_kernel_log(
            module.params['kernel_log_source'], module.params['kernel_log_path'], window,
            lambda binary, args: _run_reader(module, binary, args), _uptime)
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot read kernel_log_path %s: %s' % (module.params['kernel_log_path'], exc))


def _check_params(module):
    """(xid window in seconds or None, the catalog with the host's overrides)."""
    params = module.params
    for name in ('expected_gpu_count', 'temperature_margin_c', 'pcie_gen_min_utilization',
                 'nvlink_expected_active', 'ecc_aggregate_uncorrectable_max'):
        if params[name] is not None and params[name] < 0:
            module.fail_json(msg='%s must not be negative, got %s' % (name, params[name]))
    if params['max_smi_seconds'] is not None and params['max_smi_seconds'] <= 0:
        module.fail_json(msg='max_smi_seconds must be positive, got %s' % params['max_smi_seconds'])
    try:
        window = parse_duration(params['xid_window'])
    except ValueError as exc:
        module.fail_json(msg='xid_window: %s' % exc)
    try:
        catalog = Catalog(thresholds=params['thresholds'], checks=params['check_overrides'])
    except ValueError as exc:
        module.fail_json(msg='The health catalog overrides are wrong: %s' % exc)
    return window, catalog


def _load_state(module):
    path = module.params['state_path']
    return health_state.load(path) if path else health_state.empty()


def _save_state(module, state, now, gpus, nvlink_errors, events):
    """Write the next state; returns whether it was written."""
    path = module.params['state_path']
    if not path or module.check_mode:
        return False
    try:
        health_state.save(path, health_state.advance(state, gpus, nvlink_errors, now, events))
    except (IOError, OSError) as exc:
        module.warn('The health state could not be written to %s: %s' % (path, exc))
        return False
    return True


def judge_expectations(module, gpus, driver_version, mig_devices):
    """Findings against the expected_* options, and the nvidia-smi calls it took (0 or 1)."""
    params = module.params
    layout = params['expected_mig_layout'] or []
    calls = 0
    if layout and gpus and not _profiles_known(mig_devices):
        mig_devices, calls = read_mig_profiles(module, gpus)
    if layout and mig_devices is None:
        return [{'code': 'mig_layout_unknown', 'severity': 'warning', 'gpu': None,
                 'evidence': 'The MIG profiles could not be read (nvidia-smi -L failed), so the MIG layout was not '
                             'checked.',
                 'advice': 'Run nvidia-smi -L on the host; gather mig_uuids with nvidia_smi_info for gpu_info.'}], calls
    try:
        return expectation_findings(
            gpus, driver_version=driver_version, mig_devices=mig_devices,
            expected_model=params['expected_gpu_model'], expected_driver=params['expected_driver_branch'],
            expected_ecc=params['expected_ecc'], expected_mig_layout=layout if gpus else None), calls
    except ValueError as exc:
        module.fail_json(msg='expected_mig_layout: %s' % exc)


def main():
    argument_spec = dict(NVIDIA_SMI_ARGUMENT_SPEC)
    argument_spec.update(
        gpu_info=dict(type='dict'),
        expected_gpu_model=dict(type='str'),
        expected_driver_branch=dict(type='str'),
        expected_ecc=dict(type='str', choices=['enabled', 'disabled']),
        expected_mig_layout=dict(type='list', elements='dict', options=dict(
            gpus=dict(type='list', elements='str'),
            profiles=dict(type='dict', required=True),
        )),
        expected_gpu_count=dict(type='int'),
        thresholds=dict(type='dict', default={}),
        check_overrides=dict(type='dict', default={}),
        state_path=dict(type='path'),
        node_idle=dict(type='bool'),
        temperature_margin_c=dict(type='int'),
        max_smi_seconds=dict(type='float'),
        require_persistence=dict(type='bool', default=True),
        ignore_xids=dict(type='list', elements='int', default=[]),
        ecc_aggregate_uncorrectable_max=dict(type='int'),
        check_pcie=dict(type='bool', default=True),
        check_kernel_modules=dict(type='bool', default=True),
        pcie_gen_min_utilization=dict(type='int'),
        check_nvlink=dict(type='str', choices=['auto', 'always', 'never'], default='auto'),
        nvlink_expected_active=dict(type='int'),
        kernel_log_source=dict(type='str', choices=['auto', 'journal', 'dmesg', 'file', 'none'], default='auto'),
        kernel_log_path=dict(type='path'),
        xid_window=dict(type='str', default='24h'),
        fail_on=dict(type='str', choices=['critical', 'warning', 'info'], default='warning'),
        fail_when_unhealthy=dict(type='bool', default=False),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[('kernel_log_source', 'file', ['kernel_log_path'])],
        supports_check_mode=True,
    )
    params = module.params
    window, catalog = _check_params(module)
    state = _load_state(module)
    previous = state.get('readings') or None
    now = time.time()

    if params['gpu_info'] is not None:
        records, driver_version, smi_failure, smi_warnings, smi_seconds, mig_devices = gpus_from_info(
            module, params['gpu_info'])
        smi_calls = 0
    else:
        records, driver_version, smi_failure, smi_warnings, smi_seconds = read_gpus(module)
        mig_devices = [dict(device, gpu_index=gpu['index'], profile=None)
                       for gpu in records for device in gpu.get('mig_devices') or []]
        smi_calls = 1
    gpus = [health_view(gpu) for gpu in records]
    nvlink, nvlink_errors, nvlink_error, nvlink_calls = (
        (None, None, None, 0) if smi_failure else read_nvlink(module, len(gpus)))
    expected, list_calls = judge_expectations(module, records, driver_version, mig_devices)
    log_events, log_source, log_error = read_kernel_log(module, window)

    findings = evaluate(
        gpus, log_events,
        thresholds={
            'temperature_margin_c': params['temperature_margin_c'],
            'max_smi_seconds': params['max_smi_seconds'],
            'require_persistence': params['require_persistence'],
            'ignore_xids': params['ignore_xids'],
            'ecc_aggregate_uncorrectable_max': params['ecc_aggregate_uncorrectable_max'],
            'check_pcie': params['check_pcie'],
            'pcie_gen_min_utilization': params['pcie_gen_min_utilization'],
            'nvlink_expected_active': params['nvlink_expected_active'],
        },
        expected_count=params['expected_gpu_count'], nvlink=nvlink, smi_failure=smi_failure,
        smi_seconds=smi_seconds, kernel_log_error=log_error, smi_warnings=smi_warnings, nvlink_error=nvlink_error,
        catalog=catalog, nvlink_errors=nvlink_errors, previous=previous, now=now, node_idle=params['node_idle'])
    kernels = module_findings(installed_kernels(), platform.release()) if params['check_kernel_modules'] else []
    findings = sort_findings(findings + [catalog.annotate(finding) for finding in expected + kernels])
    findings, already, events = health_state.remember_events(findings, state, now)
    written = _save_state(module, state, now, gpus, nvlink_errors, events)

    summary = summarize(findings)
    healthy = is_healthy(findings, params['fail_on'])
    result = dict(
        changed=False,
        healthy=healthy,
        findings=findings,
        summary=summary,
        gpus=gpus,
        driver_version=driver_version,
        nvidia_smi_seconds=round(smi_seconds, 3) if smi_seconds is not None else None,
        nvidia_smi_calls=smi_calls + nvlink_calls + list_calls,
        kernel_log=dict(source=log_source, window_seconds=window, events=len(log_events)),
        already_reported=already,
        state=dict(path=params['state_path'], previous_run=(previous or {}).get('time'), written=written),
    )
    if params['fail_when_unhealthy'] and not healthy:
        module.fail_json(
            msg='GPU health check failed: %s critical, %s warning, %s info finding(s): %s'
                % (summary['critical'], summary['warning'], summary['info'],
                   ', '.join(finding['code'] for finding in findings)),
            **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
