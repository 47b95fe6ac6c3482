# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Handlers follow one convention, so that a playbook or another role can
notify them by a name it can guess: a handler that restarts a service is named
"Restart <service>" and listens on that name; every handler has a `listen`
topic; every notify in a role reaches a topic of that role's handlers."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import pytest

from role_helpers import LOADER, ROLE_NAMES, role_path

RESTART_NAME = re.compile(r'^Restart [a-z0-9][a-z0-9@._-]*$')
SERVICE_MODULES = ('ansible.builtin.systemd_service', 'ansible.builtin.systemd', 'ansible.builtin.service')
TEMPLATE = re.compile(r'{{.*?}}')


def handlers(role):
    path = role_path(role, 'handlers', 'main.yml')
    if not os.path.exists(path):
        return []
    return LOADER.load_from_file(path) or []


def topics(handler):
    listen = handler.get('listen', [])
    return [listen] if isinstance(listen, str) else list(listen)


def notified(role):
    """(file, notify target) for every task of the role that notifies."""
    found = []

    def walk(tasks, path):
        for task in tasks or []:
            for key in ('block', 'rescue', 'always'):
                walk(task.get(key), path)
            targets = task.get('notify', [])
            for target in [targets] if isinstance(targets, str) else targets:
                found.append((os.path.relpath(path, role_path(role)), target))

    for path in sorted(glob.glob(role_path(role, 'tasks', '*.yml'))):
        walk(LOADER.load_from_file(path), path)
    return found


ROLES_WITH_HANDLERS = tuple(role for role in ROLE_NAMES if handlers(role))


def test_the_roles_that_restart_services_are_covered():
    # A guard on the test itself: a rename of the handlers directory must not
    # leave it checking nothing.
    assert {'dcgm', 'dcgm_exporter', 'fabric_manager', 'persistence_mode', 'slurm_gres'} <= set(ROLES_WITH_HANDLERS)


@pytest.mark.parametrize('role', ROLES_WITH_HANDLERS)
def test_every_handler_listens_on_a_topic(role):
    missing = [handler['name'] for handler in handlers(role) if not topics(handler)]
    assert missing == [], '%s: handlers without listen: %s' % (role, missing)


@pytest.mark.parametrize('role', ROLES_WITH_HANDLERS)
def test_service_restarts_are_named_restart_service(role):
    wrong = []
    for handler in handlers(role):
        module = next((key for key in handler if key in SERVICE_MODULES), None)
        if module is None or 'restarted' not in str(handler[module].get('state', '')):
            continue
        # One handler may restart several services (container_toolkit's
        # runtimes); then each is a topic "Restart <service>" of its own.
        named = RESTART_NAME.match(handler['name']) and handler['name'] in topics(handler)
        if not topics(handler) or not all(RESTART_NAME.match(topic) for topic in topics(handler)) or not (
                named or len(topics(handler)) > 1):
            wrong.append(handler['name'])
    assert wrong == [], '%s: restart handlers not named "Restart <service>" with that listen topic: %s' % (role, wrong)


@pytest.mark.parametrize('role', ROLES_WITH_HANDLERS)
def test_every_notify_reaches_a_handler(role):
    known = set()
    for handler in handlers(role):
        known.update(topics(handler))
    unreached = []
    for path, target in notified(role):
        # A templated target ("Restart {{ service }}") is matched as a pattern.
        pattern = '^%s$' % TEMPLATE.sub('.+', re.escape(target).replace(r'\{', '{').replace(r'\}', '}'))
        if not any(re.match(pattern, topic) for topic in known):
            unreached.append((path, target))
    assert unreached == [], '%s: notify targets no handler listens on: %s' % (role, unreached)
