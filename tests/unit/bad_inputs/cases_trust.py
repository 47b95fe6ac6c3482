# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Bad inputs of trust: a repository key file that holds more than the pinned key.

The key URL (file://) serves the pinned key with another key appended, as a
second armored block, in binary, or both keys in one block. Each is refused
in the repository role's preflight, naming the fingerprint variable, and
nothing is installed: no keyring, no source (test_bad_inputs.py compares
/etc/apt before and after). The cases drive the internal repository role's
apt entry point directly, and the two roles that call it with a key URL of
their own (nvidia_driver, container_toolkit), whose preflight passes on the
fixtures. The keys are real, made by gpg in fixtures().
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import gzip
import os

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.cases import DRIVER_ON_H100, role
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.openpgp_keys import TestKeys


DRIVER_PACKAGES = ('nvidia-open', 'nvidia-driver', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms')
TOOLKIT_PACKAGES = ('nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
                    'libnvidia-container1')


def _index(directory, packages, version):
    os.makedirs(directory)
    with gzip.open(os.path.join(directory, 'Packages.gz'), 'wt') as handle:
        handle.write(''.join('Package: %s\nVersion: %s\nArchitecture: amd64\n\n' % (name, version)
                             for name in packages))
    return directory


def fixtures(root):
    """Placeholders: the pinned key's fingerprint and the key files that hold more than it."""
    directory = os.path.join(root, 'keys')
    os.makedirs(directory)
    keys = TestKeys(os.path.join(directory, 'gnupg'))
    paths = keys.write(directory)
    keys.stop_agent()
    # Indexes with every package the driver (open flavour, branch 580) and the toolkit (1.18.2) install by
    # default, so that their preflight passes and the roles go on to the repository.
    cuda = _index(os.path.join(root, 'trust-cuda'), DRIVER_PACKAGES, '580.95.05-1')
    toolkit = os.path.join(root, 'trust-ctk')
    _index(os.path.join(toolkit, 'stable', 'deb', 'amd64'), TOOLKIT_PACKAGES, '1.18.2-1')
    return {
        '@TRUST_CUDA_REPO@': 'file://' + cuda,
        '@TRUST_CTK_REPO_BASE@': 'file://' + toolkit,
        '@KEY_PINNED@': keys.pinned,
        '@KEY_APPENDED_ASC@': paths['appended.asc'],
        '@KEY_APPENDED_GPG@': paths['appended.gpg'],
        '@KEY_ONE_BLOCK_ASC@': paths['one-block.asc'],
    }


def _repository(key_file):
    # As nvidia_driver includes the entry point, with its variables' names for the messages.
    return {
        'repository_name': 'gpufleet-trust-test',
        'repository_url': '@CUDA_REPO@',
        'repository_key_url': 'file://' + key_file,
        'repository_key_fingerprint': '@KEY_PINNED@',
        'repository_key_url_var': 'nvidia_driver_repo_key_url',
        'repository_key_fingerprint_var': 'nvidia_driver_repo_key_fingerprint',
    }


CASES = [
    role('trust-key-second-block-appended', 'repository:apt', _repository('@KEY_APPENDED_ASC@'),
         'nvidia_driver_repo_key_fingerprint'),
    role('trust-key-binary-key-appended', 'repository:apt', _repository('@KEY_APPENDED_GPG@'),
         'nvidia_driver_repo_key_fingerprint'),
    role('trust-key-two-keys-one-block', 'repository:apt', _repository('@KEY_ONE_BLOCK_ASC@'),
         'nvidia_driver_repo_key_fingerprint'),
    role('trust-driver-key-appended', 'nvidia_driver',
         # No kernel headers for this machine's kernel in the fixture repository: the role would stop there.
         dict(DRIVER_ON_H100, nvidia_driver_repo_url='@TRUST_CUDA_REPO@',
              nvidia_driver_repo_key_url='file://@KEY_APPENDED_ASC@', nvidia_driver_repo_key_fingerprint='@KEY_PINNED@',
              nvidia_driver_install_kernel_headers=False),
         'nvidia_driver_repo_key_fingerprint', facts=True),
    role('trust-toolkit-key-appended', 'container_toolkit',
         {'container_toolkit_repo_base_url': '@TRUST_CTK_REPO_BASE@',
          'container_toolkit_repo_key_url': 'file://@KEY_APPENDED_ASC@',
          'container_toolkit_repo_key_fingerprint': '@KEY_PINNED@'},
         'container_toolkit_repo_key_fingerprint', facts=True),
]
