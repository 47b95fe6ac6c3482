# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Show a role's plan in one controller-side task.

A role reads the host, works out what its apply stages will change, and
includes each stage only when it has work. Check mode cannot run some of
those stages (apt-mark, nvidia-ctk, a package from a repository that is not
configured yet): rather than a "Say what check mode cannot show" task beside
every act task, each skipped on every run that does not need it, the role
hands its whole plan to this action once. It is printed in check mode and
whenever it has something to change or say; a converged host in a real run
gets one quiet "ok".
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

PARAMETERS = ('role', 'changes', 'notes', 'warnings')


def _is_work(value):
    """An entry of changes is work unless it is empty, false or null."""
    return value not in (None, False, '', [], {}, ())


def _text(value):
    if isinstance(value, (list, tuple)):
        return ', '.join(_text(item) for item in value)
    if isinstance(value, dict):
        return ', '.join('%s %s' % (key, _text(item)) for key, item in value.items())
    if value is True:
        return 'yes'
    return str(value)


def _strings(value, name):
    """A list of non-empty, stripped strings (empty entries are conditions that did not hold)."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise AnsibleActionFail('plan: %s must be a list of strings, got %s' % (name, json.dumps(value, default=str)[:60]))
    return [text for text in (str(item).strip() for item in value if item is not None) if text]


class ActionModule(ActionBase):

    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        unknown = sorted(set(args) - set(PARAMETERS))
        if unknown:
            raise AnsibleActionFail('plan: unknown parameters %s; it takes %s' % (', '.join(unknown), ', '.join(PARAMETERS)))
        role = args.get('role')
        if not isinstance(role, str) or not role:
            raise AnsibleActionFail('plan: role must be the name of the role')
        changes = args.get('changes') or {}
        if not isinstance(changes, dict):
            raise AnsibleActionFail('plan: changes must be a mapping of what the apply stages change')
        notes = _strings(args.get('notes'), 'notes')
        warnings = _strings(args.get('warnings'), 'warnings')
        work = dict((key, value) for key, value in changes.items() if _is_work(value))
        check = bool(self._task.check_mode)

        if work:
            head = '%s: %s' % (role, 'a real run changes' if check else 'changing')
            lines = ['%s: %s' % (key, _text(value)) for key, value in work.items()]
        else:
            head, lines = '%s: nothing to change' % role, []
        if check:
            head = 'Check mode: ' + head
        result.update(
            changed=False, plan={'role': role, 'changes': work, 'notes': notes},
            msg=' '.join([head + (': ' + '; '.join(lines) if lines else '') + '.'] + notes))
        # Check mode changes nothing, and its act tasks are skipped where it
        # cannot run them: the plan is what says a real run would change the host.
        if check and work:
            result['changed'] = True
        if warnings:
            result['warnings'] = warnings
        # Shown without -v, as a debug message is, when there is something to show.
        if check or work or notes:
            result['_ansible_verbose_always'] = True
        return result
