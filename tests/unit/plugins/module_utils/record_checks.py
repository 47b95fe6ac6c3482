# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of a value against the shapes in ``gpu_record`` (``GPU_RECORD``, ``PROCESS`` ...), for tests.

``type_errors(value, shape)`` lists every leaf whose value is neither ``None``
nor of the type the shape names, and every key the shape does not know; an
empty list means the value is a well-typed record. ``bool`` is never taken for
``int`` (Python says it is one).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# Text nvidia-smi prints instead of a value; none may survive into a record.
UNAVAILABLE_TEXT = re.compile(r'^\s*(\[.*\]|N/A|Not Supported|Unknown Error|Not Available|Insufficient Permissions|'
                              r'GPU is lost|GPU requires reset|Requested functionality has been deprecated|)\s*$', re.I)


def _leaf_ok(value, kind):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return any(type(value) is k for k in kinds)  # pylint: disable=unidiomatic-typecheck


def type_errors(value, shape, path='gpu'):
    """Where ``value`` departs from ``shape``; see the module docstring."""
    if value is None:
        return []
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return ['%s: %r is not a section' % (path, value)]
        errors = []
        for key, item in value.items():
            if key in shape:
                errors.extend(type_errors(item, shape[key], '%s.%s' % (path, key)))
            elif '*' in shape:
                errors.extend(type_errors(item, shape['*'], '%s.%s' % (path, key)))
            else:
                errors.append('%s.%s: not a key of the record' % (path, key))
        return errors
    if isinstance(shape, list):
        if not isinstance(value, list):
            return ['%s: %r is not a list' % (path, value)]
        errors = []
        for number, item in enumerate(value):
            errors.extend(type_errors(item, shape[0], '%s[%d]' % (path, number)))
        return errors
    if not _leaf_ok(value, shape):
        return ['%s: %r is a %s, not %s' % (path, value, type(value).__name__, shape)]
    if isinstance(value, str) and UNAVAILABLE_TEXT.match(value):
        return ['%s: %r is an unavailable marker, not None' % (path, value)]
    return []


def leaves(value, path=''):
    """``{dotted path: leaf}`` of nested dicts; lists count as leaves."""
    if not isinstance(value, dict):
        return {path: value}
    found = {}
    for key, item in value.items():
        found.update(leaves(item, '%s.%s' % (path, key) if path else key))
    return found
