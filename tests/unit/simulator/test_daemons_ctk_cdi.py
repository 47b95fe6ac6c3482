# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated nvidia-ctk cdi generate/list and config --set."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from daemon_helpers import nvsim_module

toml_lite = nvsim_module('toml_lite')
yaml_lite = nvsim_module('yaml_lite')

SPEC = 'var/run/cdi/nvidia.yaml'
RUNTIME_CONFIG = 'etc/nvidia-container-runtime/config.toml'


def read(host, relative):
    with open(host.path(relative)) as handle:
        return handle.read()


def hook_args(spec):
    return [hook['args'][1] for hook in spec['containerEdits']['hooks']]


def test_generate_and_list(sim_root):
    host = sim_root('l40s_2gpu')
    generated = host.run('nvidia-ctk', 'cdi', 'generate', '--output=/var/run/cdi/nvidia.yaml')
    assert generated.returncode == 0, generated.stderr
    assert 'msg="Generated CDI spec with version 0.5.0"' in generated.stderr
    text = read(host, SPEC)
    assert text.startswith('---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n    - name: "0"\n')
    spec = yaml_lite.load(text)
    uuids = [g['uuid'] for g in json.load(open(host.path('usr/share/nvidia-sim/profiles/l40s_2gpu.json')))['gpus']]
    assert [d['name'] for d in spec['devices']] == ['0', uuids[0], '1', uuids[1], 'all']
    assert spec['devices'][-1]['containerEdits']['deviceNodes'] == [
        {'path': '/dev/nvidia0'}, {'path': '/dev/nvidia1'}]
    assert '/dev/nvidiactl' in [n['path'] for n in spec['containerEdits']['deviceNodes']]
    assert 'enable-cuda-compat' in hook_args(spec)
    compat = [h for h in spec['containerEdits']['hooks'] if h['args'][1] == 'enable-cuda-compat'][0]
    assert compat['args'][2] == '--host-driver-version=570.195.03'
    assert compat['path'] == '/usr/bin/nvidia-cdi-hook'

    listed = host.run('nvidia-ctk', 'cdi', 'list')
    assert listed.returncode == 0
    assert 'msg="Found 5 CDI devices"' in listed.stderr
    assert listed.stdout == ''.join('nvidia.com/gpu=%s\n' % n for n in sorted(['0', '1', 'all'] + uuids))


def test_generate_honours_the_env_file_variables_and_json(sim_root):
    host = sim_root('l40s_2gpu')
    host.env['NVIDIA_CTK_CDI_OUTPUT_FILE_PATH'] = '/etc/cdi/nvidia.json'
    assert host.run('nvidia-ctk', 'cdi', 'generate').returncode == 0
    spec = json.loads(read(host, 'etc/cdi/nvidia.json'))
    assert spec['kind'] == 'nvidia.com/gpu' and len(spec['devices']) == 5
    assert host.run('nvidia-ctk', 'cdi', 'list').stdout.count('\n') == 5


def test_mig_devices_get_their_own_entries(sim_root):
    host = sim_root('a100_40gb_mig')
    assert host.smi('mig', '-cgi', '9,14', '-C').returncode == 0
    assert host.run('nvidia-ctk', 'cdi', 'generate', '--output=/var/run/cdi/nvidia.yaml').returncode == 0
    spec = yaml_lite.load(read(host, SPEC))
    names = [d['name'] for d in spec['devices']]
    assert names[:4:2] == ['0:0', '0:1'] and names[1].startswith('MIG-') and names[-1] == 'all'
    first = spec['devices'][0]['containerEdits']['deviceNodes']
    assert first[0] == {'path': '/dev/nvidia0'}
    assert all(node['path'].startswith('/dev/nvidia-caps/nvidia-cap') for node in first[1:])


def test_generation_fails_without_a_usable_driver(sim_root):
    unloaded = sim_root('l40s_2gpu', load=False)
    result = unloaded.run('nvidia-ctk', 'cdi', 'generate', '--output=/var/run/cdi/nvidia.yaml')
    assert result.returncode == 1 and 'failed to initialize NVML: ERROR_DRIVER_NOT_LOADED' in result.stderr
    assert not os.path.exists(unloaded.path(SPEC))
    upgraded = sim_root('l40s_2gpu', driver='570.172.08')
    upgraded.install_driver('570.195.03')
    mismatch = upgraded.run('nvidia-ctk', 'cdi', 'generate')
    assert mismatch.returncode == 1 and 'ERROR_LIB_RM_VERSION_MISMATCH' in mismatch.stderr


def test_config_set_in_place_disables_the_compat_hook(sim_root):
    host = sim_root('l40s_2gpu')
    assert host.run('nvidia-ctk', 'config', '--in-place').returncode == 0
    default = read(host, RUNTIME_CONFIG)
    assert '[nvidia-container-runtime.modes.cdi]\n' in default and '#no-cgroups = false\n' in default
    result = host.run('nvidia-ctk', 'config', '--set', 'features.disable-cuda-compat-lib-hook=true', '--in-place')
    assert result.returncode == 0, result.stderr
    updated = read(host, RUNTIME_CONFIG)
    assert updated == default + '\n[features]\ndisable-cuda-compat-lib-hook = true\n'
    assert host.run('nvidia-ctk', 'config', '--set', 'features.disable-cuda-compat-lib-hook=true',
                    '--in-place').returncode == 0
    assert read(host, RUNTIME_CONFIG) == updated
    host.run('nvidia-ctk', 'cdi', 'generate', '--output=/var/run/cdi/nvidia.yaml')
    assert 'enable-cuda-compat' not in hook_args(yaml_lite.load(read(host, SPEC)))

    host.run('nvidia-ctk', 'config', '--set', 'nvidia-container-cli.no-cgroups', '--in-place')
    config = toml_lite.loads(read(host, RUNTIME_CONFIG))
    assert config['nvidia-container-cli']['no-cgroups'] is True
    assert config['nvidia-container-cli']['load-kmods'] is True


def test_config_rejects_unknown_keys_and_values(sim_root):
    host = sim_root('l40s_2gpu')
    unknown = host.run('nvidia-ctk', 'config', '--set', 'features.no-such-feature=true', '--in-place')
    assert unknown.returncode == 1
    assert 'invalid --set option features.no-such-feature=true: invalid config option: undefined field' in (
        unknown.stderr)
    bad_bool = host.run('nvidia-ctk', 'config', '--set', 'features.disable-cuda-compat-lib-hook=maybe')
    assert bad_bool.returncode == 1 and 'ParseBool' in bad_bool.stderr
    assert not os.path.exists(host.path(RUNTIME_CONFIG))
    printed = host.run('nvidia-ctk', 'config', '--set', 'nvidia-container-runtime.log-level=debug')
    assert printed.returncode == 0 and 'log-level = "debug"\n' in printed.stdout
