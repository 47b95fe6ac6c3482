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
