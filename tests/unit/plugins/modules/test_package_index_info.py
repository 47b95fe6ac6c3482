# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.package_index_info against repositories on file:// and
with a scripted network (open_url replaced): index file choice, rpm repomd,
retries, and refusals."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import gzip
import io

import pytest

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

from ansible_collections.gpufleet.nvidia.plugins.modules import package_index_info
from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import set_module_args

DEB_INDEX = 'Package: nvidia-driver\nVersion: 580.82.07-1\n\nPackage: nvidia-driver\nVersion: 580.95.05-1\n\n'
REPOMD = (b'<repomd xmlns="http://linux.duke.edu/metadata/repo"><data type="primary">'
          b'<location href="repodata/p-primary.xml.gz"/></data></repomd>')
PRIMARY = (b'<metadata xmlns="http://linux.duke.edu/metadata/common"><package type="rpm"><name>nvidia-driver</name>'
           b'<version epoch="3" ver="580.95.05" rel="1.el9"/></package></metadata>')


def _main(module_exits, args, failure=False):
    exit_json, fail_json = module_exits
    with set_module_args(args):
        with pytest.raises(fail_json if failure else exit_json) as raised:
            package_index_info.main()
    return raised.value.result


def test_a_flat_apt_repository_on_file(tmp_path, module_exits):
    with gzip.open(str(tmp_path / 'Packages.gz'), 'wt') as handle:
        handle.write(DEB_INDEX)
    result = _main(module_exits, {'url': 'file://%s/' % tmp_path, 'packages': ['nvidia-driver', 'nvidia-open']})
    assert result['changed'] is False
    assert result['index_url'] == 'file://%s/Packages.gz' % tmp_path
    assert result['packages'] == {'nvidia-driver': ['580.95.05-1', '580.82.07-1'], 'nvidia-open': []}


class Network(object):
    """open_url replaced: url -> list of answers (bytes, or an exception), one per call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, url, **kwargs):
        self.calls.append(url)
        answer = self.answers[url].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return io.BytesIO(answer)


def _not_found(url):
    return HTTPError(url, 404, 'Not Found', {}, None)


@pytest.fixture
def network(monkeypatch):
    def install(answers):
        fake = Network(answers)
        monkeypatch.setattr(package_index_info, 'open_url', fake)
        monkeypatch.setattr(package_index_info.time, 'sleep', lambda seconds: None)
        return fake
    return install


def test_rpm_repodata_and_a_retried_download(network, module_exits):
    base = 'https://mirror.example/cuda/rhel9/x86_64'
    fake = network({base + '/repodata/repomd.xml': [URLError('timed out'), REPOMD],
                    base + '/repodata/p-primary.xml.gz': [gzip.compress(PRIMARY)]})
    result = _main(module_exits, {'url': base, 'format': 'rpm', 'packages': ['nvidia-driver']})
    assert result['packages'] == {'nvidia-driver': ['3:580.95.05-1.el9']}
    assert fake.calls == [base + '/repodata/repomd.xml'] * 2 + [base + '/repodata/p-primary.xml.gz']


def test_the_compressed_indexes_come_first_and_a_missing_one_is_skipped(network, module_exits):
    base = 'http://127.0.0.1:8765/cuda'
    fake = network({base + '/Packages.xz': [_not_found(base + '/Packages.xz')],
                    base + '/Packages.gz': [gzip.compress(DEB_INDEX.encode())]})
    result = _main(module_exits, {'url': base, 'packages': ['nvidia-driver']})
    assert result['index_url'] == base + '/Packages.gz'
    assert fake.calls == [base + '/Packages.xz', base + '/Packages.gz']


def test_a_network_that_stays_down_fails_after_the_retries(network, module_exits):
    base = 'http://mirror.example/cuda'
    network({base + '/Packages.xz': [URLError('connection refused')] * 3})
    result = _main(module_exits, {'url': base, 'packages': ['x'], 'retries': 2}, failure=True)
    assert 'after 3 attempt(s)' in result['msg'] and 'connection refused' in result['msg']


def test_no_index_at_all(network, module_exits):
    base = 'http://mirror.example/not-a-repository'
    network(dict((base + '/' + name, [_not_found(base + '/' + name)]) for name in ('Packages.xz', 'Packages.gz', 'Packages')))
    result = _main(module_exits, {'url': base, 'packages': ['x']}, failure=True)
    assert 'has no package index' in result['msg']


@pytest.mark.parametrize('args, words', [
    ({'url': 'ftp://mirror.example/cuda', 'packages': ['x']}, 'url must be an http://'),
    ({'url': 'http://mirror.example/cuda', 'packages': []}, 'packages must name'),
    ({'url': 'http://mirror.example/cuda', 'packages': ['x'], 'timeout': 0}, 'timeout must be between'),
    ({'url': 'http://mirror.example/cuda', 'packages': ['x'], 'retries': 11}, 'retries must be between'),
])
def test_refusals_name_the_parameter(module_exits, args, words):
    assert words in _main(module_exits, args, failure=True)['msg']


def test_a_huge_url_is_cut_in_the_message(module_exits):
    result = _main(module_exits, {'url': 'x' * 100000, 'packages': ['x']}, failure=True)
    assert len(result['msg']) < 200
