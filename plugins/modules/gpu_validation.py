#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_validation
short_description: Check that the NVIDIA stack of a host works end to end, read-only
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - Runs the validation checks of a GPU node and reports each as V(pass), V(fail) or V(skipped), always with the
    reason, in RV(checks). A failed check does not fail the task; the caller decides from RV(passed).
  - V(driver) - the driver answers, from the GPU records of a previous M(gpufleet.nvidia.nvidia_smi_info) call
    (O(gpu_info)); no process runs for it.
  - V(cdi) - the CDI specification of the NVIDIA Container Toolkit (C(nvidia-ctk cdi list), which reads
    C(/etc/cdi) and C(/var/run/cdi)) names every GPU of the host, and no GPU the host no longer has. Skipped where
    C(nvidia-ctk) is not installed.
  - V(container) - a container of O(container_image), started with the NVIDIA runtime, sees every GPU of the host
    (C(nvidia-smi -L) inside it). Skipped without an image, without a container engine, and in check mode.
  - V(dcgm_diag) - the DCGM diagnostic (C(dcgmi diag --run 1)) passes. Skipped where C(dcgmi) is not installed.
  - V(framework) - C(torch.cuda.is_available()) is true and C(torch.cuda.device_count()) matches the host, in a
    container of O(framework_image) or with the Python of O(framework_virtualenv). Skipped when neither is named,
    when the virtualenv is not on the host, and in check mode for a container.
  - V(nvbandwidth) (off by default) - NVIDIA's C(nvbandwidth) measures copy-engine bandwidth from and to the host on
    every GPU and between every pair of GPUs; each value must reach the health catalog's minimum for the GPU model
    (C(nvbandwidth_host_device_gbps_min), C(nvbandwidth_peer_gbps_min); Azure's node health checks), or the value
    O(thresholds) sets.
  - V(nccl_allreduce) (off by default) - NCCL's C(all_reduce_perf) from nccl-tests, one process over every GPU of
    the node at one message size; the average bus bandwidth must reach C(nccl_allreduce_busbw_gbps_min) and no
    result element may be wrong.
  - V(dcgm_diag), V(nvbandwidth) and V(nccl_allreduce) are the acceptance tests. They load the GPUs, so
    V(nvbandwidth) and V(nccl_allreduce) run only when no GPU runs a process and MIG is off. One that is turned on
    and does not run (no GPU answers, its program is missing, a GPU is busy, the catalog has no minimum for the
    model) is V(skipped) with an info finding C(acceptance_not_run) in RV(findings) - never a pass.
  - Every command is bounded by O(timeout). When the driver does not answer, the checks that need GPUs are
    skipped with that reason.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.INFO_MODULE
  - gpufleet.nvidia.attributes.PLATFORM_LINUX_NVIDIA
options:
  gpu_info:
    description:
      - The registered result of M(gpufleet.nvidia.nvidia_smi_info), gathered with V(gpus) and
        O(gpufleet.nvidia.nvidia_smi_info#module:fail_on_error=false); every other check compares with its GPUs.
    type: dict
    required: true
  driver:
    description: Run the V(driver) check.
    type: bool
    default: true
  cdi:
    description: Run the V(cdi) check.
    type: bool
    default: true
  container:
    description: Run the V(container) check (it needs O(container_image)).
    type: bool
    default: true
  container_image:
    description:
      - Image of the V(container) check; it must contain C(nvidia-smi) or have it mounted by the NVIDIA runtime (any
        CUDA base image does). The engine pulls it if it is not there.
      - Empty, the check is skipped.
    type: str
    default: ""
  container_engine:
    description:
      - Engine that starts the containers of the V(container) and V(framework) checks. V(auto) takes the first of
        C(docker), C(podman) and C(nerdctl) found.
      - C(docker) runs with C(--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all), C(podman) with CDI
        (C(--device nvidia.com/gpu=all)), C(nerdctl) with C(--gpus all).
    type: str
    choices: [auto, docker, podman, nerdctl]
    default: auto
  dcgm_diag:
    description: Run the V(dcgm_diag) check.
    type: bool
    default: true
  dcgm_host:
    description:
      - Host engine C(dcgmi) connects to, as C(HOST:PORT) or C(unix:///path). Empty, dcgmi's default
        (C(localhost:5555)).
    type: str
    default: ""
  dcgm_diag_level:
    description: Diagnostic level; V(1) takes seconds, higher levels load the GPUs for minutes.
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  framework:
    description: Run the V(framework) check (it needs O(framework_image) or O(framework_virtualenv)).
    type: bool
    default: true
  framework_image:
    description: Container image with Python and PyTorch for the V(framework) check.
    type: str
    default: ""
  framework_virtualenv:
    description:
      - Virtualenv with PyTorch on the host for the V(framework) check; its C(bin/python) runs the check. Used when
        O(framework_image) is empty.
    type: str
    default: ""
  nvbandwidth:
    description: Run the V(nvbandwidth) acceptance test.
    type: bool
    default: false
  nvbandwidth_path:
    description: Path of the C(nvbandwidth) program; empty, it is looked up on the C(PATH).
    type: path
    default: ""
  nccl_allreduce:
    description: Run the V(nccl_allreduce) acceptance test.
    type: bool
    default: false
  nccl_allreduce_path:
    description: Path of nccl-tests' C(all_reduce_perf) (built without MPI, or with it for one process); empty, it
      is looked up on the C(PATH).
    type: path
    default: ""
  nccl_allreduce_size:
    description:
      - Message size of the all-reduce (C(-b) and C(-e)), such as V(16G), V(8G) or V(512M).
      - V(auto) takes what Azure's checks measured their minimums with - V(16G) where every GPU has 64 GiB or more,
        else V(8G).
    type: str
    default: auto
  thresholds:
    description:
      - The health catalog's thresholds to change, as the health role's C(health_thresholds) - a value for every
        model, or C({default, MODEL}) mappings. Unknown names or models fail the module with their names.
    type: dict
    default: {}
  check_overrides:
    description: The severity and action of finding codes, as the health role's C(health_check_overrides).
    type: dict
    default: {}
  timeout:
    description: Seconds each command may take before it is stopped and its check fails.
    type: int
    default: 120
notes:
  - "Cost: no C(nvidia-smi) process of its own, one C(nvidia-ctk cdi list), one C(dcgmi diag), and the containers or
    Python of the checks that are named. V(nvbandwidth) and V(nccl_allreduce) keep every GPU busy while they run
    (their length on a GPU was not measured by this collection: give O(timeout) room)."
  - Both acceptance programs run with C(CUDA_DEVICE_ORDER=PCI_BUS_ID), so their device numbers are the
    C(nvidia-smi) indices of the findings.
  - Run with O(ignore:become=true); C(dcgmi) and the container engines usually need root.
seealso:
  - module: gpufleet.nvidia.nvidia_smi_info
  - module: gpufleet.nvidia.nvidia_gpu_health
"""

EXAMPLES = r"""
- name: Read the GPUs
  gpufleet.nvidia.nvidia_smi_info:
    fail_on_error: false
  become: true
  register: gpu_info

- name: Validate the stack, including a container and PyTorch in a virtualenv
  gpufleet.nvidia.gpu_validation:
    gpu_info: "{{ gpu_info }}"
    container_image: nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04
    dcgm_host: 127.0.0.1:5555
    framework_virtualenv: /opt/venvs/torch
  become: true
  register: gpu_checks

- name: Accept a new node - NVLink and copy bandwidth, an all-reduce over its GPUs, DCGM level 2
  gpufleet.nvidia.gpu_validation:
    gpu_info: "{{ gpu_info }}"
    dcgm_diag_level: 2
    nvbandwidth: true
    nccl_allreduce: true
    nccl_allreduce_path: /opt/nccl-tests/build/all_reduce_perf
    timeout: 900
  become: true
  register: acceptance

- name: Stop on a failed check
  ansible.builtin.assert:
    that: gpu_checks.passed
    fail_msg: "{{ gpu_checks.checks | selectattr('status', 'eq', 'fail') | map(attribute='reason') | join('; ') }}"
"""

RETURN = r"""
checks:
  description: One entry per check, in the order V(driver), V(cdi), V(container), V(dcgm_diag), V(framework),
    V(nvbandwidth), V(nccl_allreduce).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The check.
      type: str
      sample: cdi
    status:
      description: V(pass), V(fail) or V(skipped).
      type: str
      sample: pass
    reason:
      description: Why, in one sentence.
      type: str
      sample: The CDI specification names all 8 GPUs (nvidia.com/gpu).
    details:
      description: What the check read (GPU UUIDs seen, failed DCGM tests, PyTorch versions); a dict, may be empty.
      type: dict
  sample:
    - {name: driver, status: pass, reason: "nvidia-smi answers: 8 GPUs, driver 570.195.03.", details: {}}
    - {name: container, status: skipped, reason: "No image named (container_image).", details: {}}
passed:
  description: V(true) when no check failed.
  returned: always
  type: bool
  sample: true
lines:
  description: "One line per check, C(<name>: <status> - <reason>), for the job output."
  returned: always
  type: list
  elements: str
  sample: ["driver: pass - nvidia-smi answers: 8 GPUs, driver 570.195.03."]
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
  sample: [dcgm_diag]
findings:
  description:
    - The acceptance tests' findings, in the form of M(gpufleet.nvidia.nvidia_gpu_health)'s, each with the C(check)
      it comes from - C(dcgm_diag_failed), C(nvbandwidth_low), C(nccl_allreduce_low),
      C(nccl_allreduce_wrong_results), C(acceptance_failed), and C(acceptance_not_run) (info) for a test that is
      turned on and did not run.
  returned: always
  type: list
  elements: dict
  sample:
    - code: nccl_allreduce_low
      severity: critical
      action: drain
      source: azurehpc-health-checks
      check: nccl_allreduce
      gpu: null
      evidence: "NCCL all_reduce_perf over 8 GPUs at 16G: average bus bandwidth 401.2 GB/s, below 460."
      advice: "Drain the node; compare nvidia-smi nvlink -s and topo -m with a healthy node of the model."
      threshold: {name: nccl_allreduce_busbw_gbps_min, value: 460, source: azurehpc-health-checks}
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_acceptance import (
    ALLREDUCE_MEASURED_GPUS,
    NVBANDWIDTH_HOST_TESTS,
    NVBANDWIDTH_PEER_TEST,
    NVBANDWIDTH_SAMPLES,
    AcceptanceOutputError,
    allreduce_size,
    judge_nvbandwidth,
    parse_all_reduce,
    parse_nvbandwidth,
    size_bytes,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_catalog import Catalog, model_key
# One shape for every finding, the judge's and the acceptance tests'.
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import _finding
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import attach_processes, parse_gpu_list

CHECKS = ('driver', 'cdi', 'container', 'dcgm_diag', 'framework', 'nvbandwidth', 'nccl_allreduce')
# The checks that load the GPUs: one that is turned on and does not run says
# so with an info finding, so a report never reads "not run" as "passed".
ACCEPTANCE = ('dcgm_diag', 'nvbandwidth', 'nccl_allreduce')
# CUDA numbers devices fastest first unless told otherwise; in PCI order its
# numbers are nvidia-smi's indices, which the findings name.
CUDA_ENV = {'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
ADVICE = {
    'dcgm_diag_failed': 'Read the failed DCGM tests: drain the node for hardware failures and open a case with the '
                        'vendor.',
    'nvbandwidth_low': 'Drain the node; compare nvidia-smi topo -m, nvlink -s and the PCIe link (nvidia-smi -q) with '
                       'a healthy node of the model, then reseat or replace what is slow.',
    'nccl_allreduce_low': 'Drain the node; compare nvidia-smi nvlink -s and topo -m with a healthy node of the model '
                          'and run nvbandwidth to find the slow GPU or link.',
    'nccl_allreduce_wrong_results': 'Drain the node: a GPU or link returns wrong data. Run the DCGM diagnostic at '
                                    'level 3 to find the GPU, and open a case with the vendor.',
    'acceptance_failed': 'Run the test by hand on the node to see why it stopped (driver, CUDA, NCCL or a GPU).',
    'acceptance_not_run': 'Install the program, give the node idle GPUs, or set the minimum in health_thresholds; '
                          'until then the test proves nothing either way.',
}
ENGINES = ('docker', 'podman', 'nerdctl')
KILL_AFTER = 5
_CDI_GPU = re.compile(r'^nvidia\.com/gpu=(?P<name>\S+)\s*$')
FRAMEWORK_SCRIPT = '\n'.join((
    'import json',
    'try:',
    '    import torch',
    'except Exception as exc:',
    '    print(json.dumps({"error": "cannot import torch: %s" % exc}))',
    'else:',
    '    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,',
    '                      "available": bool(torch.cuda.is_available()), "count": int(torch.cuda.device_count())}))',
))


def result(name, status, reason, **details):
    return {'name': name, 'status': status, 'reason': reason, 'details': details}


def _gbps(value):
    return '%g' % value


def _measured(cell):
    return 'N/A (not measured)' if cell['value'] is None else '%s GB/s' % _gbps(cell['value'])


def first_line(*texts):
    for text in texts:
        for line in (text or '').splitlines():
            if line.strip():
                return line.strip()
    return ''


class Validator(object):
    """Runs the checks of one host; every command goes through ``run``."""

    def __init__(self, module, catalog):
        self.module = module
        self.params = module.params
        self.catalog = catalog
        self.findings = []
        info = self.params['gpu_info']
        self.gpus = attach_processes(info.get('gpus') or [], info.get('processes'))
        self.failure = info.get('failure')
        self.driver = (info.get('driver') or {}).get('version')
        self.uuids = [gpu.get('uuid') for gpu in self.gpus if gpu.get('uuid')]
        self.timeout_bin = module.get_bin_path('timeout')

    def run(self, argv, environ=None):
        """(rc, stdout, stderr, timed_out) of ``argv``, bounded by the timeout, in the C locale."""
        timeout = self.params['timeout']
        if self.timeout_bin:
            argv = [self.timeout_bin, '--kill-after=%d' % KILL_AFTER, str(timeout)] + list(argv)
        rc, stdout, stderr = self.module.run_command(argv, environ_update=dict(environ or {}, LC_ALL='C', LANG='C'))
        # 124: timed out; 137 or -9: killed after --kill-after (a command that
        # ignores SIGTERM, as one stuck in the driver does: -9 when timeout's
        # SIGKILL to its process group ended timeout itself too).
        return rc, stdout, stderr, bool(self.timeout_bin) and rc in (124, 137, -9)

    def driver_usable(self):
        return not self.failure and bool(self.gpus)

    def check_driver(self):
        if self.driver_usable():
            return result('driver', 'pass', 'nvidia-smi answers: %d GPU%s, driver %s.'
                          % (len(self.gpus), '' if len(self.gpus) == 1 else 's', self.driver),
                          gpu_count=len(self.gpus), driver_version=self.driver)
        failure = self.failure or {'reason': 'no_devices', 'hint': 'nvidia-smi lists no GPU.'}
        return result('driver', 'fail', 'nvidia-smi does not answer (%s): %s' % (failure.get('reason'), failure.get('hint')),
                      reason_code=failure.get('reason'))

    def check_cdi(self):
        ctk = self.module.get_bin_path('nvidia-ctk')
        if not ctk:
            return result('cdi', 'skipped', 'The NVIDIA Container Toolkit is not installed (no nvidia-ctk).')
        rc, stdout, stderr, timed_out = self.run([ctk, 'cdi', 'list'])
        if timed_out:
            return result('cdi', 'fail', 'nvidia-ctk cdi list did not finish within %s s.' % self.params['timeout'])
        if rc != 0:
            return result('cdi', 'fail', 'nvidia-ctk cdi list failed with rc %s: %s' % (rc, first_line(stderr, stdout)))
        names = set()
        for line in stdout.splitlines():
            match = _CDI_GPU.match(line.strip())
            if match:
                names.add(match.group('name'))
        names.discard('all')
        if not names:
            return result('cdi', 'fail', 'No CDI specification names nvidia.com/gpu devices: generate one with '
                                         'nvidia-ctk cdi generate (the container_toolkit role does).')
        by_uuid = any(name.upper().startswith('GPU-') for name in names)
        if by_uuid:
            missing = [uuid for uuid in self.uuids if uuid not in names]
            gone = sorted(name for name in names if name.upper().startswith('GPU-') and name not in self.uuids)
        else:
            indexes = [str(gpu.get('index')) for gpu in self.gpus]
            missing = [index for index in indexes if index not in names]
            gone = sorted(name for name in names if name.isdigit() and name not in indexes)
        details = dict(devices=sorted(names), missing=missing, gone=gone)
        if missing or gone:
            parts = []
            if missing:
                parts.append('does not name %s' % ', '.join(missing))
            if gone:
                parts.append('names GPUs the host no longer has: %s' % ', '.join(gone))
            return result('cdi', 'fail', 'The CDI specification %s; regenerate it with nvidia-ctk cdi generate.'
                          % '; it '.join(parts), **details)
        return result('cdi', 'pass', 'The CDI specification names %s (nvidia.com/gpu).'
                      % ('the GPU' if len(self.gpus) == 1 else 'all %d GPUs' % len(self.gpus)), **details)

    def engine(self):
        wanted = self.params['container_engine']
        for name in ENGINES if wanted == 'auto' else (wanted,):
            path = self.module.get_bin_path(name)
            if path:
                return name, path
        return None, None

    def container_argv(self, image, command):
        name, path = self.engine()
        if not path:
            return None
        gpu_args = {'docker': ['--runtime=nvidia', '-e', 'NVIDIA_VISIBLE_DEVICES=all'],
                    'podman': ['--device', 'nvidia.com/gpu=all', '--security-opt=label=disable'],
                    'nerdctl': ['--gpus', 'all']}[name]
        return [path, 'run', '--rm'] + gpu_args + [image] + command

    def _no_engine(self, check):
        engines = ENGINES if self.params['container_engine'] == 'auto' else (self.params['container_engine'],)
        return result(check, 'skipped', 'No container engine is installed (%s).' % ', '.join(engines))

    def check_container(self):
        image = self.params['container_image']
        if not image:
            return result('container', 'skipped', 'No image named (container_image).')
        if self.module.check_mode:
            return result('container', 'skipped', 'Check mode starts no container.')
        argv = self.container_argv(image, ['nvidia-smi', '-L'])
        if argv is None:
            return self._no_engine('container')
        rc, stdout, stderr, timed_out = self.run(argv)
        if timed_out:
            return result('container', 'fail', 'The container did not finish within %s s.' % self.params['timeout'])
        if rc != 0:
            return result('container', 'fail', 'The container of %s failed with rc %s: %s'
                          % (image, rc, first_line(stderr, stdout)))
        try:
            seen = [gpu['uuid'] for gpu in parse_gpu_list(stdout)]
        except ValueError as exc:
            return result('container', 'fail', 'nvidia-smi -L in the container printed no GPU list (%s).' % exc)
        missing = [uuid for uuid in self.uuids if uuid not in seen]
        if missing:
            return result('container', 'fail', 'A container of %s sees %d of %d GPUs; missing: %s.'
                          % (image, len(self.uuids) - len(missing), len(self.uuids), ', '.join(missing)), seen=seen)
        return result('container', 'pass', 'A container of %s sees all %d GPUs with the NVIDIA runtime.'
                      % (image, len(self.uuids)), seen=seen)

    def check_dcgm_diag(self):
        dcgmi = self.module.get_bin_path('dcgmi')
        if not dcgmi:
            return result('dcgm_diag', 'skipped', 'DCGM is not installed (no dcgmi).')
        level = self.params['dcgm_diag_level']
        argv = [dcgmi, 'diag']
        if self.params['dcgm_host']:
            argv += ['--host', self.params['dcgm_host']]
        rc, stdout, stderr, timed_out = self.run(argv + ['--run', str(level), '--json'])
        if timed_out:
            return self.stopped('dcgm_diag', 'dcgmi diag --run %s did not finish within %s s.'
                                % (level, self.params['timeout']))
        try:
            document = json.loads(stdout)
        except ValueError:
            return self.stopped('dcgm_diag', 'dcgmi diag failed with rc %s: %s'
                                % (rc, first_line(stdout, stderr) or 'no output'))
        tests = dcgm_tests(document)
        failed = [test for test in tests if test['status'] == 'fail']
        details = dict(level=level, tests=tests)
        if failed:
            reason = 'DCGM diagnostic level %s failed: %s' % (level, '; '.join(
                '%s%s' % (test['name'], ' (%s)' % test['message'] if test['message'] else '') for test in failed))
            self.found('dcgm_diag_failed', 'dcgm_diag', None, reason)
            return result('dcgm_diag', 'fail', reason, **details)
        if not tests:
            return self.stopped('dcgm_diag', 'dcgmi diag (rc %s) reported no test result.' % rc, **details)
        return result('dcgm_diag', 'pass', 'DCGM diagnostic level %s passed: %s.'
                      % (level, ', '.join(test['name'] for test in tests)), **details)

    def _framework_argv(self):
        image, venv = self.params['framework_image'], self.params['framework_virtualenv']
        if image:
            if self.module.check_mode:
                return None, result('framework', 'skipped', 'Check mode starts no container.')
            argv = self.container_argv(image, ['python3', '-c', FRAMEWORK_SCRIPT])
            return argv, (self._no_engine('framework') if argv is None else None)
        if venv:
            python = os.path.join(venv, 'bin', 'python')
            if not os.path.exists(python):
                return None, result('framework', 'skipped', 'The virtualenv %s is not on this host.' % venv)
            return [python, '-c', FRAMEWORK_SCRIPT], None
        return None, result('framework', 'skipped', 'No container image or virtualenv named '
                                                    '(framework_image, framework_virtualenv).')

    def check_framework(self):
        argv, skipped = self._framework_argv()
        if skipped:
            return skipped
        where = self.params['framework_image'] or self.params['framework_virtualenv']
        rc, stdout, stderr, timed_out = self.run(argv)
        if timed_out:
            return result('framework', 'fail', 'The PyTorch check in %s did not finish within %s s.'
                          % (where, self.params['timeout']))
        answer = None
        for line in reversed(stdout.splitlines()):
            if line.strip().startswith('{'):
                try:
                    answer = json.loads(line)
                except ValueError:
                    continue
                break
        if rc != 0 or answer is None:
            return result('framework', 'fail', 'The PyTorch check in %s failed with rc %s: %s'
                          % (where, rc, first_line(stderr, stdout) or 'no output'))
        if answer.get('error'):
            return result('framework', 'fail', '%s: %s.' % (where, answer['error']))
        # CUDA shows one device per MIG GPU instance it may use, not the GPUs.
        mig = any(gpu.get('mig_mode_current') for gpu in self.gpus)
        expected = len(self.gpus)
        details = dict(torch=answer.get('torch'), cuda=answer.get('cuda'), available=answer.get('available'),
                       device_count=answer.get('count'))
        if not answer.get('available') or (answer.get('count') != expected and not (mig and answer.get('count'))):
            return result('framework', 'fail', 'PyTorch %s in %s: torch.cuda.is_available() is %s, %s devices '
                          '(the host has %d GPUs).' % (answer.get('torch'), where, answer.get('available'),
                                                       answer.get('count'), expected), **details)
        return result('framework', 'pass', 'PyTorch %s (CUDA %s) in %s sees %s GPU device%s.'
                      % (answer.get('torch'), answer.get('cuda'), where, answer.get('count'),
                         '' if answer.get('count') == 1 else 's'), **details)

    # ------------------------------------------------------------ acceptance

    def found(self, code, check, gpu, evidence, **extra):
        """Record a finding of an acceptance test, with the catalog's severity, action and source."""
        finding = _finding(code, self.catalog.entry(code)[0], gpu, evidence, ADVICE[code], check=check, **extra)
        self.findings.append(self.catalog.annotate(finding))

    def stopped(self, check, reason, **details):
        """An acceptance test that did not complete: a failed check with its finding."""
        self.found('acceptance_failed', check, None, '%s: %s' % (check, reason))
        return result(check, 'fail', reason, **details)

    def program(self, check, param, name):
        """(path, skipped result) of an acceptance test's program."""
        path = self.params[param]
        if path:
            if not os.path.exists(path):
                return None, result(check, 'skipped', '%s is not on this host (%s).' % (path, param))
            return path, None
        found = self.module.get_bin_path(name)
        if not found:
            return None, result(check, 'skipped', '%s is not installed (not on the PATH; or set %s).' % (name, param))
        return found, None

    def model(self, check):
        """(GPU product name, skipped result): the node's one model, and idle GPUs without MIG."""
        names = sorted(set(gpu.get('name') or 'unknown' for gpu in self.gpus))
        if len(set(model_key(name) or name for name in names)) > 1:
            return None, result(check, 'skipped', 'The node mixes GPU models (%s): no one minimum applies.'
                                % ', '.join(names))
        busy = [gpu for gpu in self.gpus if gpu.get('processes')]
        if busy:
            return None, result(check, 'skipped', 'GPU %s runs processes; the test needs idle GPUs.'
                                % ', '.join(str(gpu.get('index')) for gpu in busy))
        if any(gpu.get('mig_mode_current') for gpu in self.gpus):
            return None, result(check, 'skipped', 'MIG is enabled; the test measures whole GPUs.')
        return names[0], None

    def ready(self, check, param, name):
        """(program path, GPU product name, skipped result) of an acceptance test that loads the GPUs."""
        path, skipped = self.program(check, param, name)
        if skipped:
            return None, None, skipped
        gpu_name, skipped = self.model(check)
        return path, gpu_name, skipped

    def minimum(self, name, gpu_name):
        """(value, cited threshold) of a catalog minimum for the node's model."""
        value = self.catalog.threshold(name, gpu_name)
        return value, {'name': name, 'value': value, 'source': self.catalog.threshold_source(name, gpu_name)}

    def check_nvbandwidth(self):
        path, gpu_name, skipped = self.ready('nvbandwidth', 'nvbandwidth_path', 'nvbandwidth')
        if skipped:
            return skipped
        host_min, host_cited = self.minimum('nvbandwidth_host_device_gbps_min', gpu_name)
        peer_min, peer_cited = self.minimum('nvbandwidth_peer_gbps_min', gpu_name)
        if len(self.gpus) < 2:
            peer_min = None
        tests = list(NVBANDWIDTH_HOST_TESTS if host_min is not None else ()) + (
            [NVBANDWIDTH_PEER_TEST] if peer_min is not None else [])
        if not tests:
            return result('nvbandwidth', 'skipped', 'The catalog has no minimum for %s: set '
                          'health_thresholds.nvbandwidth_host_device_gbps_min (and nvbandwidth_peer_gbps_min).'
                          % gpu_name)
        rc, stdout, stderr, timed_out = self.run([path, '-t'] + tests + ['-i', str(NVBANDWIDTH_SAMPLES)], CUDA_ENV)
        if timed_out:
            return self.stopped('nvbandwidth', 'nvbandwidth did not finish within %s s.' % self.params['timeout'])
        try:
            parsed = parse_nvbandwidth(stdout)
        except AcceptanceOutputError as exc:
            return self.stopped('nvbandwidth', 'unexpected nvbandwidth output (%s).' % exc)
        if not parsed['tests']:
            return self.stopped('nvbandwidth', 'nvbandwidth (rc %s) ran no test: %s'
                                % (rc, first_line(stderr, stdout) or 'no output'))
        problems, lowest = judge_nvbandwidth(parsed, host_min, peer_min)
        details = dict(version=parsed['version'], tests=tests, lowest=lowest)
        stopped = ['%s (%s)' % (p['test'], p['message']) for p in problems if p['row'] is None]
        if stopped:
            self.stopped('nvbandwidth', 'no result from %s.' % ', '.join(stopped))
        short = [p for p in problems if p['row'] is not None]
        by_gpu = {}
        for problem in short:
            peer = problem['test'] == NVBANDWIDTH_PEER_TEST
            by_gpu.setdefault((problem['row'] if peer else problem['column'], peer), []).append(problem)
        for (label, peer), cells in sorted(by_gpu.items()):
            if peer:
                evidence = 'nvbandwidth %s from GPU %s: %s (minimum %s GB/s).' % (
                    NVBANDWIDTH_PEER_TEST, label, ', '.join('GPU %s %s' % (c['column'], _measured(c)) for c in cells),
                    _gbps(peer_min))
            else:
                evidence = 'nvbandwidth on GPU %s: %s (minimum %s GB/s).' % (
                    label, ', '.join('%s %s' % (c['test'], _measured(c)) for c in cells), _gbps(host_min))
            self.found('nvbandwidth_low', 'nvbandwidth', self.gpu_of(label), evidence,
                       threshold=peer_cited if peer else host_cited)
        if stopped or short:
            return result('nvbandwidth', 'fail', 'nvbandwidth on %s: %s.' % (gpu_name, '; '.join(
                (['%d value%s below the minimum or not measured' % (len(short), '' if len(short) == 1 else 's')]
                 if short else []) + (['no result from %s' % ', '.join(stopped)] if stopped else []))), **details)
        return result('nvbandwidth', 'pass', 'nvbandwidth on %d GPU%s of %s, lowest: %s (minimums: host %s, peer %s '
                      'GB/s).' % (len(self.gpus), '' if len(self.gpus) == 1 else 's', gpu_name,
                                  ', '.join('%s %s GB/s' % (name, _gbps(value)) for name, value in sorted(lowest.items())),
                                  _gbps(host_min) if host_min is not None else '-',
                                  _gbps(peer_min) if peer_min is not None else '-'), **details)

    def gpu_of(self, label):
        for gpu in self.gpus:
            if str(gpu.get('index')) == str(label):
                return gpu
        return None

    def check_nccl_allreduce(self):
        path, gpu_name, skipped = self.ready('nccl_allreduce', 'nccl_allreduce_path', 'all_reduce_perf')
        if skipped:
            return skipped
        count = len(self.gpus)
        if count < 2:
            return result('nccl_allreduce', 'skipped', 'One GPU: an all-reduce needs two or more.')
        minimum, cited = self.minimum('nccl_allreduce_busbw_gbps_min', gpu_name)
        if minimum is None:
            return result('nccl_allreduce', 'skipped', 'The catalog has no all-reduce minimum for %s: set '
                          'health_thresholds.nccl_allreduce_busbw_gbps_min.' % gpu_name)
        measured_on = ALLREDUCE_MEASURED_GPUS.get(model_key(gpu_name))
        if cited['source'] != 'inventory' and measured_on != count:
            return result('nccl_allreduce', 'skipped', 'The catalog\'s minimum for %s was measured on %s GPUs and '
                          'this node has %d: set health_thresholds.nccl_allreduce_busbw_gbps_min for it.'
                          % (gpu_name, measured_on, count))
        size = allreduce_size(self.gpus, self.params['nccl_allreduce_size'])
        argv = [path, '-b', size, '-e', size, '-f', '2', '-g', str(count), '-c', '1']
        rc, stdout, stderr, timed_out = self.run(argv, CUDA_ENV)
        if timed_out:
            return self.stopped('nccl_allreduce', 'all_reduce_perf did not finish within %s s.'
                                % self.params['timeout'])
        try:
            parsed = parse_all_reduce(stdout)
        except AcceptanceOutputError as exc:
            return self.stopped('nccl_allreduce', 'unexpected all_reduce_perf output (%s).' % exc)
        details = dict(version=parsed['version'], size=size, gpus=parsed['gpus'], busbw=parsed['busbw'],
                       out_of_bounds=parsed['out_of_bounds'], minimum=minimum)
        if parsed['busbw'] is None or parsed['out_of_bounds'] is None:
            # Its own error lines first: the header lines start with "#".
            plain = '\n'.join(line for line in stdout.splitlines() if not line.startswith('#'))
            return self.stopped('nccl_allreduce', 'all_reduce_perf (rc %s) printed no result: %s'
                                % (rc, first_line(stderr, plain, stdout) or 'no output'), **details)
        if parsed['gpus'] is not None and parsed['gpus'] != count:
            return self.stopped('nccl_allreduce', 'all_reduce_perf ran on %s of the %d GPUs.'
                                % (parsed['gpus'], count), **details)
        what = 'NCCL all_reduce_perf over %d GPUs at %s: average bus bandwidth %s GB/s' % (
            count, size, _gbps(parsed['busbw']))
        reasons = []
        wrong = parsed['out_of_bounds'] or 0
        if wrong:
            reasons.append('%d wrong result element%s' % (wrong, '' if wrong == 1 else 's'))
            self.found('nccl_allreduce_wrong_results', 'nccl_allreduce', None,
                       '%s, %s (Out of bounds values).' % (what, reasons[-1]))
        if parsed['busbw'] < minimum:
            reasons.append('below %s GB/s' % _gbps(minimum))
            self.found('nccl_allreduce_low', 'nccl_allreduce', None, '%s, below %s.' % (what, _gbps(minimum)),
                       threshold=cited)
        if reasons:
            return result('nccl_allreduce', 'fail', '%s: %s.' % (what, '; '.join(reasons)), **details)
        return result('nccl_allreduce', 'pass', '%s (minimum %s, %s).' % (what, _gbps(minimum), cited['source']),
                      **details)

    def checks(self):
        checks = []
        for name in CHECKS:
            if not self.params[name]:
                checks.append(result(name, 'skipped', 'Turned off.'))
                continue
            if name != 'driver' and not self.driver_usable():
                checks.append(result(name, 'skipped', 'The driver does not answer, so the GPUs cannot be compared.'))
            else:
                checks.append(getattr(self, 'check_' + name)())
            if name in ACCEPTANCE and checks[-1]['status'] == 'skipped':
                self.found('acceptance_not_run', name, None, '%s not run: %s' % (name, checks[-1]['reason']))
        return checks


def _status(text):
    text = str(text or '').strip().lower()
    if text in ('pass', 'passed', 'success'):
        return 'pass'
    if text in ('fail', 'failed', 'error'):
        return 'fail'
    return text or 'unknown'


def _messages(results):
    messages = []
    for entry in results:
        for warning in entry.get('warnings') or []:
            text = warning.get('warning') if isinstance(warning, dict) else warning
            if text and text not in messages:
                messages.append(str(text))
    return messages


def dcgm_tests(document):
    """``[{name, status (pass/fail/skip/...), message}]`` of a ``dcgmi diag --json`` document (DCGM 3 and 4)."""
    if not isinstance(document, dict):
        return []
    body = next((value for key, value in document.items() if 'Diagnostic' in key and isinstance(value, dict)), {})
    tests = []
    for category in body.get('test_categories') or []:
        for test in category.get('tests') or []:
            results = test.get('results') or []
            summary = (test.get('test_summary') or {}).get('status')
            statuses = [_status(entry.get('status')) for entry in results]
            if summary:
                status = _status(summary)
            elif 'fail' in statuses or 'pass' in statuses:
                status = 'fail' if 'fail' in statuses else 'pass'
            else:
                status = statuses[0] if statuses else 'unknown'
            messages = _messages(results) if status == 'fail' else []
            tests.append({'name': test.get('name'), 'status': status, 'message': ' '.join(messages)})
    return tests


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpu_info=dict(type='dict', required=True),
            driver=dict(type='bool', default=True),
            cdi=dict(type='bool', default=True),
            container=dict(type='bool', default=True),
            container_image=dict(type='str', default=''),
            container_engine=dict(type='str', choices=['auto'] + list(ENGINES), default='auto'),
            dcgm_diag=dict(type='bool', default=True),
            dcgm_host=dict(type='str', default=''),
            dcgm_diag_level=dict(type='int', choices=[1, 2, 3, 4], default=1),
            framework=dict(type='bool', default=True),
            framework_image=dict(type='str', default=''),
            framework_virtualenv=dict(type='str', default=''),
            nvbandwidth=dict(type='bool', default=False),
            nvbandwidth_path=dict(type='path', default=''),
            nccl_allreduce=dict(type='bool', default=False),
            nccl_allreduce_path=dict(type='path', default=''),
            nccl_allreduce_size=dict(type='str', default='auto'),
            thresholds=dict(type='dict', default={}),
            check_overrides=dict(type='dict', default={}),
            timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    if module.params['timeout'] <= 0:
        module.fail_json(msg='timeout must be a positive number of seconds, got %s' % module.params['timeout'])
    if module.params['nccl_allreduce_size'] != 'auto':
        try:
            size_bytes(module.params['nccl_allreduce_size'])
        except ValueError as exc:
            module.fail_json(msg='nccl_allreduce_size: %s, or auto' % exc)
    try:
        catalog = Catalog(module.params['thresholds'], module.params['check_overrides'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    validator = Validator(module, catalog)
    checks = validator.checks()
    failed = [check['name'] for check in checks if check['status'] == 'fail']
    lines = ['%s: %s - %s' % (check['name'], check['status'], check['reason']) for check in checks]
    module.exit_json(changed=False, checks=checks, passed=not failed, failed_checks=failed, lines=lines,
                     findings=validator.findings)


if __name__ == '__main__':
    main()
