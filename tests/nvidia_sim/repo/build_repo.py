# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the signed apt repositories of the simulated NVIDIA stack (test double):
NVIDIA's CUDA and container toolkit repositories and a Canonical (Ubuntu) archive.

    python3 tests/nvidia_sim/repo/build_repo.py --out DIR [--payload tests/nvidia_sim]
        [--base-url http://127.0.0.1:8765] [--force]

Needs dpkg-deb, apt-ftparchive (apt-utils) and gpg.  The build is skipped
when DIR/.build-hash matches the hash of the build scripts, the payload
files and the base URL.  See the "Repository" section of
tests/nvidia_sim/README.md for the layout.
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import aptrepo
import catalog
import catalog_el
import debpkg
import rpmpkg

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PAYLOAD = os.path.dirname(HERE)
DEFAULT_BASE_URL = os.environ.get("GPUFLEET_TEST_REPO_URL", "http://127.0.0.1:8765")
HASH_FILE = ".build-hash"
REQUIRED_TOOLS = ("dpkg-deb", "apt-ftparchive", "gpg", "gpgconf", "rpmbuild", "rpmsign", "createrepo_c",
                  "modifyrepo_c")
# Fixed timestamps inside the .debs make rebuilds byte-identical.
SOURCE_DATE_EPOCH = "1735689600"

CUDA_KEY_UID = "cudatools (simulated NVIDIA CUDA repository key, test double) <cuda@nvidia-sim.invalid>"
CTK_KEY_UID = ("NVIDIA CORPORATION (simulated container toolkit repository key, test double) "
               "<container-toolkit@nvidia-sim.invalid>")
ROCKY_KEY_UID = ("Rocky Enterprise Software Foundation - Release key 2022 (simulated, gpufleet.nvidia test double) "
                 "<infrastructure@rocky-sim.invalid>")
EPEL_KEY_UID = "Fedora (epel9) (simulated, gpufleet.nvidia test double) <epel@fedora-sim.invalid>"
UBUNTU_KEY_UID = ("Ubuntu Archive Automatic Signing Key (simulated, gpufleet.nvidia test double) "
                  "<ftpmaster@ubuntu-sim.invalid>")
# Ubuntu's Release files list no SHA512 (NVIDIA's do).
UBUNTU_HASHES = tuple(h for h in aptrepo.HASHES if h[0] != "SHA512")


class BuildError(Exception):
    pass


def missing_tools():
    return [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]


def content_hash(packages, payload_dir, base_url):
    digest = hashlib.sha256()
    # Rocky's AppStream offers kernel-devel of the kernel the containers run.
    digest.update(catalog.running_kernel().encode() + b"\0")
    for name in sorted(os.listdir(HERE)):
        if name.endswith(".py"):
            with open(os.path.join(HERE, name), "rb") as handle:
                digest.update(name.encode() + b"\0" + handle.read() + b"\0")
    seen = set()
    for package in packages:
        for item in debpkg.resolved_files(package, payload_dir):
            if isinstance(item, debpkg.Payload) and item.source not in seen:
                seen.add(item.source)
                with open(os.path.join(payload_dir, item.source), "rb") as handle:
                    digest.update(item.source.encode() + b"\0" + handle.read() + b"\0")
    digest.update(base_url.encode())
    return digest.hexdigest()


def up_to_date(out, digest):
    try:
        with open(os.path.join(out, HASH_FILE)) as handle:
            recorded = handle.read().strip()
    except OSError:
        return False
    return recorded == digest and os.path.isfile(os.path.join(out, "keys", "fingerprint"))


def _write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)
    os.chmod(path, mode)


def _write_keys(staging, cuda_key, ctk_key, ubuntu_key):
    keys = os.path.join(staging, "keys")
    _write(os.path.join(keys, "cuda-archive-key.asc"), cuda_key.armored())
    _write(os.path.join(keys, "cuda-archive-key.gpg"), cuda_key.binary())
    _write(os.path.join(keys, "fingerprint"), cuda_key.fingerprint + "\n")
    _write(os.path.join(keys, "nvidia-container-toolkit-key.asc"), ctk_key.armored())
    _write(os.path.join(keys, "nvidia-container-toolkit-key.gpg"), ctk_key.binary())
    _write(os.path.join(keys, "nvidia-container-toolkit-fingerprint"), ctk_key.fingerprint + "\n")
    # Named as ubuntu-keyring installs the archive key on a host.
    _write(os.path.join(keys, "ubuntu-archive-keyring.asc"), ubuntu_key.armored())
    _write(os.path.join(keys, "ubuntu-archive-keyring.gpg"), ubuntu_key.binary())
    _write(os.path.join(keys, "ubuntu-archive-fingerprint"), ubuntu_key.fingerprint + "\n")


def _write_rpm_keys(staging, rocky_key, epel_key):
    # Named as rocky-release and epel-release install them in /etc/pki/rpm-gpg.
    keys = os.path.join(staging, "keys")
    _write(os.path.join(keys, "RPM-GPG-KEY-Rocky-9"), rocky_key.armored())
    _write(os.path.join(keys, "rocky-fingerprint"), rocky_key.fingerprint + "\n")
    _write(os.path.join(keys, "RPM-GPG-KEY-EPEL-9"), epel_key.armored())
    _write(os.path.join(keys, "epel-fingerprint"), epel_key.fingerprint + "\n")


def _build_debs(packages, payload_dir, staging, jobs):
    """Build every .deb into its own pool slot; return {index: path}."""
    pool = os.path.join(staging, ".pool")
    work = os.path.join(staging, ".work")
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)

    def one(index):
        outdir = os.path.join(pool, str(index))
        os.makedirs(outdir)
        return index, debpkg.build_deb(packages[index], payload_dir, os.path.join(work, str(index)), outdir, env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as executor:
        return dict(executor.map(one, range(len(packages))))


def _populate_ubuntu(package, deb, group, staging, pool, index):
    """Link a .deb into the Ubuntu archive's pool (one file for every suite
    that carries it) and list it in index[(suite, component)]."""
    suite, component = group.split(":", 1)[1].split("/")
    if component not in catalog.UBUNTU_COMPONENTS or \
            not any(suite in suites for suites in catalog.ubuntu_suites().values()):
        raise BuildError("%s: unknown Ubuntu suite or component in %r" % (package.name, group))
    rel = aptrepo.pool_path(component, package.source or package.name, package.filename)
    if pool.setdefault(rel, package) is not package:
        raise BuildError("two packages build %s in %s" % (package.filename, catalog.UBUNTU_DIR))
    target = os.path.join(staging, catalog.UBUNTU_DIR, rel)
    if not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        aptrepo.link_or_copy(deb, target)
    entries = index.setdefault((suite, component), [])
    if any(e["package"] == package.name and e["version"] == package.version for e in entries):
        raise BuildError("%s %s is listed twice in %s/%s" % (package.name, package.version, suite, component))
    entries.append({"package": package.name, "version": package.version, "filename": rel})


def _populate(packages, debs, staging):
    """Link each .deb into the repository directories of its groups (and their
    snapshots); return the manifest of those and the Ubuntu archive's index."""
    dirs = catalog.repository_dirs()
    manifest = {}
    ubuntu_pool, ubuntu_index = {}, {}
    for index, package in enumerate(packages):
        for group in package.repos:
            if group.startswith("ubuntu:"):
                _populate_ubuntu(package, debs[index], group, staging, ubuntu_pool, ubuntu_index)
                continue
            if group not in dirs:
                raise BuildError("%s: unknown repository group %r" % (package.name, group))
            for rel in dirs[group] + catalog.snapshot_dirs(package, group):
                target = os.path.join(staging, rel)
                os.makedirs(target, exist_ok=True)
                entries = manifest.setdefault(rel, [])
                if any(e["package"] == package.name and e["version"] == package.version for e in entries):
                    raise BuildError("%s %s is listed twice in %s" % (package.name, package.version, rel))
                if os.path.exists(os.path.join(target, package.filename)):
                    raise BuildError("two packages build %s in %s" % (package.filename, rel))
                aptrepo.link_or_copy(debs[index], os.path.join(target, package.filename))
                entries.append({"package": package.name, "version": package.version,
                                "filename": package.filename})
    return manifest, ubuntu_index


def _index_and_sign(staging, manifest, cuda_key, ctk_key):
    built = time.time()
    for rel in manifest:
        directory = os.path.join(staging, rel)
        aptrepo.write_packages(directory)
        if rel == catalog.CONTAINER_TOOLKIT_DIR:
            aptrepo.write_release(directory, "NVIDIA", "NVIDIA Container Toolkit", "amd64")
            ctk_key.sign_release(directory)
        else:
            # A snapshot is the mirror's older copy: its Release date and its
            # files' times (what apt's If-Modified-Since compares) come before the build's.
            snapshot = rel.startswith(catalog.SNAPSHOT_ROOT + "/")
            dated = built - catalog.SNAPSHOT_AGE if snapshot else None
            aptrepo.write_release(directory, "NVIDIA", "NVIDIA CUDA", "x86_64", now=dated)
            cuda_key.sign_release(directory)
            # NVIDIA publishes the archive key next to the packages as <keyid>.pub.
            _write(os.path.join(directory, cuda_key.short_id + ".pub"), cuda_key.armored())
            if snapshot:
                for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg"):
                    os.utime(os.path.join(directory, name), (dated, dated))


def _index_and_sign_ubuntu(staging, ubuntu_index, ubuntu_key):
    """dists/<suite>/<component>/binary-amd64/Packages for every suite and
    component (empty where nothing lives: a host's sources name them all),
    each suite's Release signed with the Ubuntu key; {manifest key: entries}."""
    archive = os.path.join(staging, catalog.UBUNTU_DIR)
    stanzas = aptrepo.stanzas_by_filename(aptrepo.scan_packages(archive, "pool")) if ubuntu_index else {}
    built = time.time()
    manifest = {}
    for codename, suites in catalog.ubuntu_suites().items():
        version = catalog.UBUNTU_RELEASES[codename]
        for suite in suites:
            directory = os.path.join(archive, "dists", suite)
            names = []
            for component in catalog.UBUNTU_COMPONENTS:
                entries = sorted(ubuntu_index.get((suite, component), []),
                                 key=lambda e: (e["package"], e["version"]))
                rel = "%s/binary-amd64" % component
                aptrepo.write_index(os.path.join(directory, rel),
                                    "\n".join(stanzas[e["filename"]] for e in entries).encode("utf-8"))
                names += [rel + "/Packages", rel + "/Packages.gz"]
                if entries:
                    manifest["%s/dists/%s/%s" % (catalog.UBUNTU_DIR, suite, rel)] = entries
            pocket = suite[len(codename):].lstrip("-")
            fields = [("Origin", "Ubuntu"), ("Label", "Ubuntu"), ("Suite", suite), ("Version", version),
                      ("Codename", codename), ("Date", None), ("Architectures", "amd64"),
                      ("Components", " ".join(catalog.UBUNTU_COMPONENTS)),
                      ("Description", "Ubuntu %s %s (simulated archive, gpufleet.nvidia test double)"
                       % (codename.capitalize(), pocket.capitalize() if pocket else version))]
            if pocket == "backports":
                fields += [("NotAutomatic", "yes"), ("ButAutomaticUpgrades", "yes")]
            aptrepo.write_suite_release(directory, fields, names, UBUNTU_HASHES, now=built)
            ubuntu_key.sign_release(directory)
    return manifest


def _write_container_toolkit_extras(staging, ctk_key, base_url):
    base = os.path.join(staging, "libnvidia-container")
    _write(os.path.join(base, "gpgkey"), ctk_key.armored())
    url = "%s/libnvidia-container/stable/deb/$(ARCH)" % base_url.rstrip("/")
    _write(os.path.join(base, "stable", "deb", "nvidia-container-toolkit.list"),
           "deb %s /\n#deb %s /\n" % (url, url.replace("/stable/", "/experimental/")))


def _build_rpms(packages, payload_dir, staging, jobs):
    """Every .rpm into one pool, one rpmbuild run per worker; return {index: path}."""
    pool = os.path.join(staging, ".rpmpool")
    work = os.path.join(staging, ".rpmwork")
    os.makedirs(pool)
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
    names = [p.filename for p in packages]
    if len(set(names)) != len(names):
        raise BuildError("two rpms of the catalog have one file name")
    specs = [rpmpkg.write_spec(package, payload_dir, work) for package in packages]
    chunks = [specs[i::jobs] for i in range(jobs) if specs[i::jobs]]

    def one(index):
        rpmpkg.build_rpms(chunks[index], os.path.join(work, "top-%d" % index), pool, env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as executor:
        list(executor.map(one, range(len(chunks))))
    return {index: os.path.join(pool, package.filename) for index, package in enumerate(packages)}


def _rpm_dir_path(group, package):
    """NVIDIA's repositories keep the rpms beside repodata; Rocky's and EPEL's in Packages/<letter>/."""
    if group.startswith(("cuda:", "container-toolkit:")):
        return package.filename
    return os.path.join("Packages", package.name[0].lower(), package.filename)


def _build_rpm_repositories(packages, staging, payload_dir, keys, jobs):
    """The RPM repositories of catalog_el.RPM_REPOS from the catalog's
    packages: rpms signed by their repository's key, createrepo_c metadata
    (with the nvidia-driver module streams in NVIDIA's), repomd.xml signed
    (repo_gpgcheck); {dir: entries}."""
    rpms = _build_rpms(packages, payload_dir, staging, jobs)
    by_key = {}
    manifest = {}
    for index, package in enumerate(packages):
        for group in package.repos:
            if group not in catalog_el.RPM_REPOS:
                raise BuildError("%s: unknown RPM repository group %r" % (package.name, group))
            if group not in catalog_el.UNSIGNED_PACKAGES:
                by_key.setdefault(catalog_el.RPM_REPO_KEYS[group], set()).add(index)
    signed = [i for indexes in by_key.values() for i in indexes]
    if len(signed) != len(set(signed)):
        raise BuildError("an rpm cannot be signed by two repository keys")
    for name, indexes in sorted(by_key.items()):
        keys[name].sign_rpms([rpms[i] for i in sorted(indexes)])
    for index, package in enumerate(packages):
        for group in package.repos:
            rel, path = catalog_el.RPM_REPOS[group], _rpm_dir_path(group, package)
            target = os.path.join(staging, rel, path)
            if os.path.exists(target):
                raise BuildError("two packages build %s in %s" % (package.filename, rel))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            aptrepo.link_or_copy(rpms[index], target)
            manifest.setdefault(rel, []).append({"package": package.name, "version": package.evr, "filename": path})
    modules = catalog_el.modules_yaml(catalog.el_branch_releases(catalog.PAYLOAD))
    for group, rel in sorted(catalog_el.RPM_REPOS.items()):
        directory = os.path.join(staging, rel)
        os.makedirs(directory, exist_ok=True)
        subprocess.run(["createrepo_c", "--quiet", "--no-database", "--workers", str(jobs), directory],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if group.startswith("cuda:"):
            path = os.path.join(staging, ".modules", "modules.yaml")
            _write(path, modules)
            subprocess.run(["modifyrepo_c", "--mdtype=modules", path, os.path.join(directory, "repodata")],
                           check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            shutil.rmtree(os.path.dirname(path))
            cuda = keys["cuda"]
            _write(os.path.join(directory, cuda.short_id + ".pub"), cuda.armored())
        keys[catalog_el.RPM_REPO_KEYS[group]].detach_sign(os.path.join(directory, "repodata", "repomd.xml"))
    return manifest


def _replace_dir(staging, out):
    old = None
    if os.path.exists(out):
        old = tempfile.mkdtemp(prefix=".nvsim-repo-old-", dir=os.path.dirname(out))
        os.rename(out, os.path.join(old, "repo"))
    os.rename(staging, out)
    if old:
        shutil.rmtree(old)


def build(out, payload_dir, base_url, force=False, jobs=None, log=print, with_rpm=True):
    """Build the repositories into out; with_rpm=False leaves out the rpm
    repositories (for tests of the apt ones: rpmbuild is most of a build)."""
    out = os.path.abspath(out)
    tools = missing_tools()
    if tools:
        raise BuildError("missing tools: %s (Debian: apt-get install apt-utils dpkg gnupg)" % ", ".join(tools))
    packages = catalog.all_packages()
    rpm_packages = catalog.rpm_packages() if with_rpm else []
    missing = debpkg.missing_payload(packages + rpm_packages, payload_dir)
    if missing:
        raise BuildError("missing simulator payload files in %s:\n%s"
                         % (payload_dir, "\n".join("  - " + m for m in missing)))
    digest = content_hash(packages + rpm_packages, payload_dir, base_url + ("" if with_rpm else " without rpm"))
    if not force and up_to_date(out, digest):
        log("repository up to date: %s" % out)
        return False
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".nvsim-repo-new-", dir=parent)
    gnupg = tempfile.mkdtemp(prefix="nvsim-gpg-")
    try:
        cuda_key = aptrepo.SigningKey(gnupg, CUDA_KEY_UID)
        ctk_key = aptrepo.SigningKey(gnupg, CTK_KEY_UID)
        ubuntu_key = aptrepo.SigningKey(gnupg, UBUNTU_KEY_UID)
        _write_keys(staging, cuda_key, ctk_key, ubuntu_key)
        year = datetime.datetime.now(datetime.timezone.utc).year
        packages = packages + catalog.keyring_packages(cuda_key.binary(), cuda_key.short_id, year, base_url)
        debs = _build_debs(packages, payload_dir, staging, jobs or os.cpu_count() or 2)
        manifest, ubuntu_index = _populate(packages, debs, staging)
        _index_and_sign(staging, manifest, cuda_key, ctk_key)
        manifest.update(_index_and_sign_ubuntu(staging, ubuntu_index, ubuntu_key))
        _write_container_toolkit_extras(staging, ctk_key, base_url)
        if with_rpm:
            rocky_key = aptrepo.SigningKey(gnupg, ROCKY_KEY_UID)
            epel_key = aptrepo.SigningKey(gnupg, EPEL_KEY_UID)
            _write_rpm_keys(staging, rocky_key, epel_key)
            manifest.update(_build_rpm_repositories(
                rpm_packages, staging, payload_dir,
                {"cuda": cuda_key, "rocky": rocky_key, "epel": epel_key, "container-toolkit": ctk_key},
                jobs or os.cpu_count() or 2))
        for scratch in (".pool", ".work", ".rpmpool", ".rpmwork"):
            shutil.rmtree(os.path.join(staging, scratch), ignore_errors=True)
        _write(os.path.join(staging, "manifest.json"), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        _write(os.path.join(staging, HASH_FILE), digest + "\n")
        os.chmod(staging, 0o755)
        _replace_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        aptrepo.stop_agent(gnupg)
        shutil.rmtree(gnupg, ignore_errors=True)
    log("repository built: %s (%d packages)" % (out, len(packages) + len(rpm_packages)))
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", help="output directory (replaced on rebuild)")
    parser.add_argument("--payload", default=DEFAULT_PAYLOAD, help="simulator payload (tests/nvidia_sim)")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL,
                        help="URL the mirror is served at; written into cuda-keyring's .list")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--jobs", type=int, default=None, help="parallel dpkg-deb runs (default: CPUs)")
    parser.add_argument("--print-key", action="store_true",
                        help="print the short content hash of the scripts and payload (not of --base-url) and exit")
    args = parser.parse_args(argv)
    if args.print_key:
        print(content_hash(catalog.all_packages() + catalog.rpm_packages(), os.path.abspath(args.payload), "")[:12])
        return 0
    if not args.out:
        parser.error("--out is required")
    try:
        build(args.out, os.path.abspath(args.payload), args.base_url, args.force, args.jobs)
    except (BuildError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", None)
        print("build_repo: %s%s" % (exc, ("\n" + detail.decode(errors="replace")) if detail else ""),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
