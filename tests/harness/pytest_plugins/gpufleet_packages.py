"""Package questions the scenario tests ask of any test host, answered by the
host's own package database: dpkg and apt-mark on the Debian and
Ubuntu-shaped hosts, rpm and dnf versionlock on the Rocky-shaped one.

Importable from the scenario tests (.config/molecule/config.yml puts this
directory on PYTHONPATH). Versions come back in each packager's own full form:
"[epoch:]upstream-revision" (dpkg) or "[epoch:]version-release" (rpm).
"""
import fnmatch
import re

# dnf versionlock writes one "name-epoch:version-release.*" line per package.
_LOCK_LINE = re.compile(r"^(?P<name>.+)-\d+:[^-]+-[^-]+$")


def is_el(host):
    """True on the Rocky-shaped host (and any EL host): its packages are rpm's."""
    return host.file("/etc/redhat-release").exists


def installed(host, *patterns):
    """{name: full version} of the installed packages whose names match a glob."""
    if is_el(host):
        out = host.check_output("rpm -qa --qf '%{NAME} %|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n'")
        rows = [line.split(" ", 1) for line in out.splitlines() if line]
    else:
        out = host.run("dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n'").stdout
        # "ii " installed, "hi " installed and held (the first letter is the wanted state).
        rows = [line.split()[1:3] for line in out.splitlines() if line[1:3] == "i "]
    return {name: version for name, version in rows
            if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)}


def version(host, name):
    """The installed version of name, '' when it is not installed."""
    return installed(host, name).get(name, "")


def upstream(full_version):
    """"1:4.2.3-1" -> "4.2.3": no epoch, no revision or release."""
    return full_version.split(":", 1)[-1].rsplit("-", 1)[0]


def held(host):
    """The names of the packages the package manager keeps where they are:
    apt-mark holds, or dnf versionlock entries."""
    if is_el(host):
        out = host.run("dnf -q versionlock list").stdout
        return {m.group("name") for m in map(_LOCK_LINE.match, out.split()) if m}
    return set(host.check_output("apt-mark showhold").split())
