"""Checks on a converged host shared by the scenarios' testinfra tests.

Imported by molecule/<scenario>/tests/test_*.py, which put this directory on
sys.path: testinfra runs each scenario's tests directory on its own, so there
is no package or conftest above them to share code through.
"""
import re
import subprocess
import tempfile


def listeners(host, program):
    """Local addresses of the TCP listeners whose process runs ``program``.

    Host networking: the other container's listeners show in the table too,
    but only this container's processes carry a pid (-p). The process is told
    by its command line, which names the program however it was started.
    """
    table = host.check_output("ss -H -ltnp")
    found = set()
    for line in table.splitlines():
        fields = line.split()
        for pid in re.findall(r"pid=(\d+)", line):
            cmdline = host.file("/proc/%s/cmdline" % pid).content_string.split("\0")
            if any(arg == program or arg.endswith("/" + program) for arg in cmdline):
                found.add(fields[3])
    return found


def keyring_primary_fingerprints(host, path):
    """Primary key fingerprints of a keyring on the host, read by gpg on the controller.

    The hosts need no gpg (the roles read fingerprints from the key packets),
    and the oracle should not be the roles' own parser.
    """
    with tempfile.NamedTemporaryFile(suffix=".asc") as copy:
        copy.write(host.file(path).content)
        copy.flush()
        listing = subprocess.run(["gpg", "--batch", "--show-keys", "--with-colons", copy.name],
                                 capture_output=True, text=True, check=True).stdout
    return re.findall(r"^pub:.*\n(?:.*\n)*?fpr:+([0-9A-F]{40}):", listing, re.M)
