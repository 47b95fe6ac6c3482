# gpufleet.nvidia — developer entry points. The README documents two of them:
#   make demo   set everything up and converge site.yml on the simulated fleet
#   make test   run every check CI runs (lint, sanity, docs, unit, Molecule)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
SYSTEM_PACKAGES := docker.io debootstrap apt-utils gnupg dpkg-dev git
# The simulated rpm repositories of the Rocky-shaped test hosts: rpmbuild,
# rpmsign (rpm) and createrepo_c, modifyrepo_c (createrepo-c).
SYSTEM_PACKAGES += rpm createrepo-c
# Headless Chromium opens the HTML health report in tests/unit/integration/test_health_report_chromium.py.
SYSTEM_PACKAGES += chromium
# Debian's Prometheus (prometheus and promtool, 2.42 on Debian 12): the unit
# tests check the shipped alert rules and scrape job with promtool
# (tests/unit/monitoring), and the dcgm scenario scrapes its exporters with a
# real Prometheus (molecule/dcgm/tests/test_prometheus.py). Those tests start
# their own server on a free loopback port, so the packaged daemons are not
# needed: on the test machine (no systemd as PID 1, and /usr/sbin/policy-rc.d
# denies starts) apt leaves them stopped; where they do start, they hold 9090
# and 9100, which no test uses. Debian's node_exporter serves the node-local
# health check's textfile to a real Prometheus, on ports of their own
# (tests/unit/integration/test_health_node_local.py): named here, not left
# to prometheus' Recommends.
SYSTEM_PACKAGES += prometheus prometheus-node-exporter
# QEMU boots the kernel-boundary scenario's node from its own filesystem
# (molecule/_shared/vm_boot.py; TCG, no KVM needed); mkfs.ext4 -d builds
# the disk image without a loop device.
SYSTEM_PACKAGES += qemu-system-x86 e2fsprogs
# Molecule scenarios run at once (tests/harness/molecule.sh -j); they mostly
# wait on apt and systemd, so 3 finish sooner than 1 even on CI's two cores.
MOLECULE_JOBS ?= 3
# Unit test workers (pytest-xdist); each test file stays on one worker, whose
# module fixtures (one ansible-playbook run for a table of cases) it shares.
UNIT_JOBS ?= auto
STAMP := $(VENV)/.installed-$(shell sha256sum requirements/dev.txt | cut -c1-12)

.PHONY: setup demo test lint sanity docs unit molecule build changelog clean-harness benchmark

setup: $(STAMP)
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  for i in 1 2 3; do apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null && break; \
	    [ $$i -lt 3 ] || exit 1; sleep $$((i * 10)); done; \
	fi

$(STAMP): requirements/dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	for i in 1 2 3; do $(PY) -m pip install -q -r requirements/dev.txt && break; \
	  [ $$i -lt 3 ] || exit 1; sleep $$((i * 10)); done
	rm -f $(VENV)/.installed-*; touch $@

demo: setup
	tests/harness/demo.sh

# lint and sanity each keep one core busy, so they run side by side (each
# one's output printed whole when it ends). docs (about 20 s) waits for the
# first of them to free its core and, as measured, ends before the other (two
# idle cores: lint and sanity 71.9 s, lint, sanity and docs 72.0 s); -j3 only
# makes three jobs contend for two cores. unit and Molecule use both cores.
test: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target lint sanity docs
	$(MAKE) --no-print-directory unit molecule
	@echo "make test: all checks passed"

lint: setup
	yamllint -s .
	ansible-lint

sanity: setup
	tests/harness/sanity.sh

# antsibull-docs lint and the HTML site, warnings as errors (build/docs/build/html).
docs: setup
	tests/harness/docs.sh

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
unit: setup
	$(PY) -m pytest -q -n $(UNIT_JOBS) --dist loadfile tests/unit

molecule: setup
	tests/harness/molecule.sh -j $(MOLECULE_JOBS)

# Not part of make test: about an hour on the simulated fleet (benchmarks/README.md).
benchmark: setup
	$(PY) benchmarks/run.py

build: setup
	ansible-galaxy collection build --force --output-path build/

changelog: setup
	antsibull-changelog release

clean-harness:
	tests/harness/demo.sh --down || true
	tests/harness/simulated-repo.sh stop || true
	tests/harness/docker-engine.sh stop || true
