"""Jobs run inside the execution environment (EE) image, as AWX runs them.

After the fleet's operations (test_2_operations.py), the EE image is built
with ansible-builder from the repository's execution-environment.yml on a
Debian base made here (tests/harness/ee_image.py says what differs from the
production UBI 9 base, and why), and ansible-runner runs jobs in it with
process isolation (``docker run``), as AWX's execution nodes do:

  1. an ad hoc job on the EE's localhost: which ansible-core, collections and
     Python packages the job sees, printed by the job itself;
  2. ``site.yml --check`` on the fleet: the play, roles, modules and plugins
     all come from the collection installed in the image (every task's path
     is under /usr/share/ansible/collections), it succeeds and would change
     nothing on the converged fleet;
  3. ``health.yml``: the report is written, through the job's mount of the
     private data directory, for every node and GPU.

The project holds two one-line playbooks that import the collection's own
(``gpufleet.nvidia.site``, ``gpufleet.nvidia.health``) and an ansible.cfg
turning pipelining on, as the checkout's does: no roles, no collection. The jobs reach the
simulated nodes with community.docker's docker_api connection through the
Docker socket, mounted into the job's container (real fleets: SSH).
"""
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import GPU_NODES, PROJECT_DIR, RUNNER, Job  # noqa: E402  pylint: disable=wrong-import-position,import-error

INVENTORY = os.path.dirname(os.environ.get("MOLECULE_INVENTORY_FILE", "/nonexistent/x"))
WORK = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/gpufleet-fleet"), "runner-ee")
LOGS = os.path.join(os.environ.get("GPUFLEET_STATE_DIR", "/var/tmp/gpufleet-harness"), "logs")
IMAGE_COLLECTIONS = "/usr/share/ansible/collections/ansible_collections"
# Where runner mounts the private data directory in the job's container.
RUNNER_MOUNT = "/runner"
REPO_DIR = os.environ.get("GPUFLEET_TEST_REPO_DIR", "/var/tmp/gpufleet-harness/repo")
FINGERPRINTS = {"nvidia_driver_repo_key_fingerprint": "fingerprint",
                "container_toolkit_repo_key_fingerprint": "nvidia-container-toolkit-fingerprint"}
DOCKER_SOCKET = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").replace("unix://", "", 1)


def log(name, text, mode="a"):
    if os.path.isdir(LOGS):
        with open(os.path.join(LOGS, name), mode) as handle:
            handle.write(text)


@pytest.fixture(scope="module")
def image():
    """The EE image, built now (its build times go to the harness's logs)."""
    done = subprocess.run([sys.executable, os.path.join(PROJECT_DIR, "tests", "harness", "ee_image.py")],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    built = json.loads(done.stdout.strip().splitlines()[-1])
    log("fleet-ee-image.log", "%s %s\n" % (time.strftime("%H:%M:%S"), json.dumps(built)))
    return built


def ee_job(image_tag, name, argv, extravars=None, playbook_import=None, cmdline=None):
    """One ansible-runner job in the EE image: a private data directory as AWX writes it, the
    inventory Molecule made, and (for a playbook) a project with one line importing it."""
    base = os.path.join(WORK, name)
    subprocess.run(["rm", "-rf", base], check=True)
    os.makedirs(os.path.join(base, "env"))
    os.makedirs(os.path.join(base, "project"))
    subprocess.run(["cp", "-rL", INVENTORY, os.path.join(base, "inventory")], check=True)
    if playbook_import:
        with open(os.path.join(base, "project", name + ".yml"), "w") as handle:
            handle.write("---\n- name: %s\n  ansible.builtin.import_playbook: %s\n" % (name, playbook_import))
    # The project's ansible.cfg, as a user's project carries one: pipelining, as
    # the collection's own ansible.cfg sets it (one exec per module instead of a
    # file copy and its user lookup through the Docker API).
    with open(os.path.join(base, "project", "ansible.cfg"), "w") as handle:
        handle.write("[connection]\npipelining = True\n")
    extravars = dict(extravars or {})
    if playbook_import:
        # The Molecule inventory names the harness's nsenter connection, which
        # needs the host's PID namespace; extra variables outrank host variables.
        extravars["ansible_connection"] = "community.docker.docker_api"
        # The inventory reads the simulated repositories' key fingerprints from
        # files on the controller (lookup), which the job's container has not:
        # an AWX inventory holds them as values.
        for variable, file_name in FINGERPRINTS.items():
            with open(os.path.join(REPO_DIR, "keys", file_name)) as handle:
                extravars[variable] = handle.read().strip()
    with open(os.path.join(base, "env", "extravars"), "w") as handle:
        json.dump(extravars, handle)
    if cmdline:
        # Where AWX puts a job template's extra command line options (--check for a check job).
        with open(os.path.join(base, "env", "cmdline"), "w") as handle:
            handle.write(cmdline)
    with open(os.path.join(base, "env", "settings"), "w") as handle:
        json.dump({"job_timeout": 1800, "idle_timeout": 600}, handle)
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_")))
    started = time.time()
    subprocess.run([RUNNER, "run", base, "--ident", name] + argv + [
        "--process-isolation", "--process-isolation-executable", "docker", "--container-image", image_tag,
        "--container-volume-mount", "%s:/var/run/docker.sock" % DOCKER_SOCKET],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=1800, check=False)
    job = Job(base, name)
    log("fleet-jobs.log", "%s ee-%s: %s in %d s, changed %s\n" % (
        time.strftime("%H:%M:%S"), name, job.status, time.time() - started, job.stats.get("changed", {})))
    log("fleet-job-ee-%s.log" % name, job.stdout, "w")
    with open(os.path.join(job.dir, "command")) as handle:
        job.command = json.load(handle)["command"]
    return job


def in_container(job, image_tag):
    """The job's command line is a container run of the EE image, mounting the private data directory."""
    argv = job.command
    return argv[:2] == ["docker", "run"] and image_tag in argv and any(
        a.endswith(":%s/:Z" % RUNNER_MOUNT) or a.endswith(":%s/" % RUNNER_MOUNT) for a in argv)


def test_1_the_job_sees_the_image_s_ansible_collections_and_python(image):
    script = ("ansible --version | head -n 1; ansible-galaxy collection list --format json; "
              "python3 -c 'import sys, requests, docker; print(sys.executable, requests.__file__, docker.__file__)'")
    job = ee_job(image["tag"], "ee-contents", ["--hosts", "localhost", "-m", "ansible.builtin.shell", "-a", script])
    assert job.status == "successful" and job.rc == 0, job.summary()
    assert in_container(job, image["tag"]), job.command
    result = [e["event_data"]["res"] for e in job.events if e["event"] == "runner_on_ok"]
    assert len(result) == 1, job.summary()
    lines = result[0]["stdout_lines"]
    assert lines[0].startswith("ansible [core 2.19."), lines[0]
    collections = json.loads(lines[1])
    assert collections[IMAGE_COLLECTIONS]["gpufleet.nvidia"]["version"] == image_version(), collections
    # The introspected Python packages of community.docker (its meta/ee-requirements.txt),
    # installed by the builder stage into the image's Python.
    executable, requests_path, docker_path = lines[2].split()
    assert executable == "/opt/ee-python/bin/python3", lines[2]
    assert requests_path.startswith("/opt/ee-python/lib/") and docker_path.startswith("/opt/ee-python/lib/"), lines[2]


def roles_from_the_image(job):
    """The roles the job's tasks came from; every task file must be the image's collection's."""
    paths = set(e["event_data"]["task_path"].rsplit(":", 1)[0] for e in job.events
                if e["event"] == "playbook_on_task_start" and e["event_data"].get("task_path"))
    outside = sorted(p for p in paths if not p.startswith(IMAGE_COLLECTIONS + "/gpufleet/nvidia/"))
    assert paths and outside == [], outside
    return set(p.split("/roles/", 1)[1].split("/", 1)[0] for p in paths if "/roles/" in p)


def image_version():
    with open(os.path.join(PROJECT_DIR, "galaxy.yml")) as handle:
        return str(yaml.safe_load(handle)["version"])


def test_2_site_check_mode_runs_the_image_s_collection_and_changes_nothing(image):
    job = ee_job(image["tag"], "site-check", ["-p", "site-check.yml"], {"nvidia_driver_branch": "580"},
                 "gpufleet.nvidia.site", cmdline="--check")
    assert job.status == "successful" and job.rc == 0, job.summary()
    assert job.failed() == [], job.summary()
    assert in_container(job, image["tag"]), job.command
    assert dict((node, job.changed(node)) for node in GPU_NODES) == dict((node, 0) for node in GPU_NODES), \
        job.summary()
    assert {"nvidia_driver", "dcgm", "container_toolkit"} <= roles_from_the_image(job)


def test_3_health_report_from_the_image(image):
    report_dir = os.path.join(WORK, "health", "report")
    job = ee_job(image["tag"], "health", ["-p", "health.yml"], {"health_report_dir": RUNNER_MOUNT + "/report"},
                 "gpufleet.nvidia.health")
    assert job.status == "successful" and job.rc == 0, job.summary()
    assert job.failed() == [], job.summary()
    assert in_container(job, image["tag"]), job.command
    with open(os.path.join(report_dir, "gpu-health.json")) as handle:
        report = json.load(handle)
    assert roles_from_the_image(job) == {"health"}
    gpus = dict((host["host"], len(host["gpus"])) for host in report["hosts"])
    assert gpus == {"fleet-hgx": 8, "fleet-l40s": 2, "fleet-a100": 1}, gpus
    # Each node was read (a node the job could not read is "no_data").
    assert [host["host"] for host in report["hosts"] if host["status"] == "no_data"] == []
    assert os.path.isfile(os.path.join(report_dir, "gpu-health.html"))
