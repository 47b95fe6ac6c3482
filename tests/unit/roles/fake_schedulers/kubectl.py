# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test double of kubectl for the drain role's tests: no cluster, only the
node objects in $FAKE_SCHEDULER_STATE (JSON) and every argv appended to
$FAKE_SCHEDULER_LOG (one JSON line per call, with the environment's
GPUFLEET_DRAIN_* variables). Answers like kubectl 1.3x for the verbs the role
uses: get node -o json, cordon, uncordon, annotate, drain."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import sys


def load():
    try:
        with open(os.environ['FAKE_SCHEDULER_STATE']) as handle:
            return json.load(handle)
    except IOError:
        return {'nodes': {}}


def save(state):
    with open(os.environ['FAKE_SCHEDULER_STATE'], 'w') as handle:
        json.dump(state, handle, indent=1, sort_keys=True)


def main(argv):
    with open(os.environ['FAKE_SCHEDULER_LOG'], 'a') as handle:
        env = dict((k, v) for k, v in os.environ.items() if k.startswith('GPUFLEET_DRAIN_'))
        handle.write(json.dumps({'prog': 'kubectl', 'argv': argv, 'env': env}) + '\n')
    args = list(argv)
    if args[:1] == ['--kubeconfig']:
        args = args[2:]
    state = load()
    nodes = state.setdefault('nodes', {})

    def node(name):
        if name not in nodes:
            sys.stderr.write('Error from server (NotFound): nodes "%s" not found\n' % name)
            sys.exit(1)
        return nodes[name]

    verb = args[0]
    if verb == 'get' and args[1] == 'node':
        item = node(args[2])
        obj = {'apiVersion': 'v1', 'kind': 'Node',
               'metadata': {'name': args[2], 'annotations': item.get('annotations', {})},
               'spec': {'unschedulable': True} if item.get('unschedulable') else {}}
        print(json.dumps(obj, indent=4))
        return 0
    if verb in ('cordon', 'uncordon'):
        item = node(args[1])
        want = verb == 'cordon'
        was = bool(item.get('unschedulable'))
        item['unschedulable'] = want
        save(state)
        print('node/%s %s' % (args[1], ('already ' if was == want else '') + verb + 'ed'))
        return 0
    if verb == 'annotate':
        rest = [a for a in args[1:] if a != '--overwrite']
        assert rest[0] == 'node', rest
        item = node(rest[1])
        notes = item.setdefault('annotations', {})
        for pair in rest[2:]:
            if pair.endswith('-'):
                notes.pop(pair[:-1], None)
            else:
                key, _sep, value = pair.partition('=')
                if key in notes and '--overwrite' not in args:
                    sys.stderr.write("error: --overwrite is false but found the following declared annotation(s): "
                                     "'%s' already has a value\n" % key)
                    return 1
                notes[key] = value
        save(state)
        print('node/%s annotated' % rest[1])
        return 0
    if verb == 'drain':
        item = node(args[1])
        item['unschedulable'] = True
        item['drained'] = True
        item['pods'] = [p for p in item.get('pods', []) if p.get('daemonset')]
        save(state)
        print('node/%s cordoned\nnode/%s drained' % (args[1], args[1]))
        return 0
    sys.stderr.write('fake kubectl: unsupported %r\n' % (argv,))
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
