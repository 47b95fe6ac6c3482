# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks that need the whole fleet: consistency of versions and outliers among GPUs of one model.

Pure functions on the controller. A node cannot judge these alone: a VBIOS is
"old" only next to the others, a GPU runs "hot" only next to its peers at the
same load. The checks are relative, so they work without absolute thresholds;
the catalog (``health_catalog``) gives their codes, actions and the margins.
A fleet finding names the node and GPU, the value, and what most GPUs of the
model have; the report shows it and never drains on it (the odd one out may be
the only one that is right).
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_catalog import Catalog

# GPU record keys compared per model, with their names in the report.
VERSION_FIELDS = (('vbios_version', 'VBIOS'), ('inforom_image_version', 'InfoROM image'),
                  ('gsp_firmware_version', 'GSP firmware'), ('driver', 'driver'))


def _gpus(hosts):
    """(host name, GPU record with the host's driver version as ``driver``) for every GPU of hosts with data."""
    for host in hosts:
        driver = (host.get('driver') or {}).get('version')
        for gpu in host.get('gpus') or []:
            yield host['host'], dict(gpu, driver=driver)


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _finding(code, host, gpu, evidence, advice, catalog, **extra):
    severity, _action, _source = catalog.entry(code)
    where = 'GPU %s' % gpu['index'] if gpu.get('index') is not None else 'host'
    finding = {'code': code, 'severity': severity, 'fleet': True,
               'gpu': {'index': gpu.get('index'), 'uuid': gpu.get('uuid'), 'pci_bus_id': gpu.get('pci_bus_id')}
               if gpu.get('index') is not None else None,
               'evidence': '%s %s: %s' % (host, where, evidence), 'advice': advice}
    finding.update(extra)
    return catalog.annotate(finding)


def consistency(hosts):
    """Per model and version field, the values the fleet runs with their GPU counts, most common first:
    ``[{'model', 'field', 'label', 'values': [[value, gpus], ...]}]`` - only fields with more than one value."""
    table = {}
    for _host, gpu in _gpus(hosts):
        for field, _label in VERSION_FIELDS:
            value = gpu.get(field)
            if value is None:
                continue
            counts = table.setdefault((gpu.get('name') or 'unknown', field), {})
            counts[value] = counts.get(value, 0) + 1
    rows = []
    for (model, field), counts in sorted(table.items()):
        if len(counts) > 1:
            rows.append({'model': model, 'field': field, 'label': dict(VERSION_FIELDS)[field],
                         'values': sorted(([value, n] for value, n in counts.items()), key=lambda p: (-p[1], p[0]))})
    return rows


def _version_findings(hosts, rows, catalog):
    odd = {}
    for row in rows:
        (majority, most), total = row['values'][0], sum(n for _value, n in row['values'])
        # A tie has no majority to call the others odd against.
        if len(row['values']) > 1 and row['values'][1][1] == most:
            continue
        for value, _n in row['values'][1:]:
            odd[(row['model'], row['field'], value)] = (majority, most, total, row['label'])
    findings = {}
    reported = set()
    for host, gpu in _gpus(hosts):
        for field, _label in VERSION_FIELDS:
            key = (gpu.get('name') or 'unknown', field, gpu.get(field))
            if key not in odd:
                continue
            # The driver is the host's: one finding per host, not one per GPU.
            if field == 'driver':
                if (host, key) in reported:
                    continue
                reported.add((host, key))
                gpu = {'index': None, 'name': gpu.get('name'), 'driver': gpu.get('driver')}
            majority, most, total, label = odd[key]
            findings.setdefault(host, []).append(_finding(
                'fleet_version_mismatch', host, gpu,
                '%s %s, where %d of %d %s GPUs of the fleet run %s.' % (label, gpu.get(field), most, total, key[0],
                                                                        majority),
                'Bring the odd GPU in line (firmware update through the vendor\'s tool, or the nvidia_driver role for '
                'the driver) at the next maintenance window; mixed firmware makes failures hard to compare.',
                catalog, field=field, value=gpu.get(field), fleet_value=majority))
    return findings


def _outlier_findings(hosts, catalog):
    findings = {}
    by_model = {}
    for host, gpu in _gpus(hosts):
        by_model.setdefault(gpu.get('name') or 'unknown', []).append((host, gpu))
    for model, members in sorted(by_model.items()):
        if len(members) < (catalog.threshold('fleet_min_gpus', model) or 0):
            continue
        # Temperature only of idle GPUs: a busy GPU is hot for a reason.
        idle = [(host, gpu) for host, gpu in members if gpu.get('utilization_gpu_percent') == 0]
        temperatures = [gpu['temperature']['gpu_c'] for _host, gpu in idle
                        if isinstance((gpu.get('temperature') or {}).get('gpu_c'), (int, float))]
        margin = catalog.threshold('fleet_outlier_temperature_c', model)
        if margin is not None and len(temperatures) >= (catalog.threshold('fleet_min_gpus', model) or 0):
            median = _median(temperatures)
            for host, gpu in idle:
                now = (gpu.get('temperature') or {}).get('gpu_c')
                if isinstance(now, (int, float)) and now - median > margin:
                    findings.setdefault(host, []).append(_finding(
                        'fleet_outlier_temperature', host, gpu,
                        'idle at %s C, %s C above the median of %d idle %s GPUs (%s C; margin %s C).'
                        % (now, round(now - median, 1), len(temperatures), model, median, margin),
                        'An idle GPU this much hotter than its peers has a cooling problem (fan, airflow, a blocked '
                        'heat sink, thermal paste): inspect it before it throttles under load.', catalog,
                        threshold={'name': 'fleet_outlier_temperature_c', 'value': margin,
                                   'source': catalog.threshold_source('fleet_outlier_temperature_c', model)}))
        for code, name, read, label in (
                ('fleet_outlier_power_limit', 'fleet_outlier_power_limit_percent',
                 lambda gpu: (gpu.get('power') or {}).get('limit_enforced_w') or (gpu.get('power') or {}).get('limit_w'),
                 'enforced power limit %s W'),
                ('fleet_outlier_clocks', 'fleet_outlier_clocks_percent',
                 lambda gpu: (gpu.get('clocks_max') or {}).get('sm'), 'maximum SM clock %s MHz')):
            margin = catalog.threshold(name, model)
            values = [(host, gpu, read(gpu)) for host, gpu in members if isinstance(read(gpu), (int, float))]
            if margin is None or len(values) < (catalog.threshold('fleet_min_gpus', model) or 0):
                continue
            median = _median([value for _host, _gpu, value in values])
            for host, gpu, value in values:
                if median and abs(value - median) * 100.0 / median > margin:
                    findings.setdefault(host, []).append(_finding(
                        code, host, gpu,
                        '%s, %+.1f%% from the median of %d %s GPUs (%s; margin %s%%).'
                        % (label % value, (value - median) * 100.0 / median, len(values), model, median, margin),
                        'A GPU configured differently from its peers (power limit or clocks set by hand, or capped '
                        'by the board) runs jobs slower than the rest: converge the persistence role\'s settings or '
                        'check the board.', catalog,
                        threshold={'name': name, 'value': margin, 'source': catalog.threshold_source(name, model)}))
    return findings


def fleet_findings(hosts, thresholds=None):
    """``(findings per host name, consistency rows)`` for the hosts of a report (``health_report._host`` dicts)."""
    catalog = Catalog(thresholds=thresholds)
    with_data = [host for host in hosts if host.get('status') != 'no_data']
    rows = consistency(with_data)
    findings = _version_findings(with_data, rows, catalog)
    for host, extra in _outlier_findings(with_data, catalog).items():
        findings.setdefault(host, []).extend(extra)
    return findings, rows


ACTIONS = ('none', 'watch', 'drain', 'reset', 'reboot', 'rma')
_SEVERITY_RANK = {'critical': 0, 'warning': 1, 'info': 2}


def _need(result, fail_on):
    """How much an unhealthy node needs: the costliest action among the findings that make it unhealthy
    (a failed validation check counts as drain), then its number of critical findings."""
    limit = _SEVERITY_RANK.get(fail_on, 1)
    counted = [f for f in result.get('findings') or [] if not f.get('fleet')
               and _SEVERITY_RANK.get(f.get('severity'), 2) <= limit]
    actions = [ACTIONS.index(f['action']) for f in counted if f.get('action') in ACTIONS]
    if any(check.get('status') == 'fail' for check in result.get('checks') or []):
        actions.append(ACTIONS.index('drain'))
    critical = sum(1 for f in counted if f.get('severity') == 'critical')
    return (max(actions) if actions else ACTIONS.index('drain')), critical


def drain_plan(nodes, share, total, fail_on='warning'):
    """Which unhealthy nodes the health role drains in this run, and which it leaves alone and why.

    ``nodes``: ``{host: {'healthy', 'findings', 'checks', 'drain_state'}}`` for the play's hosts (``drain_state``
    as the drain role's ``read`` entry point sets it, or ``None``). ``share``: the most nodes drained in one
    run, in percent of ``total`` (the play's hosts), rounded down. Nodes already drained are not drained again
    and do not count: by this collection (``already``) or by someone else (``foreign``, never touched). The
    others are drained costliest need first (rma, reboot, reset, drain; then most critical findings; then by
    name) up to the limit; the rest are ``braked``.
    """
    limit = int(total * share // 100) if share is not None else total
    plan = {'limit': limit, 'share': share, 'total': total, 'drain': [], 'braked': [], 'already': [], 'foreign': []}
    waiting = []
    for host in sorted(nodes):
        node = nodes[host] or {}
        if node.get('healthy', True):
            continue
        state = node.get('drain_state') or {}
        if state.get('drained') and state.get('by') == 'gpufleet.nvidia':
            plan['already'].append({'host': host, 'reason': state.get('reason')})
        elif state.get('drained'):
            plan['foreign'].append({'host': host, 'reason': state.get('reason'), 'state': state.get('state')})
        else:
            action, critical = _need(node, fail_on)
            waiting.append((-action, -critical, host, ACTIONS[action]))
    for number, (_action, _critical, host, need) in enumerate(sorted(waiting)):
        if number < limit:
            plan['drain'].append({'host': host, 'need': need})
        else:
            plan['braked'].append({'host': host, 'need': need})
    plan['message'] = _plan_message(plan)
    return plan


def _plan_message(plan):
    lines = ['Drain brake: %d of %d hosts (health_drain_max_share %s%%) may be drained in one run; drained now: %s.'
             % (plan['limit'], plan['total'], plan['share'], ', '.join(n['host'] for n in plan['drain']) or 'none')]
    lines += ['%s: unhealthy (needs %s), left in service by the brake: the nodes that need more went first. Drain it '
              'yourself, or raise health_drain_max_share.' % (n['host'], n['need']) for n in plan['braked']]
    lines += ['%s: already drained by someone else (%s); left as it is, and gpufleet never undrains it.'
              % (n['host'], n['reason'] or 'no reason given') for n in plan['foreign']]
    lines += ['%s: already drained by gpufleet (%s).' % (n['host'], n['reason']) for n in plan['already']]
    return lines
