# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The harness creates every scenario's containers as Molecule's docker driver would.

tests/harness/containers.py replaces the driver's create and destroy playbooks
(molecule/_shared/create.yml, destroy.yml). These tests read every scenario's
platforms as Molecule merges them and check the docker run options each one
gets: what the platform asks for is there, and a key the helper does not
translate stops it instead of being dropped.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os

import pytest
import yaml

from conftest import REPO_ROOT, load_file

HARNESS = os.path.join(REPO_ROOT, 'tests', 'harness')


def _containers():
    return load_file(os.path.join(HARNESS, 'containers.py'), 'harness_containers')


def _platforms():
    """Every scenario's platforms: its own, or the shared configuration's."""
    with open(os.path.join(REPO_ROOT, '.config', 'molecule', 'config.yml')) as handle:
        shared = yaml.safe_load(handle)
    found = []
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, 'molecule', '*', 'molecule.yml'))):
        with open(path) as handle:
            scenario = yaml.safe_load(handle) or {}
        name = os.path.basename(os.path.dirname(path))
        for platform in scenario.get('platforms') or shared['platforms']:
            platform = dict(platform, name=platform['name'].replace('${MOLECULE_SCENARIO_NAME}', name))
            platform['volumes'] = [v.replace('${GPUFLEET_STATE_DIR:-/var/tmp/gpufleet-harness}', '/var/tmp/h')
                                   for v in platform.get('volumes') or []]
            found.append((name, platform))
    return found


PLATFORMS = _platforms()


def test_every_scenario_uses_the_shared_create_and_destroy():
    with open(os.path.join(REPO_ROOT, '.config', 'molecule', 'config.yml')) as handle:
        playbooks = yaml.safe_load(handle)['provisioner']['playbooks']
    assert playbooks['create'] == '../_shared/create.yml'
    assert playbooks['destroy'] == '../_shared/destroy.yml'
    for path in glob.glob(os.path.join(REPO_ROOT, 'molecule', '*', 'molecule.yml')):
        with open(path) as handle:
            own = ((yaml.safe_load(handle) or {}).get('provisioner') or {}).get('playbooks') or {}
        assert 'create' not in own and 'destroy' not in own, path


@pytest.mark.parametrize('scenario,platform', PLATFORMS, ids=['%s:%s' % (s, p['name']) for s, p in PLATFORMS])
def test_the_container_is_what_the_platform_asks_for(scenario, platform):
    args = _containers().run_args(platform)
    assert args[:2] == ['docker', 'run']
    image = args.index(platform['image'])
    options, command = args[2:image], args[image + 1:]

    def values(flag):
        return [options[i + 1] for i, option in enumerate(options) if option == flag]

    assert values('--name') == [platform['name']]
    assert values('--hostname') == [platform.get('hostname', platform['name'])]
    assert values('--cap-add') == platform['capabilities']
    assert values('--tmpfs') == platform['tmpfs']
    assert values('--volume') == platform['volumes']
    assert values('--network') == [platform['network_mode']]
    assert values('--restart') == [platform['restart_policy']]
    assert values('--pull') == ['never']
    # Molecule's label, by which `molecule reset` finds what it owns.
    assert 'owner=molecule' in values('--label')
    # systemd as PID 1, as the platform's command says.
    assert command == platform['command'].split()
    assert '--privileged' not in options


def test_a_key_the_helper_does_not_translate_stops_it():
    containers = _containers()
    platform = dict(PLATFORMS[0][1], published_ports=['0.0.0.0:80:80'])
    with pytest.raises(containers.PlatformError) as raised:
        containers.run_args(platform)
    assert 'published_ports' in str(raised.value)
    assert 'containers.py' in str(raised.value)


def test_an_image_the_harness_does_not_build_stops_it():
    containers = _containers()
    platform = dict(PLATFORMS[0][1], pre_build_image=False)
    with pytest.raises(containers.PlatformError) as raised:
        containers.run_args(platform)
    assert 'pre_build_image' in str(raised.value)


def test_the_default_command_is_moleculess_when_none_is_given():
    containers = _containers()
    platform = {'name': 'n', 'image': 'i', 'pre_build_image': True}
    assert containers.run_args(platform)[-3:] == ['bash', '-c', 'while true; do sleep 10000; done']
    platform['override_command'] = False
    assert containers.run_args(platform)[-1] == 'i'
