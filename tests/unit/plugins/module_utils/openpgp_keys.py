# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Real OpenPGP keys for the key-pinning tests, made by gpg in a private GNUPGHOME.

Two ed25519 keys ("pinned", with an encryption subkey so that subkeys are
seen not to count, and "other") and the key files an attacker or a careless
mirror could serve: the pinned key with the other appended as a second
armored block, both in one armored block, both in binary, the pinned key
twice, its secret key. gpg is also the oracle of what a file holds.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import shutil
import subprocess
import tempfile


class TestKeys(object):
    """Keys made once in ``home`` (a short path: gpg-agent's socket lives there)."""

    __test__ = False

    def __init__(self, home):
        self.home = str(home)
        if not os.path.isdir(self.home):
            os.makedirs(self.home)
        os.chmod(self.home, 0o700)
        self.pinned = self._make('gpufleet pinned test key <pinned@example.invalid>')
        self.gpg('--quick-add-key', self.pinned, 'cv25519', 'encr', 'never')
        self.other = self._make('gpufleet other test key <other@example.invalid>')
        self.secret = self.gpg('--armor', '--export-secret-keys', self.pinned)
        # The secret key was the agent's only task; nothing below needs it.
        self.stop_agent()

    def gpg(self, *args):
        command = ['gpg', '--homedir', self.home, '--batch', '--yes', '--quiet',
                   '--pinentry-mode', 'loopback', '--passphrase', ''] + list(args)
        return subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout

    def _make(self, uid):
        self.gpg('--quick-generate-key', uid, 'ed25519', 'sign', 'never')
        colons = self.gpg('--with-colons', '--list-keys', uid).decode()
        return re.search(r'^fpr:+([0-9A-F]{40}):', colons, re.M).group(1)

    def armored(self, *fingerprints):
        """One armored block with the keys."""
        return self.gpg('--armor', '--export', *fingerprints)

    def binary(self, *fingerprints):
        return self.gpg('--export', *fingerprints)

    def files(self):
        """Key files by name: the good ones first, then those that hold more than the pinned key."""
        pinned_asc, other_asc = self.armored(self.pinned), self.armored(self.other)
        pinned_gpg, other_gpg = self.binary(self.pinned), self.binary(self.other)
        return {
            'pinned.asc': pinned_asc,
            'pinned.gpg': pinned_gpg,
            'other.asc': other_asc,
            'appended.asc': pinned_asc + other_asc,
            'prepended.asc': other_asc + pinned_asc,
            'one-block.asc': self.armored(self.pinned, self.other),
            'appended.gpg': pinned_gpg + other_gpg,
            'twice.asc': pinned_asc + pinned_asc,
            'twice.gpg': pinned_gpg + pinned_gpg,
        }

    def write(self, directory):
        """The files of files() under directory; their paths by name."""
        paths = {}
        for name, data in self.files().items():
            path = os.path.join(str(directory), name)
            with open(path, 'wb') as handle:
                handle.write(data)
            paths[name] = path
        return paths

    def shown(self, path):
        """The primary key fingerprints gpg itself finds in a file, every block of it."""
        listing = subprocess.run(['gpg', '--homedir', self.home, '--batch', '--with-colons', '--show-keys', str(path)],
                                 check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode()
        return re.findall(r'^pub:.*\n(?:.*\n)*?fpr:+([0-9A-F]{40}):', listing, re.M)

    def stop_agent(self):
        subprocess.run(['gpgconf', '--homedir', self.home, '--kill', 'all'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def key_files(prefix):
    """The test keys and the files written from them, in a temporary GnuPG home removed afterwards:
    a generator for a module-scoped fixture (yield from it)."""
    home = tempfile.mkdtemp(prefix=prefix)
    made = TestKeys(home)
    try:
        yield made, made.write(home)
    finally:
        made.stop_agent()
        shutil.rmtree(home, ignore_errors=True)
