# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every bad input of the nvidia_driver and persistence_mode roles fails before
any change, with a message that names the variable.

One ansible-playbook run (check mode, on localhost, no facts) includes the
role once per bad input inside a block whose rescue records the failed task
and its message; the play asserts them and the run must end with nothing
changed. Only the argument spec validation and the input checks run before
the failure, so the host is never touched.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.check_run import run_check

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VALIDATION_TASK = 'Validating arguments against arg spec'

# (role, bad input, variable the message must name)
CASES = [
    ('nvidia_driver', {'nvidia_driver_flavour': 'nouveau'}, 'nvidia_driver_flavour'),
    ('nvidia_driver', {'nvidia_driver_hold_packages': 'maybe'}, 'nvidia_driver_hold_packages'),
    ('nvidia_driver', {'nvidia_driver_expected_gpu_count': 'eight'}, 'nvidia_driver_expected_gpu_count'),
    ('nvidia_driver', {'nvidia_driver_reboot_policy': 'always'}, 'nvidia_driver_reboot_policy'),
    ('nvidia_driver', {'nvidia_driver_module_options': ['NVreg_DeviceFileMode=0660']}, 'nvidia_driver_module_options'),
    ('nvidia_driver', {'nvidia_driver_branch': '58x'}, 'nvidia_driver_branch'),
    ('nvidia_driver', {'nvidia_driver_branch': 'r580'}, 'nvidia_driver_branch'),
    ('nvidia_driver', {'nvidia_driver_version': '570.195.03'}, 'nvidia_driver_version'),
    ('nvidia_driver', {'nvidia_driver_version': '580.95.05.1'}, 'nvidia_driver_version'),
    ('nvidia_driver', {'nvidia_driver_repo_key_fingerprint': 'A4B469963BF863CC'}, 'nvidia_driver_repo_key_fingerprint'),
    ('nvidia_driver', {'nvidia_driver_repo_key_fingerprint': 'EB693B3035CD5710E231E123A4B469963BF863CC0'},
     'nvidia_driver_repo_key_fingerprint'),
    ('nvidia_driver', {'nvidia_driver_repo_key_fingerprint': 'XB693B3035CD5710E231E123A4B469963BF863CC'},
     'nvidia_driver_repo_key_fingerprint'),
    ('nvidia_driver', {'nvidia_driver_repo_url': 'ftp://mirror.example.com/cuda'}, 'nvidia_driver_repo_url'),
    ('nvidia_driver', {'nvidia_driver_module_options': {'nvidia': 'NVreg_DeviceFileMode=0660'}},
     'nvidia_driver_module_options'),
    ('nvidia_driver', {'nvidia_driver_device_file_hardening': True, 'nvidia_driver_device_file_mode': 'rw-rw----'},
     'nvidia_driver_device_file_mode'),
    ('nvidia_driver', {'nvidia_driver_reboot_timeout': -5}, 'nvidia_driver_reboot_timeout'),
    ('nvidia_driver', {'nvidia_driver_secure_boot_mok_key': '/var/lib/shim-signed/mok/MOK.priv'},
     'nvidia_driver_secure_boot_mok_cert'),
    ('nvidia_driver', {'nvidia_driver_source': 'debian'}, 'nvidia_driver_source'),
    ('nvidia_driver', {'nvidia_driver_distribution_mirror': 'deb.debian.org/debian'}, 'nvidia_driver_distribution_mirror'),
    ('nvidia_driver', {'nvidia_driver_kernel_headers_packages': 'linux-headers-amd64,linux-headers-cloud-amd64'},
     'nvidia_driver_kernel_headers_packages'),
    ('persistence_mode', {'persistence_mode_verbose': 'loud'}, 'persistence_mode_verbose'),
    ('persistence_mode', {'persistence_mode_verify_retries': 0}, 'persistence_mode_verify_retries'),
    ('persistence_mode', {'persistence_mode_user': 'GPU Daemon'}, 'persistence_mode_user'),
]


def _early_task_names():
    """Tasks allowed to fail: argument validation, the inputs' conversion and the input checks, which change nothing."""
    names = {'Inputs'}
    for role in ('nvidia_driver', 'persistence_mode'):
        with open(os.path.join(REPO_ROOT, 'roles', role, 'tasks', 'preflight.yml')) as handle:
            tasks = yaml.safe_load(handle)
        names.update(task['name'] for task in tasks
                     if 'gpufleet.nvidia.check_inputs' in task or 'ansible.builtin.assert' in task)
    return names


def _playbook(cases):
    plays = []
    for index, (role, inputs, variable) in enumerate(cases):
        plays.append({
            'name': 'Case %d: %s' % (index, variable),
            'hosts': 'localhost',
            'connection': 'local',
            'gather_facts': False,
            'tasks': [
                {'name': 'Run the role with the bad input', 'block': [
                    {'name': 'Include the role', 'ansible.builtin.include_role': {'name': 'gpufleet.nvidia.' + role},
                     'vars': inputs},
                    {'name': 'The role should have failed', 'ansible.builtin.fail': {'msg': 'CASE %d NOT REFUSED' % index}},
                ], 'rescue': [
                    {'name': 'Record the failure', 'ansible.builtin.set_fact': {
                        'case_task': '{{ ansible_failed_task.name }}',
                        'case_msg': '{{ ansible_failed_result.msg }}'}},
                ]},
                {'name': 'Report the failure', 'ansible.builtin.debug': {
                    'msg': 'CASE %d|{{ case_task }}|{{ case_msg | replace("\\n", " ") }}|END' % index}},
            ],
        })
    return plays


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp('bad-inputs')
    playbook = workdir / 'bad_inputs.yml'
    playbook.write_text(yaml.safe_dump(_playbook(CASES), sort_keys=False))
    result = run_check(['-i', 'localhost,', '-e', 'ansible_python_interpreter=%s' % sys.executable, str(playbook)], 900)
    return result


def test_the_run_changed_nothing(run):
    assert run.returncode == 0, run.stdout[-4000:]
    recap = re.search(r'^localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0', run.stdout, re.M)
    assert recap, run.stdout[-4000:]
    assert recap.group(1) == '0'


@pytest.mark.parametrize('index', range(len(CASES)), ids=['%s-%s' % (c[0], c[2]) for c in CASES])
def test_bad_input_fails_early_naming_the_variable(run, index):
    reports = dict((int(m.group(1)), (m.group(2), m.group(3)))
                   for m in re.finditer(r'CASE (\d+)\|(.*?)\|(.*?)\|END', run.stdout, re.S))
    assert index in reports, run.stdout[-4000:]
    task, message = reports[index]
    assert task.startswith(VALIDATION_TASK) or task in _early_task_names(), task
    assert CASES[index][2] in message, message
