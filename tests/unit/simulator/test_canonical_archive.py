# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated Canonical archive (<out>/ubuntu/) and NVIDIA's ubuntu2204 and
ubuntu2404 CUDA repositories, as tests/nvidia_sim/repo/build_repo.py builds them.

Expected names, versions and relations are Canonical's, from
docs/reference/platform-package-facts.md section 1 (debian/control of
canonical/nvidia-graphics-drivers, 570-server-noble and 535-server-noble).
The build uses the real simulator payload.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys

import pytest

from sim_hosts import SIM_DIR

REPO_SRC = os.path.join(SIM_DIR, 'repo')
if REPO_SRC not in sys.path:
    sys.path.insert(0, REPO_SRC)

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import catalog  # noqa: E402  pylint: disable=wrong-import-position
import maint_scripts  # noqa: E402  pylint: disable=wrong-import-position

BASE_URL = 'http://127.0.0.1:8765'
RELEASES = {'jammy': '22.04', 'noble': '24.04'}
SUITES = ['%s%s' % (c, p) for c in sorted(RELEASES) for p in ('', '-updates', '-security', '-backports')]
COMPONENTS = ['main', 'restricted', 'universe', 'multiverse']
KERNELS = {'jammy': ('5.15.0-127-generic', '5.15.0-127.137'), 'noble': ('6.8.0-60-generic', '6.8.0-60.63')}
DRIVERS = {b: catalog.DRIVER_BRANCHES[b][-1] for b in ('535', '570', '580')}
# nvidia-graphics-drivers-570-server's binary packages (facts 1.1), {b}: branch, {v}: upstream version.
SERVER_BINARIES = [
    'nvidia-driver-{b}-server', 'nvidia-kernel-source-{b}-server', 'nvidia-dkms-{b}-server',
    'nvidia-utils-{b}-server', 'libnvidia-compute-{b}-server', 'nvidia-compute-utils-{b}-server',
    'nvidia-headless-no-dkms-{b}-server', 'nvidia-headless-{b}-server', 'nvidia-kernel-common-{b}-server',
    'nvidia-firmware-{b}-server-{v}', 'libnvidia-gl-{b}-server', 'libnvidia-common-{b}-server',
    'libnvidia-extra-{b}-server', 'xserver-xorg-video-nvidia-{b}-server', 'libnvidia-cfg1-{b}-server',
    'libnvidia-fbc1-{b}-server', 'libnvidia-decode-{b}-server', 'libnvidia-encode-{b}-server',
    'nvidia-driver-{b}-server-open', 'nvidia-kernel-source-{b}-server-open', 'nvidia-dkms-{b}-server-open',
    'nvidia-headless-no-dkms-{b}-server-open', 'nvidia-headless-{b}-server-open',
]
REQUIRED = ('dpkg-deb', 'apt-ftparchive', 'gpg', 'gpgv', 'gpgconf')


def _fields(stanza):
    # Continuation lines (Description) are not needed here.
    return dict(re.findall(r'^([\w-]+): (.*)$', stanza, re.M))


def _index(directory):
    with open(os.path.join(directory, 'Packages')) as handle:
        text = handle.read().strip()
    return [_fields(s) for s in text.split('\n\n')] if text else []


def _split(relations):
    return [r.strip() for r in relations.split(',')] if relations else []


def _deb_listing(deb):
    listing = subprocess.run(['dpkg-deb', '-c', deb], universal_newlines=True, stdout=subprocess.PIPE,
                             check=True).stdout
    return [line.split()[-1].lstrip('.') for line in listing.splitlines() if not line.startswith('d')]


def _gpgv(keyring, *files):
    return subprocess.run(['gpgv', '--keyring', keyring] + list(files), universal_newlines=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    missing = [tool for tool in REQUIRED if shutil.which(tool) is None]
    if missing:
        pytest.skip('the repository build needs %s (Debian: apt-get install apt-utils gnupg gpgv)' % ', '.join(missing))
    out = str(tmp_path_factory.mktemp('canonical') / 'repo')
    # The Canonical archive is apt's: the rpm repositories are left out.
    assert build_repo.build(out, SIM_DIR, BASE_URL, log=lambda _msg: None, with_rpm=False)
    return out


@pytest.fixture(scope='module')
def updates(built):
    """Codename -> {package name: stanza} of its -updates pocket, every component."""
    result = {}
    for codename in RELEASES:
        packages = result.setdefault(codename, {})
        for component in COMPONENTS:
            for stanza in _index(os.path.join(built, 'ubuntu', 'dists', codename + '-updates', component,
                                              'binary-amd64')):
                assert stanza['Package'] not in packages, stanza['Package']
                packages[stanza['Package']] = dict(stanza, Component=component)
    return result


@pytest.mark.parametrize('suite', SUITES)
def test_every_suite_and_component_has_a_signed_index(built, suite):
    directory = os.path.join(built, 'ubuntu', 'dists', suite)
    with open(os.path.join(directory, 'Release')) as handle:
        release = handle.read()
    codename = suite.split('-')[0]
    fields = _fields(release)
    assert (fields['Origin'], fields['Label'], fields['Suite'], fields['Codename'], fields['Version']) == (
        'Ubuntu', 'Ubuntu', suite, codename, RELEASES[codename])
    assert fields['Architectures'] == 'amd64' and fields['Components'] == ' '.join(COMPONENTS)
    assert re.search(r'^Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d UTC$', release, re.M)
    assert ('NotAutomatic' in fields) == suite.endswith('-backports')
    sha256 = release.split('SHA256:\n', 1)[1]
    for component in COMPONENTS:
        for name in ('Packages', 'Packages.gz'):
            rel = '%s/binary-amd64/%s' % (component, name)
            with open(os.path.join(directory, rel), 'rb') as handle:
                data = handle.read()
            assert ' %s %16d %s\n' % (hashlib.sha256(data).hexdigest(), len(data), rel) in sha256
        with gzip.open(os.path.join(directory, component, 'binary-amd64', 'Packages.gz')) as handle:
            with open(os.path.join(directory, component, 'binary-amd64', 'Packages'), 'rb') as plain:
                assert handle.read() == plain.read()
    keys = os.path.join(built, 'keys')
    assert _gpgv(os.path.join(keys, 'ubuntu-archive-keyring.gpg'), os.path.join(directory, 'InRelease')).returncode == 0
    detached = _gpgv(os.path.join(keys, 'ubuntu-archive-keyring.gpg'), os.path.join(directory, 'Release.gpg'),
                     os.path.join(directory, 'Release'))
    assert detached.returncode == 0, detached.stdout
    assert _gpgv(os.path.join(keys, 'cuda-archive-key.gpg'), os.path.join(directory, 'InRelease')).returncode != 0


def test_ubuntu_key_is_a_new_simulated_key(built, tmp_path):
    keys = os.path.join(built, 'keys')
    with open(os.path.join(keys, 'ubuntu-archive-fingerprint')) as handle:
        fingerprint = handle.read().strip()
    assert re.match(r'^[0-9A-F]{40}$', fingerprint)
    for other in ('fingerprint', 'nvidia-container-toolkit-fingerprint'):
        with open(os.path.join(keys, other)) as handle:
            assert handle.read().strip() != fingerprint
    for name in ('ubuntu-archive-keyring.gpg', 'ubuntu-archive-keyring.asc'):
        shown = subprocess.run(['gpg', '--homedir', str(tmp_path), '--batch', '--with-colons', '--show-keys',
                                os.path.join(keys, name)], universal_newlines=True, stdout=subprocess.PIPE,
                               check=True).stdout
        assert [line.split(':')[9] for line in shown.splitlines() if line.startswith('fpr:')] == [fingerprint]
        assert ('Ubuntu Archive Automatic Signing Key (simulated, gpufleet.nvidia test double) '
                '<ftpmaster@ubuntu-sim.invalid>') in shown
    with open(os.path.join(keys, 'ubuntu-archive-keyring.gpg'), 'rb') as handle:
        assert not handle.read(64).startswith(b'-----')


def test_only_the_updates_pockets_carry_packages(built):
    for suite in SUITES:
        for component in COMPONENTS:
            directory = os.path.join(built, 'ubuntu', 'dists', suite, component, 'binary-amd64')
            names = [s['Package'] for s in _index(directory)]
            assert bool(names) == (suite.endswith('-updates') and component != 'multiverse'), (suite, component)


@pytest.mark.parametrize('codename', sorted(RELEASES))
@pytest.mark.parametrize('branch', sorted(DRIVERS))
def test_server_branch_names_and_versions(updates, codename, branch):
    driver = DRIVERS[branch]
    version = '%s-0ubuntu0.%s.1' % (driver, RELEASES[codename])
    source = 'nvidia-graphics-drivers-%s-server' % branch
    binaries = {n: s for n, s in updates[codename].items() if s.get('Source') == source}
    assert sorted(binaries) == sorted(n.format(b=branch, v=driver) for n in SERVER_BINARIES)
    for name, stanza in binaries.items():
        assert stanza['Version'] == version, name
        assert stanza['Component'] == 'restricted', name
        assert stanza['Architecture'] == ('all' if name.startswith('libnvidia-common-') else 'amd64'), name
        assert stanza['Filename'].startswith('pool/restricted/n/%s/' % source)
    assert binaries['xserver-xorg-video-nvidia-%s-server' % branch]['Section'] == 'restricted/x11'


def test_driver_meta_depends_like_canonicals(updates):
    packages = updates['noble']
    v, up = '570.195.03-0ubuntu0.24.04.1', '570.195.03'

    def eq(name):
        return '%s (= %s)' % (name, v)

    def upstream(name):
        return ['%s (<= %s-1)' % (name, up), '%s (>= %s)' % (name, up)]

    libs = [eq('libnvidia-compute-570-server'), eq('libnvidia-extra-570-server'),
            eq('nvidia-compute-utils-570-server'), eq('libnvidia-decode-570-server'),
            eq('libnvidia-encode-570-server'), eq('nvidia-utils-570-server'),
            eq('xserver-xorg-video-nvidia-570-server'), eq('libnvidia-cfg1-570-server'),
            eq('libnvidia-fbc1-570-server')]
    for suffix in ('', '-open'):
        assert _split(packages['nvidia-driver-570-server' + suffix]['Depends']) == (
            [eq('libnvidia-gl-570-server')] + upstream('nvidia-dkms-570-server' + suffix)
            + upstream('nvidia-kernel-common-570-server') + [eq('nvidia-kernel-source-570-server' + suffix)] + libs)
        assert _split(packages['nvidia-headless-no-dkms-570-server' + suffix]['Depends']) == (
            upstream('nvidia-kernel-common-570-server') + [
                eq('nvidia-kernel-source-570-server' + suffix), eq('libnvidia-compute-570-server'),
                eq('nvidia-compute-utils-570-server'), eq('libnvidia-cfg1-570-server')])
        headless = packages['nvidia-headless-570-server' + suffix]
        assert _split(headless['Depends']) == ['nvidia-headless-no-dkms-570-server' + suffix,
                                               'nvidia-dkms-570-server' + suffix]
        assert headless['Provides'] == headless['Conflicts'] == 'nvidia-headless'
        dkms = packages['nvidia-dkms-570-server' + suffix]
        assert _split(dkms['Depends']) == (['dkms'] + upstream('nvidia-kernel-source-570-server' + suffix)
                                           + upstream('nvidia-kernel-common-570-server')
                                           + ([] if suffix else ['nvidia-firmware-570-server-570.195.03']))
        assert dkms['Provides'] == dkms['Conflicts'] == 'nvidia-dkms-kernel'
        assert packages['nvidia-kernel-source-570-server' + suffix]['Provides'] == 'nvidia-kernel-source'
        assert 'Depends' not in packages['nvidia-kernel-source-570-server' + suffix]


def test_userland_is_tied_to_one_kernel_common(updates):
    packages = updates['noble']
    common = packages['nvidia-kernel-common-570-server']
    assert _split(common['Provides']) == ['nvidia-kernel-common', 'nvidia-kernel-common-570-server-570.195.03']
    assert common['Conflicts'] == 'nvidia-kernel-common'
    assert common['Depends'] == 'nvidia-firmware-570-server-570.195.03'
    tie = 'nvidia-kernel-common-570-server-570.195.03'
    for name in ('nvidia-utils', 'libnvidia-compute', 'libnvidia-gl', 'libnvidia-common', 'libnvidia-extra',
                 'libnvidia-cfg1', 'libnvidia-fbc1', 'libnvidia-decode', 'libnvidia-encode'):
        assert tie in _split(packages['%s-570-server' % name]['Depends']), name
    compute = packages['libnvidia-compute-570-server']
    v = '570.195.03-0ubuntu0.24.04.1'
    assert {'libnvidia-compute', 'libnvidia-ml1 (= %s)' % v, 'libcuda1 (= %s)' % v} <= set(_split(compute['Provides']))
    assert 'ocl-icd-libopencl1' in _split(packages['libnvidia-compute-580-server']['Depends'])
    utils = packages['nvidia-utils-570-server']
    assert utils['Provides'] == utils['Conflicts'] == utils['Replaces'] == 'nvidia-utils, nvidia-smi'
    # As Canonical's: no dependency on the NVML library package.
    assert _split(utils['Depends']) == [tie, 'nvidia-sim-runtime']
    compute_utils = packages['nvidia-compute-utils-570-server']
    assert _split(compute_utils['Depends']) == ['libnvidia-compute-570-server', 'adduser', 'nvidia-sim-runtime']
    assert compute_utils['Provides'] == compute_utils['Conflicts'] == 'nvidia-compute-utils, nvidia-persistenced'
    # 535-server never had the exact virtual package (LP #2129682 came with 570/580).
    assert packages['nvidia-kernel-common-535-server']['Provides'] == 'nvidia-kernel-common'
    assert _split(packages['nvidia-utils-535-server']['Depends']) == ['nvidia-sim-runtime']
    assert 'libcuda1' not in packages['libnvidia-compute-535-server']['Provides']


@pytest.mark.parametrize('codename', sorted(RELEASES))
def test_kernel_and_its_metas(built, updates, codename):
    abi, version = KERNELS[codename]
    packages = updates[codename]
    for name in ('linux-image-' + abi, 'linux-headers-' + abi, 'linux-image-generic', 'linux-headers-generic',
                 'linux-generic'):
        assert (packages[name]['Version'], packages[name]['Component']) == (version, 'main'), name
    assert packages['linux-image-generic']['Depends'] == 'linux-image-' + abi
    assert packages['linux-headers-generic']['Depends'] == 'linux-headers-' + abi
    assert _split(packages['linux-generic']['Depends']) == [
        'linux-image-generic (= %s)' % version, 'linux-headers-generic (= %s)' % version]
    image = os.path.join(built, 'ubuntu', packages['linux-image-' + abi]['Filename'])
    assert sorted(_deb_listing(image)) == ['/boot/vmlinuz-' + abi, '/lib/modules/%s/modules.dep' % abi]
    control = subprocess.run(['dpkg-deb', '-I', image], universal_newlines=True, stdout=subprocess.PIPE,
                             check=True).stdout
    assert not re.search(r'\b(postinst|preinst|prerm|postrm)\b', control)
    headers = os.path.join(built, 'ubuntu', packages['linux-headers-' + abi]['Filename'])
    assert _deb_listing(headers) == ['/usr/src/linux-headers-%s/Makefile' % abi]


@pytest.mark.parametrize('codename', sorted(RELEASES))
@pytest.mark.parametrize('suffix, flavour', [('', 'proprietary'), ('-open', 'open')])
def test_prebuilt_modules(built, updates, codename, suffix, flavour):
    abi, kernel_version = KERNELS[codename]
    packages = updates[codename]
    for branch, driver in sorted(DRIVERS.items()):
        name = 'linux-modules-nvidia-%s-server%s-%s' % (branch, suffix, abi)
        stanza = packages[name]
        assert (stanza['Version'], stanza['Source'], stanza['Section'], stanza['Component']) == (
            kernel_version + '+1', 'linux-restricted-modules', 'restricted/kernel', 'restricted')
        tie = (['nvidia-kernel-common-%s-server-%s' % (branch, driver)] if branch != '535' else
               ['nvidia-kernel-common-535-server (<= %s-1)' % driver, 'nvidia-kernel-common-535-server (>= %s)' % driver])
        assert _split(stanza['Depends']) == ['linux-image-%s | linux-image-unsigned-%s' % (abi, abi)] + tie
        listing = _deb_listing(os.path.join(built, 'ubuntu', stanza['Filename']))
        modules = ['/lib/modules/%s/kernel/nvidia-%ssrv/%s.ko' % (abi, branch, m)
                   for m in ('nvidia', 'nvidia-modeset', 'nvidia-drm', 'nvidia-uvm', 'nvidia-peermem')]
        marker = '/usr/share/nvidia-sim/prebuilt-kernel-module-flavour/' + abi
        assert sorted(listing) == sorted(modules + [marker])
        # Not the DKMS packages' marker: a DKMS package may be installed beside it.
        assert '/usr/share/nvidia-sim/kernel-module-flavour' not in listing
        meta = packages['linux-modules-nvidia-%s-server%s-generic' % (branch, suffix)]
        assert meta['Version'] == stanza['Version']
        assert _split(meta['Depends']) == ['%s (= %s)' % (name, stanza['Version']),
                                           'nvidia-kernel-common-%s-server (>= %s)' % (branch, driver)]


def test_sim_runtime_is_in_universe_of_both_releases(updates):
    for codename in RELEASES:
        stanza = updates[codename]['nvidia-sim-runtime']
        assert (stanza['Component'], stanza['Version']) == ('universe', catalog.SIM_RUNTIME_VERSION)
        assert stanza['Filename'] == 'pool/universe/n/nvidia-sim-runtime/nvidia-sim-runtime_%s_all.deb' % (
            catalog.SIM_RUNTIME_VERSION)


@pytest.mark.parametrize('distro', ['ubuntu2204', 'ubuntu2404'])
def test_cuda_repositories_for_ubuntu(built, distro):
    assert distro in catalog.CUDA_DISTROS
    rel = catalog.CUDA_REPO_DIR % distro
    keyring = os.path.join(built, 'keys', 'cuda-archive-key.gpg')
    for directory in (os.path.join(built, rel), os.path.join(built, catalog.SNAPSHOT_ROOT, rel)):
        assert _gpgv(keyring, os.path.join(directory, 'InRelease')).returncode == 0
    names = {(s['Package'], s['Version']) for s in _index(os.path.join(built, rel))}
    debian = {(s['Package'], s['Version']) for s in _index(os.path.join(built, catalog.CUDA_REPO_DIR % 'debian12'))}
    # The same packages but the driver metas: NVIDIA's Ubuntu repositories
    # name the branch-named tree (nvidia-open-<branch> from 560 on).
    metas = {'cuda-drivers', 'nvidia-open'} | {'cuda-drivers-%s' % b for b in catalog.DRIVER_BRANCHES}
    assert {p for p in names if p[0] not in metas and not p[0].startswith('nvidia-open-')} == \
        {p for p in debian if p[0] not in metas}
    assert {'nvidia-driver-570-open', 'cuda-toolkit-12-8', 'cudnn9-cuda-12', 'datacenter-gpu-manager-4-core',
            'cuda-keyring', 'nvidia-open-580', 'cuda-drivers-570'} <= {n for n, _v in names}
    assert 'nvidia-open' not in {n for n, _v in names} and 'nvidia-open-580' not in {n for n, _v in debian}
    stanzas = {s['Package'] + ' ' + s['Version']: s for s in _index(os.path.join(built, rel))}
    assert stanzas['cuda-drivers-570 570.195.03-1']['Depends'] == 'nvidia-driver-570 (>= 570.195.03)'
    assert stanzas['nvidia-open-580 580.95.05-1']['Depends'] == 'nvidia-driver-580-open (>= 580.95.05)'
    listing = subprocess.run(['dpkg-deb', '--fsys-tarfile', os.path.join(built, rel, 'cuda-keyring_1.1-1_all.deb')],
                             stdout=subprocess.PIPE, check=True).stdout
    assert ('%s/%s/' % (BASE_URL, rel)).encode() in listing


def test_prebuilt_modules_record_and_forget_their_modules_dep_lines(tmp_path):
    modules_dir = str(tmp_path / 'lib' / 'modules')

    def run(script, action):
        text = script.replace('/lib/modules', modules_dir)
        subprocess.run(['sh', '-c', text, 'postinst', action], check=True)

    os.makedirs(os.path.join(modules_dir, '6.8.0-60-generic'))
    dep = os.path.join(modules_dir, '6.8.0-60-generic', 'modules.dep')
    with open(dep, 'w') as handle:
        handle.write('updates/dkms/nvidia.ko:\n')
    postinst = maint_scripts.prebuilt_modules_postinst('6.8.0-60-generic', 'nvidia-570srv', ('nvidia', 'nvidia-uvm'))
    run(postinst, 'configure')
    run(postinst, 'configure')
    with open(dep) as handle:
        assert handle.read() == ('updates/dkms/nvidia.ko:\nkernel/nvidia-570srv/nvidia.ko:\n'
                                 'kernel/nvidia-570srv/nvidia-uvm.ko:\n')
    run(maint_scripts.prebuilt_modules_postrm('6.8.0-60-generic', 'nvidia-570srv'), 'remove')
    with open(dep) as handle:
        assert handle.read() == 'updates/dkms/nvidia.ko:\n'
