# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Installed kernels, their NVIDIA modules and the bootloader's default, from /boot and modules.dep.

The file layouts are those of the real packages: Debian's linux-image-* (vmlinuz-, initrd.img-), EL's
kernel-core (vmlinuz-, initramfs-<release>.img, .hmac files), Debian's nvidia-kernel-dkms (DKMS installs
updates/dkms/nvidia-current.ko), NVIDIA's DKMS packages (updates/dkms/nvidia.ko.xz) and Ubuntu's prebuilt
linux-modules-nvidia-* (kernel/nvidia-570srv/nvidia.ko). The molecule scenario nvidia_driver_distribution reads
real ones.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernels import (
    boot_default,
    installed_kernels,
    module_findings,
    version_key,
)


def make_kernel(root, release, modules=(), headers=True, initramfs='initrd.img-%s', dep=True):
    boot, lib = root / 'boot', root / 'lib' / 'modules'
    boot.mkdir(exist_ok=True)
    (boot / ('vmlinuz-' + release)).write_bytes(b'kernel')
    if initramfs:
        (boot / (initramfs % release)).write_bytes(b'initramfs')
    (lib / release).mkdir(parents=True)
    if headers:
        (lib / release / 'build').mkdir()
    if dep:
        lines = ['kernel/drivers/net/virtio_net.ko: kernel/net/core/failover.ko'] + ['%s:' % m for m in modules]
        (lib / release / 'modules.dep').write_text('\n'.join(lines) + '\n')


def read(root):
    return installed_kernels(str(root / 'boot'), str(root / 'lib' / 'modules'))


@pytest.mark.parametrize('older, newer', [
    ('6.1.0-9-amd64', '6.1.0-57-amd64'),
    ('6.1.0-57-cloud-amd64', '6.12.38+deb12-cloud-amd64'),
    ('5.14.0-70.13.1.el9_0.x86_64', '5.14.0-503.14.1.el9_5.x86_64'),
    ('6.8.0-9-generic', '6.8.0-50-generic'),
])
def test_versions_compare_as_numbers(older, newer):
    assert version_key(older) < version_key(newer)


def test_kernels_oldest_first_with_their_modules_headers_and_initramfs(tmp_path):
    make_kernel(tmp_path, '6.1.0-57-cloud-amd64', headers=False)
    make_kernel(tmp_path, '6.1.0-9-cloud-amd64', modules=['updates/dkms/nvidia-current.ko', 'updates/dkms/nvidia-current-uvm.ko'])
    kernels = read(tmp_path)
    assert [k['release'] for k in kernels] == ['6.1.0-9-cloud-amd64', '6.1.0-57-cloud-amd64']
    old, new = kernels
    assert old['nvidia_modules'] == ['updates/dkms/nvidia-current.ko'] and old['headers'] and old['modules_dep']
    assert new['nvidia_modules'] == [] and not new['headers']
    assert old['initramfs'] == str(tmp_path / 'boot' / 'initrd.img-6.1.0-9-cloud-amd64')
    assert old['initramfs_mtime'] > 0
    assert boot_default(kernels) == '6.1.0-57-cloud-amd64'


@pytest.mark.parametrize('path', [
    'updates/dkms/nvidia.ko', 'updates/dkms/nvidia.ko.xz', 'updates/dkms/nvidia.ko.zst', 'extra/nvidia.ko.xz',
    'kernel/nvidia-570srv/nvidia.ko', 'updates/dkms/nvidia-current.ko', 'updates/dkms/nvidia-tesla-535.ko',
])
def test_core_module_layouts_are_recognised(tmp_path, path):
    make_kernel(tmp_path, '6.8.0-50-generic', modules=[path])
    assert read(tmp_path)[0]['nvidia_modules'] == [path]


@pytest.mark.parametrize('path', [
    'updates/dkms/nvidia-uvm.ko', 'updates/dkms/nvidia-modeset.ko.xz', 'updates/dkms/nvidia-current-drm.ko',
    'updates/dkms/nvidia-peermem.ko', 'kernel/drivers/gpu/drm/nouveau/nouveau.ko',
])
def test_other_modules_are_not_the_driver(tmp_path, path):
    make_kernel(tmp_path, '6.8.0-50-generic', modules=[path])
    assert read(tmp_path)[0]['nvidia_modules'] == []


def test_el_layout_and_hmac_files(tmp_path):
    make_kernel(tmp_path, '5.14.0-503.14.1.el9_5.x86_64', modules=['extra/nvidia.ko.xz'], initramfs='initramfs-%s.img')
    (tmp_path / 'boot' / '.vmlinuz-5.14.0-503.14.1.el9_5.x86_64.hmac').write_text('x')
    (tmp_path / 'boot' / 'vmlinuz-0-rescue-0123456789abcdef').write_bytes(b'rescue')
    kernels = read(tmp_path)
    # The rescue entry is not a kernel the GPUs run on.
    assert [k['release'] for k in kernels] == ['5.14.0-503.14.1.el9_5.x86_64']
    assert kernels[0]['initramfs'].endswith('initramfs-5.14.0-503.14.1.el9_5.x86_64.img')
    assert boot_default(kernels) == '5.14.0-503.14.1.el9_5.x86_64'


def test_no_boot_directory_is_no_kernels(tmp_path):
    assert read(tmp_path) == [] and boot_default([]) is None


def test_unreadable_modules_dep_is_said(tmp_path):
    make_kernel(tmp_path, '6.1.0-57-amd64', dep=False)
    (kernel,) = read(tmp_path)
    assert not kernel['modules_dep'] and kernel['nvidia_modules'] == []


def test_the_default_kernel_without_a_module_is_critical_others_a_warning(tmp_path):
    make_kernel(tmp_path, '6.1.0-9-amd64', modules=['updates/dkms/nvidia-current.ko'])
    make_kernel(tmp_path, '6.1.0-40-amd64', headers=True)
    make_kernel(tmp_path, '6.1.0-57-amd64', headers=False)
    findings = module_findings(read(tmp_path), '6.1.0-9-amd64')
    assert [(f['kernel'], f['severity']) for f in findings] == [('6.1.0-40-amd64', 'warning'), ('6.1.0-57-amd64', 'critical')]
    critical = findings[1]
    assert critical['code'] == 'kernel_without_nvidia_module' and critical['gpu'] is None
    assert 'bootloader starts by default' in critical['evidence'] and 'headers are missing' in critical['evidence']
    assert 'DKMS or the module package' in findings[0]['evidence']


def test_every_kernel_with_a_module_raises_nothing(tmp_path):
    make_kernel(tmp_path, '6.1.0-9-amd64', modules=['updates/dkms/nvidia.ko'])
    make_kernel(tmp_path, '6.1.0-57-amd64', modules=['updates/dkms/nvidia.ko'])
    assert module_findings(read(tmp_path), '6.18.44') == []


def test_a_host_without_the_driver_in_any_kernel_raises_nothing(tmp_path):
    """No driver module anywhere (a container, a host before the driver role): nothing to lose at reboot."""
    make_kernel(tmp_path, '6.1.0-57-amd64')
    assert module_findings(read(tmp_path), '6.1.0-57-amd64') == []
