# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Check every input rule of a role in one controller-side task.

One ``assert`` per rule costs a task each and stops at the first broken
rule; an operator with three wrong variables learns about them in three runs.
This action evaluates every rule, and reports each broken one with the
variable's name and a bounded excerpt of the value it was given.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template

EXCERPT_CHARS = 60


def excerpt(value):
    """The value as JSON, cut to EXCERPT_CHARS characters with its full length noted."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= EXCERPT_CHARS:
        return text
    return '%s... (%d characters)' % (text[:EXCERPT_CHARS], len(text))


def _conditions(rule, key):
    value = rule.get(key)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class ActionModule(ActionBase):

    _requires_connection = False

    def _holds(self, conditions):
        return all(self._templar.evaluate_conditional(conditional=c) for c in conditions)

    def _value(self, name):
        try:
            return excerpt(self._templar.evaluate_expression(trust_as_template(name)))
        except AnsibleError:
            return 'undefined'

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        rules = self._task.args.get('rules')
        unknown = sorted(set(self._task.args) - set(['rules']))
        if unknown or not isinstance(rules, list) or not rules:
            raise AnsibleActionFail('check_inputs takes one parameter, rules: a non-empty list of {var, that, msg}')
        errors = []
        for number, rule in enumerate(rules, 1):
            if not isinstance(rule, dict) or not rule.get('var') or not rule.get('msg') or 'that' not in rule:
                raise AnsibleActionFail('rule %d needs var, that and msg; got %s' % (number, excerpt(rule)))
            try:
                if not self._holds(_conditions(rule, 'when')) or self._holds(_conditions(rule, 'that')):
                    continue
            except AnsibleError:
                # A value of the wrong shape can break the test itself ("x | int"
                # on a mapping): that is this rule failing, not the play crashing.
                pass
            value = 'a secret value, not shown' if rule.get('secret') else self._value(rule['var'])
            errors.append({'var': rule['var'], 'msg': str(rule['msg']).strip(), 'value': value})
        result['changed'] = False
        result['errors'] = errors
        result['checked'] = len(rules)
        if errors:
            result['failed'] = True
            result['msg'] = '; '.join('%s %s (got %s)' % (e['var'], e['msg'], e['value']) for e in errors)
        else:
            result['msg'] = 'All %d input rules hold.' % len(rules)
        return result
