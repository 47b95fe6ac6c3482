# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The real nvidia-smi (Debian's 535 and 550 packages) as the oracle of the simulator.

Where the real binary can speak without a GPU the simulator must say the same,
byte for byte (stdout, stderr, exit code):

* the kernel module not loaded (NVML library present): every command;
* the NVML library missing: every command;
* ``-h`` combined with anything else (answered before NVML is loaded).

What it cannot run, the binary still shows: its ``-h`` option list (every
option the simulator accepts must be real, every real one known), the DTD it
embeds (the simulator's ``-q -x`` of that branch must be valid against it:
element names, order and nesting), the field names of ``--query-gpu`` and the
printf formats of its messages (every usage-error text the simulator prints
must be one of them).

The packages are downloaded once into ``$GPUFLEET_STATE_DIR/debs/<suite>``
(see real_nvidia_smi.py); an unreachable archive fails these tests, it does not
skip them.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
from xml.etree import ElementTree

import pytest

import real_nvidia_smi
from daemon_helpers import SIM_BIN, nvsim_module

SUITES = sorted(real_nvidia_smi.SUITES)

# Every output format the roles and modules use, and a few argument errors:
# without NVML none of them gets further than the library or the driver.
FORMATS = [
    ('list', ['-L']),
    ('summary', []),
    ('query', ['-q']),
    ('query_xml', ['-q', '-x']),
    ('query_gpu', ['--query-gpu=index,name,uuid,pci.bus_id,memory.total,power.limit', '--format=csv']),
    ('query_gpu_noheader_nounits', ['--query-gpu=index,memory.used,temperature.gpu',
                                    '--format=csv,noheader,nounits']),
    ('query_compute_apps', ['--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid', '--format=csv']),
    ('query_remapped_rows', ['--query-remapped-rows=gpu_bus_id,remapped_rows.pending', '--format=csv']),
    ('topo', ['topo', '-m']),
    ('nvlink', ['nvlink', '-s']),
    ('mig_lgip', ['mig', '-lgip']),
    ('mig_lgi', ['mig', '-lgi']),
    ('one_gpu_query', ['-i', '0', '-q']),
    ('set_persistence', ['-pm', '1']),
    ('version', ['--version']),
    ('unknown_option', ['--frobnicate']),
    ('missing_value', ['-i']),
    ('unknown_field', ['--query-gpu=bogus', '--format=csv']),
    ('subcommand_help', ['topo', '-h']),
    ('help_with_option', ['-h', '-L']),
    ('option_with_help', ['--frobnicate', '-h']),
    ('help_with_value', ['-h', '--id=0']),
]
STATES = ('driver_not_loaded', 'nvml_missing')


@pytest.fixture(scope='module', params=SUITES)
def real(request):
    try:
        return real_nvidia_smi.fetch(request.param)
    except real_nvidia_smi.FetchError as exc:
        pytest.fail('the real nvidia-smi of Debian %s is needed as the oracle: %s' % (request.param, exc))


def _no_real_driver():
    if os.path.exists('/proc/driver/nvidia/version'):
        pytest.skip('a real NVIDIA kernel module is loaded here: the failure states cannot be produced')


def _sim_host(make, real, state):
    """A simulated host whose driver is the real package's version, in ``state``."""
    # NVML missing: the library package removed while the module stays loaded.
    return make('l40s_2gpu', driver=real.version, load=state == 'nvml_missing', nvml=state != 'nvml_missing')


def _sim(host, args):
    result = host.smi(*args)
    return result.returncode, result.stdout, result.stderr


def test_the_packages_are_the_expected_branches(real):
    assert real.branch == real_nvidia_smi.SUITES[real.suite]
    assert os.access(real.binary, os.X_OK)


@pytest.mark.parametrize('state', STATES)
@pytest.mark.parametrize('name,args', FORMATS, ids=[f[0] for f in FORMATS])
def test_simulator_fails_like_the_real_binary(real, shared_sim_root, state, name, args):  # pylint: disable=unused-argument
    _no_real_driver()
    expected = real.run(args, nvml=state != 'nvml_missing')
    assert _sim(_sim_host(shared_sim_root, real, state), args) == expected


def test_the_failure_texts_are_the_verified_ones(real):
    # What the brief verified by hand, kept as a guard against a changed package.
    _no_real_driver()
    assert real.run(['-L']) == (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                   "Make sure that the latest NVIDIA driver is installed and running.\n\n", '')
    rc, stdout, stderr = real.run(['-L'], nvml=False)
    assert (rc, stderr, stdout.count('\n')) == (12, '', 2) and "couldn't find libnvidia-ml.so" in stdout


def test_driver_not_loaded_profile_fails_like_the_real_binary(real, shared_sim_root):
    _no_real_driver()
    host = shared_sim_root('driver_not_loaded', driver=real.version)
    for _name, args in FORMATS:
        assert _sim(host, args) == real.run(args), args


# --- the option list ---------------------------------------------------------

def test_simulator_knows_exactly_the_real_options(real):
    options, subcommands = real_nvidia_smi.help_options(real.run(['-h'])[1])
    smi = nvsim_module('smi.main')
    branch = int(real.branch)
    known = {}
    for shorts, longs, takes, since, _simulated in smi.OPTIONS.values():
        if branch >= since:
            for form in shorts + longs:
                known[form] = takes
    assert sorted(set(known) - set(options)) == [], 'options the simulator accepts but the real tool does not'
    assert sorted(set(options) - set(known)) == [], 'real options the simulator does not know'
    # The -h text marks value options with "=", except the --query-* switches (they take one all the same).
    differ = [form for form in options if options[form] != known[form] and not form.startswith('--query-')]
    assert differ == []
    assert sorted(name for name, (since, _sim) in smi.SUBCOMMANDS.items() if branch >= since) == subcommands


def test_real_options_the_simulator_lacks_are_refused_as_such(real, shared_sim_root):
    smi = nvsim_module('smi.main')
    host = shared_sim_root('l40s_2gpu', driver=real.version)
    for key, (shorts, longs, takes, since, simulated) in sorted(smi.OPTIONS.items()):
        if simulated or int(real.branch) < since:
            continue
        form = (longs or shorts)[0]
        result = host.smi(*([form, '0'] if takes else [form]))
        assert (result.returncode, result.stdout) == (255, ''), key
        assert 'exists in the real nvidia-smi but is not simulated' in result.stderr, key


# --- the DTD -----------------------------------------------------------------

def _xml_hosts(make, real):
    """Every GPU profile at the real branch, with compute processes (MIG too)."""
    hosts = []
    for profile, workload in (('hgx_h100_8gpu', ('--gpu', '3', '--memory', '2048')),
                              ('l40s_2gpu', ('--gpu', '1', '--memory', '512')), ('a100_40gb_mig', None)):
        host = make(profile, driver=real.version)
        if workload:
            host.start_workload(*workload)
        hosts.append((profile, host))
    mig = make('a100_40gb_mig', driver=real.version)
    assert mig.smi('mig', '-cgi', '9,14', '-C').returncode == 0
    mig.start_workload('--gpu', '0', '--mig-device', '1', '--memory', '256')
    hosts.append(('a100_40gb_mig with MIG devices', mig))
    return hosts


def test_simulated_xml_is_valid_against_the_real_dtd(real, sim_root):
    dtd = real.dtd()
    assert real.run(['-q', '-x'])[0] == 9  # the DTD is read from the binary, not printed without a driver
    for profile, host in _xml_hosts(sim_root, real):
        output = host.smi('-q', '-x').stdout
        assert '<!DOCTYPE nvidia_smi_log SYSTEM "%s">' % dtd.split()[1] in output
        violations = real_nvidia_smi.dtd_violations(ElementTree.fromstring(output), dtd)
        assert violations == [], '%s at %s: %r' % (profile, real.version, violations[:3])


# --- field names and message formats -----------------------------------------

def test_every_query_field_of_the_branch_is_in_the_binary(real):
    query = nvsim_module('smi.query')
    branch = int(real.branch)
    for table in (query.GPU_FIELDS, query.APP_FIELDS, query.REMAPPED_FIELDS, query.CLOCK_FIELDS):
        names = [name for entry in query.fields_for(branch, table) for name in (entry[0],) + entry[1]]
        assert [name for name in names if not real.has_string(name)] == []


def test_fields_of_later_branches_are_not_in_the_binary(real):
    query = nvsim_module('smi.query')
    later = [entry[0] for entry in query.GPU_FIELDS if entry[4] > int(real.branch)]
    # Names the binary carries for other switches (--query-remapped-rows) are no evidence either way.
    assert [name for name in later if real.has_string(name) and not name.startswith('remapped_rows.')] == []


# Invocations whose every output line must be a printf format of the real binary.
MESSAGES = [
    ['--frobnicate'], ['-i'], ['-L', '-q'], ['-pm', '1', '-e', '1'], ['-x'], ['-d', 'MEMORY'],
    ['-q', '-x', '-d', 'MEMORY'], ['--query-gpu=name'], ['--query-gpu=name', '--format=json'],
    ['--query-gpu=name', '--format=csv,bogus'], ['--query-gpu=bogus', '--format=csv'], ['-pm', '7'],
    ['-pm', 'maybe'], ['-c', '9'], ['-e', '5'], ['-mig', '3'], ['-ac', '100'], ['-q', '-d', 'NOPE'],
    ['-i', '9', '-L'], ['mig', '-lgi'], ['nvlink', '-s'], ['mig', '-lgip', '-lgi'],
]


def _formats(real):
    """The binary's printf formats with at least 8 literal characters (so "%s" matches nothing)."""
    lines = [line for text in real.strings(8) for line in text.split('\n')]
    return [real_nvidia_smi.format_pattern(line) for line in lines
            if len(real_nvidia_smi.FORMAT_SPEC.sub('', line).strip()) >= 8]


# Short texts the compiler builds from immediate values: only their first 16 bytes are a string.
INLINED = ('No MIG-enabled devices found.',)


def _unmatched(lines, patterns, real=None):
    return [line for line in lines if line and not any(p.match(line) for p in patterns)
            and not (real and line in INLINED and line[:16].encode() in real.image)]


def test_usage_errors_are_real_messages(real, shared_sim_root):
    patterns = _formats(real)
    host = shared_sim_root('l40s_2gpu', driver=real.version)
    for args in MESSAGES:
        result = host.smi(*args)
        assert result.returncode != 0 or args[0] in ('nvlink',), args
        assert _unmatched(result.stdout.split('\n'), patterns, real) == [], args


def test_device_handle_and_mismatch_messages_are_real(real, sim_root):
    patterns = _formats(real)
    host = sim_root('l40s_2gpu', driver=real.version)
    host.write('var/lib/nvidia-sim/state.json', '{"gpus": {"0": {"nvml_device_error": "Unknown Error"}}}\n')
    assert _unmatched(host.smi('-L').stdout.split('\n')[:1], patterns) == []
    host.write('usr/share/nvidia-sim/driver-version', '1.2.3\n')
    assert _unmatched(host.smi('-L').stdout.split('\n'), patterns) == []
    host.install_driver(real.version)
    host.write('run/nvidia-sim/loaded-driver', '1.2.3\n')
    assert _unmatched(host.smi('-L').stdout.split('\n'), patterns) == []


def test_simulator_help_is_answered_without_nvml_like_the_real_one(real, shared_sim_root):
    # The one output not copied byte for byte: NVIDIA's 13 KB help text stays NVIDIA's. The
    # simulator's shares its first line and lists only the options it implements, for the branch.
    host = _sim_host(shared_sim_root, real, 'nvml_missing')
    for args in (['-h'], ['--help', '-h']):
        rc, stdout, _stderr = real.run(args, nvml=False)
        result = subprocess.run([os.path.join(SIM_BIN, 'nvidia-smi')] + args, env=host.env, stdout=subprocess.PIPE,
                                universal_newlines=True, check=False)
        assert result.returncode == rc == 0
        assert result.stdout.split(' (')[0] == stdout.split('\n')[0]
    assert ('--version' in result.stdout) == (int(real.branch) >= 550)
