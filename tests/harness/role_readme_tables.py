# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write, or check, the variable tables of the role READMEs from meta/argument_specs.yml.

    python3 tests/harness/role_readme_tables.py            # rewrite the READMEs
    python3 tests/harness/role_readme_tables.py --check    # exit 1 with a diff when one drifted

The argument spec is what Ansible enforces and what the docs site renders; a
hand-written table beside it drifts. Each entry point of each role gets one
table (Variable | Type | Default | Required | Description) between

    <!-- BEGIN argument_specs: <entry point> -->
    <!-- END argument_specs: <entry point> -->

in roles/<role>/README.md; everything outside the markers is prose, left as
written. Decisions:

- Defaults come from the spec's ``default:`` alone. tests/unit/roles/
  test_role_argument_specs.py already holds every spec default equal to
  defaults/main.yml (templated ones rendered), so reading defaults/main.yml here
  would only show Jinja2 expressions. No spec default shows as an em dash.
- A list or dict default whose inline YAML is longer than LONG_DEFAULT
  characters (the exporter's counter list) is summarised by its size: the spec has it whole.
- Suboptions get rows of their own, ``parent.child`` for a dict and
  ``parent[].child`` for the dicts of a list, so every input is in the table.
- Ansible markup (C(), O(), M(), ...) becomes Markdown; a description that is
  a list of paragraphs is joined with spaces (a table cell holds one line).

A README without markers (the first run, or a new role) gets them in place of
the first table of its "## Variables" section, or in a new "## Variables"
section after "## How inputs are read" (else at the end); a new entry point's
block goes after the role's last one. --check never writes.
"""
import argparse
import difflib
import os
import re
import sys

import yaml
from antsibull_docs_parser import dom
from antsibull_docs_parser.parser import Context, parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = 'gpufleet.nvidia'
LONG_DEFAULT = 100
BLOCK = re.compile(r'<!-- BEGIN argument_specs: (?P<ep>[\w-]+) -->\n.*?<!-- END argument_specs: (?P=ep) -->\n', re.S)
SECTION = re.compile(r'^## (?P<title>.+)\n', re.M)
TABLE = re.compile(r'^\|[ `]*[Vv]ariable[` ]*\|.*\n(?:\|.*\n)*', re.M)


def code(text):
    """A Markdown code span that survives backticks in the text."""
    fence = '``' if '`' in text else '`'
    pad = ' ' if fence == '``' else ''
    return f'{fence}{pad}{text}{pad}{fence}'


def _option(part, role, entry_point):
    text = part.name + ('' if part.value is None else f'={part.value}')
    plugin = part.plugin
    if plugin is None or (plugin.fqcn == f'{COLLECTION}.{role}' and plugin.type == 'role' and part.entrypoint == entry_point):
        return code(text)
    where = plugin.fqcn + (f' (entry point {part.entrypoint})' if part.entrypoint else '')
    return f'{code(text)} of {code(where)}'


def markdown(paragraphs, role, entry_point):
    """One line of Markdown from a description (a string or a list of paragraphs)."""
    context = Context(current_plugin=dom.PluginIdentifier(fqcn=f'{COLLECTION}.{role}', type='role'),
                      role_entrypoint=entry_point)
    out = []
    for paragraph in parse(paragraphs, context, errors='exception'):
        words = []
        for part in paragraph:
            kind = part.type
            if kind == dom.PartType.TEXT:
                # Outside code, <node> would be an HTML tag to a Markdown renderer and * emphasis.
                words.append(re.sub(r'([\\<*])', r'\\\1', part.text))
            elif kind in (dom.PartType.CODE, dom.PartType.OPTION_VALUE):
                words.append(code(part.text if kind == dom.PartType.CODE else part.value))
            elif kind == dom.PartType.ENV_VARIABLE:
                words.append(code(part.name))
            elif kind in (dom.PartType.OPTION_NAME, dom.PartType.RETURN_VALUE):
                words.append(_option(part, role, entry_point))
            elif kind == dom.PartType.MODULE:
                words.append(code(part.fqcn))
            elif kind == dom.PartType.PLUGIN:
                words.append(f'{code(part.plugin.fqcn)} {part.plugin.type}')
            elif kind == dom.PartType.ITALIC:
                words.append(f'*{part.text}*')
            elif kind == dom.PartType.BOLD:
                words.append(f'**{part.text}**')
            elif kind == dom.PartType.URL:
                words.append(f'<{part.url}>')
            elif kind in (dom.PartType.LINK, dom.PartType.RST_REF):
                words.append(f'[{part.text}]({part.url})' if kind == dom.PartType.LINK else part.text)
            elif kind == dom.PartType.HORIZONTAL_LINE:
                words.append(' ')
            else:
                raise ValueError(f'{role} {entry_point}: markup this tool cannot render: {part}')
        out.append(''.join(words))
    return ' '.join(' '.join(out).split())


def inline_yaml(value):
    text = yaml.safe_dump(value, default_flow_style=True, width=float('inf'), allow_unicode=True)
    text = text.strip()
    return text[:-len('...')].strip() if text.endswith('...') else text


def default_cell(spec):
    if 'default' not in spec:
        return '—'
    value = spec['default']
    text = '""' if value == '' else inline_yaml(value)
    if isinstance(value, (list, dict)) and len(text) > LONG_DEFAULT:
        unit = 'items' if isinstance(value, list) else 'keys'
        return f'{len(value)} {unit} (see `meta/argument_specs.yml`)'
    return code(text)


def type_cell(spec):
    kind = spec.get('type', 'str')
    if spec.get('elements'):
        kind = f"{kind} of {spec['elements']}"
    return kind


def rows(options, role, entry_point, prefix=''):
    for name, spec in options.items():
        description = markdown(spec.get('description', ''), role, entry_point)
        if spec.get('choices'):
            choices = ', '.join(code(inline_yaml(choice)) for choice in spec['choices'])
            description = f'{description} Choices: {choices}.'.strip()
        yield (code(prefix + name), type_cell(spec), default_cell(spec), 'yes' if spec.get('required') else 'no',
               description)
        if spec.get('options'):
            child = prefix + name + ('[].' if spec.get('type') == 'list' else '.')
            yield from rows(spec['options'], role, entry_point, child)


def cell(text):
    return text.replace('|', '\\|')


def block(role, entry_point, spec, several):
    lines = [f'<!-- BEGIN argument_specs: {entry_point} -->',
             '<!-- Generated from meta/argument_specs.yml by tests/harness/role_readme_tables.py; do not edit. -->']
    if several:
        title = markdown(spec.get('short_description', ''), role, entry_point)
        lines += ['', f'Entry point `{entry_point}`' + (f': {title}' if title else '')]
    lines += ['', '| Variable | Type | Default | Required | Description |', '|---|---|---|---|---|']
    options = spec.get('options') or {}
    lines += ['| ' + ' | '.join(cell(c) for c in row) + ' |' for row in rows(options, role, entry_point)]
    if not options:
        lines.append('| — | | | | This entry point takes no variables. |')
    lines += ['', f'<!-- END argument_specs: {entry_point} -->']
    return '\n'.join(lines) + '\n'


def _insert_blocks(readme, blocks):
    """Place blocks where a README without markers has its variable table or should have one."""
    sections = list(SECTION.finditer(readme))
    variables = next((s for s in sections if s.group('title').strip().lower() == 'variables'), None)
    if variables is not None:
        following = next((s for s in sections if s.start() > variables.start()), None)
        end = following.start() if following else len(readme)
        table = TABLE.search(readme, variables.end(), end)
        if table:
            return readme[:table.start()] + blocks + readme[table.end():]
        return readme[:end].rstrip('\n') + '\n\n' + blocks + '\n' + readme[end:]
    inputs = next((s for s in sections if s.group('title').strip().lower() == 'how inputs are read'), None)
    after = next((s for s in sections if inputs is not None and s.start() > inputs.start()), None)
    at = after.start() if after else len(readme)
    head = readme[:at].rstrip('\n') + '\n\n'
    tail = ('\n' + readme[at:]) if readme[at:] else ''
    return head + '## Variables\n\n' + blocks + tail


def render(role, readme, specs):
    """The README text with every entry point's table as the spec says."""
    several = len(specs) > 1 or 'main' not in specs
    wanted = {ep: block(role, ep, spec or {}, several) for ep, spec in specs.items()}
    present = [m.group('ep') for m in BLOCK.finditer(readme)]
    stale = [ep for ep in present if ep not in wanted]
    if stale:
        raise ValueError(f'roles/{role}/README.md: table for entry points the spec no longer has: {", ".join(stale)}; '
                         'remove the block by hand (the prose around it may need to go too)')
    text = BLOCK.sub(lambda m: wanted[m.group('ep')], readme)
    missing = ''.join(wanted[ep] + '\n' for ep in specs if ep not in present)
    if missing and present:
        last = list(BLOCK.finditer(text))[-1]
        text = text[:last.end()] + '\n' + missing.rstrip('\n') + '\n' + text[last.end():]
    elif missing:
        text = _insert_blocks(text, missing.rstrip('\n') + '\n')
    return text


def roles(root):
    roles_dir = os.path.join(root, 'roles')
    return sorted(name for name in os.listdir(roles_dir)
                  if os.path.isfile(os.path.join(roles_dir, name, 'meta', 'argument_specs.yml')))


def expected(root, role):
    """(README path, its text now or None, its text as it should be)."""
    with open(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    path = os.path.join(root, 'roles', role, 'README.md')
    if not os.path.exists(path):
        return path, None, None
    with open(path, encoding='utf-8') as handle:
        current = handle.read()
    return path, current, render(role, current, specs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 with a diff when a README drifted')
    parser.add_argument('--root', default=ROOT, help='collection root (default: this checkout)')
    args = parser.parse_args(argv)
    problems = []
    for role in roles(args.root):
        path, current, wanted = expected(args.root, role)
        relative = os.path.relpath(path, args.root)
        if current is None:
            problems.append(f'{relative}: missing; every role documents its variables there\n')
        elif current != wanted and args.check:
            problems.append(''.join(difflib.unified_diff(
                current.splitlines(True), wanted.splitlines(True), f'a/{relative}', f'b/{relative}')))
        elif current != wanted:
            with open(path, 'w', encoding='utf-8') as handle:
                handle.write(wanted)
            print(f'rewrote {relative}')
    if problems:
        sys.stdout.write(''.join(problems))
        if args.check:
            print('role README tables differ from meta/argument_specs.yml: run python3 tests/harness/role_readme_tables.py')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
