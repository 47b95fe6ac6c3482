# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parsers for ``nvidia-smi mig`` listings and command output, and MIG layout planning.

Everything here is pure: text in, plain data out. ``nvidia-smi mig`` has no CSV or
XML mode, so its box-drawn tables are read row by row with anchored regular
expressions keyed on the profile name (``MIG <name>``), not on column positions:
column widths change with driver branch and with the longest profile name
(``1g.24gb+me.all`` widens the table on Blackwell).

A table row that looks like data but does not match raises ``MigParseError``
instead of being skipped, so that a format change shows up as an error and never
as "no instances".
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


class MigParseError(ValueError):
    """Output of ``nvidia-smi mig`` that does not have the expected shape."""


# Messages nvidia-smi prints (with a non-zero exit) when a listing is empty.
_EMPTY_LISTING_RE = re.compile(
    r'No MIG-enabled devices found|No (?:GPU|compute) instances? found|No GPU instance profiles found',
    re.I)

_PROFILE_ROW_RE = re.compile(
    r'^\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)'
    r'\s+(?P<memory>\d+(?:\.\d+)?)\s+(?P<p2p>\S+)'
    r'(?:\s+(?P<sm>\d+)(?:\s+(?P<dec>\d+)(?:\s+(?P<enc>\d+))?)?)?\s*\|$')
_PROFILE_CONT_RE = re.compile(r'^\|\s+(?P<ce>\d+)(?:\s+(?P<jpeg>\d+)(?:\s+(?P<ofa>\d+))?)?\s*\|$')

_GI_ROW_RE = re.compile(
    r'^\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<profile_id>\d+)\s+(?P<instance_id>\d+)'
    r'(?:\s+(?P<start>\d+):(?P<size>\d+))?\s*\|$')

_CI_ROW_RE = re.compile(
    r'^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<name>MIG\s+\S+)\s+(?P<profile_id>\d+)\*?\s+(?P<instance_id>\d+)'
    r'(?:\s+(?P<start>\d+):(?P<size>\d+))?\s*\|$')

# A line inside a table body that carries data: "|   0 ..." (not a border, not a header).
_DATA_ROW_RE = re.compile(r'^\|\s*\d+\s+\S')

_CREATED_GI_RE = re.compile(
    r'^Successfully created GPU instance ID\s+(?P<gi>\d+) on GPU\s+(?P<gpu>\d+) using profile '
    r'(?P<name>MIG\s+\S+) \(ID\s+(?P<profile_id>\d+)\)')
_CREATED_CI_RE = re.compile(
    r'^Successfully created compute instance(?: ID\s+(?P<ci>\d+))? on GPU\s+(?P<gpu>\d+) GPU instance ID\s+'
    r'(?P<gi>\d+) using profile (?P<name>MIG\s+\S+) \(ID\s+(?P<profile_id>\d+)\)')
_DESTROYED_CI_RE = re.compile(
    r'^Successfully destroyed compute instance ID\s+(?P<ci>\d+) from GPU\s+(?P<gpu>\d+) GPU instance ID\s+(?P<gi>\d+)')
_DESTROYED_GI_RE = re.compile(r'^Successfully destroyed GPU instance ID\s+(?P<gi>\d+) from GPU\s+(?P<gpu>\d+)')
_FAILURE_LINE_RE = re.compile(r'^(?:Unable to|Failed to)\b')

_SLICES_RE = re.compile(r'^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.', re.I)


def profile_short_name(name):
    """``MIG 1g.10gb`` -> ``1g.10gb`` (lower case); short names pass through."""
    text = (name or '').strip()
    if text[:4].upper() == 'MIG ':
        text = text[4:].strip()
    return text.lower()


def profile_slices(name):
    """Compute slices of a GPU instance profile (``3g.40gb`` -> 3), or ``None``."""
    match = _SLICES_RE.match(profile_short_name(name))
    return int(match.group('g')) if match else None


def is_full_compute_instance(name):
    """True for a compute instance spanning its whole GPU instance (``3g.40gb``, not ``1c.3g.40gb``)."""
    match = _SLICES_RE.match(profile_short_name(name))
    return bool(match) and match.group('c') is None


def is_empty_listing(stdout, stderr=''):
    """True when nvidia-smi said that a MIG listing has nothing to show."""
    return bool(_EMPTY_LISTING_RE.search('%s\n%s' % (stdout or '', stderr or '')))


def _table_lines(text, title):
    """Yield the stripped body lines of the box-drawn table titled ``title``.

    Raises MigParseError when the text is neither that table nor an empty-listing message.
    """
    lines = [line.strip() for line in (text or '').splitlines()]
    lines = [line for line in lines if line]
    if not lines or is_empty_listing(text):
        return []
    for pos, line in enumerate(lines):
        if line.startswith('|') and title.lower() in line.lower():
            body = []
            in_body = False
            for row in lines[pos + 1:]:
                if row.startswith('|=') or row.startswith('+='):
                    in_body = True
                    continue
                if in_body:
                    body.append(row)
            if not in_body:
                raise MigParseError('nvidia-smi output has a "%s" title but no table body' % title)
            return body
    raise MigParseError('expected an nvidia-smi "%s" table, got: %s' % (title, lines[0][:120]))


def _check_unmatched(row, what):
    if _DATA_ROW_RE.match(row):
        raise MigParseError('unrecognised %s row: %s' % (what, row))


def parse_gpu_instance_profiles(text):
    """Parse ``nvidia-smi mig -lgip``.

    Returns a list of dicts, one per GPU and profile: ``gpu``, ``name`` (short,
    e.g. ``1g.10gb``), ``profile_id``, ``free``, ``total``, ``memory_gib``,
    ``p2p`` (bool), ``slices`` and, when printed, ``sm``, ``dec``, ``enc``, ``ce``,
    ``jpeg``, ``ofa``.
    """
    profiles = []
    last = None
    for row in _table_lines(text, 'GPU instance profiles:'):
        if row.startswith('+') or row.startswith('|-'):
            last = None
            continue
        match = _PROFILE_ROW_RE.match(row)
        if match:
            last = {
                'gpu': int(match.group('gpu')),
                'name': profile_short_name(match.group('name')),
                'profile_id': int(match.group('id')),
                'free': int(match.group('free')),
                'total': int(match.group('total')),
                'memory_gib': float(match.group('memory')),
                'p2p': match.group('p2p').lower() == 'yes',
                'slices': profile_slices(match.group('name')),
            }
            for key in ('sm', 'dec', 'enc'):
                value = match.group(key)
                last[key] = int(value) if value is not None else None
            profiles.append(last)
            continue
        cont = _PROFILE_CONT_RE.match(row)
        if cont and last is not None:
            for key in ('ce', 'jpeg', 'ofa'):
                value = cont.group(key)
                last[key] = int(value) if value is not None else None
            last = None
            continue
        _check_unmatched(row, 'GPU instance profile')
    return profiles


def parse_gpu_instances(text):
    """Parse ``nvidia-smi mig -lgi``.

    Returns a list of dicts: ``gpu``, ``name`` (short), ``profile_id``,
    ``gpu_instance_id`` and ``placement`` (``{'start': int, 'size': int}`` or
    ``None`` on drivers that do not print it).
    """
    instances = []
    for row in _table_lines(text, 'GPU instances:'):
        if row.startswith('+') or row.startswith('|-'):
            continue
        match = _GI_ROW_RE.match(row)
        if match:
            instances.append({
                'gpu': int(match.group('gpu')),
                'name': profile_short_name(match.group('name')),
                'profile_id': int(match.group('profile_id')),
                'gpu_instance_id': int(match.group('instance_id')),
                'placement': _placement(match),
            })
            continue
        _check_unmatched(row, 'GPU instance')
    return instances


def parse_compute_instances(text):
    """Parse ``nvidia-smi mig -lci``.

    Returns a list of dicts: ``gpu``, ``gpu_instance_id``, ``name`` (short),
    ``profile_id``, ``compute_instance_id`` and ``placement`` (or ``None``).
    """
    instances = []
    for row in _table_lines(text, 'Compute instances:'):
        if row.startswith('+') or row.startswith('|-'):
            continue
        match = _CI_ROW_RE.match(row)
        if match:
            instances.append({
                'gpu': int(match.group('gpu')),
                'gpu_instance_id': int(match.group('gi')),
                'name': profile_short_name(match.group('name')),
                'profile_id': int(match.group('profile_id')),
                'compute_instance_id': int(match.group('instance_id')),
                'placement': _placement(match),
            })
            continue
        _check_unmatched(row, 'compute instance')
    return instances


def _placement(match):
    if match.group('start') is None:
        return None
    return {'start': int(match.group('start')), 'size': int(match.group('size'))}


def parse_mig_command_output(text):
    """Parse the messages of ``mig -cgi ... -C``, ``-cci``, ``-dci`` and ``-dgi``.

    Returns ``created_gpu_instances``, ``created_compute_instances``,
    ``destroyed_compute_instances``, ``destroyed_gpu_instances`` (lists of dicts
    with ``gpu``, ``gpu_instance_id`` and, where printed, ``compute_instance_id``,
    ``name``, ``profile_id``) and ``errors`` (the "Unable to"/"Failed to" lines).
    """
    result = {
        'created_gpu_instances': [],
        'created_compute_instances': [],
        'destroyed_compute_instances': [],
        'destroyed_gpu_instances': [],
        'errors': [],
    }
    for line in (text or '').splitlines():
        line = line.strip()
        match = _CREATED_GI_RE.match(line)
        if match:
            result['created_gpu_instances'].append({
                'gpu': int(match.group('gpu')),
                'gpu_instance_id': int(match.group('gi')),
                'name': profile_short_name(match.group('name')),
                'profile_id': int(match.group('profile_id')),
            })
            continue
        match = _CREATED_CI_RE.match(line)
        if match:
            result['created_compute_instances'].append({
                'gpu': int(match.group('gpu')),
                'gpu_instance_id': int(match.group('gi')),
                'compute_instance_id': int(match.group('ci')) if match.group('ci') is not None else None,
                'name': profile_short_name(match.group('name')),
                'profile_id': int(match.group('profile_id')),
            })
            continue
        match = _DESTROYED_CI_RE.match(line)
        if match:
            result['destroyed_compute_instances'].append({
                'gpu': int(match.group('gpu')),
                'gpu_instance_id': int(match.group('gi')),
                'compute_instance_id': int(match.group('ci')),
            })
            continue
        match = _DESTROYED_GI_RE.match(line)
        if match:
            result['destroyed_gpu_instances'].append({
                'gpu': int(match.group('gpu')),
                'gpu_instance_id': int(match.group('gi')),
            })
            continue
        if _FAILURE_LINE_RE.match(line):
            result['errors'].append(line)
    return result


# ---------------------------------------------------------------------------
# Layout planning


def current_layout(gpu_index, gpu_instances, compute_instances):
    """GPU instances of one GPU, each with its compute instances, sorted by GPU instance id."""
    layout = []
    for gi in sorted((g for g in gpu_instances if g['gpu'] == gpu_index), key=lambda g: g['gpu_instance_id']):
        cis = sorted(
            (c for c in compute_instances
             if c['gpu'] == gpu_index and c['gpu_instance_id'] == gi['gpu_instance_id']),
            key=lambda c: c['compute_instance_id'])
        layout.append({
            'gpu_instance_id': gi['gpu_instance_id'],
            'profile': gi['name'],
            'profile_id': gi['profile_id'],
            'placement': gi.get('placement'),
            'compute_instances': [
                {'compute_instance_id': c['compute_instance_id'], 'profile': c['name'],
                 'profile_id': c['profile_id']} for c in cis],
        })
    return layout


def layout_counts(layout):
    """``{'1g.10gb': 7}`` for the GPU instances of a layout that have exactly one full compute instance.

    The second value is the number of GPU instances that do not have that shape
    (no compute instance, or several partial ones): they never match a declared layout.
    """
    counts = {}
    odd = 0
    for gi in layout:
        cis = gi['compute_instances']
        if len(cis) == 1 and is_full_compute_instance(cis[0]['profile']):
            counts[gi['profile']] = counts.get(gi['profile'], 0) + 1
        else:
            odd += 1
    return counts, odd


def layout_matches(layout, desired):
    counts, odd = layout_counts(layout)
    wanted = dict((k, v) for k, v in desired.items() if v)
    return odd == 0 and counts == wanted


def describe_layout(layout):
    """Sorted list of GPU instance profile names, for diffs and messages."""
    return sorted(gi['profile'] for gi in layout)


def expand_desired(desired):
    """``{'3g.40gb': 1, '1g.10gb': 2}`` -> ``['3g.40gb', '1g.10gb', '1g.10gb']``, largest first."""
    names = []
    for name in sorted(desired, key=lambda n: (-(profile_slices(n) or 0), n)):
        names.extend([name] * desired[name])
    return names


def validate_layout(gpu_label, desired, profiles):
    """Check a desired ``{profile: count}`` against the ``-lgip`` profiles of one GPU.

    ``profiles`` are that GPU's rows from ``parse_gpu_instance_profiles``. Returns a
    list of error messages (empty when the layout fits). Totals, not free counts,
    are used because a GPU that does not match is re-partitioned from scratch.
    """
    errors = []
    by_name = dict((p['name'], p) for p in profiles)
    available = ', '.join(
        '%s (ID %d, up to %d)' % (p['name'], p['profile_id'], p['total']) for p in profiles) or 'none'
    for name, count in sorted(desired.items()):
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            errors.append('%s: the count for profile %s must be a whole number >= 0, got %r' % (gpu_label, name, count))
            continue
        if name not in by_name:
            errors.append('%s: MIG profile %s is not offered by this GPU; available: %s' % (gpu_label, name, available))
            continue
        if count > by_name[name]['total']:
            errors.append('%s: %d x %s requested but the GPU holds at most %d'
                          % (gpu_label, count, name, by_name[name]['total']))
    if errors:
        return errors

    # The profile with the most slices is the whole GPU: its slices and memory are the capacity.
    whole = max(profiles, key=lambda p: ((p['slices'] or 0), p['memory_gib'])) if profiles else None
    if whole is None:
        return errors
    slices = sum((by_name[n]['slices'] or 0) * c for n, c in desired.items())
    memory = sum(by_name[n]['memory_gib'] * c for n, c in desired.items())
    if slices > (whole['slices'] or 0):
        errors.append('%s: the layout needs %d compute slices but the GPU has %d (%s)'
                      % (gpu_label, slices, whole['slices'], _describe_request(desired)))
    # Profiles round memory to 0.01 GiB; allow for that rounding.
    if memory > whole['memory_gib'] + 0.05 * max(1, sum(desired.values())):
        errors.append('%s: the layout needs %.2f GiB of GPU memory but the GPU has %.2f GiB (%s)'
                      % (gpu_label, memory, whole['memory_gib'], _describe_request(desired)))
    return errors


def _describe_request(desired):
    return ', '.join('%d x %s' % (c, n) for n, c in sorted(desired.items()) if c)
