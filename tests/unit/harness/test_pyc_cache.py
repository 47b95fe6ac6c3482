# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The test hosts' bytecode cache for module payloads changes what is compiled, not what runs.

tests/harness/pyc_cache/gpufleet_test_pyc_cache.py replaces zipimport's
compile on Molecule's hosts. Each test runs a fresh interpreter that imports
it (as the .pth does at start) with the cache in a temporary directory, then
imports a module from a zip as Ansible's payload wrapper does.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys
import zipfile

from conftest import REPO_ROOT

CACHE_MODULE = os.path.join(REPO_ROOT, 'tests', 'harness', 'pyc_cache')
SOURCE = '''
import sys
VALUE = 41

def answer():
    return VALUE + 1

class Broken:
    def fail(self):
        raise RuntimeError('from the payload')
'''
PROBE = '''
import json, sys, traceback
sys.path.insert(0, %(cache_module)r)
import gpufleet_test_pyc_cache
gpufleet_test_pyc_cache.CACHE_DIR = %(cache)r
sys.path.insert(0, %(zip)r)
import payload_module
try:
    payload_module.Broken().fail()
except RuntimeError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({'answer': payload_module.answer(), 'file': payload_module.__file__, 'where': where,
                  'code_file': payload_module.answer.__code__.co_filename}))
'''


def _payload(directory, name):
    path = os.path.join(directory, name)
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('payload_module.py', SOURCE)
    return path


def _probe(zip_path, cache):
    proc = subprocess.run([sys.executable, '-c', PROBE % {'cache_module': CACHE_MODULE, 'cache': cache, 'zip': zip_path}],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _cached(cache):
    return [os.path.join(root, name) for root, _dirs, names in os.walk(cache) for name in names]


def test_the_second_import_uses_the_cache_and_reads_the_same(tmp_path):
    cache = str(tmp_path / 'cache')
    first = _probe(_payload(str(tmp_path), 'one.zip'), cache)
    entries = _cached(cache)
    assert len(entries) == 1 and sys.implementation.cache_tag in entries[0]
    # Another payload directory, as every module execution has: the cached code, with this zip's file name.
    other = str(tmp_path / 'other')
    os.mkdir(other)
    second = _probe(_payload(other, 'two.zip'), cache)
    assert _cached(cache) == entries
    assert first['answer'] == second['answer'] == 42
    for result, zip_name in ((first, 'one.zip'), (second, 'two.zip')):
        assert result['where'] == result['code_file'] == result['file']
        assert result['file'].endswith(os.path.join(zip_name, 'payload_module.py'))
    assert other in second['where']


def test_changed_source_is_compiled_again(tmp_path):
    cache = str(tmp_path / 'cache')
    _probe(_payload(str(tmp_path), 'one.zip'), cache)
    changed = str(tmp_path / 'changed')
    os.mkdir(changed)
    path = os.path.join(changed, 'three.zip')
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('payload_module.py', SOURCE.replace('VALUE = 41', 'VALUE = 1'))
    assert _probe(path, cache)['answer'] == 2
    assert len(_cached(cache)) == 2


def test_an_unusable_cache_falls_back_to_compiling(tmp_path):
    blocked = tmp_path / 'not-a-directory'
    blocked.write_text('a file where the cache directory would be')
    assert _probe(_payload(str(tmp_path), 'one.zip'), str(blocked))['answer'] == 42
    corrupt = tmp_path / 'cache'
    _probe(_payload(str(tmp_path), 'two.zip'), str(corrupt))
    for entry in _cached(str(corrupt)):
        with open(entry, 'wb') as handle:
            handle.write(b'not marshalled code')
    assert _probe(_payload(str(tmp_path), 'three.zip'), str(corrupt))['answer'] == 42
