# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only nvidia-smi commands of every profile against golden files.

The golden files in ``expected/<profile>/`` were reviewed line by line against
captured output of real drivers (r535, r570, r580).  Regenerate them with
``NVIDIA_SIM_UPDATE_GOLDEN=1`` and review the diff before committing.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import io
import json
import os
import xml.dom.minidom

import pytest

from daemon_helpers import nvsim_module

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_DIR = os.path.join(HERE, 'expected')
SIM_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'nvidia_sim')

PROFILES_DIR = os.path.join(SIM_DIR, 'profiles')
# The driver whose layout a profile's golden files show: expected/<profile>/DRIVER
# (one branch per profile so that every report layout is covered).
DEFAULT_DRIVER = '570.195.03'


def _profile(name):
    with open(os.path.join(PROFILES_DIR, name + '.json')) as handle:
        return json.load(handle)


def _profiles():
    return sorted(name[:-5] for name in os.listdir(PROFILES_DIR) if name.endswith('.json'))


def _working(name):
    profile = _profile(name)
    return profile.get('driver_loadable', True) and bool(profile.get('gpus'))


GPU_PROFILES = [name for name in _profiles() if _working(name)]
BROKEN_PROFILES = [name for name in _profiles() if not _working(name)]


def driver_of(profile):
    path = os.path.join(EXPECTED_DIR, profile, 'DRIVER')
    if not os.path.exists(path) and os.environ.get('NVIDIA_SIM_UPDATE_GOLDEN'):
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path))
        with open(path, 'w') as handle:
            handle.write(DEFAULT_DRIVER + '\n')
    with open(path) as handle:
        return handle.read().strip()


BROAD_FIELDS = ','.join([
    'index', 'name', 'uuid', 'serial', 'pci.bus_id', 'pci.device_id', 'pci.sub_device_id', 'driver_version',
    'vbios_version', 'compute_cap', 'persistence_mode', 'compute_mode', 'mig.mode.current', 'mig.mode.pending',
    'ecc.mode.current', 'ecc.mode.pending', 'memory.total', 'memory.reserved', 'memory.used', 'memory.free',
    'power.draw', 'power.limit', 'enforced.power.limit', 'power.default_limit', 'power.min_limit',
    'power.max_limit', 'clocks.sm', 'clocks.max.sm', 'clocks.applications.graphics',
    'clocks.default_applications.memory', 'temperature.gpu', 'fan.speed', 'pstate', 'utilization.gpu',
    'pcie.link.gen.current', 'pcie.link.gen.max', 'pcie.link.width.current', 'pcie.link.width.max',
    'clocks_throttle_reasons.active', 'clocks_event_reasons.gpu_idle', 'retired_pages.sbe',
    'ecc.errors.uncorrected.volatile.total', 'fabric.state', 'count',
])
ALIAS_FIELDS = 'gpu_name,gpu_bus_id,gpu_uuid,gpu_serial,clocks.gr,clocks.mem,clocks.max.gr,inforom.image'

GPU_CASES = [
    ('list', ['-L'], 0),
    ('summary', [], 0),
    ('version', ['--version'], 0),
    ('query_gpu', ['--query-gpu=' + BROAD_FIELDS, '--format=csv'], 0),
    ('query_gpu_noheader_nounits', ['--query-gpu=' + BROAD_FIELDS, '--format=csv,noheader,nounits'], 0),
    ('query_gpu_aliases', ['--query-gpu=' + ALIAS_FIELDS, '--format=csv'], 0),
    ('query_gpu_select_index', ['-i', '1', '--query-gpu=index,pci.bus_id', '--format=csv,noheader'], 0),
    ('query_gpu_select_many', ['-i', '0,1', '--query-gpu=index,uuid', '--format=csv,noheader'], 0),
    ('query_gpu_unknown_field', ['--query-gpu=name,bogus.field', '--format=csv'], 2),
    ('query_gpu_select_missing', ['-i', '9', '--query-gpu=name', '--format=csv'], 6),
    ('query_compute_apps', ['--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id',
                            '--format=csv'], 0),
    ('query_remapped_rows', ['--query-remapped-rows=gpu_bus_id,remapped_rows.correctable,'
                             'remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure',
                             '--format=csv'], 0),
    ('query_supported_clocks', ['-i', '0', '--query-supported-clocks=gpu_bus_id,mem,gr', '--format=csv'], 0),
    ('q', ['-q', '-i', '0'], 0),
    ('qx', ['-q', '-x', '-i', '0'], 0),
    ('qd_memory', ['-q', '-d', 'MEMORY'], 0),
    ('qd_ecc', ['-q', '-d', 'ECC'], 0),
    ('qd_temperature', ['-q', '-d', 'TEMPERATURE'], 0),
    ('qd_power', ['-q', '-d', 'POWER'], 0),
    ('qd_clock', ['-q', '-d', 'CLOCK'], 0),
    ('qd_supported_clocks', ['-q', '-d', 'SUPPORTED_CLOCKS', '-i', '0'], 0),
    ('qd_performance', ['-q', '-d', 'PERFORMANCE'], 0),
    ('qd_row_remapper', ['-q', '-d', 'ROW_REMAPPER,PAGE_RETIREMENT'], 0),
    ('qd_invalid', ['-q', '-d', 'NOPE'], 2),
    ('topo', ['topo', '-m'], 0),
    ('nvlink', ['nvlink', '-s'], 0),
    ('mig_lgip', ['mig', '-lgip'], 'mig'),
    ('mig_lgipp', ['mig', '-lgipp'], 'mig'),
    ('mig_lgi', ['mig', '-lgi'], 6),
    ('invalid_option', ['--frobnicate'], 2),
]

BROKEN_CASES = [
    ('list', ['-L']),
    ('summary', []),
    ('query_gpu', ['--query-gpu=name', '--format=csv']),
    ('qx', ['-q', '-x']),
    ('topo', ['topo', '-m']),
    ('mig_lgi', ['mig', '-lgi']),
    ('set_pm', ['-pm', '1']),
]


def broken_rc(name):
    """Driver never loads: 9; no GPU on the bus: 6."""
    return 9 if not _profile(name).get('driver_loadable', True) else 6


def _golden(profile, case, actual):
    path = os.path.join(EXPECTED_DIR, profile, case + '.txt')
    if os.environ.get('NVIDIA_SIM_UPDATE_GOLDEN'):
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path))
        with open(path, 'w') as handle:
            handle.write(actual)
    with open(path) as handle:
        return handle.read()


@pytest.mark.parametrize('profile', GPU_PROFILES)
@pytest.mark.parametrize('case,args,rc', GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_profile_output_matches_golden(shared_sim_root, profile, case, args, rc):
    driver = driver_of(profile)
    host = shared_sim_root(profile, driver=driver)
    result = host.smi(*args)
    assert result.stdout == _golden(profile, case, result.stdout)
    if case in ('query_gpu_select_index', 'query_gpu_select_many') and len(_profile(profile)['gpus']) < 2:
        rc = 6
    if rc == 'mig':
        # Only profiles with MIG enabled list MIG; elsewhere: "No MIG-enabled devices found."
        mig = [_profile(profile)['models'][gpu['model']].get('mig') for gpu in _profile(profile)['gpus']]
        rc = 0 if any(m and m.get('default_enabled') for m in mig) else 6
    if case == 'version' and int(driver.split('.')[0]) < 550:
        rc = 2  # --version exists from 550 on (the -h list of the real 535 and 550 binaries)
    assert result.returncode == rc, result.stdout + result.stderr
    assert result.stderr == ''


@pytest.mark.parametrize('profile', BROKEN_PROFILES)
@pytest.mark.parametrize('case,args', BROKEN_CASES, ids=[c[0] for c in BROKEN_CASES])
def test_broken_profile_output_matches_golden(shared_sim_root, profile, case, args):
    host = shared_sim_root(profile, driver=driver_of(profile))
    result = host.smi(*args)
    assert result.stdout == _golden(profile, case, result.stdout)
    assert result.returncode == broken_rc(profile)


@pytest.mark.parametrize('profile', GPU_PROFILES)
def test_select_by_uuid_and_bus_id(shared_sim_root, profile):
    host = shared_sim_root(profile, driver=driver_of(profile))
    last = _profile(profile)['gpus'][-1]
    expected = '%d, %s\n' % (len(_profile(profile)['gpus']) - 1, last['bus_id'])
    short_bus_id = last['bus_id'][4:].lower()
    for selector in (last['uuid'], last['bus_id'], short_bus_id):
        result = host.smi('-i', selector, '--query-gpu=index,pci.bus_id', '--format=csv,noheader')
        assert (result.returncode, result.stdout) == (0, expected)


@pytest.mark.parametrize('profile', GPU_PROFILES)
def test_full_xml_is_well_formed(shared_sim_root, profile):
    host = shared_sim_root(profile, driver=driver_of(profile))
    result = host.smi('-q', '-x')
    assert result.stdout.startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v1')
    document = xml.dom.minidom.parseString(result.stdout)
    gpus = document.getElementsByTagName('gpu')
    count = len(_profile(profile)['gpus'])
    assert len(gpus) == count
    assert document.getElementsByTagName('attached_gpus')[0].firstChild.data == str(count)
    assert [g.getAttribute('id') for g in gpus] == [g['bus_id'] for g in _profile(profile)['gpus']]
    assert document.getElementsByTagName('driver_version')[0].firstChild.data == driver_of(profile)


@pytest.mark.parametrize('profile', GPU_PROFILES)
@pytest.mark.parametrize('driver', ['535.261.03', '550.163.01', '570.195.03', '580.95.05', '590.48.01'])
def test_every_query_gpu_field_answers(shared_sim_root, profile, driver):
    query = nvsim_module('smi.query')
    names = [entry[0] for entry in query.fields_for(int(driver.split('.')[0]))]
    host = shared_sim_root(profile, driver=driver)
    result = host.smi('--query-gpu=' + ','.join(names), '--format=csv')
    assert result.returncode == 0, result.stdout
    rows = list(csv.reader(io.StringIO(result.stdout), skipinitialspace=True))
    assert [name.split(' [')[0] for name in rows[0]] == names
    assert len(rows) == 1 + len(_profile(profile)['gpus'])
    # Only platform.chassis_serial_number is an empty cell (as in the 590-610 captures).
    empty = [name for row in rows[1:] for name, cell in zip(names, row) if not cell]
    assert set(empty) <= {'platform.chassis_serial_number'}
    assert all(len(row) == len(names) for row in rows[1:])
