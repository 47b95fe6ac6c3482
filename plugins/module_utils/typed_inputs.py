# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One way to read an operator's input: the value as declared in an argument spec.

AWX surveys, INI inventories and ``-e key=value`` deliver strings. Jinja reads
the string "false" as true, so a role that tests ``not some_switch`` on the
raw value does the opposite of what the operator asked. Ansible's argument
spec validation checks that "false" *can* be a boolean but leaves the
variable a string, and nothing can overwrite an extra variable. So each
role converts its inputs once, at its entry, into one typed mapping
(``__<role>_inputs``) and reads only that mapping afterwards.

The rules, stricter than Ansible's own conversion on purpose (a tool that can
reboot a fleet should not guess):

- bool: a boolean, the integers 0 and 1, or one of true/false, yes/no, on/off,
  1/0 in any case with surrounding spaces; "y", "t", "maybe" and the empty
  string are refused.
- int: an integer, or a decimal string of ASCII digits with an optional sign
  and surrounding spaces ("1e9", "0x10", "5.0", full-width digits and booleans
  are refused); at most 2**31 - 1 in size.
- float: a number, or a decimal string ("1e-3" is refused, "0.5" is not).
- list: a YAML list; a string, even comma-separated, is refused (a list of
  command-line arguments cannot be split at commas safely). Elements are
  converted by the spec's ``elements`` type.
- dict: a mapping.
- str: a string; a whole number becomes its decimal text (YAML reads 580 as
  a number); a number with a fraction is refused (YAML reads 12.10 as 12.1,
  so the text meant is lost), and so is a boolean ("True" is never meant).
- path: a path on the managed host, so an absolute one ("/..."), without
  white space or control characters (unit files and command lines are built
  from it); "~" and relative paths are refused: they would resolve against
  whatever directory a module happens to run in.
- choices: after conversion, exactly one of the choices (case and spaces
  count).

None ("~", null) means "not set" and stays None: a role that gives null a
meaning of its own (container_toolkit_runtimes: detect the runtimes) keeps it.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math
import re

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover
    Mapping = dict

BOOL_TRUE = ('true', 'yes', 'on', '1')
BOOL_FALSE = ('false', 'no', 'off', '0')
INT_MAX = 2 ** 31 - 1
_INT_RE = re.compile(r'\s*[+-]?[0-9]+\s*\Z', re.ASCII)
_FLOAT_RE = re.compile(r'\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*\Z', re.ASCII)
_UNSAFE_PATH_RE = re.compile(r'[\s\x00-\x1f\x7f]')
EXCERPT_CHARS = 60


class InputError(ValueError):
    """A value that cannot mean what its declared type says."""


def excerpt(value):
    """A short, bounded rendering of a value for a message."""
    text = repr(value) if not isinstance(value, str) else '"%s"' % value
    if len(text) <= EXCERPT_CHARS:
        return text
    return '%s... (%d characters)' % (text[:EXCERPT_CHARS], len(text))


def to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in BOOL_TRUE:
            return True
        if word in BOOL_FALSE:
            return False
    raise InputError('must be a boolean: true or false (yes/no, on/off and 1/0 are read too, in any case)')


def to_int(value):
    if isinstance(value, bool):
        raise InputError('must be a whole number, not a boolean')
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INT_RE.match(value):
        number = int(value.strip())
    else:
        raise InputError('must be a whole number written in decimal digits, such as 30')
    if abs(number) > INT_MAX:
        raise InputError('must be a whole number of at most %d' % INT_MAX)
    return number


def to_float(value):
    if isinstance(value, bool):
        raise InputError('must be a number, not a boolean')
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and _FLOAT_RE.match(value):
        number = float(value.strip())
    else:
        raise InputError('must be a number written in decimal digits, such as 0.5')
    if math.isnan(number) or abs(number) > INT_MAX:
        raise InputError('must be a finite number of at most %d' % INT_MAX)
    return number


def to_str(value):
    if isinstance(value, bool):
        raise InputError('must be a string, not a boolean (quote it in YAML)')
    if isinstance(value, float):
        # YAML reads 12.10 as the number 12.1: the text meant is lost.
        raise InputError('must be a quoted string, not a number with a fraction (YAML reads 12.10 as 12.1)')
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return str(value)
    raise InputError('must be a string, not a %s' % _kind(value))


def to_path(value):
    text = to_str(value)
    if not text.startswith('/'):
        raise InputError('must be an absolute path on the host, starting with "/"')
    if _UNSAFE_PATH_RE.search(text):
        raise InputError('must be a path without spaces or control characters')
    return text


def _kind(value):
    if isinstance(value, Mapping):
        return 'mapping'
    if isinstance(value, (list, tuple)):
        return 'list'
    return type(value).__name__


def convert(value, option):
    """The value of one input as its argument-spec option declares it; InputError if it cannot be."""
    kind = option.get('type', 'str')
    if value is None:
        return None
    if kind == 'bool':
        result = to_bool(value)
    elif kind == 'int':
        result = to_int(value)
    elif kind == 'float':
        result = to_float(value)
    elif kind == 'str':
        result = to_str(value)
    elif kind == 'path':
        result = to_path(value)
    elif kind == 'list':
        if isinstance(value, str) or isinstance(value, Mapping) or not isinstance(value, (list, tuple)):
            raise InputError('must be a YAML list, such as ["a", "b"], not a %s: from the command line pass '
                             'it as JSON, -e \'{"name": ["a", "b"]}\'' % _kind(value))
        elements = option.get('elements')
        result = []
        for index, item in enumerate(value):
            if elements in (None, 'raw'):
                result.append(item)
                continue
            try:
                result.append(convert(item, {'type': elements}))
            except InputError as error:
                raise InputError('item %d (%s) %s' % (index, excerpt(item), error))
    elif kind == 'dict':
        if not isinstance(value, Mapping):
            raise InputError('must be a mapping (key: value), not a %s' % _kind(value))
        result = dict(value)
    else:
        result = value
    choices = option.get('choices')
    if choices:
        picked = result if isinstance(result, list) else [result]
        wrong = [item for item in picked if item not in choices]
        if wrong:
            raise InputError('must be one of %s (exactly, in this case), not %s'
                             % (', '.join(str(c) for c in choices), ', '.join(excerpt(w) for w in wrong)))
    return result


def convert_all(options, read, prefix=''):
    """Convert every option of a spec.

    ``read(name)`` returns (defined, value) for a variable. Returns (typed, errors):
    ``typed`` maps each defined option's name, less ``prefix``, to its typed value;
    ``errors`` lists "<name> <what is wrong> (got <excerpt>)" for each that cannot be converted.
    """
    typed = {}
    errors = []
    for name in sorted(options):
        option = options[name] or {}
        defined, value = read(name)
        if not defined:
            if 'default' not in option:
                if option.get('required'):
                    errors.append('%s is required' % name)
                continue
            value = option['default']
        key = name[len(prefix):] if prefix and name.startswith(prefix) else name
        try:
            typed[key] = convert(value, option)
        except InputError as error:
            errors.append('%s %s (got %s)' % (name, error, excerpt(value)))
    return typed, errors
