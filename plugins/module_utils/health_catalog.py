# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health catalog: every check of the collection, as data.

One file holds what the health role, the ``nvidia_gpu_health`` module, the
fleet report and the node-local health check agree on:

``CHECKS``
    every finding code with its severity, the action an operator takes (a rung
    of ``ACTIONS``), the source of that judgement and what the check reads.
    Codes that end in ``*`` are families (``xid_*``: one code per Xid).
``THRESHOLDS``
    every number a check compares with, its default, per-GPU-model values
    (keys of ``MODELS``) and the source of the number.
``SOURCES``
    the references the two tables cite by key.

Operators override thresholds and the severity or action of a check per
inventory group (``health_thresholds``, ``health_check_overrides``);
``check_overrides`` refuses an unknown threshold, model or code by its name.

Standard library only and no import of the collection: the node-local health
check installs this file and runs without Ansible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

SEVERITIES = ('critical', 'warning', 'info')

# The action ladder, cheapest first: what a finding costs the node.
ACTIONS = ('none', 'watch', 'drain', 'reset', 'reboot', 'rma')
ACTION_MEANING = {
    'none': 'Nothing to do on the hardware: a configuration the converge (site.yml) fixes, or information.',
    'watch': 'Keep the node in service and track the finding; act when it recurs or grows.',
    'drain': 'Stop scheduling work on the node and let running jobs end; the cause may clear on its own.',
    'reset': 'Drain, stop the GPU\'s processes and reset the GPU (nvidia-smi -r) or reboot.',
    'reboot': 'Drain and reboot the node; a GPU reset is not enough.',
    'rma': 'Drain and replace the GPU or board (open a hardware case).',
}

SOURCES = {
    'nvidia-smi': 'The driver\'s own flag, limit or state, as nvidia-smi -q -x reports it: the collection adds no '
                  'number (NVIDIA, nvidia-smi manual page, docs.nvidia.com/deploy/nvidia-smi/).',
    'nvidia-xid': 'NVIDIA, "XID Errors", docs.nvidia.com/deploy/xid-errors/ (the catalogue\'s immediate and '
                  'investigatory actions per Xid).',
    'nvidia-memory': 'NVIDIA, "GPU Memory Error Management" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): '
                     'row remapping, contained and uncontained ECC errors, the remap availability histogram.',
    'nvidia-dynamic-page-retirement': 'NVIDIA, "Dynamic Page Retirement" (docs.nvidia.com/deploy/'
                                      'dynamic-page-retirement/), for GPUs before Ampere.',
    'nvidia-dcgm-health': 'NVIDIA DCGM health watches (github.com/NVIDIA/DCGM, modules/health/'
                          'DcgmHealthWatch.cpp, and dcgm_structs.h DCGM_LIMIT_*).',
    'nvidia-nvlink': 'Links per GPU of the model: NVIDIA\'s data sheets (A100 SXM4 12 NVLink3, H100 SXM5 and '
                     'H200 SXM 18 NVLink4, B200 and GB200 18 NVLink5) and the real nvidia-smi nvlink -s captures of '
                     'tests/unit/plugins/module_utils/fixtures/real/nvlink (A100 12, H100 18, H200 18 links).',
    'nvidia-fabric': 'NVIDIA, nvidia-smi -q "Fabric" section (state, status, clique, health with route_unhealthy) '
                     'on NVLink multi-node systems (GB200 NVL72), nvidia-smi manual page.',
    'azurehpc-health-checks': 'Azure HPC node health checks, github.com/Azure/azurehpc-health-checks (per-VM-size '
                              'configuration files).',
    'nvidia-dcgm-diag': 'NVIDIA DCGM diagnostics (dcgmi diag -r 1/2/3; docs.nvidia.com/datacenter/dcgm/latest/'
                        'user-guide/dcgm-diagnostics.html): each test passes, fails, warns or is skipped.',
    'nccl-tests': 'NVIDIA nccl-tests (github.com/NVIDIA/nccl-tests, src/util.cu): "Out of bounds values" counts '
                  'result elements that differ from the expected ones (data checking, -c).',
    'slurm': 'Slurm slurm.conf manual, HealthCheckProgram and scontrol node states.',
    'gpufleet': 'gpufleet policy: no published number exists, so the default is chosen to catch a fault '
                'without firing on a healthy node; set your own with health_thresholds.',
}

# GPU models with their own thresholds: key, pattern on the product name.
# More specific entries come first; a name takes the first that matches. The
# boundaries keep "L4" from matching "L40S" and "B200" from matching "GB200".
MODELS = (
    ('GB200', r'\bGB200\b'),
    ('B200', r'\bB200\b'),
    ('GH200', r'\bGH200\b'),
    ('H200', r'\bH200\b(?!\s+NVL)'),
    ('H100', r'\bH100\b(?!\s+(PCIe|NVL))'),
    ('A100', r'\bA100\b(?!.*PCIE)'),
    ('L40S', r'\bL40S\b'),
    ('L4', r'\bL4\b'),
)

# code: severity (the usual one; a few checks grade it from the reading),
# action (a rung of ACTIONS), source (a key of SOURCES), what (what it reads).
CHECKS = {
    # --- nvidia-smi itself
    'nvidia_smi_*': dict(severity='critical', action='drain', source='nvidia-smi',
                         what='nvidia-smi failed; the suffix is the reason (gpu_lost, timeout, version_mismatch ...). '
                              'Actions per reason: NVIDIA_SMI_ACTIONS.'),
    'nvidia_smi_warning': dict(severity='warning', action='watch', source='nvidia-smi',
                               what='nvidia-smi answered but printed a WARNING (a corrupted infoROM, for example).'),
    'nvidia_smi_slow': dict(severity='warning', action='watch', source='gpufleet',
                            what='nvidia-smi -q -x took longer than max_smi_seconds.'),
    'gpu_count_low': dict(severity='critical', action='reboot', source='gpufleet',
                          what='Fewer GPUs than health_expected_gpu_count answer nvidia-smi.'),
    # --- memory
    'ecc_uncorrectable_volatile': dict(severity='critical', action='reset', source='nvidia-memory',
                                       what='Uncorrectable ECC errors since the driver loaded.'),
    'ecc_uncorrectable_history': dict(severity='info', action='watch', source='nvidia-memory',
                                      what='Uncorrectable ECC errors over the GPU\'s life; warning above '
                                           'ecc_aggregate_uncorrectable_max.'),
    'ecc_sram_uncorrectable': dict(severity='critical', action='reset', source='nvidia-memory',
                                   what='Uncorrectable SRAM ECC errors since the driver loaded (R550+ reports SRAM '
                                        'and DRAM apart).'),
    'ecc_sram_threshold_exceeded': dict(severity='critical', action='rma', source='nvidia-smi',
                                        what='The driver\'s sram_threshold_exceeded flag: the GPU\'s SRAM error '
                                             'count passed the limit NVIDIA sets for it.'),
    'ecc_dram_correctable_high': dict(severity='warning', action='watch', source='azurehpc-health-checks',
                                      what='Correctable DRAM ECC errors (since the driver loaded or over the GPU\'s '
                                           'life) above ecc_dram_correctable_max.'),
    'ecc_sram_correctable_high': dict(severity='warning', action='watch', source='azurehpc-health-checks',
                                      what='Correctable SRAM ECC errors (since the driver loaded or over the GPU\'s '
                                           'life) above ecc_sram_correctable_max.'),
    'remapped_rows_failure': dict(severity='critical', action='rma', source='nvidia-memory',
                                  what='Row remapping failed.'),
    'remapped_rows_pending': dict(severity='warning', action='reset', source='nvidia-memory',
                                  what='A row remap waits for the next GPU reset.'),
    'remapped_rows_spares_low': dict(severity='warning', action='rma', source='nvidia-memory',
                                     what='Memory banks with no spare row left (remap availability histogram "None") '
                                          'above remap_banks_exhausted_max: the next error in such a bank cannot '
                                          'be remapped.'),
    'remapped_rows_uncorrectable_high': dict(severity='warning', action='rma', source='nvidia-dcgm-health',
                                             what='Rows remapped for uncorrectable errors above '
                                                  'remapped_rows_uncorrectable_max (DCGM warns from 512).'),
    'retired_pages_limit': dict(severity='critical', action='rma', source='nvidia-dcgm-health',
                                what='Retired pages (single- and double-bit) above retired_pages_max (DCGM fails from '
                                     '63).'),
    'retired_pages_pending': dict(severity='warning', action='reset', source='nvidia-dynamic-page-retirement',
                                  what='Pages wait for retirement at the next driver load.'),
    # --- recovery flags of the driver
    'gpu_recovery_action': dict(severity='critical', action='reset', source='nvidia-smi',
                                what='The driver names a recovery action; the action follows it (reset, reboot, '
                                     'drain).'),
    'gpu_drain_and_reset_recommended': dict(severity='critical', action='reset', source='nvidia-smi',
                                            what='The driver recommends draining the node and resetting the GPU.'),
    'gpu_reset_required': dict(severity='warning', action='reset', source='nvidia-smi',
                               what='The driver reports that the GPU needs a reset.'),
    # --- temperature and clocks
    'temperature_at_slowdown': dict(severity='critical', action='drain', source='nvidia-smi',
                                    what='The GPU reached its own slowdown temperature.'),
    'temperature_near_slowdown': dict(severity='warning', action='watch', source='gpufleet',
                                      what='The GPU is within temperature_margin_c of its slowdown temperature.'),
    'memory_temperature_at_limit': dict(severity='critical', action='drain', source='nvidia-smi',
                                        what='The HBM reached the GPU\'s own memory temperature limit '
                                             '(gpu_temp_max_mem_threshold).'),
    'memory_temperature_near_limit': dict(severity='warning', action='watch', source='gpufleet',
                                          what='The HBM is within memory_temperature_margin_c of its limit.'),
    'hw_thermal_slowdown': dict(severity='critical', action='drain', source='nvidia-smi',
                                what='HW thermal slowdown is active (clock event reason).'),
    'hw_power_brake_slowdown': dict(severity='critical', action='drain', source='nvidia-smi',
                                    what='HW power brake slowdown is active (clock event reason).'),
    'hw_slowdown': dict(severity='critical', action='drain', source='nvidia-smi',
                        what='HW slowdown is active and neither the thermal nor the power brake reason explains it.'),
    'sw_thermal_slowdown': dict(severity='warning', action='watch', source='nvidia-smi',
                                what='SW thermal slowdown is active.'),
    'hw_slowdown_recent': dict(severity='warning', action='watch', source='gpufleet',
                               what='HW slowdown (thermal or power brake) was active for more than '
                                    'hw_slowdown_seconds_max since the previous run (the driver\'s clock event '
                                    'counters, R535+), though it may not be now.'),
    # --- PCIe
    'pcie_link_width_degraded': dict(severity='warning', action='watch', source='nvidia-smi',
                                     what='The PCIe link is narrower than the slot and GPU allow.'),
    'pcie_link_gen_degraded': dict(severity='warning', action='watch', source='gpufleet',
                                   what='A busy GPU (pcie_gen_min_utilization) runs its link below its maximum '
                                        'generation.'),
    'pcie_replays_growing': dict(severity='warning', action='watch', source='nvidia-dcgm-health',
                                 what='The PCIe replay counter grew faster than pcie_replays_per_minute_max since '
                                      'the previous run.'),
    # --- NVLink and fabric
    'nvlink_down': dict(severity='critical', action='reset', source='nvidia-nvlink',
                        what='Fewer active NVLinks than nvlink_expected_active for the model (or, without a '
                             'number, than the best-connected GPU of the same model on the host).'),
    'nvlink_state_unavailable': dict(severity='warning', action='watch', source='nvidia-smi',
                                     what='nvidia-smi nvlink -s or -e failed or printed something not understood.'),
    'nvlink_crc_errors': dict(severity='warning', action='watch', source='nvidia-dcgm-health',
                              what='NVLink CRC errors on a link above nvlink_crc_errors_max; critical (reset) at '
                                   'nvlink_crc_errors_per_second_max or more.'),
    'nvlink_replay_errors': dict(severity='warning', action='watch', source='nvidia-dcgm-health',
                                 what='NVLink replay errors on a link above nvlink_replay_errors_max.'),
    'nvlink_recovery_errors': dict(severity='critical', action='reset', source='nvidia-dcgm-health',
                                   what='NVLink recovery errors on a link above nvlink_recovery_errors_max: the '
                                        'link went down and retrained.'),
    'fabric_not_ready': dict(severity='critical', action='drain', source='nvidia-fabric',
                             what='The GPU\'s NVLink fabric registration did not complete with success.'),
    'fabric_unhealthy': dict(severity='critical', action='reset', source='nvidia-fabric',
                             what='The fabric health summary is not healthy, or a route is unhealthy, or the fabric '
                                  'reports an incorrect configuration.'),
    # --- the kernel log
    'xid_*': dict(severity='critical', action='drain', source='nvidia-xid',
                  what='An Xid in the kernel log; severity and action per Xid (xid_catalog, XID_ACTIONS).'),
    'gpu_fell_off_bus': dict(severity='critical', action='reboot', source='nvidia-xid',
                             what='"GPU has fallen off the bus" without an Xid 79 line.'),
    'sxid_*': dict(severity='warning', action='watch', source='nvidia-xid',
                   what='An NVSwitch SXid; a fatal one is critical with action reboot.'),
    'kernel_log_unavailable': dict(severity='warning', action='none', source='gpufleet',
                                   what='The kernel log could not be read, so no Xid was checked.'),
    'kernel_without_nvidia_module': dict(severity='critical', action='none', source='gpufleet',
                                         what='An installed kernel has no NVIDIA module; critical when it is the '
                                              'one the next boot starts.'),
    # --- configuration against the inventory
    'persistence_mode_off': dict(severity='warning', action='none', source='gpufleet',
                                 what='Persistence mode is off (health_expected_persistence).'),
    'driver_branch_unexpected': dict(severity='warning', action='none', source='gpufleet',
                                     what='The driver is not the branch the inventory names.'),
    'gpu_model_unexpected': dict(severity='warning', action='none', source='gpufleet',
                                 what='A GPU is not the model the inventory names.'),
    'ecc_mode_unexpected': dict(severity='warning', action='none', source='gpufleet',
                                what='ECC is not in the mode the inventory names.'),
    'mig_mode_unexpected': dict(severity='warning', action='none', source='gpufleet',
                                what='MIG mode differs from the inventory\'s layout.'),
    'mig_layout_unexpected': dict(severity='warning', action='none', source='gpufleet',
                                  what='The MIG devices differ from the inventory\'s layout.'),
    'mig_layout_unknown': dict(severity='warning', action='none', source='gpufleet',
                               what='The MIG profiles could not be read.'),
    # --- the node's use
    'gpu_busy_while_idle': dict(severity='warning', action='drain', source='gpufleet',
                                what='The scheduler runs no job on the node, yet a GPU has processes or more '
                                     'memory in use than idle_gpu_memory_used_mib_max.'),
    # --- acceptance tests (load the GPUs; gpu_validation)
    'dcgm_diag_failed': dict(severity='critical', action='drain', source='nvidia-dcgm-diag',
                             what='A test of the DCGM diagnostic (level health_dcgm_diag_level) failed.'),
    'nvbandwidth_low': dict(severity='critical', action='drain', source='azurehpc-health-checks',
                            what='nvbandwidth\'s copy-engine bandwidth between the host and a GPU is below '
                                 'nvbandwidth_host_device_gbps_min, or between two GPUs below '
                                 'nvbandwidth_peer_gbps_min.'),
    'nccl_allreduce_low': dict(severity='critical', action='drain', source='azurehpc-health-checks',
                               what='NCCL all_reduce_perf over all the node\'s GPUs averages a bus bandwidth below '
                                    'nccl_allreduce_busbw_gbps_min.'),
    'nccl_allreduce_wrong_results': dict(severity='critical', action='drain', source='nccl-tests',
                                         what='all_reduce_perf found result elements that differ from the expected '
                                              'ones (Out of bounds values above 0): a GPU or link corrupts data.'),
    'acceptance_failed': dict(severity='critical', action='drain', source='gpufleet',
                              what='An acceptance test (dcgm_diag, nvbandwidth, nccl_allreduce) did not complete: it '
                                   'failed to start, crashed, printed no result or ran out of time.'),
    'acceptance_not_run': dict(severity='info', action='none', source='gpufleet',
                               what='An acceptance test that is turned on did not run: no GPU answers, its program is '
                                    'not installed, a GPU runs processes, or the catalog has no minimum for the '
                                    'node\'s GPUs. Never counted as a pass.'),
    # --- the fleet (the report compares nodes)
    'fleet_version_mismatch': dict(severity='warning', action='none', source='gpufleet',
                                   what='A GPU\'s VBIOS, InfoROM, GSP firmware or driver version differs from the '
                                        'one most GPUs of the same model run.'),
    'fleet_outlier_temperature': dict(severity='warning', action='watch', source='gpufleet',
                                      what='An idle GPU runs hotter than the fleet median of its model by more than '
                                           'fleet_outlier_temperature_c.'),
    'fleet_outlier_power_limit': dict(severity='warning', action='watch', source='gpufleet',
                                      what='A GPU\'s enforced power limit differs from the fleet median of its model '
                                           'by more than fleet_outlier_power_limit_percent.'),
    'fleet_outlier_clocks': dict(severity='warning', action='watch', source='gpufleet',
                                 what='A GPU\'s maximum SM clock differs from the fleet median of its model by more '
                                      'than fleet_outlier_clocks_percent.'),
}

# Actions of nvidia_smi_<reason> (nvidia_smi_failures reasons) that differ
# from the family's drain.
NVIDIA_SMI_ACTIONS = {
    'gpu_lost': 'reboot',
    'gpu_requires_reset': 'reset',
    'version_mismatch': 'reboot',
    'timeout': 'reboot',
    'inforom_corrupted': 'rma',
    'not_installed': 'none',
    'not_executable': 'none',
    'insufficient_permissions': 'none',
}

# Actions of Xid categories (xid_catalog) and of Xids that need more than
# their category says: a GPU off the bus or a GSP that stopped answering
# comes back only with a reboot.
XID_CATEGORY_ACTIONS = {
    'drain': 'drain',
    'reset': 'reset',
    'reset_when_convenient': 'reset',
    'trend': 'watch',
    'application': 'none',
    'investigate': 'watch',
}
XID_ACTIONS = {48: 'reset', 64: 'reboot', 74: 'reset', 79: 'reboot', 95: 'reset', 119: 'reboot', 120: 'reboot'}

# Threshold: default, per-model values (None: not judged for that model),
# unit, source key, what it limits. A ``models`` value is looked up by the
# GPU's MODELS key.
THRESHOLDS = {
    'temperature_margin_c': dict(
        default=5, unit='C', source='gpufleet',
        what='Headroom to the GPU\'s own slowdown temperature below which temperature_near_slowdown is raised.'),
    'memory_temperature_margin_c': dict(
        default=5, unit='C', source='gpufleet',
        what='Headroom of the HBM to the GPU\'s memory temperature limit below which memory_temperature_near_limit '
             'is raised.'),
    'max_smi_seconds': dict(
        default=10.0, unit='s', source='gpufleet', what='Longest nvidia-smi -q -x that is not nvidia_smi_slow.'),
    'ecc_aggregate_uncorrectable_max': dict(
        default=None, unit='errors', source='gpufleet',
        what='Lifetime uncorrectable ECC errors above which ecc_uncorrectable_history is a warning (None: info only).'),
    'ecc_dram_correctable_max': dict(
        default=20000000, unit='errors', source='azurehpc-health-checks',
        what='Correctable DRAM ECC errors (since the driver loaded, or over the GPU\'s life, whichever is larger) '
             'above which ecc_dram_correctable_high is raised (check_gpu_ecc 20000000 10000 on every ND and NC '
             'size).'),
    'ecc_sram_correctable_max': dict(
        default=10000, unit='errors', source='azurehpc-health-checks',
        what='Correctable SRAM ECC errors (since the driver loaded, or over the GPU\'s life) above which '
             'ecc_sram_correctable_high is raised (check_gpu_ecc\'s second argument).'),
    'remapped_rows_uncorrectable_max': dict(
        default=511, unit='rows', source='nvidia-dcgm-health',
        what='Rows remapped for uncorrectable errors that are tolerated (DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE 512 '
             'warns).'),
    'retired_pages_max': dict(
        default=62, unit='pages', source='nvidia-dcgm-health',
        what='Retired pages that are tolerated (DCGM_LIMIT_MAX_RETIRED_PAGES 63 fails).'),
    'remap_banks_exhausted_max': dict(
        default=0, unit='banks', source='nvidia-memory',
        what='Memory banks with no spare row left (histogram bucket None) that are tolerated.'),
    'hw_slowdown_seconds_max': dict(
        default=0, unit='s', source='nvidia-dcgm-health',
        what='Seconds of HW thermal or power brake slowdown between two runs above which hw_slowdown_recent is '
             'raised.'),
    'pcie_gen_min_utilization': dict(
        default=50, unit='%', source='gpufleet',
        what='GPU utilisation from which a link below its maximum generation is pcie_link_gen_degraded.'),
    'pcie_replays_per_minute_max': dict(
        default=None, unit='replays/min', source='nvidia-dcgm-health',
        what='PCIe replays per minute between two runs above which pcie_replays_growing is raised (None: DCGM\'s '
             'rule, ceil(per-lane rate x lanes) with 0.15, 0.3, 0.48, 0.96, 1.92, 3.84 per lane for generations 1 '
             'to 6: 31 a minute on a Gen5 x16 link).'),
    'nvlink_expected_active': dict(
        default=None, unit='links', source='nvidia-nvlink',
        models={'A100': 12, 'H100': 18, 'H200': 18, 'B200': 18, 'GB200': 18, 'L40S': None, 'L4': None},
        what='Active NVLinks every GPU of the model must have (None: the best-connected GPU of the same model on the '
             'host sets it).'),
    'nvlink_crc_errors_max': dict(
        default=0, unit='errors', source='nvidia-dcgm-health',
        what='NVLink CRC errors per link (growth since the previous run, else since the driver loaded) above which '
             'nvlink_crc_errors is raised as a warning (DCGM warns on any).'),
    'nvlink_crc_errors_per_second_max': dict(
        default=100, unit='errors/s', source='nvidia-dcgm-health',
        what='NVLink CRC errors per second between two runs from which nvlink_crc_errors is critical '
             '(DCGM_LIMIT_MAX_NVLINK_CRC_ERROR: "CRC errors only matter at rates of 100+ per second").'),
    'nvlink_replay_errors_max': dict(
        default=0, unit='errors', source='nvidia-dcgm-health',
        what='NVLink replay errors per link (growth since the previous run, else since the driver loaded) that '
             'are tolerated (DCGM fails on any).'),
    'nvlink_recovery_errors_max': dict(
        default=0, unit='errors', source='nvidia-dcgm-health',
        what='NVLink recovery errors per link that are tolerated (DCGM fails on any).'),
    'nvbandwidth_host_device_gbps_min': dict(
        default=None, unit='GB/s', source='azurehpc-health-checks',
        models={'A100': 21, 'H100': 48, 'H200': 48, 'GB200': 48},
        what='Copy-engine bandwidth every GPU must reach from and to the host (nvbandwidth host_to_device_memcpy_ce '
             'and device_to_host_memcpy_ce; check_gpu_bw\'s first argument on the ND and NC sizes). None: '
             'nvbandwidth is not run for the model.'),
    'nvbandwidth_peer_gbps_min': dict(
        default=None, unit='GB/s', source='azurehpc-health-checks',
        models={'A100': 235, 'H100': 335, 'H200': 335, 'GB200': 335},
        what='Copy-engine read bandwidth every pair of GPUs must reach (nvbandwidth device_to_device_memcpy_read_ce; '
             'check_gpu_bw\'s second argument: 235 on ND A100 v4, 238 on its 80 GB size). None: the pairs are '
             'not measured.'),
    'nccl_allreduce_busbw_gbps_min': dict(
        default=None, unit='GB/s', source='azurehpc-health-checks',
        models={'A100': 228, 'H100': 460, 'H200': 431, 'GB200': 432},
        what='Average bus bandwidth of NCCL all_reduce_perf over all the node\'s GPUs at one message size '
             '(check_nccl_allreduce on ND A100 v4, ND H100 v5, ND H200 v5, ND GB200 v6). Measured on 8 GPUs (GB200: '
             '4); on another count only a value from health_thresholds is used. None: the test is not run.'),
    'idle_gpu_memory_used_mib_max': dict(
        default=1024, unit='MiB', source='gpufleet',
        what='GPU memory in use on a node without a job above which gpu_busy_while_idle is raised.'),
    'fleet_min_gpus': dict(
        default=4, unit='GPUs', source='gpufleet',
        what='GPUs of one model the fleet checks need before they call one an outlier.'),
    'fleet_outlier_temperature_c': dict(
        default=10, unit='C', source='gpufleet',
        what='Degrees an idle GPU may run above the median of its model in the fleet.'),
    'fleet_outlier_power_limit_percent': dict(
        default=5, unit='%', source='gpufleet',
        what='Share by which a GPU\'s enforced power limit may differ from the median of its model.'),
    'fleet_outlier_clocks_percent': dict(
        default=5, unit='%', source='gpufleet',
        what='Share by which a GPU\'s maximum SM clock may differ from the median of its model.'),
}

_MODEL_PATTERNS = tuple((key, re.compile(pattern, re.I)) for key, pattern in MODELS)
_FAMILY = re.compile(r'^(xid|sxid)_[0-9]+$|^nvidia_smi_[a-z_]+$')


def model_key(name):
    """The ``MODELS`` key of a GPU product name (``NVIDIA H100 80GB HBM3`` -> ``H100``), or ``None``."""
    for key, pattern in _MODEL_PATTERNS:
        if name and pattern.search(name):
            return key
    return None


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_overrides(thresholds=None, checks=None):
    """Problems with an operator's overrides, each naming what is wrong; ``[]`` when they are sound.

    ``thresholds``: ``{name: value}`` or ``{name: {'default': value, MODEL: value}}``.
    ``checks``: ``{code: {'severity': ..., 'action': ...}}``; codes of a family
    (``xid_13``, ``sxid_12028``, ``nvidia_smi_timeout``) are accepted.
    """
    problems = []
    models = set(key for key, _pattern in MODELS)
    if thresholds is not None and not isinstance(thresholds, dict):
        return ['health_thresholds must be a mapping of threshold names to values']
    for name in sorted(thresholds or {}):
        value = thresholds[name]
        if name not in THRESHOLDS:
            problems.append('health_thresholds: unknown threshold %r (known: %s)' % (name, ', '.join(sorted(THRESHOLDS))))
            continue
        values = value if isinstance(value, dict) else {'default': value}
        for model in sorted(values, key=str):
            if model != 'default' and model not in models:
                problems.append('health_thresholds.%s: unknown GPU model %r (known: default, %s)'
                                % (name, model, ', '.join(key for key, _pattern in MODELS)))
            elif values[model] is not None and (not _is_number(values[model]) or values[model] < 0):
                problems.append('health_thresholds.%s%s: must be a number of %s, 0 or more (or null), got %r'
                                % (name, '' if model == 'default' else '.' + model, THRESHOLDS[name]['unit'],
                                   values[model]))
    if checks is not None and not isinstance(checks, dict):
        return problems + ['health_check_overrides must be a mapping of finding codes to {severity, action}']
    for code in sorted(checks or {}):
        override = checks[code]
        if code not in CHECKS and not _FAMILY.match(code):
            problems.append('health_check_overrides: unknown finding code %r (see the catalog in the health role\'s '
                            'README)' % code)
            continue
        if not isinstance(override, dict) or not override:
            problems.append('health_check_overrides.%s: must be a mapping with severity and/or action' % code)
            continue
        for key in sorted(override):
            if key == 'severity' and override[key] not in SEVERITIES:
                problems.append('health_check_overrides.%s.severity: must be one of %s, got %r'
                                % (code, ', '.join(SEVERITIES), override[key]))
            elif key == 'action' and override[key] not in ACTIONS:
                problems.append('health_check_overrides.%s.action: must be one of %s, got %r'
                                % (code, ', '.join(ACTIONS), override[key]))
            elif key not in ('severity', 'action'):
                problems.append('health_check_overrides.%s: unknown key %r (severity, action)' % (code, key))
    return problems


class Catalog(object):
    """The catalog with an operator's overrides applied; raises ``ValueError`` listing every problem."""

    def __init__(self, thresholds=None, checks=None):
        problems = check_overrides(thresholds, checks)
        if problems:
            raise ValueError('; '.join(problems))
        self._thresholds = dict((name, value if isinstance(value, dict) else {'default': value})
                                for name, value in (thresholds or {}).items())
        self._checks = dict(checks or {})

    def with_values(self, values):
        """A copy whose thresholds ``values`` (``{name: value}``) apply to every GPU model."""
        merged = dict(self._thresholds)
        for name, value in values.items():
            merged[name] = {'default': value}
        copy = Catalog(checks=self._checks)
        copy._thresholds = merged
        return copy

    def threshold(self, name, gpu_name=None):
        """The value of threshold ``name`` for a GPU of product name ``gpu_name`` (host-wide: ``None``)."""
        entry = THRESHOLDS[name]
        override = self._thresholds.get(name, {})
        model = model_key(gpu_name)
        if model is not None and model in override:
            return override[model]
        if model is not None and model in entry.get('models', {}) and 'default' not in override:
            return entry['models'][model]
        return override.get('default', entry['default'])

    def threshold_source(self, name, gpu_name=None):
        """Where the value ``threshold`` returns comes from: a SOURCES key, or ``inventory``."""
        override = self._thresholds.get(name, {})
        model = model_key(gpu_name)
        if (model is not None and model in override) or 'default' in override:
            return 'inventory'
        return THRESHOLDS[name]['source']

    def entry(self, code):
        """``(severity, action, source)`` of a code, families and overrides resolved; unknown codes
        fall back to a warning to watch, so a new finding is never lost."""
        if code in CHECKS:
            base = CHECKS[code]
        else:
            family = code.split('_')[0] + '_*' if not code.startswith('nvidia_smi_') else 'nvidia_smi_*'
            base = CHECKS.get(family, dict(severity='warning', action='watch', source='gpufleet'))
        action = base['action']
        if code.startswith('nvidia_smi_') and code[len('nvidia_smi_'):] in NVIDIA_SMI_ACTIONS:
            action = NVIDIA_SMI_ACTIONS[code[len('nvidia_smi_'):]]
        return base['severity'], action, base['source']

    def annotate(self, finding):
        """Give a finding its ``action`` and ``source`` (kept when the check set them), then apply the
        operator's override of severity and action; returns the finding."""
        _severity, action, source = self.entry(finding['code'])
        finding.setdefault('action', action)
        finding.setdefault('source', source)
        override = self._checks.get(finding['code'], {})
        if 'severity' in override:
            finding['severity'] = override['severity']
        if 'action' in override:
            finding['action'] = override['action']
        if override:
            finding['source'] = 'inventory'
        return finding
