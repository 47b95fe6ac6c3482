"""The built collection: what it carries, and that it runs installed."""
import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BIN = os.path.dirname(sys.executable)
# Never in the tarball: the test double, harness, scenarios, CI, local state.
FORBIDDEN_TOP = {'tests', 'molecule', '.ci', 'benchmarks', '.venv', '.collections', 'requirements',
                 '.config', '.git', 'Makefile', 'ansible.cfg', 'site.yml',
                 # the execution environment's definition and build outputs: they name the tarball
                 'execution-environment.yml', 'ee', 'build', 'context'}
# What ansible-builder reads from the installed collection (its introspection):
# without these in the tarball an execution environment misses the
# collection's controller-side Python packages.
EE_METADATA = ('meta/execution-environment.yml', 'requirements.txt')


@pytest.fixture(scope='module')
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp('build')
    subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(out), ROOT],
                   check=True, capture_output=True)
    (path,) = list(out.iterdir())
    return path


def test_tarball_carries_no_test_material(tarball):
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
    tops = {name.split('/')[0] for name in names}
    assert not tops & FORBIDDEN_TOP
    assert not [n for n in names if '__pycache__' in n or n.startswith('inventories/simulated')]
    for needed in ('MANIFEST.json', 'meta/runtime.yml', 'playbooks/site.yml',
                   'playbooks/awx_configure.yml', 'playbooks/vars/awx_configure.yml',
                   'plugins/modules/nvidia_smi_info.py', 'roles/nvidia_driver/meta/argument_specs.yml'):
        assert needed in names


def test_tarball_carries_what_ansible_builder_reads(tarball):
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
        for needed in EE_METADATA:
            assert needed in names, needed
            packed = archive.extractfile(needed).read()
            with open(os.path.join(ROOT, needed), 'rb') as source:
                assert packed == source.read(), needed
        meta = yaml.safe_load(archive.extractfile('meta/execution-environment.yml'))
    # The file meta/execution-environment.yml names must be in the tarball too.
    assert meta['dependencies']['python'] in names
    assert not set(meta['dependencies']) - {'python', 'system'}
    if 'system' in meta['dependencies']:
        assert meta['dependencies']['system'] in names


def test_manifest_has_no_placeholder_urls(tarball):
    with tarfile.open(str(tarball)) as archive:
        info = json.load(archive.extractfile('MANIFEST.json'))['collection_info']
    for key in ('repository', 'documentation', 'homepage', 'issues'):
        assert not info[key] or 'example.' not in info[key], (key, info[key])


def test_installed_collection_resolves_its_playbooks(tarball, tmp_path):
    collections = tmp_path / 'collections'
    # A user elsewhere: none of the checkout's or this test session's Ansible settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env['ANSIBLE_COLLECTIONS_PATH'] = str(collections)
    subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-p', str(collections),
                    str(tarball)], check=True, capture_output=True, env=env, cwd=str(tmp_path))
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text('all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu01:\n')
    for playbook in ('gpufleet.nvidia.site', 'gpufleet.nvidia.gpu_report', 'gpufleet.nvidia.awx_configure'):
        result = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', str(inventory), '--syntax-check',
                                 playbook], env=env, cwd=str(tmp_path), capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
