# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every input is converted once, at the entry, and read only as typed afterwards.

AWX surveys, INI inventories and -e deliver strings, and "false" is true to
Jinja: a task that tests a raw input does the opposite of what the operator
asked. So each role entry point (and each playbook that has inputs) starts
with one task that converts every input (the gpufleet.nvidia.role_inputs
lookup) into ``__<role>_inputs``; this file checks that it does, and that no
expression in the role's tasks, handlers, vars or templates reads one of the
role's own inputs raw. That static guarantee is what lets the generated
bad-input suite (tests/unit/bad_inputs/test_generated_inputs.py) compare
typed values instead of running every spelling through every role.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import jinja2
import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import (
    REPO_ROOT, ROLE_NAMES, entry_points, role_path)

# Keys whose value Ansible evaluates as a bare Jinja expression.
CONDITION_KEYS = {'when', 'that', 'changed_when', 'failed_when', 'until'}
# check_inputs rules name their variable in "var": the raw name, for the message.
NAME_KEYS = {'var'}
JINJA = re.compile(r'\{\{.*?\}\}|\{%.*?%\}', re.S)
# Play keywords are templated before any task runs, from extra and play
# variables: the playbook's first play checks the same variables first.
PLAY_KEYWORDS = {'hosts', 'serial', 'max_fail_percentage', 'order'}


def _expressions(text, skip_keys=()):
    """(line, expression text) of every Jinja expression in a YAML file."""
    found = []

    def walk(node, key=None):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else None
                if name in NAME_KEYS or name in skip_keys:
                    continue
                walk(v, name)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, key if key in CONDITION_KEYS else None)
        elif isinstance(node, yaml.ScalarNode):
            chunk = text[node.start_mark.index:node.end_mark.index]
            line = node.start_mark.line + 1
            if key in CONDITION_KEYS:
                # The parsed value: a condition may be a quoted YAML string.
                found.append((line, node.value))
            else:
                found.extend((line, m.group(0)) for m in JINJA.finditer(chunk))

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        walk(root)
    return found


def _raw_reads(expression, names):
    """The input names an expression reads as variables (not as attributes, not inside string literals)."""
    source = expression if expression.lstrip().startswith(('{{', '{%')) else '{{ %s }}' % expression
    try:
        tokens = [(token, value) for _line, token, value in jinja2.Environment().lex(source)]
    except jinja2.TemplateSyntaxError:
        # Not Jinja after all (a plain value of a condition key is rare): read it as words.
        return [word for word in re.findall(r'[A-Za-z_]\w*', expression) if word in names]
    found = []
    for index, (token, value) in enumerate(tokens):
        if token == 'name' and value in names and (index == 0 or tokens[index - 1] != ('operator', '.')):
            found.append(value)
    return found


def _role_inputs(role):
    names = set()
    for spec in entry_points(role).values():
        names.update((spec.get('options') or {}).keys())
    return names


def _role_files(role):
    base = role_path(role)
    yaml_files = sorted(glob.glob(base + '/tasks/*.yml') + glob.glob(base + '/handlers/*.yml')
                        + glob.glob(base + '/vars/*.yml'))
    templates = sorted(p for p in glob.glob(base + '/templates/**/*', recursive=True) if os.path.isfile(p))
    return yaml_files, templates


def _role_expressions(role):
    """(path relative to the checkout, line, expression) of every Jinja expression of the role's tasks,
    handlers, vars and templates."""
    yaml_files, templates = _role_files(role)
    for path in yaml_files:
        with open(path) as handle:
            text = handle.read()
        for line, expression in _expressions(text):
            yield os.path.relpath(path, REPO_ROOT), line, expression
    for path in templates:
        with open(path) as handle:
            text = handle.read()
        for match in JINJA.finditer(text):
            yield os.path.relpath(path, REPO_ROOT), text.count('\n', 0, match.start()) + 1, match.group(0)


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_no_expression_reads_a_raw_input(role):
    names = _role_inputs(role)
    raw = ['%s:%d: %s' % (path, line, name)
           for path, line, expression in _role_expressions(role) for name in _raw_reads(expression, names)]
    assert raw == [], 'read __%s_inputs.<name> instead of the raw input:\n%s' % (role, '\n'.join(raw))


def _always_typed(role):
    """{key: 'int' or 'bool'} for the role's int and bool inputs that always hold a value of their type
    in __<role>_inputs (required, or a default that is not null)."""
    typed = {}
    for spec in entry_points(role).values():
        for name, option in (spec.get('options') or {}).items():
            option = option or {}
            if option.get('type') in ('int', 'bool') and (option.get('required') or option.get('default') is not None):
                typed[name[len(role) + 1:] if name.startswith(role + '_') else name] = option['type']
    return typed


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_typed_inputs_are_not_converted_again(role):
    """`__<role>_inputs.<key> | int` (or `| bool`) on an input the entry already made an int (a bool) reads
    as if the value could still be a string: the conversion happens once, at the entry."""
    typed = _always_typed(role)
    fact = '__%s_inputs' % role
    again = []
    for path, line, expression in _role_expressions(role):
        source = expression if expression.lstrip().startswith(('{{', '{%')) else '{{ %s }}' % expression
        try:
            tokens = [(token, value) for _line, token, value in jinja2.Environment().lex(source)
                      if token != 'whitespace']
        except jinja2.TemplateSyntaxError:
            continue
        for index in range(len(tokens) - 4):
            (t0, v0), dot, (t2, key), pipe, (t4, flt) = tokens[index:index + 5]
            followed_by_call = index + 5 < len(tokens) and tokens[index + 5] == ('operator', '(')
            if (t0, v0, dot, t2, pipe, t4) == ('name', fact, ('operator', '.'), 'name', ('operator', '|'), 'name') \
                    and typed.get(key) == flt and not followed_by_call:
                again.append('%s:%d: %s.%s | %s' % (path, line, fact, key, flt))
    assert again == [], 'already typed at the entry, drop the filter:\n%s' % '\n'.join(again)


def _literals(expression):
    """The string literals of a Jinja expression or template."""
    source = expression if expression.lstrip().startswith(('{{', '{%')) else '{{ %s }}' % expression
    try:
        return [value for _line, token, value in jinja2.Environment().lex(source) if token == 'string']
    except jinja2.TemplateSyntaxError:
        return []


@pytest.mark.parametrize('role', ROLE_NAMES)
def test_messages_name_the_inputs_an_operator_sets(role):
    """A message tells the operator which variable to set: its own name, never __<role>_inputs.<key>."""
    internal = re.compile(r'__%s_inputs\.' % role)
    yaml_files, templates = _role_files(role)
    found = []
    for path in yaml_files + templates:
        with open(path) as handle:
            text = handle.read()
        expressions = _expressions(text) if path.endswith('.yml') else [
            (text.count('\n', 0, m.start()) + 1, m.group(0)) for m in JINJA.finditer(text)]
        for line, expression in expressions:
            found.extend('%s:%d: %s' % (os.path.relpath(path, REPO_ROOT), line, literal[:80])
                         for literal in _literals(expression) if internal.search(literal))
    assert found == [], '\n'.join(found)


def _entry_file(role, entry):
    return role_path(role, 'tasks', 'main.yml' if entry == 'main' else entry + '.yml')


@pytest.mark.parametrize('role, entry', [(role, entry) for role in ROLE_NAMES for entry in sorted(entry_points(role))])
def test_each_entry_point_converts_its_inputs_first(role, entry):
    with open(_entry_file(role, entry)) as handle:
        tasks = yaml.safe_load(handle)
    first = tasks[0]
    assert first.get('name') == 'Inputs', 'the first task of %s must be "Inputs"' % _entry_file(role, entry)
    assert first.get('tags') == ['always'], 'the Inputs task must run whatever --tags select'
    assert first['ansible.builtin.set_fact'] == {
        '__%s_inputs' % role: "{{ lookup('gpufleet.nvidia.role_inputs', '%s') }}" % entry}


def _playbook_inputs():
    with open(os.path.join(REPO_ROOT, 'playbooks', 'vars', 'argument_specs.yml')) as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    return specs


@pytest.mark.parametrize('playbook, entries', [('site.yml', ['site']), ('driver_upgrade.yml', ['driver_upgrade', 'site'])])
def test_playbooks_convert_first_and_read_only_typed_values(playbook, entries):
    specs = _playbook_inputs()
    names = set()
    for entry in entries:
        names.update(specs[entry]['options'])
    path = os.path.join(REPO_ROOT, 'playbooks', playbook)
    with open(path) as handle:
        text = handle.read()
    plays = yaml.safe_load(text)
    first = plays[0]
    assert first['gather_facts'] is False and first['any_errors_fatal'] is True
    lookups = [task['ansible.builtin.set_fact'] for task in first['tasks'] if 'ansible.builtin.set_fact' in task]
    for entry in entries:
        assert any("lookup('gpufleet.nvidia.role_inputs', '%s', source='playbooks'" % entry in str(args)
                   for args in lookups), '%s: the first play must convert the %s inputs' % (playbook, entry)
    raw = []
    # The first play reads the raw values only to convert them; the later
    # plays' keywords are checked there.
    for line, expression in _expressions(text, skip_keys=PLAY_KEYWORDS):
        raw.extend('%s:%d: %s' % (playbook, line, name) for name in _raw_reads(expression, names))
    assert raw == []


def test_the_playbook_spec_covers_what_the_playbooks_document():
    specs = _playbook_inputs()
    for playbook, entry in (('site.yml', 'site'), ('driver_upgrade.yml', 'driver_upgrade')):
        with open(os.path.join(REPO_ROOT, 'playbooks', playbook)) as handle:
            header = ''.join(line for line in handle if line.startswith('#'))
        documented = set(re.findall(r'#\s+(gpufleet_(?:site|upgrade)_[a-z_]+)\s', header))
        assert documented <= set(specs[entry]['options']) | set(specs['site']['options']), documented
