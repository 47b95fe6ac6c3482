#!/usr/bin/env bash
# ansible-test sanity, offline-capable. ansible-test must run from
# ansible_collections/<namespace>/<name>, so the collection's tracked files are
# copied into a temporary tree of that shape.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
VENV=${VENV:-$top/.venv}

# ansible-test bootstraps pip in each of its virtualenvs with a get-pip script
# downloaded from a host our machines cannot reach. Give it, in its cache, a
# script that does the same job from the standard library's ensurepip.
pip_version=$("$VENV/bin/python" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11"))["pip"])
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cat >"$cache" <<'PY'
"""Offline stand-in for get-pip.py, written by gpufleet's tests/harness/sanity.sh."""
import ensurepip
import os
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
# ensurepip points PIP_CONFIG_FILE at /dev/null, which would hide this
# machine's pip configuration (index mirrors, certificates).
os.environ.pop("PIP_CONFIG_FILE", None)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
PY

work=$(mktemp -d /var/tmp/gpufleet-sanity.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"
dest=$(copy_collection "$top" "$work")
cd "$dest"
git init -q && git add -A && git -c user.email=ci@invalid -c user.name=ci commit -qm sanity
"$VENV/bin/ansible-test" sanity --requirements --python 3.11 --color no "$@"
