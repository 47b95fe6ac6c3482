# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The repository role's key pinning, run by ansible-playbook on this machine.

The apt and key entry points in check mode, with the keyrings in a
temporary directory (repository_keyring_dir) and the key served from
file:// URLs: real keys made by gpg (openpgp_keys.py). A key file with
another key is refused before anything is planned; a keyring on the host that
holds more than the pinned key is replaced rather than kept; a keyring with
exactly the pinned key is kept without downloading anything. The check of the written keyring
(tasks/installed_key.yml) runs for real on files in the temporary directory:
it removes a keyring that holds more than the pinned key. Check mode writes
nothing under /etc/apt; the source file is only compared.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.openpgp_keys import key_files

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NAME = 'gpufleet-pinning-test'
FINGERPRINT_VAR = 'example_repo_key_fingerprint'


@pytest.fixture(scope='module')
def keys():
    yield from key_files('gpgrole')


def _scenarios(made, files, root):
    """(name, check mode, entry point, keyrings already there, inputs)."""
    def inputs(key_file, **more):
        values = {'repository_name': NAME, 'repository_url': 'file:///nonexistent/repository',
                  'repository_key_url': 'file://' + key_file, 'repository_key_fingerprint': made.pinned,
                  'repository_key_url_var': 'example_repo_key_url', 'repository_key_fingerprint_var': FINGERPRINT_VAR}
        values.update(more)
        return values
    return [
        ('armored', True, 'apt', {}, inputs(files['pinned.asc'])),
        ('binary', True, 'apt', {}, inputs(files['pinned.gpg'])),
        ('appended', True, 'apt', {}, inputs(files['appended.asc'])),
        ('prepended', True, 'apt', {}, inputs(files['prepended.asc'])),
        ('twice', True, 'apt', {}, inputs(files['twice.gpg'])),
        ('replaced', True, 'apt', {NAME + '.asc': 'appended.asc'}, inputs(files['pinned.asc'])),
        # Exactly the pinned key in place: nothing is downloaded (the URL does not exist).
        ('kept', True, 'apt', {NAME + '.asc': 'pinned.asc', NAME + '.gpg': 'appended.gpg'},
         inputs(os.path.join(root, 'missing.asc'))),
        ('key-entry', True, 'key', {}, inputs(files['pinned.asc'])),
        ('key-entry-appended', True, 'key', {}, inputs(files['appended.gpg'])),
        ('installed-extra', False, 'installed_key', {NAME + '.asc': 'appended.asc'},
         {'repository_key_fingerprint': made.pinned, 'repository_key_fingerprint_var': FINGERPRINT_VAR}),
        ('installed-exact', False, 'installed_key', {NAME + '.asc': 'pinned.asc'},
         {'repository_key_fingerprint': made.pinned, 'repository_key_fingerprint_var': FINGERPRINT_VAR}),
    ]


def _play(name, entry, keyring_dir, inputs, result):
    variables = dict(inputs, repository_keyring_dir=keyring_dir)
    if entry == 'installed_key':
        variables['__repository_installed_keyring'] = os.path.join(keyring_dir, NAME + '.asc')
        # installed_key.yml is no entry point: what the entry's Inputs task would have set.
        variables['__repository_inputs'] = {'key_fingerprint': inputs['repository_key_fingerprint'],
                                            'key_fingerprint_var': inputs['repository_key_fingerprint_var'],
                                            'keyring_dir': keyring_dir}
    record = ("{{ {'failed': %s, 'task': %s, 'msg': %s, 'written': __repository_keyring_written | default(none),"
              " 'in_place': __repository_keyring_in_place | default(none),"
              " 'key': repository_key | default(none)} | to_json }}")
    return {
        'name': name, 'hosts': name, 'gather_facts': False,
        'tasks': [{'name': 'Run the entry point', 'block': [
            {'name': 'Include the repository role', 'ansible.builtin.include_role': {
                'name': 'gpufleet.nvidia.repository', 'tasks_from': entry}, 'vars': variables},
            {'name': 'Record the result', 'ansible.builtin.copy': {
                'content': record % ('false', 'none', "''"), 'dest': result}, 'check_mode': False},
        ], 'rescue': [
            {'name': 'Record the failure', 'ansible.builtin.copy': {
                'content': record % ('true', 'ansible_failed_task.name', 'ansible_failed_result.msg'),
                'dest': result}, 'check_mode': False},
        ]}],
    }


@pytest.fixture(scope='module')
def runs(keys, tmp_path_factory):
    made, files = keys
    root = str(tmp_path_factory.mktemp('pinning'))
    scenarios = _scenarios(made, files, root)
    plays, dirs = [], {}
    for name, check, entry, present, inputs in scenarios:
        keyring_dir = os.path.join(root, name, 'keyrings')
        os.makedirs(keyring_dir)
        for target, source in present.items():
            shutil.copy(files[source], os.path.join(keyring_dir, target))
        dirs[name] = keyring_dir
        plays.append(_play(name, entry, keyring_dir, inputs, os.path.join(root, name, 'result.json')))
    before = dict((name, _listing(path)) for name, path in dirs.items())
    env = dict(os.environ)
    env.update({'ANSIBLE_CONFIG': os.path.join(REPO_ROOT, 'ansible.cfg'),
                'ANSIBLE_COLLECTIONS_PATH': os.path.join(REPO_ROOT, '.collections'),
                'ANSIBLE_NOCOLOR': '1', 'ANSIBLE_LOCALHOST_WARNING': 'false'})
    # --check, as operators run it (the role reads ansible_check_mode, which only the command line sets),
    # then the scenarios that write into their temporary directory for real.
    for check in (True, False):
        run = [(s[0], play) for s, play in zip(scenarios, plays) if s[1] == check]
        inventory = {'all': {'hosts': dict((name, None) for name, _play in run), 'vars': {
            'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}
        stem = os.path.join(root, 'check' if check else 'real')
        with open(stem + '-inventory.yml', 'w') as handle:
            yaml.safe_dump(inventory, handle)
        with open(stem + '-playbook.yml', 'w') as handle:
            yaml.safe_dump([play for _name, play in run], handle, sort_keys=False)
        command = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
                   '-i', stem + '-inventory.yml', stem + '-playbook.yml'] + (['--check'] if check else [])
        proc = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=900, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:]
    results = {}
    for name, _check, _entry, _present, _inputs in scenarios:
        with open(os.path.join(root, name, 'result.json')) as handle:
            results[name] = json.load(handle)
        results[name]['before'] = before[name]
        results[name]['after'] = _listing(dirs[name])
        results[name]['dir'] = dirs[name]
    return made, results


def _listing(directory):
    found = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), 'rb') as handle:
            found[name] = handle.read()
    return found


def _accepted(result):
    assert not result['failed'], result['msg']
    assert result['before'] == result['after']


def test_the_pinned_key_alone_is_planned_for_install(runs):
    made, results = runs
    for name, suffix, armored in (('armored', '.asc', True), ('binary', '.gpg', False)):
        result = results[name]
        _accepted(result)
        assert result['in_place'] == ''
        assert result['written']['changed'], result['written']
        assert result['written']['dest'] == os.path.join(result['dir'], NAME + suffix)
        assert result['key']['armored'] is armored
        # The scratch copy of the key is gone.
        assert not os.path.exists(result['key']['dir'])


@pytest.mark.parametrize('name', ['appended', 'prepended', 'twice', 'key-entry-appended'])
def test_a_key_file_with_more_than_the_pinned_key_is_refused(runs, name):
    made, results = runs
    result = results[name]
    assert result['failed'] and result['task'] == 'Stop at the repository key', result
    assert FINGERPRINT_VAR in result['msg'] and made.pinned in result['msg']
    assert 'nothing was changed' in result['msg']
    if name != 'twice':
        assert made.other in result['msg']
    # Nothing was planned to be written, and nothing is in the keyring directory.
    assert result['written'] is None and result['after'] == result['before'] == {}


def test_the_refusal_says_what_to_do(runs):
    _made, results = runs
    message = results['appended']['msg']
    assert 'holds more than the pinned key' in message and '2 armored blocks' in message
    assert 'Serve a file that holds only the pinned key' in message and 'confirm it out of band' in message


def test_a_keyring_with_an_extra_key_is_replaced(runs):
    _made, results = runs
    result = results['replaced']
    _accepted(result)
    assert result['in_place'] == ''
    assert result['written']['changed'] and result['written']['dest'] == os.path.join(result['dir'], NAME + '.asc')


def test_a_keyring_with_exactly_the_pinned_key_is_kept(runs):
    _made, results = runs
    result = results['kept']
    _accepted(result)
    # The .asc holds exactly the pinned key; the .gpg beside it (with another key) is not chosen.
    assert result['in_place'] == os.path.join(result['dir'], NAME + '.asc')
    assert result['written']['skipped']


def test_the_key_entry_point_checks_without_reading_keyrings(runs):
    _made, results = runs
    result = results['key-entry']
    _accepted(result)
    assert result['key']['armored'] is True


def test_an_installed_keyring_with_an_extra_key_is_removed(runs):
    made, results = runs
    result = results['installed-extra']
    assert result['failed'] and result['task'] == 'Stop at the installed keyring', result
    assert FINGERPRINT_VAR in result['msg'] and made.other in result['msg'] and 'It was removed' in result['msg']
    assert result['after'] == {}


def test_an_installed_keyring_with_exactly_the_pinned_key_stays(runs):
    _made, results = runs
    result = results['installed-exact']
    _accepted(result)
