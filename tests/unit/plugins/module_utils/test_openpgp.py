# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Key fingerprints computed from the packets agree with gpg's, on real keys.

gpg is the oracle: keys made by gpg here (armored and binary, RSA and
ed25519, with subkeys), and Debian's own archive keyring when it is installed.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.openpgp import primary_fingerprints

DEBIAN_KEYRING = '/usr/share/keyrings/debian-archive-keyring.gpg'


def _gpg(home, *args, **kwargs):
    return subprocess.run(['gpg', '--batch', '--homedir', str(home)] + list(args), capture_output=True,
                          check=True, **kwargs).stdout


def _gpg_primaries(home, path):
    listing = _gpg(home, '--show-keys', '--with-colons', str(path)).decode()
    return re.findall(r'^pub:.*\n(?:.*\n)*?fpr:+([0-9A-F]{40}):', listing, re.M)


@pytest.fixture(scope='module')
def keys(tmp_path_factory):
    home = tmp_path_factory.mktemp('gnupg')
    os.chmod(str(home), 0o700)
    made = {}
    for name, algo in (('rsa', 'rsa3072'), ('ed25519', 'ed25519')):
        uid = 'gpufleet test %s <test@example.invalid>' % name
        _gpg(home, '--passphrase', '', '--quick-generate-key', uid, algo, 'default', 'never')
        made[name + '.asc'] = _gpg(home, '--armor', '--export', uid)
        made[name + '.gpg'] = _gpg(home, '--export', uid)
    made['both.gpg'] = made['rsa.gpg'] + made['ed25519.gpg']
    paths = {}
    for name, data in made.items():
        path = home / name
        path.write_bytes(data)
        paths[name] = path
    return home, paths


@pytest.mark.parametrize('name', ['rsa.asc', 'rsa.gpg', 'ed25519.asc', 'ed25519.gpg', 'both.gpg'])
def test_fingerprints_agree_with_gpg(keys, name):
    home, paths = keys
    assert primary_fingerprints(paths[name].read_bytes()) == _gpg_primaries(home, paths[name])


def test_two_keys_give_two_fingerprints(keys):
    _home, paths = keys
    assert len(primary_fingerprints(paths['both.gpg'].read_bytes())) == 2


@pytest.mark.skipif(not os.path.exists(DEBIAN_KEYRING), reason='Debian archive keyring not installed')
def test_debian_archive_keyring(tmp_path):
    with open(DEBIAN_KEYRING, 'rb') as handle:
        data = handle.read()
    os.chmod(str(tmp_path), 0o700)
    assert primary_fingerprints(data) == _gpg_primaries(tmp_path, DEBIAN_KEYRING)


@pytest.mark.parametrize('data', [
    b'', b'hello', b'\xc6', b'\xc6\xff\x00', b'-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n',
    b'-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQ==\n', b'\x99\x00\x10abc',
])
def test_garbage_is_a_value_error(data):
    with pytest.raises(ValueError):
        primary_fingerprints(data)
