# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator's structure: paths only in env.py, no import circles, every module packaged.

* Paths: no module but ``nvsim/env.py`` builds a path tuple ("usr", "share",
  ...) or asks ``env.path`` for literal parts; locations are env's constants.
* Imports: the graph of ``nvsim`` modules (top-level and deferred imports
  alike) has no cycle: shared code lives in ``*/common.py``.
* Packaging: every ``nvsim/**/*.py`` is in a payload tree of the repository
  builder (tests/nvidia_sim/repo/catalog.py), so a new sub-package cannot be
  left out of the simulated packages; every launcher names a module that exists.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import fnmatch
import os
import re
import sys

from sim_hosts import SIM_BIN, SIM_DIR

NVSIM = os.path.join(SIM_DIR, 'nvsim')
REPO_SRC = os.path.join(SIM_DIR, 'repo')
ROOT_DIRS = ('etc', 'usr', 'run', 'var', 'lib', 'tmp')


def _modules():
    found = {}
    for directory, _dirs, files in os.walk(NVSIM):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, SIM_DIR)[:-3].replace(os.sep, '.')
                found[relative[:-len('.__init__')] if relative.endswith('.__init__') else relative] = path
    return found


MODULES = _modules()


def _tree(path):
    with open(path) as handle:
        return ast.parse(handle.read(), path)


def test_only_env_knows_paths():
    offenders = []
    for module, path in sorted(MODULES.items()):
        if module == 'nvsim.env':
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Tuple) and node.elts and isinstance(node.elts[0], ast.Constant) \
                    and node.elts[0].value in ROOT_DIRS and len(node.elts) > 1:
                offenders.append('%s:%d path tuple' % (module, node.lineno))
            if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'path' \
                    and getattr(node.func.value, 'id', None) == 'env' \
                    and any(isinstance(arg, ast.Constant) for arg in node.args):
                offenders.append('%s:%d env.path with literal parts' % (module, node.lineno))
    assert offenders == []


def _imports(module, path):
    package = module if path.endswith('__init__.py') else module.rsplit('.', 1)[0]
    targets = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(package.split('.')[:len(package.split('.')) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                targets.add(base + '.' + alias.name if base + '.' + alias.name in MODULES else base)
    return set(t for t in targets if t in MODULES and t != module)


def test_no_import_cycle():
    graph = dict((module, _imports(module, path)) for module, path in MODULES.items())
    cycles = []

    def visit(module, trail):
        if module in trail:
            cycles.append(' -> '.join(trail[trail.index(module):] + [module]))
            return
        for target in sorted(graph[module]):
            visit(target, trail + [module])

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []


def test_every_module_is_packaged():
    sys.path.insert(0, REPO_SRC)
    try:
        import catalog  # pylint: disable=import-outside-toplevel
        import debpkg  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(REPO_SRC)
    trees = [item for items in catalog.PAYLOAD.values() for item in items if isinstance(item, debpkg.PayloadTree)]
    shipped = set()
    for tree in trees:
        base = os.path.join(SIM_DIR, tree.source)
        shipped.update(os.path.join(tree.source, name) for name in os.listdir(base)
                       if fnmatch.fnmatch(name, tree.pattern))
    modules = set(os.path.relpath(path, SIM_DIR) for path in MODULES.values())
    assert sorted(modules - shipped) == []


def test_every_launcher_names_a_module():
    sys.path.insert(0, SIM_DIR)
    try:
        from nvsim import launch  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(SIM_DIR)
    for tool, (module, function, _argv) in launch.TOOLS.items():
        assert os.path.exists(os.path.join(SIM_BIN, tool)), tool
        assert 'nvsim.' + module in MODULES, tool
        assert re.search(r'^def %s\(' % function, open(MODULES['nvsim.' + module]).read(), re.M), tool
    for name in os.listdir(SIM_BIN):
        with open(os.path.join(SIM_BIN, name)) as handle:
            assert 'launch.py" %s "$@"' % name in handle.read(), name
        assert name in launch.TOOLS, name
