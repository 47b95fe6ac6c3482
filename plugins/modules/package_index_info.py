#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: package_index_info
short_description: Read which versions of some packages a repository offers, from its index, without configuring it
version_added: 0.3.0
author: gpufleet maintainers (@gpufleet)
description:
  - Downloads the package index of one repository directory straight from the host (an apt C(Packages.xz),
    C(Packages.gz) or C(Packages) file of a flat repository such as NVIDIA's CUDA and Container Toolkit
    repositories, or an rpm C(repodata/repomd.xml) and the primary list it names) and returns the versions it
    offers of the packages named, newest first.
  - For a package the index does not have, it also returns the index's names that look like it (O(similar)), so that
    a role can say what the repository offers instead of a name it does not carry.
  - Nothing is written on the host, no package manager runs and no repository is configured, so a role can check,
    before its first change, that a requested driver branch or package version exists in the repository it is
    about to configure.
  - The index is not verified against the repository's signature; the answer only decides whether to go on. What
    is installed later still comes through the package manager, which checks the signature.
  - Network errors are retried O(retries) times, O(delay) seconds apart; each download is bounded by O(timeout).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.INFO_MODULE
options:
  url:
    description:
      - The repository directory (C(http://), C(https://) or C(file://)), the one an apt source line names with
        the suite C(/) or a dnf C(baseurl).
    type: str
    required: true
  format:
    description: V(deb) for an apt repository, V(rpm) for a dnf/yum one.
    type: str
    choices: [deb, rpm]
    default: deb
  packages:
    description: Package names whose versions are returned; names the index does not have get an empty list.
    type: list
    elements: str
    required: true
  similar:
    description:
      - Return, in RV(similar), up to five names of the index that look like each package it does not have (a
        misspelt name, or the same package for another release, such as C(cuda-toolkit-12-8) for C(cuda-toolkit-12-9)).
    type: bool
    default: true
  timeout:
    description: Seconds each download may take.
    type: int
    default: 30
  retries:
    description: How many times a failed download is tried again.
    type: int
    default: 2
  delay:
    description: Seconds between two tries.
    type: int
    default: 5
  validate_certs:
    description: Check the server's TLS certificate.
    type: bool
    default: true
seealso:
  - module: ansible.builtin.uri
"""

EXAMPLES = r"""
- name: Check that the repository offers driver branch 580 before configuring it
  gpufleet.nvidia.package_index_info:
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
    packages: [nvidia-driver]
  register: cuda_index

- name: Stop when it does not
  ansible.builtin.assert:
    that: cuda_index.packages['nvidia-driver'] | select('match', '^([0-9]+:)?580[.]') | list | length > 0
"""

RETURN = r"""
packages:
  description: Per package asked for, the versions the index lists (with epoch and revision), newest first.
  returned: success
  type: dict
  sample: {"nvidia-driver": ["580.95.05-1", "580.82.07-1", "570.195.03-1"]}
similar:
  description:
    - Per package asked for that the index does not have, the index's names that look like it, most alike first
      (empty when none does). Only with O(similar).
  returned: success
  type: dict
  sample: {"nvidia-drvier-cuda": ["nvidia-driver-cuda", "nvidia-driver"]}
index_url:
  description: The index file that was read.
  returned: success
  type: str
  sample: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/Packages.gz
"""

import errno
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils.package_index import (
    DEB_INDEX_NAMES, PackageIndexError, close_names, decompress, deb_index, newest_first, repomd_primary_location,
    rpm_index)

# An index larger than this is not a package index (NVIDIA's biggest, CUDA's, is a few MiB compressed).
MAX_INDEX_BYTES = 256 * 1024 * 1024


class NotFound(Exception):
    """The server answered that the file does not exist (HTTP 404 or 410, or no such local file)."""


def _not_found(exc):
    if getattr(exc, 'code', None) in (404, 410):
        return True
    # file:// URLs: urllib wraps the missing file's OSError in a URLError.
    reason = getattr(exc, 'reason', exc)
    return isinstance(reason, (IOError, OSError)) and getattr(reason, 'errno', None) == errno.ENOENT


class IndexReader(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.base = self.params['url'].rstrip('/')

    def download(self, url):
        """The bytes at url; NotFound when there is none, after the retries for every other failure."""
        attempts = self.params['retries'] + 1
        for attempt in range(1, attempts + 1):
            try:
                response = open_url(url, timeout=self.params['timeout'],
                                    validate_certs=self.params['validate_certs'], http_agent='gpufleet-nvidia')
                data = response.read(MAX_INDEX_BYTES + 1)
                if len(data) > MAX_INDEX_BYTES:
                    self.module.fail_json(msg='%s is larger than %d bytes: not a package index' % (url, MAX_INDEX_BYTES),
                                          url=url)
                return data
            except Exception as exc:  # pylint: disable=broad-except
                if _not_found(exc):
                    raise NotFound(url)
                if attempt == attempts:
                    reason = to_native(exc)
                    self.module.fail_json(
                        msg='Cannot read %s after %d attempt(s): %s. Check that the host reaches the repository '
                            '(url) and that it is a %s repository.' % (url, attempts, reason, self.params['format']),
                        url=url, attempts=attempts)
                time.sleep(self.params['delay'])
        return None  # not reached

    def deb(self):
        for name in DEB_INDEX_NAMES:
            url = '%s/%s' % (self.base, name)
            try:
                data = self.download(url)
            except NotFound:
                continue
            return (url,) + deb_index(to_text(decompress(name, data), errors='surrogate_or_replace'),
                                      self.params['packages'])
        self.module.fail_json(msg='%s has no package index (%s): url must be the directory of a flat apt repository '
                                  '(what a source line names with the suite "/")'
                                  % (self.base, ', '.join(DEB_INDEX_NAMES)), url=self.base)
        return None  # not reached

    def rpm(self):
        repomd = '%s/repodata/repomd.xml' % self.base
        try:
            location = repomd_primary_location(self.download(repomd))
        except NotFound:
            self.module.fail_json(msg='%s does not exist: url must be the baseurl of an rpm repository' % repomd,
                                  url=repomd)
        url = '%s/%s' % (self.base, location.lstrip('/'))
        try:
            data = self.download(url)
        except NotFound:
            self.module.fail_json(msg='%s names %s, which does not exist' % (repomd, url), url=url)
        return (url,) + rpm_index(decompress(location, data), self.params['packages'])

    def read(self):
        try:
            index_url, found, every = self.deb() if self.params['format'] == 'deb' else self.rpm()
        except PackageIndexError as exc:
            self.module.fail_json(msg=to_native(exc), url=self.base)
        result = dict(index_url=index_url,
                      packages=dict((name, newest_first(versions)) for name, versions in found.items()))
        if self.params['similar']:
            result['similar'] = dict((name, close_names(name, every)) for name in found if name not in every)
        return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            format=dict(type='str', choices=['deb', 'rpm'], default='deb'),
            packages=dict(type='list', elements='str', required=True),
            similar=dict(type='bool', default=True),
            timeout=dict(type='int', default=30),
            retries=dict(type='int', default=2),
            delay=dict(type='int', default=5),
            validate_certs=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not params['url'].startswith(('http://', 'https://', 'file://')):
        module.fail_json(msg='url must be an http://, https:// or file:// URL, got %r' % params['url'][:60])
    if not params['packages'] or not all(name.strip() for name in params['packages']):
        module.fail_json(msg='packages must name at least one package, and no empty name')
    for name, low, high in (('timeout', 1, 3600), ('retries', 0, 10), ('delay', 0, 300)):
        if not low <= params[name] <= high:
            module.fail_json(msg='%s must be between %d and %d, got %d' % (name, low, high, params[name]))
    module.exit_json(changed=False, **IndexReader(module).read())


if __name__ == '__main__':
    main()
