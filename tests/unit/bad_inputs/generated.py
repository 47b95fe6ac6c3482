# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Bad (and oddly spelled) inputs generated mechanically from every argument spec.

Every option of every role entry point (meta/argument_specs.yml) and of every
playbook (playbooks/vars/argument_specs.yml) gets the spellings an AWX survey,
an INI inventory or -e can produce for its type. Each case expects one of:

  accept   the value converts to ``expected``, its well-typed twin: the role
           then behaves exactly as with the twin, since no task reads the raw
           input (tests/unit/roles/test_inputs_read_once.py)
  refuse   the entry refuses it, naming the variable, before any task that
           could change the host

A case is a dict: id, scope (role name or "playbooks"), entry, var, value,
expect ("accept" or "refuse"), expected (for accept). The expectations come
from the collection's input rules (docs/security.md, "Operator input"), not
from running the converter: a spelling the converter read differently would
fail its case.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK_SPECS = os.path.join(REPO_ROOT, 'playbooks', 'vars', 'argument_specs.yml')

# Every spelling of a boolean that the rules accept, and what it means.
BOOL_SPELLINGS = []
for _word, _meaning in (('true', True), ('false', False), ('yes', True), ('no', False), ('on', True),
                        ('off', False)):
    BOOL_SPELLINGS += [(_word, _meaning), (_word.capitalize(), _meaning), (_word.upper(), _meaning)]
BOOL_SPELLINGS += [('1', True), ('0', False), (' true ', True), ('false\n', False), (1, True), (0, False)]
BOOL_REFUSED = ['maybe', 'y', 'n', '2', '']

# What a whole-number input gets, and what it must mean (None: refused).
INT_SPELLINGS = [('0', 0), ('-1', -1), (' 7 ', 7), ('+12', 12), ('abc', None), ('1e9', None),
                 ('99999999999999999999', None), ('0x10', None), ('1.5', None), (u'\uff17', None), (True, None)]

HUGE = 'x' * 5000

# The internal repository role's callers always pass these; a case of one of
# its other inputs needs them to be valid, or it would be refused for them.
BASE_VARS = {'repository': {
    'repository_name': 'gpufleet-test', 'repository_url': 'http://127.0.0.1:1/repo',
    'repository_key_url': 'http://127.0.0.1:1/key.asc',
    'repository_key_fingerprint': 'EB693B3035CD5710E231E123A4B469963BF863CC'}}


def _options(path):
    with open(path) as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    seen = {}
    for entry in sorted(specs):
        for name, option in sorted((specs[entry].get('options') or {}).items()):
            seen.setdefault(name, (entry, option or {}))
    return seen


def _element_sample(option):
    """A valid element of a list input, or None when none can be made up (mappings with required keys)."""
    if option.get('default'):
        return option['default'][0]
    if option.get('choices'):
        return option['choices'][0]
    if option.get('elements') == 'dict':
        required = [k for k, v in (option.get('options') or {}).items() if (v or {}).get('required')]
        return None if required else {}
    return {'int': 1, 'bool': True, 'path': '/opt/gpufleet/file'}.get(option.get('elements'), 'x')


def _cases_for(name, entry, option):
    kind = option.get('type', 'str')
    choices = option.get('choices')
    cases = []

    def add(suffix, value, expect, expected=None):
        cases.append({'id': '%s-%s' % (name, suffix), 'entry': entry, 'var': name, 'value': value,
                      'expect': expect, 'expected': expected})

    if kind == 'bool':
        for number, (spelling, meaning) in enumerate(BOOL_SPELLINGS):
            add('bool%02d' % number, spelling, 'accept', meaning)
        for number, spelling in enumerate(BOOL_REFUSED):
            add('notbool%d' % number, spelling, 'refuse')
    elif kind == 'int':
        for number, (spelling, meaning) in enumerate(INT_SPELLINGS):
            # A whole number outside an integer input's choices is refused like a word.
            if meaning is None or (choices and meaning not in choices):
                add('notint%02d' % number, spelling, 'refuse')
            else:
                add('int%02d' % number, spelling, 'accept', meaning)
        for number, choice in enumerate(choices or []):
            add('intchoice%d-text' % number, ' %s ' % choice, 'accept', choice)
    elif kind == 'list':
        sample = _element_sample(option)
        add('list-as-string', 'a,b', 'refuse')
        add('list-as-mapping', {'a': 'b'}, 'refuse')
        add('list-empty', [], 'accept', [])
        if sample is not None:
            add('list-duplicates', [sample, sample], 'accept', [sample, sample])
        if option.get('elements') == 'int':
            add('list-int-text', [' 3 '], 'accept', [3])
            add('list-int-word', ['three'], 'refuse')
        if choices:
            add('list-choice-case', [str(choices[0]).upper() + 'X'], 'refuse')
    elif kind == 'dict':
        add('dict-as-string', 'a=b', 'refuse')
        add('dict-as-list', ['a', 'b'], 'refuse')
        add('dict-empty', {}, 'accept', {})
    elif kind == 'path':
        add('path-relative', 'relative/dir', 'refuse')
        add('path-home', '~/dir', 'refuse')
        add('path-space', '/opt/my dir/file', 'refuse')
        add('path-empty', '', 'refuse')
        add('path-absolute', '/opt/gpufleet/file', 'accept', '/opt/gpufleet/file')
    elif kind == 'str':
        if choices:
            for number, choice in enumerate(choices):
                add('choice%d' % number, choice, 'accept', choice)
                add('choice%d-case' % number, str(choice).upper() if str(choice).upper() != choice
                    else str(choice).lower() + 'x', 'refuse')
                add('choice%d-space' % number, '%s ' % choice, 'refuse')
        else:
            add('str-number', 580, 'accept', '580')
            add('str-boolean', True, 'refuse')
            add('str-list', ['a'], 'refuse')
            add('str-huge-accepted-as-text', HUGE, 'accept', HUGE)
    return cases


def generate():
    """Every generated case, roles first then playbooks, in a stable order."""
    cases = []
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'meta', 'argument_specs.yml'))):
        role = os.path.basename(os.path.dirname(os.path.dirname(path)))
        for name, (entry, option) in sorted(_options(path).items()):
            for case in _cases_for(name, entry, option):
                case.update(scope=role, prefix=role + '_')
                cases.append(case)
    with open(PLAYBOOK_SPECS) as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    for entry in sorted(specs):
        prefix = 'gpufleet_site_' if entry == 'site' else 'gpufleet_upgrade_'
        for name, option in sorted(specs[entry]['options'].items()):
            for case in _cases_for(name, entry, option):
                case.update(scope='playbooks', prefix=prefix)
                cases.append(case)
    return cases


def spec_options(scope, entry):
    """The options Ansible validates at the entry (its own argument spec validation)."""
    if scope == 'playbooks':
        path = PLAYBOOK_SPECS
    else:
        path = os.path.join(REPO_ROOT, 'roles', scope, 'meta', 'argument_specs.yml')
    with open(path) as handle:
        return yaml.safe_load(handle)['argument_specs'][entry].get('options') or {}
