# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet checks on nodes read from a real capture: four HGX H100 nodes of the real k8s-test-infra capture,
one value changed where a test says so."""

from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_xml
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.fleet_health import fleet_findings
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.health_report import build_report

CAPTURE = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures', 'real', 'q-x',
                       'h100-80gb-hbm3_580.105.08_k8stestinfra.xml')


@pytest.fixture
def nodes():
    with open(CAPTURE) as handle:
        report = parse_xml(handle.read())
    hosts = []
    for number in range(4):
        gpus = copy.deepcopy(report['gpus'])
        for gpu in gpus:
            gpu['uuid'] = 'GPU-%d-%d' % (number, gpu['index'])
            gpu['utilization_gpu_percent'] = 0
        hosts.append({'host': 'hgx%02d' % number, 'status': 'healthy', 'gpus': gpus,
                      'driver': {'version': report['driver_version']}})
    return hosts


def codes(findings):
    return sorted((host, f['code'], (f['gpu'] or {}).get('index')) for host, found in findings.items() for f in found)


def test_a_consistent_fleet_has_no_fleet_finding(nodes):
    findings, rows = fleet_findings(nodes)
    assert findings == {} and rows == []


def test_the_odd_vbios_out(nodes):
    majority = nodes[0]['gpus'][0]['vbios_version']
    nodes[2]['gpus'][5]['vbios_version'] = '96.00.74.00.0D'
    findings, rows = fleet_findings(nodes)
    assert codes(findings) == [('hgx02', 'fleet_version_mismatch', 5)]
    finding = findings['hgx02'][0]
    assert (finding['fleet_value'], finding['value'], finding['fleet']) == (majority, '96.00.74.00.0D', True)
    assert (finding['severity'], finding['action'], finding['source']) == ('warning', 'none', 'gpufleet')
    assert '31 of 32 NVIDIA H100 80GB HBM3 GPUs' in finding['evidence']
    assert rows == [{'model': 'NVIDIA H100 80GB HBM3', 'field': 'vbios_version', 'label': 'VBIOS',
                     'values': [[majority, 31], ['96.00.74.00.0D', 1]]}]


def test_a_driver_behind_is_one_finding_per_host_and_a_tie_names_nobody(nodes):
    nodes[3]['driver'] = {'version': '570.195.03'}
    findings, _rows = fleet_findings(nodes)
    assert codes(findings) == [('hgx03', 'fleet_version_mismatch', None)]
    nodes[2]['driver'] = {'version': '570.195.03'}
    findings, rows = fleet_findings(nodes)
    assert findings == {} and rows[0]['values'] == [['570.195.03', 16], ['580.105.08', 16]]


def test_outliers_against_the_median_of_the_model(nodes):
    for host in nodes:
        for gpu in host['gpus']:
            gpu['temperature']['gpu_c'] = 30
    nodes[1]['gpus'][4]['temperature']['gpu_c'] = 40       # 10 C above: at the margin, not over
    nodes[1]['gpus'][6]['temperature']['gpu_c'] = 41       # over
    nodes[2]['gpus'][0]['utilization_gpu_percent'] = 90    # busy and hot: not judged
    nodes[2]['gpus'][0]['temperature']['gpu_c'] = 70
    nodes[0]['gpus'][1]['power']['limit_enforced_w'] = 500.0
    nodes[3]['gpus'][2]['clocks_max']['sm'] = 1500
    findings, _rows = fleet_findings(nodes)
    assert codes(findings) == [('hgx00', 'fleet_outlier_power_limit', 1), ('hgx01', 'fleet_outlier_temperature', 6),
                               ('hgx03', 'fleet_outlier_clocks', 2)]
    hot = findings['hgx01'][0]
    assert 'idle at 41 C, 11 C above the median of 31 idle' in hot['evidence']
    assert hot['threshold'] == {'name': 'fleet_outlier_temperature_c', 'value': 10, 'source': 'gpufleet'}
    # A site's margin, and too small a fleet to compare.
    looser, _rows = fleet_findings(nodes, {'fleet_outlier_temperature_c': 15, 'fleet_outlier_power_limit_percent': None,
                                           'fleet_outlier_clocks_percent': 50})
    assert looser == {}
    assert fleet_findings(nodes[:1], {'fleet_min_gpus': 9})[0] == {}


def test_the_report_carries_fleet_findings_without_changing_a_nodes_status(nodes):
    nodes[2]['gpus'][5]['vbios_version'] = '96.00.74.00.0D'
    results = dict((host['host'], {'healthy': True, 'gpus': host['gpus'], 'driver': host['driver'], 'findings': [],
                                   'checks': []}) for host in nodes)
    document = build_report(results, 'now')
    odd = [h for h in document['hosts'] if h['host'] == 'hgx02'][0]
    assert odd['status'] == 'healthy' and [f['code'] for f in odd['findings']] == ['fleet_version_mismatch']
    assert odd['summary']['warning'] == 1
    assert document['by_code'] == [{'code': 'fleet_version_mismatch', 'action': 'none', 'severity': 'warning',
                                    'source': 'gpufleet', 'findings': 1, 'hosts': 1, 'gpus': 1}]
    with pytest.raises(ValueError, match='fleet_outlier_temp'):
        build_report(results, 'now', thresholds={'fleet_outlier_temp': 3})


def _unhealthy(action, critical=1, state=None):
    findings = [{'code': 'x', 'severity': 'critical', 'action': action}] * critical
    return {'healthy': False, 'findings': findings, 'checks': [], 'drain_state': state}


def test_the_brake_drains_the_costliest_need_first_and_names_the_rest():
    from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.fleet_health import drain_plan
    nodes = dict(('node%02d' % n, {'healthy': True, 'findings': [], 'checks': []}) for n in range(10))
    nodes['node03'] = _unhealthy('reset')
    nodes['node05'] = _unhealthy('reboot')
    nodes['node08'] = _unhealthy('reset', critical=2)
    plan = drain_plan(nodes, 10, 10)
    assert plan['limit'] == 1 and plan['drain'] == [{'host': 'node05', 'need': 'reboot'}]
    assert plan['braked'] == [{'host': 'node08', 'need': 'reset'}, {'host': 'node03', 'need': 'reset'}]
    assert drain_plan(nodes, 30, 10)['braked'] == [] and drain_plan(nodes, 0, 10)['drain'] == []
    # 10 % of 5 hosts is no host: the brake rounds down.
    assert drain_plan(nodes, 10, 5)['limit'] == 0


def test_drained_nodes_do_not_count_and_foreign_drains_are_never_touched():
    from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.fleet_health import drain_plan
    nodes = {
        'a': _unhealthy('rma', state={
            'drained': True, 'by': 'someone else', 'reason': 'bad fan, ticket 4711', 'state': 'IDLE+DRAIN'}),
        'b': _unhealthy('reboot', state={'drained': True, 'by': 'gpufleet.nvidia', 'reason': 'gpufleet: gpu health'}),
        'c': _unhealthy('drain', state={'drained': False, 'by': None}),
        'd': {'healthy': False, 'findings': [{'code': 'persistence_mode_off', 'severity': 'warning', 'action': 'none'}],
              'checks': [{'name': 'cdi', 'status': 'fail'}]},
    }
    plan = drain_plan(nodes, 50, 4)
    assert plan['foreign'] == [{'host': 'a', 'reason': 'bad fan, ticket 4711', 'state': 'IDLE+DRAIN'}]
    assert plan['already'] == [{'host': 'b', 'reason': 'gpufleet: gpu health'}]
    # A failed check counts as drain; by name after that.
    assert plan['drain'] == [{'host': 'c', 'need': 'drain'}, {'host': 'd', 'need': 'drain'}] and plan['braked'] == []
    assert plan['message'] == [
        'Drain brake: 2 of 4 hosts (health_drain_max_share 50%) may be drained in one run; drained now: c, d.',
        'a: already drained by someone else (bad fan, ticket 4711); left as it is, and gpufleet never undrains it.',
        'b: already drained by gpufleet (gpufleet: gpu health).']
    # Fleet findings and findings below fail_on do not raise a node's need.
    nodes['c']['findings'] = [
        {'code': 'fleet_version_mismatch', 'severity': 'warning', 'action': 'rma', 'fleet': True},
        {'code': 'y', 'severity': 'info', 'action': 'reboot'},
        {'code': 'z', 'severity': 'critical', 'action': 'drain'}]
    assert drain_plan(nodes, 50, 4)['drain'][0] == {'host': 'c', 'need': 'drain'}
