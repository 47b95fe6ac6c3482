# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test harness only: run tasks in the Molecule containers by entering their namespaces."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpufleet_nsenter
short_description: Run tasks in a local Docker container by entering its namespaces (test harness only)
description:
  - >-
    The test harness's connection to the Molecule containers. Not part of the collection, never used
    against real hosts (they are reached over SSH).
  - >-
    C(docker exec) costs about 80 ms of CPU per command on the CI machine (the CLI, dockerd, containerd and
    runc); entering the container's namespaces with C(nsenter) costs about 3 ms. A make test runs some ten
    thousand module executions on two cores, so the difference is minutes of the CI budget.
  - >-
    What C(docker exec) gives a command is kept, read from C(docker inspect) once per container start (cached
    by the init process's pid and start time, so a reboot, which restarts the container, is seen):
    the mount, UTS, IPC, network, PID and cgroup namespaces and the container's root; the container's cgroups
    (its device rules, memory and pids limits apply); its capability bounding set (read from its init
    process); its environment (C(Config.Env), C(HOSTNAME), C(HOME)); and its own session, so that killing the
    controller's process group (an interrupted run in the fault suite) leaves the command running in the
    container as C(docker exec) and an SSH session without a terminal do.
  - >-
    Not kept, said here so that no test relies on it: the container's seccomp filter and AppArmor profile
    are not applied, and only root (the containers' only user) is supported.
options:
  remote_addr:
    description: The container's name.
    type: str
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_docker_host
"""

import json
import os
import signal
import subprocess
import tempfile
import threading
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

CACHE_DIR = os.path.join(tempfile.gettempdir(), "gpufleet-nsenter-%d" % os.getuid())
CGROUP_ROOT = "/sys/fs/cgroup"


def _stopped(pid):
    """True when the process is stopped by a signal (state T in /proc/<pid>/stat); None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return None


def continue_when_stopped(proc, interval=0.2):
    """Send SIGCONT to ``proc`` whenever it stops, until it ends.

    util-linux's nsenter passes job control on: when its child stops, it stops itself (SIGSTOP) and waits
    for a SIGCONT, which here no shell would ever send. A reboot stops its child: systemd's shutdown stops
    every process of the container for a moment before it kills them all, so a command still running
    then (the reboot command's own shell) left nsenter stopped, its dead child unreaped and the
    container's init unable to end: in one fault suite run, case 19 waited 23 minutes for a reboot until
    nsenter was continued by hand. Once continued, nsenter continues its child and reaps it.
    """
    def watch():
        while proc.poll() is None:
            state = _stopped(proc.pid)
            if state is None:
                return
            if state:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except OSError:
                    return
            time.sleep(interval)

    thread = threading.Thread(target=watch, name="nsenter-continue-%d" % proc.pid, daemon=True)
    thread.start()
    return thread


def _start_time(pid):
    """Field 22 of /proc/<pid>/stat, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _cgroup_dirs(pid, container_id):
    """The host directories of the cgroups the container's init runs in, cut to the container's own
    (systemd in the container makes init.scope below it; docker exec joins the container's)."""
    dirs = []
    with open("/proc/%d/cgroup" % pid) as handle:
        for line in handle:
            _num, controllers, path = line.rstrip("\n").split(":", 2)
            at = path.find(container_id)
            if at < 0:
                continue
            path = path[:at + len(container_id)]
            if controllers == "":
                mounts = ["unified", ""]
            else:
                mounts = [controllers.replace("name=", ""), controllers]
            for mount in mounts:
                candidate = os.path.join(CGROUP_ROOT, mount, path.lstrip("/")) if mount else CGROUP_ROOT + path
                if os.path.isfile(os.path.join(candidate, "cgroup.procs")):
                    dirs.append(candidate)
                    break
    return dirs


class Connection(ConnectionBase):
    """Enter a local container's namespaces with nsenter."""

    transport = "gpufleet_nsenter"
    has_pipelining = True
    # Root is the containers' only user; there is no become to a different one.
    become_methods = frozenset()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._target = None

    # --- the container -------------------------------------------------------

    def _cache_path(self):
        return os.path.join(CACHE_DIR, "%s.json" % self.get_option("remote_addr").replace("/", "_"))

    def _inspect(self, name):
        try:
            proc = subprocess.run(["docker", "inspect", "--type", "container", name], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AnsibleConnectionFailure("docker inspect %s: %s" % (name, exc))
        if proc.returncode != 0:
            raise AnsibleConnectionFailure("docker inspect %s failed: %s" % (name, to_text(proc.stderr).strip()))
        info = json.loads(proc.stdout)[0]
        state = info.get("State") or {}
        pid = int(state.get("Pid") or 0)
        if not state.get("Running") or state.get("Restarting") or pid <= 0:
            raise AnsibleConnectionFailure("container %s is not running (status %s)" % (name, state.get("Status")))
        config = info.get("Config") or {}
        if (config.get("User") or "root") not in ("root", "0", "0:0") or config.get("WorkingDir") not in (None, "", "/"):
            # Commands start as root in the init process's directory (/), as docker exec starts them here.
            raise AnsibleError("gpufleet_nsenter runs commands as root in /; container %s has user %r, directory %r"
                               % (name, config.get("User"), config.get("WorkingDir")))
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.setdefault("HOSTNAME", config.get("Hostname") or name)
        env.setdefault("HOME", "/root")
        with open("/proc/%d/status" % pid) as handle:
            bounding = [line.split()[1] for line in handle if line.startswith("CapBnd:")][0]
        mask = int(bounding, 16)
        caps = ["+cap_%d" % bit for bit in range(64) if mask >> bit & 1]
        return {
            "pid": pid,
            "start": _start_time(pid),
            "id": info["Id"],
            "cgroups": _cgroup_dirs(pid, info["Id"]),
            "env": ["%s=%s" % item for item in sorted(env.items())],
            "bounding": ",".join(["-all"] + caps),
        }

    def _container(self):
        if self._target is not None and _start_time(self._target["pid"]) == self._target["start"]:
            return self._target
        path = self._cache_path()
        try:
            with open(path) as handle:
                cached = json.load(handle)
            if _start_time(cached["pid"]) == cached["start"]:
                self._target = cached
                return cached
        except (OSError, ValueError, KeyError, TypeError):
            pass
        target = self._inspect(self.get_option("remote_addr"))
        os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=CACHE_DIR)
        with os.fdopen(fd, "w") as handle:
            json.dump(target, handle)
        os.replace(tmp, path)
        self._target = target
        return target

    def _argv(self, target, command):
        return [
            "nsenter", "--target", str(target["pid"]),
            "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--root", "--wd",
            "--",
            # Inside the container from here on: its setpriv, setsid and env.
            "setpriv", "--bounding-set", target["bounding"], "--",
            "setsid", "env", "-i",
        ] + target["env"] + [self._play_context.executable or "/bin/sh", "-c", command]

    def _popen(self, command, stdin, stdout):
        target = self._container()
        cgroups = target["cgroups"]

        def join_cgroups():
            # In the forked child before exec: nsenter and what it starts belong to the container's cgroups.
            me = str(os.getpid())
            for directory in cgroups:
                with open(os.path.join(directory, "cgroup.procs"), "w") as handle:
                    handle.write(me)

        argv = self._argv(target, command)
        display.vvv("EXEC %s" % " ".join(argv[-3:]), host=self.get_option("remote_addr"))
        try:
            proc = subprocess.Popen([to_bytes(a, errors="surrogate_or_strict") for a in argv], stdin=stdin,
                                    stdout=stdout, stderr=subprocess.PIPE, preexec_fn=join_cgroups)
            continue_when_stopped(proc)
            return proc
        except (OSError, subprocess.SubprocessError) as exc:
            # The container stopped between the check and the fork (its cgroup went away): a reboot.
            self._target = None
            raise AnsibleConnectionFailure("entering %s failed: %s" % (self.get_option("remote_addr"), exc))

    @staticmethod
    def _entry_failed(returncode, stderr):
        """nsenter's or setpriv's own failure (the container went away), not the command's."""
        first = to_text(stderr, errors="surrogate_or_strict").lstrip().split("\n", 1)[0]
        return returncode != 0 and first.startswith(("nsenter: ", "setpriv: ", "setsid: "))

    # --- the connection interface -------------------------------------------

    def _connect(self):
        if not self._connected:
            self._container()
            self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        proc = self._popen(cmd, subprocess.PIPE, subprocess.PIPE)
        stdout, stderr = proc.communicate(in_data)
        if self._entry_failed(proc.returncode, stderr):
            self._target = None
            raise AnsibleConnectionFailure("entering %s failed: %s" % (self.get_option("remote_addr"),
                                                                       to_text(stderr).strip()))
        return proc.returncode, stdout, stderr

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        quoted = "'%s'" % out_path.replace("'", "'\\''")
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as source:
            proc = self._popen("cat > %s" % quoted, source, subprocess.PIPE)
            _out, stderr = proc.communicate()
        if proc.returncode != 0:
            raise AnsibleError("failed to transfer %s to %s: %s" % (in_path, out_path, to_text(stderr).strip()))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        quoted = "'%s'" % in_path.replace("'", "'\\''")
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as target:
            proc = self._popen("cat %s" % quoted, subprocess.DEVNULL, target)
            _out, stderr = proc.communicate()
        if proc.returncode != 0:
            raise AnsibleError("failed to fetch %s to %s: %s" % (in_path, out_path, to_text(stderr).strip()))

    def reset(self):
        self._target = None
        try:
            os.unlink(self._cache_path())
        except OSError:
            pass
        self._connected = False

    def close(self):
        self._connected = False
