# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CUDA toolkit to minimum Linux x86_64 driver data, and lookups over it.

Source: CUDA Toolkit 13.2 Release Notes, "Table 3 CUDA Toolkit and Corresponding
Driver Versions" and "Table 2 ... Minor Version Compatibility"
(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html).

The data is plain Python literals so that filters, modules and roles (through the
filter) share one copy; nothing here imports Ansible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# (toolkit version, release label as NVIDIA prints it, minimum driver).
# The full three-part version is what `nvcc`/package metadata report for that
# release; for 11.0 the GA was 11.0.2 (11.0.1 was the release candidate), which is
# why the version and the label are kept separately.
CUDA_TOOLKIT_DRIVER_TABLE = (
    ('13.2.0', 'GA', '595.45.04'),
    ('13.1.1', 'Update 1', '590.48.01'),
    ('13.1.0', 'GA', '590.44.01'),
    ('13.0.2', 'Update 2', '580.95.05'),
    ('13.0.1', 'Update 1', '580.82.07'),
    ('13.0.0', 'GA', '580.65.06'),
    ('12.9.1', 'Update 1', '575.57.08'),
    ('12.9.0', 'GA', '575.51.03'),
    ('12.8.1', 'Update 1', '570.124.06'),
    ('12.8.0', 'GA', '570.26'),
    ('12.6.3', 'Update 3', '560.35.05'),
    ('12.6.2', 'Update 2', '560.35.03'),
    ('12.6.1', 'Update 1', '560.35.03'),
    ('12.6.0', 'GA', '560.28.03'),
    ('12.5.1', 'Update 1', '555.42.06'),
    ('12.5.0', 'GA', '555.42.02'),
    ('12.4.1', 'Update 1', '550.54.15'),
    ('12.4.0', 'GA', '550.54.14'),
    ('12.3.1', 'Update 1', '545.23.08'),
    ('12.3.0', 'GA', '545.23.06'),
    ('12.2.2', 'Update 2', '535.104.05'),
    ('12.2.1', 'Update 1', '535.86.09'),
    ('12.2.0', 'GA', '535.54.03'),
    ('12.1.1', 'Update 1', '530.30.02'),
    ('12.1.0', 'GA', '530.30.02'),
    ('12.0.1', 'Update 1', '525.85.12'),
    ('12.0.0', 'GA', '525.60.13'),
    ('11.8.0', 'GA', '520.61.05'),
    ('11.7.1', 'Update 1', '515.48.07'),
    ('11.7.0', 'GA', '515.43.04'),
    ('11.6.2', 'Update 2', '510.47.03'),
    ('11.6.1', 'Update 1', '510.47.03'),
    ('11.6.0', 'GA', '510.39.01'),
    ('11.5.2', 'Update 2', '495.29.05'),
    ('11.5.1', 'Update 1', '495.29.05'),
    ('11.5.0', 'GA', '495.29.05'),
    ('11.4.4', 'Update 4', '470.82.01'),
    ('11.4.3', 'Update 3', '470.82.01'),
    ('11.4.2', 'Update 2', '470.57.02'),
    ('11.4.1', 'Update 1', '470.57.02'),
    ('11.4.0', 'GA', '470.42.01'),
    ('11.3.1', 'Update 1', '465.19.01'),
    ('11.3.0', 'GA', '465.19.01'),
    ('11.2.2', 'Update 2', '460.32.03'),
    ('11.2.1', 'Update 1', '460.32.03'),
    ('11.2.0', 'GA', '460.27.03'),
    ('11.1.1', 'Update 1', '455.32'),
    ('11.1.0', 'GA', '455.23'),
    ('11.0.3', 'Update 1', '450.51.06'),
    ('11.0.2', 'GA', '450.51.05'),
    ('11.0.1', 'RC', '450.36.06'),
)

# Minor-version compatibility: an application built with any toolkit of the
# family runs (with limited features, e.g. no PTX JIT of newer PTX) on a driver
# of at least this branch.
CUDA_FAMILY_MIN_DRIVER = {
    13: '580',
    12: '525',
    11: '450',
}

# 450.80.02 is the driver NVIDIA names for *full* 11.x minor-version compatibility.
CUDA_FAMILY_RECOMMENDED_DRIVER = {
    11: '450.80.02',
}

_LABEL_RE = re.compile(r'^(?:GA|RC|Update\s+(\d+))$', re.IGNORECASE)
_VERSION_RE = re.compile(
    r'^\s*(?:cuda[\s_-]*)?v?(\d+)\.(\d+)(?:\.(\d+))?(?:\s+(GA|RC|Update\s+\d+))?\s*$',
    re.IGNORECASE,
)
_DRIVER_RE = re.compile(r'^\s*(?:\d+:)?(\d{2,4})(?:\.\d+)*(?:[-~+].*)?\s*$')


class CudaVersionError(ValueError):
    """Raised for a toolkit or driver version the table cannot answer for."""


def _entries():
    for version, label, driver in CUDA_TOOLKIT_DRIVER_TABLE:
        major, minor, patch = (int(p) for p in version.split('.'))
        yield {
            'version': version,
            'major': major,
            'minor': minor,
            'patch': patch,
            'label': label,
            'driver': driver,
        }


def known_toolkit_versions():
    """Return the ``X.Y`` toolkit versions in the table, newest first."""
    seen = []
    for entry in _entries():
        key = '%d.%d' % (entry['major'], entry['minor'])
        if key not in seen:
            seen.append(key)
    return seen


def _normalise_label(label):
    match = _LABEL_RE.match(label.strip())
    if not match:
        return None
    if match.group(1) is not None:
        return 'Update %d' % int(match.group(1))
    return label.strip().upper()


def parse_toolkit_version(value):
    """Split a toolkit version into ``(major, minor, patch_or_None, label_or_None)``.

    Accepts ``12.8``, ``12.8.1``, ``12.8 Update 1``, ``12.8 GA`` and the table's own
    spelling for early 11.x (``11.2.1 Update 1``).
    """
    if isinstance(value, bool) or value is None:
        raise CudaVersionError('CUDA toolkit version must be a string such as "12.8", got %r' % (value,))
    if isinstance(value, float):
        # A float loses trailing zeros (12.10 -> 12.1): refuse rather than guess.
        raise CudaVersionError(
            'CUDA toolkit version %r was given as a number; quote it (for example "12.8") so that minor '
            'versions such as "12.10" are not read as "12.1"' % (value,))
    text = str(value)
    match = _VERSION_RE.match(text)
    if not match:
        raise CudaVersionError(
            'cannot read CUDA toolkit version %r; expected "X.Y", "X.Y.Z" or "X.Y Update N"' % (text,))
    major, minor = int(match.group(1)), int(match.group(2))
    patch = int(match.group(3)) if match.group(3) is not None else None
    label = _normalise_label(match.group(4)) if match.group(4) else None
    return major, minor, patch, label


def toolkit_min_driver(value):
    """Minimum Linux x86_64 driver for one toolkit release.

    ``X.Y`` (or ``X.Y GA``) answers for the GA release; ``X.Y.Z`` and
    ``X.Y Update N`` answer for that update. An update the table does not list is
    an error, because a later update may need a newer driver than any listed one.
    """
    major, minor, patch, label = parse_toolkit_version(value)
    rows = [e for e in _entries() if e['major'] == major and e['minor'] == minor]
    if not rows:
        raise CudaVersionError(
            'CUDA toolkit %d.%d is not in the minimum-driver table (known: %s)'
            % (major, minor, ', '.join(known_toolkit_versions())))

    def _describe(wanted):
        return ', '.join('%s (%s)' % (e['version'], e['label']) for e in sorted(wanted, key=lambda e: e['patch']))

    if patch is None and label in (None, 'GA'):
        chosen = [e for e in rows if e['label'] == 'GA']
    elif patch is None:
        chosen = [e for e in rows if e['label'] == label]
    else:
        chosen = [e for e in rows if e['patch'] == patch]
        if chosen and label is not None and chosen[0]['label'] != label:
            raise CudaVersionError(
                'CUDA toolkit %s: %d.%d.%d is "%s", not "%s"; known releases of %d.%d: %s'
                % (value, major, minor, patch, chosen[0]['label'], label, major, minor, _describe(rows)))
    if not chosen:
        raise CudaVersionError(
            'CUDA toolkit %s is not in the minimum-driver table; known releases of %d.%d: %s'
            % (value, major, minor, _describe(rows)))
    return chosen[0]['driver']


def family_min_driver(value):
    """Minimum driver branch under minor-version compatibility for the toolkit's major."""
    if isinstance(value, int) and not isinstance(value, bool):
        major = value
    else:
        text = str(value).strip()
        if re.match(r'^\d+$', text):
            major = int(text)
        else:
            major = parse_toolkit_version(value)[0]
    if major not in CUDA_FAMILY_MIN_DRIVER:
        raise CudaVersionError(
            'CUDA %s: no minor-version compatibility data for major version %d (known: %s)'
            % (value, major, ', '.join('%d.x' % m for m in sorted(CUDA_FAMILY_MIN_DRIVER, reverse=True))))
    return CUDA_FAMILY_MIN_DRIVER[major]


def driver_branch(value):
    """Branch (first component) of a Linux driver version: ``570.195.03`` -> ``570``.

    Also reads package versions such as ``570.195.03-0ubuntu1`` or ``3:570.195.03-1``.
    """
    if isinstance(value, bool) or value is None:
        raise CudaVersionError('driver version must be a string such as "570.195.03", got %r' % (value,))
    text = str(value)
    match = _DRIVER_RE.match(text)
    if not match:
        raise CudaVersionError(
            'cannot read NVIDIA driver version %r; expected something like "570.195.03"' % (text,))
    return str(int(match.group(1)))
