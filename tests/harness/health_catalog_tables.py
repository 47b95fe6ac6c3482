# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write, or check, the health catalog tables of roles/health/README.md from plugins/module_utils/health_catalog.py.

    python3 tests/harness/health_catalog_tables.py            # rewrite the README's tables
    python3 tests/harness/health_catalog_tables.py --check    # exit 1 with a diff when they drifted

The catalog is data the module, the report and the node-local check read; the
README shows it between ``<!-- BEGIN health_catalog -->`` and
``<!-- END health_catalog -->`` (checks, thresholds, sources), so an operator
reads the same codes, actions and numbers the code uses.
"""
import argparse
import difflib
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, 'plugins', 'module_utils', 'health_catalog.py')
README = os.path.join(ROOT, 'roles', 'health', 'README.md')
BEGIN = '<!-- BEGIN health_catalog -->'
END = '<!-- END health_catalog -->'


def _catalog():
    spec = importlib.util.spec_from_file_location('health_catalog', CATALOG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(text):
    return str(text).replace('|', '\\|').replace('\n', ' ')


def _value(value):
    return 'null' if value is None else '`%s`' % value


def tables():
    catalog = _catalog()
    lines = [BEGIN, '<!-- Generated from plugins/module_utils/health_catalog.py by '
                    'tests/harness/health_catalog_tables.py; do not edit. -->', '',
             '**Actions**, cheapest first:', '']
    lines += ['| Action | Meaning |', '|---|---|']
    lines += ['| `%s` | %s |' % (action, _cell(catalog.ACTION_MEANING[action])) for action in catalog.ACTIONS]
    lines += ['', '**Checks** (`xid_*`: one code per Xid, severity and action per Xid from the Xid catalogue; '
                  '`nvidia_smi_*`: one code per failure reason):', '',
              '| Code | Severity | Action | Source | What |', '|---|---|---|---|---|']
    for code in sorted(catalog.CHECKS):
        entry = catalog.CHECKS[code]
        cells = (code, entry['severity'], entry['action'], entry['source'], _cell(entry['what']))
        lines.append('| `%s` | %s | %s | %s | %s |' % cells)
    models = ', '.join('`%s`' % key for key, _pattern in catalog.MODELS)
    lines += ['', '**Thresholds** (`health_thresholds`; per model: %s):' % models, '',
              '| Threshold | Default | Per model | Unit | Source | What |', '|---|---|---|---|---|---|']
    for name in sorted(catalog.THRESHOLDS):
        entry = catalog.THRESHOLDS[name]
        models = ', '.join('%s %s' % (model, _value(value)) for model, value in sorted(entry.get('models', {}).items()))
        lines.append('| `%s` | %s | %s | %s | %s | %s |' % (name, _value(entry['default']), models or '', entry['unit'],
                                                            entry['source'], _cell(entry['what'])))
    lines += ['', '**Sources:**', '', '| Source | Reference |', '|---|---|']
    lines += ['| %s | %s |' % (key, _cell(catalog.SOURCES[key])) for key in sorted(catalog.SOURCES)]
    lines += ['| inventory | The site\'s own value or override (`health_thresholds`, `health_check_overrides`). |',
              '| host | No number in the catalog: the best-connected GPU of the same model on the host. |', END]
    return '\n'.join(lines)


def render(text):
    if BEGIN not in text or END not in text:
        raise SystemExit('%s has no %s ... %s block' % (README, BEGIN, END))
    start = text.index(BEGIN)
    end = text.index(END) + len(END)
    return text[:start] + tables() + text[end:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true')
    args = parser.parse_args()
    with open(README) as handle:
        current = handle.read()
    wanted = render(current)
    if args.check:
        if wanted != current:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), README,
                                                       README + ' (from the catalog)'))
            return 1
        return 0
    with open(README, 'w') as handle:
        handle.write(wanted)
    return 0


if __name__ == '__main__':
    sys.exit(main())
