# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for nvidia_gpu_health with a mocked ``run_command``.

Each case lists every command the module must run, with its exact argv, in
order, and the answer the fake host gives. The nvidia-smi XML is built from
the real A100 / R535 capture in ``module_utils/fixtures/nvidia_smi``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os
import types
import xml.etree.ElementTree as ET

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils import nvidia_smi_runner
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import HEALTH_FIELDS
from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_gpu_health
from ansible_collections.gpufleet.nvidia.tests.unit.ansible_module_helpers import set_module_args

HERE = os.path.dirname(__file__)
A100_XML = os.path.join(HERE, '..', 'module_utils', 'fixtures', 'nvidia_smi', 'a100-sxm4-80gb_535_q.xml')
KERNEL_LOGS = os.path.join(HERE, '..', 'module_utils', 'fixtures', 'kernel_log')

TIMEOUT = ['/usr/bin/timeout', '--kill-after=5', '30']
SMI_XML = TIMEOUT + ['/usr/bin/nvidia-smi', '-q', '-x']
SMI_NVLINK = TIMEOUT + ['/usr/bin/nvidia-smi', 'nvlink', '-s']
SMI_NVLINK_ERRORS = TIMEOUT + ['/usr/bin/nvidia-smi', 'nvlink', '-e']
JOURNAL = TIMEOUT + ['/usr/bin/journalctl', '-k', '--no-pager', '--quiet', '--output=short-iso', '--since=-86400s']
DMESG = TIMEOUT + ['/usr/bin/dmesg']

DRIVER_NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
                     "the latest NVIDIA driver is installed and running.\n\n")
VERSION_MISMATCH = 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n'
JOURNAL_QUIET = ('2026-01-10T08:00:01+0000 gpu-node-01 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  '
                 '535.54.03  Tue Jun  6 22:20:39 UTC 2023\n')
JOURNAL_XID79 = JOURNAL_QUIET + ('2026-01-10T09:12:44+0000 gpu-node-01 kernel: NVRM: Xid (PCI:0000:02:00): 79, '
                                 'pid=0, GPU has fallen off the bus.\n')


def kernel_log(name):
    with open(os.path.join(KERNEL_LOGS, name)) as handle:
        return handle.read()


def _set(gpu, path, value):
    gpu.find(path).text = value


def smi_xml(*gpus):
    """``nvidia-smi -q -x`` output with one A100 per dict of overrides, on buses 01, 02, ..."""
    with open(A100_XML) as handle:
        text = handle.read()
    header, body = text.split('<nvidia_smi_log>', 1)
    root = ET.fromstring('<nvidia_smi_log>' + body)
    template = root.find('gpu')
    root.remove(template)
    root.find('attached_gpus').text = str(len(gpus))
    for number, overrides in enumerate(gpus):
        gpu = copy.deepcopy(template)
        bus = '%02X' % (number + 1)
        gpu.set('id', '00000000:%s:00.0' % bus)
        _set(gpu, 'pci/pci_bus_id', '00000000:%s:00.0' % bus)
        _set(gpu, 'pci/pci_bus', bus)
        _set(gpu, 'uuid', 'GPU-513536b6-7d19-9063-b049-1e69664bb2%02d' % number)
        _set(gpu, 'minor_number', str(number))
        _set(gpu, 'persistence_mode', overrides.get('persistence_mode', 'Enabled'))
        _set(gpu, 'utilization/gpu_util', overrides.get('gpu_util', '0 %'))
        _set(gpu, 'temperature/gpu_temp', overrides.get('gpu_temp', '34 C'))
        _set(gpu, 'pci/pci_gpu_link_info/link_widths/current_link_width', overrides.get('link_width', '16x'))
        _set(gpu, 'ecc_errors/volatile/dram_uncorrectable', overrides.get('dram_uncorrectable', '0'))
        remapped = gpu.find('remapped_rows')
        remapped.text = None
        for tag, value in (('remapped_row_corr', '0'), ('remapped_row_unc', overrides.get('remapped_unc', '0')),
                           ('remapped_row_pending', overrides.get('remap_pending', 'No')),
                           ('remapped_row_failure', overrides.get('remap_failure', 'No'))):
            ET.SubElement(remapped, tag).text = value
        root.append(gpu)
    return header + ET.tostring(root, encoding='unicode')


def nvlink_status(*links_per_gpu):
    lines = []
    for index, states in enumerate(links_per_gpu):
        lines.append('GPU %d: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb2%02d)'
                     % (index, index))
        lines.extend('\t Link %d: %s' % (link, '25 GB/s' if up else '<inactive>') for link, up in enumerate(states))
    return '\n'.join(lines) + '\n'


def nvlink_errors(*links_per_gpu, **errors):
    """``nvidia-smi nvlink -e`` in the real R535 layout: per link its replay, recovery and CRC counters, zero
    unless ``errors`` names ``<kind>_<gpu>_<link>`` (``replay_1_6=3``)."""
    lines = []
    for index, count in enumerate(links_per_gpu):
        lines.append('GPU %d: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb2%02d)'
                     % (index, index))
        for link in range(count):
            for kind, label in (('replay', 'Replay Errors'), ('recovery', 'Recovery Errors'), ('crc', 'CRC Errors')):
                lines.append('\t Link %d: %s: %s' % (link, label, errors.get('%s_%d_%d' % (kind, index, link), 0)))
            lines.append('')
    return '\n'.join(lines) + '\n'


class FakeHost(object):
    """Answers ``run_command`` from a script of (argv, rc, stdout, stderr) and records every call."""

    def __init__(self, script, binaries=('nvidia-smi', 'timeout', 'journalctl', 'dmesg')):
        self.script = list(script)
        self.calls = []
        self.binaries = binaries

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/bin/%s' % name if name in self.binaries else None

    def run_command(self, args, **kwargs):
        self.calls.append(list(args))
        assert self.script, 'unexpected command: %r' % (args,)
        expected, rc, stdout, stderr = self.script.pop(0)
        assert list(args) == expected
        assert kwargs.get('environ_update', {}).get('LC_ALL') == 'C'
        return rc, stdout, stderr

    def nvidia_smi_calls(self):
        return sum(1 for call in self.calls if '/usr/bin/nvidia-smi' in call)


def run_module(monkeypatch, module_exits, args, script, uptime=None, kernels=(), **host_options):
    exit_json, fail_json = module_exits
    host = FakeHost(script, **host_options)
    # The test machine's own /boot stays out of the results.
    monkeypatch.setattr(nvidia_gpu_health, 'installed_kernels', lambda: list(kernels))
    # Bound methods of the fake host: the module's own instance is not passed on.
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', host.get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', host.run_command)
    monkeypatch.setattr(nvidia_gpu_health, '_uptime', lambda: uptime)
    # The runner checks that an absolute binary path exists; the fake host's do.
    monkeypatch.setattr(nvidia_smi_runner, 'os', types.SimpleNamespace(path=types.SimpleNamespace(
        sep=os.path.sep, exists=lambda path: path.startswith('/usr/bin/') or os.path.exists(path))))
    with pytest.raises((exit_json, fail_json)) as caught:
        with set_module_args(args):
            nvidia_gpu_health.main()
    assert host.script == [], 'commands not run: %r' % host.script
    return caught.value.result, isinstance(caught.value, fail_json), host


def codes(result):
    return [finding['code'] for finding in result['findings']]


# --- table of whole-run cases ---------------------------------------------------

CASES = [
    dict(
        id='healthy-two-gpus-journal',
        args={},
        script=[(SMI_XML, 0, smi_xml({}, {}), ''),
                (SMI_NVLINK, 0, nvlink_status([1] * 12, [1] * 12), ''),
                (SMI_NVLINK_ERRORS, 0, nvlink_errors(12, 12), ''),
                (JOURNAL, 0, JOURNAL_QUIET, '')],
        healthy=True, codes=[], smi_calls=3, log_source='journal',
    ),
    dict(
        id='single-gpu-auto-skips-nvlink',
        args={},
        script=[(SMI_XML, 0, smi_xml({}), ''), (JOURNAL, 0, JOURNAL_QUIET, '')],
        healthy=True, codes=[], smi_calls=1, log_source='journal',
    ),
    dict(
        id='nvlink-never-and-no-kernel-log',
        args={'check_nvlink': 'never', 'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}, {}), '')],
        healthy=True, codes=[], smi_calls=1, log_source='none',
    ),
    dict(
        id='nvlink-always-on-one-gpu',
        args={'check_nvlink': 'always', 'nvlink_expected_active': 12, 'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}), ''), (SMI_NVLINK, 0, nvlink_status([1] * 11 + [0]), ''),
                (SMI_NVLINK_ERRORS, 0, nvlink_errors(12), '')],
        healthy=False, codes=['nvlink_down'], smi_calls=3, log_source='none',
    ),
    dict(
        id='nvlink-one-link-down',
        args={'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}, {}), ''),
                (SMI_NVLINK, 0, nvlink_status([1] * 12, [1] * 6 + [0] + [1] * 5), ''),
                (SMI_NVLINK_ERRORS, 0, nvlink_errors(12, 12), '')],
        healthy=False, codes=['nvlink_down'], smi_calls=3, log_source='none',
    ),
    dict(
        id='nvlink-replay-and-crc-errors',
        args={'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}, {}), ''),
                (SMI_NVLINK, 0, nvlink_status([1] * 12, [1] * 12), ''),
                (SMI_NVLINK_ERRORS, 0, nvlink_errors(12, 12, replay_1_6=3, crc_0_2=5), '')],
        healthy=False, codes=['nvlink_replay_errors', 'nvlink_crc_errors'], smi_calls=3, log_source='none',
    ),
    dict(
        id='nvlink-errors-unreadable-is-a-note',
        args={'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}, {}), ''),
                (SMI_NVLINK, 0, nvlink_status([1] * 12, [1] * 12), ''),
                (SMI_NVLINK_ERRORS, 0, 'GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)\n\t Link 0: Replay Errors: lots\n', '')],
        healthy=True, codes=['nvlink_state_unavailable'], smi_calls=3, log_source='none',
    ),
    dict(
        id='nvlink-unreadable-in-auto-is-info',
        args={'kernel_log_source': 'none'},
        script=[(SMI_XML, 0, smi_xml({}, {}), ''), (SMI_NVLINK, 3, '', 'Not Supported\n')],
        healthy=True, codes=['nvlink_state_unavailable'], smi_calls=2, log_source='none',
    ),
    dict(
        id='driver-not-loaded-is-a-finding',
        args={'expected_gpu_count': 2},
        script=[(SMI_XML, 9, DRIVER_NOT_LOADED, ''), (JOURNAL, 0, JOURNAL_QUIET, '')],
        healthy=False, codes=['nvidia_smi_driver_not_loaded'], smi_calls=1, log_source='journal',
    ),
    dict(
        id='version-mismatch-with-xid-in-journal',
        args={},
        script=[(SMI_XML, 18, VERSION_MISMATCH, ''), (JOURNAL, 0, JOURNAL_XID79, '')],
        healthy=False, codes=['nvidia_smi_version_mismatch', 'xid_79'], smi_calls=1, log_source='journal',
    ),
    dict(
        id='nvidia-smi-hangs',
        args={'kernel_log_source': 'none'},
        script=[(SMI_XML, 124, '', '')],
        healthy=False, codes=['nvidia_smi_timeout'], smi_calls=1, log_source='none',
    ),
    dict(
        id='nvidia-smi-not-installed',
        args={'kernel_log_source': 'none'},
        script=[],
        binaries=('timeout', 'journalctl', 'dmesg'),
        # attempted once; no process could start
        healthy=False, codes=['nvidia_smi_not_installed'], smi_calls=1, host_smi_calls=0, log_source='none',
    ),
    dict(
        id='gpu-readings',
        args={'expected_gpu_count': 3, 'kernel_log_source': 'none', 'check_nvlink': 'never'},
        script=[(SMI_XML, 0, smi_xml({'remap_pending': 'Yes', 'remapped_unc': '1'},
                                     {'persistence_mode': 'Disabled', 'gpu_temp': '86 C', 'link_width': '8x',
                                      'dram_uncorrectable': '2'}), '')],
        healthy=False,
        codes=['gpu_count_low', 'ecc_uncorrectable_volatile', 'remapped_rows_pending',
               'pcie_link_width_degraded', 'persistence_mode_off', 'temperature_near_slowdown'],
        smi_calls=1, log_source='none',
    ),
    dict(
        id='fail-on-critical-tolerates-warnings',
        args={'fail_on': 'critical', 'kernel_log_source': 'none', 'check_nvlink': 'never'},
        script=[(SMI_XML, 0, smi_xml({'persistence_mode': 'Disabled'}), '')],
        healthy=True, codes=['persistence_mode_off'], smi_calls=1, log_source='none',
    ),
    dict(
        id='journal-fails-dmesg-used',
        args={'check_nvlink': 'never', 'xid_window': '1h'},
        script=[(SMI_XML, 0, smi_xml({}), ''),
                (JOURNAL[:-1] + ['--since=-3600s'], 1, '', 'No journal files were found.\n'),
                (DMESG, 0, kernel_log('dmesg_raw_a100_ecc.txt'), '')],
        # 431010 s after boot: the Xids at 430954 s are within the hour
        uptime=431010.0,
        healthy=False, codes=['xid_48', 'xid_63', 'xid_63', 'xid_94'], smi_calls=1, log_source='dmesg',
    ),
    dict(
        id='empty-journal-falls-back-to-dmesg-window',
        args={'check_nvlink': 'never', 'xid_window': '30s'},
        script=[(SMI_XML, 0, smi_xml({}), ''),
                (JOURNAL[:-1] + ['--since=-30s'], 0, '', ''),
                (DMESG, 0, kernel_log('dmesg_raw_a100_ecc.txt'), '')],
        uptime=431010.0,
        healthy=False, codes=['xid_63'], smi_calls=1, log_source='dmesg',
    ),
    dict(
        id='dmesg-not-permitted',
        args={'check_nvlink': 'never', 'kernel_log_source': 'dmesg', 'xid_window': 'boot'},
        script=[(SMI_XML, 0, smi_xml({}), ''),
                (DMESG, 1, '', 'dmesg: read kernel buffer failed: Operation not permitted\n')],
        healthy=False, codes=['kernel_log_unavailable'], smi_calls=1, log_source='none',
    ),
    dict(
        id='journal-only-whole-boot',
        args={'check_nvlink': 'never', 'kernel_log_source': 'journal', 'xid_window': 'boot',
              'ignore_xids': [79]},
        script=[(SMI_XML, 0, smi_xml({}), ''), (JOURNAL[:-1], 0, JOURNAL_XID79, '')],
        healthy=True, codes=[], smi_calls=1, log_source='journal',
    ),
]


@pytest.mark.parametrize('case', CASES, ids=[case['id'] for case in CASES])
def test_module_runs(monkeypatch, module_exits, case):
    extra = {'binaries': case['binaries']} if 'binaries' in case else {}
    result, failed, host = run_module(monkeypatch, module_exits, case['args'], case['script'],
                                      uptime=case.get('uptime'), **extra)
    assert not failed, result
    assert result['changed'] is False
    assert result['healthy'] is case['healthy']
    assert codes(result) == case['codes']
    assert result['nvidia_smi_calls'] == case['smi_calls']
    assert host.nvidia_smi_calls() == case.get('host_smi_calls', case['smi_calls'])
    assert result['kernel_log']['source'] == case['log_source']
    assert sum(result['summary'].values()) == len(case['codes'])


def test_findings_carry_gpu_evidence_and_advice(monkeypatch, module_exits):
    result, failed, host = run_module(
        monkeypatch, module_exits, {'check_nvlink': 'never'},
        [(SMI_XML, 0, smi_xml({}, {}), ''), (JOURNAL, 0, JOURNAL_XID79, '')])
    finding = result['findings'][0]
    assert finding['code'] == 'xid_79' and finding['severity'] == 'critical'
    assert finding['gpu'] == {'index': 1, 'uuid': 'GPU-513536b6-7d19-9063-b049-1e69664bb201',
                              'pci_bus_id': '0000:02:00.0'}
    assert 'GPU has fallen off the bus' in finding['evidence']
    assert (finding['action'], finding['source'], finding['xid_category']) == ('reboot', 'nvidia-xid', 'drain')
    assert 'reboot' in finding['advice']
    assert result['driver_version'] == '535.54.03'
    assert [gpu['index'] for gpu in result['gpus']] == [0, 1]
    # The readings are the GPU record under its own keys, as nvidia_smi_info returns it.
    assert sorted(result['gpus'][0]) == sorted(HEALTH_FIELDS)
    assert result['gpus'][1]['pci_bus_id'] == '0000:02:00.0'
    assert result['gpus'][0]['persistence_mode'] is True
    assert result['kernel_log'] == {'source': 'journal', 'window_seconds': 86400, 'events': 1}


def _kernel(release, modules=(), headers=True):
    return {'release': release, 'image': '/boot/vmlinuz-' + release, 'initramfs': None, 'initramfs_mtime': None,
            'modules': True, 'headers': headers, 'modules_dep': True, 'nvidia_modules': list(modules)}


def test_a_newer_kernel_without_the_module_is_critical(monkeypatch, module_exits):
    """A kernel update installed without headers: the next boot has no GPU driver."""
    kernels = [_kernel('6.1.0-56-cloud-amd64', ['updates/dkms/nvidia-current.ko']),
               _kernel('6.1.0-57-cloud-amd64', headers=False)]
    result, failed, host = run_module(monkeypatch, module_exits, {'kernel_log_source': 'none', 'check_nvlink': 'never'},
                                      [(SMI_XML, 0, smi_xml({}), '')], kernels=kernels)
    assert codes(result) == ['kernel_without_nvidia_module'] and not result['healthy']
    (finding,) = result['findings']
    assert finding['severity'] == 'critical' and finding['kernel'] == '6.1.0-57-cloud-amd64'
    assert 'bootloader starts by default' in finding['evidence']


def test_kernels_that_all_have_the_module_raise_nothing(monkeypatch, module_exits):
    kernels = [_kernel('6.1.0-56-cloud-amd64', ['updates/dkms/nvidia-current.ko']),
               _kernel('6.1.0-57-cloud-amd64', ['updates/dkms/nvidia-current.ko'])]
    result, failed, host = run_module(monkeypatch, module_exits, {'kernel_log_source': 'none', 'check_nvlink': 'never'},
                                      [(SMI_XML, 0, smi_xml({}), '')], kernels=kernels)
    assert codes(result) == [] and result['healthy']


def test_kernel_check_can_be_turned_off(monkeypatch, module_exits):
    kernels = [_kernel('6.1.0-56-cloud-amd64', ['updates/dkms/nvidia.ko']), _kernel('6.1.0-57-cloud-amd64')]
    result, failed, host = run_module(monkeypatch, module_exits,
                                      {'kernel_log_source': 'none', 'check_nvlink': 'never', 'check_kernel_modules': False},
                                      [(SMI_XML, 0, smi_xml({}), '')], kernels=kernels)
    assert codes(result) == []


def test_driver_not_loaded_returns_evidence_and_hint_without_failing(monkeypatch, module_exits):
    result, failed, host = run_module(monkeypatch, module_exits, {'kernel_log_source': 'none'},
                                      [(SMI_XML, 9, DRIVER_NOT_LOADED, '')])
    assert not failed
    finding = result['findings'][0]
    assert finding['reason'] == 'driver_not_loaded'
    assert finding['evidence'].startswith("nvidia-smi failed with rc 9 (driver_not_loaded): NVIDIA-SMI has failed")
    assert 'modprobe nvidia' in finding['advice']
    assert result['gpus'] == [] and result['driver_version'] is None


def test_check_mode_reads_the_same_way(monkeypatch, module_exits):
    result, failed, host = run_module(
        monkeypatch, module_exits, {'_ansible_check_mode': True, 'kernel_log_source': 'none'},
        [(SMI_XML, 0, smi_xml({}, {'persistence_mode': 'Disabled'}), ''),
         (SMI_NVLINK, 0, nvlink_status([1] * 12, [1] * 12), ''),
         (SMI_NVLINK_ERRORS, 0, nvlink_errors(12, 12), '')])
    assert not failed and result['changed'] is False
    assert codes(result) == ['persistence_mode_off']
    assert host.calls == [SMI_XML, SMI_NVLINK, SMI_NVLINK_ERRORS]


@pytest.mark.parametrize('stdout', [
    'Segmentation fault\n',
    '<html><body>proxy error</body></html>\n',
    '<?xml version="1.0" ?>\n<nvidia_smi_log><gpu id="00000000:01:00.0"><product_name>A100',
])
def test_garbage_output_fails_cleanly_with_a_hint(monkeypatch, module_exits, stdout):
    result, failed, host = run_module(monkeypatch, module_exits, {'kernel_log_source': 'none'},
                                      [(SMI_XML, 0, stdout, '')])
    assert failed
    assert result['reason'] == 'unparsable_output'
    assert 'nvidia_smi_path' in result['msg']
    assert result['stdout'] == stdout and result['rc'] == 0


def test_fail_when_unhealthy_fails_with_the_findings(monkeypatch, module_exits):
    result, failed, host = run_module(
        monkeypatch, module_exits, {'fail_when_unhealthy': True, 'kernel_log_source': 'none'},
        [(SMI_XML, 9, DRIVER_NOT_LOADED, '')])
    assert failed
    assert result['msg'] == ('GPU health check failed: 1 critical, 0 warning, 0 info finding(s): '
                             'nvidia_smi_driver_not_loaded')
    assert result['healthy'] is False and codes(result) == ['nvidia_smi_driver_not_loaded']


def test_fail_when_unhealthy_passes_a_healthy_host(monkeypatch, module_exits):
    result, failed, host = run_module(
        monkeypatch, module_exits, {'fail_when_unhealthy': True, 'kernel_log_source': 'none'},
        [(SMI_XML, 0, smi_xml({}), '')])
    assert not failed and result['healthy'] is True


def test_kernel_log_file_source(monkeypatch, module_exits):
    path = os.path.join(KERNEL_LOGS, 'nvswitch_sxid.txt')
    result, failed, host = run_module(
        monkeypatch, module_exits, {'kernel_log_source': 'file', 'kernel_log_path': path, 'check_nvlink': 'never'},
        [(SMI_XML, 0, smi_xml({}), '')])
    assert codes(result) == ['sxid_24007', 'sxid_20009', 'sxid_22013']
    assert result['kernel_log'] == {'source': 'file', 'window_seconds': 86400, 'events': 3}


def test_slow_nvidia_smi(monkeypatch, module_exits):
    clock = iter(range(0, 1000, 6))
    monkeypatch.setattr(nvidia_gpu_health.time, 'monotonic', lambda: next(clock))
    result, failed, host = run_module(monkeypatch, module_exits, {'kernel_log_source': 'none'},
                                      [(SMI_XML, 0, smi_xml({}), '')])
    assert codes(result) == ['nvidia_smi_slow']
    assert result['nvidia_smi_seconds'] == 18


@pytest.mark.parametrize('args, message', [
    ({'xid_window': '0h'}, 'xid_window'),
    ({'xid_window': 'yesterday'}, 'xid_window'),
    ({'temperature_margin_c': -1}, 'temperature_margin_c must not be negative'),
    ({'max_smi_seconds': 0}, 'max_smi_seconds must be positive'),
    ({'kernel_log_source': 'file'}, 'kernel_log_path'),
    ({'kernel_log_source': 'file', 'kernel_log_path': '/nonexistent/dmesg.txt'}, 'cannot read kernel_log_path'),
])
def test_bad_parameters_fail_before_or_without_traceback(monkeypatch, module_exits, args, message):
    script = [(SMI_XML, 0, smi_xml({}), '')] if args.get('kernel_log_path') else []
    result, failed, host = run_module(monkeypatch, module_exits, dict(args, check_nvlink='never'), script)
    assert failed and message in result['msg']


# --- memory between runs and the catalog's overrides ---------------------------------


def test_an_xid_is_reported_once_and_again_only_when_it_recurs(monkeypatch, module_exits, tmp_path):
    state = str(tmp_path / 'gpufleet' / 'health-state.json')
    args = {'check_nvlink': 'never', 'state_path': state}
    first, failed, _host = run_module(monkeypatch, module_exits, args,
                                      [(SMI_XML, 0, smi_xml({}, {}), ''), (JOURNAL, 0, JOURNAL_XID79, '')])
    assert codes(first) == ['xid_79'] and first['state']['written'] and first['state']['previous_run'] is None
    assert oct(os.stat(state).st_mode & 0o777) == '0o600' and first['changed'] is False
    second, failed, _host = run_module(monkeypatch, module_exits, args,
                                       [(SMI_XML, 0, smi_xml({}, {}), ''), (JOURNAL, 0, JOURNAL_XID79, '')])
    assert codes(second) == [] and second['healthy']
    assert [f['code'] for f in second['already_reported']] == ['xid_79']
    assert second['state']['previous_run'] is not None
    recurred = JOURNAL_XID79 + JOURNAL_XID79.splitlines()[-1].replace('09:12:44', '11:40:02') + '\n'
    third, failed, _host = run_module(monkeypatch, module_exits, args,
                                      [(SMI_XML, 0, smi_xml({}, {}), ''), (JOURNAL, 0, recurred, '')])
    assert codes(third) == ['xid_79'] and third['findings'][0]['count'] == 2 and third['already_reported'] == []


def test_check_mode_does_not_write_the_state(monkeypatch, module_exits, tmp_path):
    state = str(tmp_path / 'health-state.json')
    result, failed, _host = run_module(
        monkeypatch, module_exits, {'check_nvlink': 'never', 'state_path': state, '_ansible_check_mode': True},
        [(SMI_XML, 0, smi_xml({}), ''), (JOURNAL, 0, JOURNAL_XID79, '')])
    assert codes(result) == ['xid_79'] and result['state']['written'] is False and not os.path.exists(state)


def test_site_thresholds_and_overrides_apply_and_say_so(monkeypatch, module_exits):
    result, failed, _host = run_module(
        monkeypatch, module_exits,
        {'check_nvlink': 'never', 'kernel_log_source': 'none',
         'check_overrides': {'persistence_mode_off': {'severity': 'info', 'action': 'watch'}},
         'thresholds': {'temperature_margin_c': {'default': 5, 'A100': 70}}},
        [(SMI_XML, 0, smi_xml({}, {'persistence_mode': 'Disabled'}), '')])
    by_code = dict((f['code'], f) for f in result['findings'])
    assert (by_code['persistence_mode_off']['severity'], by_code['persistence_mode_off']['action'],
            by_code['persistence_mode_off']['source']) == ('info', 'watch', 'inventory')
    assert by_code['temperature_near_slowdown']['threshold'] == {
        'name': 'temperature_margin_c', 'value': 70, 'source': 'inventory'}
    assert result['healthy'] is False


@pytest.mark.parametrize('args, named', [
    ({'thresholds': {'nvlink_crc_error_max': 5}}, "unknown threshold 'nvlink_crc_error_max'"),
    ({'thresholds': {'nvlink_expected_active': {'H300': 18}}}, "unknown GPU model 'H300'"),
    ({'check_overrides': {'xid_79x': {'severity': 'info'}}}, "unknown finding code 'xid_79x'"),
    ({'check_overrides': {'xid_79': {'action': 'pray'}}}, 'health_check_overrides.xid_79.action'),
])
def test_unknown_catalog_names_fail_before_anything_runs(monkeypatch, module_exits, args, named):
    result, failed, host = run_module(monkeypatch, module_exits, args, [])
    assert failed and named in result['msg'] and host.calls == []
