# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Bad inputs of the dcgm and dcgm_exporter roles (issue 18): listeners set
through extra arguments, sockets outside the host engine's own directory,
ports that collide, intervals and timeouts in the wrong unit, relative paths,
and TLS pairs that would fail only after the restart (a key of another
certificate, an expired certificate, one not valid yet).

The TLS cases read real files on this machine: fixtures() makes self-signed
certificates and keys with the cryptography package (a dependency of
ansible-core), keys root-owned mode 0600 when the suite runs as root, as the
role wants them. Their "names" carry the start of the message that says what
is wrong, not only the variable: every rule about dcgm_exporter_web_config
names it, and a key refused for its mode would otherwise pass for a mismatch.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import os

from ansible_collections.gpufleet.nvidia.tests.unit.bad_inputs.cases import role

TLS = 'dcgm_exporter_web_config has a tls_server_config'
PORT = 'dcgm_exporter_port is also the TCP port of the DCGM host engine on this host ('


def _tls(cert, key):
    return {'dcgm_exporter_web_config': {'tls_server_config': {'cert_file': cert, 'key_file': key}}}


CASES = [
    # --- dcgm: listeners through dcgm_extra_args, the socket's place, ports, paths, timeouts --------
    role('dcgm-extra-args-bind-all', 'dcgm', {'dcgm_extra_args': ['--bind-interface', 'ALL']}, 'dcgm_extra_args'),
    role('dcgm-extra-args-bind-short', 'dcgm', {'dcgm_extra_args': ['-b', '0.0.0.0']}, 'dcgm_extra_args'),
    role('dcgm-extra-args-port-inline', 'dcgm', {'dcgm_extra_args': ['--port=5556']}, 'dcgm_extra_args'),
    role('dcgm-extra-args-port-short', 'dcgm', {'dcgm_extra_args': ['--denylist-modules', '3', '-p', '5556']},
         'dcgm_extra_args'),
    role('dcgm-extra-args-domain-socket', 'dcgm', {'dcgm_extra_args': ['-d']}, 'dcgm_extra_args'),
    role('dcgm-extra-args-service-account', 'dcgm', {'dcgm_extra_args': ['--service-account', 'root']},
         'dcgm_extra_args'),
    role('dcgm-socket-under-tmp', 'dcgm', {'dcgm_unix_socket': '/tmp/nv-hostengine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-socket-under-var-tmp', 'dcgm', {'dcgm_unix_socket': '/var/tmp/nv-hostengine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-socket-under-dev-shm', 'dcgm', {'dcgm_unix_socket': '/dev/shm/nv-hostengine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-socket-in-run-lock', 'dcgm', {'dcgm_unix_socket': '/run/lock/nv-hostengine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-socket-in-exporter-dir', 'dcgm', {'dcgm_unix_socket': '/run/nvidia-dcgm-exporter/engine.sock'},
         'dcgm_unix_socket'),
    role('dcgm-socket-not-in-run', 'dcgm', {'dcgm_unix_socket': '/var/lib/dcgm/engine.sock'}, 'dcgm_unix_socket'),
    role('dcgm-port-is-exporters', 'dcgm', {'dcgm_unix_socket': '', 'dcgm_port': 9401, 'dcgm_exporter_port': '9401'},
         "dcgm_port is also the port of dcgm-exporter's /metrics listener on this host (dcgm_exporter_port"),
    role('dcgm-nvswitch-path-relative', 'dcgm', {'dcgm_nvswitch_devices_path': 'proc/driver/nvidia-nvswitch/devices'},
         'dcgm_nvswitch_devices_path'),
    role('dcgm-lock-timeout-zero', 'dcgm', {'dcgm_package_lock_timeout': 0}, 'dcgm_package_lock_timeout'),
    role('dcgm-lock-timeout-milliseconds', 'dcgm', {'dcgm_package_lock_timeout': 300000}, 'dcgm_package_lock_timeout'),
    # --- dcgm_exporter: listeners through dcgm_exporter_extra_args ---------------------------------
    role('exporter-extra-args-address', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['-a', ':9400']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-address-inline', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['--address=0.0.0.0:9400']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-address-one-dash', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['-address', ':9400']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-short-inline', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['-a=:9400']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-systemd-socket', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['--web-systemd-socket']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-web-config', 'dcgm_exporter',
         {'dcgm_exporter_extra_args': ['--web-config-file', '/etc/dcgm-exporter/plain.yml']}, 'dcgm_exporter_extra_args'),
    role('exporter-extra-args-config-file', 'dcgm_exporter',
         {'dcgm_exporter_extra_args': ['--config-file=/etc/dcgm-exporter/config.yaml']}, 'dcgm_exporter_extra_args'),
    role('exporter-extra-args-interval', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['-c', '10']},
         'dcgm_exporter_extra_args'),
    role('exporter-extra-args-hostengine', 'dcgm_exporter', {'dcgm_exporter_extra_args': ['-r', 'localhost:5555']},
         'dcgm_exporter_extra_args'),
    # --- dcgm_exporter: the host engine's socket, ports, units, paths ---------------------------
    role('exporter-hostengine-socket-tmp', 'dcgm_exporter', {'dcgm_exporter_hostengine': 'unix:///tmp/nv-hostengine'},
         'dcgm_exporter_hostengine'),
    role('exporter-dcgm-socket-tmp', 'dcgm_exporter', {'dcgm_unix_socket': '/tmp/nv-hostengine'}, 'dcgm_unix_socket'),
    role('exporter-port-is-dcgms', 'dcgm_exporter', {'dcgm_unix_socket': '', 'dcgm_port': 9400}, PORT + 'dcgm_port'),
    role('exporter-port-is-dcgms-raw', 'dcgm_exporter',
         {'dcgm_unix_socket': '', 'dcgm_port': '9401', 'dcgm_exporter_port': 9401}, PORT + 'dcgm_port'),
    role('exporter-port-is-hostengines', 'dcgm_exporter', {'dcgm_exporter_hostengine': '127.0.0.1:9400'},
         PORT + 'dcgm_exporter_hostengine'),
    role('exporter-interval-50ms', 'dcgm_exporter', {'dcgm_exporter_collect_interval': 50},
         'dcgm_exporter_collect_interval'),
    role('exporter-interval-seconds', 'dcgm_exporter', {'dcgm_exporter_collect_interval': 30},
         'dcgm_exporter_collect_interval'),
    role('exporter-interval-microseconds', 'dcgm_exporter', {'dcgm_exporter_collect_interval': 30000000},
         'dcgm_exporter_collect_interval'),
    role('exporter-lock-timeout-zero', 'dcgm_exporter', {'dcgm_exporter_package_lock_timeout': 0},
         'dcgm_exporter_package_lock_timeout'),
    role('exporter-ca-path-relative', 'dcgm_exporter', {'dcgm_exporter_verify_ca_path': 'ca.crt'},
         'dcgm_exporter_verify_ca_path'),
    role('exporter-tls-key-relative', 'dcgm_exporter', _tls('@TLS_GOOD_CERT@', 'exporter.key'),
         'dcgm_exporter_web_config has tls_server_config paths that are not absolute'),
    # --- dcgm_exporter: the TLS pair, read on the host before any change ------------------------
    role('exporter-tls-key-of-another-cert', 'dcgm_exporter', _tls('@TLS_GOOD_CERT@', '@TLS_OTHER_KEY@'),
         TLS + '.key_file that does not belong to its certificate', facts=True),
    role('exporter-tls-cert-expired', 'dcgm_exporter', _tls('@TLS_EXPIRED_CERT@', '@TLS_GOOD_KEY@'),
         'dcgm_exporter_web_config has an expired tls_server_config.cert_file', facts=True),
    role('exporter-tls-cert-not-yet-valid', 'dcgm_exporter', _tls('@TLS_FUTURE_CERT@', '@TLS_GOOD_KEY@'),
         TLS + '.cert_file not valid yet', facts=True),
    role('exporter-tls-cert-not-pem', 'dcgm_exporter', _tls('@TLS_GOOD_KEY@', '@TLS_GOOD_KEY@'),
         TLS + '.cert_file that holds no PEM certificate', facts=True),
]


def fixtures(root):
    """Self-signed certificates (EC P-256, CN 127.0.0.1) and their keys under root/tls."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = os.path.join(root, 'tls')
    os.makedirs(directory)
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u'127.0.0.1')])
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def certificate(start, end):
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
                .sign(key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

    def private(owner):
        return owner.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())

    def write(file_name, data, mode):
        path = os.path.join(directory, file_name)
        with open(path, 'wb') as handle:
            handle.write(data)
        os.chmod(path, mode)
        return path

    return {
        '@TLS_GOOD_CERT@': write('good.crt', certificate(now - day, now + 30 * day), 0o644),
        '@TLS_EXPIRED_CERT@': write('expired.crt', certificate(now - 30 * day, now - day), 0o644),
        '@TLS_FUTURE_CERT@': write('future.crt', certificate(now + 2 * day, now + 30 * day), 0o644),
        '@TLS_GOOD_KEY@': write('good.key', private(key), 0o600),
        '@TLS_OTHER_KEY@': write('other.key', private(other), 0o600),
    }
