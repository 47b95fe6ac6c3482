# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Flat apt repository metadata and its signature.

The Release file has the fields and layout of NVIDIA's repository tool
(NVIDIA/cuda-repo-management): Origin, Label, Architecture, Date, hashes,
Acquire-By-Hash: no, no Valid-Until.  Keys are throwaway ed25519 keys and
signatures use SHA512, which apt's sqv (Debian 13) accepts.
"""

import email.utils
import gzip
import hashlib
import os
import shutil
import subprocess
import time

HASHES = (("MD5Sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256"), ("SHA512", "sha512"))


class SigningKey:
    """An ed25519 key in a private GNUPGHOME, made for one build only."""

    def __init__(self, homedir, uid):
        self.homedir = homedir
        self.uid = uid
        self._gpg("--quick-generate-key", uid, "ed25519", "sign", "never")
        colons = self._gpg("--with-colons", "--list-keys", uid).decode()
        self.fingerprint = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))

    @property
    def short_id(self):
        """Last 8 hex digits, lower case: the name of NVIDIA's <id>.pub files."""
        return self.fingerprint[-8:].lower()

    def _gpg(self, *args):
        command = ["gpg", "--homedir", self.homedir, "--batch", "--yes", "--quiet",
                   "--pinentry-mode", "loopback", "--passphrase", ""] + list(args)
        return subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout

    def armored(self):
        return self._gpg("--armor", "--export", self.fingerprint)

    def binary(self):
        return self._gpg("--export", self.fingerprint)

    def sign_release(self, directory):
        release = os.path.join(directory, "Release")
        self._gpg("--local-user", self.fingerprint, "--digest-algo", "SHA512", "--clearsign",
                  "--output", os.path.join(directory, "InRelease"), release)
        self._gpg("--local-user", self.fingerprint, "--digest-algo", "SHA512", "--armor", "--detach-sign",
                  "--output", os.path.join(directory, "Release.gpg"), release)


def stop_agent(homedir):
    subprocess.run(["gpgconf", "--homedir", homedir, "--kill", "all"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def write_packages(directory):
    """Packages (apt-ftparchive, Filename: ./<deb>) and Packages.gz."""
    output = subprocess.run(["apt-ftparchive", "packages", "."], cwd=directory, check=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    with open(os.path.join(directory, "Packages"), "wb") as handle:
        handle.write(output)
    with open(os.path.join(directory, "Packages.gz"), "wb") as raw:
        with gzip.GzipFile(filename="Packages", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as handle:
            handle.write(output)


def write_release(directory, origin, label, architecture, now=None):
    date = email.utils.formatdate(now if now is not None else time.time(), usegmt=True)
    lines = ["Origin: %s" % origin, "Label: %s" % label, "Architecture: %s" % architecture, "Date: %s" % date]
    files = []
    for name in ("Packages", "Packages.gz"):
        with open(os.path.join(directory, name), "rb") as handle:
            files.append((name, handle.read()))
    for field, algorithm in HASHES:
        lines.append("%s:" % field)
        for name, data in files:
            lines.append(" %s %16d %s" % (hashlib.new(algorithm, data).hexdigest(), len(data), name))
    lines.append("Acquire-By-Hash: no")
    with open(os.path.join(directory, "Release"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
