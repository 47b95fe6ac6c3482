# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Write a file from a template or content, unless the host already has it.

``ansible.builtin.template`` runs two modules on the host even when nothing
changes (a stat, then ``file`` for the attributes). A role that has already
read the file's checksum, mode and owner with ``host_state_info`` knows the
answer: this action renders on the controller, compares, and only when the
file differs hands the work to ``ansible.builtin.copy`` (check mode, diff,
``validate`` and atomic writes included).
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from ansible.utils.hashing import secure_hash_s

try:  # ansible-core 2.19: the template action's own variables (ansible_managed, template_*)
    from ansible._internal._templating._template_vars import generate_ansible_template_vars
except ImportError:  # pragma: no cover - other ansible-core versions
    generate_ansible_template_vars = None

_ARGS = ('dest', 'src', 'content', 'state', 'mode', 'owner', 'group', 'validate', 'known', 'compare_only')


def _octal(mode):
    """Four octal digits, or None for what cannot be compared (symbolic modes)."""
    if mode is None:
        return None
    if isinstance(mode, int):
        return '%04o' % mode
    text = str(mode).strip()
    if text and all(c in '01234567' for c in text):
        return '%04o' % int(text, 8)
    return None


def _matches(known, checksum, args):
    if not known or not known.get('exists') or known.get('type') != 'file':
        return False
    if known.get('checksum') != checksum:
        return False
    if args.get('mode') is not None and _octal(args['mode']) != known.get('mode'):
        return False
    for key in ('owner', 'group'):
        wanted = args.get(key)
        if wanted is not None and str(wanted) not in (known.get(key), str(known.get('uid' if key == 'owner' else 'gid'))):
            return False
    return True


class ActionModule(ActionBase):

    # The delegated copy action makes its own remote temporary directory, when it runs.
    TRANSFERS_FILES = False

    def _render(self, src, dest, task_vars):
        try:
            source = self._find_needle('templates', src)
        except Exception as exc:  # pylint: disable=broad-except
            raise AnsibleActionFail('src %s: %s' % (src, exc))
        data = trust_as_template(self._loader.get_text_file_contents(source))
        searchpath = list(task_vars.get('ansible_search_path', [])) + [self._loader._basedir, os.path.dirname(source)]
        searchpath = [p for base in searchpath for p in (os.path.join(base, 'templates'), base)]
        variables = task_vars.copy()
        if generate_ansible_template_vars is not None:
            variables.update(generate_ansible_template_vars(
                path=src, fullpath=source, dest_path=dest,
                include_ansible_managed='ansible_managed' not in variables))
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=variables)
        # The template action's defaults: trim_blocks on, lstrip_blocks off, "\n".
        rendered = templar.template(data, escape_backslashes=False,
                                    overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence='\n'))
        return '' if rendered is None else rendered

    def _delegate(self, action, args, task_vars):
        task = self._task.copy()
        task.args = dict((k, v) for k, v in args.items() if v is not None)
        handler = self._shared_loader_obj.action_loader.get(
            action, task=task, connection=self._connection, play_context=self._play_context, loader=self._loader,
            templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        return handler.run(task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        unknown = sorted(set(self._task.args) - set(_ARGS))
        if unknown:
            raise AnsibleActionFail('unsupported parameters: %s' % ', '.join(unknown))
        args = dict((k, self._task.args.get(k)) for k in _ARGS)
        dest, state = args['dest'], args['state'] or 'present'
        if not dest:
            raise AnsibleActionFail('dest is required')
        if state not in ('present', 'absent'):
            raise AnsibleActionFail('state must be present or absent; got %r' % state)
        known = args['known']
        if isinstance(known, dict) and dest in known and isinstance(known[dest], dict):
            known = known[dest]
        if known is not None and not isinstance(known, dict):
            raise AnsibleActionFail('known must be a file record of gpufleet.nvidia.host_state_info (or its files)')
        try:
            compare_only = boolean(args['compare_only'] if args['compare_only'] is not None else False, strict=True)
        except TypeError:
            raise AnsibleActionFail('compare_only must be a boolean; got %r' % (args['compare_only'],))
        if compare_only and known is None:
            raise AnsibleActionFail('compare_only needs known: the file is compared with that record, never read')

        if state == 'absent':
            if known is not None and known.get('exists') is False:
                result.update(changed=False, dest=dest, state='absent')
                if compare_only:
                    result['differs'] = False
                return result
            if compare_only:
                result.update(changed=False, dest=dest, state='absent', differs=True)
                return result
            result.update(self._delegate('ansible.legacy.file', dict(path=dest, state='absent'), task_vars))
            return result

        if (args['src'] is None) == (args['content'] is None):
            raise AnsibleActionFail('exactly one of src and content is required with state=present')
        content = self._render(args['src'], dest, task_vars) if args['src'] is not None else str(args['content'])
        checksum = secure_hash_s(to_bytes(content, errors='surrogate_or_strict'))
        if _matches(known, checksum, args):
            result.update(changed=False, dest=dest, checksum=checksum, mode=known.get('mode'))
            if compare_only:
                result['differs'] = False
            return result
        if compare_only:
            # A role's plan asks whether the file would be written; the write is the apply stage's.
            result.update(changed=False, dest=dest, checksum=checksum, differs=True)
            return result
        copy_args = dict(content=content, dest=dest, mode=args['mode'], owner=args['owner'], group=args['group'],
                         validate=args['validate'])
        result.update(self._delegate('ansible.legacy.copy', copy_args, task_vars))
        return result
