# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The harness refuses a port that something else holds, before starting anything.

Every simulated node shares the host's network, so the scenarios, the demo
fleet and the repository server must never meet on a port: the declared port
sets are disjoint, and a port taken by a stranger stops molecule.sh and
demo.sh at once with the port and its holder named.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re
import socket
import subprocess

import pytest
import yaml

from conftest import REPO_ROOT, load_file

HARNESS = os.path.join(REPO_ROOT, 'tests', 'harness')
REPO_PORT = 8765


def _ports_module():
    return load_file(os.path.join(HARNESS, 'ports.py'), 'harness_ports')


def _declared():
    """{scenario: set of ports} from the '# ports:' line of each molecule.yml."""
    found = {}
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, 'molecule', '*', 'molecule.yml'))):
        with open(path) as handle:
            match = re.search(r'^# ports: *([0-9 ]+)', handle.read(), re.M)
        found[os.path.basename(os.path.dirname(path))] = set(int(p) for p in match.group(1).split()) if match else set()
    return found


def _port_values(node):
    """Every value of a key named *_port anywhere in a YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key).endswith('_port') and isinstance(value, int):
                yield value
            else:
                yield from _port_values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _port_values(item)


def _demo_ports():
    with open(os.path.join(REPO_ROOT, 'inventories', 'simulated', 'hosts.yml')) as handle:
        return set(_port_values(yaml.safe_load(handle)))


def _listener(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', port))
    sock.listen(1)
    return sock


def _free_declared_port():
    """A scenario port nothing listens on now (a running scenario may hold others)."""
    taken = _ports_module().listening_inodes()
    for scenario, ports in sorted(_declared().items()):
        for port in sorted(ports):
            if port not in taken:
                return scenario, port
    pytest.fail('every port the scenarios declare is in use on this machine; stop the running scenarios')


def test_every_port_a_scenario_sets_is_declared():
    for scenario, declared in _declared().items():
        with open(os.path.join(REPO_ROOT, 'molecule', scenario, 'molecule.yml')) as handle:
            used = set(_port_values(yaml.safe_load(handle)))
        assert used <= declared, '%s sets ports %s but its "# ports:" line lists %s' % (
            scenario, sorted(used - declared), sorted(declared))


def test_scenarios_demo_and_repository_never_share_a_port():
    declared = _declared()
    owners = {}
    for scenario, ports in declared.items():
        for port in ports:
            assert port not in owners, 'port %d is declared by %s and %s' % (port, owners[port], scenario)
            owners[port] = scenario
    demo = _demo_ports()
    assert demo, 'the simulated inventory sets no DCGM or exporter ports'
    assert not demo & set(owners), 'the demo fleet uses scenario ports %s' % sorted(demo & set(owners))
    assert REPO_PORT not in demo | set(owners)
    # The roles' defaults are what a scenario without overrides listens on.
    assert {5555, 9400} <= set(owners) and not {5555, 9400} & demo


def test_conflicts_names_the_holder_and_spares_our_own():
    ports = _ports_module()
    _scenario, port = _free_declared_port()
    sock = _listener(port)
    try:
        found = ports.conflicts([port])
        assert [(p, pid) for p, pid, _holder in found] == [(port, os.getpid())]
        assert 'pid %d on this machine' % os.getpid() in found[0][2]
        pidfile = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'gpufleet-test-ports-%d.pid' % os.getpid())
        with open(pidfile, 'w') as handle:
            handle.write('%d\n' % os.getpid())
        try:
            assert ports.conflicts([port], own_pidfiles=[pidfile]) == []
        finally:
            os.unlink(pidfile)
    finally:
        sock.close()
    assert ports.conflicts([port]) == []


def _run(argv):
    env = dict(os.environ, PATH=os.path.join(REPO_ROOT, '.venv', 'bin') + os.pathsep + os.environ['PATH'])
    return subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_molecule_refuses_a_taken_scenario_port_before_starting_anything():
    scenario, port = _free_declared_port()
    sock = _listener(port)
    try:
        result = _run([os.path.join(HARNESS, 'molecule.sh'), scenario])
    finally:
        sock.close()
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'port %d, needed by scenario %s, is already taken by pid %d on this machine' % (
        port, scenario, os.getpid()) in result.stderr
    assert 'nothing was started' in result.stderr
    # Refused before the engine, the images or the repository were touched.
    assert 'docker engine' not in result.stdout + result.stderr
    assert 'starting scenario' not in result.stdout


def test_demo_refuses_a_taken_demo_port_before_starting_anything():
    taken = _ports_module().listening_inodes()
    free = sorted(p for p in _demo_ports() if p not in taken)
    if not free:
        # make demo, then make test: the fleet holds its own ports, which is
        # what demo.sh allows; a stranger cannot be planted without stopping it.
        pytest.skip('every demo port is held (the demo fleet runs); the molecule.sh case above still ran')
    sock = _listener(free[0])
    try:
        result = _run([os.path.join(HARNESS, 'demo.sh')])
    finally:
        sock.close()
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'port %d, needed by the demo fleet, is already taken by pid %d' % (free[0], os.getpid()) in result.stderr
    assert 'docker engine' not in result.stdout + result.stderr
