"""Build the execution environment (EE) image with ansible-builder, on a base made here.

    python3 tests/harness/ee_image.py [--tag TAG]

Prints one JSON line: the image tag, its size in bytes, the base image, and
the seconds each step took. Used by the fleet scenario's
tests/test_3_execution_environment.py, which runs jobs inside the image
through ansible-runner; docs/awx.md says how a user builds the production one.

No container registry is reachable from our machines, so the production base
of ``execution-environment.yml`` (Red Hat's UBI 9) cannot be pulled. What is
built here is that same definition on another base, the way its own header
tells users to swap bases (``--build-arg EE_BASE_IMAGE=...``):

- the base is the Debian 12 image the Molecule scenarios run on
  (tests/harness/base-images.sh: debootstrap, ``docker import``) plus
  ``python3-venv`` and a virtual environment in /opt/ee-python. ansible-builder's
  ``pip_install`` step bootstraps pip with ``ensurepip``, which Debian disables
  for its system Python and allows inside a virtual environment; so PYCMD is
  that environment's python3, PYPKG Debian's ``python3`` and PKGMGR apt-get.
  The CA certificates this machine adds (an egress proxy's, where there is one)
  go into the base too, so that pip inside the build reaches PyPI as the
  machine itself does;
- everything else comes from the repository's definition unchanged: the
  ansible-core and ansible-runner pins, the collection from its built tarball,
  the Python packages ansible-builder introspects from the installed
  collections, the tags;
- for the test jobs alone, two collections join the image's galaxy
  requirements: community.docker and its dependency
  community.library_inventory_filtering_v1, copied from the ``ansible`` package
  of this checkout's virtual environment (no Galaxy server is reachable). The
  jobs reach the simulated nodes with community.docker's ``docker_api``
  connection through the Docker socket; real fleets are reached over SSH.
  Their introspected Python needs (requests, docker, paramiko, ...) are
  installed from PyPI by the builder stage, as for any collection.

The base image is reused while its recipe is unchanged (tagged with a hash of
this file, the CA files and the Debian image's ID); the EE image itself is
rebuilt every time, Docker's layer cache sparing the steps whose inputs did
not change.
"""

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STATE_DIR = os.environ.get('GPUFLEET_STATE_DIR', '/var/tmp/gpufleet-harness')
DEBIAN_IMAGE = 'gpufleet/debian12-systemd:latest'
BASE_REPO = 'gpufleet/ee-base-debian12'
EE_PYTHON = '/opt/ee-python'
EXTRA_CA_DIR = '/usr/local/share/ca-certificates'
TEST_COLLECTIONS = ('community.docker', 'community.library_inventory_filtering_v1')
BASE_CONTAINERFILE = """\
FROM {debian}
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null \\
 && apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3 -m venv --without-pip {python} \\
 && printf '[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > /etc/pip.conf
ENV PATH={python}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


def sh(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        sys.exit('%s failed (%d):\n%s%s' % (' '.join(argv), done.returncode, done.stdout[-4000:], done.stderr[-4000:]))
    return done.stdout


def image_exists(tag):
    return subprocess.run(['docker', 'image', 'inspect', tag], capture_output=True, check=False).returncode == 0


def build_base(work):
    """The Debian base with a virtual environment, reused while its recipe is unchanged."""
    context = os.path.join(work, 'base')
    shutil.rmtree(context, ignore_errors=True)
    os.makedirs(os.path.join(context, 'ca'))
    digest = hashlib.sha256()
    with open(__file__, 'rb') as handle:
        digest.update(handle.read())
    digest.update(sh(['docker', 'image', 'inspect', '-f', '{{.Id}}', DEBIAN_IMAGE]).encode())
    for path in sorted(glob.glob(os.path.join(EXTRA_CA_DIR, '*.crt'))):
        with open(path, 'rb') as handle:
            digest.update(handle.read())
        shutil.copy(path, os.path.join(context, 'ca'))
    tag = '%s:%s' % (BASE_REPO, digest.hexdigest()[:12])
    if image_exists(tag):
        return tag, False
    with open(os.path.join(context, 'Containerfile'), 'w') as handle:
        handle.write(BASE_CONTAINERFILE.format(debian=DEBIAN_IMAGE, python=EE_PYTHON))
    # Host networking: the harness's engine may have no working bridge, and apt
    # must reach Debian's archive.
    sh(['docker', 'build', '--network', 'host', '-q', '-f', os.path.join(context, 'Containerfile'), '-t', tag, context])
    return tag, True


def test_definition(work):
    """The repository's definition, with the test jobs' connection collections added."""
    with open(os.path.join(ROOT, 'execution-environment.yml')) as handle:
        definition = yaml.safe_load(handle)
    with open(os.path.join(ROOT, definition['dependencies']['galaxy'])) as handle:
        galaxy = yaml.safe_load(handle)
    definition_dir = os.path.join(work, 'definition')
    shutil.rmtree(definition_dir, ignore_errors=True)
    os.makedirs(definition_dir)
    installed = os.path.join(ROOT, '.venv', 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages',
                             'ansible_collections')
    for name in TEST_COLLECTIONS:
        source = os.path.join(installed, *name.split('.'))
        if not os.path.isfile(os.path.join(source, 'MANIFEST.json')):
            sys.exit('%s is not installed in %s (requirements/dev.txt pins the ansible package that has it)'
                     % (name, installed))
        definition['additional_build_files'].append({'src': source, 'dest': 'collections/' + name})
        galaxy['collections'].append({'name': 'collections/' + name, 'type': 'dir'})
    # Paths in the definition are relative to the repository; the copy lives elsewhere.
    for entry in definition['additional_build_files']:
        entry['src'] = os.path.join(ROOT, entry['src'])
    with open(os.path.join(definition_dir, 'requirements.yml'), 'w') as handle:
        yaml.safe_dump(galaxy, handle, sort_keys=False)
    definition['dependencies']['galaxy'] = 'requirements.yml'
    path = os.path.join(definition_dir, 'execution-environment.yml')
    with open(path, 'w') as handle:
        yaml.safe_dump(definition, handle, sort_keys=False)
    return path, definition


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--tag', help='image tag (default: the definition\'s first tag, suffixed -debian12-test)')
    args = parser.parse_args()
    work = os.path.join(STATE_DIR, 'ee')
    os.makedirs(work, exist_ok=True)
    times = {}
    started = time.time()
    # The tarball the definition installs, built as `make build` does.
    sh([os.path.join(ROOT, '.venv', 'bin', 'ansible-galaxy'), 'collection', 'build', '--force',
        '--output-path', os.path.join(ROOT, 'build'), ROOT])
    times['collection_build_s'] = round(time.time() - started, 1)
    started = time.time()
    base, built = build_base(work)
    times['base_s' if built else 'base_reused_s'] = round(time.time() - started, 1)
    path, definition = test_definition(work)
    tag = args.tag or definition['options']['tags'][0] + '-debian12-test'
    started = time.time()
    builder = os.path.join(ROOT, '.venv', 'bin', 'ansible-builder')
    sh([builder, 'build', '-f', path, '-c', os.path.join(work, 'context'), '-t', tag, '--container-runtime', 'docker',
        '--build-arg', 'EE_BASE_IMAGE=' + base, '--build-arg', 'PYCMD=%s/bin/python3' % EE_PYTHON,
        '--build-arg', 'PYPKG=python3', '--build-arg', 'PKGMGR=/usr/bin/apt-get',
        '--extra-build-cli-args=--network host', '-v', '1'])
    times['ee_build_s'] = round(time.time() - started, 1)
    size = int(sh(['docker', 'image', 'inspect', '-f', '{{.Size}}', tag]).strip())
    print(json.dumps({'tag': tag, 'size_bytes': size, 'base': base, 'production_base':
                      definition['images']['base_image']['name'], 'seconds': times}))


if __name__ == '__main__':
    main()
