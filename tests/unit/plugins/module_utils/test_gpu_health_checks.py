# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The checks of the health catalog against real nvidia-smi captures.

Each check is run on a real capture where it must stay silent, and on the
same capture with the condition written into the XML (an element's text
changed, nothing else), where it must fire. The captures are the corpus's
(fixtures/real, SOURCES.md): H100, B200, GB200 and A100 nodes from
NVIDIA/k8s-test-infra, real nodes. What is injected is said in each test:
the value, not the format, is ours.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import health_state
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import evaluate
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_nvlink_errors, parse_xml

REAL = os.path.join(os.path.dirname(__file__), 'fixtures', 'real')
H100 = 'q-x/h100-80gb-hbm3_580.105.08_k8stestinfra.xml'
B200 = 'q-x/b200_580.105.08_k8stestinfra.xml'
GB200 = 'q-x/gb200_580.173.02_k8stestinfra.xml'
A100 = 'q-x/a100-sxm4-40gb_570.148.08_k8stestinfra.xml'
# The checks of this file (point 2 of the catalog); the real captures raise none of them.
NEW_CODES = (
    'ecc_sram_uncorrectable', 'ecc_sram_threshold_exceeded', 'ecc_dram_correctable_high', 'ecc_sram_correctable_high',
    'remapped_rows_spares_low', 'remapped_rows_uncorrectable_high', 'retired_pages_limit',
    'memory_temperature_at_limit', 'memory_temperature_near_limit', 'hw_slowdown_recent', 'pcie_replays_growing',
    'nvlink_crc_errors', 'nvlink_replay_errors', 'nvlink_recovery_errors', 'fabric_not_ready', 'fabric_unhealthy',
    'gpu_busy_while_idle',
)


def capture(name):
    with open(os.path.join(REAL, name)) as handle:
        return handle.read()


def first_gpu(text):
    """The text of the first <gpu> element, for injecting into one GPU only."""
    start = text.index('<gpu id=')
    return start, text.index('</gpu>', start)


def inject(text, tag, value, gpu_only=True, count=1):
    """Set the text of ``<tag>`` (in the first GPU only, by default) to ``value``."""
    start, end = first_gpu(text) if gpu_only else (0, len(text))
    part, n = re.subn(r'(<%s>)[^<]*(</%s>)' % (tag, tag), r'\g<1>%s\g<2>' % value, text[start:end], count=count)
    assert n == count, (tag, n)
    return text[:start] + part + text[end:]


def codes(findings):
    return sorted(set(f['code'] for f in findings))


def judge(text, **kwargs):
    return evaluate(parse_xml(text)['gpus'], **kwargs)


@pytest.mark.parametrize('name', [H100, B200, GB200, A100, 'q-x/gb300_580.173.02_k8stestinfra.xml'])
def test_real_data_center_captures_raise_none_of_the_new_checks(name):
    gpus = parse_xml(capture(name))['gpus']
    findings = evaluate(gpus, node_idle=True)
    assert [f['code'] for f in findings if f['code'] in NEW_CODES] == []
    # Every finding carries what the report and JSON show.
    for finding in findings:
        assert set(['code', 'severity', 'action', 'source']) <= set(finding)


def test_sram_and_dram_ecc_are_judged_apart():
    text = capture(H100)
    volatile_sram = inject(text, 'sram_uncorrectable_parity', '2')
    findings = judge(volatile_sram)
    sram = [f for f in findings if f['code'] == 'ecc_sram_uncorrectable']
    assert len(sram) == 1 and sram[0]['gpu']['index'] == 0 and sram[0]['severity'] == 'critical'
    assert (sram[0]['action'], sram[0]['source']) == ('reset', 'nvidia-memory')
    # DRAM uncorrectable errors alone are the classic volatile finding, not an SRAM one.
    dram = judge(inject(text, 'dram_uncorrectable', '1'))
    assert 'ecc_uncorrectable_volatile' in codes(dram) and 'ecc_sram_uncorrectable' not in codes(dram)
    flagged = judge(inject(text, 'sram_threshold_exceeded', 'Yes'))
    assert [(f['code'], f['action']) for f in flagged if f['code'].startswith('ecc_')] == [
        ('ecc_sram_threshold_exceeded', 'rma')]


def test_correctable_ecc_against_azures_thresholds():
    text = capture(H100)
    at_limit = judge(inject(text, 'dram_correctable', '20000000'))
    assert 'ecc_dram_correctable_high' not in codes(at_limit)
    over = [f for f in judge(inject(text, 'dram_correctable', '20000001')) if f['code'] == 'ecc_dram_correctable_high']
    assert len(over) == 1 and over[0]['threshold'] == {
        'name': 'ecc_dram_correctable_max', 'value': 20000000, 'source': 'azurehpc-health-checks'}
    sram = judge(inject(text, 'sram_correctable', '10001'))
    assert 'ecc_sram_correctable_high' in codes(sram)
    # A site limit from the inventory.
    site = judge(inject(text, 'sram_correctable', '10001'), thresholds={'ecc_sram_correctable_max': 50000})
    assert 'ecc_sram_correctable_high' not in codes(site)


def test_row_remapping_close_to_its_limit():
    text = capture(H100)
    assert 'remapped_rows_spares_low' not in codes(judge(text))
    exhausted = inject(inject(text, 'row_remapper_histogram_none', '1 bank(s)'), 'row_remapper_histogram_max',
                       '2559 bank(s)')
    findings = [f for f in judge(exhausted) if f['code'] == 'remapped_rows_spares_low']
    assert len(findings) == 1 and 'max 2559' in findings[0]['evidence'] and 'none 1' in findings[0]['evidence']
    assert findings[0]['action'] == 'rma'
    many = judge(inject(text, 'remapped_row_unc', '512'))
    assert 'remapped_rows_uncorrectable_high' in codes(many)
    assert 'remapped_rows_uncorrectable_high' not in codes(judge(inject(text, 'remapped_row_unc', '511')))


def test_retired_pages_limit_on_a_gpu_before_ampere():
    gpu = {'index': 0, 'uuid': 'GPU-1', 'pci_bus_id': '0000:3b:00.0', 'name': 'Tesla V100-SXM2-32GB',
           'retired_pages': {'single_bit_ecc': 40, 'double_bit_ecc': 23, 'pending': False}}
    assert [f['code'] for f in evaluate([gpu])] == ['retired_pages_limit']
    gpu['retired_pages']['double_bit_ecc'] = 22
    assert evaluate([gpu]) == []


def test_hbm_temperature_beside_the_gpu_temperature():
    # The A100 on R570 reports the memory's own limit (gpu_temp_max_mem_threshold, 95 C); the H100 on R580
    # reports only a margin to it (gpu_temp_max_mem_tlimit_threshold) and no current memory margin, so its
    # HBM temperature is shown but not judged.
    assert [f for f in judge(inject(capture(H100), 'memory_temp', '120 C')) if f['code'].startswith('memory_')] == []
    text = capture(A100)
    limit = int(re.search(r'<gpu_temp_max_mem_threshold>(\d+) C', text).group(1))
    near = judge(inject(text, 'memory_temp', '%d C' % (limit - 3)))
    assert [f['code'] for f in near if f['code'].startswith('memory_')] == ['memory_temperature_near_limit']
    hot = [f for f in judge(inject(text, 'memory_temp', '%d C' % limit)) if f['code'].startswith('memory_')]
    assert [f['code'] for f in hot] == ['memory_temperature_at_limit'] and hot[0]['severity'] == 'critical'
    assert 'HBM at %d C' % limit in hot[0]['evidence']


def test_hw_slowdown_reports_how_long_it_has_been_active():
    text = capture(GB200)
    active = inject(inject(text, 'clocks_event_reason_hw_thermal_slowdown', 'Active'), 'clocks_event_reason_hw_slowdown',
                    'Active')
    active = inject(active, 'clocks_event_reasons_counters_hw_therm_slowdown', '90000000 us')
    finding = [f for f in judge(active) if f['code'] == 'hw_thermal_slowdown'][0]
    assert finding['active_seconds'] == 90.0 and 'active for 90 s' in finding['evidence']


def test_hw_slowdown_between_two_runs():
    before = parse_xml(capture(GB200))['gpus']
    previous = health_state.readings(before, None, 1000.0)
    later = inject(capture(GB200), 'clocks_event_reasons_counters_hw_power_brake', '2500000 us')
    findings = judge(later, previous=previous, now=1600.0)
    recent = [f for f in findings if f['code'] == 'hw_slowdown_recent']
    assert len(recent) == 1 and recent[0]['gpu']['index'] == 0
    assert 'active for 2.5 s of the 600 s since the previous run' in recent[0]['evidence']
    # The software power cap counters grow on every busy GPU (they do in the capture): never a finding.
    capped = inject(capture(GB200), 'clocks_event_reasons_counters_sw_power_cap', '99999999999 us')
    assert 'hw_slowdown_recent' not in codes(judge(capped, previous=previous, now=1600.0))
    # Without a previous run there is no "between".
    assert 'hw_slowdown_recent' not in codes(judge(later))


def test_pcie_replays_growing_between_runs_against_dcgms_rate():
    text = capture(H100)
    gpus = parse_xml(text)['gpus']
    previous = health_state.readings(gpus, None, 0.0)
    replays = gpus[0]['pcie']['replay_counter']
    # Gen5 x16 on this H100 while idle may run slower: the limit follows the link as it runs now.
    gen, width = gpus[0]['pcie']['link_gen_current'], gpus[0]['pcie']['link_width_current']
    limit = {1: 3, 2: 5, 3: 8, 4: 16, 5: 31}[gen] if width == 16 else None
    assert limit is not None
    slow = judge(inject(text, 'replay_counter', str(replays + limit)), previous=previous, now=60.0)
    assert 'pcie_replays_growing' not in codes(slow)
    fast = [f for f in judge(inject(text, 'replay_counter', str(replays + limit + 1)), previous=previous, now=60.0)
            if f['code'] == 'pcie_replays_growing']
    assert len(fast) == 1 and fast[0]['threshold']['value'] == limit and fast[0]['threshold']['source'] == (
        'nvidia-dcgm-health')
    # The real counters (106 to 174 on this node) say nothing without a previous run.
    assert 'pcie_replays_growing' not in codes(judge(text))


NVLINK_ERRORS = ''.join(
    'GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%d)\n' % (gpu, gpu) + ''.join(
        '\t Link %d: Replay Errors: %s\n\t Link %d: Recovery Errors: %s\n\t Link %d: CRC Errors: %s\n\n'
        % (link, '{r%d_%d}' % (gpu, link), link, '{v%d_%d}' % (gpu, link), link, '{c%d_%d}' % (gpu, link))
        for link in range(18)) for gpu in range(2))


def nvlink_errors(**counts):
    values = dict(('%s%d_%d' % (kind, gpu, link), 0) for kind in 'rvc' for gpu in range(2) for link in range(18))
    values.update(counts)
    return NVLINK_ERRORS.format(**values)


def test_nvlink_error_counters_parse_in_the_real_layout():
    # The layout of the real R535 output (tab and space, one counter per line, a blank line between links).
    status = parse_nvlink_errors(nvlink_errors(r1_3=7, c0_17='N/A'))
    assert [len(gpu['links']) for gpu in status] == [18, 18]
    assert status[1]['links'][3]['counters'] == {'replay': 7, 'recovery': 0, 'crc': 0}
    assert status[0]['links'][17]['counters']['crc'] is None
    inactive = parse_nvlink_errors('GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)\n'
                                   'NVML: Unable to retrieve NVLink information as all links are inactive\n')
    assert inactive[0]['links'] == [] and inactive[0]['note']
    with pytest.raises(ValueError):
        parse_nvlink_errors('GPU 0: NVIDIA H100 (UUID: GPU-0)\n\t Link 0: Replay Errors: many\n')


def test_nvlink_error_counters_against_dcgms_rules():
    gpus = parse_xml(capture(H100))['gpus'][:2]
    for gpu, uuid in zip(gpus, ('GPU-0', 'GPU-1')):
        gpu['uuid'] = uuid
    assert [f for f in evaluate(gpus, nvlink_errors=parse_nvlink_errors(nvlink_errors())) if 'nvlink' in f['code']] == []
    findings = evaluate(gpus, nvlink_errors=parse_nvlink_errors(nvlink_errors(r1_3=1, v0_5=2, c0_7=3)))
    by_code = dict((f['code'], f) for f in findings)
    assert by_code['nvlink_replay_errors']['gpu']['index'] == 1 and by_code['nvlink_replay_errors']['severity'] == (
        'critical')
    assert by_code['nvlink_recovery_errors']['links'] == [{'link': 5, 'errors': 2}]
    assert (by_code['nvlink_crc_errors']['severity'], by_code['nvlink_crc_errors']['action']) == ('warning', 'watch')
    # Between runs: only growth counts, and CRC at 100 a second or more is critical.
    previous = health_state.readings(gpus, parse_nvlink_errors(nvlink_errors(r1_3=1, v0_5=2, c0_7=3)), 100.0)
    same = evaluate(gpus, nvlink_errors=parse_nvlink_errors(nvlink_errors(r1_3=1, v0_5=2, c0_7=3)),
                    previous=previous, now=110.0)
    assert [f for f in same if 'nvlink' in f['code']] == []
    burst = evaluate(gpus, nvlink_errors=parse_nvlink_errors(nvlink_errors(r1_3=1, v0_5=2, c0_7=1003)),
                     previous=previous, now=110.0)
    crc = [f for f in burst if f['code'] == 'nvlink_crc_errors'][0]
    assert (crc['severity'], crc['action']) == ('critical', 'reset') and '100.0 a second' in crc['evidence']


def test_fabric_state_on_a_real_gb200_clique():
    text = capture(GB200)
    assert [f for f in judge(text) if f['code'].startswith('fabric_')] == []
    unhealthy = inject(inject(text, 'route_unhealthy', 'True'), 'summary', 'Unhealthy')
    finding = [f for f in judge(unhealthy) if f['code'].startswith('fabric_')]
    assert [f['code'] for f in finding] == ['fabric_unhealthy'] and finding[0]['gpu']['index'] == 0
    assert 'health summary "Unhealthy"' in finding[0]['evidence'] and 'a route is unhealthy' in finding[0]['evidence']
    assert 'clique 2' in finding[0]['evidence']
    degraded = judge(inject(text, 'bandwidth', 'Degraded'))
    assert 'fabric_unhealthy' in codes(degraded)
    starting = [f for f in judge(inject(text, 'state', 'In Progress')) if f['code'].startswith('fabric_')]
    assert [f['code'] for f in starting] == ['fabric_not_ready']
    # HGX H100 (NVSwitch, fabric manager running): Completed/Success, health not reported: healthy.
    assert [f for f in judge(capture(H100)) if f['code'].startswith('fabric_')] == []
    failed = judge(inject(capture(H100), 'status', 'Failure'))
    assert 'fabric_not_ready' in codes(failed)


def test_an_idle_node_with_gpu_processes_or_memory_in_use():
    text = capture(H100)
    used = inject(text, 'used', '4096 MiB')
    assert 'gpu_busy_while_idle' in codes(judge(used, node_idle=True))
    assert 'gpu_busy_while_idle' not in codes(judge(used, node_idle=False))
    assert 'gpu_busy_while_idle' not in codes(judge(used))
    gpus = parse_xml(text)['gpus']
    gpus[2]['processes'] = [{'pid': 4242, 'type': 'C', 'name': 'python3', 'used_memory_mib': 500}]
    finding = [f for f in evaluate(gpus, node_idle=True) if f['code'] == 'gpu_busy_while_idle']
    assert len(finding) == 1 and finding[0]['gpu']['index'] == 2 and 'python3 pid 4242' in finding[0]['evidence']


def test_xids_already_reported_are_not_raised_again_unless_they_recur():
    log = ('[100.0] NVRM: Xid (PCI:0000:18:00): 79, pid=\'<unknown>\', name=<unknown>, GPU has fallen off the bus.\n')
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import parse_xid_events
    findings = evaluate([], parse_xid_events(log))
    first, already, events = health_state.remember_events(findings, health_state.empty(), 10.0)
    assert [f['code'] for f in first] == ['xid_79'] and already == []
    state = {'events': events}
    second, already, events = health_state.remember_events(evaluate([], parse_xid_events(log)), state, 20.0)
    assert second == [] and [f['code'] for f in already] == ['xid_79'] and already[0]['first_reported'] == 10.0
    again = log + log.replace('[100.0]', '[200.0]')
    third, already, _events = health_state.remember_events(evaluate([], parse_xid_events(again)), {'events': events},
                                                           30.0)
    assert [(f['code'], f['count']) for f in third] == [('xid_79', 2)] and already == []


def test_the_state_is_bounded_and_survives_a_bad_file(tmp_path):
    findings = [{'code': 'xid_%d' % (n % 200), 'gpu': {'pci_bus_id': '0000:%02x:00.0' % (n // 200)},
                 'last_line': 'line %d' % n, 'count': 1} for n in range(health_state.MAX_EVENTS + 50)]
    _report, _already, events = health_state.remember_events(findings, health_state.empty(), 1.0)
    assert len(events) == health_state.MAX_EVENTS
    path = str(tmp_path / 'state.json')
    health_state.save(path, dict(health_state.empty(), events=events))
    assert oct(os.stat(path).st_mode & 0o777) == '0o600'
    assert len(health_state.load(path)['events']) == health_state.MAX_EVENTS
    with open(path, 'w') as handle:
        handle.write('{not json')
    assert health_state.load(path) == health_state.empty()
    with open(path, 'w') as handle:
        json.dump({'version': 99}, handle)
    assert health_state.load(path) == health_state.empty()
