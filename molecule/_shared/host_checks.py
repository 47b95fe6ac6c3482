"""Checks on a converged host shared by the scenarios' testinfra tests.

Imported by molecule/<scenario>/tests/test_*.py, which put this directory on
sys.path: testinfra runs each scenario's tests directory on its own, so there
is no package or conftest above them to share code through.
"""
import re


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
