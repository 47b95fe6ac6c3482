"""Create and destroy a Molecule scenario's containers with the docker CLI.

    python3 tests/harness/containers.py create|destroy PLATFORMS_JSON

PLATFORMS_JSON is Molecule's `platforms` list (molecule/_shared/create.yml and
destroy.yml pass `molecule_yml.platforms`). Molecule's docker driver does the
same through community.docker modules, run asynchronously and polled, paid
three times a scenario (destroy, create, destroy) while the other scenarios
wait for the same two cores. Measured (user + system CPU of the molecule
command): `molecule destroy` of five containers 8.0-9.4 s with the driver, 3.0-3.4 s
with this; `molecule create` of two (create and the shared prepare) 14.1-14.9 s
with the driver, 9.7-11.5 s with this. Here one `docker
run` per container, all at once: the containers are the same (see
PLATFORM_KEYS for what is translated); a platform key this helper does not
translate stops it with the key named, so nothing is silently left out.

create: a container that already exists is started (Molecule's recreate:
false); exit 1 with docker's message when one cannot be created.
destroy: `docker rm -f` (volumes kept, as the driver's keep_volumes default);
a container that does not exist is not an error.
"""

import json
import shlex
import subprocess
import sys

# Molecule's default command when override_command is true and none is given.
DEFAULT_COMMAND = 'bash -c "while true; do sleep 10000; done"'
# What Molecule's docker driver does with each key, as docker run options.
PLATFORM_KEYS = frozenset((
    'name', 'hostname', 'image', 'pre_build_image', 'pull', 'command', 'override_command',
    'capabilities', 'tmpfs', 'volumes', 'network_mode', 'restart_policy', 'env', 'labels',
    # Molecule's own: inventory groups and children.
    'groups', 'children',
))


class PlatformError(Exception):
    """A platform this helper cannot create as Molecule's docker driver would."""


def run_args(platform):
    """The docker run argument list for one Molecule platform."""
    unknown = sorted(set(platform) - PLATFORM_KEYS)
    if unknown:
        raise PlatformError('platform %s: %s not translated by tests/harness/containers.py; add it there '
                            '(PLATFORM_KEYS) or drop it from molecule.yml' % (platform.get('name'), ', '.join(unknown)))
    if not platform.get('pre_build_image', False):
        raise PlatformError('platform %s: pre_build_image must be true (the harness builds the images, '
                            'tests/harness/base-images.sh)' % platform.get('name'))
    name = platform['name']
    args = ['docker', 'run', '--detach', '--name', name, '--hostname', platform.get('hostname', name),
            '--log-driver', 'json-file', '--label', 'owner=molecule']
    for key, value in sorted((platform.get('labels') or {}).items()):
        args += ['--label', '%s=%s' % (key, value)]
    if platform.get('pull') is False:
        args += ['--pull', 'never']
    for capability in platform.get('capabilities') or []:
        args += ['--cap-add', capability]
    for mount in platform.get('tmpfs') or []:
        args += ['--tmpfs', mount]
    for volume in platform.get('volumes') or []:
        args += ['--volume', volume]
    if platform.get('network_mode'):
        args += ['--network', platform['network_mode']]
    if platform.get('restart_policy'):
        args += ['--restart', platform['restart_policy']]
    for key, value in sorted((platform.get('env') or {}).items()):
        args += ['--env', '%s=%s' % (key, value)]
    args.append(platform['image'])
    if platform.get('override_command', True):
        args += shlex.split(platform.get('command') or DEFAULT_COMMAND)
    return args


def _run_all(commands):
    """Run the commands at once; (command, returncode, output) for each."""
    started = [(command, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          universal_newlines=True)) for command in commands]
    results = []
    for command, process in started:
        output = process.communicate()[0]
        results.append((command, process.returncode, output))
    return results


def _existing(names):
    listed = subprocess.run(['docker', 'ps', '--all', '--format', '{{.Names}}'], stdout=subprocess.PIPE,
                            universal_newlines=True, check=True).stdout.split()
    return set(names) & set(listed)


def create(platforms):
    commands = [run_args(platform) for platform in platforms]
    existing = _existing([platform['name'] for platform in platforms])
    commands = [['docker', 'start', command[command.index('--name') + 1]]
                if command[command.index('--name') + 1] in existing else command for command in commands]
    return _report(_run_all(commands))


def destroy(platforms):
    names = sorted(_existing([platform['name'] for platform in platforms]))
    if not names:
        return 0
    return _report(_run_all([['docker', 'rm', '--force'] + names]))


def _report(results):
    status = 0
    for command, returncode, output in results:
        print('%s: rc %d %s' % (shlex.join(command[:4]), returncode, output.strip()))
        if returncode:
            status = 1
    return status


def main(argv):
    if len(argv) != 3 or argv[1] not in ('create', 'destroy'):
        sys.stderr.write(__doc__)
        return 2
    try:
        platforms = json.loads(argv[2])
        return (create if argv[1] == 'create' else destroy)(platforms)
    except PlatformError as error:
        sys.stderr.write('containers.py: %s\n' % error)
        return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
