# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Runs a playbook against this machine (local connection) with the
checkout's ansible.cfg and collection, for the action plugins' tests, and
reads back the JSON a final debug task printed as "RESULTS {...}"."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def run_play(path, *options):
    """ansible-playbook on PATH against localhost; modules run in this interpreter."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_CALLBACK_RESULT_FORMAT='json',
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO_ROOT, '.collections'))
    return subprocess.run([PLAYBOOK_BIN, '-i', 'localhost,', '-e', 'ansible_python_interpreter=' + sys.executable,
                           str(path)] + list(options), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)


def play_results(proc):
    """The "RESULTS {...}" a successful run printed last, decoded."""
    assert proc.returncode == 0, proc.stdout[-3000:]
    line = [line for line in proc.stdout.splitlines() if '"RESULTS ' in line][-1]
    return json.loads(json.loads('{%s}' % line.strip().rstrip(','))['msg'][len('RESULTS '):])
