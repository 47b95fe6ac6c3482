# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver faults seen through the modules, run by ansible-playbook against the
simulated nvidia-smi (no containers): the part of the fault suite
(molecule/faults) that needs neither systemd nor apt.

* The driver/library version mismatch of an upgrade without its reboot, and a
  driver that is not loaded: nvidia_smi_info fails with the classified reason
  (or, told not to fail, returns it), and nvidia_gpu_health reports it as a
  critical finding of an unhealthy host.
* A wedged nvidia-smi (never answers, ignores SIGTERM as a process stuck in
  the driver does): every module that runs it stops at its timeout, within
  the grace period, with the reason "timeout", and leaves no process behind.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

WEDGED = """#!/bin/sh
# A wedged nvidia-smi: never answers, and ignores SIGTERM as a process blocked in the driver does.
trap '' TERM INT HUP
echo $$ >> "{pids}"
while :; do sleep 3600; done
"""


def run_modules(tmp_path, sim, calls, name, smi=None):
    """Results of the modules (module, args), run one after the other in one ansible-playbook."""
    out = tmp_path / (name + '.json')
    playbook = tmp_path / (name + '.yml')
    smi = smi or os.path.join(SIM_BIN, 'nvidia-smi')
    environment = dict((k, sim.env[k]) for k in ('NVIDIA_SIM_ROOT', 'NVIDIA_SIM_LIB'))
    tasks = [{'name': 'Call %d' % index, 'environment': environment, 'register': 'call%d' % index, 'ignore_errors': True,
              'gpufleet.nvidia.' + module: dict(args, nvidia_smi_path=smi)}
             for index, (module, args) in enumerate(calls)]
    tasks.append({'name': 'Save the results', 'ansible.builtin.copy': {
        'content': '{{ [%s] | to_json }}' % ', '.join('call%d' % index for index in range(len(calls))),
        'dest': str(out), 'mode': '0644'}})
    # JSON is YAML: the play is written as data.
    playbook.write_text(json.dumps([{'hosts': 'localhost', 'connection': 'local', 'gather_facts': False,
                                     'vars': {'ansible_python_interpreter': sys.executable}, 'tasks': tasks}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'))
    done = subprocess.run([PLAYBOOK_BIN, '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                          check=False, env=env, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def mismatched_host(tmp_path):
    """570 loaded, 580 installed since (an upgrade waiting for its reboot)."""
    sim = make_host(str(tmp_path / 'mismatch'), 'hgx_h100_8gpu', driver='570.195.03')
    sim.install_driver('580.95.05')
    return sim


def unloaded_host(tmp_path):
    """570 installed, the module never loaded (a DKMS build that failed for the running kernel)."""
    return make_host(str(tmp_path / 'unloaded'), 'l40s_2gpu', driver='570.195.03', load=False)


HOSTS = [(mismatched_host, 'version_mismatch'), (unloaded_host, 'driver_not_loaded')]


@pytest.mark.parametrize('make, reason', HOSTS, ids=[reason for _make, reason in HOSTS])
def test_facts_fail_with_the_classified_reason_and_health_reports_it(tmp_path, make, reason):
    sim = make(tmp_path)
    try:
        failed, told, health = run_modules(tmp_path, sim, [
            ('nvidia_smi_info', {}), ('nvidia_smi_info', {'fail_on_error': False}),
            ('nvidia_gpu_health', {'kernel_log_source': 'none'})], 'calls')
    finally:
        sim.cleanup()
    assert failed['failed'] is True and failed['reason'] == reason, failed
    assert told.get('failed') is not True and told['failure']['reason'] == reason, told
    assert told['gpus'] == [] and told['failure']['hint']
    assert health['healthy'] is False, health
    codes = [finding['code'] for finding in health['findings']]
    assert 'nvidia_smi_%s' % reason in codes, codes
    finding = [f for f in health['findings'] if f['code'] == 'nvidia_smi_%s' % reason][0]
    assert finding['severity'] == 'critical'


WEDGED_CALLS = [
    ('nvidia_smi_info', {}),
    ('nvidia_smi_info', {'fail_on_error': False}),
    ('nvidia_smi', {'persistence_mode': True}),
    ('nvidia_gpu_health', {'kernel_log_source': 'none'}),
    ('nvidia_mig', {'layouts': []}),
]


def test_a_wedged_nvidia_smi_times_out_in_every_module(tmp_path):
    sim = make_host(str(tmp_path / 'host'), 'hgx_h100_8gpu')
    pids = tmp_path / 'wedged.pids'
    smi = tmp_path / 'nvidia-smi'
    smi.write_text(WEDGED.format(pids=pids))
    smi.chmod(0o755)
    started = time.time()
    try:
        results = run_modules(tmp_path, sim, [(module, dict(args, timeout=2)) for module, args in WEDGED_CALLS],
                              'wedged', smi=str(smi))
    finally:
        sim.cleanup()
    elapsed = time.time() - started
    # Per call: the timeout and the grace period before SIGKILL (5 s); then ansible-playbook itself.
    assert elapsed < len(WEDGED_CALLS) * 7 + 20, elapsed
    for (module, args), result in zip(WEDGED_CALLS, results):
        text = json.dumps(result)
        if module == 'nvidia_gpu_health':
            assert result['healthy'] is False
            assert 'nvidia_smi_timeout' in [finding['code'] for finding in result['findings']], result['findings']
        elif result.get('failed'):
            assert result.get('reason') == 'timeout', (module, args, result)
        else:
            assert result['failure']['reason'] == 'timeout', (module, args, result)
        assert 'timed out' in text or 'did not answer' in text, (module, args, result)
    # Every call was made, and nothing of them is left running (a zombie waits for init to reap it).
    started_pids = pids.read_text().split()
    assert len(started_pids) >= len(WEDGED_CALLS)
    for pid in started_pids:
        assert not running(pid), 'wedged nvidia-smi %s still runs' % pid


def running(pid):
    try:
        with open('/proc/%s/status' % pid) as handle:
            state = [line for line in handle if line.startswith('State:')]
    except (IOError, OSError):
        return False
    return bool(state) and not state[0].split()[1].startswith('Z')
