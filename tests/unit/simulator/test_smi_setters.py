# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi setters: real messages and exit codes, state changes, idempotence."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest


def query(host, fields, gpu=None):
    args = ['--query-gpu=' + fields, '--format=csv,noheader,nounits']
    if gpu is not None:
        args = ['-i', str(gpu)] + args
    result = host.smi(*args)
    assert result.returncode == 0, result.stdout
    return [line.split(', ') for line in result.stdout.splitlines()]


def assert_repeat_is_noop(host, *args):
    """A second identical call prints the same kind of answer and leaves the state alone."""
    before = host.state()
    again = host.smi(*args)
    assert again.returncode == 0, again.stdout
    assert host.state() == before
    return again


def test_persistence_mode_enable_then_repeat(sim_root):
    host = sim_root('l40s_2gpu', driver='570.195.03')
    first = host.smi('-i', '0', '-pm', '1')
    assert (first.returncode, first.stdout) == (0, 'Enabled persistence mode for GPU 00000000:4A:00.0.\nAll done.\n')
    again = assert_repeat_is_noop(host, '-i', '0', '-pm', 'ENABLED')
    assert again.stdout == 'Persistence mode is already Enabled for GPU 00000000:4A:00.0.\nAll done.\n'
    assert query(host, 'persistence_mode') == [['Enabled'], ['Disabled']]


def test_persistence_mode_wording_of_r580(sim_root):
    host = sim_root('l40s_2gpu', driver='580.95.05')
    result = host.smi('-pm', '1')
    assert result.stdout == ('Enabled Legacy persistence mode for GPU 00000000:4A:00.0.\n'
                             'Enabled Legacy persistence mode for GPU 00000000:CA:00.0.\nAll done.\n')
    disabled = host.smi('-i', '1', '-pm', '0')
    assert disabled.stdout == 'Disabled Legacy persistence mode for GPU 00000000:CA:00.0.\nAll done.\n'


def test_persistence_follows_running_daemon_unless_set_explicitly(sim_root):
    import os
    host = sim_root('l40s_2gpu')
    host.write('run/nvidia-persistenced/nvidia-persistenced.pid', '%d\n' % os.getpid())
    assert query(host, 'persistence_mode') == [['Enabled'], ['Enabled']]
    host.smi('-i', '1', '-pm', '0')
    assert query(host, 'persistence_mode') == [['Enabled'], ['Disabled']]


def test_power_limit_set_validate_and_repeat(sim_root):
    host = sim_root('hgx_h100_8gpu')
    result = host.smi('-i', '0', '-pl', '500')
    assert (result.returncode, result.stdout) == (
        0, 'Power limit for GPU 00000000:18:00.0 was set to 500.00 W from 700.00 W.\nAll done.\n')
    again = assert_repeat_is_noop(host, '-i', '0', '-pl', '500')
    assert again.stdout == 'Power limit for GPU 00000000:18:00.0 was set to 500.00 W from 500.00 W.\nAll done.\n'
    assert query(host, 'power.limit,enforced.power.limit,power.default_limit', 0) == [['500.00', '500.00', '700.00']]
    assert query(host, 'power.limit', 1) == [['700.00']]


@pytest.mark.parametrize('watts', ['150', '701'])
def test_power_limit_out_of_range_changes_nothing(sim_root, watts):
    host = sim_root('hgx_h100_8gpu')
    result = host.smi('-pl', watts)
    assert result.returncode == 2
    assert result.stdout == (
        'Provided power limit %.2f W is not a valid power limit which should be between 200.00 W and 700.00 W '
        'for GPU 00000000:18:00.0\nTerminating early due to previous errors.\n' % float(watts))
    assert host.state() == {'gpus': {}}


def test_application_clocks_set_reset_and_reject(sim_root):
    host = sim_root('a100_40gb_mig', driver='570.195.03')
    result = host.smi('-ac', '1215,1410')
    assert result.stdout == 'Applications clocks set to "(MEM 1215, SM 1410)" for GPU 00000000:00:04.0\nAll done.\n'
    assert_repeat_is_noop(host, '-ac', '1215,1410')
    assert query(host, 'clocks.applications.memory,clocks.applications.graphics') == [['1215', '1410']]
    bad = host.smi('-ac', '1215,1411')
    assert bad.returncode == 2 and 'Specified clock combination "(MEM 1215, SM 1411)" is not supported' in bad.stdout
    reset = host.smi('-rac')
    assert (reset.returncode, reset.stdout) == (0, 'All done.\n')
    assert query(host, 'clocks.applications.graphics,clocks.default_applications.graphics') == [['1095', '1095']]


@pytest.mark.parametrize('value,shown', [('3', 'Exclusive_Process'), ('PROHIBITED', 'Prohibited'), ('0', 'Default')])
def test_compute_mode(sim_root, value, shown):
    host = sim_root('l40s_2gpu')
    result = host.smi('-i', '1', '-c', value)
    name = {'3': 'EXCLUSIVE_PROCESS', 'PROHIBITED': 'PROHIBITED', '0': 'DEFAULT'}[value]
    assert (result.returncode, result.stdout) == (
        0, 'Set compute mode to %s for GPU 00000000:CA:00.0.\nAll done.\n' % name)
    assert query(host, 'compute_mode') == [['Default'], [shown]]
    assert_repeat_is_noop(host, '-i', '1', '-c', value)


def test_compute_mode_exclusive_thread_is_not_supported(sim_root):
    host = sim_root('l40s_2gpu')
    result = host.smi('-i', '0', '-c', '1')
    assert result.returncode == 3
    assert result.stdout == ('Unable to set the compute mode for GPU 00000000:4A:00.0: Not Supported\n'
                             'Treating as warning and moving on.\nAll done.\n')


def test_ecc_is_pending_until_reboot(sim_root):
    host = sim_root('l40s_2gpu')
    result = host.smi('-i', '0', '-e', '0')
    assert (result.returncode, result.stdout) == (
        0, 'Disabled ECC support for GPU 00000000:4A:00.0.\nAll done.\nReboot required.\n')
    assert_repeat_is_noop(host, '-i', '0', '-e', '0')
    assert query(host, 'ecc.mode.current,ecc.mode.pending') == [['Enabled', 'Disabled'], ['Enabled', 'Enabled']]
    assert host.reboot().returncode == 0
    assert query(host, 'ecc.mode.current,ecc.mode.pending') == [['Disabled', 'Disabled'], ['Enabled', 'Enabled']]
    already = host.smi('-i', '0', '-e', '0')
    assert already.stdout == 'ECC support is already Disabled for GPU 00000000:4A:00.0.\nAll done.\n'


def test_ecc_pending_is_applied_by_gpu_reset(sim_root):
    host = sim_root('hgx_h100_8gpu')
    host.smi('-i', '2', '-e', 'DISABLED')
    result = host.smi('-i', '2', '-r')
    assert (result.returncode, result.stdout) == (0, 'GPU 00000000:3A:00.0 was successfully reset.\nAll done.\n')
    assert query(host, 'ecc.mode.current,ecc.mode.pending', 2) == [['Disabled', 'Disabled']]


def test_reboot_drops_volatile_settings_but_keeps_inforom_modes(sim_root):
    host = sim_root('hgx_h100_8gpu')
    for args in (('-pm', '1'), ('-pl', '400'), ('-c', '3'), ('-e', '0'), ('-ac', '2619,1980')):
        assert host.smi('-i', '0', *args).returncode == 0
    host.reboot()
    assert query(host, 'persistence_mode,power.limit,compute_mode,ecc.mode.current,clocks.applications.gr', 0) == [
        ['Disabled', '700.00', 'Default', 'Disabled', '1755']]


def test_invalid_setter_value(sim_root):
    host = sim_root('l40s_2gpu')
    # Messages of the real binaries (format strings of the 535 and 550 nvidia-smi).
    expected = {
        ('-pm', 'maybe'): "Invalid input arguments. Please run 'nvidia-smi -h' for help.\n",
        ('-e', '2'): 'Invalid ECC configuration code: 2\n',
        ('-pl', 'lots'): "Invalid input arguments. Please run 'nvidia-smi -h' for help.\n",
        ('-c', '9'): 'Invalid compute mode: 9\n',
        ('-ac', '9001'): ('Specified clocks "9001" are not valid. Please format input as memClk,smClk '
                          'e.g. --applications-clocks=2000,300\n'),
        ('-pm', '1', '-e', '1'): ('Invalid combination of input arguments. Only one device modification may be '
                                  'done at a time.\n'),
    }
    for args, text in expected.items():
        result = host.smi(*args)
        assert (result.returncode, result.stdout) == (2, text), args
    assert host.state() == {'gpus': {}}


SETTER_PROFILES = {
    # profile: (driver, valid power limit, valid applications clocks "mem,graphics")
    'hgx_h100_8gpu': ('570.195.03', '450', '2619,1965'),
    'l40s_2gpu': ('535.247.01', '300', '5001,2505'),
    'a100_40gb_mig': ('580.95.05', '250', '1215,1395'),
}


@pytest.mark.parametrize('profile', sorted(SETTER_PROFILES))
def test_every_setter_on_every_profile(sim_root, profile):
    """Each setter, then the same call again: same answer kind, unchanged state."""
    import os
    driver, watts, clocks = SETTER_PROFILES[profile]
    host = sim_root(profile, driver=driver)
    steps = [('-pm', '1'), ('-pl', watts), ('-pl', '5000'), ('-ac', clocks), ('-rac',), ('-c', '3'),
             ('-c', 'DEFAULT'), ('-e', '0'), ('-e', '1'), ('-mig', '1'), ('-mig', '0'), ('-r',), ('-pm', '0')]
    transcript = []
    for step in steps:
        first = host.smi('-i', '0', *step)
        state = host.state()
        second = host.smi('-i', '0', *step)
        assert second.returncode == first.returncode, step
        if step != ('-r',):
            assert host.state() == state, step
        transcript.append('$ nvidia-smi -i 0 %s\n%src=%d\n' % (' '.join(step), first.stdout, first.returncode))
    transcript.append(host.smi('-q', '-i', '0', '-d', 'POWER,CLOCK,ECC,COMPUTE').stdout)
    actual = ''.join(transcript)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'expected', profile, 'setters.txt')
    if os.environ.get('NVIDIA_SIM_UPDATE_GOLDEN'):
        with open(path, 'w') as handle:
            handle.write(actual)
    with open(path) as handle:
        assert actual == handle.read()
