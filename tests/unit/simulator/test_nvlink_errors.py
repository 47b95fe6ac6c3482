# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's ``nvidia-smi nvlink -e``: the real R535 layout, counters injected through its state.

A test of the simulator: it proves the simulated output parses as the real
one does (same layout, tab and space, blank line after each link), not what
NVIDIA's driver counts.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_nvlink_errors


def test_simulated_nvlink_error_counters_parse_and_carry_injected_counts(sim_root):
    host = sim_root('hgx_h100_8gpu')
    done = host.smi('nvlink', '-e')
    assert done.returncode == 0, done.stderr
    status = parse_nvlink_errors(done.stdout)
    assert [len(gpu['links']) for gpu in status] == [18] * 8
    assert all(link['counters'] == {'replay': 0, 'recovery': 0, 'crc': 0} for gpu in status for link in gpu['links'])
    assert '\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Errors: 0\n\n' in done.stdout
    state = host.state()
    state.setdefault('gpus', {}).setdefault('3', {})['nvlink_errors'] = {'7': {'recovery': 2, 'crc': 40}}
    host.write('var/lib/nvidia-sim/state.json', json.dumps(state))
    status = parse_nvlink_errors(host.smi('nvlink', '-e', '-i', '3').stdout)
    assert [gpu['index'] for gpu in status] == [3]
    assert status[0]['links'][7]['counters'] == {'replay': 0, 'recovery': 2, 'crc': 40}


def test_gpus_without_nvlink_print_the_note_not_counters(sim_root):
    host = sim_root('l40s_2gpu', driver='590.48.01')
    status = parse_nvlink_errors(host.smi('nvlink', '-e').stdout)
    assert [gpu['links'] for gpu in status] == [[], []] and all(gpu['note'] for gpu in status)
