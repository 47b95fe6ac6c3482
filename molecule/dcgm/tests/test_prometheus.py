"""A real Prometheus (Debian's package, on the controller) scrapes the role's exporters with the shipped files.

The scrape job of roles/dcgm_exporter/files/prometheus-scrape.yml is read as a
user would turn it on (molecule/_shared/prometheus_job.py: its TLS and basic
auth block uncommented), and the shipped alert rules are loaded. Then:
the TLS host's target is up through TLS and basic auth, a wrong password is
refused, every PromQL expression of the shipped Grafana dashboard returns
series, its variables find values, and the rules evaluate without error and
stay quiet on the healthy simulated GPUs.

Host networking: the controller reaches both exporters on loopback, the TLS
one (dcgm-ubuntu2404, 9400) and the plain one (dcgm-rocky9, 9401). Standard
library only (urllib) besides pytest and testinfra.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import testinfra

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
import prometheus_job as shipped  # noqa: E402  pylint: disable=wrong-import-position,import-error

# The module's host fixture is the TLS host; the plain one is read through the same inventory.
testinfra_hosts = ["dcgm-ubuntu2404"]
PLAIN_HOST = "dcgm-rocky9"
TLS_JOB = "dcgm-exporter"
PLAIN_JOB = "dcgm-exporter-plain"
WRONG_JOB = "dcgm-exporter-wrong-password"
# What Grafana puts in place of the dashboard's variables: every host and GPU
# ("All"), a range and rate window that a few seconds of 1 s scrapes fill.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "5m", "$Hostname": ".*", "$gpu": ".*"}
# Bounds on waiting for Prometheus: start, first scrapes, rule evaluations.
WAIT = 60


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _fast(job):
    # The shipped 30 s interval (the exporter's sampling interval) would keep
    # the test waiting for minutes to fill the dashboard's rate windows; the
    # simulated exporter samples on every scrape. The timeout may not exceed it.
    job["scrape_interval"] = "1s"
    job["scrape_timeout"] = "1s"
    return job


def _file_sd(job, path, target):
    # The snippet's file_sd file is /etc/prometheus/file_sd/...; only its path changes.
    job["file_sd_configs"][0]["files"] = [shipped.write_yaml(path, [{"targets": [target]}])]
    return job


class Prometheus:
    def __init__(self, url, config, log):
        self.url = url
        self.config = config
        self.log = log

    def get(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen("%s%s?%s" % (self.url, path, query), timeout=10) as answer:
            body = json.loads(answer.read().decode())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr):
        return self.get("/api/v1/query", query=expr)["result"]

    def targets(self, job):
        return [t for t in self.get("/api/v1/targets", state="active")["activeTargets"] if t["labels"]["job"] == job]

    def log_tail(self):
        with open(self.log, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-3000:]


def eventually(probe, what, prometheus, timeout=WAIT):
    """probe()'s first truthy result within timeout seconds; fails naming what was awaited and the last result."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail("%s: not within %d s; last answer %r\nPrometheus log:\n%s"
                        % (what, timeout, last, prometheus.log_tail()))
        time.sleep(0.5)


def _start(argv, log):
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def tls_vars(host):
    return host.ansible.get_variables()


@pytest.fixture(scope="module")
def plain_host(request):
    option = request.config.option
    return testinfra.get_hosts([PLAIN_HOST], connection=option.connection,
                               ansible_inventory=option.ansible_inventory)[0]


@pytest.fixture(scope="module")
def prometheus(host, tls_vars, plain_host, tmp_path_factory):
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            pytest.fail("%s not found: it comes with Debian's prometheus package, which `make setup` installs" % tool)
    work = tmp_path_factory.mktemp("prometheus")
    tls_port = int(tls_vars.get("dcgm_exporter_port", 9400))
    plain_port = int(plain_host.ansible.get_variables().get("dcgm_exporter_port", 9400))

    # The exporter's self-signed certificate (converge.yml, SAN IP:127.0.0.1)
    # is its own CA; Prometheus verifies it against the target's address.
    ca_file = work / "exporter-ca.crt"
    ca_file.write_bytes(host.file(tls_vars["dcgm_exporter_verify_ca_path"]).content)
    password = work / "dcgm-exporter.password"
    password.write_text(tls_vars["dcgm_exporter_verify_password"])
    wrong = work / "wrong.password"
    wrong.write_text("not-" + tls_vars["dcgm_exporter_verify_password"])

    tls = _file_sd(_fast(shipped.shipped_job(tls=True)), work / "tls-targets.yml", "127.0.0.1:%d" % tls_port)
    # The snippet's user name stays as shipped: it is the one the scenario configures.
    assert tls["basic_auth"]["username"] == tls_vars["dcgm_exporter_verify_username"]
    tls["tls_config"]["ca_file"] = str(ca_file)
    tls["basic_auth"]["password_file"] = str(password)
    # The same job with a wrong password (its own name: job names are unique).
    refused = _file_sd(_fast(shipped.shipped_job(tls=True)), work / "wrong-targets.yml", "127.0.0.1:%d" % tls_port)
    refused.update(job_name=WRONG_JOB)
    refused["tls_config"]["ca_file"] = str(ca_file)
    refused["basic_auth"]["password_file"] = str(wrong)
    # The plain host: the job exactly as shipped (scheme http), under its own name.
    plain = _file_sd(_fast(shipped.shipped_job()), work / "plain-targets.yml", "127.0.0.1:%d" % plain_port)
    plain.update(job_name=PLAIN_JOB)
    assert plain["scheme"] == "http" and "basic_auth" not in plain

    config = shipped.write_yaml(work / "prometheus.yml",
                                shipped.prometheus_config([tls, refused, plain], evaluation_interval="1s"))
    log = str(work / "prometheus.log")
    process = None
    try:
        # The port is free when picked; another process may take it before
        # Prometheus binds, which then exits at once: pick again.
        for _attempt in range(3):
            port = _free_port()
            process = _start(["prometheus", "--config.file=" + config, "--storage.tsdb.path=" + str(work / "data"),
                              "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"], log)
            server = Prometheus("http://127.0.0.1:%d" % port, config, log)
            ready = _ready(server, process)
            if ready or process.poll() is None:
                break
        if not ready:
            pytest.fail("Prometheus did not start within %d s:\n%s" % (WAIT, server.log_tail()))
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _ready(server, process):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(server.url + "/-/ready", timeout=5) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.3)
    return False


def _dashboard():
    with open(shipped.DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def _grafana(expr):
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    assert "$" not in expr, "a Grafana variable the test does not replace: " + expr
    return expr


def _panel_queries():
    for panel in _dashboard()["panels"]:
        for target in panel.get("targets", []):
            yield pytest.param(target["expr"], id="%s/%s" % (panel["title"], target.get("refId", "")))


def _variable_queries():
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        yield pytest.param(query, id=variable["name"])


def test_promtool_accepts_the_assembled_config(prometheus):
    done = subprocess.run(["promtool", "check", "config", prometheus.config], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout
    assert "SUCCESS: %d rules found" % len(shipped.alert_rules()) in done.stdout, done.stdout


def test_tls_target_is_scraped_with_basic_auth(prometheus, tls_vars):
    eventually(lambda: prometheus.query('up{job="%s"} == 1' % TLS_JOB), "the TLS target up", prometheus)
    (target,) = prometheus.targets(TLS_JOB)
    assert target["health"] == "up", target
    assert target["scrapeUrl"] == "https://127.0.0.1:%d/metrics" % int(tls_vars.get("dcgm_exporter_port", 9400))


def test_plain_target_is_scraped_with_the_job_as_shipped(prometheus):
    eventually(lambda: prometheus.query('up{job="%s"} == 1' % PLAIN_JOB), "the plain target up", prometheus)


def test_wrong_password_is_refused(prometheus):
    def down():
        return [t for t in prometheus.targets(WRONG_JOB) if t["health"] == "down" and t["lastError"]]
    (target,) = eventually(down, "the target with the wrong password down", prometheus)
    assert "401" in target["lastError"], target
    assert prometheus.query('up{job="%s"}' % WRONG_JOB)[0]["value"][1] == "0"


def test_exporter_labels_keep_their_names(prometheus, host):
    """No honor_labels: none of the exporter's labels clashes with job or instance, so none is renamed."""
    series = eventually(lambda: prometheus.query('DCGM_FI_DEV_GPU_UTIL{job="%s"}' % TLS_JOB),
                        "GPU samples of the TLS host", prometheus)
    hostname = host.check_output("hostname")
    for sample in series:
        labels = sample["metric"]
        assert {"Hostname", "gpu", "UUID", "modelName", "device", "instance", "job"} <= set(labels), labels
        assert labels["Hostname"] == hostname and labels["instance"].startswith("127.0.0.1:"), labels
        assert not [name for name in labels if name.startswith("exported_")], labels


@pytest.mark.parametrize("expr", list(_panel_queries()))
def test_dashboard_query_returns_series(prometheus, host, expr):
    promql = _grafana(expr)
    hostname = host.check_output("hostname")

    # rate() and increase() answer for a target only from its second sample in the window, and the two
    # targets are scraped at their own offsets: another host's series may arrive first.
    def of_the_host():
        series = prometheus.query(promql)
        return series if hostname in {s["metric"].get("Hostname") for s in series} else []
    eventually(of_the_host, "series of %s for %s" % (hostname, promql), prometheus)


@pytest.mark.parametrize("query", list(_variable_queries()))
def test_dashboard_variable_has_values(prometheus, host, plain_host, query):
    found = re.match(r"^label_values\((.+),\s*(\w+)\)$", query)
    assert found, "not a label_values(metric, label) query: " + query
    selector, label = _grafana(found.group(1)), found.group(2)
    # What Grafana asks Prometheus for label_values(metric, label).
    wanted = {host.check_output("hostname"), plain_host.check_output("hostname")} if label == "Hostname" else set()

    # Both targets' first scrapes land at their own offsets: wait for every host the test names.
    def answered():
        values = prometheus.get("/api/v1/label/%s/values" % label, **{"match[]": selector})
        return values if values and wanted <= set(values) else []
    values = eventually(answered, "values of %s in %s (with %s)" % (label, selector, sorted(wanted)), prometheus)
    assert all(values), values


def test_alert_rules_read_series_the_exporter_serves(prometheus):
    """Every metric the rules read has samples of the TLS host: the rules can fire on real data."""
    metrics = sorted({name for rule in shipped.alert_rules() for name in re.findall(r"\bDCGM_[A-Z0-9_]+", rule["expr"])})
    assert metrics
    for metric in metrics:
        eventually(lambda metric=metric: prometheus.query('%s{job="%s"}' % (metric, TLS_JOB)),
                   "samples of " + metric, prometheus)


def test_alert_rules_evaluate_and_stay_quiet_on_healthy_gpus(prometheus):
    expected = {rule["alert"] for rule in shipped.alert_rules()}

    def evaluated():
        rules = [r for g in prometheus.get("/api/v1/rules", type="alert")["groups"] for r in g["rules"]]
        done = [r for r in rules if not r.get("lastEvaluation", "").startswith("0001-")]
        return rules if {r["name"] for r in done} == expected else []
    for rule in eventually(evaluated, "every alert rule evaluated", prometheus):
        assert rule["health"] == "ok", rule
    # Pending counts too: a rule matching a healthy GPU would fire after its for:.
    assert prometheus.query("ALERTS") == []
