# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The table of bad inputs: every role and every module of the collection,
each case a wrong value that must be refused before any change, with a
message that names the variable (or parameter).

A case is (id, kind, target, inputs, names) and optional flags:
  kind     'role' (target: role, or role:entry point) or 'module' (target: FQCN)
  inputs   role variables or module parameters; "@NAME@" strings are replaced
           by the fixtures of test_bad_inputs.py (fake sysfs, repository, files)
  names    what the message must name
  facts    the role reads the host's facts first (semantic checks); else the
           play gathers none and the role must fail at its first checks
  huge     the value is huge: the message must stay short (a bounded excerpt)
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

HUGE = 'x' * 100000
HEX40 = 'EB693B3035CD5710E231E123A4B469963BF863CC'
GPU_INFO = {'gpus': [], 'failure': None, 'driver': {}}


def role(case_id, target, inputs, names, **flags):
    return dict(flags, id=case_id, kind='role', target=target, inputs=inputs, names=names)


def module(case_id, target, inputs, names, **flags):
    return dict(flags, id=case_id, kind='module', target='gpufleet.nvidia.' + target, inputs=inputs, names=names)


# GPU hosts for the driver's semantic checks: fake sysfs trees, a flat apt
# repository (file://) whose index offers 580.95.05, 580.82.07, 570.195.03.
DRIVER_ON_H100 = {'nvidia_driver_pci_devices_path': '@SYS_H100@', 'nvidia_driver_repo_url': '@CUDA_REPO@'}

CASES = [
    # --- nvidia_driver: types, choices, forms (argument spec and check_inputs) ----------------
    role('driver-flavour-unknown', 'nvidia_driver', {'nvidia_driver_flavour': 'nouveau'}, 'nvidia_driver_flavour'),
    role('driver-hold-not-bool', 'nvidia_driver', {'nvidia_driver_hold_packages': 'maybe'}, 'nvidia_driver_hold_packages'),
    role('driver-gpu-count-word', 'nvidia_driver', {'nvidia_driver_expected_gpu_count': 'eight'},
         'nvidia_driver_expected_gpu_count'),
    role('driver-reboot-policy', 'nvidia_driver', {'nvidia_driver_reboot_policy': 'always'}, 'nvidia_driver_reboot_policy'),
    role('driver-options-list', 'nvidia_driver', {'nvidia_driver_module_options': ['NVreg_DeviceFileMode=0660']},
         'nvidia_driver_module_options'),
    role('driver-options-flat', 'nvidia_driver', {'nvidia_driver_module_options': {'nvidia': 'NVreg_DeviceFileMode=0660'}},
         'nvidia_driver_module_options'),
    role('driver-hold-kernel-not-bool', 'nvidia_driver', {'nvidia_driver_hold_kernel': 'sometimes'},
         'nvidia_driver_hold_kernel'),
    role('driver-free-space-relative-path', 'nvidia_driver', {'nvidia_driver_min_free_mib': {'boot': 200}},
         'nvidia_driver_min_free_mib'),
    role('driver-free-space-not-a-number', 'nvidia_driver', {'nvidia_driver_min_free_mib': {'/boot': '200MB'}},
         'nvidia_driver_min_free_mib'),
    role('driver-free-space-a-list', 'nvidia_driver', {'nvidia_driver_min_free_mib': ['/boot']},
         'nvidia_driver_min_free_mib'),
    role('driver-branch-58x', 'nvidia_driver', {'nvidia_driver_branch': '58x'}, 'nvidia_driver_branch'),
    role('driver-branch-r580', 'nvidia_driver', {'nvidia_driver_branch': 'r580'}, 'nvidia_driver_branch'),
    role('driver-branch-null', 'nvidia_driver', {'nvidia_driver_branch': None}, 'nvidia_driver_branch'),
    role('driver-branch-huge', 'nvidia_driver', {'nvidia_driver_branch': HUGE}, 'nvidia_driver_branch', huge=True),
    role('driver-version-other-branch', 'nvidia_driver', {'nvidia_driver_version': '570.195.03'}, 'nvidia_driver_version'),
    role('driver-version-four-parts', 'nvidia_driver', {'nvidia_driver_version': '580.95.05.1'}, 'nvidia_driver_version'),
    role('driver-fingerprint-short', 'nvidia_driver', {'nvidia_driver_repo_key_fingerprint': 'A4B469963BF863CC'},
         'nvidia_driver_repo_key_fingerprint'),
    role('driver-fingerprint-41', 'nvidia_driver', {'nvidia_driver_repo_key_fingerprint': HEX40 + '0'},
         'nvidia_driver_repo_key_fingerprint'),
    role('driver-fingerprint-not-hex', 'nvidia_driver', {'nvidia_driver_repo_key_fingerprint': 'X' + HEX40[1:]},
         'nvidia_driver_repo_key_fingerprint'),
    role('driver-repo-ftp', 'nvidia_driver', {'nvidia_driver_repo_url': 'ftp://mirror.example.com/cuda'},
         'nvidia_driver_repo_url'),
    role('driver-device-mode-symbolic', 'nvidia_driver',
         {'nvidia_driver_device_file_hardening': True, 'nvidia_driver_device_file_mode': 'rw-rw----'},
         'nvidia_driver_device_file_mode'),
    role('driver-reboot-timeout-negative', 'nvidia_driver', {'nvidia_driver_reboot_timeout': -5},
         'nvidia_driver_reboot_timeout'),
    role('driver-mok-key-without-cert', 'nvidia_driver',
         {'nvidia_driver_secure_boot_mok_key': '/var/lib/shim-signed/mok/MOK.priv'}, 'nvidia_driver_secure_boot_mok_cert'),
    role('driver-stop-services-string', 'nvidia_driver', {'nvidia_driver_upgrade_stop_services': 'nvidia-dcgm'},
         'nvidia_driver_upgrade_stop_services'),
    role('driver-floors-number', 'nvidia_driver', {'nvidia_driver_security_floors': {'580': 580.159}},
         'nvidia_driver_security_floors'),
    role('driver-floors-other-branch', 'nvidia_driver', {'nvidia_driver_security_floors': {'580': '570.211.01'}},
         'nvidia_driver_security_floors'),
    # --- nvidia_driver: well-formed but impossible (the GPUs, the repository, the floors) -----
    role('driver-open-on-volta', 'nvidia_driver', dict(DRIVER_ON_H100, nvidia_driver_pci_devices_path='@SYS_V100@'),
         'nvidia_driver_flavour', facts=True),
    role('driver-proprietary-on-blackwell', 'nvidia_driver',
         dict(DRIVER_ON_H100, nvidia_driver_pci_devices_path='@SYS_B200@', nvidia_driver_flavour='proprietary'),
         'nvidia_driver_flavour', facts=True),
    role('driver-open-before-515', 'nvidia_driver', dict(DRIVER_ON_H100, nvidia_driver_branch='510'),
         'nvidia_driver_flavour', facts=True),
    role('driver-branch-not-in-repository', 'nvidia_driver', dict(DRIVER_ON_H100, nvidia_driver_branch='590'),
         'nvidia_driver_branch', facts=True),
    role('driver-version-not-in-repository', 'nvidia_driver', dict(DRIVER_ON_H100, nvidia_driver_version='580.95.06'),
         'nvidia_driver_version', facts=True),
    role('driver-below-security-floor', 'nvidia_driver',
         dict(DRIVER_ON_H100, nvidia_driver_version='580.95.05', nvidia_driver_enforce_security_floor=True),
         'nvidia_driver_version', facts=True),
    role('driver-repository-below-floor', 'nvidia_driver',
         dict(DRIVER_ON_H100, nvidia_driver_enforce_security_floor=True), 'nvidia_driver_branch', facts=True),
    role('driver-mok-key-readable', 'nvidia_driver',
         dict(DRIVER_ON_H100, nvidia_driver_secure_boot_mok_key='@MOK_KEY_0644@',
              nvidia_driver_secure_boot_mok_cert='@MOK_CERT@'), 'nvidia_driver_secure_boot_mok_key', facts=True),
    role('driver-mok-key-missing', 'nvidia_driver',
         dict(DRIVER_ON_H100, nvidia_driver_secure_boot_mok_key='@MISSING@/MOK.priv',
              nvidia_driver_secure_boot_mok_cert='@MOK_CERT@'), 'nvidia_driver_secure_boot_mok_key', facts=True),
    # --- persistence_mode ---------------------------------------------------------------------
    role('persistence-verbose-word', 'persistence_mode', {'persistence_mode_verbose': 'loud'}, 'persistence_mode_verbose'),
    role('persistence-retries-zero', 'persistence_mode', {'persistence_mode_verify_retries': 0},
         'persistence_mode_verify_retries'),
    role('persistence-user-spaces', 'persistence_mode', {'persistence_mode_user': 'GPU Daemon'}, 'persistence_mode_user'),
    role('persistence-user-null', 'persistence_mode', {'persistence_mode_user': None}, 'persistence_mode_user'),
    role('persistence-service-name', 'persistence_mode', {'persistence_mode_service': 'nvidia persistenced'},
         'persistence_mode_service'),
    # --- cuda_toolkit -------------------------------------------------------------------------
    role('cuda-versions-numbers', 'cuda_toolkit', {'cuda_toolkit_versions': [12.8]}, 'cuda_toolkit_versions'),
    role('cuda-versions-string', 'cuda_toolkit', {'cuda_toolkit_versions': '12.8'}, 'cuda_toolkit_versions'),
    role('cuda-versions-major-only', 'cuda_toolkit', {'cuda_toolkit_versions': ['12']}, 'cuda_toolkit_versions'),
    role('cuda-default-not-listed', 'cuda_toolkit',
         {'cuda_toolkit_versions': ['12.8'], 'cuda_toolkit_default_version': '13.0'}, 'cuda_toolkit_default_version'),
    role('cuda-fingerprint-short', 'cuda_toolkit', {'cuda_toolkit_repo_key_fingerprint': '3BF863CC'},
         'cuda_toolkit_repo_key_fingerprint'),
    role('cuda-base-url-scheme', 'cuda_toolkit', {'cuda_toolkit_repo_base_url': 'developer.download.nvidia.com/compute'},
         'cuda_toolkit_repo_base_url'),
    # --- cudnn (its first checks need the platform facts) -----------------------------------
    role('cudnn-major-8', 'cudnn', {'cudnn_major': '8'}, 'cudnn_major', facts=True),
    role('cudnn-version-other-major', 'cudnn', {'cudnn_version': '8.9.7.29'}, 'cudnn_version', facts=True),
    role('cudnn-lock-timeout-negative', 'cudnn', {'cudnn_package_lock_timeout': -1}, 'cudnn_package_lock_timeout',
         facts=True),
    # --- container_toolkit --------------------------------------------------------------------
    role('toolkit-version-two-parts', 'container_toolkit', {'container_toolkit_version': '1.18'}, 'container_toolkit_version'),
    role('toolkit-version-vulnerable', 'container_toolkit', {'container_toolkit_version': '1.17.3'}, 'CVE-2025-23359'),
    role('toolkit-fingerprint-short', 'container_toolkit', {'container_toolkit_repo_key_fingerprint': 'F796ECB0'},
         'container_toolkit_repo_key_fingerprint'),
    role('toolkit-base-url-no-scheme', 'container_toolkit', {'container_toolkit_repo_base_url': 'nvidia.github.io/x'},
         'container_toolkit_repo_base_url'),
    role('toolkit-runtime-unknown', 'container_toolkit', {'container_toolkit_runtimes': ['podman']},
         'container_toolkit_runtimes'),
    role('toolkit-runtimes-string', 'container_toolkit', {'container_toolkit_runtimes': 'docker'},
         'container_toolkit_runtimes'),
    role('toolkit-ldconfig-in-container', 'container_toolkit',
         {'container_toolkit_config_settings': {'nvidia-container-cli.ldconfig': '/sbin/ldconfig'}},
         'container_toolkit_config_settings'),
    role('toolkit-version-not-in-repository', 'container_toolkit',
         {'container_toolkit_version': '1.18.1', 'container_toolkit_repo_base_url': '@CTK_REPO_BASE@'},
         'container_toolkit_version', facts=True),
    # --- fabric_manager -----------------------------------------------------------------------
    role('fabricmanager-version-branch-only', 'fabric_manager', {'fabric_manager_version': '580'}, 'fabric_manager_version'),
    role('fabricmanager-pci-id-form', 'fabric_manager', {'fabric_manager_nvswitch_pci_ids': ['22a3']},
         'fabric_manager_nvswitch_pci_ids'),
    role('fabricmanager-pci-ids-string', 'fabric_manager', {'fabric_manager_nvswitch_pci_ids': '10de:22a3'},
         'fabric_manager_nvswitch_pci_ids'),
    role('fabricmanager-timeout-negative', 'fabric_manager', {'fabric_manager_verify_timeout': -1},
         'fabric_manager_verify_timeout'),
    # --- mig ------------------------------------------------------------------------------------
    role('mig-layouts-empty', 'mig', {'mig_layouts': []}, 'mig_layouts'),
    role('mig-layouts-string', 'mig', {'mig_layouts': '3g.40gb'}, 'mig_layouts'),
    role('mig-reboot-timeout-zero', 'mig', {'mig_layouts': [{'profiles': {'3g.40gb': 2}}], 'mig_reboot_timeout': 0},
         'mig_reboot_timeout'),
    role('mig-config-path-relative', 'mig', {'mig_layouts': [{'profiles': {'3g.40gb': 2}}],
                                             'mig_config_path': 'etc/gpufleet/mig.json'}, 'mig_config_path'),
    role('mig-profile-name', 'mig', {'mig_layouts': [{'gpus': [0], 'profiles': {'three-slices': 2}}]}, 'mig_layouts'),
    role('mig-services-string', 'mig', {'mig_layouts': [{'profiles': {'3g.40gb': 2}}],
                                        'mig_before_services': 'docker.service'}, 'mig_before_services'),
    # --- dcgm ---------------------------------------------------------------------------------
    role('dcgm-version-3', 'dcgm', {'dcgm_version': '3.3.9'}, 'dcgm_version'),
    role('dcgm-port-zero', 'dcgm', {'dcgm_port': 0}, 'dcgm_port'),
    role('dcgm-port-null', 'dcgm', {'dcgm_port': None}, 'dcgm_port'),
    role('dcgm-listen-everywhere', 'dcgm', {'dcgm_unix_socket': '', 'dcgm_listen_address': 'ALL'}, 'dcgm_listen_address'),
    role('dcgm-socket-relative', 'dcgm', {'dcgm_unix_socket': 'run/nvidia-dcgm/engine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-socket-group', 'dcgm', {'dcgm_unix_socket_group': 'GPU users'}, 'dcgm_unix_socket_group'),
    role('dcgm-diag-level-5', 'dcgm', {'dcgm_diag_level': 5}, 'dcgm_diag_level'),
    role('dcgm-extra-packages-string', 'dcgm', {'dcgm_extra_packages': 'datacenter-gpu-manager-4-devel'},
         'dcgm_extra_packages'),
    # --- dcgm_exporter ----------------------------------------------------------------------------
    role('exporter-port-70000', 'dcgm_exporter', {'dcgm_exporter_port': 70000}, 'dcgm_exporter_port'),
    role('exporter-listen-everywhere-plain', 'dcgm_exporter', {'dcgm_exporter_listen_address': ''},
         'dcgm_exporter_listen_address'),
    role('exporter-listen-huge', 'dcgm_exporter', {'dcgm_exporter_listen_address': 'a b ' * 25000},
         'dcgm_exporter_listen_address', huge=True),
    role('exporter-field-unknown', 'dcgm_exporter',
         {'dcgm_exporter_extra_counters': [{'name': 'DCGM_FI_DEV_GPU_UTILISATION', 'type': 'gauge', 'help': 'x'}]},
         'dcgm_exporter_extra_counters'),
    role('exporter-counter-type', 'dcgm_exporter',
         {'dcgm_exporter_counters': [{'name': 'DCGM_FI_DEV_GPU_UTIL', 'type': 'enum', 'help': 'x'}]},
         'dcgm_exporter_counters'),
    role('exporter-plain-password', 'dcgm_exporter',
         {'dcgm_exporter_web_config': {'basic_auth_users': {'prometheus': 'hunter2'}}}, 'dcgm_exporter_web_config'),
    role('exporter-user-spaces', 'dcgm_exporter', {'dcgm_exporter_user': 'DCGM Exporter'}, 'dcgm_exporter_user'),
    role('exporter-tls-key-readable', 'dcgm_exporter',
         {'dcgm_exporter_web_config': {'tls_server_config': {'cert_file': '@TLS_CERT@', 'key_file': '@TLS_KEY_0644@'}}},
         'dcgm_exporter_web_config', facts=True),
    # --- health -------------------------------------------------------------------------------
    role('health-gpu-count-negative', 'health', {'health_expected_gpu_count': -1}, 'health_expected_gpu_count'),
    role('health-xid-window', 'health', {'health_xid_window': 'forever'}, 'health_xid_window'),
    role('health-mig-layout-flat', 'health', {'health_expected_mig_layout': [{'gpus': [0]}]}, 'health_expected_mig_layout'),
    role('health-drain-without-hook', 'health', {'health_drain_unhealthy': True}, 'health_drain_hook'),
    role('health-timeout-zero', 'health', {'health_nvidia_smi_timeout': 0}, 'health_nvidia_smi_timeout'),
    # The health catalog refuses names it does not know, each named in the message.
    role('health-threshold-unknown', 'health', {'health_thresholds': {'nvlink_crc_error_max': 5}},
         "health_thresholds: unknown threshold 'nvlink_crc_error_max'"),
    role('health-threshold-model-unknown', 'health', {'health_thresholds': {'nvlink_expected_active': {'H300': 18}}},
         "health_thresholds.nvlink_expected_active: unknown GPU model 'H300'"),
    role('health-threshold-word', 'health', {'health_thresholds': {'temperature_margin_c': 'five'}},
         'health_thresholds.temperature_margin_c: must be a number'),
    role('health-override-code-unknown', 'health', {'health_check_overrides': {'persistance_mode_off': {'severity': 'info'}}},
         "health_check_overrides: unknown finding code 'persistance_mode_off'"),
    role('health-override-action-unknown', 'health', {'health_check_overrides': {'xid_13': {'action': 'ignore'}}},
         'health_check_overrides.xid_13.action: must be one of none, watch, drain, reset, reboot, rma'),
    role('health-state-path-relative', 'health', {'health_state_path': 'state.json'}, 'health_state_path'),
    role('health-idle-without-slurm', 'health', {'health_node_idle_from': 'drain_hook'}, 'health_node_idle_from'),
    role('health-diag-level-without-budget', 'health', {'health_dcgm_diag_level': 3, 'health_check_timeout': 600},
         'health_dcgm_diag_level'),
    role('health-brake-over-100', 'health', {'health_drain_max_share': 150}, 'health_drain_max_share'),
    role('health-allreduce-size-unit', 'health', {'health_nccl_allreduce_size': '16GB'}, 'health_nccl_allreduce_size'),
    role('health-nvbandwidth-path-relative', 'health', {'health_nvbandwidth_path': 'bin/nvbandwidth'},
         'health_nvbandwidth_path'),
    role('health-allreduce-minimum-word', 'health',
         {'health_thresholds': {'nccl_allreduce_busbw_gbps_min': {'H100': 'fast'}}},
         'health_thresholds.nccl_allreduce_busbw_gbps_min.H100: must be a number of GB/s'),
    role('health-node-local-interval', 'health', {'health_node_local_interval': 'hourly'}, 'health_node_local_interval'),
    # --- slurm_gres and drain (present when their roles are) -------------------------------------
    role('slurm-node-name', 'slurm_gres', {'slurm_gres_node_name': 'gpu 01'}, 'slurm_gres_node_name'),
    role('slurm-type-map-values', 'slurm_gres', {'slurm_gres_type_map': {'NVIDIA H100': 'h100 nvl'}}, 'slurm_gres_type_map'),
    role('drain-hook-unknown', 'drain:drain', {'drain_hook': 'pbs'}, 'drain_hook'),
    role('drain-slurm-without-controller', 'drain:drain', {'drain_hook': 'slurm'}, 'drain_slurm_controller'),
    # --- modules (argument spec and the modules' own checks) -------------------------------------
    module('check-inputs-no-rules', 'check_inputs', {}, 'rules'),
    module('check-inputs-rule-without-msg', 'check_inputs', {'rules': [{'var': 'x', 'that': 'true'}]}, 'msg'),
    module('config-file-no-dest', 'config_file', {'content': 'x'}, 'dest'),
    module('config-file-state', 'config_file', {'dest': '/tmp/gpufleet-bad-input', 'content': 'x', 'state': 'gone'},
           'state'),
    module('config-file-compare-without-record', 'config_file',
           {'dest': '/tmp/gpufleet-bad-input', 'content': 'x', 'compare_only': True}, 'known'),
    module('config-file-compare-only-word', 'config_file',
           {'dest': '/tmp/gpufleet-bad-input', 'content': 'x', 'compare_only': 'perhaps', 'known': {}}, 'compare_only'),
    module('plan-changes-list', 'plan', {'role': 'nvidia_driver', 'changes': ['packages']}, 'changes'),
    module('plan-without-role', 'plan', {'changes': {'packages': ['a']}}, 'role'),
    module('health-report-no-hosts', 'gpu_health_report', {'hosts': [], 'dest': '/tmp/gpufleet-bad-input'}, 'hosts'),
    module('validation-no-gpu-info', 'gpu_validation', {}, 'gpu_info'),
    module('validation-timeout', 'gpu_validation', {'gpu_info': GPU_INFO, 'timeout': -1}, 'timeout'),
    module('validation-diag-level', 'gpu_validation', {'gpu_info': GPU_INFO, 'dcgm_diag_level': 7}, 'dcgm_diag_level'),
    module('validation-allreduce-size', 'gpu_validation', {'gpu_info': GPU_INFO, 'nccl_allreduce_size': 'big'},
           'nccl_allreduce_size'),
    module('validation-threshold-unknown', 'gpu_validation',
           {'gpu_info': GPU_INFO, 'thresholds': {'nccl_busbw_min': 400}}, "unknown threshold 'nccl_busbw_min'"),
    module('state-info-packages-mapping', 'host_state_info', {'packages': {'nvidia': '*'}}, 'packages'),
    module('state-info-max-bytes-word', 'host_state_info', {'max_content_bytes': 'plenty'}, 'max_content_bytes'),
    module('health-fail-on', 'nvidia_gpu_health', {'gpu_info': GPU_INFO, 'fail_on': 'sometimes'}, 'fail_on'),
    module('health-log-file-without-path', 'nvidia_gpu_health', {'gpu_info': GPU_INFO, 'kernel_log_source': 'file'},
           'kernel_log_path'),
    module('mig-no-layouts', 'nvidia_mig', {}, 'layouts'),
    module('mig-entry-without-profiles', 'nvidia_mig', {'layouts': [{'gpus': ['0']}]}, 'profiles'),
    module('smi-compute-mode', 'nvidia_smi', {'compute_mode': 'Shared'}, 'compute_mode'),
    module('smi-power-limit-word', 'nvidia_smi', {'power_limit': 'high'}, 'power_limit'),
    module('smi-clocks-half', 'nvidia_smi', {'application_clocks': {'memory': 1593}}, 'graphics'),
    module('smi-info-gather', 'nvidia_smi_info', {'gather': ['everything']}, 'gather'),
    module('smi-info-fail-on-error', 'nvidia_smi_info', {'fail_on_error': 'perhaps'}, 'fail_on_error'),
    module('index-url-ftp', 'package_index_info', {'url': 'ftp://mirror.example.com/cuda', 'packages': ['x']}, 'url'),
    module('index-url-huge', 'package_index_info', {'url': HUGE, 'packages': ['x']}, 'url', huge=True),
    module('index-no-packages', 'package_index_info', {'url': 'http://127.0.0.1:1/repo', 'packages': []}, 'packages'),
    module('index-format', 'package_index_info', {'url': 'http://127.0.0.1:1/repo', 'packages': ['x'], 'format': 'zip'},
           'format'),
]
