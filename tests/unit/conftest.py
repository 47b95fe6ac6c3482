# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Make ``ansible_collections.gpufleet.nvidia`` importable from this checkout.

The collection root is the repository root, but Python needs it at
``<dir>/ansible_collections/gpufleet/nvidia``. When the checkout already lives
at such a path (ansible-test copies it there) nothing is done; otherwise a
temporary tree with a symlink to the repository root is put on ``sys.path``
before any test module imports the collection.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import atexit
import os
import shutil
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _collections_root():
    parts = REPO_ROOT.split(os.sep)
    if len(parts) >= 3 and parts[-3:-1] == ['ansible_collections', 'gpufleet'] and parts[-1] == 'nvidia':
        return os.sep.join(parts[:-3])
    tmp = tempfile.mkdtemp(prefix='gpufleet-nvidia-collections-')
    atexit.register(shutil.rmtree, tmp, True)
    namespace_dir = os.path.join(tmp, 'ansible_collections', 'gpufleet')
    os.makedirs(namespace_dir)
    os.symlink(REPO_ROOT, os.path.join(namespace_dir, 'nvidia'))
    return tmp


COLLECTIONS_ROOT = _collections_root()
if COLLECTIONS_ROOT not in sys.path:
    sys.path.insert(0, COLLECTIONS_ROOT)

# Ansible's collection loader, once installed by something else in the
# session, only resolves collections on its configured paths.
os.environ.setdefault('ANSIBLE_COLLECTIONS_PATH', COLLECTIONS_ROOT)

# For the test modules in this directory (from conftest import load_file).
from ansible_collections.gpufleet.nvidia.tests.unit.loading import load_module as load_file  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import


@pytest.fixture
def module_exits(monkeypatch):
    """Patch ``AnsibleModule.exit_json``/``fail_json`` to raise; returns the two exception classes."""
    from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import patch_exits
    return patch_exits(monkeypatch)


# Closing lines a test wants in the run's output ("bad inputs: N passed, N
# failed", the systemd-analyze scores). A test records them with
# record_property('gpufleet_summary', line); they are printed at the end on
# the controller, because what a pytest-xdist worker prints never reaches it.
_SUMMARY_LINES = []


def pytest_runtest_logreport(report):
    if report.when == 'call':
        _SUMMARY_LINES.extend(value for key, value in report.user_properties if key == 'gpufleet_summary')


def pytest_terminal_summary(terminalreporter):
    for line in sorted(_SUMMARY_LINES):
        terminalreporter.write_line(line)
