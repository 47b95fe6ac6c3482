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
  timeout:
    description: Seconds each command may take before it is stopped and its check fails.
    type: int
    default: 120
notes:
  - "Cost: no C(nvidia-smi) process of its own, one C(nvidia-ctk cdi list), one C(dcgmi diag), and the containers or
    Python of the checks that are named."
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

- name: Stop on a failed check
  ansible.builtin.assert:
    that: gpu_checks.passed
    fail_msg: "{{ gpu_checks.checks | selectattr('status', 'eq', 'fail') | map(attribute='reason') | join('; ') }}"
"""

RETURN = r"""
checks:
  description: One entry per check, in the order V(driver), V(cdi), V(container), V(dcgm_diag), V(framework).
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
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_gpu_list

CHECKS = ('driver', 'cdi', 'container', 'dcgm_diag', 'framework')
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


def first_line(*texts):
    for text in texts:
        for line in (text or '').splitlines():
            if line.strip():
                return line.strip()
    return ''


class Validator(object):
    """Runs the checks of one host; every command goes through ``run``."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        info = self.params['gpu_info']
        self.gpus = info.get('gpus') or []
        self.failure = info.get('failure')
        self.driver = (info.get('driver') or {}).get('version')
        self.uuids = [gpu.get('uuid') for gpu in self.gpus if gpu.get('uuid')]
        self.timeout_bin = module.get_bin_path('timeout')

    def run(self, argv):
        """(rc, stdout, stderr, timed_out) of ``argv``, bounded by the timeout, in the C locale."""
        timeout = self.params['timeout']
        if self.timeout_bin:
            argv = [self.timeout_bin, '--kill-after=%d' % KILL_AFTER, str(timeout)] + list(argv)
        rc, stdout, stderr = self.module.run_command(argv, environ_update={'LC_ALL': 'C', 'LANG': 'C'})
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
            return result('dcgm_diag', 'fail', 'dcgmi diag --run %s did not finish within %s s.'
                          % (level, self.params['timeout']))
        try:
            document = json.loads(stdout)
        except ValueError:
            return result('dcgm_diag', 'fail', 'dcgmi diag failed with rc %s: %s'
                          % (rc, first_line(stdout, stderr) or 'no output'))
        tests = dcgm_tests(document)
        failed = [test for test in tests if test['status'] == 'fail']
        details = dict(level=level, tests=tests)
        if failed:
            return result('dcgm_diag', 'fail', 'DCGM diagnostic level %s failed: %s' % (level, '; '.join(
                '%s%s' % (test['name'], ' (%s)' % test['message'] if test['message'] else '') for test in failed)),
                **details)
        if not tests:
            return result('dcgm_diag', 'fail', 'dcgmi diag (rc %s) reported no test result.' % rc, **details)
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

    def checks(self):
        checks = []
        for name in CHECKS:
            if not self.params[name]:
                checks.append(result(name, 'skipped', 'Turned off.'))
            elif name != 'driver' and not self.driver_usable():
                checks.append(result(name, 'skipped', 'The driver does not answer, so the GPUs cannot be compared.'))
            else:
                checks.append(getattr(self, 'check_' + name)())
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
            timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    if module.params['timeout'] <= 0:
        module.fail_json(msg='timeout must be a positive number of seconds, got %s' % module.params['timeout'])
    checks = Validator(module).checks()
    failed = [check['name'] for check in checks if check['status'] == 'fail']
    lines = ['%s: %s - %s' % (check['name'], check['status'], check['reason']) for check in checks]
    module.exit_json(changed=False, checks=checks, passed=not failed, failed_checks=failed, lines=lines)


if __name__ == '__main__':
    main()
