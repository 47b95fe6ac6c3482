#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_mig
short_description: Declarative MIG geometry (GPU and compute instances) with nvidia-smi
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Makes the MIG GPU instances of selected GPUs match a declared layout, such as seven V(1g.10gb) instances or two
    V(3g.40gb) instances, each with one compute instance spanning the whole GPU instance (the C(-C) default).
  - Validates every layout against the profiles each GPU reports (C(nvidia-smi mig -lgip)) before changing anything.
    Unknown profile names, more instances of a profile than the GPU holds, and layouts needing more compute slices or
    memory than the GPU has all fail with a message naming the GPU.
  - A GPU whose instances already match is not touched. A GPU that differs is re-partitioned as a whole (compute
    instances destroyed, then GPU instances, then the layout created largest profile first with C(-cgi ... -C)),
    because MIG placement makes piecemeal changes fail in ways that depend on creation order.
  - Refuses to touch a GPU on which compute processes run (C(nvidia-smi --query-compute-apps)) unless O(force=true).
  - MIG mode must already be enabled on the selected GPUs; set it with O(gpufleet.nvidia.nvidia_smi#module:mig_mode=true)
    or the C(gpufleet.nvidia.mig) role, which also re-applies the layout at boot (MIG instances do not survive a reboot).
  - With O(validate_only=true) it only checks the layouts, also on GPUs whose MIG mode is still off, against the
    collection's table of MIG profiles per GPU model; the C(gpufleet.nvidia.mig) role runs it so before it enables
    MIG mode.
extends_documentation_fragment:
  - gpufleet.nvidia.nvidia_smi
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.PLATFORM_LINUX_NVIDIA
attributes:
  check_mode:
    support: full
    details:
      - Reads and validates, including the running-process check, but creates and destroys nothing.
  diff_mode:
    support: full
    details:
      - Before and after lists of GPU instance profiles per GPU index.
  idempotent:
    support: full
options:
  layouts:
    description:
      - The MIG layouts to apply. Each entry applies one profile layout to a set of GPUs.
      - A GPU may appear in only one entry. GPUs in no entry are left alone.
    type: list
    elements: dict
    required: true
    suboptions:
      gpus:
        description:
          - GPUs to partition, as indexes, UUIDs or PCI bus ids, as in M(gpufleet.nvidia.nvidia_smi).
          - When omitted, every GPU of the host; on a host that mixes MIG-capable and other GPUs, list them.
        type: list
        elements: str
      profiles:
        description:
          - GPU instance profile names (as C(nvidia-smi mig -lgip) prints them, with or without the C(MIG) prefix)
            mapped to the number of instances, for example V(3g.40gb) to V(1) and V(1g.10gb) to V(2).
          - An empty mapping removes every instance from the GPUs.
        type: dict
        required: true
  force:
    description:
      - Change GPUs even when compute processes run on them.
      - The driver still refuses to destroy an instance that a process holds; the module then fails with its message.
    type: bool
    default: false
  validate_only:
    description:
      - Only check O(layouts) against the profiles each selected GPU offers, and change nothing.
      - A GPU whose MIG mode is in effect is checked against its own list (C(nvidia-smi mig -lgip)). A GPU whose MIG
        mode is off or pending lists no profiles; it is checked against O(gpu_profiles) or else the collection's table
        of MIG profiles per GPU model, chosen by product name and memory size and built from the NVIDIA MIG User Guide
        (its sources are in C(plugins/module_utils/nvidia_mig.py)). Checked are profile names, instance counts and
        the compute and memory slices of the whole GPU.
      - A GPU with MIG mode off whose model is in neither fails with O(ignore:reason=unknown_gpu_model) unless its layout
        names no profile. RV(checks) says what each GPU was checked against.
    type: bool
    default: false
  gpu_profiles:
    description:
      - MIG profiles of GPU models that the collection's table lacks, for O(validate_only) on GPUs whose MIG mode is off.
      - Keys are product names as C(nvidia-smi --query-gpu=name) prints them (the C(NVIDIA) prefix and the case do not
        matter); values map each GPU instance profile name to the most instances of it one GPU holds (the Total
        column of C(nvidia-smi mig -lgip) on a GPU of that model). Only names and counts are checked for these.
      - An entry here is used instead of the table's for that product name.
    type: dict
    default: {}
notes:
  - Needs root; use O(ignore:become=true).
  - Besides the C(nvidia-smi) failure codes, O(ignore:reason) can be V(mig_disabled) (MIG mode off, pending or not
    supported), V(invalid_layout) (the layout does not fit a GPU), V(unknown_gpu_model) (O(validate_only) on a GPU
    with MIG mode off whose model is in neither the table nor O(gpu_profiles)) and V(gpu_busy) (compute processes run
    on a GPU that must change).
  - Placement is decided by the driver. A layout within the GPU's slice and memory capacity can still be refused when
    no placement fits; the module then fails with the driver's message and RV(actions) shows what already ran.
seealso:
  - module: gpufleet.nvidia.nvidia_smi
  - module: gpufleet.nvidia.nvidia_smi_info
  - name: NVIDIA Multi-Instance GPU User Guide
    description: Supported profiles and valid combinations per GPU model.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Seven 1g.10gb instances on every A100 80GB of the host
  gpufleet.nvidia.nvidia_mig:
    layouts:
      - profiles:
          1g.10gb: 7
  become: true

- name: Different layouts on GPUs 0-3 and 4-7
  gpufleet.nvidia.nvidia_mig:
    layouts:
      - gpus: [0, 1, 2, 3]
        profiles:
          3g.40gb: 2
      - gpus: [4, 5, 6, 7]
        profiles:
          4g.40gb: 1
          2g.20gb: 1
          1g.10gb: 1
  become: true

- name: Remove every MIG instance from GPU 0 (MIG mode stays on)
  gpufleet.nvidia.nvidia_mig:
    layouts:
      - gpus: [0]
        profiles: {}
  become: true
"""

RETURN = r"""
actions:
  description: The C(nvidia-smi) commands run, or in check mode those that would run, in order.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi mig -i 0 -dci", "nvidia-smi mig -i 0 -dgi", "nvidia-smi mig -i 0 -cgi 9,9 -C"]
gpus:
  description:
    - The GPUs named by the layouts, after the run (in check mode, as they would be; ids of instances still to be
      created are V(null)).
  returned: success, unless O(validate_only=true)
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    uuid:
      description: GPU UUID.
      type: str
    pci_bus_id:
      description: PCI bus id, normalised to the lower-case C(dddd:bb:dd.f) form (V(0000:07:00.0)).
      type: str
    name:
      description: Product name.
      type: str
    profiles:
      description: Count of GPU instances per profile.
      type: dict
    instances:
      description:
        - GPU instances with C(gpu_instance_id), C(profile), C(profile_id), C(placement) (C(start), C(size)) and
          C(compute_instances) (C(compute_instance_id), C(profile), C(profile_id)).
      type: list
      elements: dict
  sample:
    - index: 0
      uuid: GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763
      pci_bus_id: "0000:07:00.0"
      name: NVIDIA A100-SXM4-80GB
      profiles: {"3g.40gb": 2}
      instances:
        - gpu_instance_id: 1
          profile: 3g.40gb
          profile_id: 9
          placement: {start: 4, size: 4}
          compute_instances: [{compute_instance_id: 0, profile: 3g.40gb, profile_id: 2}]
        - gpu_instance_id: 2
          profile: 3g.40gb
          profile_id: 9
          placement: {start: 0, size: 4}
          compute_instances: [{compute_instance_id: 0, profile: 3g.40gb, profile_id: 2}]
checks:
  description:
    - With O(validate_only=true), one entry per selected GPU, also when the module fails.
  returned: when O(validate_only=true)
  type: list
  elements: dict
  contains:
    entry:
      description: Number of the O(layouts) entry that selects the GPU, counting from 1.
      type: int
    index:
      description: GPU index.
      type: int
    name:
      description: Product name.
      type: str
    mig_mode:
      description: V(enabled), V(disabled), V(pending) (enabled, waiting for a reset) or V(unsupported).
      type: str
    source:
      description:
        - What the layout was checked against, V(gpu) (its own C(nvidia-smi mig -lgip)), V(table) (the collection's
          table), V(gpu_profiles), or V(null) (nothing, for a GPU without MIG or of an unknown model).
      type: str
    model:
      description: The model of the table (or the O(gpu_profiles) key) used, else V(null).
      type: str
    unknown_model:
      description: True when MIG mode is off and the model is in neither the table nor O(gpu_profiles).
      type: bool
    errors:
      description: Why the layout does not fit, each naming the GPU; empty when it fits.
      type: list
      elements: str
  sample:
    - {entry: 1, index: 0, name: NVIDIA A100-SXM4-40GB, mig_mode: disabled, source: table, model: A100 40GB,
       unknown_model: false, errors: []}
processes:
  description: Compute processes found on GPUs that had to change (only when O(force=true) let the module go on).
  returned: when processes ran on a changed GPU
  type: list
  elements: dict
  contains:
    gpu_uuid:
      description: UUID of the GPU the process uses.
      type: str
    pid:
      description: Process id.
      type: int
    name:
      description: Process name, as in the RV(gpufleet.nvidia.nvidia_smi_info#module:processes) of the info module.
      type: str
    used_memory_mib:
      description: GPU memory the process uses, in MiB.
      type: int
  sample: [{gpu_uuid: GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763, pid: 4242, name: python3, used_memory_mib: 1024}]
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_mig import (
    MigParseError,
    current_layout,
    describe_layout,
    expand_desired,
    find_gpu_model,
    gpu_profiles_models,
    is_empty_listing,
    layout_matches,
    parse_compute_instances,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_mig_command_output,
    profile_short_name,
    validate_layout,
    validate_layout_for_model,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import parse_query_csv
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import classify_failure
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_runner import (
    NVIDIA_SMI_ARGUMENT_SPEC,
    fail_from_result,
    run_nvidia_smi,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_settings import (
    SettingsError,
    gpu_label,
    resolve_selectors,
)

GPU_FIELDS = ('index', 'uuid', 'pci.bus_id', 'name', 'mig.mode.current', 'mig.mode.pending')
GPU_QUERY = ['--query-gpu=' + ','.join(GPU_FIELDS), '--format=csv,noheader,nounits']
# The memory size tells apart models of one product name (an H100 of 80, 94 or 96 GB) in the profile table.
VALIDATE_GPU_FIELDS = GPU_FIELDS + ('memory.total',)
APPS_FIELDS = ('gpu_uuid', 'pid', 'process_name', 'used_memory')
APPS_QUERY = ['--query-compute-apps=' + ','.join(APPS_FIELDS), '--format=csv,noheader,nounits']


def _command(args):
    return ' '.join(['nvidia-smi'] + [str(a) for a in args])


class MigManager(object):
    def __init__(self, module):
        self.module = module
        self.actions = []
        self.changed = False

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, changed=self.changed, actions=self.actions, **extra)

    def run(self, args, empty_ok=False):
        rc, stdout, stderr = run_nvidia_smi(self.module, args)
        if rc != 0 and not (empty_ok and is_empty_listing(stdout, stderr)
                            and classify_failure(rc, stdout, stderr).reason in ('not_found', 'unknown')):
            fail_from_result(self.module, rc, stdout, stderr, ['nvidia-smi'] + args,
                             changed=self.changed, actions=self.actions)
        return stdout, stderr

    def parse(self, parser, args, stdout, stderr):
        try:
            return parser(stdout)
        except (MigParseError, ValueError, KeyError, TypeError) as exc:
            self.fail('could not read the output of %s: %s' % (_command(args), exc),
                      reason='unparsable_output', stdout=stdout, stderr=stderr)

    def read_gpus(self, fields=GPU_FIELDS):
        query = ['--query-gpu=' + ','.join(fields), '--format=csv,noheader,nounits']
        stdout, stderr = self.run(query)

        def _parse(text):
            gpus = parse_query_csv(text, fields)
            if any(gpu['index'] is None for gpu in gpus):
                raise ValueError('a GPU line has no index')
            return gpus
        gpus = self.parse(_parse, query, stdout, stderr)
        if not gpus:
            fail_from_result(self.module, 6, stdout, stderr or 'No devices were found', ['nvidia-smi'] + query,
                             changed=self.changed, actions=self.actions)
        return gpus

    def read_instances(self):
        gi_args, ci_args = ['mig', '-lgi'], ['mig', '-lci']
        stdout, stderr = self.run(gi_args, empty_ok=True)
        gis = self.parse(parse_gpu_instances, gi_args, stdout, stderr)
        stdout, stderr = self.run(ci_args, empty_ok=True)
        cis = self.parse(parse_compute_instances, ci_args, stdout, stderr)
        return gis, cis

    def desired_layouts(self, gpus):
        targets = {}
        for number, layout in enumerate(self.module.params['layouts'], start=1):
            profiles = {}
            for name, count in (layout.get('profiles') or {}).items():
                short = profile_short_name(str(name))
                if isinstance(count, str) and re.match(r'^\s*\d+\s*$', count):
                    count = int(count)
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    self.fail('layouts[%d]: the count for profile %s must be a whole number >= 0, got %r'
                              % (number, name, count))
                profiles[short] = profiles.get(short, 0) + count
            try:
                selected = resolve_selectors(gpus, layout.get('gpus'))
            except SettingsError as exc:
                self.fail('layouts[%d]: %s' % (number, exc))
            for gpu in selected:
                if gpu['index'] in targets:
                    self.fail('GPU %d is selected by more than one entry of layouts (%d and %d)'
                              % (gpu['index'], targets[gpu['index']][2], number))
                targets[gpu['index']] = (gpu, profiles, number)
        return [targets[i] for i in sorted(targets)]

    def check_mig_mode(self, targets):
        errors = []
        for gpu, _profiles, _number in targets:
            if gpu['mig_mode_current'] is True:
                continue
            label = gpu_label(gpu)
            if gpu['mig_mode_current'] is None:
                errors.append('%s does not support MIG' % label)
            elif gpu['mig_mode_pending'] is True:
                errors.append('%s has MIG mode enabled but pending: reset the GPU (nvidia-smi -i %d -r) with no '
                              'process on it, or reboot, then run again' % (label, gpu['index']))
            else:
                errors.append('%s has MIG mode disabled: enable it first with gpufleet.nvidia.nvidia_smi '
                              '(mig_mode: true) or the gpufleet.nvidia.mig role' % label)
        if errors:
            self.fail('; '.join(errors), reason='mig_disabled')

    def processes_on(self, gpus):
        stdout, stderr = self.run(APPS_QUERY)
        rows = self.parse(lambda text: parse_query_csv(text, APPS_FIELDS, query='compute-apps'), APPS_QUERY,
                          stdout, stderr)
        uuids = set((g['uuid'] or '').lower() for g in gpus)
        return [row for row in rows if (row['gpu_uuid'] or '').lower() in uuids]

    def plan(self, gpu, layout, desired, profiles):
        idx = str(gpu['index'])
        commands = []
        if any(gi['compute_instances'] for gi in layout):
            commands.append(['mig', '-i', idx, '-dci'])
        if layout:
            commands.append(['mig', '-i', idx, '-dgi'])
        names = expand_desired(desired)
        if names:
            ids = dict((p['name'], p['profile_id']) for p in profiles)
            commands.append(['mig', '-i', idx, '-cgi', ','.join(str(ids[n]) for n in names), '-C'])
        return commands

    def apply(self, gpu, commands, desired):
        expected = sum(desired.values())
        for args in commands:
            self.actions.append(_command(args))
            if self.module.check_mode:
                continue
            rc, stdout, stderr = run_nvidia_smi(self.module, args)
            outcome = parse_mig_command_output(stdout + '\n' + stderr)
            if rc != 0 or outcome['errors']:
                self.changed = self.changed or bool(
                    outcome['created_gpu_instances'] or outcome['destroyed_gpu_instances']
                    or outcome['destroyed_compute_instances'])
                failure = classify_failure(rc or 1, stdout, stderr)
                msg = '%s failed on %s' % (_command(args), gpu_label(gpu))
                if outcome['errors']:
                    msg += ': ' + '; '.join(outcome['errors'])
                self.fail(msg, reason=failure.reason, hint=failure.hint, rc=rc, stdout=stdout, stderr=stderr)
            self.changed = True
            if '-cgi' in args and len(outcome['created_gpu_instances']) != expected:
                self.fail('%s reported %d GPU instances created on %s, expected %d'
                          % (_command(args), len(outcome['created_gpu_instances']), gpu_label(gpu), expected),
                          stdout=stdout, stderr=stderr)

    def validate(self):
        """validate_only: each selected GPU's layout against the profiles it offers; reads, changes nothing."""
        try:
            extra = gpu_profiles_models(self.module.params['gpu_profiles'])
        except ValueError as exc:
            self.fail('gpu_profiles: %s' % exc)
        targets = self.desired_layouts(self.read_gpus(VALIDATE_GPU_FIELDS))
        profiles = []
        # -lgip lists only the GPUs whose MIG mode is in effect.
        if any(gpu['mig_mode_current'] is True for gpu, _desired, _number in targets):
            lgip_args = ['mig', '-lgip']
            stdout, stderr = self.run(lgip_args, empty_ok=True)
            profiles = self.parse(parse_gpu_instance_profiles, lgip_args, stdout, stderr)
        checks = []
        for gpu, desired, number in targets:
            label = gpu_label(gpu)
            check = dict(entry=number, index=gpu['index'], name=gpu['name'], mig_mode=_mig_mode(gpu),
                         source=None, model=None, unknown_model=False)
            if gpu['mig_mode_current'] is True:
                check['source'] = 'gpu'
                errors = validate_layout(label, desired, [p for p in profiles if p['gpu'] == gpu['index']])
            elif gpu['mig_mode_current'] is None:
                errors = ['%s does not support MIG' % label]
            else:
                model = find_gpu_model(gpu['name'], gpu.get('memory_total_mib'), extra)
                if model is not None:
                    check['source'] = model['source'] if model['source'] == 'gpu_profiles' else 'table'
                    check['model'] = model['model']
                    errors = validate_layout_for_model(label, desired, model)
                elif desired:
                    check['unknown_model'] = True
                    errors = ['%s has MIG mode %s, and the table of MIG profiles does not know its model (%s with '
                              '%s MiB of memory)' % (label, check['mig_mode'], gpu['name'], gpu.get('memory_total_mib'))]
                else:
                    errors = []
            check['errors'] = errors
            checks.append(check)
        problems = [c for c in checks if c['errors']]
        if problems:
            reason = 'unknown_gpu_model' if all(c['unknown_model'] for c in problems) else 'invalid_layout'
            self.fail('; '.join('layouts[%d]: %s' % (c['entry'], e) for c in problems for e in c['errors']),
                      reason=reason, checks=checks)
        self.module.exit_json(changed=False, actions=self.actions, checks=checks)

    def execute(self):
        if self.module.params['validate_only']:
            self.validate()
            return
        gpus = self.read_gpus()
        targets = self.desired_layouts(gpus)
        self.check_mig_mode(targets)

        lgip_args = ['mig', '-lgip']
        stdout, stderr = self.run(lgip_args, empty_ok=True)
        profiles = self.parse(parse_gpu_instance_profiles, lgip_args, stdout, stderr)
        errors = []
        for gpu, desired, _number in targets:
            own = [p for p in profiles if p['gpu'] == gpu['index']]
            errors.extend(validate_layout(gpu_label(gpu), desired, own))
        if errors:
            self.fail('; '.join(errors), reason='invalid_layout')

        gis, cis = self.read_instances()
        work = []
        before = {}
        for gpu, desired, _number in targets:
            layout = current_layout(gpu['index'], gis, cis)
            before[gpu['index']] = layout
            if not layout_matches(layout, desired):
                own = [p for p in profiles if p['gpu'] == gpu['index']]
                work.append((gpu, desired, self.plan(gpu, layout, desired, own), own))

        processes = []
        if work:
            processes = self.processes_on([w[0] for w in work])
            if processes and not self.module.params['force']:
                busy = ', '.join('pid %s (%s) on %s' % (p['pid'], p['name'], p['gpu_uuid']) for p in processes)
                self.fail('compute processes run on GPUs whose MIG layout must change: %s. Stop them or set '
                          'force: true' % busy, reason='gpu_busy', processes=processes)

        for gpu, desired, commands, _own in work:
            self.apply(gpu, commands, desired)

        if self.changed:
            gis, cis = self.read_instances()
            after = dict((gpu['index'], current_layout(gpu['index'], gis, cis)) for gpu, _d, _n in targets)
            mismatched = [gpu_label(gpu) for gpu, desired, _n in targets if not layout_matches(after[gpu['index']], desired)]
            if mismatched:
                self.fail('after applying, the MIG layout still differs on %s' % ', '.join(mismatched),
                          gpus=self.report(targets, after))
        else:
            after = dict(before)
            for gpu, desired, _commands, own in work:
                after[gpu['index']] = _predicted(desired, own)

        result = dict(changed=self.changed or (self.module.check_mode and bool(work)),
                      actions=self.actions, gpus=self.report(targets, after))
        if processes:
            result['processes'] = processes
        if self.module._diff:
            result['diff'] = dict(
                before=dict((str(i), describe_layout(layout)) for i, layout in before.items()),
                after=dict((str(i), describe_layout(layout)) for i, layout in after.items()),
            )
        self.module.exit_json(**result)

    def report(self, targets, layouts):
        out = []
        for gpu, _desired, _number in targets:
            layout = layouts[gpu['index']]
            counts = {}
            for gi in layout:
                counts[gi['profile']] = counts.get(gi['profile'], 0) + 1
            out.append(dict(index=gpu['index'], uuid=gpu['uuid'], pci_bus_id=gpu['pci_bus_id'], name=gpu['name'],
                            profiles=counts, instances=layout))
        return out


def _mig_mode(gpu):
    if gpu['mig_mode_current'] is None:
        return 'unsupported'
    if gpu['mig_mode_current']:
        return 'enabled'
    return 'pending' if gpu['mig_mode_pending'] else 'disabled'


def _predicted(desired, profiles):
    ids = dict((p['name'], p['profile_id']) for p in profiles)
    return [{'gpu_instance_id': None, 'profile': name, 'profile_id': ids.get(name), 'placement': None,
             'compute_instances': [{'compute_instance_id': None, 'profile': name, 'profile_id': None}]}
            for name in expand_desired(desired)]


def main():
    argument_spec = dict(
        layouts=dict(
            type='list', elements='dict', required=True,
            options=dict(
                gpus=dict(type='list', elements='str'),
                profiles=dict(type='dict', required=True),
            ),
        ),
        force=dict(type='bool', default=False),
        validate_only=dict(type='bool', default=False),
        gpu_profiles=dict(type='dict', default={}),
    )
    argument_spec.update(NVIDIA_SMI_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    MigManager(module).execute()


if __name__ == '__main__':
    main()
