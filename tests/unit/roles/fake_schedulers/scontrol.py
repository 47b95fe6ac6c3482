# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test double of Slurm's scontrol for the drain role's unit tests (the real
one runs in the fleet scenario): node states in $FAKE_SCHEDULER_STATE, argv
appended to $FAKE_SCHEDULER_LOG. Prints "scontrol --oneliner show node" like
Slurm 22.05 and takes "update NodeName=X State=DRAIN|RESUME [Reason=...]"."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import sys


def main(argv):
    with open(os.environ['FAKE_SCHEDULER_LOG'], 'a') as handle:
        env = dict((k, v) for k, v in os.environ.items() if k.startswith('GPUFLEET_DRAIN_'))
        handle.write(json.dumps({'prog': 'scontrol', 'argv': argv, 'env': env}) + '\n')
    path = os.environ['FAKE_SCHEDULER_STATE']
    with open(path) as handle:
        state = json.load(handle)
    nodes = state.setdefault('nodes', {})
    args = [a for a in argv if a not in ('--oneliner', '-o')]
    if args[:2] == ['show', 'node']:
        name = args[2]
        if name not in nodes:
            print('Node %s not found' % name)
            return 1
        item = nodes[name]
        flags = item.get('state', 'IDLE') + ('+DRAIN' if item.get('drain') else '')
        reason = (' Reason=%s [root@2026-01-01T00:00:00]' % item['reason']) if item.get('reason') else ''
        print('NodeName=%s Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.01 '
              'AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8(S:0-1) NodeAddr=127.0.0.1 '
              'NodeHostName=%s Version=22.05.8 OS=Linux RealMemory=2000 AllocMem=0 FreeMem=1000 Sockets=2 Boards=1 '
              'State=%s ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu '
              'BootTime=2026-01-01T00:00:00 SlurmdStartTime=2026-01-01T00:00:00 LastBusyTime=2026-01-01T00:00:00 '
              'CfgTRES=cpu=224,mem=2000M,billing=224 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 '
              'ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s%s' % (name, name, flags, reason))
        return 0
    if args[:1] == ['update']:
        fields = dict(a.split('=', 1) for a in args[1:])
        fields = dict((k.lower(), v) for k, v in fields.items())
        name = fields['nodename']
        if name not in nodes:
            sys.stderr.write('slurm_update error: Invalid node name specified\n')
            return 1
        item = nodes[name]
        wanted = fields.get('state', '').upper()
        if wanted == 'DRAIN':
            if not fields.get('reason'):
                sys.stderr.write('You must specify a reason when DOWNING or DRAINING a node. Request denied\n')
                return 1
            item['drain'], item['reason'] = True, fields['reason']
        elif wanted == 'RESUME':
            if not item.get('drain'):
                sys.stderr.write('slurm_update error: Invalid node state specified\n')
                return 1
            item['drain'], item['reason'] = False, ''
        with open(path, 'w') as handle:
            json.dump(state, handle, indent=1, sort_keys=True)
        return 0
    sys.stderr.write('fake scontrol: unsupported %r\n' % (argv,))
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
