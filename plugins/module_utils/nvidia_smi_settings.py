# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""State, GPU selection, validation and planning for the ``nvidia_smi`` settings module.

Pure functions over GPU records (``gpu_record``) read with one ``--query-gpu``
call; nothing here runs a command.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import (
    normalize_pci_bus_id,
    parse_query_csv,
)

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


class SettingsError(ValueError):
    """A request that cannot be applied as given."""


def parse_gpus(text):
    """GPU records from the output of the ``QUERY_FIELDS`` query; ``ValueError`` when it does not fit."""
    gpus = parse_query_csv(text, QUERY_FIELDS)
    if any(gpu['index'] is None for gpu in gpus):
        raise ValueError('a GPU line has no index')
    return gpus


def gpu_label(gpu):
    return 'GPU %s (%s, %s)' % (gpu['index'], gpu.get('name') or 'unknown model', gpu.get('pci_bus_id') or 'no bus id')


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
        elif normalize_pci_bus_id(text) is not None:
            matches = [g for g in gpus if normalize_pci_bus_id(g['pci_bus_id']) == normalize_pci_bus_id(text)]
        else:
            raise SettingsError('gpus: %r is neither a GPU index, a GPU UUID (GPU-...) nor a PCI bus id' % text)
        if not matches:
            raise SettingsError('gpus: no GPU matches %s; GPUs on this host: %s' % (text, present or 'none'))
        for gpu in matches:
            chosen[gpu['index']] = gpu
    return [chosen[i] for i in sorted(chosen)]


def parse_supported_clocks(text):
    """``--query-supported-clocks=memory,graphics`` output -> list of ``(memory, graphics)`` MHz pairs."""
    return [(row['memory_mhz'], row['graphics_mhz'])
            for row in parse_query_csv(text, ['memory', 'graphics'], query='supported-clocks')
            if row['memory_mhz'] is not None and row['graphics_mhz'] is not None]


def _format_watts(value):
    return ('%d' % value) if float(value).is_integer() else ('%g' % value)


def _describe_clocks(pairs, memory):
    same_memory = sorted(set(g for m, g in pairs if m == memory), reverse=True)
    memories = sorted(set(m for m, g in pairs), reverse=True)
    if same_memory:
        return 'graphics clocks supported with memory %d MHz: %s' % (
            memory, ', '.join(str(g) for g in same_memory[:12]) + (' ...' if len(same_memory) > 12 else ''))
    return 'supported memory clocks: %s' % ', '.join(str(m) for m in memories)


def _plan_modes(gpu, wanted, after, commands, errors):
    label, idx = gpu_label(gpu), str(gpu['index'])
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


def _plan_power(gpu, wanted, after, commands, errors):
    if 'power_limit' not in wanted:
        return
    label, idx = gpu_label(gpu), str(gpu['index'])
    power = gpu['power']
    limit = float(wanted['power_limit'])
    low, high = power['limit_min_w'], power['limit_max_w']
    if low is None or high is None or power['limit_w'] is None:
        errors.append('%s does not report its power limits (power.min_limit/power.max_limit are N/A), so '
                      'power_limit cannot be managed on it' % label)
    elif not low <= limit <= high:
        errors.append('power_limit %s W is outside the range %s accepts: %s-%s W'
                      % (_format_watts(limit), label, _format_watts(low), _format_watts(high)))
    elif abs(power['limit_w'] - limit) >= POWER_LIMIT_TOLERANCE_W:
        commands.append(['-i', idx, '-pl', _format_watts(limit)])
        after['power']['limit_w'] = limit


def _plan_clocks(gpu, wanted, supported_clocks, after, commands, errors):
    if 'application_clocks' not in wanted:
        return
    label, idx = gpu_label(gpu), str(gpu['index'])
    current, defaults = gpu['clocks_applications'], gpu['clocks_default_applications']
    request = wanted['application_clocks']
    if current['memory'] is None or current['graphics'] is None:
        errors.append('%s does not support application clocks' % label)
    elif request == 'reset':
        if defaults['memory'] is None or defaults['graphics'] is None:
            errors.append('%s does not report default application clocks' % label)
        elif (current['memory'], current['graphics']) != (defaults['memory'], defaults['graphics']):
            commands.append(['-i', idx, '-rac'])
            after['clocks_applications'].update(memory=defaults['memory'], graphics=defaults['graphics'])
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
            after['clocks_applications'].update(memory=request['memory'], graphics=request['graphics'])


def plan_gpu(gpu, wanted, supported_clocks=None):
    """Validate ``wanted`` settings on one GPU record and plan the setters.

    Returns ``(plan, errors)``; ``plan`` has ``before``, ``after`` (the record
    as predicted) and ``commands`` (argument lists for nvidia-smi, in the order
    to run them).
    """
    after = copy.deepcopy(gpu)
    commands, errors = [], []
    _plan_modes(gpu, wanted, after, commands, errors)
    _plan_power(gpu, wanted, after, commands, errors)
    _plan_clocks(gpu, wanted, supported_clocks, after, commands, errors)
    if errors:
        commands = []
    return {'before': gpu, 'after': after, 'commands': commands}, errors
