# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ansible-playbook --check on this machine with the checkout's configuration and collection, as the
input suites run their tables of cases."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def run_check(arguments, timeout, **environment):
    """The completed process of ``ansible-playbook --check <arguments>``; ``environment`` adds to the
    variables every run gets (no colour, no warnings about localhost or an unparsed inventory)."""
    env = dict(os.environ)
    env.update({
        'ANSIBLE_CONFIG': os.path.join(REPO_ROOT, 'ansible.cfg'),
        'ANSIBLE_COLLECTIONS_PATH': os.path.join(REPO_ROOT, '.collections'),
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_LOCALHOST_WARNING': 'false',
        'ANSIBLE_INVENTORY_UNPARSED_WARNING': 'false',
    })
    env.update(environment)
    return subprocess.run([PLAYBOOK_BIN, '--check'] + list(arguments), cwd=REPO_ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=timeout, check=False)
