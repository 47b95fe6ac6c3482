# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The conversion every role and playbook applies to its inputs at its entry (module_utils/typed_inputs.py)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.typed_inputs import (
    InputError, convert, convert_all)

BOOL = {'type': 'bool'}
INT = {'type': 'int'}


@pytest.mark.parametrize('value', [True, 1, 'true', 'True', 'TRUE', 'yes', 'Yes', 'YES', 'on', 'On', 'ON', '1',
                                   ' true ', '\tyes\n'])
def test_true_spellings_are_true(value):
    assert convert(value, BOOL) is True


@pytest.mark.parametrize('value', [False, 0, 'false', 'False', 'FALSE', 'no', 'No', 'NO', 'off', 'Off', 'OFF', '0',
                                   ' false ', 'no\n'])
def test_false_spellings_are_false(value):
    # The bug this exists for: "false" is truthy in Jinja.
    assert convert(value, BOOL) is False


@pytest.mark.parametrize('value', ['maybe', 'y', 't', 'n', 'f', '', ' ', '2', 2, -1, 1.0, 'truee', 'enable', [], {}])
def test_other_booleans_are_refused(value):
    with pytest.raises(InputError, match='must be a boolean'):
        convert(value, BOOL)


@pytest.mark.parametrize('value, expected', [(7, 7), ('7', 7), (' 7 ', 7), ('+7', 7), ('-1', -1), ('0', 0),
                                             ('2147483647', 2147483647)])
def test_integers_from_decimal_text(value, expected):
    assert convert(value, INT) == expected


@pytest.mark.parametrize('value', ['abc', '1e9', '0x10', '5.0', 5.5, '', '１２', True, False, '1 000', '99999999999',
                                   10 ** 20, [1]])
def test_other_integers_are_refused(value):
    with pytest.raises(InputError, match='whole number'):
        convert(value, INT)


def test_lists_must_be_lists_and_their_elements_are_converted():
    assert convert(['1', ' 2'], {'type': 'list', 'elements': 'int'}) == [1, 2]
    assert convert(None, {'type': 'list', 'elements': 'str'}) is None
    for value in ('a,b', 'a', '["a"]', {'a': 1}):
        with pytest.raises(InputError, match='must be a YAML list'):
            convert(value, {'type': 'list', 'elements': 'str'})
    with pytest.raises(InputError, match='item 1'):
        convert(['1', 'x'], {'type': 'list', 'elements': 'int'})


def test_choices_are_exact():
    option = {'type': 'str', 'choices': ['open', 'proprietary']}
    assert convert('open', option) == 'open'
    for value in ('Open', 'open ', 'OPEN'):
        with pytest.raises(InputError, match='must be one of open, proprietary'):
            convert(value, option)
    assert convert(['a', 'b'], {'type': 'list', 'elements': 'str', 'choices': ['a', 'b', 'c']}) == ['a', 'b']
    with pytest.raises(InputError, match='"d"'):
        convert(['a', 'd'], {'type': 'list', 'elements': 'str', 'choices': ['a', 'b', 'c']})


def test_strings_take_numbers_but_not_booleans():
    assert convert(580, {'type': 'str'}) == '580'
    with pytest.raises(InputError, match='12.10 as 12.1'):
        convert(12.1, {'type': 'str'})
    assert convert('５８０', {'type': 'str'}) == '５８０'
    with pytest.raises(InputError, match='not a boolean'):
        convert(True, {'type': 'str'})
    with pytest.raises(InputError, match='not a list'):
        convert(['580'], {'type': 'str'})


@pytest.mark.parametrize('value', ['relative/path', '~/x', '', './x', '/opt/my dir/x', '/x\n'])
def test_paths_must_be_absolute_and_plain(value):
    with pytest.raises(InputError):
        convert(value, {'type': 'path'})


def test_convert_all_names_every_bad_input_and_uses_spec_defaults():
    options = {'r_a': {'type': 'bool', 'default': False}, 'r_b': {'type': 'int'}, 'r_c': {'type': 'int', 'default': 3},
               'r_d': {'type': 'str', 'required': True}}
    values = {'r_a': 'maybe', 'r_b': '1e9'}

    def read(name):
        return (name in values, values.get(name))

    typed, errors = convert_all(options, read, 'r_')
    assert typed == {'c': 3}
    assert errors == ['r_a must be a boolean: true or false (yes/no, on/off and 1/0 are read too, in any case) '
                      '(got "maybe")',
                      'r_b must be a whole number written in decimal digits, such as 30 (got "1e9")',
                      'r_d is required']


def test_huge_values_are_cut_in_the_message():
    _typed, errors = convert_all({'r_a': {'type': 'bool'}}, lambda name: (True, 'x' * 100000), 'r_')
    assert len(errors[0]) < 300 and '(100002 characters)' in errors[0]
