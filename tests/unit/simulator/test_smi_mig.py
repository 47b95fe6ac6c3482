# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi MIG mode and ``nvidia-smi mig`` instance management."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_DIR = os.path.join(HERE, 'expected', 'a100_40gb_mig')


def golden(name, actual):
    path = os.path.join(EXPECTED_DIR, name + '.txt')
    if os.environ.get('NVIDIA_SIM_UPDATE_GOLDEN'):
        with open(path, 'w') as handle:
            handle.write(actual)
    with open(path) as handle:
        return handle.read()


def test_seven_1g_instances_get_the_real_ids_and_devices(sim_root):
    host = sim_root('a100_40gb_mig')
    created = host.smi('mig', '-cgi', '19,19,19,19,19,19,19', '-C')
    assert created.returncode == 0
    lines = created.stdout.splitlines()
    assert lines[0] == 'Successfully created GPU instance ID 13 on GPU  0 using profile MIG 1g.5gb (ID 19)'
    assert lines[1] == ('Successfully created compute instance ID  0 on GPU  0 GPU instance ID 13 '
                        'using profile MIG 1g.5gb (ID  0)')
    assert [line.split()[5] for line in lines[::2]] == ['13', '11', '12', '7', '8', '9', '10']
    assert host.smi('mig', '-lgi').stdout == golden('mig_lgi_seven_1g', host.smi('mig', '-lgi').stdout)
    assert host.smi('mig', '-lci').stdout == golden('mig_lci_seven_1g', host.smi('mig', '-lci').stdout)
    listing = host.smi('-L').stdout
    assert listing == golden('list_seven_1g', listing)
    # The profile name is padded to 16 columns, as in the real -L (corpus list/).
    assert listing.count('\n  MIG 1g.5gb      Device ') == 7
    lgip = host.smi('mig', '-lgip').stdout
    assert '|   0  MIG 1g.5gb        19     0/7        4.75       No     14     0     0   |' in lgip
    assert '|   0  MIG 7g.40gb        0     0/1        39.25      No     98     5     0   |' in lgip


def test_capacity_is_enforced(sim_root):
    host = sim_root('a100_40gb_mig')
    assert host.smi('mig', '-cgi', '3g.20gb,MIG 3g.20gb').stdout == (
        'Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.20gb (ID  9)\n'
        'Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.20gb (ID  9)\n')
    full = host.smi('mig', '-cgi', '19')
    assert full.returncode == 255
    assert full.stdout == ('Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources\n'
                           'Failed to create GPU instances: Insufficient Resources\n')
    bogus = host.smi('mig', '-cgi', '9g.99gb')
    assert bogus.returncode == 2 and 'Invalid Argument' in bogus.stdout
    assert len(host.state()['gpus']['0']['gpu_instances']) == 2


def test_compute_instances_and_teardown_order(sim_root):
    host = sim_root('a100_40gb_mig')
    host.smi('mig', '-cgi', '9')
    created = host.smi('mig', '-cci', '0,0,0', '-gi', '2')
    assert created.stdout.splitlines()[2] == ('Successfully created compute instance ID  2 on GPU  0 GPU instance '
                                              'ID  2 using profile MIG 1c.3g.20gb (ID  0)')
    assert host.smi('mig', '-cci', '0', '-gi', '2').returncode == 255
    assert host.smi('mig', '-lci').stdout == golden('mig_lci_1c', host.smi('mig', '-lci').stdout)
    refused = host.smi('mig', '-dgi')
    assert refused.returncode == 255
    assert refused.stdout == ('Unable to destroy GPU instance ID  2 from GPU  0: In use by another client\n'
                              'Failed to destroy GPU instances: In use by another client\n')
    destroyed = host.smi('mig', '-dci', '-ci', '0,1', '-gi', '2')
    assert destroyed.stdout == (
        'Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  2\n'
        'Successfully destroyed compute instance ID  1 from GPU  0 GPU instance ID  2\n')
    host.smi('mig', '-dci')
    assert host.smi('mig', '-dci').stdout == 'No compute instances found: Not Found\n'
    assert host.smi('mig', '-dgi', '-gi', '2').stdout == 'Successfully destroyed GPU instance ID  2 from GPU  0\n'
    gone = host.smi('mig', '-lgi')
    assert (gone.returncode, gone.stdout) == (6, 'No GPU instances found: Not Found\n')


def test_mig_commands_refused_when_mode_disabled(sim_root):
    host = sim_root('hgx_h100_8gpu')
    for args in (('mig', '-lgip'), ('mig', '-cgi', '19', '-C'), ('mig', '-lgi'), ('mig', '-dci')):
        result = host.smi(*args)
        assert (result.returncode, result.stdout) == (6, 'No MIG-enabled devices found.\n'), args


def test_enable_mig_on_idle_hopper_then_create(sim_root):
    host = sim_root('hgx_h100_8gpu')
    enabled = host.smi('-i', '0', '-mig', '1')
    assert enabled.returncode == 0
    assert enabled.stdout.startswith('Enabled MIG Mode for GPU 00000000:18:00.0\n\nWarning: persistence mode is '
                                     'disabled on device 00000000:18:00.0.')
    assert enabled.stdout.endswith('All done.\n')
    created = host.smi('mig', '-i', '0', '-cgi', '1g.10gb', '-C')
    assert created.stdout.splitlines()[0] == ('Successfully created GPU instance ID 13 on GPU  0 using profile '
                                              'MIG 1g.10gb (ID 19)')
    result = host.smi('--query-gpu=mig.mode.current', '--format=csv,noheader')
    assert result.stdout.splitlines() == ['Enabled'] + ['Disabled'] * 7


def test_enable_mig_with_busy_gpu_stays_pending_until_reset(sim_root):
    host = sim_root('hgx_h100_8gpu')
    pid = host.start_workload('--gpu', '3', '--memory', '2048')
    pending = host.smi('-i', '3', '-mig', '1')
    assert pending.returncode == 0
    assert pending.stdout.startswith('Warning: MIG mode is in pending enable state for GPU 00000000:5D:00.0:'
                                     'In use by another client\n00000000:5D:00.0 is currently being used')
    state = host.smi('-i', '3', '--query-gpu=mig.mode.current,mig.mode.pending', '--format=csv,noheader')
    assert state.stdout == 'Disabled, Enabled\n'
    refused = host.smi('-i', '3', '-r')
    assert refused.returncode == 255 and refused.stdout.startswith('Unable to reset this GPU')
    host.stop(pid)
    assert host.smi('-i', '3', '-r').returncode == 0
    state = host.smi('-i', '3', '--query-gpu=mig.mode.current,mig.mode.pending', '--format=csv,noheader')
    assert state.stdout == 'Enabled, Enabled\n'


def test_disable_mig_needs_instances_destroyed(sim_root):
    host = sim_root('a100_40gb_mig')
    host.smi('mig', '-cgi', '0', '-C')
    refused = host.smi('-mig', '0')
    assert refused.returncode == 255
    assert refused.stdout == ('Unable to disable MIG Mode for GPU 00000000:00:04.0: In use by another client\n'
                              'Treating as warning and moving on.\nAll done.\n')
    host.smi('mig', '-dci')
    host.smi('mig', '-dgi')
    done = host.smi('-mig', '0')
    assert (done.returncode, done.stdout) == (0, 'Disabled MIG Mode for GPU 00000000:00:04.0\nAll done.\n')


def test_mig_on_gpu_without_mig(sim_root):
    host = sim_root('l40s_2gpu')
    result = host.smi('-i', '0', '-mig', '1')
    assert result.returncode == 3
    assert result.stdout == ('Unable to enable MIG Mode for GPU 00000000:4A:00.0: Not Supported\n'
                             'Treating as warning and moving on.\nAll done.\n')


def test_reboot_drops_instances_but_keeps_mig_mode(sim_root):
    host = sim_root('a100_40gb_mig')
    host.smi('mig', '-cgi', '14,14', '-C')
    host.reboot()
    assert host.smi('mig', '-lgi').stdout == 'No GPU instances found: Not Found\n'
    assert host.smi('--query-gpu=mig.mode.current', '--format=csv,noheader').stdout == 'Enabled\n'


def test_xml_lists_mig_devices(sim_root):
    import xml.dom.minidom
    host = sim_root('a100_40gb_mig')
    host.smi('mig', '-cgi', '9,14', '-C')
    document = xml.dom.minidom.parseString(host.smi('-q', '-x').stdout)
    devices = document.getElementsByTagName('mig_device')
    assert [d.getElementsByTagName('gpu_instance_id')[0].firstChild.data for d in devices] == ['2', '3']
    assert [d.getElementsByTagName('total')[0].firstChild.data for d in devices] == ['19968 MiB', '9856 MiB']
