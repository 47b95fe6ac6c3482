"""Fail fast when a TCP port the harness needs is already taken.

    python3 tests/harness/ports.py --for WHAT [--own NAME-PREFIX ...] [--own-pidfile FILE ...] PORT ...

Every simulated node shares the host's network (host networking: systemd runs
in the containers without --privileged), so a host engine or exporter of one
scenario, of the demo fleet or of anything else on the machine can answer on
the port another one expects. Found late, that is an assertion failing minutes
into a scenario against the wrong daemon; found here, it is one line naming
the port and what holds it.

A listener counts as ours (not a conflict) when its process runs in a
container whose name starts with an --own prefix (the scenario's own
containers, left by an interrupted run, are destroyed by Molecule first; the
demo reconverges its own nodes), or when its PID is the one in an
--own-pidfile (the simulated repository server). Exit 0: all free or ours;
exit 1: conflicts, one line each on stderr.

Reads /proc only (no ss, no lsof); names containers through `docker ps` when
an engine answers.
"""

import argparse
import os
import re
import subprocess
import sys

LISTEN = "0A"
_CONTAINER_ID = re.compile(r"(?:docker[-/])([0-9a-f]{64})")


def listening_inodes():
    """{port: socket inode} of every TCP socket in LISTEN state (IPv4 and IPv6)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as rows:
                next(rows)
                for row in rows:
                    cells = row.split()
                    if cells[3] != LISTEN:
                        continue
                    port = int(cells[1].rsplit(":", 1)[1], 16)
                    found.setdefault(port, cells[9])
        except FileNotFoundError:
            continue
    return found


def socket_owners(inodes):
    """{inode: pid} for the given socket inodes, by scanning /proc/<pid>/fd."""
    wanted = {"socket:[%s]" % inode: inode for inode in inodes}
    owners = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fd_dir = "/proc/%s/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("%s/%s" % (fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                owners.setdefault(wanted[target], int(pid))
    return owners


def command_line(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as raw:
            argv = [a.decode(errors="replace") for a in raw.read().split(b"\0") if a]
    except OSError:
        return "?"
    # The simulated daemons run as "python3 -S .../nvsim/launch.py nv-hostengine ...":
    # the tool's name says more than the interpreter's.
    if argv and os.path.basename(argv[0]).startswith("python"):
        scripts = [a for a in argv[1:] if not a.startswith("-")]
        if scripts:
            name = os.path.basename(scripts[0])
            if name == "launch.py" and len(scripts) > 1:
                name = scripts[1]
            return "%s (%s)" % (name, " ".join(argv)[:120])
    return " ".join(argv)[:120] or "?"


def container_of(pid, names):
    try:
        with open("/proc/%d/cgroup" % pid, encoding="ascii") as cgroup:
            match = _CONTAINER_ID.search(cgroup.read())
    except OSError:
        return None
    if not match:
        return None
    return names.get(match.group(1), match.group(1)[:12])


def container_names():
    try:
        out = subprocess.run(["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def own_pids(pidfiles):
    pids = set()
    for path in pidfiles:
        try:
            with open(path, encoding="ascii") as handle:
                pids.add(int(handle.read().strip()))
        except (OSError, ValueError):
            continue
    return pids


def conflicts(ports, own_prefixes=(), own_pidfiles=()):
    """[(port, pid or None, holder text)] for every port held by someone else."""
    listening = listening_inodes()
    taken = [p for p in ports if p in listening]
    if not taken:
        return []
    owners = socket_owners([listening[p] for p in taken])
    names = container_names()
    mine = own_pids(own_pidfiles)
    result = []
    for port in taken:
        pid = owners.get(listening[port])
        if pid is None:
            result.append((port, None, "a process this user cannot see (another namespace or user)"))
            continue
        if pid in mine:
            continue
        container = container_of(pid, names)
        if container and any(container.startswith(prefix) for prefix in own_prefixes):
            continue
        where = " in container %s" % container if container else " on this machine"
        result.append((port, pid, "pid %d%s: %s" % (pid, where, command_line(pid))))
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--for", dest="what", required=True, help="who needs the ports (for the message)")
    parser.add_argument("--own", action="append", default=[], help="container name prefix that counts as ours")
    parser.add_argument("--own-pidfile", action="append", default=[], help="pidfile of a listener that is ours")
    parser.add_argument("ports", nargs="*", type=int)
    args = parser.parse_args(argv)
    found = conflicts(sorted(set(args.ports)), args.own, args.own_pidfile)
    for port, _pid, holder in found:
        print("port %d, needed by %s, is already taken by %s" % (port, args.what, holder), file=sys.stderr)
    if found:
        print("Stop what holds %s, or move it to other ports; nothing was started."
              % ("it" if len(found) == 1 else "them"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
