#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: host_state_info
short_description: Read the packages, files, services and devices a GPU role manages, in one call
version_added: 0.2.0
author: gpufleet maintainers (@gpufleet)
description:
  - "Returns, from one module execution, what a role needs to decide whether anything must change on a host: the
    installed packages matching name patterns with their versions and holds, the state and SHA-1 checksum of files,
    the text of small files, the state of systemd units, the paths matching glob patterns, the primary fingerprints
    of OpenPGP keyrings, the NVIDIA PCI functions and the Secure Boot state."
  - The roles of this collection call it once per role and act only on what differs, so that a run that changes
    nothing costs one remote step per role instead of one per file, package and service. Its file records carry
    the fields M(gpufleet.nvidia.config_file) compares before it writes.
  - Never changes anything on the host.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.INFO_MODULE
options:
  packages:
    description:
      - Package names or shell glob patterns (V(nvidia-*), V(libnvidia-*)), read with C(dpkg-query) on Debian and
        Ubuntu and C(rpm) on the RHEL family.
      - Patterns that match nothing are not an error.
    type: list
    elements: str
    default: []
  files:
    description:
      - Paths to stat, without following a final symbolic link (its target is returned instead).
    type: list
    elements: path
    default: []
  contents:
    description:
      - Paths of small text files to read whole, such as C(/proc/driver/nvidia/version) or a JSON configuration.
      - Files larger than O(max_content_bytes) are returned cut to that size, with RV(truncated) listing them.
    type: list
    elements: path
    default: []
  units:
    description:
      - systemd unit names; a name without a suffix means a C(.service).
    type: list
    elements: str
    default: []
  globs:
    description:
      - Shell glob patterns whose matching paths are returned, sorted.
    type: list
    elements: str
    default: []
  links:
    description:
      - Shell glob patterns whose matching symbolic links are returned with their targets (for example DKMS's
        C(/var/lib/dkms/*/kernel-*) links, which say which module version is installed for which kernel).
    type: list
    elements: str
    default: []
  keyrings:
    description:
      - OpenPGP keyring files (armored or binary) whose primary key fingerprints are returned, computed from
        the key packets (no gpg process).
      - The whole file is read, every armored block and every packet; a file larger than 1 MiB, text outside the
        armored blocks and packets other than those of public keys (secret keys, messages) are reported in
        C(error).
    type: list
    elements: path
    default: []
  pci_devices_path:
    description:
      - The sysfs directory of PCI devices; the NVIDIA functions (vendor C(0x10de)) under it are returned.
      - Empty skips the scan.
    type: path
    default: ''
  secure_boot:
    description:
      - Read the firmware's Secure Boot variable (what C(mokutil --sb-state) reads).
    type: bool
    default: false
  kernels:
    description:
      - Read the kernels installed in C(/boot), their initramfs images, headers and NVIDIA core modules (from each
        kernel's C(modules.dep), whatever installed the module), and the kernel the bootloader starts by default.
    type: bool
    default: false
  filesystems:
    description:
      - Paths whose file system's free and total space are returned (C(statvfs)); a path that does not exist is
        read at its nearest existing parent, which is where files written under it would go.
    type: list
    elements: path
    default: []
  package_work:
    description:
      - Read whether the package manager left work unfinished. On Debian and Ubuntu, that is an interrupted dpkg's
        journal (files in C(/var/lib/dpkg/updates), what makes apt refuse with "dpkg was interrupted") and the
        packages whose dpkg status is not a final one (C(half-installed), C(unpacked), C(half-configured),
        C(triggers-awaited), C(triggers-pending)), read from C(/var/lib/dpkg/status) as C(dpkg --audit) reports them.
      - rpm keeps no such state (a transaction either completes or leaves duplicate packages, which
        C(dnf check) reports), so on the RHEL family RV(package_work) is always empty.
    type: bool
    default: false
  max_content_bytes:
    description:
      - The most bytes read of each file in O(contents).
    type: int
    default: 65536
notes:
  - Checksums are SHA-1, as Ansible's own file modules compute them, and only of regular files up to 16 MiB.
seealso:
  - module: gpufleet.nvidia.config_file
"""

EXAMPLES = r"""
- name: Read what the driver role manages
  gpufleet.nvidia.host_state_info:
    packages: [nvidia-*, libnvidia-*, dkms]
    files: [/etc/modprobe.d/nvidia-gpufleet.conf, /etc/apt/preferences.d/nvidia-driver]
    contents: [/proc/driver/nvidia/version]
    units: [nvidia-persistenced]
    pci_devices_path: /sys/bus/pci/devices
  register: driver_state

- name: Show the held driver packages
  ansible.builtin.debug:
    msg: "{{ driver_state.packages | dict2items | selectattr('value.held') | map(attribute='key') | list }}"
"""

RETURN = r"""
package_manager:
  description:
    - The package database read, V(apt) (dpkg) or V(dnf) (rpm); V(none) when neither exists.
    - Where both exist, the one of the distribution family that C(/etc/os-release) names (C(ID), C(ID_LIKE)).
  returned: always
  type: str
packages:
  description:
    - Packages matching O(packages) that the package database knows, by name.
    - "C(installed): the package is installed (dpkg status C(installed), any rpm in the database).
      C(held): apt's selection is C(hold), or the name is in dnf's versionlock list.
      C(status): dpkg's status (C(installed), C(config-files), C(half-configured) ...) or C(installed) for rpm.
      C(version): the full version, with epoch where there is one."
  returned: always
  type: dict
  sample: {"nvidia-open": {"version": "570.195.03-1", "installed": true, "held": true, "status": "installed"}}
files:
  description:
    - Per path of O(files), C(exists), C(type) (V(file), V(directory), V(link), V(other)), C(mode) (four octal
      digits), C(owner), C(group), C(uid), C(gid), C(size), C(mtime), C(checksum) (SHA-1 of regular files) and
      C(target) (of links).
  returned: always
  type: dict
  sample: {"/etc/modprobe.d/nvidia-gpufleet.conf": {"exists": true, "type": "file", "mode": "0644", "owner": "root"}}
contents:
  description: Per path of O(contents), its text (undecodable bytes replaced), or V(null) when it does not exist.
  returned: always
  type: dict
truncated:
  description: Paths of O(contents) that were cut to O(max_content_bytes).
  returned: always
  type: list
  elements: str
units:
  description:
    - Per unit of O(units) (with its suffix), C(load_state) (V(not-found) when systemd does not know it),
      C(active_state), C(sub_state), C(unit_file_state), C(main_pid), C(fragment_path) and C(drop_in_paths).
    - Empty when the host does not run systemd.
  returned: always
  type: dict
globs:
  description: Per pattern of O(globs), the matching paths, sorted.
  returned: always
  type: dict
links:
  description: Per symbolic link matching O(links), its target.
  returned: always
  type: dict
  sample: {"/var/lib/dkms/nvidia/kernel-6.1.0-28-amd64-x86_64": "570.195.03/6.1.0-28-amd64/x86_64"}
keyrings:
  description:
    - Per keyring of O(keyrings), C(exists), C(armored) (text rather than binary), C(blocks) (armored blocks,
      V(0) for a binary file), C(fingerprints) (primary keys of every block, upper case, in file order, repeated
      when a key is) and C(error) (why they could not be read, or V(null)).
    - A repository key file holds exactly the pinned key when C(fingerprints) is that one fingerprint and
      C(blocks) is at most V(1).
  returned: always
  type: dict
pci_devices:
  description:
    - NVIDIA PCI functions under O(pci_devices_path), sorted by address, each with C(address), C(vendor), C(device),
      C(class) (hexadecimal strings as sysfs prints them) and C(kind) (V(gpu) for display controllers, V(nvswitch)
      for bridges of class 0x0680, V(other)).
  returned: always
  type: list
  elements: dict
secure_boot:
  description: V(true) or V(false) from the firmware variable; V(null) when not asked or not an EFI system.
  returned: always
  type: bool
kernels:
  description:
    - With O(kernels), the kernels that have an image in C(/boot), oldest first (numbers compared as numbers), each
      with C(release), C(image), C(initramfs) (its path or V(null)), C(initramfs_mtime), C(modules) (whether
      C(/lib/modules/<release>) exists), C(headers) (whether its C(build) tree exists), C(modules_dep) (whether
      depmod's index could be read) and C(nvidia_modules) (the NVIDIA core modules C(modules.dep) lists, such as
      C(updates/dkms/nvidia.ko) or Debian's C(updates/dkms/nvidia-current.ko)).
    - Empty without O(kernels).
  returned: always
  type: list
  elements: dict
boot_kernel:
  description:
    - With O(kernels), the release the bootloader starts by default, the newest in C(/boot) (GRUB's first entry on
      Debian and Ubuntu, the default BLS entry on EL); V(null) when C(/boot) has no kernel or O(kernels) is not set.
    - A GRUB_DEFAULT or saved entry the operator chose is not read.
  returned: always
  type: str
filesystems:
  description:
    - Per path of O(filesystems), C(path) (the existing path read), C(free_mib) (free to root, who installs
      packages, C(f_bfree)), C(available_mib) (free to other users, C(f_bavail)) and C(size_mib), in MiB rounded
      down; V(null) when the path could not be read.
  returned: always
  type: dict
  sample: {"/boot": {"path": "/boot", "free_mib": 812, "available_mib": 812, "size_mib": 973}}
package_work:
  description:
    - With O(package_work) on a dpkg host, C(interrupted) (whether dpkg's journal holds an interrupted run) and
      C(unfinished) (package name to its dpkg status, for every package not in a final state); V({}) otherwise.
  returned: always
  type: dict
  sample: {"interrupted": true, "unfinished": {"nvidia-kernel-dkms": "half-configured", "libcuda1": "unpacked"}}
now:
  description: The host's clock, in seconds since the epoch, for comparing RV(files) modification times.
  returned: always
  type: float
"""

import glob
import grp
import hashlib
import os
import pwd
import stat
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.gpufleet.nvidia.plugins.module_utils.kernels import boot_default, installed_kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.openpgp import read_key_file

MAX_CHECKSUM_BYTES = 16 * 1024 * 1024
MAX_KEYRING_BYTES = 1024 * 1024
SECURE_BOOT_VAR = '/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'
VERSIONLOCK_LIST = '/etc/dnf/plugins/versionlock.list'
UNIT_PROPERTIES = ('Id', 'LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'MainPID', 'FragmentPath',
                   'DropInPaths')
# Clean locale for every tool: field names and states are parsed.
LOCALE = {'LC_ALL': 'C', 'LANG': 'C'}


# os-release ID/ID_LIKE words of the two families (Ansible's pkg_mgr fact
# follows the distribution the same way).
RPM_FAMILY = frozenset(('rhel', 'centos', 'fedora', 'rocky', 'almalinux', 'ol', 'amzn', 'suse'))
DEB_FAMILY = frozenset(('debian', 'ubuntu'))


def _os_family_words(path='/etc/os-release'):
    words = set()
    try:
        with open(path) as handle:
            for line in handle:
                key, sep, value = line.strip().partition('=')
                if sep and key in ('ID', 'ID_LIKE'):
                    words.update(value.strip('"\'').lower().split())
    except (IOError, OSError, UnicodeDecodeError):
        pass
    return words


def _package_manager(os_release='/etc/os-release'):
    """The database of the host's own family: a host of one family may carry
    the other's tools (dpkg on an EL host, rpm on a Debian one)."""
    dpkg = os.path.exists('/var/lib/dpkg/status')
    rpm = os.path.isdir('/var/lib/rpm') or os.path.isdir('/usr/lib/sysimage/rpm')
    words = _os_family_words(os_release)
    if rpm and words & RPM_FAMILY and not words & DEB_FAMILY:
        return 'dnf'
    if dpkg:
        return 'apt'
    if rpm:
        return 'dnf'
    return 'none'


def _dpkg_packages(module, patterns):
    # One tab-separated line per known package; a pattern without a match is
    # reported on stderr with rc 1 while the others are still listed.
    fmt = '${Package}\\t${Version}\\t${db:Status-Want}\\t${db:Status-Status}\\n'
    rc, out, err = module.run_command(['dpkg-query', '-W', '-f=' + fmt, '--'] + patterns, environ_update=LOCALE)
    if rc not in (0, 1):
        module.fail_json(msg='dpkg-query failed: %s' % err.strip(), rc=rc)
    found = {}
    for line in out.splitlines():
        cells = line.split('\t')
        if len(cells) != 4 or not cells[0]:
            continue
        name, version, want, status = cells
        if status == 'not-installed' and not version:
            continue
        found[name] = {'version': version, 'installed': status == 'installed', 'held': want == 'hold',
                       'status': status}
    return found


def _versionlocked():
    names = set()
    try:
        with open(VERSIONLOCK_LIST) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return names
    for line in lines:
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        # "nvidia-driver-3:570.195.03-1.el9.*": the name is what precedes the epoch.
        names.add(line.lstrip('!').rsplit('-', 1)[0].rsplit(':', 1)[0].rsplit('-', 1)[0])
    return names


def _rpm_packages(module, patterns):
    fmt = '%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'
    rc, out, err = module.run_command(['rpm', '-qa', '--qf', fmt] + patterns, environ_update=LOCALE)
    if rc != 0:
        module.fail_json(msg='rpm -qa failed: %s' % err.strip(), rc=rc)
    locked = _versionlocked()
    found = {}
    for line in out.splitlines():
        cells = line.split('\t')
        if len(cells) != 2:
            continue
        version = cells[1][2:] if cells[1].startswith('0:') else cells[1]
        found[cells[0]] = {'version': version, 'installed': True, 'held': cells[0] in locked, 'status': 'installed'}
    return found


DPKG_DIR = '/var/lib/dpkg'
# dpkg's states a run leaves behind only when it was interrupted or a
# maintainer script failed ("installed", "config-files" and "not-installed"
# are final).
DPKG_UNFINISHED = frozenset(('half-installed', 'unpacked', 'half-configured', 'triggers-awaited',
                             'triggers-pending'))


def _dpkg_work(root=DPKG_DIR):
    """What an interrupted or failed dpkg run left: its journal and the packages in an unfinished state."""
    try:
        interrupted = any(name.isdigit() for name in os.listdir(os.path.join(root, 'updates')))
    except OSError:
        interrupted = False
    unfinished = {}
    name = None
    try:
        with open(os.path.join(root, 'status'), 'rb') as handle:
            for raw in handle:
                line = raw.decode('utf-8', 'replace')
                if line.startswith('Package: '):
                    name = line[9:].strip()
                elif line.startswith('Status: ') and name:
                    words = line.split()
                    if len(words) == 4 and words[3] in DPKG_UNFINISHED:
                        unfinished[name] = words[3]
                elif not line.strip():
                    name = None
    except OSError:
        pass
    return {'interrupted': interrupted, 'unfinished': unfinished}


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _sha1(path):
    digest = hashlib.sha1()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(65536), b''):
            digest.update(block)
    return digest.hexdigest()


def _file(path):
    try:
        st = os.lstat(path)
    except OSError:
        return {'exists': False}
    record = {'exists': True, 'mode': '%04o' % stat.S_IMODE(st.st_mode), 'uid': st.st_uid, 'gid': st.st_gid,
              'owner': _owner(st.st_uid), 'group': _group(st.st_gid), 'size': st.st_size, 'mtime': st.st_mtime}
    if stat.S_ISLNK(st.st_mode):
        record.update(type='link', target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        record['type'] = 'directory'
    elif stat.S_ISREG(st.st_mode):
        record['type'] = 'file'
        if st.st_size <= MAX_CHECKSUM_BYTES:
            try:
                record['checksum'] = _sha1(path)
            except (IOError, OSError):
                record['checksum'] = None
    else:
        record['type'] = 'other'
    return record


def _contents(paths, limit):
    texts, truncated = {}, []
    for path in paths:
        try:
            with open(path, 'rb') as handle:
                data = handle.read(limit + 1)
        except (IOError, OSError):
            texts[path] = None
            continue
        if len(data) > limit:
            data = data[:limit]
            truncated.append(path)
        texts[path] = to_text(data, errors='surrogate_then_replace')
    return texts, truncated


def _unit_name(name):
    return name if '.' in name.rsplit('@', 1)[-1] else name + '.service'


def _units(module, names):
    if not names or not os.path.isdir('/run/systemd/system'):
        return {}
    names = [_unit_name(n) for n in names]
    rc, out, err = module.run_command(
        ['systemctl', 'show', '--property=' + ','.join(UNIT_PROPERTIES), '--'] + names, environ_update=LOCALE)
    if rc != 0:
        module.fail_json(msg='systemctl show failed: %s' % err.strip(), rc=rc)
    # One block per unit, in the order asked, separated by blank lines.
    blocks = [b for b in out.split('\n\n') if b.strip()]
    units = {}
    for name, block in zip(names, blocks):
        props = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
        units[name] = {
            'load_state': props.get('LoadState', ''),
            'active_state': props.get('ActiveState', ''),
            'sub_state': props.get('SubState', ''),
            'unit_file_state': props.get('UnitFileState', ''),
            'main_pid': int(props.get('MainPID') or 0),
            'fragment_path': props.get('FragmentPath', ''),
            'drop_in_paths': props.get('DropInPaths', '').split(),
        }
    return units


def _keyrings(paths):
    found = {}
    for path in paths:
        try:
            with open(path, 'rb') as handle:
                # One byte more than the limit: a file cut at the limit could end
                # at a packet boundary and hide the keys after it.
                data = handle.read(MAX_KEYRING_BYTES + 1)
        except (IOError, OSError):
            found[path] = {'exists': os.path.exists(path), 'armored': False, 'blocks': 0, 'fingerprints': [],
                           'error': None}
            continue
        if len(data) > MAX_KEYRING_BYTES:
            found[path] = {'exists': True, 'armored': False, 'blocks': 0, 'fingerprints': [],
                           'error': 'larger than %d bytes, which no repository key file is' % MAX_KEYRING_BYTES}
            continue
        try:
            found[path] = dict(read_key_file(data), exists=True, error=None)
        except (ValueError, IndexError) as exc:
            found[path] = {'exists': True, 'armored': False, 'blocks': 0, 'fingerprints': [],
                           'error': 'not an OpenPGP public key: %s' % exc}
    return found


def _links(patterns):
    """Per glob pattern, the symbolic links it matches and their targets."""
    found = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            if os.path.islink(path):
                found[path] = os.readlink(path)
    return found


def _read_sysfs(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _pci_devices(root):
    devices = []
    if not root or not os.path.isdir(root):
        return devices
    for address in sorted(os.listdir(root)):
        base = os.path.join(root, address)
        if _read_sysfs(os.path.join(base, 'vendor')) != '0x10de':
            continue
        pci_class = _read_sysfs(os.path.join(base, 'class')) or ''
        kind = 'gpu' if pci_class.startswith('0x03') else ('nvswitch' if pci_class.startswith('0x0680') else 'other')
        devices.append({'address': address, 'vendor': '0x10de', 'device': _read_sysfs(os.path.join(base, 'device')),
                        'class': pci_class, 'kind': kind})
    return devices


def _secure_boot():
    try:
        with open(SECURE_BOOT_VAR, 'rb') as handle:
            data = handle.read()
    except (IOError, OSError):
        return None
    # Four bytes of variable attributes, then the one-byte value.
    return len(data) >= 5 and bytearray(data)[4] == 1


def _filesystem(path):
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        stats = os.statvfs(probe)
    except (IOError, OSError):
        return None
    mib = float(2 ** 20)
    return {'path': probe, 'free_mib': int(stats.f_bfree * stats.f_frsize / mib),
            'available_mib': int(stats.f_bavail * stats.f_frsize / mib),
            'size_mib': int(stats.f_blocks * stats.f_frsize / mib)}


def _globs(patterns):
    return dict((pattern, sorted(glob.glob(pattern))) for pattern in patterns)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type='list', elements='str', default=[]),
            files=dict(type='list', elements='path', default=[]),
            contents=dict(type='list', elements='path', default=[]),
            units=dict(type='list', elements='str', default=[]),
            globs=dict(type='list', elements='str', default=[]),
            links=dict(type='list', elements='str', default=[]),
            # Public keys only: nothing secret is read or returned.
            keyrings=dict(type='list', elements='path', default=[], no_log=False),
            pci_devices_path=dict(type='path', default=''),
            secure_boot=dict(type='bool', default=False),
            kernels=dict(type='bool', default=False),
            filesystems=dict(type='list', elements='path', default=[]),
            package_work=dict(type='bool', default=False),
            max_content_bytes=dict(type='int', default=65536),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['max_content_bytes'] < 1:
        module.fail_json(msg='max_content_bytes must be 1 or more; got %d' % params['max_content_bytes'])
    bad = [p for p in params['packages'] if not p or p.startswith('-')]
    if bad:
        module.fail_json(msg='packages must be package names or glob patterns; got %r' % bad[:5])

    manager = _package_manager()
    packages = {}
    if params['packages']:
        if manager == 'apt':
            packages = _dpkg_packages(module, params['packages'])
        elif manager == 'dnf':
            packages = _rpm_packages(module, params['packages'])
    contents, truncated = _contents(params['contents'], params['max_content_bytes'])
    kernels = installed_kernels() if params['kernels'] else []
    module.exit_json(
        changed=False,
        package_manager=manager,
        packages=packages,
        files=dict((path, _file(path)) for path in params['files']),
        contents=contents,
        truncated=truncated,
        units=_units(module, params['units']),
        globs=_globs(params['globs']),
        keyrings=_keyrings(params['keyrings']),
        links=_links(params['links']),
        pci_devices=_pci_devices(params['pci_devices_path']),
        secure_boot=_secure_boot() if params['secure_boot'] else None,
        kernels=kernels,
        filesystems=dict((path, _filesystem(path)) for path in params['filesystems']),
        boot_kernel=boot_default(kernels),
        package_work=_dpkg_work() if params['package_work'] and manager == 'apt' else {},
        now=time.time(),
    )


if __name__ == '__main__':
    main()
