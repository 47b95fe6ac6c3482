# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernels installed on a host and whether each has an NVIDIA kernel module.

Read by host_state_info (the driver role decides on DKMS builds, headers and
reboots from it) and by nvidia_gpu_health (a node whose next boot has no NVIDIA
driver is unhealthy before it reboots). Only files are read: /boot's kernel
images and initramfs images, and each kernel's modules.dep, which depmod writes
after DKMS, a distribution's prebuilt module package or a kmod RPM installed a
module, whatever put it there.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

# The NVIDIA core module as installed: nvidia.ko by NVIDIA's packages, DKMS
# and Ubuntu's linux-modules-nvidia-*, nvidia-current.ko by Debian's
# nvidia-kernel-dkms (modprobe.d aliases nvidia to it), optionally compressed.
# Not nvidia-uvm, -modeset, -drm or -peermem: they need the core module.
CORE_MODULE = re.compile(r'(?:^|/)(nvidia(?:-current|-tesla(?:-[0-9]+)?)?)\.ko(?:\.(?:xz|gz|zst))?$')
INITRAMFS_NAMES = ('initrd.img-%s', 'initramfs-%s.img')


def version_key(release):
    """Sort key of a kernel release the way bootloaders order kernels: numbers as numbers.

    ``6.1.0-57-cloud-amd64`` sorts after ``6.1.0-9-amd64``; ``5.14.0-503.el9.x86_64``
    after ``5.14.0-70.el9.x86_64``.
    """
    return [(0, int(part), '') if part.isdigit() else (1, 0, part) for part in re.findall(r'[0-9]+|[A-Za-z]+', release)]


def _module_paths(modules_dir, release):
    """Paths (relative to the kernel's module directory) of NVIDIA core modules that modules.dep lists."""
    found = []
    try:
        with open(os.path.join(modules_dir, release, 'modules.dep'), 'rb') as handle:
            for raw in handle:
                path = raw.decode('utf-8', 'replace').split(':', 1)[0].strip()
                if CORE_MODULE.search(path):
                    found.append(path)
    except (IOError, OSError):
        return None
    return found


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except (IOError, OSError):
        return None


def installed_kernels(boot_dir='/boot', modules_dir='/lib/modules'):
    """The kernels with an image in ``boot_dir``, oldest first.

    Each is a dict: ``release``; ``image`` (path); ``initramfs`` (path or None) and
    ``initramfs_mtime``; ``modules`` (whether ``modules_dir/<release>`` exists);
    ``headers`` (whether its ``build`` tree exists, what DKMS builds against);
    ``modules_dep`` (whether depmod's index was readable); ``nvidia_modules`` (the
    NVIDIA core modules it lists, relative paths; empty when none).
    """
    try:
        names = os.listdir(boot_dir)
    except (IOError, OSError):
        names = []
    kernels = []
    for name in names:
        # EL's rescue entry (vmlinuz-0-rescue-<machine-id>) boots a generic
        # initramfs for repair, never the GPU workload.
        if not name.startswith('vmlinuz-') or name.endswith(('.hmac', '.sig')) or '-rescue-' in name:
            continue
        release = name[len('vmlinuz-'):]
        initramfs = None
        for pattern in INITRAMFS_NAMES:
            candidate = os.path.join(boot_dir, pattern % release)
            if os.path.exists(candidate):
                initramfs = candidate
                break
        paths = _module_paths(modules_dir, release)
        kernels.append({
            'release': release,
            'image': os.path.join(boot_dir, name),
            'initramfs': initramfs,
            'initramfs_mtime': _mtime(initramfs) if initramfs else None,
            'modules': os.path.isdir(os.path.join(modules_dir, release)),
            'headers': os.path.isdir(os.path.join(modules_dir, release, 'build')),
            'modules_dep': paths is not None,
            'nvidia_modules': paths or [],
        })
    return sorted(kernels, key=lambda kernel: version_key(kernel['release']))


def boot_default(kernels):
    """The release the bootloader starts without an operator's choice: the newest.

    GRUB's default entry 0 on Debian and Ubuntu lists the newest kernel first
    (update-grub sorts by version), and the BLS entries of EL 8/9 default to the
    newest installed kernel (grubby's "kernel install" sets it). A pinned
    GRUB_DEFAULT or saved entry is the operator's choice and not read here.
    """
    return kernels[-1]['release'] if kernels else None


def module_findings(kernels, running_release):
    """Findings for kernels that would boot without an NVIDIA driver.

    Only on a host where the driver is installed as a kernel module for at least
    one kernel (else the host has no driver to lose, and the GPU checks say so).
    The bootloader's default kernel is critical: the next reboot loses the GPUs.
    Others are a warning: choosing them at the boot menu does.
    """
    if not any(kernel['nvidia_modules'] for kernel in kernels):
        return []
    default = boot_default(kernels)
    findings = []
    for kernel in kernels:
        if kernel['nvidia_modules']:
            continue
        release = kernel['release']
        is_default = release == default
        why = ('its headers are missing (no %s), so DKMS cannot build it' % os.path.join('/lib/modules', release, 'build')
               if not kernel['headers'] else 'DKMS or the module package has not installed it for this kernel')
        findings.append({
            'code': 'kernel_without_nvidia_module',
            'severity': 'critical' if is_default else 'warning',
            'gpu': None,
            'evidence': 'Kernel %s%s has no NVIDIA kernel module (%s): a boot into it has no GPU driver.' % (
                release, ' (the newest in /boot, which the bootloader starts by default%s)' % (
                    '; running now' if release == running_release else '') if is_default else '', why),
            'advice': 'Run the nvidia_driver role: it installs the kernel headers where the repositories carry them '
                      'and builds the module with DKMS, and refuses the reboot until every kernel has one. Or remove '
                      'the kernel before the node reboots.',
            'kernel': release,
        })
    return findings
