# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Re-create the MIG layout written by the gpufleet.nvidia.mig role.

MIG GPU and compute instances do not survive a reboot or a GPU reset, while MIG
mode does. The gpufleet-mig-layout.service unit runs this script at boot,
before the services that use GPUs, with plain nvidia-smi commands (no Ansible
at boot). A GPU whose instances already match is left alone, so running it
again changes nothing.

The table parsers and the layout planning come from nvidia_mig.py, and the
--query CSV reader, its converters and the PCI bus id spelling from
gpu_record.py, both installed next to this file: they are the collection's
module_utils files, the code the gpufleet.nvidia modules read nvidia-smi and
plan with, so that the boot and the role agree on what "matches" means and on
which GPU a selector names.

Run it with Python 3: python3 gpufleet_mig_layout.py [--check] [--config FILE].
Exit status: 0 when every GPU of the configuration has its layout, 1 on any
error (the other GPUs are still handled), 2 with --check when a GPU differs.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import json
import os
import re
import subprocess
import sys
import time

import gpu_record
import nvidia_mig

EXIT_OK, EXIT_ERROR, EXIT_DIFFERS = 0, 1, 2
GPU_FIELDS = ('index', 'uuid', 'pci.bus_id', 'mig.mode.current')
APPS_FIELDS = ('gpu_uuid', 'pid', 'process_name')


class LayoutError(Exception):
    """A problem that stops the handling of one GPU or of the whole run."""


def log(message):
    print('gpufleet-mig-layout: ' + message)
    sys.stdout.flush()


def load_config(path):
    """The role's JSON file: ``{"version": 1, "layouts": [{"gpus": [...] | null, "profiles": {name: count}}]}``."""
    try:
        with open(path) as handle:
            config = json.load(handle)
    except (IOError, OSError) as exc:
        raise LayoutError('cannot read %s: %s' % (path, exc))
    except ValueError as exc:
        raise LayoutError('%s is not valid JSON: %s' % (path, exc))
    if not isinstance(config, dict) or config.get('version') != 1 or not isinstance(config.get('layouts'), list):
        raise LayoutError('%s must be an object with "version": 1 and a "layouts" list' % path)
    layouts = []
    for number, entry in enumerate(config['layouts'], start=1):
        where = '%s: layouts[%d]' % (path, number)
        if not isinstance(entry, dict) or not isinstance(entry.get('profiles'), dict):
            raise LayoutError('%s must be an object with a "profiles" object' % where)
        gpus = entry.get('gpus')
        if gpus is not None and (not isinstance(gpus, list) or not gpus):
            raise LayoutError('%s: "gpus" must be null (every GPU) or a non-empty list' % where)
        profiles = {}
        for name, count in entry['profiles'].items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise LayoutError('%s: the count of %s must be a whole number >= 0' % (where, name))
            short = nvidia_mig.profile_short_name(name)
            profiles[short] = profiles.get(short, 0) + count
        layouts.append({'gpus': None if gpus is None else [str(g).strip() for g in gpus],
                        'profiles': dict((k, v) for k, v in profiles.items() if v)})
    return layouts


class NvidiaSmi(object):
    def __init__(self, path, timeout):
        self.path = path
        self.timeout = timeout

    def run(self, args):
        env = dict(os.environ, LC_ALL='C', LANG='C')
        try:
            proc = subprocess.run([self.path] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, timeout=self.timeout, universal_newlines=True, check=False)
        except OSError as exc:
            return 127, '', str(exc)
        except subprocess.TimeoutExpired:
            return 124, '', 'timed out after %d s' % self.timeout
        return proc.returncode, proc.stdout, proc.stderr

    def checked(self, args, empty_ok=False):
        rc, out, err = self.run(args)
        if rc != 0 and not (empty_ok and nvidia_mig.is_empty_listing(out, err)):
            raise LayoutError('nvidia-smi %s failed (exit %d): %s' % (' '.join(args), rc, (err or out).strip()))
        return out


def _records(text, fields, query):
    try:
        return gpu_record.parse_query_csv(text, fields, query=query)
    except ValueError as exc:
        raise LayoutError('unexpected nvidia-smi output: %s' % exc)


def read_gpus(smi, wait):
    """GPUs as nvidia-smi lists them, waiting up to ``wait`` seconds for the driver to answer.

    At boot the unit may start while the kernel module still initialises the GPUs.
    """
    args = ['--query-gpu=' + ','.join(GPU_FIELDS), '--format=csv,noheader']
    deadline = time.monotonic() + wait
    while True:
        rc, out, err = smi.run(args)
        if rc == 0 and out.strip():
            break
        if rc == 127 or time.monotonic() >= deadline:
            raise LayoutError('nvidia-smi does not answer (exit %d): %s' % (rc, (err or out).strip()))
        time.sleep(2)
    gpus = _records(out, GPU_FIELDS, 'gpu')
    if any(gpu['index'] is None for gpu in gpus):
        raise LayoutError('a GPU line of nvidia-smi has no index')
    return gpus


def select(gpus, selectors):
    """GPUs named by index, UUID or PCI bus id, as the gpufleet.nvidia modules read them; every GPU for ``None``."""
    if selectors is None:
        return list(gpus)
    chosen = []
    for selector in selectors:
        if re.match(r'^\d+$', selector):
            matches = [g for g in gpus if g['index'] == int(selector)]
        elif selector.upper().startswith('GPU-'):
            matches = [g for g in gpus if (g['uuid'] or '').lower() == selector.lower()]
        elif gpu_record.normalize_pci_bus_id(selector) is not None:
            # Records hold the normalised spelling; the selector may be any.
            matches = [g for g in gpus if g['pci_bus_id'] == gpu_record.normalize_pci_bus_id(selector)]
        else:
            raise LayoutError('%r is neither a GPU index, a GPU UUID nor a PCI bus id' % selector)
        if not matches:
            raise LayoutError('no GPU matches %s; present: %s' % (
                selector, ', '.join('%d (%s)' % (g['index'], g['pci_bus_id']) for g in gpus) or 'none'))
        chosen.extend(g for g in matches if g not in chosen)
    return sorted(chosen, key=lambda g: g['index'])


def label(gpu):
    return 'GPU %d (%s)' % (gpu['index'], gpu['pci_bus_id'])


def describe(counts):
    return ', '.join('%d x %s' % (c, n) for n, c in sorted(counts.items())) or 'no instances'


class Applier(object):
    def __init__(self, smi, check, force):
        self.smi = smi
        self.check = check
        self.force = force
        self._instances = None
        self._profiles = None

    def instances(self):
        if self._instances is None:
            gis = nvidia_mig.parse_gpu_instances(self.smi.checked(['mig', '-lgi'], empty_ok=True))
            cis = nvidia_mig.parse_compute_instances(self.smi.checked(['mig', '-lci'], empty_ok=True))
            self._instances = (gis, cis)
        return self._instances

    def layout(self, gpu):
        gis, cis = self.instances()
        return nvidia_mig.current_layout(gpu['index'], gis, cis)

    def profiles(self, gpu):
        if self._profiles is None:
            self._profiles = nvidia_mig.parse_gpu_instance_profiles(self.smi.checked(['mig', '-lgip']))
        return [p for p in self._profiles if p['gpu'] == gpu['index']]

    def busy(self, gpu):
        args = ['--query-compute-apps=' + ','.join(APPS_FIELDS), '--format=csv,noheader']
        rows = _records(self.smi.checked(args), APPS_FIELDS, 'compute-apps')
        return [r for r in rows if (r['gpu_uuid'] or '').lower() == (gpu['uuid'] or '').lower()]

    def handle(self, gpu, desired):
        """Returns True when the GPU has (or, with --check, already had) its layout; raises LayoutError."""
        if gpu['mig_mode_current'] is not True:
            mode = {False: 'disabled', None: 'not available'}[gpu['mig_mode_current']]
            raise LayoutError('%s has MIG mode %s; enable it with the gpufleet.nvidia.mig role (or nvidia-smi -i %d '
                              '-mig 1 and a GPU reset)' % (label(gpu), mode, gpu['index']))
        layout = self.layout(gpu)
        current = nvidia_mig.layout_counts(layout)[0]
        if nvidia_mig.layout_matches(layout, desired):
            log('%s already has its MIG layout: %s' % (label(gpu), describe(desired)))
            return True
        if self.check:
            has = describe(current) if layout else 'no instances'
            log('%s differs: has %s, wants %s' % (label(gpu), has, describe(desired)))
            return False
        profiles = self.profiles(gpu)
        errors = nvidia_mig.validate_layout(label(gpu), desired, profiles)
        if errors:
            raise LayoutError('; '.join(errors))
        processes = self.busy(gpu)
        if processes and not self.force:
            raise LayoutError('%s runs compute processes (%s); not changing its MIG layout (use --force)' % (
                label(gpu), ', '.join('%s %s' % (p['pid'], p['name']) for p in processes)))
        index = str(gpu['index'])
        if any(gi['compute_instances'] for gi in layout):
            self.smi.checked(['mig', '-i', index, '-dci'])
        if layout:
            self.smi.checked(['mig', '-i', index, '-dgi'])
        names = nvidia_mig.expand_desired(desired)
        if names:
            ids = dict((p['name'], p['profile_id']) for p in profiles)
            self.smi.checked(['mig', '-i', index, '-cgi', ','.join(str(ids[n]) for n in names), '-C'])
        self._instances = None
        if not nvidia_mig.layout_matches(self.layout(gpu), desired):
            raise LayoutError('%s: after applying, the MIG layout still differs from %s' % (label(gpu), describe(desired)))
        log('%s: created %s' % (label(gpu), describe(desired)))
        return True


def run(config_path, smi, wait, check, force):
    layouts = load_config(config_path)
    gpus = read_gpus(smi, wait)
    applier = Applier(smi, check, force)
    status = EXIT_OK
    seen = {}
    for number, entry in enumerate(layouts, start=1):
        try:
            targets = select(gpus, entry['gpus'])
        except LayoutError as exc:
            log('error: layouts[%d]: %s' % (number, exc))
            status = EXIT_ERROR
            continue
        for gpu in targets:
            if gpu['index'] in seen:
                log('error: %s is in layouts[%d] and layouts[%d]' % (label(gpu), seen[gpu['index']], number))
                status = EXIT_ERROR
                continue
            seen[gpu['index']] = number
            try:
                if not applier.handle(gpu, entry['profiles']) and status == EXIT_OK:
                    status = EXIT_DIFFERS
            except (LayoutError, nvidia_mig.MigParseError) as exc:
                log('error: %s' % exc)
                status = EXIT_ERROR
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description='Re-create the MIG layout of the gpufleet.nvidia.mig role.')
    parser.add_argument('--config', default='/etc/gpufleet/mig-layout.json', help='layout file written by the role')
    parser.add_argument('--nvidia-smi', default='nvidia-smi', help='nvidia-smi to run')
    parser.add_argument('--wait-driver', type=int, default=0, metavar='SECONDS',
                        help='how long to wait for the driver to answer (at boot)')
    parser.add_argument('--timeout', type=int, default=60, metavar='SECONDS', help='limit for each nvidia-smi call')
    parser.add_argument('--check', action='store_true', help='only compare; exit 2 when a GPU differs')
    parser.add_argument('--check-config', action='store_true', help='only read the layout file')
    parser.add_argument('--force', action='store_true', help='change GPUs even when compute processes run on them')
    args = parser.parse_args(argv)
    try:
        if args.check_config:
            load_config(args.config)
            return EXIT_OK
        return run(args.config, NvidiaSmi(args.nvidia_smi, args.timeout), args.wait_driver, args.check, args.force)
    except (LayoutError, nvidia_mig.MigParseError) as exc:
        log('error: %s' % exc)
        return EXIT_ERROR


if __name__ == '__main__':
    sys.exit(main())
