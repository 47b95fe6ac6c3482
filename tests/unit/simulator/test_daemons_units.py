# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit files and data files of the simulated daemons mirror NVIDIA's packages."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from daemon_helpers import SIM_BIN, SIM_DIR, nvsim_module

exporter_config = nvsim_module('dcgm.exporter_config')

UNITS = os.path.join(SIM_DIR, 'systemd')


def unit(name):
    """{section: [(key, value)]} keeping repeated keys, as systemd does."""
    sections, current = {}, None
    with open(os.path.join(UNITS, name)) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if line.startswith('['):
                current = sections.setdefault(line[1:-1], [])
            else:
                key, _unused, value = line.partition('=')
                current.append((key, value))
    return sections


def values(sections, section, key):
    return [v for k, v in sections.get(section, []) if k == key]


def test_services_start_the_simulated_binaries_like_nvidia_packages():
    expected = {
        'nvidia-persistenced.service':
            '/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose',
        'nvidia-dcgm.service': '/usr/bin/nv-hostengine -n --service-account nvidia-dcgm',
        'nvidia-dcgm-exporter.service': '/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv',
        'nvidia-fabricmanager.service': '/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg',
        'nvidia-cdi-refresh.service': '/usr/bin/nvidia-ctk cdi generate',
    }
    for name, exec_start in expected.items():
        sections = unit(name)
        assert values(sections, 'Service', 'ExecStart') == [exec_start], name
        binary = os.path.basename(exec_start.split()[0])
        assert os.access(os.path.join(SIM_BIN, binary), os.X_OK), binary


def test_service_types_and_dependencies():
    persistenced = unit('nvidia-persistenced.service')
    assert values(persistenced, 'Service', 'Type') == ['forking']
    assert values(persistenced, 'Unit', 'StopWhenUnneeded') == ['true']
    assert 'Install' not in persistenced
    fabric = unit('nvidia-fabricmanager.service')
    assert values(fabric, 'Service', 'Type') == ['forking']
    assert values(fabric, 'Service', 'PIDFile') == ['/var/run/nvidia-fabricmanager/nv-fabricmanager.pid']
    exporter = unit('nvidia-dcgm-exporter.service')
    assert values(exporter, 'Unit', 'Wants') == ['nvidia-dcgm.service']
    assert values(exporter, 'Unit', 'After') == ['nvidia-dcgm.service']
    dcgm = unit('nvidia-dcgm.service')
    assert values(dcgm, 'Unit', 'Conflicts') == ['dcgm.service']
    assert values(dcgm, 'Install', 'WantedBy') == ['multi-user.target']


def test_cdi_refresh_units():
    path = unit('nvidia-cdi-refresh.path')
    assert values(path, 'Path', 'PathChanged') == ['/lib/modules/%v/modules.dep', '/lib/modules/%v/modules.dep.bin']
    service = unit('nvidia-cdi-refresh.service')
    assert values(service, 'Service', 'Environment') == ['NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml']
    assert values(service, 'Service', 'EnvironmentFile') == ['-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env']
    assert values(service, 'Unit', 'ConditionPathExists') == [
        '|/usr/bin/nvidia-smi', '|/usr/sbin/nvidia-smi', '/usr/bin/nvidia-ctk']
    assert values(service, 'Service', 'ExecCondition') == [
        "/usr/bin/grep -qE '/(nvidia|nvidia-current)\\\\.ko' /lib/modules/%v/modules.dep"]


def test_data_files_are_valid_inputs():
    counters = exporter_config.read_counters(os.path.join(SIM_DIR, 'data', 'default-counters.csv'))
    assert [c.name for c in counters if c.is_label] == ['DCGM_FI_DRIVER_VERSION']
    assert 'DCGM_FI_DEV_GPU_UTIL' in [c.name for c in counters]
    with open(os.path.join(SIM_DIR, 'data', 'fabricmanager.cfg')) as handle:
        settings = dict(line.strip().split('=', 1) for line in handle if '=' in line and not line.startswith('#'))
    assert settings['DAEMONIZE'] == '1' and settings['LOG_FILE_NAME'] == '/var/log/fabricmanager.log'
    assert settings['FABRIC_MODE'] == '0'
