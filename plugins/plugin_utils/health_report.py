# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet health report: one document, rendered as JSON, one HTML page, a text table and AWX stats.

Pure functions on the controller, no I/O. ``build_report`` takes, per host,
the ``gpu_health`` result the health role sets (or ``None`` for a host that
gave none: unreachable, or failed before the health stage) and returns the
report document; ``render_html``, ``render_table`` and ``render_stats`` turn
that document into a self-contained page (inline CSS and script, no external
resource of any kind, a Content-Security-Policy that forbids loading one),
the lines of the job output and the data for ``set_stats``.
"""

from __future__ import annotations

import html
import json

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.fleet_health import fleet_findings

SCHEMA = 'gpufleet.nvidia.health/1'
SEVERITIES = ('critical', 'warning', 'info')
# The health catalog's action ladder, cheapest first.
ACTIONS = ('none', 'watch', 'drain', 'reset', 'reboot', 'rma')
STATUSES = ('unhealthy', 'no_data', 'healthy')
CHECK_NAMES = ('driver', 'cdi', 'container', 'dcgm_diag', 'framework', 'nvbandwidth', 'nccl_allreduce')
# Keys of a GPU record that stay out of the report: supported clocks are
# hundreds of numbers per GPU and say nothing about health.
DROPPED_GPU_KEYS = ('supported_clocks',)
NO_DATA_REASON = 'No health data: the host was unreachable or failed before the health stage.'


# ------------------------------------------------------------------- document

def _host(name, data):
    if not data:
        return {'host': name, 'status': 'no_data', 'healthy': False, 'reason': NO_DATA_REASON, 'driver': {},
                'gpus': [], 'mig_devices': [], 'findings': [], 'already_reported': [], 'checks': [],
                'summary': dict.fromkeys(SEVERITIES, 0), 'expected': {}, 'failure': None}
    gpus = [dict((k, v) for k, v in gpu.items() if k not in DROPPED_GPU_KEYS) for gpu in data.get('gpus') or []]
    findings = list(data.get('findings') or [])
    summary = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        summary[finding.get('severity', 'info')] = summary.get(finding.get('severity', 'info'), 0) + 1
    healthy = bool(data.get('healthy'))
    return {
        'host': name,
        'status': 'healthy' if healthy else 'unhealthy',
        'healthy': healthy,
        'reason': None,
        'driver': dict(data.get('driver') or {}),
        'gpus': gpus,
        'mig_devices': list(data.get('mig_devices') or []),
        'findings': findings,
        'already_reported': list(data.get('already_reported') or []),
        'checks': list(data.get('checks') or []),
        'summary': summary,
        'expected': dict(data.get('expected') or {}),
        'failure': data.get('gpu_failure'),
        'nvidia_smi_seconds': data.get('nvidia_smi_seconds'),
        'kernel_log': data.get('kernel_log'),
    }


def _group(hosts, key_of):
    groups = {}
    for host in hosts:
        for key, gpus in key_of(host):
            entry = groups.setdefault(key, {'gpus': 0, 'hosts': set()})
            entry['gpus'] += gpus
            entry['hosts'].add(host['host'])
    return groups


def _models(host):
    counts = {}
    for gpu in host['gpus']:
        counts[gpu.get('name') or 'unknown'] = counts.get(gpu.get('name') or 'unknown', 0) + 1
    return counts.items()


def _drivers(host):
    if not host['driver'].get('version'):
        return []
    return [((host['driver'].get('version'), host['driver'].get('cuda_version')), len(host['gpus']))]


def _by_code(hosts):
    """Findings grouped by code and action: severity, source, and how many hosts and GPUs have them."""
    groups = {}
    for host in hosts:
        for finding in host['findings']:
            key = (finding.get('code'), finding.get('action'))
            entry = groups.setdefault(key, {'code': key[0], 'action': key[1], 'severity': finding.get('severity'),
                                            'source': finding.get('source'), 'findings': 0, 'hosts': set(),
                                            'gpus': set()})
            entry['findings'] += 1
            entry['hosts'].add(host['host'])
            if (finding.get('gpu') or {}).get('index') is not None:
                entry['gpus'].add((host['host'], finding['gpu']['index']))
    rank = dict((severity, number) for number, severity in enumerate(SEVERITIES))

    def order(entry):
        return rank.get(entry['severity'], 3), -len(entry['hosts']), str(entry['code'])
    return [dict(entry, hosts=len(entry['hosts']), gpus=len(entry['gpus']))
            for entry in sorted(groups.values(), key=order)]


def build_report(results, generated, title='GPU fleet health', thresholds=None):
    """The report document for ``results`` (``{host: gpu_health result or None}``), hosts sorted by name.

    ``thresholds``: the health catalog's thresholds for the fleet checks (``fleet_health``); unknown names
    raise ``ValueError``.
    """
    hosts = [_host(name, results[name]) for name in sorted(results)]
    fleet, consistency = fleet_findings(hosts, thresholds)
    for host in hosts:
        for finding in fleet.get(host['host'], []):
            host['findings'].append(finding)
            host['summary'][finding['severity']] += 1
    by_model = _group(hosts, _models)
    by_driver = _group(hosts, _drivers)
    findings = dict.fromkeys(SEVERITIES, 0)
    for host in hosts:
        for severity in SEVERITIES:
            findings[severity] += host['summary'].get(severity, 0)
    return {
        'schema': SCHEMA,
        'title': title,
        'generated': generated,
        'totals': {
            'hosts': len(hosts),
            'healthy': sum(1 for h in hosts if h['status'] == 'healthy'),
            'unhealthy': sum(1 for h in hosts if h['status'] == 'unhealthy'),
            'no_data': sum(1 for h in hosts if h['status'] == 'no_data'),
            'gpus': sum(len(h['gpus']) for h in hosts),
            'findings': findings,
            'checks_failed': sum(1 for h in hosts for c in h['checks'] if c.get('status') == 'fail'),
        },
        'by_model': [{'model': model, 'gpus': entry['gpus'], 'hosts': len(entry['hosts'])}
                     for model, entry in sorted(by_model.items(), key=lambda item: (-item[1]['gpus'], item[0]))],
        'by_driver': [{'driver': key[0], 'cuda': key[1], 'gpus': entry['gpus'], 'hosts': len(entry['hosts'])}
                      for key, entry in sorted(by_driver.items(), key=lambda item: (-item[1]['gpus'], item[0][0]))],
        'by_code': _by_code(hosts),
        'consistency': consistency,
        'hosts': hosts,
    }


def render_json(document):
    return json.dumps(document, indent=1, sort_keys=True, default=str) + '\n'


# ---------------------------------------------------------------- text output

def _models_text(host):
    return ', '.join('%dx %s' % (count, model) for model, count in sorted(_models(host), key=lambda i: (-i[1], i[0])))


def _checks_text(host):
    failed = [c['name'] for c in host['checks'] if c.get('status') == 'fail']
    passed = sum(1 for c in host['checks'] if c.get('status') == 'pass')
    if not host['checks']:
        return '-'
    return ('FAIL ' + ','.join(failed)) if failed else '%d pass' % passed


def render_table(document):
    """Lines of a compact fleet table (unhealthy hosts first), then one line per unhealthy host's findings."""
    rank = dict((status, number) for number, status in enumerate(STATUSES))
    hosts = sorted(document['hosts'], key=lambda h: (rank[h['status']], h['host']))
    rows = [('HOST', 'STATUS', 'GPUS', 'DRIVER', 'CUDA', 'C/W/I', 'CHECKS', 'MODELS')]
    for host in hosts:
        summary = host['summary']
        rows.append((host['host'], host['status'].replace('_', ' '), str(len(host['gpus'])),
                     host['driver'].get('version') or '-', host['driver'].get('cuda_version') or '-',
                     '%d/%d/%d' % (summary['critical'], summary['warning'], summary['info']),
                     _checks_text(host), _models_text(host) or '-'))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ['  '.join(cell.ljust(width) for cell, width in zip(row[:-1], widths)) + '  ' + row[-1] for row in rows]
    for host in hosts:
        if host['status'] == 'no_data':
            lines.append('%s: %s' % (host['host'], host['reason']))
        elif host['status'] == 'unhealthy':
            codes = ['%s %s%s' % (f['severity'], f['code'], _gpu_suffix(f)) for f in host['findings']]
            codes += ['check %s failed: %s' % (c['name'], c.get('reason')) for c in host['checks']
                      if c.get('status') == 'fail']
            lines.append('%s: %s' % (host['host'], '; '.join(codes)))
    totals = document['totals']
    lines.append('%d hosts: %d healthy, %d unhealthy, %d without data; %d GPUs; findings %d critical, %d warning, '
                 '%d info' % (totals['hosts'], totals['healthy'], totals['unhealthy'], totals['no_data'],
                              totals['gpus'], totals['findings']['critical'], totals['findings']['warning'],
                              totals['findings']['info']))
    return lines


def _gpu_suffix(finding):
    gpu = finding.get('gpu') or {}
    if gpu.get('index') is not None:
        return ' (GPU %s)' % gpu['index']
    if gpu.get('pci_bus_id'):
        return ' (%s)' % gpu['pci_bus_id']
    return ''


def render_stats(document, files=None):
    """Data for ``set_stats``: the totals and, per host, its status, finding codes and failed checks."""
    totals = document['totals']
    return {
        'generated': document['generated'],
        'files': files or {},
        'hosts': totals['hosts'],
        'healthy': totals['healthy'],
        'gpus': totals['gpus'],
        'findings': totals['findings'],
        'unhealthy_hosts': [h['host'] for h in document['hosts'] if h['status'] == 'unhealthy'],
        'hosts_without_data': [h['host'] for h in document['hosts'] if h['status'] == 'no_data'],
        'by_host': dict((h['host'], {
            'status': h['status'],
            'codes': sorted(set(f['code'] for f in h['findings'])),
            'failed_checks': [c['name'] for c in h['checks'] if c.get('status') == 'fail'],
        }) for h in document['hosts']),
    }


# ----------------------------------------------------------------------- HTML

def _e(value):
    return html.escape('' if value is None else str(value), quote=True)


def _num(value, digits=0):
    if value is None or isinstance(value, bool):
        return None
    return ('%.' + str(digits) + 'f') % value


def _cell(text, sort=None, cls=None, title=None):
    attrs = ''
    if sort is not None:
        attrs += ' data-v="%s"' % _e(sort)
    if cls:
        attrs += ' class="%s"' % cls
    if title:
        attrs += ' title="%s"' % _e(title)
    return '<td%s>%s</td>' % (attrs, text)


def _mode(current, pending=None, good=True):
    """A mode as on/off/n/a, with a pending change; ``good`` is the value that needs no attention."""
    if current is None:
        return _cell('<span class="na">n/a</span>', '')
    text = 'on' if current else 'off'
    if pending is not None and pending != current:
        text += ' &rarr; %s' % ('on' if pending else 'off')
    return _cell(text, text, None if good is None or current == good else 'attn')


def _ratio(used, total, unit, digits=0):
    if used is None and total is None:
        return _cell('<span class="na">n/a</span>', '')
    percent = (100.0 * used / total) if used is not None and total else None
    gauge = ('<span class="bar"><span style="width:%d%%"></span></span>' % round(percent)) if percent is not None else ''
    return _cell('%s / %s %s%s' % (_num(used, digits) or '?', _num(total, digits) or '?', unit, gauge),
                 _num(used, digits) or '')


def _throttle(gpu):
    active = gpu.get('throttle_reasons_active')
    if active is None:
        active = sorted(k for k, v in (gpu.get('throttle_reasons') or {}).items() if v)
    if not active:
        return _cell('<span class="na">none</span>', '')
    parts = ['<span class="%s">%s</span>' % ('na' if name == 'gpu_idle' else 'attn', _e(name)) for name in active]
    return _cell(' '.join(parts), ','.join(active))


def _temperature(gpu):
    temp = gpu.get('temperature') or {}
    now, slowdown = temp.get('gpu_c'), temp.get('slowdown_c')
    if now is None:
        return _cell('<span class="na">n/a</span>', '')
    hot = slowdown is not None and now >= slowdown - 5
    return _cell('%s &deg;C%s' % (now, ' <span class="na">(slowdown %s)</span>' % slowdown if slowdown else ''),
                 now, 'attn' if hot else None)


def _power(gpu):
    power = gpu.get('power') or {}
    return _ratio(power.get('draw_w'), power.get('limit_w') or power.get('limit_enforced_w'), 'W')


def _mig_cell(gpu, mig_devices):
    cell = _mode(gpu.get('mig_mode_current'), gpu.get('mig_mode_pending'), good=None)
    if gpu.get('mig_mode_current'):
        mine = [d for d in mig_devices if d.get('gpu_index') == gpu.get('index')]
        profiles = {}
        for device in mine:
            profiles[device.get('profile') or 'device'] = profiles.get(device.get('profile') or 'device', 0) + 1
        text = ', '.join('%dx %s' % (n, p) for p, n in sorted(profiles.items())) or 'no MIG devices'
        cell = cell.replace('</td>', ' <span class="na">(%s)</span></td>' % _e(text))
    return cell


def _gpu_row(host, gpu, odd):
    driver = host['driver']
    return ''.join((
        '<tr data-host="%s" data-status="%s">' % (_e(host['host']), host['status']),
        _cell('<a href="#" class="hl">%s</a>' % _e(host['host']), host['host']),
        _cell(_e(gpu.get('index')), gpu.get('index')),
        _cell(_e(gpu.get('name')), gpu.get('name'), title='%s %s' % (gpu.get('uuid') or '', gpu.get('pci_bus_id') or '')),
        _cell(_e(driver.get('version')), driver.get('version')),
        _cell(_e(driver.get('cuda_version')), driver.get('cuda_version')),
        _version_cell(gpu, 'vbios_version', odd),
        _version_cell(gpu, 'inforom_image_version', odd),
        _version_cell(gpu, 'gsp_firmware_version', odd),
        _ratio(gpu.get('memory_used_mib'), gpu.get('memory_total_mib'), 'MiB'),
        _temperature(gpu),
        _power(gpu),
        _mode(gpu.get('persistence_mode'), None, True),
        _mig_cell(gpu, host['mig_devices']),
        _mode(gpu.get('ecc_mode_current'), gpu.get('ecc_mode_pending'), True),
        _throttle(gpu),
        _cell('<code>%s</code><br><code class="na">%s</code>' % (_e(gpu.get('pci_bus_id')), _e(gpu.get('uuid'))),
              gpu.get('pci_bus_id')),
        '</tr>',
    ))


def _badge(status):
    return '<span class="badge s-%s">%s</span>' % (_e(status), _e(status.replace('_', ' ')))


def _checks_cell(host):
    if not host['checks']:
        return _cell('<span class="na">-</span>', '')
    parts = []
    for check in host['checks']:
        status = check.get('status') or 'unknown'
        parts.append('<span class="chk c-%s" title="%s">%s %s</span>'
                     % (_e(status), _e(check.get('reason')), _e(check.get('name')),
                        {'pass': '&#10003;', 'fail': '&#10007;'}.get(status, '&ndash;')))
    failed = [c for c in host['checks'] if c.get('status') == 'fail']
    details = ''.join('<div class="why">%s: %s</div>' % (_e(c.get('name')), _e(c.get('reason'))) for c in failed)
    return _cell(' '.join(parts) + details, len(failed))


def _host_row(host):
    summary = host['summary']
    reason = host['reason'] or ((host['failure'] or {}).get('hint') if host['failure'] else '')
    return ''.join((
        '<tr data-host="%s" data-status="%s" class="r-%s">' % (_e(host['host']), host['status'], host['status']),
        _cell('<a href="#" class="hl">%s</a>' % _e(host['host']), host['host']),
        _cell(_badge(host['status']) + ('<div class="why">%s</div>' % _e(reason) if reason else ''),
              STATUSES.index(host['status'])),
        _cell(str(len(host['gpus'])), len(host['gpus'])),
        _cell(_e(_models_text(host)) or '<span class="na">-</span>', _models_text(host)),
        _cell(_e(host['driver'].get('version')), host['driver'].get('version')),
        _cell(_e(host['driver'].get('cuda_version')), host['driver'].get('cuda_version')),
        _cell(str(summary['critical']), summary['critical'], 'n-critical' if summary['critical'] else None),
        _cell(str(summary['warning']), summary['warning'], 'n-warning' if summary['warning'] else None),
        _cell(str(summary['info']), summary['info'], 'n-info' if summary['info'] else None),
        _checks_cell(host),
        _cell(_e(_num(host.get('nvidia_smi_seconds'), 2)), host.get('nvidia_smi_seconds')),
        '</tr>',
    ))


def _finding_rows(document):
    rank = dict((severity, number) for number, severity in enumerate(SEVERITIES))
    rows = []
    for host in document['hosts']:
        for finding in host['findings']:
            gpu = finding.get('gpu') or {}
            where = ('GPU %s' % gpu['index']) if gpu.get('index') is not None else (gpu.get('pci_bus_id') or 'host')
            severity = finding.get('severity', 'info')
            action = finding.get('action') or 'none'
            rows.append((rank.get(severity, 3), host['host'], ''.join((
                '<tr data-host="%s" data-status="%s" data-act="%s" class="f-%s">'
                % (_e(host['host']), host['status'], _e(action), _e(severity)),
                _cell('<span class="sev sev-%s">%s</span>' % (_e(severity), _e(severity)), rank.get(severity, 3)),
                _cell('<span class="act">%s</span>' % _e(action), ACTION_RANK.get(action, 9)),
                _cell('<a href="#" class="hl">%s</a>' % _e(host['host']), host['host']),
                _cell(_e(where), where),
                _cell('<code>%s</code>%s' % (_e(finding.get('code')), ' <span class="na">(fleet)</span>'
                                             if finding.get('fleet') else ''), finding.get('code')),
                _cell(_e(finding.get('source')), finding.get('source')),
                _cell(_e(finding.get('evidence'))),
                _cell(_e(finding.get('advice'))),
                '</tr>'))))
        # A failed check whose findings are in the table (the acceptance tests') needs no row of its own.
        explained = set(finding.get('check') for finding in host['findings'] if finding.get('check'))
        for check in host['checks']:
            if check.get('status') == 'fail' and check.get('name') not in explained:
                rows.append((0, host['host'], ''.join((
                    '<tr data-host="%s" data-status="%s" data-act="drain" class="f-critical">'
                    % (_e(host['host']), host['status']),
                    _cell('<span class="sev sev-critical">check failed</span>', 0),
                    _cell('<span class="act">drain</span>', ACTION_RANK['drain']),
                    _cell('<a href="#" class="hl">%s</a>' % _e(host['host']), host['host']),
                    _cell('host', 'host'),
                    _cell('<code>check_%s</code>' % _e(check.get('name')), check.get('name')),
                    _cell('validation', 'validation'),
                    _cell(_e(check.get('reason'))),
                    _cell(_e(CHECK_ADVICE.get(check.get('name'), ''))),
                    '</tr>'))))
    return [row for _rank, _host_name, row in sorted(rows, key=lambda r: (r[0], r[1]))]


ACTION_RANK = dict((action, number) for number, action in enumerate(ACTIONS))


def _by_code_rows(document):
    rank = dict((severity, number) for number, severity in enumerate(SEVERITIES))
    return [''.join((
        '<tr data-act="%s" class="f-%s">' % (_e(entry['action']), _e(entry['severity'])),
        _cell('<code>%s</code>' % _e(entry['code']), entry['code']),
        _cell('<span class="sev sev-%s">%s</span>' % (_e(entry['severity']), _e(entry['severity'])),
              rank.get(entry['severity'], 3)),
        _cell('<span class="act">%s</span>' % _e(entry['action']), ACTION_RANK.get(entry['action'], 9)),
        _cell(_e(entry['source']), entry['source']),
        _cell(str(entry['hosts']), entry['hosts']),
        _cell(str(entry['gpus']), entry['gpus']),
        _cell(str(entry['findings']), entry['findings']),
        '</tr>')) for entry in document.get('by_code') or []]


def _consistency_rows(document):
    return [''.join((
        '<tr>',
        _cell(_e(row['model']), row['model']),
        _cell(_e(row['label']), row['label']),
        _cell(' '.join('<span class="%s">%s &times;%d</span>' % ('na' if number == 0 else 'attn', _e(value), count)
                       for number, (value, count) in enumerate(row['values'])), len(row['values'])),
        '</tr>')) for row in document.get('consistency') or []]


def _odd_versions(document):
    """{(model, field): majority value} of the fields where the fleet disagrees."""
    return dict(((row['model'], row['field']), row['values'][0][0]) for row in document.get('consistency') or [])


def _version_cell(gpu, field, odd):
    value = gpu.get(field)
    majority = odd.get((gpu.get('name') or 'unknown', field))
    if value is None:
        return _cell('<span class="na">n/a</span>', '')
    return _cell('<code>%s</code>' % _e(value), value, 'attn' if majority is not None and value != majority else None,
                 title='most GPUs of the model run %s' % majority if majority is not None and value != majority else None)


CHECK_ADVICE = {
    'driver': 'Load the NVIDIA driver (reboot after an upgrade) and check the kernel log; nothing else works without it.',
    'cdi': 'Regenerate the CDI specification (nvidia-ctk cdi generate, or converge the container_toolkit role).',
    'container': 'Configure the container runtime for NVIDIA (nvidia-ctk runtime configure) and restart the engine.',
    'dcgm_diag': 'Read the failed DCGM tests: drain the node for hardware failures and open a case with the vendor.',
    'framework': 'Check the CUDA build of the framework against the driver and the devices the container may use.',
    'nvbandwidth': 'Run nvbandwidth by hand on the node and compare with a healthy node of the model.',
    'nccl_allreduce': 'Run all_reduce_perf by hand on the node and compare with a healthy node of the model.',
}

_STYLE = """
:root{--crit:#b3261e;--warn:#9a6700;--info:#0b57d0;--ok:#1e7e34;--na:#6b7280;--line:#d9dde3;--bg:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;background:#fff}
header{padding:14px 20px;background:#1f2328;color:#fff}
header h1{margin:0;font-size:19px}
header .meta{color:#c9ced6;font-size:12px}
main{padding:10px 20px 30px}
h2{font-size:15px;margin:22px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-top:12px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:110px;background:var(--bg)}
.card b{display:block;font-size:22px}
.card.k-unhealthy b,.card.k-critical b{color:var(--crit)}
.card.k-warning b{color:var(--warn)}
.card.k-healthy b{color:var(--ok)}
.card.k-info b{color:var(--info)}
.card.k-no_data b{color:var(--na)}
.cols{display:flex;flex-wrap:wrap;gap:24px}
table{border-collapse:collapse;width:100%;margin:4px 0}
.cols table{width:auto;min-width:320px}
th,td{border:1px solid var(--line);padding:4px 7px;text-align:left;vertical-align:top}
th{background:var(--bg);position:sticky;top:0;z-index:1}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:after{content:" \\2195";color:var(--na);font-size:10px}
table.sortable th.asc:after{content:" \\2191";color:#1f2328}
table.sortable th.desc:after{content:" \\2193";color:#1f2328}
tr:nth-child(even) td{background:#fbfbfc}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.na{color:var(--na)}
.attn{color:var(--warn);font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
.s-healthy{background:var(--ok)}.s-unhealthy{background:var(--crit)}.s-no_data{background:var(--na)}
.sev{display:inline-block;padding:1px 7px;border-radius:4px;font-weight:600;font-size:12px;color:#fff;white-space:nowrap}
.sev-critical{background:var(--crit)}.sev-warning{background:var(--warn)}.sev-info{background:var(--info)}
tr.f-critical td{background:#fcebea}tr.f-warning td{background:#fff6dd}tr.f-info td{background:#eaf1fd}
tr.r-unhealthy td:first-child{border-left:4px solid var(--crit)}
tr.r-no_data td:first-child{border-left:4px solid var(--na)}
.n-critical{color:var(--crit);font-weight:700}.n-warning{color:var(--warn);font-weight:700}.n-info{color:var(--info)}
.chk{display:inline-block;margin:0 4px 2px 0;padding:0 5px;border-radius:3px;font-size:11px;border:1px solid var(--line)}
.c-pass{color:var(--ok)}.c-fail{color:#fff;background:var(--crit);border-color:var(--crit)}.c-skipped{color:var(--na)}
.why{color:var(--na);font-size:12px;margin-top:2px}
.act{font-weight:600;white-space:nowrap}
.bar{display:inline-block;width:46px;height:6px;margin-left:6px;background:#e5e7eb;border-radius:3px;vertical-align:middle}
.bar span{display:block;height:6px;background:#5b8def;border-radius:3px}
.tools{position:sticky;top:0;background:#fff;padding:8px 0;z-index:2;border-bottom:1px solid var(--line)}
.tools input,.tools select{font:inherit;padding:3px 6px;margin-right:8px}
.empty{color:var(--ok);font-weight:600}
.hidden{display:none}
a.hl{white-space:nowrap}
"""

# Sorting by a header click (data-v holds the sort key of a cell, numbers
# sort as numbers), a host filter and a status filter; a click on a host name
# filters every table to that host. Works on the static page without it too.
_SCRIPT = """
(function(){
  function key(td){var v=td.getAttribute('data-v');if(v===null){v=td.textContent;}var n=parseFloat(v);
    return (v!==''&&!isNaN(n)&&isFinite(v))?[0,n]:[1,v.toLowerCase()];}
  function cmp(a,b){if(a[0]!==b[0]){return a[0]-b[0];}return a[1]<b[1]?-1:(a[1]>b[1]?1:0);}
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(){
      var desc=th.classList.contains('asc');
      table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
      th.classList.add(desc?'desc':'asc');
      var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(r1,r2){var c=cmp(key(r1.cells[col]),key(r2.cells[col]));return desc?-c:c;});
      rows.forEach(function(r){body.appendChild(r);});});});});
  var text=document.getElementById('filter'),status=document.getElementById('status'),
      ladder=document.getElementById('action');
  function apply(){var t=text.value.trim().toLowerCase(),s=status.value,a=ladder.value;
    document.querySelectorAll('tr[data-host],tr[data-act]').forEach(function(tr){
      var h=tr.getAttribute('data-host'),act=tr.getAttribute('data-act');
      var ok=(h===null||((!t||h.toLowerCase().indexOf(t)>=0)&&(!s||tr.getAttribute('data-status')===s)))
        &&(act===null||!a||act===a);
      tr.classList.toggle('hidden',!ok);});}
  text.addEventListener('input',apply);status.addEventListener('change',apply);ladder.addEventListener('change',apply);
  document.querySelectorAll('a.hl').forEach(function(a){a.addEventListener('click',function(ev){
    ev.preventDefault();text.value=(text.value===a.textContent)?'':a.textContent;apply();});});
})();
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def _cards(totals):
    cards = [('hosts', totals['hosts'], ''), ('healthy', totals['healthy'], 'healthy'),
             ('unhealthy', totals['unhealthy'], 'unhealthy'), ('without data', totals['no_data'], 'no_data'),
             ('GPUs', totals['gpus'], ''), ('critical', totals['findings']['critical'], 'critical'),
             ('warning', totals['findings']['warning'], 'warning'), ('info', totals['findings']['info'], 'info'),
             ('failed checks', totals['checks_failed'], 'critical' if totals['checks_failed'] else '')]
    return '<div class="cards">%s</div>' % ''.join(
        '<div class="card k-%s"><b>%d</b>%s</div>' % (kind, value, _e(label)) for label, value, kind in cards)


def _totals_tables(document):
    models = ''.join('<tr>%s%s%s</tr>' % (_cell(_e(m['model'])), _cell(str(m['gpus']), m['gpus']),
                                          _cell(str(m['hosts']), m['hosts'])) for m in document['by_model'])
    drivers = ''.join('<tr>%s%s%s%s</tr>' % (_cell(_e(d['driver'])), _cell(_e(d['cuda'])),
                                             _cell(str(d['gpus']), d['gpus']), _cell(str(d['hosts']), d['hosts']))
                      for d in document['by_driver'])
    return ('<div class="cols"><div><h2>GPUs per model</h2><table class="sortable" id="by-model"><thead><tr>'
            '<th>Model</th><th>GPUs</th><th>Hosts</th></tr></thead><tbody>%s</tbody></table></div>'
            '<div><h2>GPUs per driver</h2><table class="sortable" id="by-driver"><thead><tr><th>Driver</th>'
            '<th>CUDA</th><th>GPUs</th><th>Hosts</th></tr></thead><tbody>%s</tbody></table></div></div>'
            % (models, drivers))


def _table(table_id, headers, rows, empty, empty_class='na'):
    if not rows:
        return '<p class="%s" id="%s">%s</p>' % (empty_class, table_id, _e(empty))
    return '<table class="sortable" id="%s"><thead><tr>%s</tr></thead><tbody>\n%s\n</tbody></table>' % (
        table_id, ''.join('<th>%s</th>' % _e(h) for h in headers), '\n'.join(rows))


def render_html(document):
    """One self-contained HTML page of the report: nothing in it loads anything from anywhere."""
    rank = dict((status, number) for number, status in enumerate(STATUSES))
    hosts = sorted(document['hosts'], key=lambda h: (rank[h['status']], h['host']))
    totals = document['totals']
    verdict = ('all %d hosts healthy' % totals['hosts'] if totals['healthy'] == totals['hosts']
               else '%d of %d hosts need attention' % (totals['hosts'] - totals['healthy'], totals['hosts']))
    odd = _odd_versions(document)
    gpu_rows = [_gpu_row(host, gpu, odd) for host in document['hosts'] for gpu in host['gpus']]
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="%s">' % _CSP,
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="gpufleet.nvidia gpu_health_report (%s)">' % SCHEMA,
        '<title>%s</title><style>%s</style></head><body>' % (_e(document['title']), _STYLE),
        '<header><h1>%s: %s</h1><div class="meta">Generated %s by gpufleet.nvidia. Hover a check for its reason; '
        'click a column to sort it, a host name to show only that host.</div></header><main>'
        % (_e(document['title']), _e(verdict), _e(document['generated'])),
        _cards(totals),
        _totals_tables(document),
        '<div class="tools"><input id="filter" type="search" placeholder="Filter by host name" aria-label="host filter">'
        '<select id="status" aria-label="status filter"><option value="">every status</option>'
        '<option value="unhealthy">unhealthy</option><option value="no_data">without data</option>'
        '<option value="healthy">healthy</option></select>'
        '<select id="action" aria-label="action filter"><option value="">every action</option>%s</select></div>'
        % ''.join('<option value="%s">%s</option>' % (action, action) for action in ACTIONS),
        '<h2>Findings by code and action</h2>',
        _table('by-code', ('Code', 'Severity', 'Action', 'Source', 'Hosts', 'GPUs', 'Findings'),
               _by_code_rows(document), 'No findings on any host.', 'empty'),
        '<h2>Findings</h2>',
        _table('findings', ('Severity', 'Action', 'Host', 'GPU', 'Code', 'Source', 'Evidence', 'Advice'),
               _finding_rows(document), 'No findings and no failed check on any host.', 'empty'),
        '<h2>Hosts</h2>',
        _table('hosts', ('Host', 'Status', 'GPUs', 'Models', 'Driver', 'CUDA', 'Critical', 'Warning', 'Info',
                         'Checks', 'nvidia-smi s'), [_host_row(host) for host in hosts], 'No hosts.'),
        '<h2>GPUs</h2>',
        _table('gpus', ('Host', '#', 'Model', 'Driver', 'CUDA', 'VBIOS', 'InfoROM', 'GSP firmware',
                        'Memory used / total', 'Temperature', 'Power draw / limit', 'Persistence', 'MIG', 'ECC',
                        'Throttle reasons', 'PCI bus id / UUID'),
               gpu_rows, 'No GPU data.'),
        '<h2>Fleet consistency</h2>',
        _table('consistency', ('Model', 'Version', 'Values (most common first)'), _consistency_rows(document),
               'Every GPU model runs one VBIOS, InfoROM, GSP firmware and driver across the fleet.', 'empty'),
        '</main><script>%s</script></body></html>\n' % _SCRIPT,
    ]
    return '\n'.join(parts)
