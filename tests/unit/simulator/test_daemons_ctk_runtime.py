# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated nvidia-ctk runtime configure: docker, containerd (drop-in or in place), CRI-O."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from daemon_helpers import nvsim_module

toml_lite = nvsim_module('toml_lite')

DAEMON_JSON = {'log-driver': 'journald', 'registry-mirrors': ['https://mirror.example'],
               'data-root': '/srv/docker', 'log-opts': {'max-size': '10m'}}
CONTAINERD_TOML = '''# site containerd settings
version = 2
root = "/srv/containerd"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
'''


def read(host, relative):
    with open(host.path(relative)) as handle:
        return handle.read()


def ctk(host, *args):
    result = host.run('nvidia-ctk', *args)
    assert result.returncode == 0, result.stderr
    return result


def test_version(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('usr/share/nvidia-sim/container-toolkit-version', '1.17.8\n')
    lines = ctk(host, '--version').stdout.splitlines()
    assert lines[0] == 'NVIDIA Container Toolkit CLI version 1.17.8'
    assert lines[1].startswith('commit: ') and len(lines[1]) == len('commit: ') + 40


def test_docker_keeps_every_key_and_is_idempotent(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('etc/docker/daemon.json', json.dumps(DAEMON_JSON))
    first = ctk(host, 'runtime', 'configure', '--runtime=docker')
    assert 'msg="Wrote updated config to /etc/docker/daemon.json"' in first.stderr
    assert 'msg="It is recommended that docker daemon be restarted."' in first.stderr
    written = read(host, 'etc/docker/daemon.json')
    config = json.loads(written)
    assert config == dict(DAEMON_JSON, runtimes={'nvidia': {'args': [], 'path': 'nvidia-container-runtime'}})
    assert written.startswith('{\n    "data-root": "/srv/docker",\n')
    ctk(host, 'runtime', 'configure', '--runtime=docker')
    assert read(host, 'etc/docker/daemon.json') == written

    ctk(host, 'runtime', 'configure', '--runtime=docker', '--set-as-default', '--cdi.enabled')
    config = json.loads(read(host, 'etc/docker/daemon.json'))
    assert config['default-runtime'] == 'nvidia' and config['features'] == {'cdi': True}
    assert config['log-opts'] == {'max-size': '10m'}


def test_docker_creates_the_file_and_dry_run_writes_nothing(sim_root):
    host = sim_root('l40s_2gpu')
    dry = ctk(host, 'runtime', 'configure', '--runtime=docker', '--dry-run')
    assert json.loads(dry.stdout) == {'runtimes': {'nvidia': {'args': [], 'path': 'nvidia-container-runtime'}}}
    assert 'msg="Config file does not exist, creating new one"' in dry.stderr
    assert not os.path.exists(host.path('etc/docker/daemon.json'))
    ctk(host, 'runtime', 'configure', '--runtime=docker', '--config=/home/u/.config/docker/daemon.json')
    assert json.loads(read(host, 'home/u/.config/docker/daemon.json'))['runtimes']['nvidia']


def test_containerd_118_drop_in_keeps_config_toml(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('etc/containerd/config.toml', CONTAINERD_TOML)
    first = ctk(host, 'runtime', 'configure', '--runtime=containerd', '--set-as-default')
    assert 'msg="Using config version 2"' in first.stderr
    assert 'msg="Wrote updated config to /etc/containerd/conf.d/99-nvidia.toml"' in first.stderr
    top = read(host, 'etc/containerd/config.toml')
    assert top == CONTAINERD_TOML.replace('version = 2\n',
                                          'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    drop_in = read(host, 'etc/containerd/conf.d/99-nvidia.toml')
    nvidia = toml_lite.loads(drop_in)
    cri = nvidia['plugins']['io.containerd.grpc.v1.cri']
    assert nvidia['version'] == 2
    assert cri['containerd']['default_runtime_name'] == 'nvidia'
    assert cri['containerd']['runtimes']['nvidia'] == {
        'runtime_type': 'io.containerd.runc.v2',
        'options': {'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}}
    assert '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n' in drop_in

    ctk(host, 'runtime', 'configure', '--runtime=containerd', '--set-as-default')
    assert read(host, 'etc/containerd/config.toml') == top
    assert read(host, 'etc/containerd/conf.d/99-nvidia.toml') == drop_in


def test_containerd_without_config_gets_imports_and_defaults(sim_root):
    host = sim_root('l40s_2gpu')
    result = ctk(host, 'runtime', 'configure', '--runtime=containerd', '--cdi.enabled')
    assert 'could not infer options from runtimes [docker-runc runc crun]; using defaults' in result.stderr
    assert read(host, 'etc/containerd/config.toml') == 'imports = ["/etc/containerd/conf.d/*.toml"]\nversion = 2\n'
    cri = toml_lite.loads(read(host, 'etc/containerd/conf.d/99-nvidia.toml'))['plugins']['io.containerd.grpc.v1.cri']
    assert cri['enable_cdi'] is True
    assert cri['containerd']['runtimes']['nvidia']['privileged_without_host_devices'] is False


def test_containerd_before_118_edits_config_toml_in_place(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('usr/share/nvidia-sim/container-toolkit-version', '1.17.8\n')
    host.write('etc/containerd/config.toml', CONTAINERD_TOML)
    result = ctk(host, 'runtime', 'configure', '--runtime=containerd')
    assert 'msg="Wrote updated config to /etc/containerd/config.toml"' in result.stderr
    config = toml_lite.loads(read(host, 'etc/containerd/config.toml'))
    assert config['root'] == '/srv/containerd'
    cri = config['plugins']['io.containerd.grpc.v1.cri']
    assert cri['sandbox_image'] == 'registry.k8s.io/pause:3.9'
    assert cri['containerd']['runtimes']['nvidia']['options']['BinaryName'] == '/usr/bin/nvidia-container-runtime'
    assert cri['containerd']['default_runtime_name'] == 'runc'
    assert not os.path.exists(host.path('etc/containerd/conf.d'))


def test_containerd_v3_config_uses_the_new_plugin_name(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('etc/containerd/config.toml', 'version = 3\n')
    ctk(host, 'runtime', 'configure', '--runtime=containerd')
    drop_in = toml_lite.loads(read(host, 'etc/containerd/conf.d/99-nvidia.toml'))
    assert drop_in['version'] == 3
    assert 'nvidia' in drop_in['plugins']['io.containerd.cri.v1.runtime']['containerd']['runtimes']


def test_crio_drop_in(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('etc/crio/crio.conf', '[crio.runtime]\ndefault_runtime = "crun"\n\n'
               '[crio.runtime.runtimes.crun]\nruntime_path = "/usr/bin/crun"\nmonitor_path = "/usr/bin/conmon"\n')
    result = ctk(host, 'runtime', 'configure', '--runtime=crio')
    assert 'It is recommended that crio daemon be restarted.' in result.stderr
    runtime = toml_lite.loads(read(host, 'etc/crio/conf.d/99-nvidia.toml'))['crio']['runtime']
    assert runtime['runtimes']['nvidia'] == {'runtime_path': '/usr/bin/nvidia-container-runtime',
                                             'runtime_type': 'oci', 'monitor_path': '/usr/bin/conmon'}
    assert 'default_runtime' not in runtime


def test_bad_runtime_is_an_error(sim_root):
    host = sim_root('l40s_2gpu')
    result = host.run('nvidia-ctk', 'runtime', 'configure', '--runtime=podman')
    assert result.returncode == 1 and 'level=error msg="unrecognized runtime \'podman\'"' in result.stderr
