"""Changing the default toolkit re-points /usr/local/cuda and reports a
change, and running again reports none; dropping a toolkit from the list
with cuda_toolkit_remove_unlisted removes it. The scenario's converge
playbook is run from here with inputs overridden, then as converged."""
import json
import os
import re
import subprocess
import sys

import pytest

ORIGINAL, OTHER = "12.8", "13.0"
SELECT_TASK = "Select the default toolkit"
REMOVE_TASK = "Remove the unlisted toolkits"


def _converge(extra_vars):
    env = dict(os.environ)
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_FORCE_COLOR="0")
    playbook = os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml")
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run(
        [ansible_playbook, "-i", inventory, playbook, "--skip-tags", "driver_fixture,cudnn", "-e", json.dumps(extra_vars)],
        env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # The JSON document, whatever other callbacks (profile_tasks) print around it.
    start = re.search(r"(?m)^\{$", proc.stdout)
    assert start, proc.stdout[-4000:]
    result = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
    changed_tasks, facts = {}, {}
    for play in result["plays"]:
        for task in play["tasks"]:
            for hostname, outcome in task["hosts"].items():
                if outcome.get("changed"):
                    changed_tasks.setdefault(hostname, []).append(task["task"]["name"])
                facts.setdefault(hostname, {}).update(outcome.get("ansible_facts", {}))
    return {"stats": result["stats"], "changed_tasks": changed_tasks, "facts": facts}


@pytest.fixture(scope="session")
def runs():
    if not os.environ.get("MOLECULE_SCENARIO_DIRECTORY"):
        pytest.skip("runs the scenario's converge playbook: only under molecule verify")
    done = {}
    try:
        done["switch"] = _converge({"cuda_toolkit_default_version": OTHER})
        done["again"] = _converge({"cuda_toolkit_default_version": OTHER})
        # Back to the original default and, in the same run, without the other toolkit.
        done["remove"] = _converge({"cuda_toolkit_versions": [ORIGINAL], "cuda_toolkit_remove_unlisted": True})
    finally:
        # Back to the converged state, whatever failed above.
        done["reinstall"] = _converge({})
    return done


def _name(host):
    return host.backend.get_hostname()


def _changed(runs, run, host):
    return runs[run]["changed_tasks"].get(_name(host), [])


def test_changing_the_default_repoints_and_reports_changed(host, runs):
    assert any(name.endswith(SELECT_TASK) for name in _changed(runs, "switch", host)), _changed(runs, "switch", host)
    assert runs["switch"]["facts"][_name(host)]["cuda_toolkit_default"] == OTHER


def test_running_again_reports_no_change(host, runs):
    assert runs["again"]["stats"][_name(host)]["changed"] == 0, _changed(runs, "again", host)


def test_restoring_the_default_repoints_back(host, runs):
    assert any(name.endswith(SELECT_TASK) for name in _changed(runs, "remove", host)), _changed(runs, "remove", host)
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-%s" % ORIGINAL
    assert "release %s," % ORIGINAL in host.check_output("/usr/local/cuda/bin/nvcc --version")


def test_unlisted_toolkit_removed_only_when_asked(host, runs):
    # Runs that listed both toolkits removed nothing.
    for run in ("switch", "again"):
        assert not any(name.endswith(REMOVE_TASK) for name in _changed(runs, run, host))
    changed = _changed(runs, "remove", host)
    assert any(name.endswith(REMOVE_TASK) for name in changed), changed
    facts = runs["remove"]["facts"][_name(host)]
    assert facts["cuda_toolkit_installed"] == [ORIGINAL]
    # Its directory left both link groups, cuda and cuda-13 (which is gone).
    assert facts["converge_link_group_members"] == {
        "cuda": ["/usr/local/cuda-%s" % ORIGINAL], "cuda-12": ["/usr/local/cuda-%s" % ORIGINAL], "cuda-13": []}
    # Reinstalled afterwards: the converged state again.
    assert runs["reinstall"]["facts"][_name(host)]["cuda_toolkit_installed"] == [ORIGINAL, OTHER]
    assert runs["reinstall"]["facts"][_name(host)]["converge_link_group_members"]["cuda-13"] == [
        "/usr/local/cuda-%s" % OTHER]
