# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The shipped ansible.cfg keeps SSH host key checking on: every fleet run from
the checkout uses it, and a fleet reached over SSH without checked host keys
can be impersonated (docs/security.md, section 10)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import configparser
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_host_key_checking_stays_on():
    config = configparser.ConfigParser()
    config.read(os.path.join(REPO_ROOT, 'ansible.cfg'))
    for section in config.sections():
        for key in ('host_key_checking',):
            if config.has_option(section, key):
                assert config.getboolean(section, key) is True, '[%s] %s turns host key checking off' % (section, key)
    for section in ('ssh_connection', 'connection'):
        if config.has_option(section, 'ssh_args'):
            assert 'StrictHostKeyChecking=no' not in config.get(section, 'ssh_args')
