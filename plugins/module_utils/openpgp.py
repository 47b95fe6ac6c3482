# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What an OpenPGP key file holds (primary key fingerprints, armored blocks), without gpg.

Repository keys are pinned by their full fingerprint. Asking gpg for it costs
a process (and an agent) per keyring on every run; the fingerprint is a hash
over the public key packet (RFC 4880 section 12.2, RFC 9580 section 5.5.4),
so it is computed here from the packets of an armored or binary key file.
apt still verifies the repository's signatures itself with this keyring.

The whole file is read, every armored block and every packet: apt and rpm
trust every key of the file they are given, so a key this reader did not see
(a second block after the first, text or packets it skipped) would be trusted
without ever being compared with the pin. Anything that is not a plain
transferable public key is refused rather than skipped.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import binascii
import hashlib
import re

PUBLIC_KEY = 6
# What a transferable public key is made of (RFC 9580 section 10.1): the
# primary key, its signatures, user IDs and attributes, subkeys; trust packets
# are what gpg's own keyrings add, padding carries nothing. Anything else
# (secret keys, messages, literal data) has no place in a repository key file.
KEY_PACKETS = {
    2: 'signature', 6: 'public key', 12: 'trust', 13: 'user ID', 14: 'public subkey', 17: 'user attribute',
    21: 'padding',
}
OTHER_PACKETS = {
    1: 'encrypted session key', 3: 'symmetric session key', 4: 'one-pass signature', 5: 'secret key',
    7: 'secret subkey', 8: 'compressed data', 9: 'encrypted data', 10: 'marker', 11: 'literal data',
    18: 'encrypted and integrity protected data', 19: 'modification detection code', 20: 'AEAD encrypted data',
}
ARMOR_PREFIX = b'-----BEGIN PGP '
ARMOR_BEGIN = b'-----BEGIN PGP PUBLIC KEY BLOCK-----'
ARMOR_END = b'-----END PGP PUBLIC KEY BLOCK-----'
BASE64_LINE = re.compile(br'^[A-Za-z0-9+/]+={0,2}$')
CHECKSUM_LINE = re.compile(br'^=([A-Za-z0-9+/]{4})$')
WHITESPACE = b' \t\r\n'


def _crc24(data):
    """The armor checksum (RFC 4880 section 6.1)."""
    crc = 0xB704CE
    for byte in bytearray(data):
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def armored(data):
    """Whether a key file is armored (text) rather than binary packets.

    Every binary packet starts with a byte whose high bit is set; a file that
    starts with anything else is text, read as armor (and refused when it is
    not armor alone).
    """
    start = data.lstrip(WHITESPACE)[:1]
    return bool(start) and not bytearray(start)[0] & 0x80


def armored_blocks(data):
    """The binary packets of each armored block of a key file, in order.

    Only blank lines may surround the blocks; each block is a public key block
    whose optional checksum matches.
    """
    lines = data.replace(b'\r\n', b'\n').split(b'\n')
    blocks = []
    number = 0
    while number < len(lines):
        line = lines[number].rstrip(WHITESPACE)
        number += 1
        if not line:
            continue
        if line.startswith(ARMOR_PREFIX):
            if line != ARMOR_BEGIN:
                raise ValueError('armored block %d is a %s, not a public key block'
                                 % (len(blocks) + 1, line.strip(b'-').decode('ascii', 'replace')))
            body, number = _armored_body(lines, number, len(blocks) + 1)
            blocks.append(body)
            continue
        raise ValueError('line %d is text outside an armored block' % number)
    if not blocks:
        raise ValueError('no armored block in the file')
    return blocks


def _armored_body(lines, number, block):
    # Armor headers ("Comment: ...") up to the blank line that ends them.
    headers = number
    while number < len(lines) and b':' in lines[number]:
        number += 1
    if number > headers:
        if number >= len(lines) or lines[number].strip(WHITESPACE):
            raise ValueError('armored block %d: its headers do not end with a blank line' % block)
    if number < len(lines) and not lines[number].strip(WHITESPACE):
        number += 1
    body, checksum = [], None
    while number < len(lines):
        line = lines[number].strip(WHITESPACE)
        number += 1
        if line == ARMOR_END:
            break
        if not line:
            continue
        if checksum is not None:
            raise ValueError('armored block %d: line %d follows its checksum' % (block, number))
        match = CHECKSUM_LINE.match(line)
        if match:
            checksum = match.group(1)
        elif BASE64_LINE.match(line):
            body.append(line)
        else:
            raise ValueError('armored block %d: line %d is not base64' % (block, number))
    else:
        raise ValueError('armored block %d has no END line' % block)
    # Padding ends the data: a decoder that stops there and one that reads on
    # would see different keys.
    if any(b'=' in line for line in body[:-1]):
        raise ValueError('armored block %d: padding before its last line' % block)
    try:
        data = base64.b64decode(b''.join(body), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError('armored block %d does not decode: %s' % (block, exc))
    if checksum is not None and base64.b64decode(checksum) != _crc24(data).to_bytes(3, 'big'):
        raise ValueError('armored block %d: its checksum does not match its content' % block)
    return data, number


def dearmor(data):
    """The binary packets of a key file: every armored block, or ``data`` itself when it is binary."""
    if armored(data):
        return b''.join(armored_blocks(data))
    return data


def _new_length(data, pos):
    first = data[pos]
    if first < 192:
        return first, pos + 1
    if first < 224:
        return ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
    if first == 255:
        return int.from_bytes(data[pos + 1:pos + 5], 'big'), pos + 5
    raise ValueError('partial body lengths do not occur in key files')


def packets(data):
    """(tag, body) of every packet."""
    pos = 0
    while pos < len(data):
        header = data[pos]
        if not header & 0x80:
            raise ValueError('not an OpenPGP packet at byte %d' % pos)
        if header & 0x40:
            tag = header & 0x3F
            length, pos = _new_length(data, pos + 1)
        else:
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            if kind == 3:
                raise ValueError('indeterminate packet length in a key file')
            size = (1, 2, 4)[kind]
            length, pos = int.from_bytes(data[pos + 1:pos + 1 + size], 'big'), pos + 1 + size
        if pos + length > len(data):
            raise ValueError('packet of %d bytes runs past the end of the file' % length)
        yield tag, data[pos:pos + length]
        pos += length


def fingerprint(body):
    """The fingerprint of a public key packet body, upper-case hexadecimal."""
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b'\x99' + len(body).to_bytes(2, 'big') + body).hexdigest().upper()
    if version == 5:
        return hashlib.sha256(b'\x9a' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b'\x9b' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    raise ValueError('public key packet of version %d' % version)


def _key_fingerprints(binary, where):
    found = []
    try:
        for tag, body in packets(binary):
            if tag not in KEY_PACKETS:
                raise ValueError('%sa %s packet (tag %d), which has no place in a public key file'
                                 % (where, OTHER_PACKETS.get(tag, 'unknown'), tag))
            if not found and tag != PUBLIC_KEY:
                raise ValueError('%sa %s packet before the first primary key' % (where, KEY_PACKETS[tag]))
            if tag == PUBLIC_KEY:
                found.append(fingerprint(body))
    except IndexError:
        raise ValueError('%sthe data ends inside a packet header' % where)
    if not found:
        raise ValueError('%sno OpenPGP public key' % where)
    return found


def read_key_file(data):
    """What a key file's bytes hold.

    A dict: ``armored`` (text rather than binary packets), ``blocks`` (the
    number of armored blocks, 0 for a binary file) and ``fingerprints`` (of
    every primary key, not subkeys, in the order of the file, repeated when a
    key is). Raises ValueError for anything else than public keys.
    """
    if not armored(data):
        return {'armored': False, 'blocks': 0, 'fingerprints': _key_fingerprints(data, '')}
    blocks = armored_blocks(data)
    found = []
    for number, binary in enumerate(blocks, 1):
        found += _key_fingerprints(binary, 'armored block %d: ' % number if len(blocks) > 1 else '')
    return {'armored': True, 'blocks': len(blocks), 'fingerprints': found}


def primary_fingerprints(data):
    """Fingerprints of the primary keys (not subkeys) of a key file's bytes, in every armored block."""
    return read_key_file(data)['fingerprints']


def holds_exactly(data, pinned):
    """Why a key file does not hold exactly the pinned keys (one armored block at most), or None.

    ``pinned`` is a list of full fingerprints in any case; each must be in the
    file once, and nothing else may be.
    """
    pinned = [re.sub(r'\s', '', p).upper() for p in pinned]
    try:
        held = read_key_file(data)
    except ValueError as exc:
        return 'not an OpenPGP public key file: %s' % exc
    found = held['fingerprints']
    extra = [f for f in found if f not in pinned]
    if extra:
        return 'it holds keys that are not pinned: %s' % ', '.join(extra)
    missing = [p for p in pinned if p not in found]
    if missing:
        return 'it lacks the pinned key(s) %s' % ', '.join(missing)
    if len(found) != len(set(found)):
        return 'it holds a pinned key more than once'
    if held['blocks'] > 1:
        return 'it has %d armored blocks, not one' % held['blocks']
    return None
