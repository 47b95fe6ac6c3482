# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The health catalog on the node itself, without an Ansible controller.

The gpufleet.nvidia.health role installs this script (health_node_local) with
the collection's own module_utils files beside it - the nvidia-smi parsers,
the health checks, the catalog and the memory between runs - so that the node
judges itself exactly as the nvidia_gpu_health module does. Two uses:

  --slurm     as Slurm's HealthCheckProgram: a node whose checks find it
              unhealthy drains itself (scontrol update ... State=DRAIN), with
              the finding codes as the reason, unless someone else already
              drained it. It never resumes a node. Slurm kills the program
              after 60 s (22.05 to 25.11), so everything here is bounded.
  --textfile  for node_exporter's textfile collector: one series
              gpufleet_health_finding{code,severity,action,source,gpu} per
              finding, the time of the run and whether the check itself ran.

Run: python3 gpufleet_health_node.py --config /etc/gpufleet/health-node.json [--slurm] [--textfile DIR]
Exit status: 0 healthy, 1 unhealthy, 2 the check could not run (bad configuration).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = 'ansible_collections.gpufleet.nvidia.plugins.module_utils'
EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_ERROR = 0, 1, 2
DEFAULTS = {
    'nvidia_smi': 'nvidia-smi', 'timeout': 20, 'expected_gpu_count': None, 'fail_on': 'warning',
    'thresholds': {}, 'check_overrides': {}, 'ignore_xids': [], 'require_persistence': True,
    'nvlink': 'never', 'kernel_log_source': 'auto', 'kernel_log_path': '', 'xid_window': '24h',
    'state_path': '/var/lib/gpufleet/health-state-node.json', 'scontrol': 'scontrol', 'slurm_node': '',
    'drain_reason_prefix': 'gpufleet: gpu health', 'textfile_name': 'gpufleet_health.prom',
}


def _install_package_path():
    """Let the collection's module_utils files, installed beside this script, import each other under the
    collection's own names (their import lines stay those of the collection)."""
    parts = PACKAGE.split('.')
    for depth in range(1, len(parts) + 1):
        name = '.'.join(parts[:depth])
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [HERE] if depth == len(parts) else []
            sys.modules[name] = module


_install_package_path()
from ansible_collections.gpufleet.nvidia.plugins.module_utils import health_readers, health_state  # noqa: E402
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_health import (  # noqa: E402
    Catalog, evaluate, health_view, is_healthy, parse_duration)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_readers import first_line  # noqa: E402
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi import classify_failure, parse_xml  # noqa: E402


class ConfigError(Exception):
    """The configuration cannot be used: the check does not run."""


def load_config(path):
    try:
        with open(path) as handle:
            given = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise ConfigError('cannot read %s: %s' % (path, exc))
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ConfigError('%s: unknown setting(s) %s' % (path, ', '.join(unknown)))
    config = dict(DEFAULTS, **given)
    try:
        config['window'] = parse_duration(config['xid_window'])
        config['catalog'] = Catalog(thresholds=config['thresholds'], checks=config['check_overrides'])
    except ValueError as exc:
        raise ConfigError('%s: %s' % (path, exc))
    return config


def run(argv, timeout):
    """(rc, stdout, stderr); rc 124 when it ran out of time, 127 when the program is missing."""
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, '', '%s timed out after %s seconds' % (argv[0], timeout)
    except (IOError, OSError) as exc:
        return 127, '', '%s: %s' % (argv[0], exc)
    return done.returncode, done.stdout, done.stderr


def read_gpus(config):
    """(GPU records, smi_failure or None, seconds)."""
    started = time.monotonic()
    rc, stdout, stderr = run([config['nvidia_smi'], '-q', '-x'], config['timeout'])
    seconds = time.monotonic() - started
    failure = classify_failure(rc, stdout, stderr)
    if rc != 0 or (failure.reason and '<nvidia_smi_log' not in stdout):
        return [], {'reason': failure.reason or 'unknown', 'hint': failure.hint, 'rc': rc,
                    'pci_bus_id': failure.pci_bus_id, 'stdout': stdout, 'stderr': stderr}, seconds
    try:
        return [health_view(gpu) for gpu in parse_xml(stdout)['gpus']], None, seconds
    except ValueError as exc:
        return [], {'reason': 'unknown', 'hint': 'nvidia-smi -q -x printed no report this script reads: %s' % exc,
                    'rc': rc, 'pci_bus_id': None, 'stdout': '', 'stderr': ''}, seconds


def run_reader(config):
    """``run_reader(binary, args)`` for the kernel log: (text, None) or (None, error text)."""
    def reader(binary, args):
        rc, stdout, stderr = run([binary] + args, config['timeout'])
        if rc == 124:
            return None, '%s did not finish within %s seconds' % (binary, config['timeout'])
        if rc == 127:
            return None, '%s not found' % binary
        if rc != 0:
            return None, '%s failed with rc %s: %s' % (binary, rc, first_line(stderr or stdout))
        return stdout, None
    return reader


def read_kernel_log(config):
    """(events, error text or None)."""
    try:
        events, _source, error = health_readers.read_kernel_log(
            config['kernel_log_source'], config['kernel_log_path'], config['window'], run_reader(config))
    except (IOError, OSError) as exc:
        return [], 'cannot read %s: %s' % (config['kernel_log_path'], exc)
    return events, error


def judge(config, node_idle=None):
    """The findings of this node, the ones already reported, and the time of the run."""
    state = health_state.load(config['state_path']) if config['state_path'] else health_state.empty()
    previous = state.get('readings') or None
    now = time.time()
    gpus, smi_failure, seconds = read_gpus(config)
    nvlink, nvlink_errors, nvlink_error, _calls = (None, None, None, 0) if smi_failure else health_readers.read_nvlink(
        config['nvlink'], len(gpus), lambda args: run([config['nvidia_smi']] + args, config['timeout']))
    events, log_error = read_kernel_log(config)
    findings = evaluate(
        gpus, events, thresholds={'require_persistence': config['require_persistence'],
                                  'ignore_xids': config['ignore_xids']},
        expected_count=config['expected_gpu_count'], nvlink=nvlink, smi_failure=smi_failure, smi_seconds=seconds,
        kernel_log_error=log_error, nvlink_error=nvlink_error, catalog=config['catalog'],
        nvlink_errors=nvlink_errors, previous=previous, now=now, node_idle=node_idle)
    findings, already, remembered = health_state.remember_events(findings, state, now)
    if config['state_path']:
        try:
            health_state.save(config['state_path'], health_state.advance(state, gpus, nvlink_errors, now, remembered))
        except (IOError, OSError) as exc:
            print('gpufleet-health: the state could not be written to %s: %s' % (config['state_path'], exc),
                  file=sys.stderr)
    return findings, already, now


def _label(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', ' ')


def textfile(findings, healthy, now, seconds):
    """node_exporter textfile collector format."""
    lines = [
        '# HELP gpufleet_health_finding A finding of the gpufleet health catalog on this node (1 while present).',
        '# TYPE gpufleet_health_finding gauge',
    ]
    seen = set()
    for finding in findings:
        gpu = (finding.get('gpu') or {})
        where = gpu.get('index') if gpu.get('index') is not None else (gpu.get('pci_bus_id') or 'host')
        labels = (finding['code'], finding['severity'], finding.get('action') or 'none', finding.get('source') or '',
                  where)
        if labels in seen:
            continue
        seen.add(labels)
        lines.append('gpufleet_health_finding{code="%s",severity="%s",action="%s",source="%s",gpu="%s"} 1'
                     % tuple(_label(value) for value in labels))
    lines += [
        '# HELP gpufleet_health_healthy Whether the last run found the node healthy (1) or not (0).',
        '# TYPE gpufleet_health_healthy gauge',
        'gpufleet_health_healthy %d' % (1 if healthy else 0),
        '# HELP gpufleet_health_last_run_timestamp_seconds When the node-local health check last ran.',
        '# TYPE gpufleet_health_last_run_timestamp_seconds gauge',
        'gpufleet_health_last_run_timestamp_seconds %.3f' % now,
        '# HELP gpufleet_health_run_seconds How long the last run took.',
        '# TYPE gpufleet_health_run_seconds gauge',
        'gpufleet_health_run_seconds %.3f' % seconds,
    ]
    return '\n'.join(lines) + '\n'


def write_textfile(directory, name, text):
    """Atomically, as node_exporter asks: it must never read half a file."""
    handle, temporary = tempfile.mkstemp(prefix='.' + name + '.', dir=directory)
    with os.fdopen(handle, 'w') as out:
        out.write(text)
    os.chmod(temporary, 0o644)
    os.rename(temporary, os.path.join(directory, name))


def slurm_state(config):
    """(node name, Slurm state such as IDLE+DRAIN or None, error text or None)."""
    node = config['slurm_node'] or socket.gethostname().split('.')[0]
    rc, stdout, stderr = run([config['scontrol'], '--oneliner', 'show', 'node', node], config['timeout'])
    if rc != 0:
        return node, None, 'scontrol show node %s failed (rc %s): %s' % (node, rc, (stderr or stdout).strip()[:200])
    return node, (stdout.split('State=', 1)[1].split()[0] if 'State=' in stdout else ''), None


def slurm_drain(config, findings, node, state):
    """Drain this node in Slurm with the finding codes, unless it is drained already (by us or anyone)."""
    if 'DRAIN' in state:
        return '%s is already drained (%s); its reason is left as it is' % (node, state)
    codes = []
    for finding in findings:
        if finding['code'] not in codes:
            codes.append(finding['code'])
    reason = '%s: %s' % (config['drain_reason_prefix'], ','.join(codes))
    rc, stdout, stderr = run([config['scontrol'], 'update', 'NodeName=%s' % node, 'State=DRAIN',
                              'Reason=%s' % reason[:250]], config['timeout'])
    if rc != 0:
        return 'scontrol update NodeName=%s State=DRAIN failed (rc %s): %s' % (node, rc, (stderr or stdout).strip()[:200])
    return 'drained %s: %s' % (node, reason)


def main(argv=None):
    parser = argparse.ArgumentParser(description='The gpufleet health catalog on this node.')
    parser.add_argument('--config', default='/etc/gpufleet/health-node.json')
    parser.add_argument('--slurm', action='store_true', help='drain this node in Slurm when it is unhealthy')
    parser.add_argument('--textfile', metavar='DIR', help="write node_exporter's textfile metrics into DIR")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print('gpufleet-health: %s' % exc, file=sys.stderr)
        return EXIT_ERROR
    node = state = None
    if args.slurm:
        node, state, error = slurm_state(config)
        if error:
            print('gpufleet-health: %s' % error, file=sys.stderr)
    # No job on the node (Slurm says so): GPU processes or memory in use are a finding.
    node_idle = (not any(word in state for word in ('ALLOC', 'MIX', 'COMPLETING'))) if state else None
    findings, already, now = judge(config, node_idle)
    healthy = is_healthy(findings, config['fail_on'])
    for finding in findings:
        print('%s %s (%s): %s' % (finding['severity'], finding['code'], finding.get('action'), finding['evidence']))
    for finding in already:
        print('already reported: %s: %s' % (finding['code'], finding['evidence']))
    print('gpufleet-health: %s, %d finding(s)' % ('healthy' if healthy else 'unhealthy', len(findings)))
    if args.textfile:
        write_textfile(args.textfile, config['textfile_name'],
                       textfile(findings, healthy, now, time.monotonic() - started))
    if args.slurm and not healthy and state is not None:
        counted = [f for f in findings if not is_healthy([f], config['fail_on'])]
        print('gpufleet-health: %s' % slurm_drain(config, counted, node, state))
    return EXIT_HEALTHY if healthy else EXIT_UNHEALTHY


if __name__ == '__main__':
    sys.exit(main())
