# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator payload the packages ship: complete, and required loudly."""

import os
import shutil
import subprocess
import sys

import pytest

import build_repo
import catalog
import debpkg
from repo_test_support import BASE_URL, REPO_SRC

REAL_PAYLOAD = os.path.dirname(REPO_SRC)


def test_real_payload_has_every_file_the_packages_ship():
    missing = debpkg.missing_payload(catalog.packages(), REAL_PAYLOAD)
    assert not missing, "tests/nvidia_sim lacks: " + ", ".join(missing)


def test_build_fails_listing_missing_payload(tools, payload, tmp_path):  # pylint: disable=unused-argument
    partial = str(tmp_path / "payload")
    shutil.copytree(payload, partial)
    os.unlink(os.path.join(partial, "bin", "nvidia-persistenced"))
    shutil.rmtree(os.path.join(partial, "profiles"))
    out = str(tmp_path / "repo")
    with pytest.raises(build_repo.BuildError) as error:
        build_repo.build(out, partial, BASE_URL)
    assert "  - bin/nvidia-persistenced\n" in str(error.value)
    assert "  - profiles/*.json" in str(error.value)
    assert not os.path.exists(out)
    cli = subprocess.run([sys.executable, os.path.join(REPO_SRC, "build_repo.py"), "--out", out,
                          "--payload", partial], universal_newlines=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    assert cli.returncode == 1
    assert "missing simulator payload files" in cli.stderr and "bin/nvidia-persistenced" in cli.stderr
