# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A key file must hold exactly the pinned key: what the reader finds in
every armored block and every packet, compared with gpg on real keys, and
what it refuses (text around the blocks, secret keys, altered armor).

The keys are made by gpg here (openpgp_keys.py). The attack is a second key
appended after the pinned one: gpg, and so apt and rpm, see both keys; a
reader that stops at the first block sees only the pinned one.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.openpgp import (
    _crc24, holds_exactly, primary_fingerprints, read_key_file)
from ansible_collections.gpufleet.nvidia.plugins.modules import host_state_info
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.openpgp_keys import key_files


@pytest.fixture(scope='module')
def keys():
    yield from key_files('gpgpin')


def _read(files, name):
    with open(files[name], 'rb') as handle:
        return handle.read()


@pytest.mark.parametrize('name', ['pinned.asc', 'pinned.gpg', 'appended.asc', 'prepended.asc', 'one-block.asc',
                                  'appended.gpg', 'twice.asc', 'twice.gpg'])
def test_every_key_gpg_sees_is_read(keys, name):
    made, files = keys
    assert primary_fingerprints(_read(files, name)) == made.shown(files[name])


def test_the_pinned_key_alone_is_accepted_armored_and_binary(keys):
    made, files = keys
    assert read_key_file(_read(files, 'pinned.asc')) == {'armored': True, 'blocks': 1, 'fingerprints': [made.pinned]}
    assert read_key_file(_read(files, 'pinned.gpg')) == {'armored': False, 'blocks': 0, 'fingerprints': [made.pinned]}
    for name in ('pinned.asc', 'pinned.gpg'):
        assert holds_exactly(_read(files, name), [made.pinned]) is None
    # Fingerprints as operators write them: spaced, lower case.
    spaced = ' '.join(made.pinned[i:i + 4] for i in range(0, 40, 4)).lower()
    assert holds_exactly(_read(files, 'pinned.asc'), [spaced]) is None


def test_a_key_appended_in_a_second_block_is_refused(keys):
    made, files = keys
    data = _read(files, 'appended.asc')
    assert read_key_file(data) == {'armored': True, 'blocks': 2, 'fingerprints': [made.pinned, made.other]}
    assert holds_exactly(data, [made.pinned]) == 'it holds keys that are not pinned: %s' % made.other


@pytest.mark.parametrize('name', ['prepended.asc', 'one-block.asc', 'appended.gpg'])
def test_another_key_anywhere_in_the_file_is_refused(keys, name):
    made, files = keys
    held = read_key_file(_read(files, name))
    assert sorted(held['fingerprints']) == sorted([made.pinned, made.other])
    assert made.other in holds_exactly(_read(files, name), [made.pinned])


def test_the_pinned_key_twice_is_refused(keys):
    made, files = keys
    assert holds_exactly(_read(files, 'twice.gpg'), [made.pinned]) == 'it holds a pinned key more than once'
    assert read_key_file(_read(files, 'twice.asc'))['blocks'] == 2
    assert holds_exactly(_read(files, 'twice.asc'), [made.pinned]) == 'it holds a pinned key more than once'


def test_two_pinned_keys_in_one_file(keys):
    made, files = keys
    assert holds_exactly(_read(files, 'one-block.asc'), [made.pinned, made.other]) is None
    # Two pinned keys, still only one armored block.
    assert holds_exactly(_read(files, 'appended.asc'), [made.pinned, made.other]) == 'it has 2 armored blocks, not one'
    assert holds_exactly(_read(files, 'pinned.asc'), [made.pinned, made.other]) == \
        'it lacks the pinned key(s) %s' % made.other


def test_another_key_alone_is_not_the_pinned_one(keys):
    made, files = keys
    assert holds_exactly(_read(files, 'other.asc'), [made.pinned]) == 'it holds keys that are not pinned: %s' % made.other


def _armor(data, headers=b'', checksum=True):
    body = base64.b64encode(data)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    tail = [b'=' + base64.b64encode(_crc24(data).to_bytes(3, 'big'))] if checksum else []
    return b'\n'.join([b'-----BEGIN PGP PUBLIC KEY BLOCK-----', headers] + lines + tail +
                      [b'-----END PGP PUBLIC KEY BLOCK-----', b''])


def test_armor_forms_gpg_writes_are_read(keys):
    made, files = keys
    binary = _read(files, 'pinned.gpg')
    for data in (_armor(binary), _armor(binary, checksum=False), _armor(binary, b'Comment: the pinned key\n'),
                 _armor(binary).replace(b'\n', b'\r\n'), b'\n\n' + _armor(binary) + b'\n\n'):
        assert read_key_file(data)['fingerprints'] == [made.pinned], data[:80]


def _corrupt_checksum(armored):
    lines = armored.split(b'\n')
    index = next(i for i, line in enumerate(lines) if line.startswith(b'=') and len(line) == 5)
    lines[index] = b'=AAAA' if lines[index] != b'=AAAA' else b'=BBBB'
    return b'\n'.join(lines)


def _pad_in_the_middle(armored):
    """Base64 that ends (padding) on one line and goes on: decoders disagree on what follows."""
    lines = armored.split(b'\n')
    first = next(i for i, line in enumerate(lines) if len(line) == 64)
    lines.insert(first, b'QQ==')
    return b'\n'.join(lines)


SIGNATURE_BLOCK = b'-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n'


@pytest.mark.parametrize('change,reason', [
    (lambda armored, other: b'A note before the key\n' + armored, 'line 1 is text outside an armored block'),
    (lambda armored, other: armored + b'trailing text\n', 'text outside an armored block'),
    (lambda armored, other: armored + other, 'text outside an armored block'),
    (lambda armored, other: _corrupt_checksum(armored), 'checksum does not match'),
    (lambda armored, other: armored + SIGNATURE_BLOCK, 'PGP SIGNATURE, not a public key block'),
    (lambda armored, other: armored.replace(b'-----END PGP PUBLIC KEY BLOCK-----', b''), 'no END line'),
    (lambda armored, other: _pad_in_the_middle(armored), 'padding before its last line'),
    (lambda armored, other: other + armored, 'not an OpenPGP packet'),
], ids=['text-before', 'text-after', 'binary-key-after', 'checksum', 'signature-block', 'no-end', 'padding',
        'armor-after-binary'])
def test_anything_else_in_the_file_is_refused(keys, change, reason):
    made, files = keys
    # Armor made here, with a checksum line whatever the gpg version writes.
    data = change(_armor(_read(files, 'pinned.gpg')), made.binary(made.other))
    with pytest.raises(ValueError, match=reason):
        read_key_file(data)
    assert holds_exactly(data, [made.pinned]).startswith('not an OpenPGP public key file: ')


def test_a_secret_key_is_refused(keys):
    made, _files = keys
    with pytest.raises(ValueError, match='PGP PRIVATE KEY BLOCK, not a public key block'):
        read_key_file(made.secret)
    # Without its armor, the packets themselves say what it is.
    body = [line for line in made.secret.split(b'\n')
            if line and not line.startswith((b'-----', b'=')) and b':' not in line]
    with pytest.raises(ValueError, match='a secret key packet'):
        read_key_file(base64.b64decode(b''.join(body)))


def test_a_key_past_the_read_limit_is_not_missed(keys, tmp_path):
    """A keyring cut at the read limit could end at a packet boundary and hide the key after it."""
    made, files = keys
    pinned, other = _read(files, 'pinned.gpg'), made.binary(made.other)
    # A padding packet (tag 21, new format, five-octet length) fills the file up to the limit exactly.
    room = host_state_info.MAX_KEYRING_BYTES - len(pinned) - 6
    padded = pinned + bytes([0xC0 | 21, 255]) + room.to_bytes(4, 'big') + b'\0' * room
    assert len(padded) == host_state_info.MAX_KEYRING_BYTES
    assert read_key_file(padded)['fingerprints'] == [made.pinned]
    path = tmp_path / 'keyring.gpg'
    path.write_bytes(padded + other)
    held = host_state_info._keyrings([str(path)])[str(path)]
    assert held['fingerprints'] == [] and 'larger than' in held['error']
    path.write_bytes(padded)
    assert host_state_info._keyrings([str(path)])[str(path)]['fingerprints'] == [made.pinned]


def test_host_state_info_reports_blocks_and_format(keys):
    made, files = keys
    found = host_state_info._keyrings([files['appended.asc'], files['pinned.gpg'], '/nonexistent/keyring.asc'])
    assert found[files['appended.asc']] == {'exists': True, 'armored': True, 'blocks': 2,
                                            'fingerprints': [made.pinned, made.other], 'error': None}
    assert found[files['pinned.gpg']] == {'exists': True, 'armored': False, 'blocks': 0,
                                          'fingerprints': [made.pinned], 'error': None}
    assert found['/nonexistent/keyring.asc'] == {'exists': False, 'armored': False, 'blocks': 0, 'fingerprints': [],
                                                 'error': None}
