# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Primary key fingerprints of an OpenPGP key file, without gpg.

Repository keys are pinned by their full fingerprint. Asking gpg for it costs
a process (and an agent) per keyring on every run; the fingerprint is a hash
over the public key packet (RFC 4880 section 12.2, RFC 9580 section 5.5.4),
so it is computed here from the packets of an armored or binary key file.
apt still verifies the repository's signatures itself with this keyring.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import binascii
import hashlib

PUBLIC_KEY = 6
ARMOR_BEGIN = b'-----BEGIN PGP PUBLIC KEY BLOCK-----'
ARMOR_END = b'-----END PGP PUBLIC KEY BLOCK-----'


def dearmor(data):
    """The binary packets of an armored key file (or ``data`` itself when it is binary)."""
    start = data.find(ARMOR_BEGIN)
    if start < 0:
        return data
    end = data.find(ARMOR_END, start)
    if end < 0:
        raise ValueError('armored key without an END line')
    lines = data[start + len(ARMOR_BEGIN):end].replace(b'\r', b'').split(b'\n')
    # Armor headers ("Version: ...") end at the first empty line, if there are any.
    if any(b':' in line for line in lines[:3]) and b'' in lines[1:]:
        lines = lines[lines.index(b'', 1) + 1:]
    body = b''.join(line.strip() for line in lines if line.strip() and not line.startswith(b'='))
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError('armored key does not decode: %s' % exc)


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


def primary_fingerprints(data):
    """Fingerprints of the primary keys (not subkeys) of a key file's bytes."""
    binary = dearmor(data)
    try:
        found = [fingerprint(body) for tag, body in packets(binary) if tag == PUBLIC_KEY]
    except IndexError:
        raise ValueError('the key file ends inside a packet header')
    if not found:
        raise ValueError('no OpenPGP public key in the file')
    return found
