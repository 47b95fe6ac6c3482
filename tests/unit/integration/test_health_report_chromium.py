# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTML health report opened in headless Chromium (Debian's chromium package; make setup installs it).

The page must show every host and GPU of its report after its script ran
(``--dump-dom``), name no external resource, and make Chromium request
nothing: the network log (``--log-net-log``) may hold only Chromium's own
background requests, whose initiator is "not an origin", never one made for
the page (initiator of the file origin, network isolation key ``file://``). A
page that does load something proves the check sees it.

``GPUFLEET_HEALTH_SCREENSHOT=docs/health-report.png`` also writes the
screenshot of the demo-like report there (how the README's picture is made).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.health_report import build_report, render_html
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report_fixtures import (
    demo_results,
    synthetic_results,
)

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason='chromium is not installed (make setup installs it)')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync']
EXTERNAL = re.compile(r'(?:\b(?:src|href|action|poster|data)\s*=\s*["\']?(?!#|["\'])[^"\'\s>]+)|@import|url\(', re.I)
PNG = b'\x89PNG\r\n\x1a\n'


def chromium(tmp_path, page, *args):
    """Open ``page`` (a path) in headless Chromium; return (stdout, page requests from the net log)."""
    profile = tmp_path / ('profile-%s' % os.path.basename(page))
    net_log = tmp_path / ('net-%s.json' % os.path.basename(page))
    done = subprocess.run([CHROMIUM] + FLAGS + ['--user-data-dir=%s' % profile, '--log-net-log=%s' % net_log]
                          + list(args) + ['file://%s' % page], capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode('utf-8', 'replace')[-3000:]
    return done.stdout.decode('utf-8'), page_requests(net_log)


def page_requests(net_log):
    """URLs Chromium requested for a document (not for itself) according to its net log."""
    text = net_log.read_text()
    try:
        log = json.loads(text)
    except ValueError:
        # Chromium may end the process before closing the event list.
        log = json.loads(text.rstrip().rstrip(',') + ']}')
    names = dict((number, name) for name, number in log['constants']['logEventTypes'].items())
    requests = []
    for event in log['events']:
        params = event.get('params') or {}
        if names.get(event['type']) != 'URL_REQUEST_START_JOB' or 'url' not in params:
            continue
        if params.get('initiator') != 'not an origin' or 'file://' in str(params.get('network_isolation_key')):
            requests.append(params['url'])
    return requests


def write_report(tmp_path, name, results):
    document = build_report(results, '2026-01-10 09:30:00 UTC')
    path = tmp_path / name
    path.write_text(render_html(document))
    return str(path), document


def test_the_check_sees_a_page_that_loads_something(tmp_path):
    page = tmp_path / 'loads.html'
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                    '<style>@import url("http://127.0.0.1:9/a.css");</style>text</body></html>')
    dom, requests = chromium(tmp_path, str(page), '--dump-dom')
    assert 'text' in dom
    assert sorted(requests) == ['http://127.0.0.1:9/a.css', 'http://127.0.0.1:9/x.png']
    assert EXTERNAL.search(dom)


def check_dom(dom, document):
    assert not EXTERNAL.search(dom), EXTERNAL.search(dom).group(0)
    for host in document['hosts']:
        assert 'data-host="%s"' % host['host'] in dom, host['host']
        for gpu in host['gpus']:
            assert gpu['uuid'] in dom, (host['host'], gpu['uuid'])
    assert dom.count('<tr data-host=') >= sum(len(h['gpus']) for h in document['hosts']) + len(document['hosts'])


def test_demo_report_renders_every_host_and_gpu_and_loads_nothing(tmp_path):
    path, document = write_report(tmp_path, 'gpu-health.html', demo_results(str(tmp_path / 'sim')))
    assert [h['status'] for h in document['hosts']] == ['unhealthy', 'healthy', 'unhealthy']
    dom, requests = chromium(tmp_path, path, '--dump-dom')
    assert requests == []
    check_dom(dom, document)
    assert 'xid_79' in dom and 'GPU has fallen off the bus' in dom and 'persistence_mode_off' in dom
    screenshot = tmp_path / 'health-report.png'
    _out, requests = chromium(tmp_path, path, '--screenshot=%s' % screenshot, '--window-size=1500,1700',
                              '--hide-scrollbars')
    assert requests == []
    assert screenshot.read_bytes()[:8] == PNG and screenshot.stat().st_size > 20000
    target = os.environ.get('GPUFLEET_HEALTH_SCREENSHOT')
    if target:
        shutil.copyfile(str(screenshot), target)


def test_500_node_report_is_one_file_that_renders(tmp_path):
    path, document = write_report(tmp_path, 'fleet.html', synthetic_results(500))
    assert os.listdir(str(tmp_path)) == ['fleet.html']
    dom, requests = chromium(tmp_path, path, '--dump-dom')
    assert requests == []
    check_dom(dom, document)
    assert document['totals']['hosts'] == 500


# Run after the page's own script (the page allows inline scripts, nothing
# else): clicks a header, types into the host filter, picks a status, clicks a
# host name, and records after each step which hosts the Hosts table shows, in
# which order, and the GPUs column's numbers, into one element --dump-dom prints.
_INTERACT = """<pre id="gpufleet-test-log"></pre><script>
(function(){
  var log=[],hosts=document.getElementById('hosts'),text=document.getElementById('filter'),
      status=document.getElementById('status');
  function visible(table){return Array.prototype.filter.call(table.tBodies[0].rows,function(r){
    return !r.classList.contains('hidden');});}
  function snap(step){var rows=visible(hosts);log.push({step:step,
    hosts:rows.map(function(r){return r.getAttribute('data-host');}),
    gpus:rows.map(function(r){return r.cells[2].textContent;}),
    gpu_rows:visible(document.getElementById('gpus')).map(function(r){return r.getAttribute('data-host');}),
    sorted:Array.prototype.map.call(hosts.tHead.rows[0].cells,function(th){return th.className;})});}
  var th=hosts.tHead.rows[0].cells;
  snap('loaded');
  th[0].click();snap('host asc');
  th[0].click();snap('host desc');
  th[2].click();snap('gpus asc');
  text.value='%(needle)s';text.dispatchEvent(new Event('input'));snap('filter');
  text.value='';text.dispatchEvent(new Event('input'));
  status.value='unhealthy';status.dispatchEvent(new Event('change'));snap('unhealthy');
  status.value='';status.dispatchEvent(new Event('change'));
  var link=hosts.tBodies[0].rows[0].querySelector('a.hl');link.click();snap('host link');
  link.click();snap('host link again');
  // The findings grouped by code: sort by the Hosts column, then show one action of the ladder only.
  var byCode=document.getElementById('by-code'),ladder=document.getElementById('action');
  function codes(table){return visible(table).map(function(r){return r.cells[0].textContent;});}
  byCode.tHead.rows[0].cells[4].click();byCode.tHead.rows[0].cells[4].click();
  log.push({step:'by hosts desc',codes:codes(byCode),hosts:visible(byCode).map(function(r){return r.cells[4].textContent;})});
  ladder.value='reboot';ladder.dispatchEvent(new Event('change'));
  log.push({step:'reboot only',codes:codes(byCode),
    findings:visible(document.getElementById('findings')).map(function(r){return r.getAttribute('data-act');}),
    hosts:visible(hosts).map(function(r){return r.getAttribute('data-host');})});
  ladder.value='';ladder.dispatchEvent(new Event('change'));
  log.push({step:'every action',codes:codes(byCode)});
  document.getElementById('gpufleet-test-log').textContent=JSON.stringify(log);
})();
</script></body>"""


def test_sorting_and_filtering_change_the_dom_in_chromium(tmp_path):
    results = demo_results(str(tmp_path / 'sim'))
    document = build_report(results, '2026-01-10 09:30:00 UTC')
    names = sorted(h['host'] for h in document['hosts'])
    gpus = dict((h['host'], len(h['gpus'])) for h in document['hosts'])
    unhealthy = sorted(h['host'] for h in document['hosts'] if h['status'] == 'unhealthy')
    # A host name part that only one host has.
    needle = 'l40s'
    assert [n for n in names if needle in n] == ['gpufleet-demo-l40s01'], names
    page = tmp_path / 'interactive.html'
    page.write_text(render_html(document).replace('</body>', _INTERACT % {'needle': needle}, 1))
    dom, requests = chromium(tmp_path, str(page), '--dump-dom')
    assert requests == []
    log = dict((s['step'], s) for s in json.loads(re.search(r'<pre id="gpufleet-test-log">(.*?)</pre>', dom).group(1)))
    # As rendered: worst status first.
    assert log['loaded']['hosts'][0] in unhealthy and sorted(log['loaded']['hosts']) == names, log['loaded']
    assert log['host asc']['hosts'] == names and log['host asc']['sorted'][0] == 'asc'
    assert log['host desc']['hosts'] == names[::-1] and log['host desc']['sorted'][0] == 'desc'
    # Numbers sort as numbers (8 after 2), not as text.
    assert [int(n) for n in log['gpus asc']['gpus']] == sorted(gpus.values()), log['gpus asc']
    assert log['gpus asc']['sorted'][:3] == ['', '', 'asc'], log['gpus asc']
    assert log['filter']['hosts'] == ['gpufleet-demo-l40s01']
    assert set(log['filter']['gpu_rows']) == {'gpufleet-demo-l40s01'}
    assert len(log['filter']['gpu_rows']) == gpus['gpufleet-demo-l40s01']
    assert sorted(log['unhealthy']['hosts']) == unhealthy and len(unhealthy) < len(names)
    first = log['gpus asc']['hosts'][0]
    assert log['host link']['hosts'] == [first] and set(log['host link']['gpu_rows']) == {first}
    assert sorted(log['host link again']['hosts']) == names
    # Findings by code and action: the Hosts column sorts as numbers, the action filter hides the other rungs in
    # both finding tables and leaves the host table alone.
    by_code = document['by_code']
    assert [int(n) for n in log['by hosts desc']['hosts']] == sorted((e['hosts'] for e in by_code), reverse=True)
    reboot = [e['code'] for e in by_code if e['action'] == 'reboot']
    assert reboot == ['xid_79'] and log['reboot only']['codes'] == reboot
    assert log['reboot only']['findings'] == ['reboot'] and sorted(log['reboot only']['hosts']) == names
    assert sorted(log['every action']['codes']) == sorted(e['code'] for e in by_code) and len(by_code) > 1
