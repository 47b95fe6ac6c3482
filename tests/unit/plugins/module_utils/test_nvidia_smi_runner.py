# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import nvidia_smi_runner as runner


class Failed(Exception):
    pass


class FakeModule(object):
    """The parts of AnsibleModule the runner uses, recording every call."""

    def __init__(self, results=None, params=None, binaries=None):
        self.params = params if params is not None else {'nvidia_smi_path': None, 'timeout': 30}
        self.binaries = binaries if binaries is not None else {'nvidia-smi': '/usr/bin/nvidia-smi',
                                                               'timeout': '/usr/bin/timeout'}
        self.results = list(results or [])
        self.calls = []
        self.warnings = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.binaries.get(name)

    def run_command(self, args, **kwargs):
        self.calls.append((args, kwargs))
        return self.results.pop(0)

    def warn(self, msg):
        self.warnings.append(msg)

    def fail_json(self, msg, **kwargs):
        kwargs['msg'] = msg
        raise Failed(kwargs)


def test_runs_argv_bounded_by_coreutils_timeout_in_the_c_locale():
    module = FakeModule([(0, 'out', '')])
    assert runner.run_nvidia_smi(module, ['-q', '-x']) == (0, 'out', '')
    args, kwargs = module.calls[0]
    assert args == ['/usr/bin/timeout', '--kill-after=5', '30', '/usr/bin/nvidia-smi', '-q', '-x']
    assert kwargs['environ_update'] == {'LC_ALL': 'C', 'LANG': 'C'}
    assert 'use_unsafe_shell' not in kwargs


def test_explicit_timeout_and_binary_win_over_module_params(tmp_path):
    binary = tmp_path / 'nvidia-smi'
    binary.write_text('')
    module = FakeModule([(0, '', '')], params={'nvidia_smi_path': '/opt/a/nvidia-smi', 'timeout': 30})
    runner.run_nvidia_smi(module, ['-L'], timeout=5, binary=str(binary))
    assert module.calls[0][0] == ['/usr/bin/timeout', '--kill-after=5', '5', str(binary), '-L']


def test_nvidia_smi_path_parameter_is_used(tmp_path):
    binary = tmp_path / 'nvidia-smi'
    binary.write_text('')
    module = FakeModule([(0, '', '')], params={'nvidia_smi_path': str(binary), 'timeout': 7})
    runner.run_nvidia_smi(module, ['-L'])
    assert module.calls[0][0] == ['/usr/bin/timeout', '--kill-after=5', '7', str(binary), '-L']


def test_missing_binary_is_rc_127_without_running_anything():
    module = FakeModule(binaries={'timeout': '/usr/bin/timeout'})
    rc, stdout, stderr = runner.run_nvidia_smi(module, ['-L'])
    assert (rc, stdout) == (127, '')
    assert 'not found' in stderr
    assert module.calls == []


def test_configured_path_that_does_not_exist_is_rc_127(tmp_path):
    module = FakeModule(params={'nvidia_smi_path': str(tmp_path / 'nvidia-smi'), 'timeout': 30})
    rc, _stdout, stderr = runner.run_nvidia_smi(module, ['-L'])
    assert rc == 127
    assert 'No such file or directory' in stderr
    assert module.calls == []


def test_timeout_exit_124_is_reported_as_timeout():
    module = FakeModule([(124, '', '')])
    rc, _stdout, stderr = runner.run_nvidia_smi(module, ['-q', '-x'], timeout=2)
    assert rc == 124
    assert stderr == 'nvidia-smi timed out after 2 seconds'


def test_sigkill_after_the_grace_period_is_a_timeout(monkeypatch):
    clock = iter([100.0, 135.5])
    monkeypatch.setattr(runner.time, 'monotonic', lambda: next(clock))
    module = FakeModule([(137, '', '')])
    rc, _stdout, stderr = runner.run_nvidia_smi(module, ['-q', '-x'], timeout=30)
    assert rc == 124
    assert 'timed out after 30 seconds' in stderr


def test_a_call_that_ignores_sigterm_is_a_timeout(monkeypatch):
    # nvidia-smi stuck in the driver ignores SIGTERM; timeout's SIGKILL to its
    # process group after the grace period ends timeout too: run_command says -9.
    clock = iter([100.0, 135.5])
    monkeypatch.setattr(runner.time, 'monotonic', lambda: next(clock))
    module = FakeModule([(-9, '', '')])
    rc, _stdout, stderr = runner.run_nvidia_smi(module, ['-q', '-x'], timeout=30)
    assert rc == 124
    assert 'timed out after 30 seconds' in stderr


def test_early_sigkill_is_not_mistaken_for_a_timeout(monkeypatch):
    clock = iter([100.0, 100.2])
    monkeypatch.setattr(runner.time, 'monotonic', lambda: next(clock))
    module = FakeModule([(137, '', 'Killed')])
    assert runner.run_nvidia_smi(module, ['-q', '-x'], timeout=30) == (137, '', 'Killed')


def test_without_coreutils_timeout_it_warns_and_runs_unbounded():
    module = FakeModule([(0, '', '')], binaries={'nvidia-smi': '/usr/bin/nvidia-smi'})
    runner.run_nvidia_smi(module, ['-L'])
    assert module.calls[0][0] == ['/usr/bin/nvidia-smi', '-L']
    assert len(module.warnings) == 1


@pytest.mark.parametrize('timeout', [0, -3])
def test_non_positive_timeout_fails(timeout):
    with pytest.raises(Failed):
        runner.run_nvidia_smi(FakeModule(), ['-L'], timeout=timeout)


def test_check_rc_fails_with_the_classified_reason():
    module = FakeModule([(9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", '')])
    with pytest.raises(Failed) as failed:
        runner.run_nvidia_smi(module, ['-L'], check_rc=True)
    result = failed.value.args[0]
    assert result['reason'] == 'driver_not_loaded'
    assert result['rc'] == 9
    assert result['cmd'] == '/usr/bin/nvidia-smi -L'
    assert 'modprobe' in result['msg']


def test_check_rc_on_a_missing_binary_fails_as_not_installed():
    module = FakeModule(binaries={})
    with pytest.raises(Failed) as failed:
        runner.run_nvidia_smi(module, ['-L'], check_rc=True)
    assert failed.value.args[0]['reason'] == 'not_installed'


def test_fail_from_result_passes_extra_keys_and_quotes_the_command():
    with pytest.raises(Failed) as failed:
        runner.fail_from_result(FakeModule(), 4, 'Failed to initialize NVML: Insufficient Permissions', '',
                                ['nvidia-smi', '-i', '0', '-pm', '1'], gpu='0')
    result = failed.value.args[0]
    assert result['reason'] == 'insufficient_permissions'
    assert result['cmd'] == 'nvidia-smi -i 0 -pm 1'
    assert result['gpu'] == '0'


def test_fail_from_result_on_rc_0_still_fails_with_a_reason():
    with pytest.raises(Failed) as failed:
        runner.fail_from_result(FakeModule(), 0, 'garbage', '', 'nvidia-smi -L')
    assert failed.value.args[0]['reason'] == 'unknown'
