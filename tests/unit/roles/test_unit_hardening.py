# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""systemd-analyze security on the units the collection writes or drops in.

Each unit is rendered from the role's template with its defaults (after) and
with the role's hardening switched off (before), placed in a scratch root
next to the packaged unit it extends (the simulator's copies of NVIDIA's
units), and rated offline by ``systemd-analyze security --offline=yes``.
The exposure levels are printed and recorded in docs/security.md; the test
checks the sandbox lowers each to at most the level recorded there. The
Molecule scenarios rate the running units the same way (dcgm, mig).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import shutil
import subprocess

import pytest

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.roles.role_helpers import REPO_ROOT, plain, render, role_path, role_variables, trust

SIM_UNITS = os.path.join(REPO_ROOT, 'tests', 'nvidia_sim', 'systemd')
DEBIAN_12 = {'distribution': 'Debian', 'distribution_major_version': '12', 'os_family': 'Debian', 'architecture': 'x86_64'}

# (role, template, unit, drop-in name or None for a whole unit, packaged unit, hardening switch, highest exposure after)
UNITS = [
    ('dcgm_exporter', 'nvidia-dcgm-exporter.conf.j2', 'nvidia-dcgm-exporter.service', '10-gpufleet.conf',
     'nvidia-dcgm-exporter.service', {'dcgm_exporter_unit_hardening': False, 'dcgm_exporter_user': 'root'}, 2.0),
    ('mig', 'gpufleet-mig-layout.service.j2', 'gpufleet-mig-layout.service', None, None,
     {'mig_boot_unit_hardening': False}, 3.0),
    ('persistence_mode', 'persistence-mode-fallback.service.j2', 'gpufleet-nvidia-persistence-mode.service', None, None,
     {'persistence_mode_fallback_unit_hardening': False}, 3.0),
]

needs_systemd_analyze = pytest.mark.skipif(shutil.which('systemd-analyze') is None, reason='systemd-analyze is not installed')


def _render(role, template, vars_files, **inputs):
    variables = role_variables(role, 'main.yml', *vars_files)
    variables.update(trust(dict(ansible_facts=DEBIAN_12, ansible_managed='Ansible managed',
                                __mig_platform_python='/usr/bin/python3', **inputs)))
    with open(role_path(role, 'templates', template)) as handle:
        return plain(render(trust_as_template(handle.read()), variables))


def exposure(tmp_path, role, template, unit, dropin, packaged, **inputs):
    """The overall exposure level systemd-analyze gives the unit, rendered with inputs."""
    root = tmp_path / ('root-%d' % len(list(tmp_path.iterdir())))
    system = root / 'etc' / 'systemd' / 'system'
    system.mkdir(parents=True)
    vars_files = ['Debian.yml'] if os.path.exists(role_path(role, 'vars', 'Debian.yml')) else []
    text = _render(role, template, vars_files, **inputs)
    if dropin:
        shutil.copy(os.path.join(SIM_UNITS, packaged), str(system / unit))
        (system / (unit + '.d')).mkdir()
        (system / (unit + '.d') / dropin).write_text(text)
    else:
        (system / unit).write_text(text)
    result = subprocess.run(['systemd-analyze', 'security', '--offline=yes', '--root=%s' % root, '--no-pager', unit],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    match = re.search(r'Overall exposure level for %s: ([0-9.]+)' % re.escape(unit), result.stdout)
    assert match, result.stdout[-3000:]
    return float(match.group(1))


@needs_systemd_analyze
@pytest.mark.parametrize('role, template, unit, dropin, packaged, off, highest', UNITS, ids=[u[2] for u in UNITS])
def test_the_sandbox_lowers_the_exposure(tmp_path, record_property, role, template, unit, dropin, packaged, off, highest):
    before = exposure(tmp_path, role, template, unit, dropin, packaged, **off)
    after = exposure(tmp_path, role, template, unit, dropin, packaged)
    record_property('gpufleet_summary', 'systemd-analyze security %s: %.1f without the role\'s hardening, %.1f with it'
                    % (unit, before, after))
    assert after < before
    assert after <= highest, 'exposure %.1f of %s is above %.1f (docs/security.md)' % (after, unit, highest)


def test_the_roles_agree_on_the_host_engines_socket():
    """The dcgm role's default socket and group, as the exporter and health roles assume them for hosts whose
    inventory does not set dcgm_unix_socket."""
    dcgm = plain(role_variables('dcgm'))
    exporter = plain(role_variables('dcgm_exporter', 'main.yml'))
    assert exporter['__dcgm_exporter_dcgm_socket_default'] == dcgm['dcgm_unix_socket']
    assert exporter['__dcgm_exporter_dcgm_socket_group_default'] == dcgm['dcgm_unix_socket_group']
    health = plain(role_variables('health'))
    assert dcgm['dcgm_unix_socket'] in health['health_dcgm_host']
