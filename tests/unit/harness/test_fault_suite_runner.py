# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fault suite's runner ends an interrupted run that does not end by itself.

molecule/faults/tests/faults.py sends SIGINT to ansible-playbook at a task's
banner, as a Ctrl-C would. In one CI run the interrupted ansible-playbook did not
end and the 1500 s watchdog ended it (inferred from the timing), 25 minutes of
CI. playbook() gives an interrupted run INTERRUPT_GRACE seconds, then kills it
and says so in its log.
Here a stand-in for ansible-playbook prints a task banner and ignores SIGINT.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import signal
import stat
import sys

from conftest import REPO_ROOT, load_file

STUBBORN = '''#!%s
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("TASK [gpufleet.nvidia.container_toolkit : Configure the NVIDIA runtime] ****", flush=True)
time.sleep(120)
'''


def _faults(tmp_path, monkeypatch):
    monkeypatch.setenv('MOLECULE_EPHEMERAL_DIRECTORY', str(tmp_path))
    path = os.path.join(REPO_ROOT, 'molecule', 'faults', 'tests', 'faults.py')
    module = load_file(path, 'fault_suite_runner')
    stub = tmp_path / 'ansible-playbook'
    stub.write_text(STUBBORN % sys.executable)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    module.PLAYBOOK_BIN = str(stub)
    module.INTERRUPT_GRACE = 2
    return module


def test_an_interrupted_run_that_hangs_is_killed_after_the_grace(tmp_path, monkeypatch):
    faults = _faults(tmp_path, monkeypatch)
    run = faults.playbook('hangs-on-sigint', 'site.yml',
                          kill=(r'container_toolkit : Configure the NVIDIA runtime$', signal.SIGINT, 0),
                          timeout=60)
    assert run.killed and not run.timed_out
    assert run.rc == -signal.SIGKILL
    assert run.elapsed < 30
    with open(run.log) as handle:
        log = handle.read()
    assert '#### faults: sending SIGINT to the run' in log
    assert 'did not end within 2 s of the interrupt; sending SIGKILL' in log
