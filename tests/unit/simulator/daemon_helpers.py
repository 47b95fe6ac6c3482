# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the tests of the simulated daemons (tests/nvidia_sim).

Servers run as real subprocesses on 127.0.0.1 only; every process a test
starts inside ``with Servers() as servers:`` is stopped when the block ends,
also when the test fails.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import importlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen


HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'nvidia_sim')
SIM_BIN = os.path.join(SIM_DIR, 'bin')


def nvsim_module(name):
    """Import nvsim.<name> from the source tree without leaving it on sys.path."""
    added = SIM_DIR not in sys.path
    if added:
        sys.path.insert(0, SIM_DIR)
    try:
        return importlib.import_module('nvsim.' + name)
    finally:
        if added:
            sys.path.remove(SIM_DIR)


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def port_open(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=0.5).close()
        return True
    except OSError:
        return False


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open('/proc/%d/stat' % pid) as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (IOError, IndexError):
        return False


def read_pid(path):
    with open(path) as handle:
        return int(handle.read().strip())


class Servers(object):
    """Long-running simulated tools of one test, stopped at teardown."""

    def __init__(self):
        self.processes = []
        self.pids = []

    def start(self, host, tool, *args):
        """Start a foreground tool (nv-hostengine -n, dcgm-exporter) as a subprocess."""
        process = subprocess.Popen([os.path.join(SIM_BIN, tool)] + [str(a) for a in args],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                   env=host.env)
        self.processes.append(process)
        return process

    def adopt(self, pid):
        """Register a daemon that forked away (found through its pid file)."""
        self.pids.append(pid)
        return pid

    def output(self, process, timeout=10, stop=True):
        """(returncode, stdout, stderr) of a started process, stopping it first unless stop=False."""
        if stop and process.poll() is None:
            process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=timeout)
        return process.returncode, stdout, stderr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()
        return False

    def stop_all(self):
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.communicate()
        for pid in self.pids:
            stop_pid(pid)


def stop_pid(pid, timeout=10.0):
    if not pid_alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    if not wait_for(lambda: not pid_alive(pid), timeout):
        os.kill(pid, signal.SIGKILL)


def start_hostengine(servers, host, *extra):
    """nv-hostengine -n on a free loopback port; returns (process, port)."""
    port = free_port()
    process = servers.start(host, 'nv-hostengine', '-n', '-p', port, *extra)
    assert wait_for(lambda: port_open(port) or process.poll() is not None), 'host engine did not start'
    assert process.poll() is None, servers.output(process)
    return process, port


def http_get(url, user=None, password=None, context=None):
    """(status, body) of a GET; HTTP errors are returned, not raised."""
    request = Request(url)
    if user is not None:
        token = base64.b64encode(('%s:%s' % (user, password)).encode('utf-8')).decode('ascii')
        request.add_header('Authorization', 'Basic ' + token)
    try:
        response = urlopen(request, timeout=10, context=context)
        return response.status, response.read().decode('utf-8')
    except HTTPError as exc:
        return exc.code, exc.read().decode('utf-8')


def wait_http(url, process, context=None):
    def ready():
        if process.poll() is not None:
            return True
        try:
            http_get(url, context=context)
            return True
        except (URLError, OSError, ssl.SSLError):
            return False
    assert wait_for(ready), 'exporter did not start'
    assert process.poll() is None, 'exporter exited early'


def parse_metrics(text):
    """Prometheus text -> ({name: type}, {name: help}, [(name, labels dict, value)])."""
    types, helps, samples = {}, {}, []
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            _unused1, _unused2, name, kind = line.split(' ', 3)
            types[name] = kind
        elif line.startswith('# HELP '):
            _unused1, _unused2, name, text_ = line.split(' ', 3)
            helps[name] = text_
        elif line and not line.startswith('#'):
            name, _unused, rest = line.partition('{')
            label_text, _unused, value = rest.rpartition('} ')
            labels = {}
            for pair in _split_labels(label_text):
                key, _unused, quoted = pair.partition('=')
                labels[key] = quoted[1:-1]
            samples.append((name, labels, float(value)))
    return types, helps, samples


def _split_labels(text):
    parts, current, quoted = [], '', False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == ',' and not quoted:
            parts.append(current)
            current = ''
        else:
            current += char
    if current:
        parts.append(current)
    return parts
