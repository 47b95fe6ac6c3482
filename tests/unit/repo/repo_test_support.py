# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the simulated repository tests: a sandboxed apt and .deb readers.

The host's apt is confined to a directory and to the simulated repositories.

Nothing of the host's apt configuration, lists or dpkg status is read: the
sandbox has its own (empty) status file, lists, cache, sources and
preferences, so ``install -s`` answers what apt would do on a host with no
package installed and only the simulated repositories configured.
"""

import os
import re
import subprocess
import tarfile
import tempfile

# tests/nvidia_sim/repo, home of build_repo.py and the catalog.
REPO_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "..", "..", "nvidia_sim", "repo"))
# URL the test build writes into cuda-keyring's .list.
BASE_URL = "http://127.0.0.1:8765"

# "Inst nvidia-smi (570.195.03-1 NVIDIA CUDA:..." in apt-get -s output.
_INST = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) ", re.M)


_STATUS_FIELDS = ("Package", "Version", "Architecture", "Maintainer", "Installed-Size", "Depends",
                  "Pre-Depends", "Recommends", "Provides", "Conflicts", "Breaks", "Replaces", "Source",
                  "Section", "Priority", "Description")


class AptResult:
    def __init__(self, completed):
        self.rc = completed.returncode
        self.output = completed.stdout + completed.stderr
        self.installed = dict(_INST.findall(completed.stdout))

    @property
    def ok(self):
        return self.rc == 0

    def __repr__(self):
        return "AptResult(rc=%d)\n%s" % (self.rc, self.output)


class AptSandbox:
    def __init__(self, root, sources):
        """sources: list of (url, keyring path) of flat repositories."""
        self.root = root
        for sub in ("state/lists/partial", "cache/archives/partial", "etc/sources.list.d",
                    "etc/preferences.d", "etc/apt.conf.d", "etc/trusted.gpg.d"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        open(os.path.join(root, "state", "status"), "w").close()
        with open(os.path.join(root, "etc", "sources.list"), "w") as handle:
            for url, keyring in sources:
                handle.write("deb [signed-by=%s] %s /\n" % (keyring, url))
        self.config = os.path.join(root, "apt.conf")
        settings = {
            "Dir::State": "state", "Dir::State::status": "state/status", "Dir::Cache": "cache",
            "Dir::Etc": "etc", "Dir::Etc::sourcelist": "etc/sources.list",
            "Dir::Etc::sourceparts": "etc/sources.list.d", "Dir::Etc::preferences": "etc/preferences",
            "Dir::Etc::preferencesparts": "etc/preferences.d", "Dir::Etc::trusted": "etc/trusted.gpg",
            "Dir::Etc::trustedparts": "etc/trusted.gpg.d", "Dir::Etc::parts": "etc/apt.conf.d",
            "Dir::Log": "log",
        }
        with open(self.config, "w") as handle:
            for key, value in settings.items():
                handle.write('%s "%s";\n' % (key, os.path.join(root, value)))
            handle.write('APT::Architecture "amd64";\nAPT::Architectures { "amd64"; };\n'
                         'Debug::NoLocking "true";\nAPT::Sandbox::User "root";\n'
                         'Acquire::Languages "none";\n')

    def run(self, *args):
        env = dict(os.environ, APT_CONFIG=self.config, LC_ALL="C")
        completed = subprocess.run(["apt-get", "-q"] + list(args), env=env, universal_newlines=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        return AptResult(completed)

    def update(self):
        return self.run("update")

    def install(self, *packages, recommends=True):
        flags = [] if recommends else ["--no-install-recommends"]
        return self.run("install", "-s", *(flags + list(packages)))

    def add_preferences(self, name, text):
        with open(os.path.join(self.root, "etc", "preferences.d", name), "w") as handle:
            handle.write(text)

    def clear_preferences(self):
        directory = os.path.join(self.root, "etc", "preferences.d")
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))

    def set_installed(self, packages_file, wanted):
        """Make the dpkg status list packages as installed.

        wanted: {name: version}; the stanzas come from a Packages file.
        """
        stanzas = []
        with open(packages_file) as handle:
            for stanza in handle.read().split("\n\n"):
                fields = dict(re.findall(r"^([\w-]+): (.*)$", stanza, re.M))
                if fields.get("Package") in wanted and fields.get("Version") == wanted[fields["Package"]]:
                    kept = [line for line in stanza.splitlines()
                            if line.split(":", 1)[0] in _STATUS_FIELDS]
                    stanzas.append("\n".join(kept[:1] + ["Status: install ok installed"] + kept[1:]))
        missing = set(wanted) - {re.search(r"^Package: (\S+)", s, re.M).group(1) for s in stanzas}
        if missing:
            raise KeyError("not in %s: %s" % (packages_file, ", ".join(sorted(missing))))
        with open(os.path.join(self.root, "state", "status"), "w") as handle:
            handle.write("\n\n".join(stanzas) + "\n")

    def clear_installed(self):
        open(os.path.join(self.root, "state", "status"), "w").close()


def deb_member(deb, path):
    """Content of one file of a .deb, read with dpkg-deb --fsys-tarfile."""
    with tempfile.TemporaryFile() as tar_file:
        subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], stdout=tar_file, check=True)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            member = tar.extractfile("." + path)
            return member.read()


def deb_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], check=True, universal_newlines=True,
                          stdout=subprocess.PIPE).stdout.strip()


def deb_listing(deb):
    """{path: (mode string, link target or None)} of a .deb's data."""
    listing = {}
    output = subprocess.run(["dpkg-deb", "-c", deb], check=True, universal_newlines=True,
                            stdout=subprocess.PIPE).stdout
    for line in output.splitlines():
        parts = line.split(None, 5)
        name = parts[5]
        target = None
        if " -> " in name:
            name, target = name.split(" -> ", 1)
        listing[name[1:].rstrip("/") or "/"] = (parts[0], target)
    return listing


def deb_path(repo_dir, name, version):
    import catalog  # pylint: disable=import-outside-toplevel
    for package in catalog.packages():
        if package.name == name and package.version == version:
            return os.path.join(repo_dir, package.filename)
    raise KeyError("%s %s is not in the catalog" % (name, version))
