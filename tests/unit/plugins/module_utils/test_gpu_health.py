# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import gpu_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import (
    evaluate,
    events_within,
    health_view,
    is_healthy,
    parse_duration,
    parse_xid_events,
    summarize,
    xid_info,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import parse_nvlink_status, parse_xml

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'kernel_log')
SMI_FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'nvidia_smi')
REAL = os.path.join(os.path.dirname(__file__), 'fixtures', 'real')


def real_capture(name):
    with open(os.path.join(REAL, name)) as handle:
        return handle.read()


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def healthy_gpu(index=0, pci='0000:3b:00.0', **overrides):
    """A GPU record (gpu_record.GPU_RECORD) that yields no finding; a dict override merges into its section."""
    gpu = {
        'index': index, 'uuid': 'GPU-%08d-1111-2222-3333-444444444444' % index, 'pci_bus_id': pci,
        'name': 'NVIDIA H100 80GB HBM3', 'persistence_mode': True,
        'temperature': {'gpu_c': 41, 'slowdown_c': 87, 'shutdown_c': 92, 'tlimit_c': None, 'slowdown_tlimit_c': None},
        'utilization_gpu_percent': 97,
        'ecc_errors': {'volatile_uncorrected': 0, 'aggregate_uncorrected': 0},
        'retired_pages': {'pending': None, 'double_bit_ecc': None},
        'remapped_rows': {'pending': False, 'failure': False, 'uncorrectable': 0},
        'throttle_reasons': {'gpu_idle': False, 'sw_power_cap': False, 'hw_slowdown': False,
                             'hw_thermal_slowdown': False, 'hw_power_brake_slowdown': False,
                             'sw_thermal_slowdown': False},
        'pcie': {'link_gen_current': 5, 'link_gen_max': 5, 'link_width_current': 16, 'link_width_max': 16},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(gpu.get(key), dict):
            gpu[key] = dict(gpu[key], **value)
        else:
            gpu[key] = value
    return gpu


def codes(findings):
    return [finding['code'] for finding in findings]


def only(findings, code):
    matching = [finding for finding in findings if finding['code'] == code]
    assert len(matching) == 1, findings
    return matching[0]


# --- kernel log parsing ----------------------------------------------------


@pytest.mark.parametrize('name, expected', [
    ('dmesg_raw_a100_ecc.txt', [('xid', 48, '0000:52:00.0'), ('xid', 63, '0000:52:00.0'),
                                ('xid', 94, '0000:52:00.0'), ('xid', 63, '0000:10:1c.0')]),
    ('dmesg_raw_fallen_off_bus.txt', [('xid', 79, '0000:18:00.0'), ('fallen_off_bus', None, '0000:18:00.0'),
                                      ('fallen_off_bus', None, '0000:2e:00.0')]),
    ('dmesg_ctime_gsp_timeout.txt', [('xid', 119, '0000:61:00.0')] * 3 + [('xid', 13, '0000:cb:00.0')] * 2
     + [('xid', 109, '0000:cb:00.0')]),
    ('journal_short_dbe_retirement.txt', [('xid', 48, '0000:07:00.0'), ('xid', 64, '0000:07:00.0')]),
    ('journal_short_iso_nvlink5.txt', [('xid', 149, '0009:01:00.0'), ('xid', 154, '0009:01:00.0'),
                                       ('xid', 45, '0009:01:00.0'), ('xid', 154, '0018:01:00.0'),
                                       ('xid', 94, '0000:01:00.0'), ('xid', 92, '0000:9b:00.0')]),
    ('nvswitch_sxid.txt', [('sxid', 22013, '0000:08:00.0'), ('sxid', 24007, '0000:c3:00.0'),
                           ('sxid', 20009, '0000:06:00.0')]),
    ('dmesg_healthy.txt', []),
])
def test_parse_xid_events_on_real_format_logs(name, expected):
    events = parse_xid_events(fixture(name))
    assert [(event['kind'], event['code'], event['pci_bus_id']) for event in events] == expected


def test_dmesg_raw_stamp_becomes_uptime_and_unknown_pid_none():
    event = parse_xid_events(fixture('dmesg_raw_a100_ecc.txt'))[0]
    assert event['uptime_seconds'] == pytest.approx(430954.509105)
    assert event['timestamp'] is None
    assert event['pid'] is None and event['process'] is None
    assert event['message'].startswith('An uncorrectable double bit error (DBE)')


def test_dmesg_ctime_stamp_pid_and_process_name():
    event = parse_xid_events(fixture('dmesg_ctime_gsp_timeout.txt'))[0]
    assert event['timestamp'] == 'Fri Mar  3 04:27:08 2023'
    assert event['uptime_seconds'] is None
    assert (event['pid'], event['process']) == (1346198, 'nvidia-smi')
    assert event['message'].startswith('Timeout waiting for RPC from GSP!')


def test_journal_short_keeps_wall_clock_and_embedded_uptime():
    event = parse_xid_events(fixture('journal_short_dbe_retirement.txt'))[1]
    assert event['timestamp'] == 'Dec  2 11:38:47'
    assert event['uptime_seconds'] == pytest.approx(219.47105)
    assert event['message'].startswith('Dynamic Page Retirement: Blacklisting failed.')


def test_journal_short_iso_and_mig_gpu_instance():
    events = parse_xid_events(fixture('journal_short_iso_nvlink5.txt'))
    assert events[0]['timestamp'] == '2025-12-08T09:14:02+0000'
    mig = events[4]
    assert (mig['code'], mig['gpu_instance'], mig['pid']) == (94, 5, 7194)
    assert mig['message'] == 'Contained: CE User Channel (0x9). RST: No, D-RST: No'


def test_sxid_continuation_lines_are_not_separate_events():
    events = parse_xid_events(fixture('nvswitch_sxid.txt'))
    assert [(event['code'], event['fatal'], event['switch']) for event in events] == [
        (22013, False, 'nvidia-nvswitch3'), (24007, True, 'nvidia-nvswitch0'), (20009, False, 'nvidia-nvswitch1')]


@pytest.mark.parametrize('line, code, pci', [
    # /dev/kmsg record as read by tools that dump it raw
    ('6,1000,100;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.', 79, '0000:3b:00.0'),
    # very old drivers: no PCI: prefix and no pid
    ('[24128.834365] NVRM: Xid (0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000', 31, '0000:01:00.0'),
    # journalctl -o short-precise
    ('Sep 12 14:25:44.984246 host kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.', 79,
     '0000:01:00.0'),
])
def test_other_line_prefixes(line, code, pci):
    events = parse_xid_events(line)
    assert [(event['code'], event['pci_bus_id']) for event in events] == [(code, pci)]


def test_lines_that_only_mention_xid_are_ignored():
    text = ('NVRM: Xid error: xyz, invalid data\n'
            'kernel: nvidia-modeset: ERROR: GPU:0: Idling display engine timed out\n'
            'slurmstepd: error: Detected 1 oom_kill event\n')
    assert parse_xid_events(text) == []
    assert parse_xid_events('') == [] and parse_xid_events(None) == []


def test_events_within_uses_uptime_and_keeps_events_of_unknown_age():
    events = parse_xid_events(fixture('dmesg_raw_a100_ecc.txt')) + parse_xid_events(
        fixture('dmesg_ctime_gsp_timeout.txt'))
    # "now" is 431010 s since boot: a 30 s window keeps only the Xid 63 at 431002 s
    # (the ones at 430954 s are 56 s old) and the ctime-stamped events, whose age
    # is not known.
    kept = events_within(events, 431010.0, 30)
    assert [event['code'] for event in kept] == [63, 119, 119, 119, 13, 13, 109]
    assert kept[0]['pci_bus_id'] == '0000:10:1c.0'
    assert events_within(events, None, 60) == events
    assert events_within(events, 431010.0, None) == events


# --- the catalogue -----------------------------------------------------------


@pytest.mark.parametrize('codes_, category, severity', [
    ((48, 64, 74, 79, 95, 119, 120), 'drain', 'critical'),
    ((61, 62), 'reset', 'critical'),
    ((63, 94), 'reset_when_convenient', 'warning'),
    ((92,), 'trend', 'info'),
    ((13, 31, 43, 45, 68), 'application', 'info'),
    ((8, 32, 69, 149, 999), 'investigate', 'warning'),
])
def test_catalogue_categories(codes_, category, severity):
    for code in codes_:
        info = xid_info(code)
        assert (info.category, info.severity) == (category, severity), code
        assert info.name and info.meaning and info.advice


def test_catalogue_names_and_specific_advice():
    assert xid_info(79).name == 'GPU has fallen off the bus'
    assert 'reboot' in xid_info(79).advice.lower()
    assert xid_info(94).advice.startswith('Restart only the affected application')
    assert xid_info(999).name == 'Xid 999'
    assert 'not in the catalogue' in xid_info(999).meaning


@pytest.mark.parametrize('message, category', [
    ('GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)', 'drain'),
    ('GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)', 'reset'),
    ('GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)', 'drain'),
    ('GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)', 'trend'),
    ('something the driver may print one day', 'investigate'),
])
def test_xid_154_category_follows_the_new_recovery_action(message, category):
    assert xid_info(154, message).category == category


# --- evaluate: healthy host --------------------------------------------------


def test_healthy_host_has_no_findings():
    gpus = [healthy_gpu(i, '0000:%02x:00.0' % (0x18 + i)) for i in range(8)]
    nvlink = parse_nvlink_status(''.join(
        'GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%d)\n' % (i, i)
        + ''.join('\t Link %d: 26.562 GB/s\n' % link for link in range(18)) for i in range(8)))
    findings = evaluate(gpus, parse_xid_events(fixture('dmesg_healthy.txt')), expected_count=8,
                        nvlink=nvlink, smi_seconds=0.4)
    assert findings == []
    assert is_healthy(findings)
    assert summarize(findings) == {'critical': 0, 'warning': 0, 'info': 0}


def test_missing_readings_yield_no_findings():
    gpu = dict((key, None) for key in gpu_health.HEALTH_FIELDS)
    gpu.update(index=0, pci_bus_id='0000:01:00.0')
    assert evaluate([gpu]) == []


# --- evaluate: Xid findings --------------------------------------------------


def test_xid_findings_are_grouped_per_gpu_and_code_and_matched_to_gpus():
    gpus = [healthy_gpu(0, '0000:52:00.0'), healthy_gpu(1, '0000:10:1c.0')]
    findings = evaluate(gpus, parse_xid_events(fixture('dmesg_raw_a100_ecc.txt')))
    assert codes(findings) == ['xid_48', 'xid_63', 'xid_94', 'xid_63']
    dbe = findings[0]
    # Xid 48's category is drain; the catalog's action is the GPU reset that retires or remaps the memory.
    assert (dbe['severity'], dbe['xid_category'], dbe['action'], dbe['source']) == (
        'critical', 'drain', 'reset', 'nvidia-xid')
    assert dbe['gpu'] == {'index': 0, 'uuid': gpus[0]['uuid'], 'pci_bus_id': '0000:52:00.0'}
    assert dbe['xid_name'] == 'Double-bit ECC error' and dbe['count'] == 1
    assert dbe['first_seen'] == dbe['last_seen'] == '430954.509105 s after boot'
    assert 'physAddr 0x18f31d80' in dbe['evidence']
    assert findings[3]['gpu']['index'] == 1 and findings[3]['severity'] == 'warning'
    assert not is_healthy(findings)


def test_repeated_xids_become_one_finding_with_count_and_times():
    findings = evaluate([], parse_xid_events(fixture('dmesg_ctime_gsp_timeout.txt')))
    gsp = only(findings, 'xid_119')
    assert gsp['count'] == 3 and gsp['severity'] == 'critical'
    assert (gsp['first_seen'], gsp['last_seen']) == ('Fri Mar  3 04:27:08 2023', 'Fri Mar  3 04:28:38 2023')
    # the GPU is not in the (empty) GPU list: the finding still names its address
    assert gsp['gpu'] == {'index': None, 'uuid': None, 'pci_bus_id': '0000:61:00.0'}
    app = only(findings, 'xid_13')
    assert (app['severity'], app['xid_category'], app['action'], app['count']) == ('info', 'application', 'none', 2)
    assert only(findings, 'xid_109')['action'] == 'reset'
    # A GSP that stopped answering comes back only with a reboot.
    assert gsp['action'] == 'reboot'


def test_application_xids_alone_keep_the_host_healthy():
    text = ('[100.1] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000010, intr 00000000. '
            'MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f1b_6c000000. Fault is of type FAULT_PDE\n'
            '[100.2] NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000010\n'
            '[100.3] NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000010\n'
            '[100.4] NVRM: Xid (PCI:0000:3b:00): 68, pid=5000, name=ffmpeg, NVDEC0 Exception: Error code 0x1\n')
    findings = evaluate([healthy_gpu()], parse_xid_events(text))
    assert sorted(codes(findings)) == ['xid_31', 'xid_43', 'xid_45', 'xid_68']
    assert set(finding['severity'] for finding in findings) == {'info'}
    assert is_healthy(findings)
    assert not is_healthy(findings, fail_on='info')


def test_trend_and_investigate_categories():
    findings = evaluate([], parse_xid_events(fixture('journal_short_iso_nvlink5.txt')))
    by_code = dict(((f['code'], f['gpu']['pci_bus_id']), f) for f in findings)
    assert by_code[('xid_92', '0000:9b:00.0')]['severity'] == 'info'
    assert by_code[('xid_149', '0009:01:00.0')]['severity'] == 'warning'
    # Xid 154's action is the recovery action its line names: "Drain and Reset", then "GPU Reset Required".
    assert by_code[('xid_154', '0009:01:00.0')]['xid_category'] == 'drain'
    assert by_code[('xid_154', '0009:01:00.0')]['action'] == 'reset'
    assert by_code[('xid_154', '0018:01:00.0')]['action'] == 'reset'
    assert by_code[('xid_94', '0000:01:00.0')]['xid_category'] == 'reset_when_convenient'
    assert by_code[('xid_94', '0000:01:00.0')]['action'] == 'reset'
    assert by_code[('xid_92', '0000:9b:00.0')]['action'] == 'watch'


def test_ignore_xids_drops_only_those_codes():
    events = parse_xid_events(fixture('dmesg_raw_a100_ecc.txt'))
    findings = evaluate([], events, thresholds={'ignore_xids': [63, 94]})
    assert codes(findings) == ['xid_48']


def test_fallen_off_bus_without_xid_is_reported_once_per_gpu():
    gpus = [healthy_gpu(0, '0000:18:00.0'), healthy_gpu(1, '0000:2e:00.0')]
    findings = evaluate(gpus, parse_xid_events(fixture('dmesg_raw_fallen_off_bus.txt')))
    assert codes(findings) == ['xid_79', 'gpu_fell_off_bus']
    assert findings[0]['gpu']['index'] == 0
    lost = findings[1]
    assert lost['gpu']['index'] == 1 and lost['severity'] == 'critical'


def test_sxid_severity_follows_fatal_flag():
    findings = evaluate([], parse_xid_events(fixture('nvswitch_sxid.txt')))
    fatal = only(findings, 'sxid_24007')
    assert fatal['severity'] == 'critical' and fatal['gpu'] is None
    assert fatal['nvswitch'] == {'name': 'nvidia-nvswitch0', 'pci_bus_id': '0000:c3:00.0'}
    assert only(findings, 'sxid_22013')['severity'] == 'warning'
    assert only(findings, 'sxid_22013')['count'] == 1
    assert 'SXid 22013 non-fatal logged 1 time' in only(findings, 'sxid_22013')['evidence']
    unstated = evaluate([], parse_xid_events(
        'nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 10001, PRI WRITE SYSB error, instance=3'))
    assert unstated[0]['severity'] == 'warning' and 'of unstated severity' in unstated[0]['evidence']


# --- evaluate: per-GPU readings ----------------------------------------------


def test_uncorrectable_ecc_volatile_is_critical():
    findings = evaluate([healthy_gpu(ecc_errors={'volatile_uncorrected': 2, 'aggregate_uncorrected': 2})])
    assert codes(findings) == ['ecc_uncorrectable_volatile', 'ecc_uncorrectable_history']
    assert findings[0]['severity'] == 'critical'
    assert '2 uncorrectable ECC errors since the driver was loaded' in findings[0]['evidence']
    assert findings[1]['severity'] == 'info'


def test_aggregate_ecc_is_history_unless_over_the_limit():
    gpu = healthy_gpu(ecc_errors={'aggregate_uncorrected': 3})
    assert only(evaluate([gpu]), 'ecc_uncorrectable_history')['severity'] == 'info'
    assert only(evaluate([gpu], thresholds={'ecc_aggregate_uncorrectable_max': 2}),
                'ecc_uncorrectable_history')['severity'] == 'warning'
    assert only(evaluate([gpu], thresholds={'ecc_aggregate_uncorrectable_max': 3}),
                'ecc_uncorrectable_history')['severity'] == 'info'


def test_pending_remap_retired_pages_and_remap_failure():
    findings = evaluate([
        healthy_gpu(0, remapped_rows={'pending': True, 'uncorrectable': 1}),
        healthy_gpu(1, '0000:3c:00.0', remapped_rows={'failure': True}),
        # before Ampere: no row remapper, pages are retired instead
        healthy_gpu(2, '0000:3d:00.0', remapped_rows=None, retired_pages={'pending': True}),
    ])
    assert [(f['code'], f['severity'], f['gpu']['index']) for f in findings] == [
        ('remapped_rows_failure', 'critical', 1),
        ('remapped_rows_pending', 'warning', 0),
        ('retired_pages_pending', 'warning', 2),
    ]
    assert '1 uncorrectable rows remapped so far' in findings[1]['evidence']


@pytest.mark.parametrize('temperature, margin, expected', [
    (80, 5, []),
    (82, 5, [('temperature_near_slowdown', 'warning')]),
    (86, 5, [('temperature_near_slowdown', 'warning')]),
    (87, 5, [('temperature_at_slowdown', 'critical')]),
    (80, 10, [('temperature_near_slowdown', 'warning')]),
    (86, 0, []),
])
def test_temperature_against_the_gpus_own_slowdown_threshold(temperature, margin, expected):
    findings = evaluate([healthy_gpu(temperature={'gpu_c': temperature})], thresholds={'temperature_margin_c': margin})
    assert [(f['code'], f['severity']) for f in findings] == expected


def test_temperature_without_a_slowdown_threshold_is_not_judged():
    assert evaluate([healthy_gpu(temperature={'gpu_c': 95, 'slowdown_c': None})]) == []


@pytest.mark.parametrize('active, expected', [
    ({'hw_slowdown': True}, [('hw_slowdown', 'critical')]),
    ({'hw_slowdown': True, 'hw_thermal_slowdown': True}, [('hw_thermal_slowdown', 'critical')]),
    ({'hw_slowdown': True, 'hw_power_brake_slowdown': True}, [('hw_power_brake_slowdown', 'critical')]),
    ({'sw_thermal_slowdown': True}, [('sw_thermal_slowdown', 'warning')]),
    ({'sw_power_cap': True, 'gpu_idle': True}, []),
])
def test_throttle_reasons(active, expected):
    gpu = healthy_gpu()
    gpu['throttle_reasons'] = dict(gpu['throttle_reasons'], **active)
    assert [(f['code'], f['severity']) for f in evaluate([gpu])] == expected


@pytest.mark.parametrize('overrides, expected', [
    ({'pcie': {'link_width_current': 8}}, ['pcie_link_width_degraded']),
    # idle GPUs drop their link generation to save power: not a finding
    ({'pcie': {'link_gen_current': 1}, 'utilization_gpu_percent': 0}, []),
    ({'pcie': {'link_gen_current': 3}, 'utilization_gpu_percent': 97}, ['pcie_link_gen_degraded']),
    ({'pcie': {'link_gen_current': 3}, 'utilization_gpu_percent': 49}, []),
    # MIG mode reports no utilisation: the generation cannot be judged
    ({'pcie': {'link_gen_current': 3}, 'utilization_gpu_percent': None}, []),
    ({'pcie': {'link_width_current': 8, 'link_gen_current': 4}},
     ['pcie_link_gen_degraded', 'pcie_link_width_degraded']),
])
def test_pcie_link(overrides, expected):
    findings = evaluate([healthy_gpu(**overrides)])
    assert codes(findings) == expected
    assert all(f['severity'] == 'warning' for f in findings)


def test_pcie_thresholds():
    gpu = healthy_gpu(pcie={'link_gen_current': 3, 'link_width_current': 8}, utilization_gpu_percent=20)
    assert codes(evaluate([gpu], thresholds={'pcie_gen_min_utilization': 10})) == [
        'pcie_link_gen_degraded', 'pcie_link_width_degraded']
    assert evaluate([gpu], thresholds={'check_pcie': False}) == []


def test_persistence_mode_off():
    gpu = healthy_gpu(persistence_mode=False)
    finding = only(evaluate([gpu]), 'persistence_mode_off')
    assert finding['severity'] == 'warning' and 'nvidia-persistenced' in finding['advice']
    assert evaluate([gpu], thresholds={'require_persistence': False}) == []


def test_fewer_gpus_than_expected():
    gpus = [healthy_gpu(i, '0000:%02x:00.0' % (0x18 + i)) for i in range(7)]
    finding = only(evaluate(gpus, expected_count=8), 'gpu_count_low')
    assert finding['severity'] == 'critical' and finding['gpu'] is None
    assert (finding['found'], finding['expected']) == (7, 8)
    assert 'sees 7 of 8 expected GPUs' in finding['evidence']
    assert evaluate(gpus, expected_count=7) == []
    assert evaluate(gpus + [healthy_gpu(7, '0000:1f:00.0')], expected_count=7) == []


# --- evaluate: NVLink -------------------------------------------------------

NVLINK_ONE_DOWN = """GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-0)
\t Link 0: 25 GB/s
\t Link 1: 25 GB/s
\t Link 2: 25 GB/s
GPU 1: Tesla V100-SXM2-32GB (UUID: GPU-1)
\t Link 0: 25 GB/s
\t Link 1: <inactive>
\t Link 2: 25 GB/s
"""


def test_nvlink_down_is_judged_against_the_best_connected_gpu_of_the_same_model():
    # A model the catalog gives no link count: the best-connected GPU of the same model sets it.
    gpus = [healthy_gpu(0, name='Tesla V100-SXM2-32GB'),
            healthy_gpu(1, '0000:3c:00.0', name='Tesla V100-SXM2-32GB'),
            healthy_gpu(2, '0000:3d:00.0', name='Tesla T4')]
    findings = evaluate(gpus, nvlink=parse_nvlink_status(NVLINK_ONE_DOWN))
    finding = only(findings, 'nvlink_down')
    assert finding['gpu']['index'] == 1 and finding['severity'] == 'critical'
    assert (finding['nvlink_active'], finding['nvlink_expected']) == (2, 3)
    assert finding['threshold'] == {'name': 'nvlink_expected_active', 'value': 3, 'source': 'host'}
    assert 'not active: 1' in finding['evidence']


def test_nvlink_down_is_judged_against_the_catalogs_links_for_the_model():
    # The real A100 capture (gpud, 8 GPUs x 12 links): the catalog's 12 for the A100 SXM4.
    text = real_capture('nvlink/a100-sxm4-80gb_unknown_gpud.txt')
    gpus = [healthy_gpu(i, '0000:%02x:00.0' % (0x10 + i), name='NVIDIA A100-SXM4-80GB') for i in range(8)]
    assert evaluate(gpus, nvlink=parse_nvlink_status(text)) == []
    # The same host with link 11 of GPU 3 down on every GPU of the host: the best-connected GPU no longer
    # tells, the catalog still does.
    down = '\n'.join(line.replace('25 GB/s', '<inactive>') if line.strip().startswith('Link 11:') else line
                     for line in text.splitlines())
    findings = evaluate(gpus, nvlink=parse_nvlink_status(down))
    assert sorted(f['gpu']['index'] for f in findings if f['code'] == 'nvlink_down') == list(range(8))
    assert findings[0]['threshold'] == {'name': 'nvlink_expected_active', 'value': 12, 'source': 'nvidia-nvlink'}
    assert (findings[0]['action'], findings[0]['source']) == ('reset', 'nvidia-nvlink')


def test_nvlink_expected_count_and_silent_gpus():
    status = parse_nvlink_status(NVLINK_ONE_DOWN)
    gpus = [healthy_gpu(0), healthy_gpu(1, '0000:3c:00.0'), healthy_gpu(2, '0000:3d:00.0')]
    findings = evaluate(gpus, nvlink=status, thresholds={'nvlink_expected_active': 3})
    assert [f['gpu']['index'] for f in findings] == [1, 2]
    assert 'no NVLink state' in findings[1]['evidence']


def test_gpus_whose_nvlink_state_nvidia_smi_cannot_tell_are_not_judged():
    # Real R590 output for an H100 in MIG mode next to one with its links, and a bad A100 whose links are all down.
    status = parse_nvlink_status(
        'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n'
        'Nvlink queries are not supported for Devices in MIG mode\n'
        'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n' + ''.join('\t Link %d: 26.562 GB/s\n' % n for n in range(18)) +
        'GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n'
        'NVML: Unable to retrieve NVLink information as all links are inactive\n')
    gpus = [healthy_gpu(i, '0000:%02x:00.0' % (0x18 + i)) for i in range(3)]
    findings = evaluate(gpus, nvlink=status)
    assert [(f['code'], f['gpu']['index']) for f in findings] == [('nvlink_down', 2)]
    assert codes(evaluate(gpus, nvlink=status, thresholds={'nvlink_expected_active': 18})) == codes(findings)


def test_no_active_nvlink_anywhere_means_no_nvlink_in_use():
    status = parse_nvlink_status('GPU 0: NVIDIA L4 (UUID: GPU-0)\n\t Link 0: <inactive>\n\t Link 1: <inactive>\n')
    assert evaluate([healthy_gpu(0, name='NVIDIA L4')], nvlink=status) == []


# --- evaluate: nvidia-smi itself and the kernel log ---------------------------


@pytest.mark.parametrize('reason', ['driver_not_loaded', 'version_mismatch', 'gpu_lost', 'no_devices', 'timeout'])
def test_nvidia_smi_failures_are_critical_findings(reason):
    failure = {'reason': reason, 'hint': 'Do the thing.', 'rc': 9, 'stdout': '',
               'stderr': 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\nmore'}
    findings = evaluate([], smi_failure=failure, expected_count=8)
    assert codes(findings) == ['nvidia_smi_%s' % reason]
    finding = findings[0]
    assert finding['severity'] == 'critical' and finding['reason'] == reason
    assert finding['evidence'] == ("nvidia-smi failed with rc 9 (%s): NVIDIA-SMI has failed because it couldn't "
                                   "communicate with the NVIDIA driver." % reason)
    assert finding['advice'].startswith('Do the thing.')


def test_slow_nvidia_smi_is_a_warning():
    finding = only(evaluate([healthy_gpu()], smi_seconds=12.34), 'nvidia_smi_slow')
    assert finding['severity'] == 'warning' and finding['seconds'] == 12.34
    assert 'took 12.3 s (limit 10.0 s)' in finding['evidence']
    assert evaluate([healthy_gpu()], smi_seconds=12.34, thresholds={'max_smi_seconds': 15}) == []


def test_unreadable_kernel_log_is_a_warning():
    finding = only(evaluate([healthy_gpu()], kernel_log_error='dmesg: read kernel buffer failed'),
                   'kernel_log_unavailable')
    assert finding['severity'] == 'warning' and 'read kernel buffer failed' in finding['evidence']


# --- ordering, summary, validation --------------------------------------------


def test_findings_sorted_by_severity_then_host_then_gpu():
    gpus = [healthy_gpu(0, persistence_mode=False), healthy_gpu(1, '0000:3c:00.0', ecc_errors={'volatile_uncorrected': 1})]
    findings = evaluate(gpus, expected_count=3, smi_seconds=30)
    assert [(f['severity'], f['code']) for f in findings] == [
        ('critical', 'gpu_count_low'), ('critical', 'ecc_uncorrectable_volatile'),
        ('warning', 'nvidia_smi_slow'), ('warning', 'persistence_mode_off')]
    assert summarize(findings) == {'critical': 2, 'warning': 2, 'info': 0}
    assert not is_healthy(findings, fail_on='critical')


def test_is_healthy_fail_on_levels():
    warning_only = evaluate([healthy_gpu(persistence_mode=False)])
    assert not is_healthy(warning_only, fail_on='warning')
    assert is_healthy(warning_only, fail_on='critical')
    with pytest.raises(ValueError):
        is_healthy(warning_only, fail_on='fatal')


def test_unknown_threshold_is_rejected():
    with pytest.raises(ValueError):
        evaluate([], thresholds={'temperature_margin': 5})


# --- health_view on real nvidia-smi -q -x captures ----------------------------


def _smi_gpu(name):
    with open(os.path.join(SMI_FIXTURES, name)) as handle:
        return parse_xml(handle.read())['gpus'][0]


def test_health_view_a100_r535_mig_mode():
    gpu = _smi_gpu('a100-sxm4-80gb_535_q.xml')
    view = health_view(gpu)
    # The record's own keys and values: nothing is renamed or converted again.
    assert set(view) == set(gpu_health.HEALTH_FIELDS)
    assert all(view[key] == gpu[key] for key in view)
    assert (view['index'], view['pci_bus_id'], view['name']) == (0, '0000:01:00.0', 'NVIDIA A100-SXM4-80GB')
    assert view['persistence_mode'] is False
    assert (view['temperature']['gpu_c'], view['temperature']['slowdown_c'], view['temperature']['shutdown_c']) == \
        (27, 89, 92)
    # MIG mode: no utilisation, and this capture has no row remapper section
    assert view['utilization_gpu_percent'] is None and view['remapped_rows'] is None
    assert (view['ecc_errors']['volatile_uncorrected'], view['ecc_errors']['aggregate_uncorrected']) == (0, 0)
    assert (view['pcie']['link_gen_current'], view['pcie']['link_gen_max']) == (4, 4)
    assert (view['pcie']['link_width_current'], view['pcie']['link_width_max']) == (16, 16)
    assert view['throttle_reasons']['hw_slowdown'] is False
    assert view['reset_required'] is False
    assert codes(evaluate([view])) == ['persistence_mode_off']
    assert codes(evaluate([gpu])) == ['persistence_mode_off']


def test_health_view_blackwell_r590_tlimit_and_idle_gen1():
    view = health_view(_smi_gpu('rtx-pro-6000-blackwell_590_q.xml'))
    # only T.Limit margins: 68 C below the limit, slowdown 2 C past it
    assert view['temperature']['slowdown_c'] is None
    assert (view['temperature']['tlimit_c'], view['temperature']['slowdown_tlimit_c']) == (68, -2)
    assert (view['remapped_rows']['pending'], view['remapped_rows']['failure']) == (False, False)
    assert view['recovery_action'] == 'None'
    # idle at PCIe gen 1 of 4: not a finding
    assert (view['pcie']['link_gen_current'], view['pcie']['link_gen_max'], view['utilization_gpu_percent']) == \
        (1, 4, 0)
    assert evaluate([view]) == []
    hot = dict(view, temperature=dict(view['temperature'], tlimit_c=1))
    assert codes(evaluate([hot])) == ['temperature_near_slowdown']
    assert only(evaluate([hot]), 'temperature_near_slowdown')['slowdown_headroom_c'] == 3


def test_health_view_t4_r515_narrow_link_and_retired_pages():
    view = health_view(_smi_gpu('tesla-t4_515_q.xml'))
    assert (view['retired_pages']['pending'], view['retired_pages']['double_bit_ecc']) == (False, 0)
    assert codes(evaluate([view])) == ['pcie_link_width_degraded', 'persistence_mode_off']
    assert evaluate([view], thresholds={'check_pcie': False, 'require_persistence': False}) == []


def test_health_view_v100_r460_busy():
    view = health_view(_smi_gpu('tesla-v100s-pcie-32gb_460_q.xml'))
    assert (view['utilization_gpu_percent'], view['temperature']['gpu_c'], view['temperature']['slowdown_c']) == \
        (97, 66, 87)
    assert evaluate([view], thresholds={'require_persistence': False}) == []


def test_smi_failure_naming_a_gpu_points_the_finding_at_it():
    failure = {'reason': 'gpu_unreadable', 'hint': 'Drain.', 'rc': 255, 'pci_bus_id': '0000:07:00.0',
               'stdout': 'Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n', 'stderr': ''}
    finding = only(evaluate([], smi_failure=failure), 'nvidia_smi_gpu_unreadable')
    assert finding['gpu'] == {'index': None, 'uuid': None, 'pci_bus_id': '0000:07:00.0'}
    assert finding['severity'] == 'critical'


@pytest.mark.parametrize('headroom, expected', [
    (70, []), (5, ['temperature_near_slowdown']), (0, ['temperature_at_slowdown']),
    (-3, ['temperature_at_slowdown']),
])
def test_tlimit_headroom(headroom, expected):
    # T.Limit margins only: headroom is the current margin less the (negative) slowdown margin.
    gpu = healthy_gpu(temperature={'slowdown_c': None, 'tlimit_c': headroom - 2, 'slowdown_tlimit_c': -2})
    assert codes(evaluate([gpu])) == expected


@pytest.mark.parametrize('overrides, expected', [
    ({'recovery_action': 'None'}, []),
    ({'recovery_action': 'Node Reboot Required'}, [('gpu_recovery_action', 'critical')]),
    ({'drain_and_reset_recommended': True}, [('gpu_drain_and_reset_recommended', 'critical')]),
    ({'reset_required': True}, [('gpu_reset_required', 'warning')]),
    # a pending remap explains the reset flag; one finding is enough
    ({'reset_required': True, 'remapped_rows': {'pending': True}}, [('remapped_rows_pending', 'warning')]),
])
def test_driver_recovery_flags(overrides, expected):
    findings = evaluate([healthy_gpu(**overrides)])
    assert [(f['code'], f['severity']) for f in findings] == expected


def test_nvidia_smi_warnings_and_nvlink_errors():
    findings = evaluate([healthy_gpu()], smi_warnings=['WARNING: infoROM is corrupted at gpu 0000:3B:00.0'],
                        nvlink_error=('info', 'nvidia-smi nvlink -s failed with rc 3'))
    assert [(f['code'], f['severity']) for f in findings] == [('nvidia_smi_warning', 'warning'),
                                                              ('nvlink_state_unavailable', 'info')]
    assert 'infoROM is corrupted' in findings[0]['evidence']


def test_timeout_is_not_also_reported_slow():
    failure = {'reason': 'timeout', 'hint': 'Hung.', 'rc': 124, 'stdout': '', 'stderr': ''}
    assert codes(evaluate([], smi_failure=failure, smi_seconds=35)) == ['nvidia_smi_timeout']


@pytest.mark.parametrize('text, seconds', [
    ('24h', 86400), ('30m', 1800), ('7d', 604800), ('1w', 604800), ('90', 90), ('45s', 45), (' 2H ', 7200),
    ('boot', None),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize('text', ['0h', '', 'yesterday', '-1h', '1.5h', '24 hours'])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)
