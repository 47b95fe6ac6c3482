#!/usr/bin/env bash
# The collection's documentation site, built as docs.ansible.com would build
# it: antsibull-docs lints every module, plugin and role argument spec (markup,
# schema, references, rstcheck of the generated RST), then renders the site
# with Sphinx, warnings as errors. A doc string that would break or mislink
# on the published site fails here instead. The site lands in build/docs/.
# antsibull-docs reads a collection from ansible_collections/<namespace>/<name>,
# so, as in sanity.sh, the tracked files are copied into a tree of that shape:
# the site documents what would be committed, not ignored local leftovers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
VENV=${VENV:-$top/.venv}
export PATH="$VENV/bin:$PATH"
out="$top/build/docs"

work=$(mktemp -d /var/tmp/gpufleet-docs.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"
dest=$(copy_collection "$top" "$work")
# Only the copy, and ansible.builtin: not the checkout's .collections link nor
# the ~100 collections of the "ansible" package in the virtualenv, so a
# reference to a collection we do not depend on cannot resolve by accident.
export ANSIBLE_COLLECTIONS_PATH="$work"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false

# "dependent" checks references to this collection and ansible.builtin (its only
# dependency); "all" would load every installed collection (3 minutes, not 10 s).
echo "== antsibull-docs lint-collection-docs"
(cd "$dest" && antsibull-docs lint-collection-docs --plugin-docs \
  --validate-collection-refs=dependent --disallow-unknown-collection-refs \
  --check-extra-docs-refs .)

echo "== antsibull-docs sphinx-init + build"
# sphinx-init wants an existing directory that only its owner can write.
rm -rf "$out" && mkdir -p "$out" && chmod go-w "$out"
antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir "$out" \
  --project gpufleet.nvidia --copyright "gpufleet maintainers" \
  --title "gpufleet.nvidia" gpufleet.nvidia >/dev/null

# The generated conf.py fetches docs.python.org, jinja and docs.ansible.com
# inventories, which CI cannot reach (every miss is a warning, so -W fails).
# The site links only to docs.ansible.com (ansible.builtin plugins and a few
# reference pages): resolve those from a local inventory written below and
# drop the others.
cat >>"$out/conf.py" <<'PY'

# gpufleet (tests/harness/docs.sh): offline, from the inventory docs.sh writes.
intersphinx_mapping = {
    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', '../ansible_devel.inv'),
}
PY
"$VENV/bin/python" - "$out/ansible_devel.inv" <<'PY'
"""A Sphinx inventory of docs.ansible.com's labels that antsibull-docs links to."""
import pathlib
import sys
import zlib

import ansible

core = pathlib.Path(ansible.__file__).parent
labels = {
    "common_return_values": ("reference_appendices/common_return_values.html", "Return Values"),
    "action_plugins": ("plugins/action.html", "Action plugins"),
    "ansible_configuration_settings": ("reference_appendices/config.html", "Ansible Configuration Settings"),
}
plugins = [("module", p) for p in (core / "modules").glob("*.py")]
for kind in ("become", "cache", "callback", "connection", "inventory", "lookup", "shell", "strategy", "vars"):
    plugins += [(kind, p) for p in (core / "plugins" / kind).glob("*.py")]
for kind in ("filter", "test"):  # Jinja2 plugins are documented in one YAML file each.
    plugins += [(kind, p) for p in (core / "plugins" / kind).glob("*.yml")]
for kind, path in plugins:
    if path.stem != "__init__":
        name = f"{path.stem}_{kind}"
        labels[f"ansible_collections.ansible.builtin.{name}"] = (
            f"collections/ansible/builtin/{name}.html", f"ansible.builtin.{path.stem} {kind}")
lines = [
    f"{label} std:label -1 {page}#{label.replace('.', '-').replace('_', '-')} {title}\n"
    for label, (page, title) in sorted(labels.items())
]
header = "# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n# The remainder of this file is compressed using zlib.\n"
pathlib.Path(sys.argv[1]).write_bytes(header.encode() + zlib.compress("".join(lines).encode()))
PY
# build.sh (antsibull-docs collection, then sphinx-build -W --keep-going) is
# sphinx-init's own, so the build stays what the pinned antsibull-docs intends.
"$out/build.sh" >/dev/null
echo "docs site: $out/build/html/index.html"
