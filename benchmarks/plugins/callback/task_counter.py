# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Count where a playbook's time goes: remote module executions per task.

A task result alone does not say whether the task ran code on the host:
``set_fact``, ``assert``, includes and ``meta`` run on the controller, while a
``template`` that changes nothing still runs two modules on the host (stat,
then file). So this callback wraps ``ActionBase._execute_module`` (inherited
by the forked workers) and appends one line per module execution to
``$GPUFLEET_TASK_COUNT_FILE``; at the end of the play it joins those lines
with the task results it saw and writes a summary JSON next to it.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: task_counter
type: aggregate
short_description: count remote module executions and controller-side tasks
description:
  - Writes every module execution and task result to a JSON lines file, and a summary at the end.
  - Benchmark tooling of gpufleet.nvidia, not part of the collection.
requirements:
  - GPUFLEET_TASK_COUNT_FILE set to a writable path
"""

import json
import os
import time
from collections import Counter

from ansible.plugins.action import ActionBase
from ansible.plugins.callback import CallbackBase

ENV = "GPUFLEET_TASK_COUNT_FILE"
_ORIGINAL = ActionBase._execute_module
_ORIGINAL_LOW_LEVEL = ActionBase._low_level_execute_command


def _append(record):
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps(record, sort_keys=True) + "\n"
    # O_APPEND writes of one short line are atomic across the forked workers.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _counting_low_level(self, cmd, *args, **kwargs):
    # No task variables here: the address is mapped to the inventory name in summarise().
    _append({
        "kind": "command",
        "addr": getattr(self._play_context, "remote_addr", None),
        "task": self._task._uuid,
    })
    return _ORIGINAL_LOW_LEVEL(self, cmd, *args, **kwargs)


def _counting_execute_module(self, module_name=None, *args, **kwargs):
    task_vars = kwargs.get("task_vars") or (args[2] if len(args) > 2 else None) or {}
    host = task_vars.get("inventory_hostname") or getattr(self._play_context, "remote_addr", None)
    _append({
        "kind": "module",
        "host": host,
        "addr": getattr(self._play_context, "remote_addr", None),
        "task": self._task._uuid,
        "module": module_name or self._task.action,
    })
    return _ORIGINAL(self, module_name, *args, **kwargs)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_counter"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = os.environ.get(ENV)
        self._started = time.monotonic()
        if self._path:
            ActionBase._execute_module = _counting_execute_module
            ActionBase._low_level_execute_command = _counting_low_level

    def _result(self, result, status):
        task = result._task
        _append({
            "kind": "result",
            "host": result._host.get_name(),
            "task": task._uuid,
            "name": task.get_name(),
            "action": task.action,
            "status": status,
        })

    def v2_playbook_on_task_start(self, task, is_conditional):
        # One line per task start: the time from one start to the next is what
        # that task cost the run (linear strategy), which summarise() sorts by kind.
        _append({"kind": "start", "task": task._uuid, "name": task.get_name(),
                 "at": round(time.monotonic() - self._started, 4)})

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_runner_on_ok(self, result):
        self._result(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")

    def v2_playbook_on_include(self, included_file):
        for host in included_file._hosts:
            _append({"kind": "result", "host": host.get_name(), "task": included_file._task._uuid,
                     "name": included_file._task.get_name(), "action": "include", "status": "ok"})

    def v2_playbook_on_stats(self, stats):
        if not self._path:
            return
        # The callback runs in the main ansible-playbook process: its own CPU
        # (not the forked workers', which os.times() counts as children) is
        # the serial part of a run, the one no number of forks spreads.
        own = os.times()
        _append({"kind": "end", "seconds": round(time.monotonic() - self._started, 3),
                 "main_process_cpu_s": round(own.user + own.system, 3)})
        with open(self._path + ".summary.json", "w", encoding="utf-8") as out:
            json.dump(summarise(self._path), out, indent=2, sort_keys=True)


def summarise(path):
    """Per host: remote tasks, module executions, controller-side and skipped tasks."""
    modules = Counter()
    commands = Counter()
    by_module = {}
    results = []
    seconds = None
    main_cpu = None
    starts = []
    with open(path, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    hosts_by_addr = dict((r["addr"], r["host"]) for r in records if r["kind"] == "module")
    for rec in records:
        if rec["kind"] == "command":
            rec["host"] = hosts_by_addr.get(rec["addr"], rec["addr"])
    for rec in records:
        key = (rec.get("host"), rec.get("task"))
        if rec["kind"] == "module":
            modules[key] += 1
            by_module.setdefault(rec["host"], Counter())[rec["module"]] += 1
        elif rec["kind"] == "command":
            commands[key] += 1
        elif rec["kind"] == "result":
            results.append(rec)
        elif rec["kind"] == "start":
            starts.append(rec)
        else:
            seconds = rec["seconds"]
            main_cpu = rec.get("main_process_cpu_s")
    hosts = {}
    for rec in results:
        h = hosts.setdefault(rec["host"], Counter())
        h["results"] += 1
        h[rec["status"]] += 1
        if rec["status"] == "skipped":
            continue
        if modules[(rec["host"], rec["task"])] or commands[(rec["host"], rec["task"])]:
            h["remote_tasks"] += 1
        else:
            h["controller_tasks"] += 1
    out = {"seconds": seconds, "main_process_cpu_s": main_cpu, "hosts": {},
           "time_by_kind": time_by_kind(starts, results, modules, commands, seconds)}
    for host, counts in hosts.items():
        entry = dict(counts)
        entry["module_executions"] = sum(n for (h, _t), n in modules.items() if h == host)
        # Every round trip to the host: module runs and the commands around them
        # (temporary directories, file transfers without pipelining).
        entry["remote_commands"] = sum(n for (h, _t), n in commands.items() if h == host)
        entry["modules"] = dict(by_module.get(host, {}))
        out["hosts"][host] = entry
    return out


def time_by_kind(starts, results, modules, commands, seconds):
    """Wall seconds of the run by what its tasks did, every host together.

    A task's time runs from its start to the next task's start (the linear
    strategy starts a task when the previous one ended on every host), so the
    kinds add up to the time from the callback's start to the end: "before the
    first task" is the play's start (the playbook, inventory and roles were
    parsed before callbacks load: run.py counts that as the rest of the
    process's wall time); "remote" tasks ran a module or a
    command on some host; "controller" tasks returned a result without one
    (set_fact, assert, include, meta, the plan); "skipped" tasks were skipped on
    every host; "no result" tasks started but reported nothing (a loop over
    nothing, an include the strategy dropped).
    """
    if not starts or seconds is None:
        return {}
    status = {}
    for rec in results:
        status.setdefault(rec["task"], set()).add(rec["status"])
    remote = set(task for (_h, task) in list(modules) + list(commands))
    out = {"before the first task": starts[0]["at"], "remote": 0.0, "controller": 0.0, "skipped": 0.0, "no result": 0.0}
    tasks = {"remote": 0, "controller": 0, "skipped": 0, "no result": 0}
    ends = [rec["at"] for rec in starts[1:]] + [seconds]
    for rec, end in zip(starts, ends):
        if rec["task"] in remote:
            kind = "remote"
        elif rec["task"] not in status:
            kind = "no result"
        elif status[rec["task"]] == {"skipped"}:
            kind = "skipped"
        else:
            kind = "controller"
        out[kind] += max(end - rec["at"], 0.0)
        tasks[kind] += 1
    return {"seconds": dict((k, round(v, 2)) for k, v in out.items()), "task_starts": tasks}
