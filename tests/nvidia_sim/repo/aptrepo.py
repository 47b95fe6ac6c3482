# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apt repository metadata and its signature: flat repositories (NVIDIA's)
and a Debian-style archive with dists/ and pool/ (Ubuntu's).

A flat Release file has the fields and layout of NVIDIA's repository tool
(NVIDIA/cuda-repo-management): Origin, Label, Architecture, Date, hashes,
Acquire-By-Hash: no, no Valid-Until.  A suite's Release lists the indexes of
its components relative to dists/<suite>/.  Keys are throwaway ed25519 keys
and signatures use SHA512, which apt's sqv (Debian 13) accepts.
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

    def detach_sign(self, path):
        """path.asc: an armored detached signature (dnf's repo_gpgcheck reads repomd.xml.asc)."""
        self._gpg("--local-user", self.fingerprint, "--digest-algo", "SHA512", "--armor", "--detach-sign",
                  "--output", path + ".asc", path)

    def sign_rpms(self, paths):
        """rpmsign with this key (an RSA or EdDSA OpenPGP v4 signature header)."""
        if not paths:
            return
        subprocess.run(["rpmsign", "--addsign", "--define", "_gpg_name %s" % self.fingerprint,
                        "--define", "_gpg_path %s" % self.homedir,
                        # Debian's rpm names gpg2, which Debian no longer ships.
                        "--define", "__gpg %s" % shutil.which("gpg"),
                        "--define", "_gpg_sign_cmd_extra_args --batch --pinentry-mode loopback --passphrase ''"]
                       + list(paths), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop_agent(homedir):
    subprocess.run(["gpgconf", "--homedir", homedir, "--kill", "all"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def scan_packages(directory, path="."):
    """Index stanzas of the .debs below directory/path (apt-ftparchive;
    Filename relative to directory)."""
    return subprocess.run(["apt-ftparchive", "packages", path], cwd=directory, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout


def stanzas_by_filename(index):
    """{Filename: stanza} of an index as scan_packages returns it."""
    result = {}
    for stanza in index.decode("utf-8").split("\n\n"):
        if stanza.strip():
            filename = next(line.split(": ", 1)[1] for line in stanza.splitlines() if line.startswith("Filename: "))
            result[filename] = stanza.strip("\n") + "\n"
    return result


def write_index(directory, data):
    """Packages and Packages.gz of directory (empty data: an empty index)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "Packages"), "wb") as handle:
        handle.write(data)
    with open(os.path.join(directory, "Packages.gz"), "wb") as raw:
        with gzip.GzipFile(filename="Packages", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as handle:
            handle.write(data)


def write_packages(directory):
    """Packages (apt-ftparchive, Filename: ./<deb>) and Packages.gz."""
    write_index(directory, scan_packages(directory))


def _hash_lines(directory, names, hashes):
    files = []
    for name in names:
        with open(os.path.join(directory, name), "rb") as handle:
            files.append((name, handle.read()))
    lines = []
    for field, algorithm in hashes:
        lines.append("%s:" % field)
        for name, data in files:
            lines.append(" %s %16d %s" % (hashlib.new(algorithm, data).hexdigest(), len(data), name))
    return lines


def write_release(directory, origin, label, architecture, now=None):
    date = email.utils.formatdate(now if now is not None else time.time(), usegmt=True)
    lines = ["Origin: %s" % origin, "Label: %s" % label, "Architecture: %s" % architecture, "Date: %s" % date]
    lines += _hash_lines(directory, ("Packages", "Packages.gz"), HASHES)
    lines.append("Acquire-By-Hash: no")
    with open(os.path.join(directory, "Release"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def write_suite_release(directory, fields, index_names, hashes=HASHES, now=None):
    """dists/<suite>/Release: fields ((name, value) pairs; a ("Date", None)
    pair gets the date, in UTC as Ubuntu writes it) and the hashes of
    index_names (paths relative to directory)."""
    date = email.utils.formatdate(now if now is not None else time.time(), usegmt=True).replace("GMT", "UTC")
    lines = ["%s: %s" % (name, date if name == "Date" and value is None else value) for name, value in fields]
    lines += _hash_lines(directory, index_names, hashes)
    with open(os.path.join(directory, "Release"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def pool_path(component, source, filename):
    """pool/<component>/<l|libX>/<source>/<file>, the Debian archive's pool layout."""
    prefix = source[:4] if source.startswith("lib") else source[0]
    return "/".join(("pool", component, prefix, source, filename))


def link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
