# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Write the fleet health report on the controller (documented in plugins/modules/gpu_health_report.py).

Reads each host's ``gpu_health`` result from hostvars, builds the report with
``plugin_utils.health_report`` and writes ``gpu-health.json`` and
``gpu-health.html`` into ``dest``; returns the text table and the set_stats
data. Runs on the controller only, once for the play.
"""

from __future__ import annotations

import datetime
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.health_report import (
    build_report,
    render_html,
    render_json,
    render_stats,
    render_table,
)

FILES = {'json': 'gpu-health.json', 'html': 'gpu-health.html'}
ARGS = ('hosts', 'dest', 'fact', 'title', 'generated', 'thresholds')


def _plain(value):
    """Ansible's tagged and lazy containers as plain Python values."""
    if isinstance(value, dict) or hasattr(value, 'items'):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def write_atomically(path, text):
    """Replace ``path`` by ``text`` in one rename, so that a reader never sees half a report."""
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(prefix='.gpu-health-', dir=folder)
    try:
        with os.fdopen(handle, 'w', encoding='utf-8') as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class ActionModule(ActionBase):

    _requires_connection = False
    TRANSFERS_FILES = False

    def _results(self, hosts, fact, task_vars):
        hostvars = task_vars.get('hostvars') or {}
        results = {}
        for host in hosts:
            values = hostvars.get(host) if hasattr(hostvars, 'get') else None
            data = values.get(fact) if values is not None else None
            results[str(host)] = _plain(data) if data else None
        return results

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        unknown = sorted(set(args) - set(ARGS))
        hosts = args.get('hosts')
        if unknown:
            raise AnsibleActionFail('gpu_health_report: unknown parameter(s) %s; it takes %s' % (
                ', '.join(unknown), ', '.join(ARGS)))
        if not isinstance(hosts, list) or not hosts:
            raise AnsibleActionFail('gpu_health_report: hosts must be a non-empty list of inventory host names')
        dest = str(args.get('dest') or '')
        generated = str(args.get('generated') or datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%d %H:%M:%S UTC'))
        try:
            document = build_report(self._results(hosts, str(args.get('fact') or 'gpu_health'), task_vars or {}),
                                    generated, title=str(args.get('title') or 'GPU fleet health'),
                                    thresholds=args.get('thresholds') or None)
        except ValueError as exc:
            raise AnsibleActionFail('gpu_health_report: thresholds: %s' % exc)
        files = {}
        if dest and not self._task.check_mode:
            folder = os.path.abspath(os.path.expanduser(dest))
            try:
                os.makedirs(folder, mode=0o755, exist_ok=True)
                files = dict((kind, os.path.join(folder, name)) for kind, name in FILES.items())
                write_atomically(files['json'], render_json(document))
                write_atomically(files['html'], render_html(document))
            except OSError as exc:
                raise AnsibleActionFail('gpu_health_report: cannot write the report into %s: %s' % (folder, exc))
        table = render_table(document)
        if files:
            table.append('Report: %s (JSON: %s)' % (files['html'], files['json']))
        elif dest:
            table.append('Check mode: the report was not written to %s.' % dest)
        totals = document['totals']
        result.update(
            changed=False,
            table=table,
            stats=render_stats(document, files),
            files=files,
            totals=totals,
            unhealthy_hosts=[h['host'] for h in document['hosts'] if h['status'] == 'unhealthy'],
            hosts_without_data=[h['host'] for h in document['hosts'] if h['status'] == 'no_data'],
            msg='%d of %d hosts healthy' % (totals['healthy'], totals['hosts']),
        )
        return result
