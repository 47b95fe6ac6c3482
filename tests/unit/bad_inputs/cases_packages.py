# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Bad inputs the repository answers (issue #18, point 2): a package name or
version the configured repository's index does not carry, and a CUDA
repository URL for another distribution or architecture than the host's.

The repositories are flat apt repositories on file:// (fixtures below),
read by gpufleet.nvidia.package_index_info as the roles read NVIDIA's. The
package names are those of NVIDIA's Debian repository: the cases expect the
machine that runs them to be Debian 12 or 13, as the driver cases of
cases.py do. The URLs of the distribution cases are made for the machine
that runs them (its distribution and architecture from /etc/os-release and
uname), so that they name another one wherever they run.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import gzip
import os
import platform

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.cases import role, module

# Debian 12/13 driver packages of the open flavour (roles/nvidia_driver/vars/Debian.yml) at two releases of
# branch 580, with nvidia-driver-cuda missing from the newer one (a mirror synchronised half-way), cuDNN 9 for
# CUDA 12 and the toolkits NVIDIA publishes for CUDA 12.4 and 12.8.
DRIVER_PIECES = ('nvidia-open', 'nvidia-driver', 'nvidia-kernel-open-dkms')
CUDA_PACKAGES = (
    [(name, version) for name in DRIVER_PIECES for version in ('580.95.05-1', '580.82.07-1')]
    + [('nvidia-driver-cuda', '580.82.07-1')]
    + [('libcudnn9-cuda-12', v) for v in ('9.10.2.21-1', '9.13.0.50-1')]
    + [('cudnn9-cuda-12', v) for v in ('9.10.2.21-1', '9.13.0.50-1')]
    + [('cuda-toolkit-12-4', '12.4.1-1'), ('cuda-toolkit-12-8', '12.8.1-1'), ('cuda-toolkit-13-0', '13.0.1-1')]
)
# The four Container Toolkit packages at 1.18.2, but libnvidia-container1 only at 1.18.0.
CTK_PACKAGES = (
    [(name, v) for name in ('nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools')
     for v in ('1.18.2-1', '1.18.0-1')]
    + [('libnvidia-container1', '1.18.0-1')]
)

ON_H100 = {'nvidia_driver_pci_devices_path': '@SYS_H100@', 'nvidia_driver_repo_url': '@CUDA_REPO_HALF@'}


def _flat_repository(directory, packages):
    os.makedirs(directory)
    text = ''.join('Package: %s\nVersion: %s\nArchitecture: amd64\n\n' % pair for pair in packages)
    with gzip.open(os.path.join(directory, 'Packages.gz'), 'wt') as handle:
        handle.write(text)
    return 'file://' + directory


def _host_directories():
    """NVIDIA's directory names for this machine: (distribution, architecture), such as ("debian12", "x86_64")."""
    release = {}
    try:
        with open('/etc/os-release') as handle:
            for line in handle:
                key, _sep, value = line.strip().partition('=')
                release[key] = value.strip('"')
    except OSError:
        pass
    name, version = release.get('ID', ''), release.get('VERSION_ID', '')
    distro = name + (version.replace('.', '') if name == 'ubuntu' else version.split('.')[0])
    arch = 'sbsa' if platform.machine() == 'aarch64' else platform.machine()
    return distro, arch


def fixtures(root):
    """Placeholders of these cases, built under root."""
    distro, arch = _host_directories()
    other_distro = 'ubuntu2204' if distro == 'ubuntu2404' else 'ubuntu2404'
    other_arch = 'x86_64' if arch == 'sbsa' else 'sbsa'
    mirror = 'https://mirror.example.com/nvidia/compute/cuda/repos/'
    ctk = os.path.join(root, 'ctk-partial')
    _flat_repository(os.path.join(ctk, 'stable', 'deb', 'amd64'), CTK_PACKAGES)
    return {
        '@CUDA_REPO_HALF@': _flat_repository(os.path.join(root, 'cuda-half'), CUDA_PACKAGES),
        '@CTK_REPO_PARTIAL_BASE@': 'file://' + ctk,
        # An inventory's URL for another release, and this release's directory for another architecture.
        '@CUDA_URL_OTHER_DISTRO@': mirror + '%s/%s/' % (other_distro, arch),
        '@CUDA_URL_OTHER_ARCH@': mirror + '%s/%s' % (distro, other_arch),
    }


CASES = [
    # --- A: every package name and version a role installs is in the repository's index ----------
    role('driver-package-name-not-in-repository', 'nvidia_driver',
         dict(ON_H100, nvidia_driver_version='580.82.07',
              nvidia_driver_packages=['nvidia-open', 'nvidia-driver', 'nvidia-drvier-cuda', 'nvidia-kernel-open-dkms']),
         'nvidia_driver_packages', facts=True),
    role('driver-package-not-at-the-version', 'nvidia_driver', dict(ON_H100, nvidia_driver_version='580.95.05'),
         'nvidia_driver_version', facts=True),
    role('driver-newest-release-incomplete', 'nvidia_driver', dict(ON_H100), 'nvidia_driver_branch', facts=True),
    role('cuda-toolkit-not-in-repository', 'cuda_toolkit',
         {'cuda_toolkit_versions': ['12.8', '12.9'], 'cuda_toolkit_repo_url': '@CUDA_REPO_HALF@',
          'cuda_toolkit_driver_check': 'skip'}, 'cuda_toolkit_versions', facts=True),
    role('toolkit-package-not-at-the-version', 'container_toolkit',
         {'container_toolkit_version': '1.18.2', 'container_toolkit_repo_base_url': '@CTK_REPO_PARTIAL_BASE@'},
         'container_toolkit_version', facts=True),
    # cuDNN installs from the CUDA repository a role before it resolved (the fact repository_cuda), for the
    # default toolkit the cuda_toolkit role reported (the fact cuda_toolkit_default, whatever this machine has).
    role('cudnn-cuda-major-not-in-repository', 'cudnn',
         {'cudnn_cuda_major': '13', 'cuda_toolkit_default': '13.0',
          'repository_cuda': {'url': '@CUDA_REPO_HALF@', 'package_manager': 'apt'}}, 'cudnn_cuda_major', facts=True),
    role('cudnn-version-not-in-repository', 'cudnn',
         {'cudnn_cuda_major': '12', 'cudnn_version': '9.11', 'cuda_toolkit_default': '12.8',
          'repository_cuda': {'url': '@CUDA_REPO_HALF@', 'package_manager': 'apt'}}, 'cudnn_version', facts=True),
    module('index-similar-word', 'package_index_info', {'url': 'http://127.0.0.1:1/repo', 'packages': ['x'],
                                                        'similar': 'perhaps'}, 'similar'),
    # --- B: the CUDA repository URL's distribution and architecture directories are the host's ----
    role('driver-repo-url-other-distribution', 'nvidia_driver',
         dict(ON_H100, nvidia_driver_repo_url='@CUDA_URL_OTHER_DISTRO@'), 'nvidia_driver_repo_url', facts=True),
    role('driver-repo-url-other-architecture', 'nvidia_driver',
         dict(ON_H100, nvidia_driver_repo_url='@CUDA_URL_OTHER_ARCH@'), 'nvidia_driver_repo_url', facts=True),
    role('cuda-repo-url-other-distribution', 'cuda_toolkit',
         {'cuda_toolkit_repo_url': '@CUDA_URL_OTHER_DISTRO@', 'cuda_toolkit_driver_check': 'skip'},
         'cuda_toolkit_repo_url', facts=True),
]
