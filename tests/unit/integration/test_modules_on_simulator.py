# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules run by ansible-playbook against the simulated nvidia-smi.

Counts processes from the simulator's call log: the default fact gathering on
an 8-GPU host must cost one nvidia-smi process, and a second nvidia_smi run
with the same settings must change nothing. nvidia_smi_info (from -q -x) and
nvidia_smi (from --query-gpu) read the same host into the same GPU record.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import GPU_RECORD
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.record_checks import leaves, type_errors
from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: {python}
  tasks:
    - name: Run the module
      environment: {environment}
      gpufleet.nvidia.{module}: {args}
      register: result
    - name: Save the result
      ansible.builtin.copy:
        content: "{{{{ result | to_json }}}}"
        dest: {out}
        mode: "0644"
"""


def run_module(tmp_path, sim, module, args, name):
    out = tmp_path / (name + '.json')
    playbook = tmp_path / (name + '.yml')
    args = dict(args, nvidia_smi_path=os.path.join(SIM_BIN, 'nvidia-smi'))
    playbook.write_text(PLAY.format(python=sys.executable, module=module, args=json.dumps(args),
                                    environment=json.dumps({k: sim.env[k] for k in ('NVIDIA_SIM_ROOT', 'NVIDIA_SIM_LIB')}),
                                    out=out))
    done = subprocess.run([PLAYBOOK_BIN, '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                          check=False, env=dict(os.environ, ANSIBLE_NOCOLOR='1'))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def smi_calls(sim):
    log = sim.path('var', 'log', 'nvidia-sim', 'calls.log')
    if not os.path.exists(log):
        return []
    with open(log) as handle:
        return [json.loads(line) for line in handle if json.loads(line)['prog'] == 'nvidia-smi']


def test_default_facts_cost_one_nvidia_smi_process(tmp_path):
    sim = make_host(str(tmp_path / 'hgx'), 'hgx_h100_8gpu')
    try:
        before = len(smi_calls(sim))
        result = run_module(tmp_path, sim, 'nvidia_smi_info', {}, 'info')
        assert len(smi_calls(sim)) - before == 1
        assert 'ansible_facts' not in result
        assert result['gpu_count'] == 8
        assert result['driver']['version'] == '570.195.03'
        assert {gpu['name'] for gpu in result['gpus']} == {'NVIDIA H100 80GB HBM3'}
    finally:
        sim.cleanup()


def test_settings_second_run_changes_nothing(tmp_path):
    sim = make_host(str(tmp_path / 'hgx'), 'hgx_h100_8gpu')
    try:
        settings = {'persistence_mode': True, 'power_limit': 500, 'compute_mode': 'Exclusive_Process'}
        first = run_module(tmp_path, sim, 'nvidia_smi', settings, 'first')
        assert first['changed'] is True
        second = run_module(tmp_path, sim, 'nvidia_smi', settings, 'second')
        assert second['changed'] is False
        assert second['actions'] == []
        limits = sim.smi('--query-gpu=power.limit,compute_mode,persistence_mode', '--format=csv,noheader,nounits')
        assert set(limits.stdout.strip().splitlines()) == {'500.00, Exclusive_Process, Enabled'}
    finally:
        sim.cleanup()


@pytest.mark.parametrize('profile', ['hgx_h100_8gpu', 'a100_40gb_mig'])
def test_info_and_settings_modules_return_the_same_types_for_the_same_fields(tmp_path, profile):
    sim = make_host(str(tmp_path / 'host'), profile)
    try:
        info = run_module(tmp_path, sim, 'nvidia_smi_info', {}, 'info')
        settings = run_module(tmp_path, sim, 'nvidia_smi', {}, 'settings')
    finally:
        sim.cleanup()
    assert settings['changed'] is False
    assert [gpu['index'] for gpu in info['gpus']] == [gpu['index'] for gpu in settings['gpus']]
    for from_xml, from_csv in zip(info['gpus'], settings['gpus']):
        assert type_errors(from_xml, GPU_RECORD) == [] and type_errors(from_csv, GPU_RECORD) == []
        xml_leaves, csv_leaves = leaves(from_xml), leaves(from_csv)
        shared = sorted(set(xml_leaves) & set(csv_leaves))
        # Every key the settings module returns is one nvidia_smi_info returns too.
        assert shared == sorted(csv_leaves)
        for key in shared:
            assert type(xml_leaves[key]) is type(csv_leaves[key]), (key, xml_leaves[key], csv_leaves[key])
            assert xml_leaves[key] == csv_leaves[key], key
