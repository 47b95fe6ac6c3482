# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The variable tables of the role READMEs are the argument specs, rendered by
tests/harness/role_readme_tables.py: a spec changed without the README (or a
table edited by hand) fails here with the diff, and the tool's fixes hold."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.loading import REPO_ROOT, load_module as load_file

TOOL = os.path.join(REPO_ROOT, 'tests', 'harness', 'role_readme_tables.py')


@pytest.fixture(scope='module')
def tool():
    return load_file(TOOL, 'role_readme_tables')


def _copy_role(tmp_path, role):
    """A collection root in tmp_path holding one role of this checkout (its spec and README)."""
    for name in ('README.md', os.path.join('meta', 'argument_specs.yml')):
        target = tmp_path / 'roles' / role / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(REPO_ROOT, 'roles', role, name), str(target))
    return tmp_path / 'roles' / role


def _edit_spec(role_dir, edit):
    path = role_dir / 'meta' / 'argument_specs.yml'
    specs = yaml.safe_load(path.read_text())
    edit(specs['argument_specs'])
    path.write_text(yaml.safe_dump(specs, sort_keys=False))


def test_every_role_readme_matches_its_argument_spec(tool, capsys):
    rc = tool.main(['--check'])
    assert rc == 0, capsys.readouterr().out


def test_every_role_with_a_spec_is_covered(tool):
    covered = tool.roles(REPO_ROOT)
    on_disk = sorted(name for name in os.listdir(os.path.join(REPO_ROOT, 'roles')) if not name.startswith('.'))
    assert covered == on_disk


def test_a_changed_default_fails_the_check_with_a_diff_naming_it(tool, tmp_path, capsys):
    role_dir = _copy_role(tmp_path, 'cudnn')
    assert tool.main(['--check', '--root', str(tmp_path)]) == 0
    capsys.readouterr()

    def edit(specs):
        specs['main']['options']['cudnn_package_lock_timeout']['default'] = 900
    _edit_spec(role_dir, edit)
    assert tool.main(['--check', '--root', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert '+| `cudnn_package_lock_timeout` | int | `900` |' in out
    assert '-| `cudnn_package_lock_timeout` | int | `300` |' in out
    # --check writes nothing; the default mode repairs the README.
    assert '`900`' not in (role_dir / 'README.md').read_text()
    assert tool.main(['--root', str(tmp_path)]) == 0
    assert tool.main(['--check', '--root', str(tmp_path)]) == 0


def test_a_new_option_and_a_hand_edit_fail_the_check_and_prose_survives_the_rewrite(tool, tmp_path, capsys):
    role_dir = _copy_role(tmp_path, 'drain')
    readme = role_dir / 'README.md'
    prose = readme.read_text().replace('<!-- BEGIN argument_specs: check', 'Hand-written prose.\n\n<!-- BEGIN argument_specs: check')
    readme.write_text(prose.replace('| `drain_wait_timeout` | int |', '| `drain_wait_timeout` | str |', 1))

    def edit(specs):
        specs['undrain']['options']['drain_brand_new'] = {'type': 'bool', 'default': False, 'description': 'New.'}
    _edit_spec(role_dir, edit)
    assert tool.main(['--check', '--root', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert '+| `drain_brand_new` | bool | `false` | no | New. |' in out
    assert '-| `drain_wait_timeout` | str |' in out
    tool.main(['--root', str(tmp_path)])
    assert 'Hand-written prose.\n\n<!-- BEGIN argument_specs: check' in readme.read_text()
    assert tool.main(['--check', '--root', str(tmp_path)]) == 0


def test_markup_list_descriptions_suboptions_and_pipes_render_as_one_markdown_row(tool):
    specs = {'main': {'options': {
        'x_layouts': {
            'type': 'list', 'elements': 'dict', 'default': [],
            'description': ['First paragraph with O(x_mode=a) and M(gpufleet.nvidia.nvidia_smi).',
                            'Second, C(a | b), V(none) and P(gpufleet.nvidia.mig#role); <node> stays text.'],
            'options': {'profiles': {'type': 'dict', 'required': True, 'description': 'Per GPU.'}}},
        'x_mode': {'type': 'str', 'choices': ['a', 'b'], 'description': 'Mode.'},
    }}}
    text = tool.render('x', '# x\n\n## Variables\n\n| Variable | Default |\n|---|---|\n| `x` | 1 |\n\nAfter.\n', specs)
    rows = [line for line in text.splitlines() if line.startswith('| `')]
    assert rows == [
        '| `x_layouts` | list of dict | `[]` | no | First paragraph with `x_mode=a` and `gpufleet.nvidia.nvidia_smi`.'
        ' Second, `a \\| b`, `none` and `gpufleet.nvidia.mig` role; \\<node> stays text. |',
        '| `x_layouts[].profiles` | dict | — | yes | Per GPU. |',
        '| `x_mode` | str | — | no | Mode. Choices: `a`, `b`. |',
    ]
    # The hand-written table is gone, the prose after it is not.
    assert '| `x` | 1 |' not in text
    assert text.endswith('<!-- END argument_specs: main -->\n\nAfter.\n')


def test_a_readme_without_a_table_gets_a_variables_section_after_the_inputs_section(tool):
    readme = '# x\n\nIntro.\n\n## How inputs are read\n\nRules.\n\n## Tests\n\nSome.\n'
    specs = {'main': {'options': {'x_a': {'type': 'int', 'default': 1, 'description': 'A.'}}}}
    text = tool.render('x', readme, specs)
    assert text.index('## How inputs are read') < text.index('## Variables') < text.index('## Tests')
    assert '| `x_a` | int | `1` | no | A. |' in text
    assert tool.render('x', text, specs) == text


def test_a_missing_readme_is_reported(tool, tmp_path, capsys):
    role_dir = _copy_role(tmp_path, 'cudnn')
    (role_dir / 'README.md').unlink()
    assert tool.main(['--check', '--root', str(tmp_path)]) == 1
    assert 'roles/cudnn/README.md: missing' in capsys.readouterr().out
