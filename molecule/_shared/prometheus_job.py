"""The shipped dcgm-exporter scrape job and alert rules, as a Prometheus user turns them on.

Shared by tests/unit/monitoring/test_prometheus_rules.py (promtool on the
files) and molecule/dcgm/tests/test_prometheus.py (a real Prometheus scraping
the role's exporter), so that both check the same reading of the snippet:
the job as shipped, or with its commented TLS and basic auth block
uncommented in place of ``scheme: http``, as the snippet's header asks. Only
what a file on the test machine must replace (the CA, the password file, the
file_sd file) and the scrape timing are changed, by the caller, in the open.
"""
import os

import yaml

ROLE_FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                          "roles", "dcgm_exporter", "files")
SCRAPE = os.path.normpath(os.path.join(ROLE_FILES, "prometheus-scrape.yml"))
ALERTS = os.path.normpath(os.path.join(ROLE_FILES, "prometheus-alerts.yml"))
DASHBOARD = os.path.normpath(os.path.join(ROLE_FILES, "grafana-dashboard.json"))
PLAIN_SCHEME = "    scheme: http"
COMMENT = "    # "


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def uncomment_tls(text):
    """The snippet's text with the comment lines right below ``scheme: http`` uncommented in its place.

    Fails when the block is not there or does not turn into the keys a TLS and
    basic auth scrape needs: the snippet's instructions would be wrong.
    """
    lines = text.splitlines()
    assert lines.count(PLAIN_SCHEME) == 1, "prometheus-scrape.yml: no single '%s' line" % PLAIN_SCHEME.strip()
    at = lines.index(PLAIN_SCHEME)
    end = at + 1
    while end < len(lines) and lines[end].startswith(COMMENT):
        end += 1
    block = ["    " + line[len(COMMENT):] for line in lines[at + 1:end]]
    assert block, "prometheus-scrape.yml: no commented TLS block below 'scheme: http'"
    return "\n".join(lines[:at] + block + lines[end:]) + "\n"


def shipped_job(tls=False):
    """The scrape job of prometheus-scrape.yml; with ``tls``, its TLS and basic auth block turned on."""
    text = _read(SCRAPE)
    snippet = yaml.safe_load(uncomment_tls(text) if tls else text)
    jobs = snippet["scrape_configs"]
    assert len(jobs) == 1, "prometheus-scrape.yml should hold exactly one job"
    job = jobs[0]
    if tls:
        assert job["scheme"] == "https", job
        assert set(job["tls_config"]) == {"ca_file"}, job
        assert set(job["basic_auth"]) == {"username", "password_file"}, job
    return job


def alert_rules():
    """Every alerting rule of prometheus-alerts.yml, in file order."""
    groups = yaml.safe_load(_read(ALERTS))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def prometheus_config(jobs, evaluation_interval="1m"):
    """A complete prometheus.yml (as a dict) with the given scrape jobs and the shipped alert rules."""
    return {
        "global": {"evaluation_interval": evaluation_interval},
        "rule_files": [ALERTS],
        "scrape_configs": jobs,
    }


def write_yaml(path, data):
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, default_flow_style=False, sort_keys=False)
    return str(path)
