"""The execution environment (EE) that carries gpufleet.nvidia, as ansible-builder prepares it.

Two definitions go through ``ansible-builder create``: the repository's own
``execution-environment.yml`` (with ``ee/requirements.yml``), and one this test
writes into a temporary directory that lists the collection tarball built by
``ansible-galaxy collection build``. In each generated build context the
Containerfile must install the collection from ``_build/requirements.yml``, the
tarball must be there, and the Python packages ansible-builder introspects from
the installed collection must include what the collection declares
(``requirements.txt``, named by ``meta/execution-environment.yml``).

The image build itself (``ansible-builder build``) and jobs run inside the
image through ansible-runner are in the fleet scenario
(molecule/fleet/tests/test_3_execution_environment.py, on a base made
locally: no registry serves UBI 9 to our machines). Here, the two steps of
that build that need no container run on the generated context: the galaxy
stage's ``ansible-galaxy collection install -r requirements.yml`` (in a copy of
``_build/``), and the builder stage's introspection of what it installed, with
the very command line the Containerfile gives.
"""
import ast
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BIN = os.path.dirname(sys.executable)
# The repository's EE definition and the files it reads, relative to it.
DEFINITION_FILES = ('execution-environment.yml', 'ee/requirements.yml')


def _galaxy():
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        return yaml.safe_load(handle)


def _tarball_name():
    meta = _galaxy()
    return '%s-%s-%s.tar.gz' % (meta['namespace'], meta['name'], meta['version'])


def _dev_pins():
    pins = {}
    with open(os.path.join(ROOT, 'requirements', 'dev.txt')) as handle:
        for line in handle:
            line = line.split('#', 1)[0].strip()
            if '==' in line:
                name, version = line.split('==', 1)
                pins[name.strip().lower()] = version.strip()
    return pins


def _declared_requirements():
    """The collection's own Python requirements, as meta/execution-environment.yml names them."""
    with open(os.path.join(ROOT, 'meta', 'execution-environment.yml')) as handle:
        meta = yaml.safe_load(handle)
    with open(os.path.join(ROOT, meta['dependencies']['python'])) as handle:
        return [line.strip() for line in handle if line.strip() and not line.lstrip().startswith('#')]


def _clean_env():
    # A user elsewhere: none of the checkout's or this test session's Ansible settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env['PATH'] = BIN + os.pathsep + env.get('PATH', '')
    return env


def _run(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=_clean_env(), **kwargs)
    assert result.returncode == 0, '%s\n%s\n%s' % (' '.join(argv), result.stdout, result.stderr)
    return result


def _create(definition, context):
    _run([os.path.join(BIN, 'ansible-builder'), 'create', '-f', str(definition), '-c', str(context),
          '--output-filename', 'Containerfile'])
    return context


@pytest.fixture(scope='module')
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp('dist')
    _run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(out), ROOT], cwd=str(out))
    (path,) = list(out.iterdir())
    assert path.name == _tarball_name()
    return path


@pytest.fixture(scope='module')
def top_level_context(tarball, tmp_path_factory):
    """ansible-builder create on a copy of the repository's definition, the tarball where `make build` puts it."""
    work = tmp_path_factory.mktemp('top-level')
    for name in DEFINITION_FILES:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), str(work / name))
    (work / 'build').mkdir()
    shutil.copy(str(tarball), str(work / 'build' / tarball.name))
    return _create(work / 'execution-environment.yml', work / 'context')


@pytest.fixture(scope='module')
def tarball_context(tarball, tmp_path_factory):
    """ansible-builder create on a definition of our own that lists the built tarball inline."""
    work = tmp_path_factory.mktemp('listed-tarball')
    pins = _dev_pins()
    definition = {
        'version': 3,
        'images': {'base_image': {'name': 'registry.access.redhat.com/ubi9/ubi:9.6'}},
        'dependencies': {
            'python_interpreter': {'package_system': 'python3.11', 'python_path': '/usr/bin/python3.11'},
            'ansible_core': {'package_pip': 'ansible-core==' + pins['ansible-core']},
            'ansible_runner': {'package_pip': 'ansible-runner==' + pins['ansible-runner']},
            'galaxy': {'collections': [{'name': 'collections/' + tarball.name, 'type': 'file'}]},
        },
        'additional_build_files': [{'src': str(tarball), 'dest': 'collections'}],
    }
    (work / 'execution-environment.yml').write_text(yaml.safe_dump(definition))
    return _create(work / 'execution-environment.yml', work / 'context')


@pytest.fixture(params=['top_level_context', 'tarball_context'])
def context(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def galaxy_stage(context, tmp_path):
    """The galaxy stage of the Containerfile, without a container: install -r requirements.yml in a copy of _build."""
    containerfile = (context / 'Containerfile').read_text()
    assert 'COPY _build /build\nWORKDIR /build\n' in containerfile
    build = tmp_path / 'build'
    shutil.copytree(str(context / '_build'), str(build))
    collections = tmp_path / 'usr-share-ansible-collections'
    env = _clean_env()
    env['ANSIBLE_GALAXY_DISABLE_GPG_VERIFY'] = '1'
    result = subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-r', 'requirements.yml',
                             '--collections-path', str(collections)],
                            cwd=str(build), env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return collections


def test_containerfile_installs_the_collection(context):
    containerfile = (context / 'Containerfile').read_text()
    lines = containerfile.splitlines()
    assert any(re.match(r'RUN .*ansible-galaxy collection install .*-r requirements\.yml', line) for line in lines)
    assert any(line.startswith('RUN $PYCMD /output/scripts/introspect.py introspect') for line in lines)
    assert 'COPY --from=galaxy /usr/share/ansible /usr/share/ansible' in lines
    # ansible-core and ansible-runner pinned as in requirements/dev.txt: jobs run what CI tested.
    pins = _dev_pins()
    (refs,) = [line for line in lines if line.startswith('ARG ANSIBLE_INSTALL_REFS=')]
    assert 'ansible-core==%s' % pins['ansible-core'] in refs
    assert 'ansible-runner==%s' % pins['ansible-runner'] in refs
    assert 'ARG PYCMD="/usr/bin/python3.11"' in lines


def test_context_carries_the_built_tarball(context, tarball):
    with open(str(context / '_build' / 'requirements.yml')) as handle:
        requirements = yaml.safe_load(handle)
    assert requirements['collections'] == [{'name': 'collections/' + tarball.name, 'type': 'file'}]
    packed = context / '_build' / 'collections' / tarball.name
    assert hashlib.sha256(packed.read_bytes()).digest() == hashlib.sha256(tarball.read_bytes()).digest()


def test_galaxy_stage_installs_the_collection(galaxy_stage):
    installed = galaxy_stage / 'ansible_collections' / 'gpufleet' / 'nvidia'
    for name in ('MANIFEST.json', 'requirements.txt', 'meta/execution-environment.yml', 'playbooks/site.yml'):
        assert (installed / name).is_file(), name


def test_builder_stage_introspects_the_declared_requirements(context, galaxy_stage, tmp_path):
    """The introspect.py command line of the Containerfile, run on what the galaxy stage installed."""
    (line,) = [line for line in (context / 'Containerfile').read_text().splitlines()
               if line.startswith('RUN $PYCMD /output/scripts/introspect.py introspect')]
    argv = [sys.executable, str(context / '_build' / 'scripts' / 'introspect.py')]
    for word in shlex.split(line)[3:]:
        option = word.split('=', 1)[0]
        value = word[len(option) + 1:]
        if option in ('--user-pip', '--user-bindep', '--exclude-pip-reqs', '--exclude-bindep-reqs',
                      '--exclude-collection-reqs'):
            word = '%s=%s' % (option, context / '_build' / value)
        elif option in ('--write-pip', '--write-bindep'):
            word = '%s=%s' % (option, tmp_path / os.path.basename(value))
        argv.append(word)
    argv.append(str(galaxy_stage))
    _run(argv)
    written = (tmp_path / 'requirements.txt').read_text().splitlines()
    for requirement in _declared_requirements():
        assert '%s  # from collection gpufleet.nvidia' % requirement in written


def test_top_level_ee_adds_an_ssh_client(top_level_context):
    with open(str(top_level_context / '_build' / 'bindep.txt')) as handle:
        assert 'openssh-clients [platform:rpm]' in handle.read().splitlines()


def test_ansible_builder_introspect_finds_the_declared_requirements(tarball, tmp_path):
    """`ansible-builder introspect --sanitize`, as a collection maintainer checks an installed collection."""
    collections = tmp_path / 'collections'
    _run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-p', str(collections), str(tarball)],
         cwd=str(tmp_path))
    result = _run([os.path.join(BIN, 'ansible-builder'), 'introspect', '--sanitize', str(collections)])
    report = yaml.safe_load(result.stdout.split('\n---\n', 1)[1])
    declared = _declared_requirements()
    assert declared, 'requirements.txt declares nothing'
    assert report['python'] == ['%s  # from collection gpufleet.nvidia' % line for line in declared]
    assert report['system'] == []


def test_definition_names_the_current_tarball():
    """A version bump in galaxy.yml must reach the EE definition and ee/requirements.yml."""
    with open(os.path.join(ROOT, 'execution-environment.yml')) as handle:
        definition = yaml.safe_load(handle)
    with open(os.path.join(ROOT, definition['dependencies']['galaxy'])) as handle:
        galaxy = yaml.safe_load(handle)
    name = _tarball_name()
    assert [entry['src'] for entry in definition['additional_build_files']] == ['build/' + name]
    assert galaxy['collections'] == [{'name': 'collections/' + name, 'type': 'file'}]
    assert ('gpufleet-nvidia-ee:%s' % _galaxy()['version']) in definition['options']['tags']


# Plugins that run on the controller (inside the EE when AWX runs the job), and
# the module_utils they import. Modules run on the managed hosts, with Python's
# standard library only.
CONTROLLER_SIDE = ('action', 'filter', 'callback', 'lookup', 'inventory', 'test', 'connection', 'become',
                   'cache', 'vars', 'strategy', 'module_utils')


def _third_party_imports(path):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split('.')[0])
    return {name for name in names
            if name not in sys.stdlib_module_names and name not in ('ansible', 'ansible_collections', '__future__')}


def test_controller_side_imports_are_declared():
    declared = {re.split(r'[ ;<>=!~\[]', line, maxsplit=1)[0].lower().replace('_', '-')
                for line in _declared_requirements()}
    undeclared = {}
    for kind in CONTROLLER_SIDE:
        folder = os.path.join(ROOT, 'plugins', kind)
        for base, _dirs, files in os.walk(folder):
            for name in files:
                if name.endswith('.py'):
                    path = os.path.join(base, name)
                    for module in _third_party_imports(path):
                        if module.lower().replace('_', '-') not in declared:
                            undeclared.setdefault(module, []).append(os.path.relpath(path, ROOT))
    assert not undeclared, 'declare these in requirements.txt (ansible-builder reads it): %s' % undeclared
    # from_toml falls back to tomli before Python 3.11: the one third-party import today.
    assert _third_party_imports(os.path.join(ROOT, 'plugins', 'filter', 'from_toml.py')) == {'tomli'}


def test_production_base_image_is_pinned():
    """A tag naming a release or a digest, never a moving tag: a rebuild gets the same base."""
    with open(os.path.join(ROOT, 'execution-environment.yml')) as handle:
        name = yaml.safe_load(handle)['images']['base_image']['name']
    match = re.match(r'^[^@]+?(?::(?P<tag>[^:/@]+))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$', name)
    assert match and (match.group('digest') or re.match(r'^\d+(\.\d+)+(-\d+)?$', match.group('tag') or '')), name
