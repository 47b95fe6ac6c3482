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
        problem = _check_count(gpu_label, name, count)
        if problem:
            errors.append(problem)
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


# ---------------------------------------------------------------------------
# MIG profiles per GPU model
#
# While MIG mode is off a GPU lists no profiles (``nvidia-smi mig -lgip`` prints
# "No MIG-enabled devices found"), yet a layout must be checked before MIG mode
# is enabled, services stopped and the GPU reset. This table is what that check
# reads. With MIG mode on, the GPU's own list is used instead and this table
# plays no part: drivers older than a profile (the A30's +me profiles, for one)
# do not list it, and the GPU's list is the authority.
#
# Each model: ``model`` (label for messages), ``names`` (regular expression
# matched, case-insensitively, against the product name nvidia-smi prints,
# without its "NVIDIA " prefix), ``memory_gib`` (nominal memory: among models
# whose names match, the one nearest to memory.total is taken), ``compute_slices``
# and ``memory_slices`` of the whole GPU, ``profiles`` ({name: {slices,
# memory_slices, instances}}: compute slices, memory slices and the most
# instances one GPU holds, the Total column of -lgip) and ``source``.
#
# Memory slices follow the placement sizes of the guide's ``-lgipp`` example
# (1g.10gb on an A100 40GB spans two slices, although the guide's A100 table
# prints 1/8 for it). GB200 is not here: NVIDIA's own sources name its profiles
# differently from driver to driver (1g.23gb or 1g.24gb, 3g.93gb or 3g.95gb,
# 7g.186gb or 7g.189gb), so a table could refuse a valid layout; enable MIG
# mode first, or describe it with the module's gpu_profiles.

MIG_USER_GUIDE = ('NVIDIA Multi-Instance GPU User Guide (r580), "Supported MIG Profiles" and "Supported GPUs", '
                  'https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html')
MIG_VGPU_TYPES = ('NVIDIA AI Enterprise documentation, "NVIDIA vGPU Types by Hardware: Hopper Architecture vGPU Types", '
                  'MIG-backed vGPU tables (GPU instance profile, maximum per GPU), https://docs.nvidia.com/ai-enterprise/')
MIG_PARTED_CONFIG = ('NVIDIA mig-parted, deployments/systemd/config-default.yaml (profiles and counts per PCI device '
                     'ID), https://github.com/NVIDIA/mig-parted')

# Memory tolerance when a product name matches several models: memory.total is
# a little under the nominal size (H200: 143771 MiB for 141 GB, H100 80GB HBM3:
# 81559 MiB).
_MODEL_MEMORY_TOLERANCE = 0.04


def _profiles(*rows):
    return dict((name, {'slices': slices, 'memory_slices': memory, 'instances': instances})
                for name, slices, memory, instances in rows)


def _seven_slice_profiles(small, large, two, half, full):
    """The profile set of the 7-compute / 8-memory-slice GPUs (GA100, GH100, GB100), by memory size names."""
    return _profiles(
        ('1g.%s' % small, 1, 1, 7),
        ('1g.%s+me' % small, 1, 1, 1),
        ('1g.%s' % large, 1, 2, 4),
        ('2g.%s' % two, 2, 2, 3),
        ('3g.%s' % half, 3, 4, 2),
        ('4g.%s' % half, 4, 4, 1),
        ('7g.%s' % full, 7, 8, 1),
    )


MIG_PROFILE_TABLE = (
    {'model': 'A30 24GB', 'names': r'^A30$', 'memory_gib': 24, 'compute_slices': 4, 'memory_slices': 4,
     'profiles': _profiles(('1g.6gb', 1, 1, 4), ('1g.6gb+me', 1, 1, 1), ('2g.12gb', 2, 2, 2),
                           ('2g.12gb+me', 2, 2, 1), ('4g.24gb', 4, 4, 1)),
     'source': MIG_USER_GUIDE + ', A30 table (1g.6gb+me from R470, 2g.12gb+me from R525)'},
    {'model': 'A100 40GB', 'names': r'^A100\b', 'memory_gib': 40, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('5gb', '10gb', '10gb', '20gb', '40gb'),
     'source': MIG_USER_GUIDE + ', A100 table (A100-SXM4-40GB; the PCIe 40GB card has the same profiles)'},
    {'model': 'A100 80GB', 'names': r'^A100\b', 'memory_gib': 80, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('10gb', '20gb', '20gb', '40gb', '80gb'),
     'source': MIG_USER_GUIDE + ', A100 table and its note on the A100-SXM4-80GB names'},
    {'model': 'H100 80GB', 'names': r'^H100\b', 'memory_gib': 80, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('10gb', '20gb', '20gb', '40gb', '80gb'),
     'source': MIG_USER_GUIDE + ', H100 table (PCIe and SXM5 80GB)'},
    {'model': 'H100 94GB', 'names': r'^H100\b', 'memory_gib': 94, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('12gb', '24gb', '24gb', '47gb', '94gb'),
     'source': MIG_VGPU_TYPES + ' (H100 PCIe 94GB / H100 NVL, H100 SXM5 94GB); ' + MIG_PARTED_CONFIG},
    {'model': 'H100 96GB', 'names': r'^(GH200|H100)\b', 'memory_gib': 96, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('12gb', '24gb', '24gb', '48gb', '96gb'),
     'source': MIG_USER_GUIDE + ' (H100 96GB, H100 on GH200: named, table not read); ' + MIG_PARTED_CONFIG
     + '; the -lgip of a GH200 480GB in tests/unit/plugins/module_utils/fixtures/nvidia_mig'},
    {'model': 'GH200 144GB', 'names': r'^GH200\b', 'memory_gib': 144, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('18gb', '36gb', '36gb', '72gb', '144gb'),
     'source': MIG_PARTED_CONFIG + ' ("GH200 144G HBM3e"; not in the MIG User Guide tables)'},
    {'model': 'H200 141GB', 'names': r'^H200\b', 'memory_gib': 141, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('18gb', '35gb', '35gb', '71gb', '141gb'),
     'source': MIG_USER_GUIDE + ', H200 table; ' + MIG_VGPU_TYPES + ' (H200 SXM5 141GB, H200 NVL)'},
    {'model': 'B200 180GB', 'names': r'^B200\b', 'memory_gib': 180, 'compute_slices': 7, 'memory_slices': 8,
     'profiles': _seven_slice_profiles('23gb', '45gb', '45gb', '90gb', '180gb'),
     'source': MIG_USER_GUIDE + ', B200 table'},
    {'model': 'RTX PRO 6000 Blackwell', 'names': r'^RTX PRO 6000 Blackwell\b', 'memory_gib': 96,
     'compute_slices': 4, 'memory_slices': 4,
     'profiles': _profiles(('1g.24gb', 1, 1, 4), ('1g.24gb+me', 1, 1, 1), ('1g.24gb+gfx', 1, 1, 4),
                           ('1g.24gb+me.all', 1, 1, 1), ('1g.24gb-me', 1, 1, 4), ('2g.48gb', 2, 2, 2),
                           ('2g.48gb+gfx', 2, 2, 2), ('2g.48gb+me.all', 2, 2, 1), ('2g.48gb-me', 2, 2, 2),
                           ('4g.96gb', 4, 4, 1), ('4g.96gb+gfx', 4, 4, 1)),
     'source': MIG_USER_GUIDE + ', RTX PRO 6000 table (Server, Workstation and Max-Q Workstation Editions)'},
)

_NVIDIA_PREFIX_RE = re.compile(r'^\s*NVIDIA\s+', re.I)
_PROFILE_NAME_RE = re.compile(r'^[0-9]+g\.[0-9]+gb\S*$')


def product_key(name):
    """``NVIDIA  H100 NVL`` -> ``h100 nvl``: the product name without its prefix, for comparisons."""
    return ' '.join(_NVIDIA_PREFIX_RE.sub('', name or '').split()).lower()


def gpu_profiles_models(gpu_profiles):
    """Models from an operator's ``{product name: {profile: most instances}}``; raises ValueError naming the entry.

    They carry names and counts only: no slices, so only those are checked.
    """
    models = {}
    for product, rows in (gpu_profiles or {}).items():
        label = str(product).strip()
        if not product_key(label):
            raise ValueError('a key is empty: use the product name nvidia-smi prints (nvidia-smi --query-gpu=name)')
        if not isinstance(rows, dict) or not rows:
            raise ValueError('%s: must map MIG profile names to the most instances of each, got %r' % (label, rows))
        profiles = {}
        for name, count in rows.items():
            short = profile_short_name(str(name))
            if not _PROFILE_NAME_RE.match(short):
                raise ValueError('%s: %r is not a MIG profile name such as 1g.10gb' % (label, name))
            if isinstance(count, str) and count.strip().isdigit():
                count = int(count)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError('%s: the count for %s must be a whole number >= 1, got %r' % (label, name, count))
            profiles[short] = {'slices': profile_slices(short), 'memory_slices': None, 'instances': count}
        models[product_key(label)] = {'model': label, 'names': None, 'memory_gib': None, 'compute_slices': None,
                                      'memory_slices': None, 'profiles': profiles, 'source': 'gpu_profiles'}
    return models


def find_gpu_model(product_name, memory_total_mib=None, extra=None):
    """The profile table entry of a GPU, or ``None`` when its model is unknown or ambiguous.

    ``extra`` (from ``gpu_profiles_models``) is looked up first, by exact product name.
    """
    key = product_key(product_name)
    if not key:
        return None
    if extra and key in extra:
        return extra[key]
    candidates = [m for m in MIG_PROFILE_TABLE if re.search(m['names'], key, re.I)]
    if len(candidates) <= 1 or memory_total_mib is None:
        return candidates[0] if len(candidates) == 1 else None
    gib = memory_total_mib / 1024.0
    near = [m for m in candidates if abs(gib - m['memory_gib']) <= _MODEL_MEMORY_TOLERANCE * m['memory_gib']]
    return min(near, key=lambda m: abs(gib - m['memory_gib'])) if near else None


def _check_count(gpu_label, name, count):
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return '%s: the count for profile %s must be a whole number >= 0, got %r' % (gpu_label, name, count)
    return None


def validate_layout_for_model(gpu_label, desired, model):
    """Check a desired ``{profile: count}`` against a profile table entry (``find_gpu_model``).

    The same errors as ``validate_layout`` where the table has the data: names,
    counts, then compute and memory slices of the whole GPU (operator entries
    have no slices: names and counts only). Placement can still refuse a
    layout within those sums; the driver says so when the layout is applied.
    """
    errors = []
    table = model['profiles']
    available = ', '.join('%s (up to %d)' % (name, table[name]['instances'])
                          for name in sorted(table, key=lambda n: (table[n]['slices'] or 0,
                                                                   table[n]['memory_slices'] or 0, len(n), n)))
    for name, count in sorted(desired.items()):
        problem = _check_count(gpu_label, name, count)
        if problem:
            errors.append(problem)
        elif name not in table:
            errors.append('%s: MIG profile %s is not offered by the %s; its profiles: %s'
                          % (gpu_label, name, model['model'], available))
        elif count > table[name]['instances']:
            errors.append('%s: %d x %s requested but the GPU holds at most %d'
                          % (gpu_label, count, name, table[name]['instances']))
    if errors:
        return errors
    for key, what in (('slices', 'compute'), ('memory_slices', 'memory')):
        whole = model.get('compute_slices' if key == 'slices' else 'memory_slices')
        if whole is None or any(table[n][key] is None for n in desired):
            continue
        needed = sum(table[n][key] * c for n, c in desired.items())
        if needed > whole:
            errors.append('%s: the layout needs %d %s slices but the %s has %d (%s)'
                          % (gpu_label, needed, what, model['model'], whole, _describe_request(desired)))
    return errors
