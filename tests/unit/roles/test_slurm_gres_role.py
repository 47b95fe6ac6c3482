# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The slurm_gres role run by ansible-playbook on this machine against the simulated nvidia-smi.

Real Slurm judges the files in the fleet scenario (slurmd -G); here, in
seconds: the files for an HGX node and for an A100 with MIG devices, a rerun
that changes nothing, check mode without a driver, and the failure without one.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.simulator.conftest import SIM_BIN, make_host

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

PLAY = """
- name: slurm_gres
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: {python}
  environment: {environment}
  tasks:
    - name: Run the role
      block:
        - name: Include slurm_gres
          ansible.builtin.include_role:
            name: gpufleet.nvidia.slurm_gres
          vars: {role_vars}
        - name: Record the result
          ansible.builtin.copy:
            content: '{{{{ {{"failed": false, "slurm_gres": slurm_gres | default(none)}} | to_json }}}}'
            dest: {result}
            mode: "0644"
          check_mode: false
      rescue:
        - name: Record the failure
          ansible.builtin.copy:
            content: '{{{{ {{"failed": true, "msg": ansible_failed_result.msg}} | to_json }}}}'
            dest: {result}
            mode: "0644"
          check_mode: false
"""


@pytest.fixture
def run_role(tmp_path):
    sims = []

    def run(profile, check=False, setup=(), load=True, name='run', **role_vars):
        root = tmp_path / profile
        if not root.exists():
            sim = make_host(str(root), profile, load=load)
            sims.append(sim)
            for args in setup:
                done = sim.smi(*args)
                assert done.returncode == 0, done.stdout + done.stderr
        lscpu = tmp_path / 'lscpu'
        lscpu.write_text('#!/bin/sh\necho "# CPU,Core,Socket"\n'
                         'i=0; while [ $i -lt 224 ]; do echo "$i,$((i % 112)),$(((i % 112) / 56))"; i=$((i + 1)); done\n')
        lscpu.chmod(0o755)
        environment = {'NVIDIA_SIM_ROOT': str(root), 'NVIDIA_SIM_LIB': os.path.dirname(SIM_BIN),
                       'PATH': SIM_BIN + os.pathsep + os.environ.get('PATH', '')}
        variables = dict({'slurm_gres_conf_path': str(tmp_path / profile / 'etc/slurm/gres.conf'),
                          'slurm_gres_node_conf_path': str(tmp_path / profile / 'etc/slurm/gpufleet-node.conf'),
                          'slurm_gres_lscpu_command': [str(lscpu)], 'slurm_gres_node_name': 'node01',
                          'slurm_gres_real_memory_mib': 2000000}, **role_vars)
        result = tmp_path / ('%s.json' % name)
        playbook = tmp_path / ('%s.yml' % name)
        playbook.write_text(PLAY.format(python=sys.executable, environment=json.dumps(environment),
                                        role_vars=json.dumps(variables), result=result))
        argv = [PLAYBOOK_BIN, '-i', 'localhost,', str(playbook)] + (['--check'] if check else [])
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              cwd=str(tmp_path), timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:]
        outcome = json.loads(result.read_text())
        outcome['output'] = proc.stdout
        # Less the task recording the result.
        outcome['changed'] = int(proc.stdout.rsplit('changed=', 1)[1].split()[0]) - (0 if check else 1)
        gres = tmp_path / profile / 'etc/slurm/gres.conf'
        outcome['gres.conf'] = gres.read_text() if gres.exists() else None
        node = tmp_path / profile / 'etc/slurm/gpufleet-node.conf'
        outcome['node.conf'] = node.read_text() if node.exists() else None
        return outcome

    yield run
    for sim in sims:
        sim.cleanup()


def _lines(text):
    return [line for line in text.splitlines() if not line.startswith('#')]


def test_hgx_node_and_rerun(run_role):
    first = run_role('hgx_h100_8gpu')
    assert not first['failed'], first
    assert _lines(first['gres.conf']) == (
        ['NodeName=node01 Name=gpu Type=h100 File=/dev/nvidia%d Cores=0-55' % i for i in range(4)]
        + ['NodeName=node01 Name=gpu Type=h100 File=/dev/nvidia%d Cores=56-111' % i for i in range(4, 8)])
    node_line = ('NodeName=node01 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2 '
                 'RealMemory=2000000 Gres=gpu:h100:8')
    assert _lines(first['node.conf']) == [node_line]
    assert first['slurm_gres']['node_line'] == node_line and first['slurm_gres']['count'] == 8
    assert first['changed'] == 3, first['output']  # the directory and the two files
    again = run_role('hgx_h100_8gpu', name='again')
    assert again['changed'] == 0, again['output']
    assert again['gres.conf'] == first['gres.conf']


def test_a100_mig_devices_and_autodetect(run_role):
    # Two 3g.20gb GPU instances (profile 9) with their compute instances.
    outcome = run_role('a100_40gb_mig', setup=[('mig', '-cgi', '9,9', '-C')], slurm_gres_cores=False,
                       slurm_gres_node_options={'Weight': 10})
    lines = _lines(outcome['gres.conf'])
    assert len(lines) == 2 and all(' Type=a100_3g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap' in line
                                   for line in lines), lines
    assert outcome['slurm_gres']['types'] == {'a100_3g.20gb': 2}
    assert _lines(outcome['node.conf']) == ['NodeName=node01 RealMemory=2000000 Gres=gpu:a100_3g.20gb:2 Weight=10']
    nvml = run_role('a100_40gb_mig', slurm_gres_autodetect_nvml=True, slurm_gres_cores=False, name='nvml')
    assert _lines(nvml['gres.conf']) == ['NodeName=node01 AutoDetect=nvml']


def test_without_a_driver(run_role):
    checked = run_role('driver_not_loaded', check=True, load=False, name='check')
    assert not checked['failed'] and checked['gres.conf'] is None
    assert 'nothing to describe to Slurm yet' in checked['output']
    failed = run_role('driver_not_loaded', load=False, name='real')
    assert failed['failed'] and 'Converge the node with site.yml first' in failed['msg']
