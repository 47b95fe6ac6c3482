# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report: document, self-contained HTML (also for 500 nodes), text table, stats, and the action."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re
import time
from html.parser import HTMLParser
from unittest import mock

import pytest

from ansible_collections.gpufleet.nvidia.plugins.action import gpu_health_report
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.health_report import (
    build_report,
    render_html,
    render_json,
    render_stats,
    render_table,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report_fixtures import (
    checks,
    result_for,
    synthetic_gpu,
    synthetic_results,
)

GENERATED = '2026-01-10 09:30:00 UTC'
# Anything that would make a browser fetch: a URL with a scheme or a network
# path, in an attribute, a CSS url() or @import.
EXTERNAL = re.compile(r'(?:https?:|ftp:|wss?:)?//[^\s"\'<>)]+|@import|url\(', re.I)


class Elements(HTMLParser):
    """Every tag with its attributes, and the text of the page."""

    def __init__(self):
        HTMLParser.__init__(self)
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(page):
    parser = Elements()
    parser.feed(page)
    return parser


def small_fleet():
    healthy = [synthetic_gpu(i, 'NVIDIA H100 80GB HBM3', 81559, 1) for i in range(8)]
    hot = synthetic_gpu(0, 'NVIDIA L40S', 46068, 2)
    hot['temperature'] = {'gpu_c': 96, 'slowdown_c': 95}
    finding = {'code': 'temperature_at_slowdown', 'severity': 'critical',
               'gpu': {'index': 0, 'uuid': hot['uuid'], 'pci_bus_id': hot['pci_bus_id']},
               'evidence': 'GPU 0: reached its slowdown temperature <96 C> & more', 'advice': 'Check the "fans".'}
    driver = {'version': '570.195.03', 'branch': '570', 'cuda_version': '12.8'}
    return {
        'hgx01': result_for(healthy, driver, [], checks()),
        'l40s01<script>': result_for([hot], driver, [finding], checks(dcgm='fail', gpus=1)),
        'gone01': None,
    }


def test_document_totals_groups_and_hosts():
    document = build_report(small_fleet(), GENERATED)
    assert document['totals'] == {'hosts': 3, 'healthy': 1, 'unhealthy': 1, 'no_data': 1, 'gpus': 9,
                                  'findings': {'critical': 1, 'warning': 0, 'info': 0}, 'checks_failed': 1}
    assert document['by_model'] == [{'model': 'NVIDIA H100 80GB HBM3', 'gpus': 8, 'hosts': 1},
                                    {'model': 'NVIDIA L40S', 'gpus': 1, 'hosts': 1}]
    assert document['by_driver'] == [{'driver': '570.195.03', 'cuda': '12.8', 'gpus': 9, 'hosts': 2}]
    assert [(h['host'], h['status']) for h in document['hosts']] == [
        ('gone01', 'no_data'), ('hgx01', 'healthy'), ('l40s01<script>', 'unhealthy')]
    # Supported clocks are left out of the report; everything else of the record stays.
    assert 'supported_clocks' not in document['hosts'][1]['gpus'][0]
    assert json.loads(render_json(document))['schema'] == 'gpufleet.nvidia.health/1'


def test_html_is_one_escaped_page_that_loads_nothing():
    page = render_html(build_report(small_fleet(), GENERATED))
    parsed = parse(page)
    tags = [tag for tag, _attrs in parsed.tags]
    assert tags.count('html') == 1 and tags.count('style') == 1 and tags.count('script') == 1
    assert not set(tags) & {'link', 'img', 'iframe', 'object', 'embed', 'video', 'audio', 'source', 'base', 'form'}
    for tag, attrs in parsed.tags:
        assert 'src' not in attrs, tag
        assert attrs.get('href') in (None, '#'), (tag, attrs)
    assert not EXTERNAL.search(page), EXTERNAL.search(page).group(0)
    csp = [attrs['content'] for tag, attrs in parsed.tags if attrs.get('http-equiv') == 'Content-Security-Policy']
    assert csp and csp[0].startswith("default-src 'none'")
    # Text from the hosts is escaped, never markup.
    assert page.count('<script>') == 1
    assert 'l40s01&lt;script&gt;' in page and '&lt;96 C&gt; &amp; more' in page and 'the &quot;fans&quot;' in page


def test_html_shows_every_host_gpu_finding_and_check():
    fleet = small_fleet()
    page = render_html(build_report(fleet, GENERATED))
    for host, result in fleet.items():
        assert 'data-host="%s"' % host.replace('<', '&lt;').replace('>', '&gt;') in page
        for gpu in (result or {}).get('gpus', []):
            assert gpu['uuid'] in page
    assert 'temperature_at_slowdown' in page and 'class="f-critical"' in page
    assert 'check_dcgm_diag' in page and 'GPU 1 had uncorrectable memory errors' in page
    assert 'No health data: the host was unreachable' in page
    assert '1 of 3 hosts' not in page and '2 of 3 hosts need attention' in page


def test_table_and_stats():
    document = build_report(small_fleet(), GENERATED)
    table = render_table(document)
    assert table[0].split() == ['HOST', 'STATUS', 'GPUS', 'DRIVER', 'CUDA', 'C/W/I', 'CHECKS', 'MODELS']
    assert table[1].split()[:2] == ['l40s01<script>', 'unhealthy'] and 'FAIL dcgm_diag' in table[1]
    assert table[2].split()[:3] == ['gone01', 'no', 'data']
    assert table[3].split()[:2] == ['hgx01', 'healthy'] and table[3].endswith('8x NVIDIA H100 80GB HBM3')
    assert 'l40s01<script>: critical temperature_at_slowdown (GPU 0); check dcgm_diag failed' in table[4]
    assert table[5].startswith('gone01: No health data')
    assert table[-1].startswith('3 hosts: 1 healthy, 1 unhealthy, 1 without data; 9 GPUs')
    stats = render_stats(document, {'html': '/r/gpu-health.html'})
    assert stats['unhealthy_hosts'] == ['l40s01<script>'] and stats['hosts_without_data'] == ['gone01']
    assert stats['by_host']['l40s01<script>'] == {
        'status': 'unhealthy', 'codes': ['temperature_at_slowdown'], 'failed_checks': ['dcgm_diag']}


def test_500_nodes_stay_one_readable_page():
    fleet = synthetic_results(500)
    started = time.monotonic()
    document = build_report(fleet, GENERATED)
    page = render_html(document)
    elapsed = time.monotonic() - started
    assert elapsed < 20, elapsed
    assert len(page) < 8 * 1024 * 1024, len(page)
    parsed = parse(page)
    assert not EXTERNAL.search(page)
    rows = [attrs for tag, attrs in parsed.tags if tag == 'tr' and 'data-host' in attrs]
    gpu_count = sum(len(result['gpus']) for result in fleet.values() if result)
    assert document['totals']['hosts'] == 500 and document['totals']['gpus'] == gpu_count
    hosts_in_page = set(attrs['data-host'] for attrs in rows)
    assert hosts_in_page == set(fleet)
    for result in fleet.values():
        for gpu in (result or {}).get('gpus', []):
            assert gpu['uuid'] in page
    assert document['totals']['no_data'] == 10 and document['totals']['unhealthy'] > 0
    assert len(render_table(document)) < 600


def run_action(tmp_path, args, check_mode=False, hostvars=None):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.diff = False
    play_context = mock.MagicMock(check_mode=check_mode)
    action = gpu_health_report.ActionModule(task, mock.MagicMock(), play_context, mock.MagicMock(), mock.MagicMock(),
                                            mock.MagicMock())
    return action.run(task_vars={'hostvars': hostvars if hostvars is not None else dict(
        (host, {'gpu_health': result} if result else {}) for host, result in small_fleet().items())})


def test_the_action_writes_both_files_and_returns_table_and_stats(tmp_path):
    dest = tmp_path / 'report'
    result = run_action(tmp_path, {'hosts': ['hgx01', 'l40s01<script>', 'gone01'], 'dest': str(dest),
                                   'generated': GENERATED})
    assert result['changed'] is False and 'failed' not in result
    assert sorted(p.name for p in dest.iterdir()) == ['gpu-health.html', 'gpu-health.json']
    assert json.loads((dest / 'gpu-health.json').read_text())['generated'] == GENERATED
    assert result['files']['html'] == str(dest / 'gpu-health.html')
    assert result['unhealthy_hosts'] == ['l40s01<script>'] and result['hosts_without_data'] == ['gone01']
    assert result['table'][-1] == 'Report: %s (JSON: %s)' % (dest / 'gpu-health.html', dest / 'gpu-health.json')
    assert result['stats']['files'] == result['files']


def test_the_action_writes_nothing_in_check_mode_or_without_dest(tmp_path):
    dest = tmp_path / 'report'
    result = run_action(tmp_path, {'hosts': ['hgx01'], 'dest': str(dest)}, check_mode=True)
    assert not dest.exists() and result['files'] == {}
    assert result['table'][-1] == 'Check mode: the report was not written to %s.' % dest
    result = run_action(tmp_path, {'hosts': ['hgx01'], 'dest': ''})
    assert result['files'] == {} and result['totals']['hosts'] == 1


@pytest.mark.parametrize('args', [{'hosts': []}, {'hosts': ['a'], 'bogus': 1}])
def test_the_action_refuses_bad_arguments(tmp_path, args):
    with pytest.raises(gpu_health_report.AnsibleActionFail):
        run_action(tmp_path, args)


def test_acceptance_findings_replace_the_generic_check_row():
    """A failed acceptance test comes with its findings (code, action, source, threshold): the report shows
    those, not a second "check failed" row; a test that did not run is information, and the host stays healthy."""
    gpus = [synthetic_gpu(i, 'NVIDIA H100 80GB HBM3', 81559, 1) for i in range(8)]
    driver = {'version': '570.195.03', 'branch': '570', 'cuda_version': '12.8'}
    slow = {'code': 'nccl_allreduce_low', 'severity': 'critical', 'action': 'drain',
            'source': 'azurehpc-health-checks', 'check': 'nccl_allreduce', 'gpu': None,
            'evidence': 'NCCL all_reduce_perf over 8 GPUs at 16G: average bus bandwidth 401.2 GB/s, below 460.',
            'advice': 'Drain the node.',
            'threshold': {'name': 'nccl_allreduce_busbw_gbps_min', 'value': 460, 'source': 'azurehpc-health-checks'}}
    not_run = {'code': 'acceptance_not_run', 'severity': 'info', 'action': 'none', 'source': 'gpufleet',
               'check': 'nvbandwidth', 'gpu': None, 'advice': 'Install it.',
               'evidence': 'nvbandwidth not run: nvbandwidth is not installed (not on the PATH; or set '
                           'nvbandwidth_path).'}
    failed = checks() + [
        {'name': 'nvbandwidth', 'status': 'skipped', 'reason': 'nvbandwidth is not installed.', 'details': {}},
        {'name': 'nccl_allreduce', 'status': 'fail', 'reason': 'below 460 GB/s.', 'details': {}}]
    quiet = checks() + [
        {'name': 'nvbandwidth', 'status': 'skipped', 'reason': 'nvbandwidth is not installed.', 'details': {}}]
    document = build_report({'hgx01': result_for(gpus, driver, [slow, not_run], failed),
                             'hgx02': result_for(gpus, driver, [not_run], quiet)}, GENERATED)
    hosts = dict((h['host'], h) for h in document['hosts'])
    assert hosts['hgx01']['status'] == 'unhealthy' and hosts['hgx02']['status'] == 'healthy'
    assert [(e['code'], e['action'], e['hosts']) for e in document['by_code']] == [
        ('nccl_allreduce_low', 'drain', 1), ('acceptance_not_run', 'none', 2)]
    page = render_html(document)
    assert 'check_nccl_allreduce' not in page and 'nccl_allreduce_low' in page and 'acceptance_not_run' in page
    written = dict((h['host'], h) for h in json.loads(render_json(document))['hosts'])
    assert written['hgx01']['findings'][0]['threshold']['value'] == 460
