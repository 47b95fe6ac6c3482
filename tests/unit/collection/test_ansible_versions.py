"""The ansible-core releases the collection claims are the ones its tests run.

meta/runtime.yml's requires_ansible, every role's min_ansible_version, the
sanity ignore files (one per release ansible-test sanity runs on), the
ansible-core of requirements/dev.txt (what yamllint, ansible-lint, sanity,
the unit tests and Molecule run with) and the execution environment's must
name the same release. README.md, "ansible-core versions", says why it is
2.19 alone.
"""
import glob
import os
import re

import ansible
import yaml
from ansible.module_utils.compat.version import LooseVersion

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))


def _yaml(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return yaml.safe_load(handle)


def _dev_pin(name):
    with open(os.path.join(ROOT, 'requirements', 'dev.txt')) as handle:
        for line in handle:
            match = re.match(r'%s==(\S+)' % re.escape(name), line.strip())
            if match:
                return match.group(1)
    raise AssertionError('%s is not pinned in requirements/dev.txt' % name)


def _minor(version):
    return '.'.join(str(version).split('.')[:2])


def _claimed():
    """(lowest, first excluded) of requires_ansible, which must have both bounds."""
    spec = _yaml('meta', 'runtime.yml')['requires_ansible']
    bounds = dict((op, value) for op, value in re.findall(r'(>=|<)\s*([0-9][0-9.]*)', spec))
    assert sorted(bounds) == ['<', '>='] and len(spec.split(',')) == 2, spec
    return bounds['>='], bounds['<']


def test_requires_ansible_is_the_tested_release():
    tested = _dev_pin('ansible-core')
    low, high = _claimed()
    assert LooseVersion(low) <= LooseVersion(tested) < LooseVersion(high), (low, tested, high)
    # One minor release, the tested one: no untested release inside the range.
    assert _minor(low) == _minor(tested) and low.endswith('.0'), low
    major, minor = (int(part) for part in _minor(tested).split('.'))
    assert high == '%d.%d.0' % (major, minor + 1), high


def test_the_tests_run_that_release():
    assert ansible.__version__ == _dev_pin('ansible-core')


def test_sanity_ignores_exist_for_the_claimed_release_only():
    releases = sorted(re.search(r'ignore-(.+)\.txt$', p).group(1) for p in glob.glob(
        os.path.join(ROOT, 'tests', 'sanity', 'ignore-*.txt')))
    assert releases == [_minor(_claimed()[0])], releases


def _role_minimum(path):
    with open(path) as handle:
        return str(yaml.safe_load(handle)['galaxy_info']['min_ansible_version'])


def test_roles_name_the_same_minimum():
    minimums = dict((os.path.basename(os.path.dirname(os.path.dirname(p))),
                     _role_minimum(p))
                    for p in glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'main.yml')))
    assert minimums and set(minimums.values()) == {_minor(_claimed()[0])}, minimums


def test_execution_environment_carries_the_tested_release():
    definition = _yaml('execution-environment.yml')
    assert definition['dependencies']['ansible_core']['package_pip'] == 'ansible-core==' + _dev_pin('ansible-core')
