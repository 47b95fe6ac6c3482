# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmarks of gpufleet.nvidia on the simulated fleet (see benchmarks/README.md).

    make benchmark                      # every section, 3 runs each
    .venv/bin/python benchmarks/run.py --runs 3 --sections rerun,baseline

Needs what `make demo` sets up (Docker engine, base images, simulated
repository: the script starts them through tests/harness like demo.sh does).
Its nodes are systemd containers named gpufleet-bench-*, on ports of their
own (DCGM 5580-5599, exporter 9420-9439, sshd 2220-2239) so that a demo
fleet or a Molecule run may keep running beside it (their times then suffer).

Sections:
  cold      site.yml on a fresh HGX node, beside one apt-get install of the
            same final package set in an identical fresh container
  rerun     the no-change rerun, beside floor (a): as many trivial module
            calls as the rerun made remote module executions, and floor (b):
            one shell script checking the same end state in one process
  baseline  the same no-change rerun for the baseline commit (git worktree)
  fleet     the rerun on 1, 4 and 8 nodes over the docker connection and SSH
  facts     nvidia_smi_info on the 8-GPU profile: nvidia-smi processes and time
  settings  the recommended ansible.cfg settings, each on and off
  mitogen   the rerun under Mitogen's mitogen_linear strategy beside the
            default one (--mitogen DIR, a "pip install --target DIR mitogen";
            with the fleet section also the 8-node rerun under it)
Every ansible-playbook run also records the controller's CPU seconds.
Each figure is the median of --runs runs; the JSON under benchmarks/results/
holds every run.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
HARNESS = os.path.join(TOP, 'tests', 'harness')
VENV_BIN = os.path.join(TOP, '.venv', 'bin')
STATE_DIR = os.environ.get('GPUFLEET_STATE_DIR', '/var/tmp/gpufleet-harness')
REPO_URL = os.environ.get('GPUFLEET_TEST_REPO_URL', 'http://127.0.0.1:8765')
REPO_DIR = os.environ.get('GPUFLEET_TEST_REPO_DIR', os.path.join(STATE_DIR, 'repo'))
BASELINE = 'e79e402'
PREFIX = 'gpufleet-bench-'
DCGM_PORT, EXPORTER_PORT, SSH_PORT = 5580, 9420, 2220
HGX = {'nvidia_sim_profile': 'hgx_h100_8gpu', 'nvidia_driver_expected_gpu_count': 8,
       'gpufleet_site_cuda_toolkit': True}
CALLBACKS = os.path.join(HERE, 'plugins', 'callback')


def log(msg):
    print('[%s] %s' % (time.strftime('%H:%M:%S'), msg), flush=True)


def children_cpu_s():
    """User + system seconds of every waited-for child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv, check=True, env=None, cwd=None, timeout=3600, input_text=None):
    """Run argv; return (seconds, CompletedProcess). proc.cpu_s: the CPU seconds
    of argv and its descendants on this machine (for ansible-playbook: the
    controller, its forked workers and the docker clients they start; not
    what runs in the nodes)."""
    start, cpu = time.monotonic(), children_cpu_s()
    proc = subprocess.run(argv, cwd=cwd or TOP, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False, input=input_text)
    seconds = time.monotonic() - start
    proc.cpu_s = round(children_cpu_s() - cpu, 2)
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:] + proc.stderr[-3000:])
        raise SystemExit('failed (rc %d): %s' % (proc.returncode, ' '.join(argv)))
    return seconds, proc


def median(values):
    return round(statistics.median(values), 3) if values else None


# ----------------------------------------------------------------- nodes

# Each node is a systemd container, and its systemd and journald take inotify
# instances of the host's root user: with Linux's default limit of 128, the
# 22nd node of a 32-node run never finished booting (measured 2026-12-04,
# about 6 instances a node). Say so before starting any node.
INOTIFY_PER_NODE = 6


def check_host_limits(count):
    path = '/proc/sys/fs/inotify/max_user_instances'
    try:
        with open(path) as handle:
            limit = int(handle.read())
    except (OSError, ValueError):
        return
    need = count * INOTIFY_PER_NODE + 16
    if limit < need:
        raise SystemExit('%d nodes need about %d inotify instances, but fs.inotify.max_user_instances is %d: '
                         'raise it (sysctl -w fs.inotify.max_user_instances=%d) or measure fewer nodes'
                         % (count, need, limit, need))


def start_node(name, image='gpufleet/debian12-systemd:latest'):
    run(['docker', 'rm', '-f', name], check=False)
    # The container shape of the harness (tests/harness/demo.sh).
    run(['docker', 'run', '-d', '--name', name, '--hostname', name, '--cap-add', 'SYS_ADMIN',
         '--tmpfs', '/run', '--tmpfs', '/run/lock', '-v', '/sys/fs/cgroup:/sys/fs/cgroup:ro',
         '--network', 'host', '--restart', 'always', image, '/lib/systemd/systemd'])
    # The first module must not race the container's boot.
    for _attempt in range(60):
        _s, proc = run(['docker', 'exec', name, 'systemctl', 'is-system-running', '--wait'], check=False, timeout=120)
        if proc.stdout.strip() in ('running', 'degraded'):
            return
        time.sleep(1)
    raise SystemExit('node %s did not boot' % name)


def remove_nodes(names):
    if names:
        run(['docker', 'rm', '-f'] + list(names), check=False)


def docker_exec(name, script, timeout=600):
    return run(['docker', 'exec', '-i', name, 'sh', '-s'], input_text=script, timeout=timeout)


class Tree(object):
    """A checkout of the collection: this one, or a git worktree of the baseline commit."""

    def __init__(self, path, label):
        self.path, self.label = path, label

    @classmethod
    def baseline(cls, workdir, commit):
        path = os.path.join(workdir, 'baseline-' + commit)
        if not os.path.isdir(path):
            run(['git', 'worktree', 'add', '--detach', path, commit])
        return cls(path, commit)

    def env(self, count_file=None, **settings):
        env = dict(os.environ)
        env.update({
            'PATH': VENV_BIN + os.pathsep + env['PATH'],
            'ANSIBLE_CONFIG': os.path.join(self.path, 'ansible.cfg'),
            'ANSIBLE_NOCOLOR': '1',
            'ANSIBLE_FORCE_COLOR': '0',
            'ANSIBLE_CALLBACK_PLUGINS': CALLBACKS,
            # Every tree runs with the same settings; "settings" varies them.
            'ANSIBLE_PIPELINING': 'True',
            'ANSIBLE_CALLBACKS_ENABLED': 'task_counter',
        })
        for key, value in settings.items():
            env['ANSIBLE_' + key.upper()] = str(value)
        if count_file:
            env['GPUFLEET_TASK_COUNT_FILE'] = count_file
        return env

    def inventory(self, workdir, nodes, ssh_key=None):
        """Inventory of the bench nodes, with this tree's simulated group_vars."""
        directory = tempfile.mkdtemp(prefix='inv-%s-' % self.label, dir=workdir)
        os.makedirs(os.path.join(directory, 'group_vars'))
        shutil.copy(os.path.join(self.path, 'inventories', 'simulated', 'group_vars', 'gpu_nodes.yml'),
                    os.path.join(directory, 'group_vars', 'gpu_nodes.yml'))
        hosts = {}
        for index, name in enumerate(nodes):
            # Host variables: they outrank the simulated group_vars' own repository defaults.
            host = dict(HGX, dcgm_port=DCGM_PORT + index, dcgm_exporter_port=EXPORTER_PORT + index,
                        gpufleet_test_repo_url=REPO_URL, gpufleet_test_repo_dir=REPO_DIR)
            if ssh_key:
                host.update(ansible_connection='ssh', ansible_host='127.0.0.1', ansible_port=SSH_PORT + index,
                            ansible_user='root', ansible_ssh_private_key_file=ssh_key)
            hosts[name] = host
        data = {'all': {'vars': {'ansible_connection': 'community.docker.docker',
                                 'ansible_python_interpreter': '/usr/bin/python3'},
                        'children': {'gpu_nodes': {'hosts': hosts}}}}
        path = os.path.join(directory, 'hosts.yml')
        with open(path, 'w') as handle:
            yaml.safe_dump(data, handle)
        return path

    def playbook(self, inventory, playbook, count_file=None, extra=(), check=True, **settings):
        argv = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', inventory, playbook] + list(extra)
        seconds, proc = run(argv, env=self.env(count_file, **settings), cwd=self.path, check=check)
        return seconds, proc

    def prepare(self, inventory):
        self.playbook(inventory, 'molecule/_shared/prepare.yml',
                      extra=['-e', 'gpufleet_test_sim_dir=%s' % os.path.join(self.path, 'tests', 'nvidia_sim')])

    def site(self, inventory, count_file=None, extra=(), check=True, **settings):
        return self.playbook(inventory, 'site.yml', count_file=count_file, extra=['-l', 'gpu_nodes'] + list(extra),
                             check=check, **settings)


def counts(count_file):
    with open(count_file + '.summary.json') as handle:
        return json.load(handle)


def recap_changed(output):
    changed = []
    for line in output.splitlines():
        if ' changed=' in line and ' ok=' in line:
            changed.append(int(line.split(' changed=')[1].split()[0]))
    return changed


# -------------------------------------------------------------- sections

def converge_node(tree, workdir, name):
    start_node(name)
    inventory = tree.inventory(workdir, [name])
    tree.prepare(inventory)
    docker_exec(name, 'mkdir -p /var/tmp && touch /var/tmp/gpufleet-bench-marker\n')
    seconds, _proc = tree.site(inventory)
    return inventory, seconds


def installed_packages(name):
    _s, proc = docker_exec(name, "dpkg-query -W -f '${db:Status-Status} ${Package}=${Version}\\n'\n")
    return set(line.split(' ', 1)[1] for line in proc.stdout.splitlines() if line.startswith('installed '))


def section_cold(tree, workdir, runs, result):
    """Cold converge beside one apt-get install of the same final package set."""
    fresh = PREFIX + 'fresh'
    start_node(fresh)
    tree.prepare(tree.inventory(workdir, [fresh]))
    base = installed_packages(fresh)
    remove_nodes([fresh])
    converge, floor, added = [], [], None
    for index in range(runs):
        name = PREFIX + 'cold%d' % index
        log('cold converge %d/%d' % (index + 1, runs))
        _inventory, seconds = converge_node(tree, workdir, name)
        converge.append(seconds)
        final = installed_packages(name)
        added = sorted(final - base)
        # The floor gets the same apt sources, keyrings and pins, then installs
        # exactly the packages the converge added, in one apt-get.
        _s, tar = run(['docker', 'exec', name, 'tar', '-C', '/', '-cf', '/var/tmp/apt-config.tar',
                       'etc/apt/sources.list.d', 'etc/apt/keyrings', 'etc/apt/preferences.d'])
        floor_node = PREFIX + 'floor%d' % index
        start_node(floor_node)
        tree.prepare(tree.inventory(workdir, [floor_node]))
        copy = os.path.join(workdir, 'apt-config.tar')
        run(['docker', 'cp', '%s:/var/tmp/apt-config.tar' % name, copy])
        run(['docker', 'cp', copy, '%s:/var/tmp/apt-config.tar' % floor_node])
        docker_exec(floor_node, 'tar -C / -xf /var/tmp/apt-config.tar\n')
        log('floor: apt-get install of %d packages' % len(added))
        seconds, _proc = docker_exec(floor_node, 'export DEBIAN_FRONTEND=noninteractive\n'
                                     'apt-get update -qq && apt-get install -y -qq --no-install-recommends %s >/dev/null\n'
                                     % ' '.join(added), timeout=3600)
        floor.append(seconds)
        remove_nodes([name, floor_node])
    result['cold'] = {'converge_s': converge, 'floor_apt_install_s': floor, 'packages_added': len(added or []),
                      'converge_median_s': median(converge), 'floor_median_s': median(floor),
                      'ratio': round(median(converge) / median(floor), 2)}


def state_check_script(name):
    """Floor (b): one shell process checking the converged node's end state."""
    _s, proc = docker_exec(name, '\n'.join([
        "dpkg-query -W -f '${db:Status-Status} ${Package}=${Version}\\n' | sed -n 's/^installed //p' | sort",
        'echo ----',
        'find /etc /usr/local /var/lib/dpkg/alternatives -xdev -type f -newer /var/tmp/gpufleet-bench-marker '
        '-print0 2>/dev/null | sort -z | xargs -0 -r sha256sum',
        'echo ----',
        "systemctl list-units --state=active --no-legend --plain 'nvidia*' '*dcgm*' 'docker*' 'containerd*' "
        "'gpufleet*' | awk '{print $1}' | sort", '']))
    packages, files, units = proc.stdout.split('----\n')
    return '\n'.join([
        'set -e',
        "dpkg-query -W -f '${db:Status-Status} ${Package}=${Version}\\n' | sed -n 's/^installed //p' | sort"
        " | cmp -s - /dev/fd/3 3<<'PKGS' || { echo packages differ; exit 1; }", packages.rstrip('\n'), 'PKGS',
        "sha256sum --quiet -c - <<'SUMS'", files.rstrip('\n'), 'SUMS',
        'systemctl is-active --quiet %s' % ' '.join(units.split()), 'echo state ok', ''])


def trivial_playbook(workdir, host_pattern, count, kind='ping'):
    """A playbook of COUNT trivial tasks: module calls (floor (a)), controller-side
    set_fact tasks, or tasks skipped by a false condition: what Ansible itself
    costs for as many tasks of each kind as the rerun has."""
    path = os.path.join(workdir, 'floor_%s_%d.yml' % (kind, count))
    task = {'ping': {'ansible.builtin.ping': {}},
            'set_fact': {'ansible.builtin.set_fact': {'bench_value': '{{ 1 }}'}},
            'skipped': {'ansible.builtin.debug': {'msg': 'never'}, 'when': 'bench_never | default(false)'}}[kind]
    tasks = [dict(task, name='Trivial %s task %d' % (kind, i)) for i in range(count)]
    with open(path, 'w') as handle:
        yaml.safe_dump([{'name': 'Floor (a)', 'hosts': host_pattern, 'become': True, 'gather_facts': False,
                         'tasks': tasks}], handle)
    return path


def measure_rerun(tree, workdir, inventory, runs, label, extra=(), **settings):
    times, cpu, summaries, changed = [], [], [], []
    for index in range(runs):
        count_file = os.path.join(workdir, 'count-%s-%d-%d.jsonl' % (label, index, int(time.time())))
        seconds, proc = tree.site(inventory, count_file=count_file, extra=extra, **settings)
        times.append(seconds)
        cpu.append(proc.cpu_s)
        summaries.append(counts(count_file))
        changed.extend(recap_changed(proc.stdout))
    hosts = summaries[-1]['hosts']
    main_cpu = [s['main_process_cpu_s'] for s in summaries if s.get('main_process_cpu_s') is not None]
    # Where the wall time went, by kind of task (the callback's time_by_kind),
    # and what the process spent outside the callback's view (interpreter
    # start, parsing the playbook, the inventory and the roles; exit).
    by_kind = {}
    for seconds, summary in zip(times, summaries):
        kinds = dict((summary.get('time_by_kind') or {}).get('seconds') or {})
        if kinds and summary.get('seconds') is not None:
            kinds['outside the callback (start, parse, exit)'] = round(seconds - summary['seconds'], 2)
        for kind, value in kinds.items():
            by_kind.setdefault(kind, []).append(value)
    task_starts = (summaries[-1].get('time_by_kind') or {}).get('task_starts')
    return {'runs_s': times, 'median_s': median(times), 'changed': sorted(set(changed)),
            'controller_cpu_s': cpu, 'controller_cpu_median_s': median(cpu),
            'controller_cpu_s_per_host': round(median(cpu) / max(len(hosts), 1), 2),
            'main_process_cpu_s': main_cpu, 'main_process_cpu_median_s': median(main_cpu),
            'main_process_cpu_s_per_host': round(median(main_cpu) / max(len(hosts), 1), 3) if main_cpu else None,
            'time_by_kind_median_s': dict((kind, median(values)) for kind, values in by_kind.items()),
            'task_starts_by_kind': task_starts,
            'counts': hosts}


def section_rerun(tree, workdir, runs, result, baseline_tree=None):
    name = PREFIX + 'hgx'
    log('converge the rerun node (%s)' % tree.label)
    inventory, _s = converge_node(tree, workdir, name)
    tree.site(inventory)  # settle: anything a first converge leaves for a second run
    log('no-change rerun x%d' % runs)
    rerun = measure_rerun(tree, workdir, inventory, runs, 'current')
    host = rerun['counts'][name]
    # Ansible alone, for as many trivial tasks of each kind as the rerun has:
    # module calls (floor (a)), controller-side tasks, skipped tasks.
    trivial = {}
    for kind, count in (('ping', host['module_executions']), ('set_fact', host.get('controller_tasks', 0)),
                        ('skipped', host.get('skipped', 0))):
        if count:
            measured = [tree.playbook(inventory, trivial_playbook(workdir, name, count, kind)) for _run in range(runs)]
            trivial[kind] = {'tasks': count, 'runs_s': [seconds for seconds, _proc in measured],
                             'median_s': median([seconds for seconds, _proc in measured]),
                             'controller_cpu_median_s': median([proc.cpu_s for _s, proc in measured])}
    ping = trivial.pop('ping')
    script = state_check_script(name)
    floor_b_times = [docker_exec(name, script)[0] for _run in range(runs)]
    result['rerun'] = dict(rerun, floor_a={'module_calls': ping['tasks'], 'runs_s': ping['runs_s'],
                                           'median_s': ping['median_s'],
                                           'controller_cpu_median_s': ping['controller_cpu_median_s']},
                           trivial_tasks=trivial,
                           floor_b={'runs_s': floor_b_times, 'median_s': median(floor_b_times)})
    result['rerun']['vs_floor_a'] = round(rerun['median_s'] / ping['median_s'], 2)
    result['rerun']['vs_floor_b'] = round(rerun['median_s'] / median(floor_b_times), 1)
    result['rerun_node_inventory'] = inventory
    return inventory


def section_baseline(baseline_tree, workdir, runs, result):
    name = PREFIX + 'baseline'
    log('converge the baseline node (%s)' % baseline_tree.label)
    inventory, _s = converge_node(baseline_tree, workdir, name)
    baseline_tree.site(inventory)
    log('baseline no-change rerun x%d' % runs)
    result['baseline'] = measure_rerun(baseline_tree, workdir, inventory, runs, 'baseline')
    remove_nodes([name])
    if 'rerun' in result:
        result['rerun_vs_baseline_ratio'] = round(result['rerun']['median_s'] / result['baseline']['median_s'], 3)


def enable_ssh(name, index, public_key):
    docker_exec(name, '\n'.join([
        'set -e', 'export DEBIAN_FRONTEND=noninteractive',
        'command -v sshd >/dev/null || { apt-get update -qq && apt-get install -y -qq openssh-server >/dev/null; }',
        'mkdir -p /root/.ssh /etc/ssh/sshd_config.d && chmod 700 /root/.ssh',
        "cat > /root/.ssh/authorized_keys <<'KEY'", public_key.strip(), 'KEY',
        # Loopback only, its own port: every node shares the host's network.
        "printf 'Port %d\\nListenAddress 127.0.0.1\\nPermitRootLogin prohibit-password\\n' "
        '> /etc/ssh/sshd_config.d/gpufleet-bench.conf' % (SSH_PORT + index),
        'systemctl restart ssh', '']), timeout=900)


def section_fleet(tree, workdir, runs, result, sizes=(1, 4, 8), docker_only_sizes=(), mitogen=None,
                  transports=('docker', 'ssh'), forks_list=(1, 4)):
    """The rerun on 1, 4 and 8 nodes (over docker and SSH) and on docker_only_sizes
    (over docker), started from a committed converged node."""
    check_host_limits(max(tuple(sizes) + tuple(docker_only_sizes)) + 1)
    seed = PREFIX + 'seed'
    log('converge the seed node and commit it')
    converge_node(tree, workdir, seed)
    key = os.path.join(workdir, 'id_ed25519')
    if not os.path.exists(key):
        run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', key])
    with open(key + '.pub') as handle:
        public_key = handle.read()
    enable_ssh(seed, 0, public_key)
    image = 'gpufleet/bench-converged:%s' % tree.label
    run(['docker', 'commit', seed, image])
    remove_nodes([seed])
    fleet = {}
    nodes = [PREFIX + 'n%02d' % i for i in range(max(tuple(sizes) + tuple(docker_only_sizes)))]
    for index, name in enumerate(nodes):
        start_node(name, image)
    for index, name in enumerate(nodes):
        enable_ssh(name, index, public_key)
    known = os.path.join(workdir, 'known_hosts')
    # Each node takes its own ports once (the seed converged with the first
    # node's): one settling run over every node, not one per fleet size.
    log('fleet: settle all %d nodes once' % len(nodes))
    tree.site(tree.inventory(workdir, nodes))
    for size in sorted(set(sizes) | set(docker_only_sizes)):
        for transport in transports if size in sizes else ('docker',):
            inventory = tree.inventory(workdir, nodes[:size], ssh_key=key if transport == 'ssh' else None)
            settings = {} if transport == 'docker' else {
                'host_key_checking': 'False',
                'ssh_args': '-o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=%s' % known}
            log('fleet: %d node(s) over %s' % (size, transport))
            if transport != 'docker':
                tree.site(inventory, **settings)  # the first SSH connections and their known hosts
            measured = measure_rerun(tree, workdir, inventory, runs, '%s%d' % (transport, size), **settings)
            measured['per_host_s'] = round(measured['median_s'] / size, 2)
            fleet['%s_%d' % (transport, size)] = measured
        if mitogen and size == max(sizes):
            # Right after the default strategy on the same nodes, so the pair is minutes apart.
            settings, extra = mitogen_settings(mitogen)
            log('fleet: %d nodes under mitogen_linear' % size)
            inventory = tree.inventory(workdir, nodes[:size])
            measured = measure_rerun(tree, workdir, inventory, runs, 'mitogen%d' % size, extra=extra, **settings)
            measured['per_host_s'] = round(measured['median_s'] / size, 2)
            measured['vs_default'] = round(measured['median_s'] / fleet['docker_%d' % size]['median_s'], 3)
            fleet['mitogen_docker_%d' % size] = measured
    inventory = tree.inventory(workdir, nodes[:max(sizes)])
    for forks in forks_list:
        log('fleet: %d nodes, forks %d' % (max(sizes), forks))
        measured = measure_rerun(tree, workdir, inventory, runs, 'forks%d' % forks, forks=forks)
        fleet['docker_%d_forks_%d' % (max(sizes), forks)] = measured
    remove_nodes(nodes)
    result['fleet'] = fleet


def mitogen_settings(path):
    """ansible.cfg settings and extra arguments that run a playbook under Mitogen's
    linear strategy from PATH (a directory holding ansible_mitogen, e.g. a
    "pip install --target" of the mitogen package)."""
    strategy = os.path.join(path, 'ansible_mitogen', 'plugins', 'strategy')
    if not os.path.isdir(strategy):
        raise SystemExit('--mitogen %s: no ansible_mitogen/plugins/strategy there (pip install --target %s mitogen)'
                         % (path, path))
    # Mitogen takes over the connections it knows by their short names only:
    # "docker", not the inventory's community.docker.docker.
    return {'strategy_plugins': strategy, 'strategy': 'mitogen_linear'}, ['-e', 'ansible_connection=docker']


def section_mitogen(tree, workdir, runs, result, inventory, path):
    """The one-node no-change rerun under Mitogen's strategy, beside the default one."""
    settings, extra = mitogen_settings(path)
    log('mitogen: default strategy, then mitogen_linear')
    default = measure_rerun(tree, workdir, inventory, runs, 'mitogen-off')
    # Mitogen's first run starts its interpreters; a failure is a finding, recorded as such.
    _s, proc = tree.site(inventory, extra=extra, check=False, **settings)
    if proc.returncode != 0:
        result['mitogen'] = {'path': path, 'default': default, 'failed': True, 'rc': proc.returncode,
                             'output_tail': (proc.stdout[-4000:] + proc.stderr[-2000:])}
        log('mitogen: the first run under mitogen_linear failed (rc %d); recorded' % proc.returncode)
        return
    mitogen = measure_rerun(tree, workdir, inventory, runs, 'mitogen-on', extra=extra, **settings)
    result['mitogen'] = {'path': path, 'default': default, 'mitogen_linear': mitogen,
                         'ratio': round(mitogen['median_s'] / default['median_s'], 3)}


def section_facts(tree, workdir, runs, result, inventory):
    name = PREFIX + 'hgx'
    env = tree.env()
    adhoc = os.path.join(VENV_BIN, 'ansible')
    docker_exec(name, ': > /var/log/nvidia-sim/calls.log\n')
    module_times = [run([adhoc, '-i', inventory, name, '-b', '-m', 'gpufleet.nvidia.nvidia_smi_info'], env=env)[0]
                    for _run in range(runs)]
    _s, calls = docker_exec(name, 'cat /var/log/nvidia-sim/calls.log\n')
    smi_calls = [json.loads(line) for line in calls.stdout.splitlines() if line.strip()]
    smi_calls = [c for c in smi_calls if c.get('prog') == 'nvidia-smi']
    ping_times = [run([adhoc, '-i', inventory, name, '-b', '-m', 'ansible.builtin.ping'], env=env)[0]
                  for _run in range(runs)]
    query = ('nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,persistence_mode,'
             'memory.total,memory.used,temperature.gpu,power.draw --format=csv\n')
    bare = [docker_exec(name, query)[0] for _run in range(runs)]
    result['facts'] = {
        'nvidia_smi_processes_per_call': round(len(smi_calls) / float(runs), 2),
        'nvidia_smi_argv': sorted(set(' '.join(c['argv']) for c in smi_calls)),
        'module_adhoc_s': module_times, 'ping_adhoc_s': ping_times, 'bare_query_gpu_s': bare,
        'module_minus_ping_median_s': round(median(module_times) - median(ping_times), 3),
        'bare_median_s': median(bare),
        'real_gpu': 'not measured: no GPU machine was lent to this run',
    }


SETTINGS_VARIANTS = ('recommended', 'pipelining', 'profile_tasks', 'fact', 'preload')


def section_settings(tree, workdir, runs, result, inventory, only=SETTINGS_VARIANTS):
    """The recommended settings, each toggled against the collection's ansible.cfg."""
    cache = os.path.join(workdir, 'facts-cache')
    variants = (
        ('recommended', 'recommended (pipelining on, no profile_tasks)', {}),
        ('pipelining', 'pipelining off', {'pipelining': 'False'}),
        ('profile_tasks', 'profile_tasks callback on',
         {'callbacks_enabled': 'task_counter,ansible.builtin.profile_tasks'}),
        ('fact', 'fact cache (jsonfile, gathering=smart)',
         {'gathering': 'smart', 'cache_plugin': 'jsonfile', 'cache_plugin_connection': cache,
          'cache_plugin_timeout': '3600'}),
        # An experiment, not a setting the collection offers: the Jinja filter
        # and test plugins loaded in the main process before the workers fork
        # (plugins/callback/preload_jinja_plugins.py).
        ('preload', 'preload Jinja plugins before the workers fork',
         {'callbacks_enabled': 'task_counter,preload_jinja_plugins'}),
    )
    unknown = sorted(set(only) - set(key for key, _label, _settings in variants))
    if unknown:
        raise SystemExit('--settings-variants: unknown %s (known: %s)' % (', '.join(unknown), ', '.join(SETTINGS_VARIANTS)))
    out = {}
    for key, label, settings in variants:
        if key not in only:
            continue
        log('settings: %s' % label)
        if 'gathering' in settings:
            tree.site(inventory, **settings)  # fill the cache
        out[label] = measure_rerun(tree, workdir, inventory, runs, key, **settings)
        out[label].pop('counts', None)
    result['settings'] = out


# ------------------------------------------------------------------ main

def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as handle:
            names = [l.split(':', 1)[1].strip() for l in handle if l.startswith('model name')]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem_kb = 0
    with open('/proc/meminfo') as handle:
        for line in handle:
            if line.startswith('MemTotal:'):
                mem_kb = int(line.split()[1])
    return {'cpu': cpu, 'cores': os.cpu_count(), 'memory_gib': round(mem_kb / 1048576.0, 1),
            'kernel': platform.release(), 'load_at_start': os.getloadavg()[0], 'python': platform.python_version()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--sections', default='cold,rerun,baseline,fleet,facts,settings')
    parser.add_argument('--baseline', default=BASELINE)
    parser.add_argument('--workdir', default=os.path.join(STATE_DIR, 'bench'))
    parser.add_argument('--keep', action='store_true', help='keep the rerun node afterwards')
    parser.add_argument('--mitogen', default='',
                        help='directory holding ansible_mitogen: adds the mitogen section and the 8-node fleet under it')
    parser.add_argument('--fleet-sizes', default='1,4,8',
                        help='comma-separated fleet sizes measured over every --fleet-transports (the largest one '
                             'also under Mitogen and with other forks)')
    parser.add_argument('--fleet-transports', default='docker,ssh', help='docker, ssh or both')
    parser.add_argument('--fleet-forks', default='1,4',
                        help='comma-separated forks settings the largest fleet is also measured with (empty: none)')
    parser.add_argument('--fleet-large', default='32',
                        help='comma-separated fleet sizes measured over docker only, beside 1, 4 and 8 (empty: none)')
    parser.add_argument('--settings-variants', default=','.join(SETTINGS_VARIANTS),
                        help='comma-separated variants of the settings section: %s' % ', '.join(SETTINGS_VARIANTS))
    parser.add_argument('--no-latest', action='store_true',
                        help='write only results/<date>-<commit>.json, leaving latest.json to a full invocation')
    args = parser.parse_args(argv)
    sections = args.sections.split(',')
    os.makedirs(args.workdir, exist_ok=True)
    for script in ('docker-engine.sh start', 'base-images.sh debian12'):
        run([os.path.join(HARNESS, script.split()[0])] + script.split()[1:])
    # This checkout's own build of the simulated repository (by content hash).
    _s, repo = run([os.path.join(HARNESS, 'simulated-repo.sh'), 'start', '--env'],
                   env=dict(os.environ, PYTHON=os.path.join(VENV_BIN, 'python')))
    global REPO_URL, REPO_DIR  # pylint: disable=global-statement
    found = dict(line.split('=', 1) for line in repo.stdout.splitlines() if '=' in line)
    REPO_URL, REPO_DIR = found['GPUFLEET_TEST_REPO_URL'], found['GPUFLEET_TEST_REPO_DIR']
    _s, head = run(['git', 'rev-parse', '--short', 'HEAD'])
    _s, dirty = run(['git', 'status', '--porcelain', '--untracked-files=no'])
    tree = Tree(TOP, head.stdout.strip())
    result = {'date': datetime.datetime.now().isoformat(timespec='seconds'), 'commit': tree.label,
              'working_tree_clean': not dirty.stdout.strip(), 'baseline_commit': args.baseline,
              'runs': args.runs, 'machine': machine(),
              'command': 'benchmarks/run.py ' + ' '.join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))}
    started = time.monotonic()
    try:
        if 'cold' in sections:
            section_cold(tree, args.workdir, args.runs, result)
        inventory = None
        if {'rerun', 'facts', 'settings', 'mitogen'} & set(sections):
            inventory = section_rerun(tree, args.workdir, args.runs, result)
        if 'baseline' in sections:
            section_baseline(Tree.baseline(args.workdir, args.baseline), args.workdir, args.runs, result)
        if 'facts' in sections:
            section_facts(tree, args.workdir, args.runs, result, inventory)
        if 'settings' in sections:
            section_settings(tree, args.workdir, args.runs, result, inventory,
                             only=tuple(v for v in args.settings_variants.split(',') if v))
        if 'mitogen' in sections:
            if not args.mitogen:
                raise SystemExit('the mitogen section needs --mitogen DIR')
            section_mitogen(tree, args.workdir, args.runs, result, inventory, args.mitogen)
        if 'fleet' in sections:
            if result.get('mitogen', {}).get('failed'):
                args.mitogen = ''  # recorded by the one-node section; the fleet runs without it
            section_fleet(tree, args.workdir, args.runs, result,
                          sizes=tuple(int(n) for n in args.fleet_sizes.split(',') if n),
                          docker_only_sizes=tuple(int(n) for n in args.fleet_large.split(',') if n),
                          mitogen=args.mitogen or None,
                          transports=tuple(t for t in args.fleet_transports.split(',') if t),
                          forks_list=tuple(int(n) for n in args.fleet_forks.split(',') if n))
    finally:
        if not args.keep:
            _s, names = run(['docker', 'ps', '-a', '--format', '{{.Names}}'], check=False)
            remove_nodes([n for n in names.stdout.split() if n.startswith(PREFIX)])
    result.pop('rerun_node_inventory', None)
    result['projection'] = projection(result)
    result.update(headline(result))
    result['benchmark_seconds'] = round(time.monotonic() - started)
    out_dir = os.path.join(HERE, 'results')
    os.makedirs(out_dir, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M')
    paths = [os.path.join(out_dir, '%s-%s.json' % (stamp, tree.label))]
    if not args.no_latest:
        paths.append(os.path.join(out_dir, 'latest.json'))
    for path in paths:
        with open(path, 'w') as handle:
            json.dump(result, handle, indent=2, sort_keys=True)
    print(table(result))
    return 0


# (fleet nodes, controller cores in all, job slices): the cases written down in
# benchmarks/README.md. Slices are separate ansible-playbook processes (AWX job
# slicing, or several controllers), which is what divides the serial part.
PROJECTION_CASES = ((1000, 2, 1), (1000, 16, 1), (1000, 16, 8), (10000, 64, 32))


def projection(result, target_s_per_host=3.0):
    """A no-change rerun of 1,000 and 10,000 nodes, from the largest docker fleet
    measured in this invocation. With c the controller CPU per host, e the share
    of the controller's cores the run kept busy and m the main process's own CPU
    per host (the serial part), N hosts on k cores in s slices take at least
    max(N * c / (k * e), ceil(N / s) * m) seconds."""
    fleet = result.get('fleet', {})
    docker = dict((int(key.split('_')[1]), value) for key, value in fleet.items()
                  if key.startswith('docker_') and key.count('_') == 1)
    if not docker:
        return {}
    size = max(docker)
    measured = docker[size]
    if not measured.get('main_process_cpu_s_per_host'):
        return {}
    cores = result['machine']['cores']
    c = measured['controller_cpu_s_per_host']
    e = round(measured['controller_cpu_median_s'] / (measured['median_s'] * cores), 3)
    m = measured['main_process_cpu_s_per_host']
    out = {'from_fleet_size': size, 'c_controller_cpu_s_per_host': c, 'e_core_use': e,
           'm_main_process_cpu_s_per_host': m, 'cores_measured': cores, 'cases': []}
    for nodes, k, slices in PROJECTION_CASES:
        for label, per_host in (('measured', c), ('target', target_s_per_host)):
            per_slice = -(-nodes // slices)
            spread, serial = nodes * per_host / (k * e), per_slice * m
            out['cases'].append({
                'nodes': nodes, 'cores': k, 'slices': slices, 'c': per_host, 'basis': label,
                'wall_s': round(max(spread, serial)), 'bound': 'cores' if spread >= serial else 'main process',
                'arithmetic': 'max(%d x %s / (%d x %s), %d x %s) = max(%d, %d) s' % (
                    nodes, per_host, k, e, per_slice, m, round(spread), round(serial))})
    return out


def headline(result):
    """The figures issue #22 reads mechanically, under fixed top-level keys."""
    out = {}
    rerun = result.get('rerun', {})
    if rerun:
        out['rerun_vs_floor_a_ratio'] = rerun.get('vs_floor_a')
        hosts = rerun.get('counts', {})
        if len(hosts) == 1:
            only = list(hosts.values())[0]
            out['skipped'] = only.get('skipped', 0)
            out['controller_tasks'] = only.get('controller_tasks', 0)
    eight = result.get('fleet', {}).get('docker_8')
    if eight:
        out['controller_cpu_s_per_host'] = eight['controller_cpu_s_per_host']
    thirty_two = result.get('fleet', {}).get('docker_32')
    if thirty_two:
        out['controller_cpu_s_per_host_32'] = thirty_two['controller_cpu_s_per_host']
    cold = result.get('cold')
    if cold:
        out['cold_overhead_s'] = round(cold['converge_median_s'] - cold['floor_median_s'], 1)
    return out


def table(result):
    rows = ['| figure | value |', '|---|---|']

    def add(label, value):
        if value is not None:
            rows.append('| %s | %s |' % (label, value))
    cold, rerun, base = result.get('cold', {}), result.get('rerun', {}), result.get('baseline', {})
    add('cold converge (median s)', cold.get('converge_median_s'))
    add('floor: one apt-get install of the same %s packages (median s)' % cold.get('packages_added'),
        cold.get('floor_median_s'))
    add('cold converge / floor', cold.get('ratio'))
    add('cold converge minus floor (`cold_overhead_s`)', result.get('cold_overhead_s'))
    add('no-change rerun (median s)', rerun.get('median_s'))
    add('floor (a): %s trivial module calls (median s)' % rerun.get('floor_a', {}).get('module_calls'),
        rerun.get('floor_a', {}).get('median_s'))
    add('floor (a): its controller CPU (median s)', rerun.get('floor_a', {}).get('controller_cpu_median_s'))
    add('rerun / floor (a) (`rerun_vs_floor_a_ratio`)', rerun.get('vs_floor_a'))
    for kind, measured in sorted((rerun.get('trivial_tasks') or {}).items()):
        add('%s trivial `%s` tasks, as many as the rerun has of that kind (median s; controller CPU s)' % (
            measured['tasks'], kind), '%s; %s' % (measured['median_s'], measured['controller_cpu_median_s']))
    add('rerun: controller CPU, user + system (median s)', rerun.get('controller_cpu_median_s'))
    add('rerun: skipped tasks (`skipped`)', result.get('skipped'))
    for kind, value in sorted((rerun.get('time_by_kind_median_s') or {}).items()):
        add('rerun time: %s (median s; %s task starts)' % (
            kind, (rerun.get('task_starts_by_kind') or {}).get(kind, '-')), value)
    add('floor (b): one state-check process (median s)', rerun.get('floor_b', {}).get('median_s'))
    add('rerun / floor (b)', rerun.get('vs_floor_b'))
    add('baseline %s no-change rerun (median s)' % result.get('baseline_commit'), base.get('median_s'))
    add('rerun / baseline', result.get('rerun_vs_baseline_ratio'))
    for label, section in (('rerun', rerun), ('baseline', base)):
        for host, host_counts in sorted(section.get('counts', {}).items()):
            add('%s task counts (%s)' % (label, host), ', '.join(
                '%s %s' % (key.replace('_', ' '), value) for key, value in sorted(host_counts.items())))
    facts = result.get('facts', {})
    add('facts: nvidia-smi processes per default nvidia_smi_info', facts.get('nvidia_smi_processes_per_call'))
    add('facts: module minus ping (median s)', facts.get('module_minus_ping_median_s'))
    add('facts: one bare nvidia-smi --query-gpu (median s)', facts.get('bare_median_s'))
    for label, measured in sorted(result.get('settings', {}).items()):
        add('settings: %s (median s)' % label, measured.get('median_s'))
    for label, measured in sorted(result.get('fleet', {}).items()):
        add('fleet: %s (median s%s; controller CPU per host %s s; of it the main process %s s)' % (
            label.replace('_', ' '), ', per host %s s' % measured['per_host_s'] if 'per_host_s' in measured else '',
            measured.get('controller_cpu_s_per_host'), measured.get('main_process_cpu_s_per_host')),
            measured.get('median_s'))
        add('fleet: %s / default strategy' % label.replace('_', ' '), measured.get('vs_default'))
    add('controller CPU per host, 8-node docker rerun (`controller_cpu_s_per_host`)',
        result.get('controller_cpu_s_per_host'))
    add('controller CPU per host, 32-node docker rerun (`controller_cpu_s_per_host_32`)',
        result.get('controller_cpu_s_per_host_32'))
    proj = result.get('projection') or {}
    for case in proj.get('cases', []):
        add('projection: %d nodes, %d cores, %d slice(s), c = %s s (%s)' % (
            case['nodes'], case['cores'], case['slices'], case['c'], case['basis']),
            '%s: %s' % (case['arithmetic'], case['bound']))
    mitogen = result.get('mitogen', {})
    if mitogen.get('failed'):
        add('mitogen: rerun under mitogen_linear', 'failed (rc %s), see the JSON output_tail' % mitogen['rc'])
    elif mitogen:
        add('mitogen: rerun, default strategy (median s; controller CPU s)',
            '%s; %s' % (mitogen['default']['median_s'], mitogen['default']['controller_cpu_median_s']))
        add('mitogen: rerun, mitogen_linear (median s; controller CPU s)',
            '%s; %s' % (mitogen['mitogen_linear']['median_s'], mitogen['mitogen_linear']['controller_cpu_median_s']))
        add('mitogen / default', mitogen['ratio'])
    add('benchmark wall time (s)', result.get('benchmark_seconds'))
    add('load average at start', result.get('machine', {}).get('load_at_start'))
    return '\n'.join(rows)


if __name__ == '__main__':
    sys.exit(main())
