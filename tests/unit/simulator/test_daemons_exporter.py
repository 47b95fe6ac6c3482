# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated dcgm-exporter: Prometheus text per GPU and counter, counters CSV, web config."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ctypes
import ctypes.util
import os
import shutil
import socket
import ssl
import subprocess

import pytest

from daemon_helpers import (SIM_DIR, Servers, free_port, http_get, parse_metrics, start_hostengine,
                            wait_http)

COUNTERS = os.path.join(SIM_DIR, 'data', 'default-counters.csv')
LABELS = ['gpu', 'UUID', 'pci_bus_id', 'device', 'modelName', 'Hostname', 'DCGM_FI_DRIVER_VERSION']


def csv_counters():
    counters = []
    with open(COUNTERS) as handle:
        for line in handle:
            if line.strip() and not line.startswith('#'):
                name, kind, text = [part.strip() for part in line.split(',', 2)]
                counters.append((name, kind, text))
    return counters


def install_counters(host):
    target = host.path('etc/dcgm-exporter/default-counters.csv')
    os.makedirs(os.path.dirname(target))
    shutil.copyfile(COUNTERS, target)


def start_exporter(servers, host, *args, **kwargs):
    port = free_port()
    process = servers.start(host, 'dcgm-exporter', '-a', '127.0.0.1:%d' % port, *args)
    scheme = kwargs.get('scheme', 'http')
    wait_http('%s://127.0.0.1:%d/health' % (scheme, port), process, context=kwargs.get('context'))
    return process, '%s://127.0.0.1:%d' % (scheme, port)


def test_every_counter_for_every_gpu_from_the_remote_engine(sim_root):
    with Servers() as servers:
        host = sim_root('hgx_h100_8gpu')
        install_counters(host)
        _unused, engine_port = start_hostengine(servers, host)
        process, url = start_exporter(servers, host, '-f', '/etc/dcgm-exporter/default-counters.csv',
                                      '-r', 'localhost:%d' % engine_port)
        status, body = http_get(url + '/metrics')
        assert status == 200
        types, helps, samples = parse_metrics(body)
        metrics = [c for c in csv_counters() if c[1] != 'label']
        assert sorted(types) == sorted(name for name, _unused1, _unused2 in metrics)
        for name, kind, text in metrics:
            assert (types[name], helps[name]) == (kind, text)
            rows = [labels for sample, labels, _unused in samples if sample == name]
            assert [row['gpu'] for row in rows] == [str(i) for i in range(8)], name
        first = [labels for sample, labels, _unused in samples if sample == 'DCGM_FI_DEV_GPU_TEMP'][0]
        assert list(first) == LABELS
        assert first['UUID'] == 'GPU-2e82308d-2e7d-5512-80ac-7f0cca15fd1f'
        assert first['pci_bus_id'] == '00000000:18:00.0' and first['device'] == 'nvidia0'
        assert first['modelName'] == 'NVIDIA H100 80GB HBM3'
        assert first['Hostname'] == socket.gethostname()
        assert first['DCGM_FI_DRIVER_VERSION'] == '570.195.03'
        assert '\nDCGM_FI_DEV_POWER_USAGE{gpu="0",' in body and body.count('.') > 8
        returncode, _unused, stderr = servers.output(process)
        assert returncode == 0
        assert 'msg="Attempting to connect to remote hostengine at localhost:%d"' % engine_port in stderr


def test_samples_follow_workloads(sim_root):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        install_counters(host)
        _unused, url = start_exporter(servers, host)
        before = {(n, l['gpu']): v for n, l, v in parse_metrics(http_get(url + '/metrics')[1])[2]}
        assert before[('DCGM_FI_DEV_GPU_UTIL', '1')] == 0
        host.start_workload('--gpu', '1', '--memory', '2048')
        after = {(n, l['gpu']): v for n, l, v in parse_metrics(http_get(url + '/metrics')[1])[2]}
        assert after[('DCGM_FI_DEV_GPU_UTIL', '1')] == 100 and after[('DCGM_FI_DEV_GPU_UTIL', '0')] == 0
        assert after[('DCGM_FI_DEV_FB_USED', '1')] == before[('DCGM_FI_DEV_FB_USED', '1')] + 2048
        assert after[('DCGM_FI_DEV_GPU_TEMP', '1')] > before[('DCGM_FI_DEV_GPU_TEMP', '1')]


def test_unknown_field_is_rejected(sim_root):
    host = sim_root('l40s_2gpu')
    host.write('etc/dcgm-exporter/custom.csv',
               '# custom\nDCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n'
               'DCGM_FI_DEV_NOT_A_FIELD, gauge, nothing.\n')
    result = host.run('dcgm-exporter', '-f', '/etc/dcgm-exporter/custom.csv', '-a', '127.0.0.1:%d' % free_port())
    assert result.returncode == 1
    assert ('level=ERROR msg="could not find DCGM field; err: unknown ExporterCounter field '
            '\'DCGM_FI_DEV_NOT_A_FIELD\'"') in result.stderr
    host.write('etc/dcgm-exporter/badtype.csv', 'DCGM_FI_DEV_GPU_TEMP, histogramm, t\n')
    bad_type = host.run('dcgm-exporter', '-f', '/etc/dcgm-exporter/badtype.csv')
    assert bad_type.returncode == 1 and "could not find Prometheus metric type 'histogramm'" in bad_type.stderr
    missing = host.run('dcgm-exporter', '-f', '/etc/dcgm-exporter/nope.csv')
    assert missing.returncode == 1 and "Could not read metrics file '/etc/dcgm-exporter/nope.csv'" in missing.stderr


def test_remote_mode_needs_a_reachable_engine_and_embedded_a_driver(sim_root):
    host = sim_root('l40s_2gpu')
    install_counters(host)
    remote = host.run('dcgm-exporter', '-r', '127.0.0.1:%d' % free_port())
    assert remote.returncode == 1
    assert ('msg="Failed to connect to remote hostengine" mode=standalone' in remote.stderr
            and 'Host engine connection invalid/disconnected' in remote.stderr)
    unloaded = sim_root('l40s_2gpu', load=False)
    install_counters(unloaded)
    embedded = unloaded.run('dcgm-exporter', '-a', '127.0.0.1:%d' % free_port())
    assert embedded.returncode == 1 and 'msg="Failed to initialize DCGM" mode=embedded' in embedded.stderr


def test_mig_instances_are_separate_series(sim_root):
    with Servers() as servers:
        host = sim_root('a100_40gb_mig')
        install_counters(host)
        assert host.smi('mig', '-cgi', '9,14', '-C').returncode == 0
        _unused, url = start_exporter(servers, host)
        rows = [labels for name, labels, _unused in parse_metrics(http_get(url + '/metrics')[1])[2]
                if name == 'DCGM_FI_DEV_FB_USED']
        assert sorted((r['GPU_I_PROFILE'], r['GPU_I_ID']) for r in rows) == [('2g.10gb', '3'), ('3g.20gb', '2')]


def _bcrypt(password):
    library = ctypes.CDLL(ctypes.util.find_library('crypt') or 'libcrypt.so.1')
    library.crypt_gensalt.restype = ctypes.c_char_p
    library.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    library.crypt.restype = ctypes.c_char_p
    library.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = library.crypt_gensalt(b'$2y$', 4, None, 0)
    return library.crypt(password.encode(), salt).decode() if salt else None


@pytest.mark.skipif(shutil.which('openssl') is None, reason='needs openssl to make a test certificate')
def test_web_config_tls_and_basic_auth(sim_root, tmp_path):
    with Servers() as servers:
        host = sim_root('l40s_2gpu')
        install_counters(host)
        hashed = _bcrypt('s3cret')
        if not hashed or not hashed.startswith('$2y$'):
            pytest.skip('the system crypt(3) has no bcrypt')
        tls_dir = host.path('etc/dcgm-exporter/tls')
        os.makedirs(tls_dir)
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj',
                        '/CN=localhost', '-keyout', os.path.join(tls_dir, 'key.pem'), '-out',
                        os.path.join(tls_dir, 'cert.pem')], check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        host.write('etc/dcgm-exporter/web.yml', 'tls_server_config:\n  cert_file: tls/cert.pem\n'
                   '  key_file: /etc/dcgm-exporter/tls/key.pem\nbasic_auth_users:\n  prometheus: %s\n' % hashed)
        context = ssl.create_default_context(cafile=os.path.join(tls_dir, 'cert.pem'))
        context.check_hostname = False
        process, url = start_exporter(servers, host, '--web-config-file', '/etc/dcgm-exporter/web.yml',
                                      scheme='https', context=context)
        assert url.startswith('https://')
        assert http_get(url + '/metrics', context=context)[0] == 401
        assert http_get(url + '/metrics', 'prometheus', 'wrong', context=context)[0] == 401
        status, body = http_get(url + '/metrics', 'prometheus', 's3cret', context=context)
        assert status == 200 and 'DCGM_FI_DEV_GPU_TEMP{gpu="1"' in body
        _unused1, _unused2, stderr = servers.output(process)
        assert 'msg="TLS is enabled." http2=true' in stderr


def test_web_config_errors_stop_the_exporter(sim_root):
    host = sim_root('l40s_2gpu')
    install_counters(host)
    host.write('etc/dcgm-exporter/web.yml', 'tls_server_config:\n  cert_file: /nope.pem\n  key_file: /nope.key\n'
               'unknown_key: 1\n')
    result = host.run('dcgm-exporter', '--web-config-file', '/etc/dcgm-exporter/web.yml',
                      '-a', '127.0.0.1:%d' % free_port())
    assert result.returncode == 1 and 'field unknown_key not found in type web.Config' in result.stderr
