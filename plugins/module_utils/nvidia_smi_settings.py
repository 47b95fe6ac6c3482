# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""State, GPU selection, validation and planning for the ``nvidia_smi`` settings module.

Pure functions over rows from ``parse_query_csv``; nothing here runs a command.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_query_csv

# One --query-gpu call reads everything the settings need.
QUERY_FIELDS = (
    'index',
    'uuid',
    'pci.bus_id',
    'name',
    'persistence_mode',
    'compute_mode',
    'power.limit',
    'power.min_limit',
    'power.max_limit',
    'clocks.applications.memory',
    'clocks.applications.graphics',
    'clocks.default_applications.memory',
    'clocks.default_applications.graphics',
    'ecc.mode.current',
    'ecc.mode.pending',
    'mig.mode.current',
    'mig.mode.pending',
)

# Argument of `nvidia-smi -c` for each compute mode as --query-gpu prints it.
COMPUTE_MODE_ARGS = {
    'Default': 'DEFAULT',
    'Exclusive_Process': 'EXCLUSIVE_PROCESS',
    'Prohibited': 'PROHIBITED',
}

# GPUs store the power limit with their own rounding; closer than this is "equal".
POWER_LIMIT_TOLERANCE_W = 0.5

_PCI_RE = re.compile(r'^(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<dev>[0-9a-f]{1,2})\.(?P<fn>[0-7])$',
                     re.I)


class SettingsError(ValueError):
    """A request that cannot be applied as given."""


def _mode(value):
    """``Enabled``/``Disabled`` -> bool; ``None`` (N/A) stays ``None``."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text == 'enabled':
        return True
    if text == 'disabled':
        return False
    raise ValueError('unexpected mode value %r' % (value,))


def _number(value, kind):
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError('unexpected value %r' % (value,))
    if isinstance(value, (int, float)):
        return kind(value)
    text = re.sub(r'\s*(W|MHz)$', '', str(value).strip())
    return kind(float(text))


def normalise_gpu(row):
    """Turn one ``parse_query_csv`` row of ``QUERY_FIELDS`` into the module's GPU dict."""
    index = row['index']
    if index is None:
        raise ValueError('a GPU line has no index')
    return {
        'index': _number(index, int),
        'uuid': row['uuid'],
        'pci_bus_id': row['pci.bus_id'],
        'name': row['name'],
        'persistence_mode': _mode(row['persistence_mode']),
        'compute_mode': row['compute_mode'],
        'power_limit': _number(row['power.limit'], float),
        'power_min_limit': _number(row['power.min_limit'], float),
        'power_max_limit': _number(row['power.max_limit'], float),
        'application_clocks': {
            'memory': _number(row['clocks.applications.memory'], int),
            'graphics': _number(row['clocks.applications.graphics'], int),
            'default_memory': _number(row['clocks.default_applications.memory'], int),
            'default_graphics': _number(row['clocks.default_applications.graphics'], int),
        },
        'ecc_mode_current': _mode(row['ecc.mode.current']),
        'ecc_mode_pending': _mode(row['ecc.mode.pending']),
        'mig_mode_current': _mode(row['mig.mode.current']),
        'mig_mode_pending': _mode(row['mig.mode.pending']),
    }


def gpu_label(gpu):
    return 'GPU %s (%s, %s)' % (gpu['index'], gpu.get('name') or 'unknown model', gpu.get('pci_bus_id') or 'no bus id')


def _pci_key(text):
    match = _PCI_RE.match((text or '').strip())
    if not match:
        return None
    return (int(match.group('domain') or '0', 16), int(match.group('bus'), 16),
            int(match.group('dev'), 16), int(match.group('fn')))


def resolve_selectors(gpus, selectors):
    """GPUs matching ``selectors`` (index, UUID or PCI bus id), in index order; all when ``None``."""
    if selectors is None:
        return sorted(gpus, key=lambda g: g['index'])
    chosen = {}
    present = ', '.join('%s (%s, %s)' % (g['index'], g['uuid'], g['pci_bus_id'])
                        for g in sorted(gpus, key=lambda g: g['index']))
    for selector in selectors:
        text = str(selector).strip()
        if text.upper().startswith('MIG-'):
            raise SettingsError('gpus: %s is a MIG device; select its parent GPU by index, UUID or PCI bus id' % text)
        if re.match(r'^\d+$', text):
            matches = [g for g in gpus if g['index'] == int(text)]
        elif text.upper().startswith('GPU-'):
            matches = [g for g in gpus if (g['uuid'] or '').lower() == text.lower()]
        elif _pci_key(text) is not None:
            matches = [g for g in gpus if _pci_key(g['pci_bus_id']) == _pci_key(text)]
        else:
            raise SettingsError('gpus: %r is neither a GPU index, a GPU UUID (GPU-...) nor a PCI bus id' % text)
        if not matches:
            raise SettingsError('gpus: no GPU matches %s; GPUs on this host: %s' % (text, present or 'none'))
        for gpu in matches:
            chosen[gpu['index']] = gpu
    return [chosen[i] for i in sorted(chosen)]


def parse_supported_clocks(text):
    """``--query-supported-clocks=memory,graphics`` output -> list of ``(memory, graphics)`` MHz pairs."""
    pairs = []
    for row in parse_query_csv(text, ['memory', 'graphics']):
        if row['memory'] is None or row['graphics'] is None:
            continue
        pairs.append((_number(row['memory'], int), _number(row['graphics'], int)))
    return pairs


def _format_watts(value):
    return ('%d' % value) if float(value).is_integer() else ('%g' % value)


def _describe_clocks(pairs, memory):
    same_memory = sorted(set(g for m, g in pairs if m == memory), reverse=True)
    memories = sorted(set(m for m, g in pairs), reverse=True)
    if same_memory:
        return 'graphics clocks supported with memory %d MHz: %s' % (
            memory, ', '.join(str(g) for g in same_memory[:12]) + (' ...' if len(same_memory) > 12 else ''))
    return 'supported memory clocks: %s' % ', '.join(str(m) for m in memories)


def plan_gpu(gpu, wanted, supported_clocks=None):
    """Validate ``wanted`` settings on one GPU and plan the setters.

    Returns ``(plan, errors)``; ``plan`` has ``before``, ``after`` (predicted) and
    ``commands`` (argument lists for nvidia-smi, in the order to run them).
    """
    label = gpu_label(gpu)
    idx = str(gpu['index'])
    after = dict(gpu, application_clocks=dict(gpu['application_clocks']))
    commands = []
    errors = []

    if 'persistence_mode' in wanted:
        if gpu['persistence_mode'] is None:
            errors.append('%s does not report a persistence mode' % label)
        elif gpu['persistence_mode'] != wanted['persistence_mode']:
            commands.append(['-i', idx, '-pm', '1' if wanted['persistence_mode'] else '0'])
            after['persistence_mode'] = wanted['persistence_mode']

    for key, flag, what in (('ecc_mode', '-e', 'ECC'), ('mig_mode', '-mig', 'MIG')):
        if key not in wanted:
            continue
        if gpu[key + '_pending'] is None:
            errors.append('%s does not support %s mode' % (label, what))
        elif gpu[key + '_pending'] != wanted[key]:
            commands.append(['-i', idx, flag, '1' if wanted[key] else '0'])
            after[key + '_pending'] = wanted[key]

    if 'compute_mode' in wanted:
        if gpu['compute_mode'] is None:
            errors.append('%s does not report a compute mode' % label)
        elif gpu['compute_mode'].lower() != wanted['compute_mode'].lower():
            commands.append(['-i', idx, '-c', COMPUTE_MODE_ARGS[wanted['compute_mode']]])
            after['compute_mode'] = wanted['compute_mode']

    if 'power_limit' in wanted:
        limit = float(wanted['power_limit'])
        low, high = gpu['power_min_limit'], gpu['power_max_limit']
        if low is None or high is None or gpu['power_limit'] is None:
            errors.append('%s does not report its power limits (power.min_limit/power.max_limit are N/A), so '
                          'power_limit cannot be managed on it' % label)
        elif not low <= limit <= high:
            errors.append('power_limit %s W is outside the range %s accepts: %s-%s W'
                          % (_format_watts(limit), label, _format_watts(low), _format_watts(high)))
        elif abs(gpu['power_limit'] - limit) >= POWER_LIMIT_TOLERANCE_W:
            commands.append(['-i', idx, '-pl', _format_watts(limit)])
            after['power_limit'] = limit

    if 'application_clocks' in wanted:
        current = gpu['application_clocks']
        request = wanted['application_clocks']
        if current['memory'] is None or current['graphics'] is None:
            errors.append('%s does not support application clocks' % label)
        elif request == 'reset':
            if current['default_memory'] is None or current['default_graphics'] is None:
                errors.append('%s does not report default application clocks' % label)
            elif (current['memory'], current['graphics']) != (current['default_memory'], current['default_graphics']):
                commands.append(['-i', idx, '-rac'])
                after['application_clocks'].update(memory=current['default_memory'],
                                                   graphics=current['default_graphics'])
        elif (current['memory'], current['graphics']) != (request['memory'], request['graphics']):
            pairs = supported_clocks or []
            if not pairs:
                errors.append('%s lists no supported application clocks' % label)
            elif (request['memory'], request['graphics']) not in pairs:
                errors.append('application_clocks memory %d MHz, graphics %d MHz is not supported by %s; %s'
                              % (request['memory'], request['graphics'], label,
                                 _describe_clocks(pairs, request['memory'])))
            else:
                commands.append(['-i', idx, '-ac', '%d,%d' % (request['memory'], request['graphics'])])
                after['application_clocks'].update(memory=request['memory'], graphics=request['graphics'])

    if errors:
        commands = []
    return {'before': gpu, 'after': after, 'commands': commands}, errors
