#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_smi
short_description: Declarative NVIDIA GPU settings with nvidia-smi
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Sets persistence mode, compute mode, power limit, application clocks, ECC mode and MIG mode on all GPUs of a host
    or on selected ones, and changes only what differs.
  - Reads the current state of every GPU with one C(nvidia-smi --query-gpu) call, validates every requested value
    against what each GPU reports (power limit range, supported clock pairs, ECC and MIG support) B(before) changing
    anything, then runs one C(nvidia-smi) setter per GPU and setting that differs.
  - ECC and MIG mode changes take effect only after a GPU reset or a reboot. The module compares the B(pending) mode
    with the request, so that a second run does not repeat the change, and reports RV(reset_required) and
    RV(reboot_required) while the pending mode differs from the current one.
extends_documentation_fragment:
  - gpufleet.nvidia.nvidia_smi
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.PLATFORM_LINUX_NVIDIA
attributes:
  check_mode:
    support: full
    details:
      - Reads state and validates, but runs no setter. RV(actions) lists the commands that would run.
  diff_mode:
    support: full
    details:
      - Before and after settings per GPU, keyed by GPU index.
  idempotent:
    support: full
    details:
      - For ECC and MIG mode, a pending change that already equals the request counts as done.
options:
  gpus:
    description:
      - GPUs to configure, each given as an index (V(0)), a UUID (V(GPU-8f2c...)) or a PCI bus id
        (V(00000000:07:00.0), V(0000:07:00.0) or V(07:00.0)).
      - When omitted, every GPU of the host is configured.
      - A selector that matches no GPU fails the module and lists the GPUs present.
    type: list
    elements: str
  persistence_mode:
    description:
      - Whether the driver keeps the GPUs initialised when no client uses them (C(nvidia-smi -pm)).
      - NVIDIA recommends the C(nvidia-persistenced) daemon instead on current drivers; see the
        C(gpufleet.nvidia.persistence_mode) role.
    type: bool
  compute_mode:
    description:
      - Compute mode (C(nvidia-smi -c)). V(Exclusive_Process) allows one process per GPU, V(Prohibited) none.
    type: str
    choices: [Default, Exclusive_Process, Prohibited]
  power_limit:
    description:
      - Software power limit in watts (C(nvidia-smi -pl)).
      - Must lie within the GPU's C(power.min_limit) and C(power.max_limit); otherwise the module fails naming the GPU
        and its range, before any change.
      - A current limit within 0.5 W of the request counts as equal, because GPUs round the value they store.
    type: float
  application_clocks:
    description:
      - Application clocks (C(nvidia-smi -ac MEMORY,GRAPHICS)), or their reset to the defaults (C(nvidia-smi -rac)).
      - The pair must be one the GPU lists in C(nvidia-smi --query-supported-clocks=memory,graphics).
    type: dict
    suboptions:
      memory:
        description: Memory clock in MHz. Required with O(application_clocks.graphics).
        type: int
      graphics:
        description: Graphics clock in MHz. Required with O(application_clocks.memory).
        type: int
      reset:
        description:
          - Reset the application clocks to the GPU's defaults. Mutually exclusive with O(application_clocks.memory)
            and O(application_clocks.graphics).
        type: bool
  ecc_mode:
    description:
      - Whether ECC is enabled (C(nvidia-smi -e)). Takes effect after a reboot or GPU reset.
    type: bool
  mig_mode:
    description:
      - Whether MIG mode is enabled (C(nvidia-smi -mig)). Takes effect after a GPU reset (or a reboot where the GPU
        cannot be reset, for example in passthrough VMs). Instances are managed with M(gpufleet.nvidia.nvidia_mig).
    type: bool
notes:
  - Setters are run per GPU with C(-i INDEX) and need root; use O(ignore:become=true).
  - C(nvidia-smi) exits 0 even for some no-op requests, so the module decides from the state it read, not from the
    setter's output.
  - A request that does not fit a GPU (power limit out of range, unsupported clocks, a setting the GPU does not have,
    an unknown GPU selector) fails with O(ignore:reason=invalid_request) and changes nothing on any GPU.
seealso:
  - module: gpufleet.nvidia.nvidia_smi_info
  - module: gpufleet.nvidia.nvidia_mig
"""

EXAMPLES = r"""
- name: Persistence on, exclusive-process compute mode, 300 W on every GPU
  gpufleet.nvidia.nvidia_smi:
    persistence_mode: true
    compute_mode: Exclusive_Process
    power_limit: 300
  become: true

- name: Fixed application clocks on two GPUs chosen by PCI bus id
  gpufleet.nvidia.nvidia_smi:
    gpus:
      - "00000000:07:00.0"
      - "00000000:0F:00.0"
    application_clocks:
      memory: 1593
      graphics: 1410
  become: true

- name: Enable MIG mode on GPU 0 and reset it when needed
  gpufleet.nvidia.nvidia_smi:
    gpus: [0]
    mig_mode: true
  become: true
  register: mig

- name: Apply the pending MIG mode
  ansible.builtin.command: nvidia-smi -i 0 -r
  become: true
  when: mig.reset_required
  changed_when: true
"""

RETURN = r"""
actions:
  description:
    - The C(nvidia-smi) commands run, or in check mode those that would run, in order.
    - Shown as C(nvidia-smi) followed by its arguments; the module runs the binary found on the target under a timeout.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -i 0 -pm 1", "nvidia-smi -i 0 -pl 300"]
gpus:
  description:
    - The selected GPUs after the run (in check mode, as they would be), as the GPU record that
      M(gpufleet.nvidia.nvidia_smi_info) returns too, limited to the settings' keys below; the same key has the same
      type in both modules.
    - Values that the GPU does not report are V(null).
  returned: success
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
    persistence_mode:
      description: Persistence mode.
      type: bool
    compute_mode:
      description: Compute mode as nvidia-smi prints it (V(Default), V(Exclusive_Process), V(Prohibited)).
      type: str
    power:
      description:
        - Software power limit (C(limit_w)) and the lowest and highest limits the GPU accepts (C(limit_min_w),
          C(limit_max_w)), in watts.
      type: dict
      sample: {"limit_w": 300.0, "limit_min_w": 100.0, "limit_max_w": 400.0}
    clocks_applications:
      description: Application clocks in MHz (C(memory), C(graphics)).
      type: dict
      sample: {"memory": 1593, "graphics": 1410}
    clocks_default_applications:
      description: Default application clocks in MHz (C(memory), C(graphics)).
      type: dict
      sample: {"memory": 1593, "graphics": 1275}
    ecc_mode_current:
      description: ECC mode in effect.
      type: bool
    ecc_mode_pending:
      description: ECC mode after the next reboot or reset.
      type: bool
    mig_mode_current:
      description: MIG mode in effect.
      type: bool
    mig_mode_pending:
      description: MIG mode after the next reset.
      type: bool
  sample:
    - index: 0
      uuid: GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763
      pci_bus_id: "0000:07:00.0"
      name: NVIDIA A100-SXM4-80GB
      persistence_mode: true
      compute_mode: Default
      power: {limit_w: 300.0, limit_min_w: 100.0, limit_max_w: 400.0}
      clocks_applications: {memory: 1593, graphics: 1410}
      clocks_default_applications: {memory: 1593, graphics: 1275}
      ecc_mode_current: true
      ecc_mode_pending: true
      mig_mode_current: false
      mig_mode_pending: true
reset_required:
  description:
    - True when a selected GPU has an ECC or MIG mode change pending; a GPU reset (C(nvidia-smi -i N -r)) with no
      process on the GPU, or a reboot, applies it.
  returned: success
  type: bool
reboot_required:
  description:
    - True when a selected GPU has an ECC mode change pending, which NVIDIA documents as needing a reboot.
  returned: success
  type: bool
pending:
  description: Per GPU index, the settings whose pending value differs from the current one.
  returned: success
  type: dict
  sample: {"0": ["mig_mode"]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_runner import (
    NVIDIA_SMI_ARGUMENT_SPEC,
    fail_from_result,
    run_nvidia_smi,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_settings import (
    QUERY_FIELDS,
    SettingsError,
    gpu_label,
    parse_gpus,
    parse_supported_clocks,
    plan_gpu,
    resolve_selectors,
)

QUERY_ARGS = ['--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits']


def _command(args):
    return ' '.join(['nvidia-smi'] + [str(a) for a in args])


class NvidiaSmiSettings(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.actions = []
        self.changed = False

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, changed=self.changed, actions=self.actions, **extra)

    def run(self, args):
        return run_nvidia_smi(self.module, args)

    def read_gpus(self):
        rc, stdout, stderr = self.run(QUERY_ARGS)
        if rc != 0:
            fail_from_result(self.module, rc, stdout, stderr, ['nvidia-smi'] + QUERY_ARGS,
                             changed=self.changed, actions=self.actions)
        try:
            gpus = parse_gpus(stdout)
        except ValueError as exc:
            self.fail('could not read the output of %s: %s' % (_command(QUERY_ARGS), exc),
                      reason='unparsable_output', stdout=stdout, stderr=stderr)
        if not gpus:
            fail_from_result(self.module, rc if rc else 6, stdout, stderr or 'No devices were found',
                             ['nvidia-smi'] + QUERY_ARGS, changed=self.changed, actions=self.actions)
        return gpus

    def supported_clocks(self, gpu):
        args = ['-i', str(gpu['index']), '--query-supported-clocks=memory,graphics', '--format=csv,noheader,nounits']
        rc, stdout, stderr = self.run(args)
        if rc != 0:
            fail_from_result(self.module, rc, stdout, stderr, ['nvidia-smi'] + args,
                             changed=self.changed, actions=self.actions)
        try:
            return parse_supported_clocks(stdout)
        except ValueError as exc:
            self.fail('could not read the supported clocks of %s: %s' % (gpu_label(gpu), exc),
                      reason='unparsable_output', stdout=stdout, stderr=stderr)

    def desired(self):
        wanted = {}
        for key in ('persistence_mode', 'compute_mode', 'power_limit', 'ecc_mode', 'mig_mode'):
            if self.params[key] is not None:
                wanted[key] = self.params[key]
        clocks = self.params['application_clocks']
        if clocks is not None:
            if clocks.get('reset'):
                wanted['application_clocks'] = 'reset'
            else:
                wanted['application_clocks'] = {'memory': clocks['memory'], 'graphics': clocks['graphics']}
        return wanted

    def execute(self):
        gpus = self.read_gpus()
        try:
            selected = resolve_selectors(gpus, self.params['gpus'])
        except SettingsError as exc:
            self.fail(str(exc))
        wanted = self.desired()

        # Validate everything on every selected GPU before the first setter runs.
        plans, errors = [], []
        for gpu in selected:
            clocks = None
            current = gpu['clocks_applications']
            if isinstance(wanted.get('application_clocks'), dict) and current['memory'] is not None:
                request = wanted['application_clocks']
                if (current['memory'], current['graphics']) != (request['memory'], request['graphics']):
                    clocks = self.supported_clocks(gpu)
            plan, gpu_errors = plan_gpu(gpu, wanted, clocks)
            plans.append(plan)
            errors.extend(gpu_errors)
        if errors:
            self.fail('; '.join(errors), reason='invalid_request')

        for plan in plans:
            for args in plan['commands']:
                self.actions.append(_command(args))
                if self.module.check_mode:
                    continue
                rc, stdout, stderr = self.run(args)
                if rc != 0:
                    fail_from_result(self.module, rc, stdout, stderr, ['nvidia-smi'] + args,
                                     changed=self.changed, actions=self.actions)
                self.changed = True
        if self.module.check_mode:
            self.changed = bool(self.actions)

        if self.changed and not self.module.check_mode:
            # Read back: the driver may round a power limit or apply a MIG mode at once.
            after_all = dict((g['index'], g) for g in self.read_gpus())
            after = [after_all.get(p['before']['index'], p['after']) for p in plans]
        else:
            after = [p['after'] for p in plans]

        pending = {}
        for gpu in after:
            names = [key for key in ('ecc_mode', 'mig_mode')
                     if gpu[key + '_pending'] is not None and gpu[key + '_pending'] != gpu[key + '_current']]
            if names:
                pending[str(gpu['index'])] = names
        result = dict(
            changed=self.changed,
            actions=self.actions,
            gpus=after,
            pending=pending,
            reset_required=bool(pending),
            reboot_required=any('ecc_mode' in names for names in pending.values()),
        )
        if self.module._diff:
            result['diff'] = dict(
                before=dict((str(p['before']['index']), _diff_view(p['before'])) for p in plans),
                after=dict((str(g['index']), _diff_view(g)) for g in after),
            )
        self.module.exit_json(**result)


def _diff_view(gpu):
    # The settings this module changes, under the record's own key names.
    return dict(
        persistence_mode=gpu['persistence_mode'],
        compute_mode=gpu['compute_mode'],
        power=dict(limit_w=gpu['power']['limit_w']),
        clocks_applications=dict(gpu['clocks_applications']),
        ecc_mode_pending=gpu['ecc_mode_pending'],
        mig_mode_pending=gpu['mig_mode_pending'],
    )


def main():
    argument_spec = dict(
        gpus=dict(type='list', elements='str'),
        persistence_mode=dict(type='bool'),
        compute_mode=dict(type='str', choices=['Default', 'Exclusive_Process', 'Prohibited']),
        power_limit=dict(type='float'),
        application_clocks=dict(
            type='dict',
            options=dict(
                memory=dict(type='int'),
                graphics=dict(type='int'),
                reset=dict(type='bool'),
            ),
            required_together=[['memory', 'graphics']],
            mutually_exclusive=[['reset', 'memory'], ['reset', 'graphics']],
        ),
        ecc_mode=dict(type='bool'),
        mig_mode=dict(type='bool'),
    )
    argument_spec.update(NVIDIA_SMI_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    clocks = module.params['application_clocks']
    if clocks is not None and clocks.get('memory') is None and not clocks.get('reset'):
        module.fail_json(msg='application_clocks needs memory and graphics, or reset: true')
    NvidiaSmiSettings(module).execute()


if __name__ == '__main__':
    main()
