# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the simulated NVIDIA repositories: one build per session.

The build uses a stand-in payload made from the catalog's own list of
payload files, so these tests check the repositories whatever state the
simulator is in; test_repo_payload.py checks the real payload separately.
"""

import os
import shutil
import sys

import pytest

from repo_test_support import BASE_URL, REPO_SRC, AptSandbox

if REPO_SRC not in sys.path:
    sys.path.insert(0, REPO_SRC)

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import catalog  # noqa: E402  pylint: disable=wrong-import-position
import debpkg  # noqa: E402  pylint: disable=wrong-import-position

REQUIRED = ("dpkg-deb", "apt-ftparchive", "apt-get", "gpg", "gpgv", "rpmbuild", "rpmsign", "createrepo_c",
            "modifyrepo_c", "rpm")


def _missing_tools():
    return [tool for tool in REQUIRED if shutil.which(tool) is None]


def stand_in_payload(directory):
    """Write one file for every payload path the catalog needs."""
    for package in catalog.packages() + catalog.rpm_packages():
        for item in package.payload_sources():
            if isinstance(item, debpkg.PayloadTree):
                name = os.path.join(item.source, "stand_in" + item.pattern.replace("*", ""))
            else:
                name = item.source
            path = os.path.join(directory, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write("#!/bin/sh\n# stand-in for %s\n" % name)
    return directory


@pytest.fixture(scope="session")
def tools():
    missing = _missing_tools()
    if missing:
        pytest.skip("simulated repository tests need %s (Debian: apt-get install apt-utils gnupg gpgv rpm createrepo-c)"
                    % ", ".join(missing))


@pytest.fixture(scope="session")
def payload(tmp_path_factory):
    return stand_in_payload(str(tmp_path_factory.mktemp("payload")))


@pytest.fixture(scope="session")
def built(tools, payload, tmp_path_factory):  # pylint: disable=redefined-outer-name,unused-argument
    out = os.path.join(str(tmp_path_factory.mktemp("mirror")), "repo")
    assert build_repo.build(out, payload, BASE_URL, log=lambda _msg: None)
    return out


@pytest.fixture(scope="session")
def cuda_dir(built):  # pylint: disable=redefined-outer-name
    return os.path.join(built, catalog.CUDA_REPO_DIR % "debian12")


@pytest.fixture(scope="session")
def ctk_dir(built):  # pylint: disable=redefined-outer-name
    return os.path.join(built, catalog.CONTAINER_TOOLKIT_DIR)


@pytest.fixture(scope="session")
def sandbox(built, tmp_path_factory):  # pylint: disable=redefined-outer-name
    """apt confined to a directory, knowing only the debian12 CUDA and the
    container toolkit repositories, with an empty dpkg status."""
    keys = os.path.join(built, "keys")
    apt = AptSandbox(str(tmp_path_factory.mktemp("apt")), [
        ("file://%s/" % os.path.join(built, catalog.CUDA_REPO_DIR % "debian12"),
         os.path.join(keys, "cuda-archive-key.gpg")),
        ("file://%s" % os.path.join(built, catalog.CONTAINER_TOOLKIT_DIR),
         os.path.join(keys, "nvidia-container-toolkit-key.gpg")),
    ])
    result = apt.update()
    assert result.ok, result.output
    return apt


@pytest.fixture
def apt(sandbox):  # pylint: disable=redefined-outer-name
    sandbox.clear_preferences()
    sandbox.clear_installed()
    yield sandbox
    sandbox.clear_preferences()
    sandbox.clear_installed()
