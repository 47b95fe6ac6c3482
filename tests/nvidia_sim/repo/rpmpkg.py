# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package description model of the simulated RPM repositories and its .rpm
builder (rpmbuild), the RHEL-family twin of debpkg.

An ``RpmPackage`` says what a spec's preamble says plus the files it ships
(the same ``Payload``/``Text``/``Symlink`` entries as a .deb). Maintainer
scripts are written once, as dpkg runs them (maint_scripts.py); the spec's
scriptlets call them with dpkg's arguments: %post as "configure", %preun as
"remove" (erase) or "upgrade", %postun likewise. Note that rpm runs the old
package's %preun after the new package's %post on an upgrade (dpkg runs
prerm first); the DKMS scripts only touch what belongs to their own version,
so the order does not matter to them.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional, Tuple

import debpkg

PACKAGER = debpkg.MAINTAINER
LICENSE = "Test double of NVIDIA's package (gpufleet.nvidia)"


@dataclass
class RpmPackage:
    name: str
    version: str
    release: str
    summary: str
    epoch: Optional[int] = None
    arch: str = "x86_64"
    requires: Tuple[str, ...] = ()
    provides: Tuple[str, ...] = ()
    conflicts: Tuple[str, ...] = ()
    obsoletes: Tuple[str, ...] = ()
    files: Tuple[object, ...] = ()
    postinst: Optional[str] = None
    prerm: Optional[str] = None
    postrm: Optional[str] = None
    # Repository groups carrying the package: keys of catalog_el.RPM_REPOS.
    repos: Tuple[str, ...] = ()

    @property
    def evr(self):
        return "%s%s-%s" % ("%d:" % self.epoch if self.epoch is not None else "", self.version, self.release)

    @property
    def nevra(self):
        """As modules.yaml artifacts name it: name-epoch:version-release.arch (epoch 0 when none)."""
        return "%s-%d:%s-%s.%s" % (self.name, self.epoch or 0, self.version, self.release, self.arch)

    @property
    def filename(self):
        return "%s-%s-%s.%s.rpm" % (self.name, self.version, self.release, self.arch)

    def payload_sources(self):
        return [f for f in self.files if isinstance(f, (debpkg.Payload, debpkg.PayloadTree))]


def _escape(text):
    # Scriptlets and descriptions are macro-expanded by rpmbuild.
    return text.replace("%", "%%")


def _scriptlet(section, script, argument):
    """A dpkg-style script run by a scriptlet with dpkg's first argument."""
    body = script.split("\n", 1)[1] if script.startswith("#!") else script
    return "%%%s -p /bin/sh\n%s\n%s\n" % (section, argument, _escape(body))


def spec_text(package, tree, files):
    """The spec of package; tree holds its files, ``files`` lists them (resolved)."""
    lines = [
        "Name: %s" % package.name,
        "Version: %s" % package.version,
        "Release: %s" % package.release,
    ]
    if package.epoch is not None:
        lines.append("Epoch: %d" % package.epoch)
    lines += [
        "Summary: %s" % _escape(package.summary.split("\n", 1)[0]),
        "License: %s" % LICENSE,
        "Packager: %s" % PACKAGER,
        "Vendor: gpufleet.nvidia nvidia-sim",
        "BuildArch: %s" % package.arch,
        # Only the dependencies the catalog states: the payload is the
        # simulator's and the host's userland is Debian's.
        "AutoReqProv: no",
    ]
    for tag, values in (("Requires", package.requires), ("Provides", package.provides),
                        ("Conflicts", package.conflicts), ("Obsoletes", package.obsoletes)):
        lines += ["%s: %s" % (tag, value) for value in values]
    description = package.summary.split("\n", 1)
    long_text = (description[1].strip() + "\n\n" if len(description) > 1 and description[1].strip() else "")
    lines += ["", "%description", _escape(long_text + debpkg.TEST_DOUBLE_NOTE), "",
              "%install", "cp -a %s/. %%{buildroot}/" % tree, "", "%files"]
    for item in files:
        dest = item.dest
        if not isinstance(item, debpkg.Symlink) and (dest.startswith("/etc/") or getattr(item, "conffile", False)):
            lines.append('%%config(noreplace) "%s"' % dest)
        else:
            lines.append('"%s"' % dest)
    lines.append("")
    # %post: dpkg's "configure"; %preun/%postun: "remove" when the package
    # goes ($1 is 0), "upgrade" when another version replaces it.
    if package.postinst:
        lines.append(_scriptlet("post", package.postinst, "set -- configure"))
    which = 'if [ "$1" -eq 0 ]; then set -- remove; else set -- upgrade; fi'
    if package.prerm:
        lines.append(_scriptlet("preun", package.prerm, which))
    if package.postrm:
        lines.append(_scriptlet("postun", package.postrm, which))
    return "\n".join(lines) + "\n"


RPMBUILD_DEFINES = {
    "_build_name_fmt": "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
    # No stripping, byte compiling, build-id links or debuginfo: the payload
    # is scripts and text. No search for unpackaged files either: the tree is
    # written from the same list as %files.
    "__os_install_post": "%{nil}",
    "__check_files": "%{nil}",
    "_build_id_links": "none",
    "debug_package": "%{nil}",
    "_binary_payload": "w6.gzdio",
    "use_source_date_epoch_as_buildtime": "1",
    "clamp_mtime_to_source_date_epoch": "1",
}


def write_spec(package, payload_dir, workdir):
    """The package's file tree and spec below workdir; return the spec's path."""
    base = os.path.join(workdir, "%s-%s.%s" % (package.name, package.evr.replace(":", "_"), package.arch))
    tree = os.path.join(base, "tree")
    os.makedirs(tree)
    debpkg._write_tree(package, payload_dir, tree)  # pylint: disable=protected-access
    spec = os.path.join(base, package.name + ".spec")
    with open(spec, "w") as handle:
        handle.write(spec_text(package, tree, debpkg.resolved_files(package, payload_dir)))
    return spec


def build_rpms(specs, workdir, outdir, env=None):
    """Build the specs with one rpmbuild run (its start-up, paid once, is
    most of a small package's build) into outdir."""
    argv = ["rpmbuild", "-bb", "--quiet", "--define", "_topdir %s" % workdir, "--define", "_rpmdir %s" % outdir]
    for name, value in RPMBUILD_DEFINES.items():
        argv += ["--define", "%s %s" % (name, value)]
    subprocess.run(argv + list(specs), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    shutil.rmtree(os.path.join(workdir, "BUILDROOT"), ignore_errors=True)
