"""Helpers of the fault suite: the scenario's containers, ansible-playbook runs
that can be interrupted at a task, and what a fault must not lose.

The cases (test_faults.py) run ansible-playbook themselves, as an operator
would: with the project's ansible.cfg and Molecule's inventory (its
directory, so that the scenario's group and host variables apply), in an
environment without Molecule's ANSIBLE_* settings. Every run's output is kept
in $MOLECULE_EPHEMERAL_DIRECTORY/faults/<name>.log and named in a failure.
"""
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

SCENARIO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT_DIR = os.path.dirname(os.path.dirname(SCENARIO_DIR))
PLAYBOOK_BIN = os.path.join(PROJECT_DIR, ".venv", "bin", "ansible-playbook")
INVENTORY = os.path.dirname(os.environ.get("MOLECULE_INVENTORY_FILE", "/nonexistent/x"))
WORK = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/gpufleet-faults"), "faults")
HOST_STATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_state.py")
# The HGX H100 (NVSwitch, Fabric Manager) and the L40S host.
HGX, L40S = "faults-debian12", "faults-debian13"
HOSTS = (HGX, L40S)
CONVERGE = os.path.join(SCENARIO_DIR, "converge.yml")
ROLE = os.path.join(SCENARIO_DIR, "role.yml")
# Seconds an interrupted run (SIGINT) has to end before it is killed (playbook()).
INTERRUPT_GRACE = 120

_RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)"
                    r"\s+rescued=(\d+)\s+ignored=(\d+)")
_BANNER = re.compile(r"^(TASK|RUNNING HANDLER) \[(.*)\] \*+$")
_FAILED = re.compile(r"^(?:fatal|failed): \[([^\]]+)\](?: \(item=.*?\))?: FAILED! => (\{.*\})\s*$")


def sh(host, command, check=True, timeout=300, stdin=None):
    """Run a shell command in a container; with check, it must exit 0."""
    proc = subprocess.run(["docker", "exec", "-i", host, "sh", "-c", command], input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False)
    if check:
        assert proc.returncode == 0, "%s: %s failed (%d): %s%s" % (
            host, command, proc.returncode, proc.stdout, proc.stderr)
    return proc


def out(host, command):
    return sh(host, command).stdout


def put(host, path, content, mode="0644"):
    sh(host, "mkdir -p \"$(dirname %s)\" && cat > %s && chmod %s %s" % (path, path, mode, path), stdin=content)


def snapshot(host):
    """Packages, holds, configuration checksums, GPU services and the loaded driver (host_state.py)."""
    with open(HOST_STATE) as handle:
        return json.loads(sh(host, "python3 - snapshot", stdin=handle.read()).stdout)


def problems(host):
    """What makes the host inconsistent: dpkg --audit, apt-get check, files that do not parse,
    half-written files, duplicate entries (host_state.py). Empty when consistent."""
    with open(HOST_STATE) as handle:
        return json.loads(sh(host, "python3 - problems", stdin=handle.read()).stdout)


def active(host, unit):
    return sh(host, "systemctl is-active %s" % unit, check=False).stdout.strip()


def main_pid(host, unit):
    return int(out(host, "systemctl show -p MainPID --value %s" % unit).strip() or 0)


def wait_for(predicate, timeout, interval=1.0):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value or time.time() > deadline:
            return value
        time.sleep(interval)


class Run(object):
    """One ansible-playbook run: exit status, the output, the recap and the failed tasks."""

    def __init__(self, name, log, rc, text, elapsed, killed, timed_out):
        self.name, self.log, self.rc, self.text = name, log, rc, text
        self.elapsed, self.killed, self.timed_out = elapsed, killed, timed_out
        self.injected = False
        self.recap = {}
        self.failures = []
        task = None
        for line in text.splitlines():
            banner = _BANNER.match(line)
            if banner:
                task = banner.group(2)
                continue
            recap = _RECAP.match(line)
            if recap:
                keys = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
                self.recap[recap.group(1)] = dict(zip(keys, (int(v) for v in recap.groups()[1:])))
                continue
            failed = _FAILED.match(line)
            if failed:
                try:
                    result = json.loads(failed.group(2))
                except ValueError:
                    result = {"msg": failed.group(2)}
                if "...ignoring" not in text[text.find(line) + len(line):][:20]:
                    self.failures.append((failed.group(1), task, result))

    def failed(self, host):
        """(task, msg) of the host's failed tasks, rescued ones included."""
        return [(task, result.get("msg", "")) for name, task, result in self.failures if name == host]

    def changed(self, host):
        return self.recap.get(host, {}).get("changed")

    def tasks(self):
        return [m.group(2) for m in (_BANNER.match(line) for line in self.text.splitlines()) if m]

    def ran_for(self, host, task_pattern):
        """Whether a task matching task_pattern reported a result (not skipping) for host."""
        task = None
        for line in self.text.splitlines():
            banner = _BANNER.match(line)
            if banner:
                task = banner.group(2)
            elif task and re.search(task_pattern, task) and re.match(r"^(ok|changed|fatal|failed): \[%s\]" % re.escape(host),
                                                                     line):
                return True
        return False

    def ok(self, hosts=HOSTS):
        return self.rc == 0 and all(self.recap.get(h, {}).get("failed") == 0 for h in hosts)

    def __str__(self):
        tail = self.text[-6000:]
        # The log is pruned with the scenario's ephemeral directory: what failed
        # and why must be in the assertion itself, or a CI failure cannot be read.
        failed = "".join("\n  [%s] %s: %s" % (h, t, str(r.get("msg", ""))[:2000]) for h, t, r in self.failures)
        return "%s: rc %s after %.0f s%s%s (log %s)\nfailed:%s\n...%s" % (
            self.name, self.rc, self.elapsed, ", interrupted" if self.killed else "",
            ", TIMED OUT" if self.timed_out else "", self.log, failed or " none", tail)

    __repr__ = __str__


def _overlay(name, host_vars):
    """An inventory file that adds per-host variables to Molecule's inventory."""
    path = os.path.join(WORK, name + ".hosts.json")
    with open(path, "w") as handle:
        json.dump({"gpu_nodes": {"hosts": host_vars}}, handle, indent=1)
    return path


def environment():
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_CONFIG=os.path.join(PROJECT_DIR, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               # One line a result, whatever its message holds (a multi-line
               # fail_msg is otherwise indented over several lines, which
               # Run cannot read as a failure).
               ANSIBLE_CALLBACK_FORMAT_PRETTY="false",
               ANSIBLE_DISPLAY_SKIPPED_HOSTS="1",
               PATH=os.path.dirname(PLAYBOOK_BIN) + os.pathsep + env.get("PATH", ""))
    return env


def playbook(name, path, extra=None, host_vars=None, limit=None, kill=None, timeout=1500, at=None):
    """Run ansible-playbook and return its Run.

    kill: (task pattern, signal, delay): when a task whose banner matches
    starts, wait delay seconds, then send the signal to the whole process
    group, as a Ctrl-C (SIGINT) or a killed job (SIGKILL) would. timeout
    bounds the run: a run still going after it is killed and marked timed
    out. at: (task pattern, function): when the first task whose banner
    matches starts, stop the run (SIGSTOP), call the function (a fault
    injected into a host), then let the run go on (SIGCONT).
    """
    os.makedirs(WORK, exist_ok=True)
    argv = [PLAYBOOK_BIN, "-i", INVENTORY]
    if host_vars:
        argv += ["-i", _overlay(name, host_vars)]
    argv.append(path)
    if limit:
        argv += ["--limit", limit]
    if extra:
        argv += ["-e", json.dumps(extra)]
    log = os.path.join(WORK, name + ".log")
    started = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            env=environment(), cwd=PROJECT_DIR, start_new_session=True)
    state = {"killed": False, "timed_out": False, "hung_after_interrupt": False, "injected": False}

    def watchdog():
        if proc.poll() is None:
            state["timed_out"] = True
            os.killpg(proc.pid, signal.SIGKILL)

    # An interrupted ansible-playbook (SIGINT, Ctrl-C) that has not ended
    # INTERRUPT_GRACE seconds later is killed, as an operator would kill it:
    # in one CI run test_1 took 1643 s against about 170 s alone, and the
    # SIGINT run is the only one of it that can reach the 1500 s watchdog
    # without failing the case (its log was pruned with the scenario, so
    # why it hung is not known). What the cases check is the hosts
    # afterwards, and the log says when this happened.
    grace = None

    def interrupted_too_long(handle):
        if proc.poll() is None:
            state["hung_after_interrupt"] = True
            handle.write("#### faults: the run did not end within %d s of the interrupt; sending SIGKILL\n"
                         % INTERRUPT_GRACE)
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, watchdog)
    timer.start()
    lines = []
    try:
        with open(log, "w") as handle:
            for line in proc.stdout:
                handle.write(line)
                handle.flush()
                lines.append(line)
                if at and not state["injected"]:
                    banner = _BANNER.match(line.rstrip("\n"))
                    if banner and re.search(at[0], banner.group(2)):
                        # The run is frozen while the fault goes in: the
                        # task after the banner must see it, however long
                        # the injection takes.
                        state["injected"] = True
                        os.killpg(proc.pid, signal.SIGSTOP)
                        try:
                            at[1]()
                        finally:
                            os.killpg(proc.pid, signal.SIGCONT)
                        handle.write("#### faults: fault injected at this task\n")
                if kill and not state["killed"]:
                    banner = _BANNER.match(line.rstrip("\n"))
                    if banner and re.search(kill[0], banner.group(2)):
                        time.sleep(kill[2])
                        state["killed"] = True
                        handle.write("#### faults: sending %s to the run\n" % signal.Signals(kill[1]).name)
                        os.killpg(proc.pid, kill[1])
                        if kill[1] != signal.SIGKILL:
                            grace = threading.Timer(INTERRUPT_GRACE, interrupted_too_long, (handle,))
                            grace.start()
            rc = proc.wait()
            if state["killed"] and kill[1] != signal.SIGKILL:
                # Whatever the interrupted run left running in the group (workers, docker exec) goes too.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        timer.cancel()
        if grace is not None:
            grace.cancel()
    run = Run(name, log, rc, "".join(lines), time.time() - started, state["killed"], state["timed_out"])
    run.injected = state["injected"]
    return run


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass


class Mirror(object):
    """A mirror of the simulated CUDA repository, served over HTTP on loopback by
    the test itself (the hosts share its network), laid out as NVIDIA's:
    <root>/compute/cuda/repos/<distro>/x86_64 is a link to a directory of the
    simulated repository's build. publish() swaps the link in one rename, as a
    mirror's synchronisation replaces what it serves; the server answers
    If-Modified-Since from the files' times, as a web server does."""

    def __init__(self, name, port):
        self.root = os.path.join(WORK, name)
        self.port = port
        self.server = None
        self.thread = None

    def __enter__(self):
        os.makedirs(self.root, exist_ok=True)
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", self.port), functools.partial(_QuietHandler, directory=self.root))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
        return False

    def url(self, distro):
        return "http://127.0.0.1:%d/compute/cuda/repos/%s/x86_64" % (self.port, distro)

    def put(self, path, content):
        """Serve content at path (relative to the mirror's root); return its URL."""
        target = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            handle.write(content)
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def publish(self, distro, directory):
        """Serve directory as the distro's repository; return the URL a role is given."""
        path = os.path.join("compute", "cuda", "repos", distro, "x86_64")
        link = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link + ".new"):
            os.unlink(link + ".new")
        os.symlink(directory, link + ".new")
        os.replace(link + ".new", link)
        return "http://127.0.0.1:%d/%s" % (self.port, path)


class SigningKey(object):
    """An ed25519 signing key made for one case, in a GNUPGHOME of its own
    (under /tmp: gpg-agent's socket path must stay short), as a repository
    that rotates its key signs with a new one."""

    def __init__(self, name):
        self.homedir = tempfile.mkdtemp(prefix="gpufleet-faults-gpg-")
        self._gpg("--passphrase", "", "--quick-gen-key", "%s <faults@gpufleet.invalid>" % name, "ed25519", "sign", "2d")
        listing = self._gpg("--with-colons", "--list-keys")
        self.fingerprint = re.search(r"^fpr:+([0-9A-F]{40}):", listing, re.M).group(1)

    def _gpg(self, *args):
        return subprocess.run(["gpg", "--homedir", self.homedir, "--batch", "--yes", "--quiet",
                               "--pinentry-mode", "loopback"] + list(args),
                              check=True, stdout=subprocess.PIPE, universal_newlines=True, timeout=120).stdout

    def fingerprints(self, armored):
        """The primary keys' fingerprints of an armored keyring (as read from a host), in order."""
        listing = subprocess.run(["gpg", "--homedir", self.homedir, "--batch", "--with-colons", "--show-keys"],
                                 input=armored, stdout=subprocess.PIPE, universal_newlines=True, check=True,
                                 timeout=60).stdout
        found, primary = [], False
        for line in listing.splitlines():
            fields = line.split(":")
            if fields[0] in ("pub", "sub"):
                primary = fields[0] == "pub"
            elif fields[0] == "fpr" and primary:
                found.append(fields[9])
                primary = False
        return found

    def armored(self):
        return self._gpg("--armor", "--export", self.fingerprint)

    def sign_release(self, directory):
        """InRelease (clear-signed) and Release.gpg (detached) for directory/Release."""
        release = os.path.join(directory, "Release")
        self._gpg("--digest-algo", "SHA512", "--local-user", self.fingerprint, "--clearsign",
                  "--output", os.path.join(directory, "InRelease"), release)
        self._gpg("--digest-algo", "SHA512", "--local-user", self.fingerprint, "--armor", "--detach-sign",
                  "--output", os.path.join(directory, "Release.gpg"), release)

    def close(self):
        subprocess.run(["gpgconf", "--homedir", self.homedir, "--kill", "all"], check=False, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.homedir, ignore_errors=True)


def resigned(source, target, key, date=None, valid_until=None):
    """A copy of the flat apt repository source at target whose Release is
    signed by key, optionally with another Date and a Valid-Until
    (datetime.datetime in UTC); the packages and indexes are links to the
    source's files, so the copy costs nothing."""
    if os.path.isdir(target):
        shutil.rmtree(target)
    os.makedirs(target)
    for name in os.listdir(source):
        if name not in ("Release", "InRelease", "Release.gpg"):
            os.symlink(os.path.join(source, name), os.path.join(target, name))
    with open(os.path.join(source, "Release")) as handle:
        fields = handle.read()
    stamp = "%a, %d %b %Y %H:%M:%S UTC"
    if date is not None:
        fields = re.sub(r"(?m)^Date: .*$", "Date: " + date.strftime(stamp), fields)
    if valid_until is not None:
        fields = re.sub(r"(?m)^(Date: .*)$", lambda m: m.group(1) + "\nValid-Until: " + valid_until.strftime(stamp),
                        fields, count=1)
    with open(os.path.join(target, "Release"), "w") as handle:
        handle.write(fields)
    key.sign_release(target)
    return target
