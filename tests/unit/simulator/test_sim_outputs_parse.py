# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's parsers read the simulator's output the way they read the real corpus.

The same checks as tests/unit/plugins/module_utils/test_real_corpus.py (every
"no value" spelling becomes None, identifiers stay strings, one record per
GPU), run over the simulator's output of every GPU profile, driver branch and
format, MIG devices and processes included.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import classify_failure
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils import test_real_corpus as corpus
from sim_hosts import make_host

DRIVERS = ('535.261.03', '550.163.01', '570.195.03', '580.95.05', '590.48.01')
GPU_PROFILES = ('hgx_h100_8gpu', 'l40s_2gpu', 'a100_40gb_mig')
GPU_FIELDS = ('index,name,uuid,serial,pci.bus_id,memory.total,memory.used,power.draw,power.limit,'
              'temperature.gpu,temperature.memory,utilization.gpu,ecc.mode.current,mig.mode.current,'
              'persistence_mode,compute_mode,clocks.sm,fan.speed,fabric.state,display_mode,'
              'clocks.applications.graphics,retired_pages.pending,ecc.errors.uncorrected.volatile.total')
APP_FIELDS = 'pid,process_name,used_gpu_memory,gpu_uuid,gpu_bus_id,gpu_name'


def _entry(fmt, profile, **extra):
    entry = {'file': 'simulator/%s/%s' % (profile, fmt), 'format': fmt, 'fidelity': [], 'mig': None,
             'nics': None, 'options': 'csv', 'query_fields': None, 'exit_code': None}
    entry.update(extra)
    return entry


@pytest.fixture(scope='module', params=DRIVERS)
def hosts(request, tmp_path_factory):
    """Every GPU profile at one driver, with a process, and the A100 with MIG devices and a MIG process."""
    base = tmp_path_factory.mktemp('parse-' + request.param)
    made = {}
    for profile in GPU_PROFILES:
        made[profile] = make_host(str(base / profile), profile, request.param)
    made['hgx_h100_8gpu'].start_workload('--gpu', '2', '--memory', '4096', '--name', '/opt/app, with a comma')
    made['l40s_2gpu'].start_workload('--gpu', '1', '--memory', '512')
    mig = made['a100_40gb_mig']
    assert mig.smi('mig', '-cgi', '9,14,19', '-C').returncode == 0
    mig.start_workload('--gpu', '0', '--mig-device', '2', '--memory', '128')
    yield request.param, made
    for host in made.values():
        host.cleanup()


@pytest.mark.parametrize('profile', GPU_PROFILES)
def test_parsers_read_the_simulator(hosts, profile):
    driver, made = hosts
    host = made[profile]
    mig = profile == 'a100_40gb_mig'
    corpus.check_xml(_entry('q-x', profile, mig=mig), host.smi('-q', '-x').stdout)
    corpus.check_list(_entry('list', profile, mig=mig), host.smi('-L').stdout)
    fields = GPU_FIELDS.split(',')
    for options in ('csv', 'csv,noheader', 'csv,noheader,nounits'):
        corpus.check_query(_entry('query-gpu', profile, options=options, query_fields=fields),
                           host.smi('--query-gpu=' + GPU_FIELDS, '--format=' + options).stdout)
    corpus.check_query(_entry('query-compute-apps', profile, query_fields=APP_FIELDS.split(',')),
                       host.smi('--query-compute-apps=' + APP_FIELDS, '--format=csv').stdout)
    corpus.check_topology(_entry('topo', profile, nics=profile == 'hgx_h100_8gpu'), host.smi('topo', '-m').stdout)
    corpus.check_nvlink(_entry('nvlink', profile), host.smi('nvlink', '-s').stdout)
    if mig:
        corpus.check_mig(_entry('mig-lgip', profile), host.smi('mig', '-lgip').stdout)
        corpus.check_mig(_entry('mig-lgi', profile), host.smi('mig', '-lgi').stdout)
        corpus.check_mig(_entry('mig-lci', profile), host.smi('mig', '-lci').stdout)
    assert driver


@pytest.mark.parametrize('state,reason', [
    ('nvml_missing', 'nvml_missing'), ('not_loaded', 'driver_not_loaded'), ('mismatch', 'version_mismatch'),
    ('nvml_init_error', 'nvml_unknown_error'), ('unreadable_gpu', 'gpu_unreadable'), ('unknown_option', 'invalid_argument'),
])
def test_failure_classifier_reads_the_simulated_failures(sim_root, state, reason):
    host = sim_root('l40s_2gpu', driver='570.195.03', load=state != 'not_loaded', nvml=state != 'nvml_missing')
    args = ['-L']
    if state == 'mismatch':
        host.install_driver('580.95.05')
    elif state == 'nvml_init_error':
        host.write('run/nvidia-sim/nvml-init-error', 'Unknown Error\n')
    elif state == 'unreadable_gpu':
        host.write('var/lib/nvidia-sim/state.json', '{"gpus": {"1": {"nvml_device_error": "Unknown Error"}}}\n')
    elif state == 'unknown_option':
        args = ['--frobnicate']
    result = host.smi(*args)
    failure = classify_failure(result.returncode, result.stdout, result.stderr)
    assert failure.reason == reason, (result.returncode, result.stdout)
    if state == 'unreadable_gpu':
        assert failure.pci_bus_id == '0000:ca:00.0'
