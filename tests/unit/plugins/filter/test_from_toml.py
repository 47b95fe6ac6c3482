# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The from_toml filter on the configuration files the roles read."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.from_toml import FilterModule

from_toml = FilterModule().filters()['from_toml']

CONTAINERD = '''
version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
'''


def test_containerd_config_with_quoted_dotted_tables():
    doc = from_toml(CONTAINERD)
    assert doc['version'] == 2
    assert doc['imports'] == ['/etc/containerd/conf.d/*.toml']
    cri = doc['plugins']['io.containerd.grpc.v1.cri']['containerd']
    assert cri['default_runtime_name'] == 'runc'
    assert cri['runtimes']['runc']['options'] == {'SystemdCgroup': True}


def test_dates_become_text_so_that_the_result_serialises():
    doc = from_toml('when = 2025-07-17T10:00:00Z\nday = 2025-07-17\n')
    assert doc == {'when': '2025-07-17T10:00:00+00:00', 'day': '2025-07-17'}
    json.dumps(doc)


@pytest.mark.parametrize('text', ['', '\n', '# only a comment\n'])
def test_an_empty_document_is_an_empty_dict(text):
    assert from_toml(text) == {}


@pytest.mark.parametrize('text', ['[plugins', 'a = ', 'a = 1\na = 2\n', '{"json": true}'])
def test_invalid_toml_fails_with_the_parser_message(text):
    with pytest.raises(AnsibleFilterError, match='not valid TOML'):
        from_toml(text)
