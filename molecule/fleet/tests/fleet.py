"""Helpers of the fleet scenario's tests: the containers, Slurm, and ansible-runner
with an AWX-shaped private data directory.

AWX runs a job as ``ansible-runner`` on a private data directory holding
``inventory/`` (the job's inventory), ``env/extravars`` (the survey's answers,
strings as a survey sends them), ``env/settings`` (timeouts) and ``project/``
(the project's checkout, whose ansible.cfg applies). The tests do the same
with the Molecule inventory, in a clean environment (no ANSIBLE_* variables
of Molecule's), and read the job's event stream from ``artifacts/``.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import time

import gpufleet_packages  # pylint: disable=import-error
import testinfra

SCENARIO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT_DIR = os.path.dirname(os.path.dirname(SCENARIO_DIR))
RUNNER = os.path.join(PROJECT_DIR, ".venv", "bin", "ansible-runner")
GPU_NODES = ("fleet-hgx", "fleet-l40s", "fleet-a100")
CONTROLLER = "fleet-slurmctl"


def sh(container, command, check=True):
    proc = subprocess.run(["docker", "exec", container, "sh", "-c", command], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    if check:
        assert proc.returncode == 0, "%s: %s failed (%d): %s%s" % (
            container, command, proc.returncode, proc.stdout, proc.stderr)
    return proc


def put(container, path, content, append=False):
    """Write (or append) content to a file in the container."""
    proc = subprocess.run(["docker", "exec", "-i", container, "sh", "-c", "cat %s %s" % (">>" if append else ">", path)],
                          input=content, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 0, (container, path)


def out(container, command):
    return sh(container, command).stdout


def restarts(container):
    """How often Docker restarted the container (a reboot inside it is one)."""
    return int(subprocess.check_output(["docker", "inspect", "-f", "{{.RestartCount}}", container],
                                       universal_newlines=True).strip())


def slurm_node(name):
    """scontrol's view of a node: State and Reason (without the [user@time] suffix), Gres."""
    text = out(CONTROLLER, "scontrol --oneliner show node %s" % name)
    state = re.search(r"\bState=(\S+)", text).group(1)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= [A-Za-z]+=|$)", text.strip())
    gres = re.search(r"\bGres=(\S+)", text).group(1)
    return {"state": state, "reason": reason.group(1) if reason else "", "gres": gres, "text": text}


def driver(container):
    return out(container, "nvidia-smi --query-gpu=driver_version --format=csv,noheader").split()[0]


def package_version(container, name):
    """The installed version of a package without its epoch ("" when not
    installed), read as every scenario's tests read it
    (tests/harness/pytest_plugins/gpufleet_packages.py): rpm's
    version-release on the Rocky-shaped node, dpkg's upstream-revision on the others."""
    return gpufleet_packages.version(testinfra.get_host("docker://" + container), name).split(":", 1)[-1]


def record(container):
    proc = sh(container, "cat /var/lib/gpufleet/drained", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


class Job(object):
    """One ansible-runner job: status, rc, events, stats."""

    def __init__(self, directory, ident):
        self.dir = os.path.join(directory, "artifacts", ident)
        with open(os.path.join(self.dir, "status")) as handle:
            self.status = handle.read().strip()
        with open(os.path.join(self.dir, "rc")) as handle:
            self.rc = int(handle.read().strip())
        with open(os.path.join(self.dir, "stdout")) as handle:
            self.stdout = handle.read()
        self.events = []
        for path in glob.glob(os.path.join(self.dir, "job_events", "*.json")):
            with open(path) as handle:
                event = json.load(handle)
            # ansible-runner turns output that no callback event claims into a "verbose" event
            # without event_data (its OutputEventFilter); CI's upgrade job had one where no local
            # run did. Every reader below may then rely on the key.
            event.setdefault("event_data", {})
            self.events.append(event)
        self.events.sort(key=lambda e: e["counter"])
        stats = [e for e in self.events if e["event"] == "playbook_on_stats"]
        self.stats = stats[-1]["event_data"] if stats else {}

    def failed(self):
        """Failed task events, rescued or not: (host, task, msg)."""
        return [(e["event_data"].get("host"), e["event_data"].get("task"),
                 (e["event_data"].get("res") or {}).get("msg", ""))
                for e in self.events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")]

    def changed(self, host):
        return self.stats.get("changed", {}).get(host, 0)

    def hosts(self, play=None):
        """Hosts with events, in one play when named (driver_upgrade's first play checks the inputs of
        every host on the controller, touching none)."""
        return set(e["event_data"].get("host") for e in self.events if e["event_data"].get("host")
                   and (play is None or e["event_data"].get("play") == play))

    def task_events(self, host, task_pattern, event="runner_on_ok"):
        """Counters of a host's events whose task name matches."""
        return [e["counter"] for e in self.events if e["event"] in (event, "runner_on_failed")
                and e["event_data"].get("host") == host and re.search(task_pattern, e["event_data"].get("task", ""))]

    def summary(self):
        return "status %s rc %d, failed events: %s\n%s" % (self.status, self.rc, self.failed(), self.stdout[-8000:])


def private_data_dir(base, inventory_dir, extravars):
    """An AWX-shaped private data directory for one job."""
    if os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(os.path.join(base, "env"))
    shutil.copytree(inventory_dir, os.path.join(base, "inventory"), symlinks=False)
    os.symlink(PROJECT_DIR, os.path.join(base, "project"))
    with open(os.path.join(base, "env", "extravars"), "w") as handle:
        json.dump(extravars, handle, indent=1)
    with open(os.path.join(base, "env", "settings"), "w") as handle:
        json.dump({"job_timeout": 2400, "idle_timeout": 900, "pexpect_timeout": 5, "suppress_ansible_output": False},
                  handle, indent=1)
    with open(os.path.join(base, "env", "envvars"), "w") as handle:
        json.dump({"ANSIBLE_FORCE_COLOR": "False", "ANSIBLE_HOST_KEY_CHECKING": "False"}, handle, indent=1)
    return base


def run(base, inventory_dir, playbook, ident, extravars=None, limit=None):
    """Run playbook (a path in the project) as AWX would and return the Job."""
    directory = private_data_dir(base, inventory_dir, extravars or {})
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_")))
    env["PATH"] = os.path.dirname(RUNNER) + os.pathsep + env.get("PATH", "")
    argv = [RUNNER, "run", directory, "-p", playbook, "--ident", ident]
    if limit:
        argv += ["--limit", limit]
    started = time.time()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=2700, check=False)
    job = Job(directory, ident)
    # The jobs' durations, beside the scenario's log (the private data directories go with the scenario).
    logs = os.path.join(os.environ.get("GPUFLEET_STATE_DIR", "/var/tmp/gpufleet-harness"), "logs")
    if os.path.isdir(logs):
        # And each job's output, which goes with the scenario's directory otherwise.
        with open(os.path.join(logs, "fleet-job-%s.log" % ident), "w") as handle:
            handle.write(job.stdout)
        with open(os.path.join(logs, "fleet-jobs.log"), "a") as handle:
            handle.write("%s %s %s: %s in %d s, changed %s\n" % (time.strftime("%H:%M:%S"), ident, playbook, job.status,
                                                                 time.time() - started, job.stats.get("changed", {})))
    return job
