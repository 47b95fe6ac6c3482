# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Layout, keys, signatures and caching of the built repositories."""

import hashlib
import json
import os
import re
import subprocess

import pytest

import build_repo
import catalog
from repo_test_support import BASE_URL, deb_member

CUDA_DIRS = [catalog.CUDA_REPO_DIR % d for d in catalog.CUDA_DISTROS]
ALL_DIRS = CUDA_DIRS + [catalog.CONTAINER_TOOLKIT_DIR]


def _gpg_fingerprints(keyring, homedir):
    output = subprocess.run(["gpg", "--homedir", homedir, "--batch", "--with-colons", "--show-keys", keyring],
                            check=True, universal_newlines=True, stdout=subprocess.PIPE).stdout
    return [line.split(":")[9] for line in output.splitlines() if line.startswith("fpr:")]


def _gpgv(keyring, *files):
    return subprocess.run(["gpgv", "--keyring", keyring] + list(files), universal_newlines=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)


def _packages_stanzas(directory):
    with open(os.path.join(directory, "Packages")) as handle:
        return [dict(re.findall(r"^([\w-]+): (.*)$", s, re.M)) for s in handle.read().strip().split("\n\n")]


@pytest.mark.parametrize("rel", ALL_DIRS)
def test_flat_repository_files(built, rel):
    directory = os.path.join(built, rel)
    for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg"):
        assert os.path.isfile(os.path.join(directory, name)), name
    stanzas = _packages_stanzas(directory)
    debs = sorted(n for n in os.listdir(directory) if n.endswith(".deb"))
    assert sorted(s["Filename"] for s in stanzas) == ["./" + d for d in debs]


def test_key_files_and_fingerprints(built, tmp_path):
    keys = os.path.join(built, "keys")
    homedir = str(tmp_path)
    with open(os.path.join(keys, "fingerprint")) as handle:
        cuda_fpr = handle.read().strip()
    with open(os.path.join(keys, "nvidia-container-toolkit-fingerprint")) as handle:
        ctk_fpr = handle.read().strip()
    assert re.match(r"^[0-9A-F]{40}$", cuda_fpr) and re.match(r"^[0-9A-F]{40}$", ctk_fpr)
    assert cuda_fpr != ctk_fpr
    for stem, fpr in (("cuda-archive-key", cuda_fpr), ("nvidia-container-toolkit-key", ctk_fpr)):
        assert _gpg_fingerprints(os.path.join(keys, stem + ".gpg"), homedir) == [fpr]
        assert _gpg_fingerprints(os.path.join(keys, stem + ".asc"), homedir) == [fpr]
    # NVIDIA publishes the key as <last 8 hex digits>.pub next to the packages.
    for rel in CUDA_DIRS:
        assert os.path.isfile(os.path.join(built, rel, cuda_fpr[-8:].lower() + ".pub"))
    assert _gpg_fingerprints(os.path.join(built, "libnvidia-container", "gpgkey"), homedir) == [ctk_fpr]


@pytest.mark.parametrize("rel", ALL_DIRS)
def test_release_signatures_verify_with_the_exported_key(built, rel):
    directory = os.path.join(built, rel)
    right, wrong = "cuda-archive-key.gpg", "nvidia-container-toolkit-key.gpg"
    if rel == catalog.CONTAINER_TOOLKIT_DIR:
        right, wrong = wrong, right
    keyring = os.path.join(built, "keys", right)
    assert _gpgv(keyring, os.path.join(directory, "InRelease")).returncode == 0
    detached = _gpgv(keyring, os.path.join(directory, "Release.gpg"), os.path.join(directory, "Release"))
    assert detached.returncode == 0, detached.stdout
    assert _gpgv(os.path.join(built, "keys", wrong), os.path.join(directory, "InRelease")).returncode != 0


def test_signature_uses_ed25519_and_sha512(built, tmp_path):
    packets = subprocess.run(["gpg", "--homedir", str(tmp_path), "--batch", "--list-packets",
                              os.path.join(built, CUDA_DIRS[0], "Release.gpg")], check=True,
                             universal_newlines=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    assert "digest algo 10" in packets      # SHA512
    assert ":signature packet: algo 22," in packets      # EdDSA (ed25519)


@pytest.mark.parametrize("rel", ALL_DIRS)
def test_release_fields_and_hashes(built, rel):
    directory = os.path.join(built, rel)
    with open(os.path.join(directory, "Release")) as handle:
        release = handle.read()
    assert re.search(r"^Origin: NVIDIA$", release, re.M)
    assert re.search(r"^Label: NVIDIA (CUDA|Container Toolkit)$", release, re.M)
    assert re.search(r"^Date: .+ GMT$", release, re.M)
    assert "Valid-Until" not in release
    section = release.split("SHA256:\n", 1)[1].split("SHA512:", 1)[0]
    for name in ("Packages", "Packages.gz"):
        with open(os.path.join(directory, name), "rb") as handle:
            data = handle.read()
        assert " %s %16d %s\n" % (hashlib.sha256(data).hexdigest(), len(data), name) in section


def test_debian12_and_debian13_carry_the_same_packages(built):
    sets = [{(s["Package"], s["Version"]) for s in _packages_stanzas(os.path.join(built, rel))} for rel in CUDA_DIRS]
    assert sets[0] == sets[1]
    names = {pair[0] for pair in sets[0]}
    assert "nvidia-container-toolkit" not in names
    ctk = {s["Package"] for s in _packages_stanzas(os.path.join(built, catalog.CONTAINER_TOOLKIT_DIR))}
    assert ctk == {"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                   "libnvidia-container1", "nvidia-sim-runtime"}


@pytest.mark.parametrize("distro", catalog.CUDA_DISTROS)
def test_cuda_keyring_enables_this_mirror(built, distro):
    deb = os.path.join(built, catalog.CUDA_REPO_DIR % distro, "cuda-keyring_1.1-1_all.deb")
    source = deb_member(deb, "/etc/apt/sources.list.d/cuda-%s-x86_64.list" % distro).decode()
    assert source == ("deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] %s/compute/cuda/repos/%s/x86_64/ /\n"
                      % (BASE_URL, distro))
    with open(os.path.join(built, "keys", "cuda-archive-key.gpg"), "rb") as handle:
        assert deb_member(deb, "/usr/share/keyrings/cuda-archive-keyring.gpg") == handle.read()


def test_container_toolkit_list_like_nvidia(built):
    with open(os.path.join(built, "libnvidia-container", "stable", "deb", "nvidia-container-toolkit.list")) as handle:
        lines = handle.read().splitlines()
    assert lines[0] == "deb %s/libnvidia-container/stable/deb/$(ARCH) /" % BASE_URL
    assert lines[1].startswith("#deb ") and "/experimental/" in lines[1]


def test_manifest_lists_every_deb(built):
    with open(os.path.join(built, "manifest.json")) as handle:
        manifest = json.load(handle)
    for rel in ALL_DIRS:
        assert sorted(e["filename"] for e in manifest[rel]) == sorted(
            n for n in os.listdir(os.path.join(built, rel)) if n.endswith(".deb"))


def test_build_is_cached_by_content_hash(tools, payload, tmp_path):  # pylint: disable=unused-argument
    # The apt repositories alone: the cache is one for both (the session's
    # full build in conftest.py covers the rpm ones).
    out = str(tmp_path / "repo")
    messages = []
    assert build_repo.build(out, payload, BASE_URL, log=messages.append, with_rpm=False)
    with open(os.path.join(out, "keys", "fingerprint")) as handle:
        fingerprint = handle.read()
    assert not build_repo.build(out, payload, BASE_URL, log=messages.append, with_rpm=False)
    assert messages[-1] == "repository up to date: %s" % out
    # Without the rpm repositories, and without their keys.
    assert not os.path.exists(os.path.join(out, "compute", "cuda", "repos", "rhel9"))
    assert not os.path.exists(os.path.join(out, "keys", "RPM-GPG-KEY-Rocky-9"))
    # Another URL changes cuda-keyring's .list, so the mirror is rebuilt.
    assert build_repo.build(out, payload, "http://127.0.0.1:9999", log=messages.append, with_rpm=False)
    with open(os.path.join(out, "keys", "fingerprint")) as handle:
        assert handle.read() != fingerprint
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".nvsim-repo-")]
