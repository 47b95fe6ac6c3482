# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Judge GPU records against what the inventory expects of a host.

Pure functions, no command runs here. ``expectation_findings`` takes GPU
records (``gpu_record.GPU_RECORD``), the driver version, the MIG devices with
their profile names (as ``nvidia_smi_info`` returns them with ``mig_uuids``)
and the expectations, and returns findings of the same shape as
``gpu_health.evaluate``'s: ``code``, ``severity``, ``gpu``, ``evidence``,
``advice`` and the values compared (``expected``, ``found``).

Every expectation left out (``None``, empty) is not checked, and a reading the
GPU does not report (``None``) never yields a finding: a GPU without ECC is
not "ECC off".
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nvidia.plugins.module_utils.gpu_record import normalize_pci_bus_id
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_mig import profile_short_name

WARNING = 'warning'
ECC_CHOICES = ('enabled', 'disabled')


def _gpu_ref(gpu):
    return {'index': gpu.get('index'), 'uuid': gpu.get('uuid'), 'pci_bus_id': gpu.get('pci_bus_id')}


def _label(gpu):
    return 'GPU %s (%s)' % (gpu.get('index'), gpu.get('pci_bus_id') or gpu.get('uuid') or 'unknown address')


def _finding(code, gpu, evidence, advice, expected, found):
    return {'code': code, 'severity': WARNING, 'gpu': _gpu_ref(gpu) if gpu is not None else None,
            'evidence': evidence, 'advice': advice, 'expected': expected, 'found': found}


def driver_matches(version, expected):
    """``570.195.03`` matches ``570`` (a branch), ``570.195`` and ``570.195.03``: whole dot-separated parts only."""
    want = str(expected).strip().split('.')
    have = str(version).strip().split('.')
    return have[:len(want)] == want


def model_matches(name, expected):
    """A product name matches when it contains the expected text, ignoring case (``H100`` matches
    ``NVIDIA H100 80GB HBM3``)."""
    return str(expected).strip().lower() in (name or '').lower()


def _driver_findings(driver_version, expected):
    if not expected or not driver_version or driver_matches(driver_version, expected):
        return []
    return [_finding(
        'driver_branch_unexpected', None,
        'The driver %s runs; the inventory expects %s %s.'
        % (driver_version, 'branch' if '.' not in str(expected) else 'version', expected),
        'Converge the node with the gpufleet.nvidia.nvidia_driver role (playbooks/site.yml), or correct '
        'health_expected_driver_branch. After a driver upgrade the old module stays loaded until the node reboots.',
        str(expected), driver_version)]


def _model_findings(gpus, expected):
    if not expected:
        return []
    return [_finding(
        'gpu_model_unexpected', gpu,
        '%s is a %s; the inventory expects %s.' % (_label(gpu), gpu.get('name'), expected),
        'Check that the node is in the right inventory group (its health_expected_gpu_model), and that the GPU '
        'is the one the node was ordered with.', expected, gpu.get('name'))
        for gpu in gpus if gpu.get('name') and not model_matches(gpu['name'], expected)]


def _ecc_findings(gpus, expected):
    if not expected:
        return []
    if expected not in ECC_CHOICES:
        raise ValueError('expected ECC mode must be one of %s, got %r' % (', '.join(ECC_CHOICES), expected))
    want = expected == 'enabled'
    findings = []
    for gpu in gpus:
        current, pending = gpu.get('ecc_mode_current'), gpu.get('ecc_mode_pending')
        if current is None or current is want:
            continue
        findings.append(_finding(
            'ecc_mode_unexpected', gpu,
            '%s: ECC is %s, the inventory expects it %s%s.'
            % (_label(gpu), 'on' if current else 'off', 'on' if want else 'off',
               '; the change is pending and takes effect at the next reboot' if pending is want else ''),
            'Reboot the node to apply a pending ECC change, or set it with gpufleet.nvidia.nvidia_smi '
            '(ecc_mode) and reboot; data-center GPUs should run with ECC on.',
            expected, 'enabled' if current else 'disabled'))
    return findings


def _selects(selector, gpu):
    text = str(selector).strip()
    if text.isdigit():
        return gpu.get('index') == int(text)
    if text.upper().startswith('GPU-'):
        return (gpu.get('uuid') or '').lower() == text.lower()
    return normalize_pci_bus_id(text) is not None and normalize_pci_bus_id(text) == gpu.get('pci_bus_id')


def layout_for(gpu, layout):
    """The profiles ``{short name: count}`` the first layout entry naming ``gpu`` (or naming no GPUs) expects."""
    for entry in layout or ():
        selectors = entry.get('gpus')
        if not selectors or any(_selects(selector, gpu) for selector in selectors):
            return dict((profile_short_name(name), int(count))
                        for name, count in (entry.get('profiles') or {}).items() if int(count) > 0)
    return None


def _describe(counts):
    if not counts:
        return 'none'
    return ', '.join('%s x%d' % (name, counts[name]) for name in sorted(counts))


def _mig_findings(gpus, mig_devices, layout):
    if not layout:
        return []
    if mig_devices is None:
        raise ValueError('the MIG layout can only be checked with the profile name of every MIG device')
    advice = ('Apply the layout with the gpufleet.nvidia.mig role (it also installs the unit that re-creates it at '
              'boot: MIG instances do not survive a reboot), or correct health_expected_mig_layout.')
    findings = []
    for gpu in gpus:
        want = layout_for(gpu, layout)
        if want is None:
            continue
        if gpu.get('mig_mode_current') is not True:
            findings.append(_finding(
                'mig_mode_unexpected', gpu,
                '%s: MIG mode is %s; the inventory expects the MIG layout %s.'
                % (_label(gpu), 'not supported' if gpu.get('mig_mode_current') is None else 'off', _describe(want)),
                advice, _describe(want), 'MIG not supported' if gpu.get('mig_mode_current') is None else 'MIG off'))
            continue
        have = {}
        for device in mig_devices:
            if device.get('gpu_index') == gpu.get('index'):
                name = profile_short_name(device.get('profile')) or 'unknown'
                have[name] = have.get(name, 0) + 1
        if have != want:
            findings.append(_finding(
                'mig_layout_unexpected', gpu,
                '%s: MIG devices %s; the inventory expects %s.' % (_label(gpu), _describe(have), _describe(want)),
                advice, _describe(want), _describe(have)))
    return findings


def expectation_findings(gpus, driver_version=None, mig_devices=None, expected_model=None, expected_driver=None,
                         expected_ecc=None, expected_mig_layout=None):
    """Findings for every expectation a host does not meet; see the module docstring.

    ``mig_devices``: ``[{'gpu_index', 'profile', ...}]``; needed (not ``None``) only with ``expected_mig_layout``,
    which is a list of ``{'gpus': [index, UUID or PCI bus id] or None, 'profiles': {name: count}}`` as the mig role
    takes it. Raises ``ValueError`` for an unknown ECC expectation or a layout without MIG device profiles.
    """
    gpus = list(gpus or [])
    findings = []
    findings.extend(_driver_findings(driver_version, expected_driver))
    findings.extend(_model_findings(gpus, expected_model))
    findings.extend(_ecc_findings(gpus, expected_ecc))
    findings.extend(_mig_findings(gpus, mig_devices, expected_mig_layout))
    return findings
