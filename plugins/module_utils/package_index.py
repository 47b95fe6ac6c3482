# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Package indexes read straight from a repository: an apt ``Packages`` file
(plain, gzip or xz) and an rpm ``repodata/repomd.xml`` with its primary list.

Pure functions over bytes, so that the module that downloads them
(plugins/modules/package_index_info.py) stays small and these are tested
without a network. Versions compare as dpkg compares them (epoch, upstream,
revision; ``~`` before anything), which also orders NVIDIA's rpm versions.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import bz2
import difflib
import gzip
import io
import lzma
import re
import xml.etree.ElementTree as ET

REPO_NS = '{http://linux.duke.edu/metadata/repo}'
COMMON_NS = '{http://linux.duke.edu/metadata/common}'

# apt tries the compressed indexes first, as apt itself prefers them.
DEB_INDEX_NAMES = ('Packages.xz', 'Packages.gz', 'Packages')


class PackageIndexError(Exception):
    """An index that cannot be read: not compressed as its name says, not the format expected."""


def decompress(name, data):
    """The bytes of an index file, decompressed by its name's suffix."""
    try:
        if name.endswith('.gz'):
            return gzip.GzipFile(fileobj=io.BytesIO(data)).read()
        if name.endswith('.xz'):
            return lzma.decompress(data)
        if name.endswith('.bz2'):
            return bz2.decompress(data)
    except (IOError, OSError, EOFError, lzma.LZMAError, ValueError) as exc:
        raise PackageIndexError('%s does not decompress: %s' % (name, exc))
    if name.endswith('.zst'):
        raise PackageIndexError('%s is compressed with zstd, which Python cannot read without a library; '
                                'publish a .gz or .xz primary index as well' % name)
    return data


def deb_index(text, names):
    """({name: [versions]} for the names asked for, every package name) of the text of an apt Packages index."""
    wanted = set(names)
    found = dict((name, []) for name in names)
    every = set()
    package = version = None
    for line in text.splitlines() + ['']:
        if not line.strip():
            if package in wanted and version:
                found[package].append(version)
            package = version = None
        elif line.startswith('Package:'):
            package = line.split(':', 1)[1].strip()
            every.add(package)
        elif line.startswith('Version:'):
            version = line.split(':', 1)[1].strip()
    return found, every


def deb_versions(text, names):
    """{name: [versions]} from the text of an apt Packages index, for the names asked for."""
    return deb_index(text, names)[0]


def repomd_primary_location(data):
    """The href of the primary package list named by repodata/repomd.xml."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise PackageIndexError('repomd.xml does not parse: %s' % exc)
    for entry in root.findall(REPO_NS + 'data'):
        if entry.get('type') == 'primary':
            location = entry.find(REPO_NS + 'location')
            if location is not None and location.get('href'):
                return location.get('href')
    raise PackageIndexError('repomd.xml names no primary package list')


def rpm_index(data, names):
    """({name: [versions]} for the names asked for, every package name) of a primary.xml package list
    (versions "epoch:version-release", epoch 0 left out)."""
    wanted = set(names)
    found = dict((name, []) for name in names)
    every = set()
    try:
        for _event, element in ET.iterparse(io.BytesIO(data)):
            if element.tag != COMMON_NS + 'package':
                continue
            name = element.findtext(COMMON_NS + 'name')
            ver = element.find(COMMON_NS + 'version')
            if name:
                every.add(name)
            if name in wanted and ver is not None:
                epoch = ver.get('epoch') or '0'
                text = '%s-%s' % (ver.get('ver'), ver.get('rel'))
                found[name].append(text if epoch == '0' else '%s:%s' % (epoch, text))
            element.clear()
    except ET.ParseError as exc:
        raise PackageIndexError('the primary package list does not parse: %s' % exc)
    return found, every


def rpm_versions(data, names):
    """{name: [versions]} from a primary.xml package list ("epoch:version-release", epoch 0 left out)."""
    return rpm_index(data, names)[0]


def close_names(name, every, limit=5):
    """Names of an index that look like name, most alike first: what a typo
    meant ("nvidia-drvier-cuda"), or the same package for another release
    ("cuda-toolkit-12-9" -> "cuda-toolkit-12-8"), so that a refusal can say
    what the repository has instead."""
    every = sorted(every)
    close = difflib.get_close_matches(name, every, n=limit, cutoff=0.75)
    # The name without its trailing version ("cuda-toolkit-12-9" -> "cuda-toolkit-"):
    # its siblings are close even when the versions differ in every digit.
    stem = re.sub(r'[0-9][0-9.-]*$', '', name)
    if len(stem) >= 4 and stem != name:
        close += [other for other in every if other.startswith(stem) and other not in close
                  and re.match(r'^[0-9][0-9.-]*$', other[len(stem):])]
    return close[:limit]


def _order(char):
    if char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    if char == '~':
        return -1
    return ord(char) + 256 if char else 0


def _compare_part(a, b):
    """dpkg's verrevcmp: runs of non-digits by character order, runs of digits as numbers."""
    while a or b:
        while (a and not a[0].isdigit()) or (b and not b[0].isdigit()):
            first = _order(a[0]) if a else 0
            second = _order(b[0]) if b else 0
            if first != second:
                return -1 if first < second else 1
            a, b = a[1:], b[1:]
        digits_a = re.match(r'\d*', a).group(0)
        digits_b = re.match(r'\d*', b).group(0)
        if int(digits_a or 0) != int(digits_b or 0):
            return -1 if int(digits_a or 0) < int(digits_b or 0) else 1
        a, b = a[len(digits_a):], b[len(digits_b):]
    return 0


def split_version(version):
    """(epoch, upstream, revision) of a package version."""
    epoch, _sep, rest = version.rpartition(':') if ':' in version else ('0', '', version)
    upstream, _sep, revision = rest.rpartition('-') if '-' in rest else (rest, '', '')
    return int(epoch) if epoch.isdigit() else 0, upstream, revision


def compare_versions(a, b):
    """-1, 0 or 1 as package version a sorts before, with or after b."""
    first, second = split_version(a), split_version(b)
    if first[0] != second[0]:
        return -1 if first[0] < second[0] else 1
    return _compare_part(first[1], second[1]) or _compare_part(first[2], second[2])


def newest_first(versions):
    """The distinct versions, newest first."""
    ordered = []
    for version in versions:
        if version in ordered:
            continue
        position = 0
        while position < len(ordered) and compare_versions(ordered[position], version) > 0:
            position += 1
        ordered.insert(position, version)
    return ordered
