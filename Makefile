# continuity.artemis: set up, demo and test from a fresh checkout (as root, on Debian 12).
SHELL := /bin/bash
.DEFAULT_GOAL := help

ARTEMIS_VERSION := 2.56.0
ARTEMIS_GROUP := org.apache.artemis
ARTEMIS_ARCHIVE := .cache/artemis/apache-artemis-$(ARTEMIS_VERSION)-bin.tar.gz
# The release the upgrade drill starts from: the newest earlier one Maven Central has here (groupId of the
# ActiveMQ days; the broker role checks its SHA-512).
PREVIOUS_ARTEMIS_VERSION := 2.44.0
PREVIOUS_ARTEMIS_GROUP := org.apache.activemq
PREVIOUS_ARTEMIS_ARCHIVE := .cache/artemis/apache-artemis-$(PREVIOUS_ARTEMIS_VERSION)-bin.tar.gz
# The unpacked distribution: its command-line client for the demo, its brokers for the unit tests.
export ARTEMIS_HOME := $(CURDIR)/.cache/artemis/apache-artemis-$(ARTEMIS_VERSION)
TOXIPROXY_VERSION := v2.12.0
TOXIPROXY := .tools/bin/toxiproxy-server
METRICS_JARS := .cache/metrics/.fetched
# The broker plugins (broker-plugins/), which the broker role installs from roles/broker/files/plugins.
PLUGINS := $(shell sed -n 's|.*<module>\(.*\)</module>.*|\1|p' broker-plugins/pom.xml)
PLUGIN_JARS := $(foreach plugin,$(PLUGINS),roles/broker/files/plugins/$(plugin).jar)
PLUGIN_SOURCES := $(shell find broker-plugins -name '*.java' -o -name pom.xml)
COLLECTION_LINK := .collections/ansible_collections/continuity/artemis
# awx.awx, for the AWX configuration (awx/): Galaxy is out of reach; the last Ansible package on PyPI that bundled it.
AWX_COLLECTION := .collections/ansible_collections/awx/awx
AWX_FROM := ansible==8.7.0
AWX_FROM_SHA256 := fa7d3bc2dfdb0ab031df645814ff86b15cb5ec041bfbee4041f795abfa5646ca
VENV := .venv
PYTHON312 := $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12))
# A JDK and Maven build the broker plugins (make plugins). python3-pip and a compiler: the offline rpo_job test
# builds a wheelhouse with the system Python (the test-bed nodes' version).
APT_PACKAGES := openssh-server iptables iproute2 procps systemd-container debootstrap tcpdump shellcheck zookeeper slapd openssl \
	openjdk-17-jre-headless openjdk-17-jdk-headless maven prometheus python3-pip gcc python3-dev libssl-dev libxml2-utils
TESTBED := tests/testbed/testbed
GO := $(firstword $(shell command -v go) $(wildcard /usr/local/go/bin/go))
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help setup demo test static lint sanity unit integration molecule molecule-broker testbed-up testbed-down clean bench bench-rpo bench-password-hash role-docs \
	drills chaos reproduce-mirror-race reproduce-mirror-duplicate-cache reproduce-mirror-relay-drop reproduce-tls-auth-exceptions release plugins

help:
	@echo "make setup   install everything (apt packages, .venv, Artemis $(ARTEMIS_VERSION), Toxiproxy)"
	@echo "make demo    setup, build the test bed, run site.yml, print where the brokers are"
	@echo "make plugins  build the broker plugins (broker-plugins/, Maven) into roles/broker/files/plugins, with their JUnit tests"
	@echo "make test    setup, then lint and sanity side by side, unit and integration tests, and the broker Molecule scenario"
	@echo "make drills  the long drills (the HA layouts and the bridge engine losing their primary, a pair's primary stalled past its ZooKeeper session, rolling restart, upgrade and certificate rotation of a 2 x 2 estate under load, the live RPO paging, the measurement installed offline on a systemd node, runtime queues, the swapover and failover of the shared bed under load, the Molecule scenarios replication and rpo_job); figures in tests/drills/results"
	@echo "make chaos   faults and operations together under load, judged by the history checker: SEED=1 ESTATE=2x2|3x1 DURATION=1200 (docs/chaos.md)"
	@echo "make bench   the benchmarks B1-B7 on a test bed of their own (about 55 min); benchmarks/RESULTS.md"
	@echo "make reproduce-mirror-race  what Artemis's mirror loses of queues created at runtime in HA pairs (no reconciliation)"
	@echo "make reproduce-mirror-duplicate-cache  whether a mirror target takes again what a crashed source resends"
	@echo "make reproduce-mirror-relay-drop  whether a broker restarted cut off from a mirror target drops what it relays there, and with RelayIdentities"
	@echo "make reproduce-tls-auth-exceptions  whether a broker throws at every message sent over TLS without a client certificate"
	@echo "make release  check that the changelog describes galaxy.yml's version, build the collection into dist/ and list it"

setup: .cache/apt.done $(VENV)/.installed $(ARTEMIS_HOME)/bin/artemis $(TOXIPROXY) $(COLLECTION_LINK) $(AWX_COLLECTION) \
	$(METRICS_JARS) $(PLUGIN_JARS)

plugins: $(PLUGIN_JARS)

.cache/apt.done:
	@mkdir -p .cache
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@touch $@

# The checkout's measurement package (spark/) and the collection (by its name, through .collections) are importable
# in the venv through a .pth file of paths relative to its site-packages, as an installed package would be.
$(VENV)/.installed: requirements-dev.txt spark/requirements.txt
	@test -n "$(PYTHON312)" || { echo "Python 3.12 is needed (ansible-core 2.21); none found" >&2; exit 1; }
	$(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	site=$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') && \
	  printf '%s\n' ../../../../spark ../../../../.collections > "$$site/continuity-artemis-checkout.pth"
	@touch $@

$(ARTEMIS_ARCHIVE):
	@mkdir -p $(dir $@)
	mvn -q dependency:copy -Dartifact=$(ARTEMIS_GROUP):apache-artemis:$(ARTEMIS_VERSION):tar.gz:bin \
	  -DoutputDirectory=$(CURDIR)/$(dir $@)

$(PREVIOUS_ARTEMIS_ARCHIVE):
	@mkdir -p $(dir $@)
	mvn -q dependency:copy -Dartifact=$(PREVIOUS_ARTEMIS_GROUP):apache-artemis:$(PREVIOUS_ARTEMIS_VERSION):tar.gz:bin \
	  -DoutputDirectory=$(CURDIR)/$(dir $@)

$(ARTEMIS_HOME)/bin/artemis: $(ARTEMIS_ARCHIVE)
	tar -xzf $(ARTEMIS_ARCHIVE) -C $(dir $(ARTEMIS_ARCHIVE))
	@touch $@

# The Prometheus registry jars of the broker role's metrics plugin, for the test bed's offline nodes: every
# version the role pins (roles/broker/vars/main.yml), checked against its SHA-256 when the role copies them.
$(METRICS_JARS): roles/broker/vars/main.yml $(VENV)/.installed
	@mkdir -p $(dir $@)
	set -o pipefail; $(VENV)/bin/python -c 'import yaml; pins = yaml.safe_load(open("roles/broker/vars/main.yml"))["_broker_metrics_registries"]; \
	  print("\n".join(sorted({":".join((j["group"], j["artifact"], j["version"])) for p in pins.values() for j in p["jars"]})))' | \
	  while read -r artifact; do mvn -q dependency:copy -Dartifact=$$artifact -DoutputDirectory=$(CURDIR)/$(dir $@) || exit 1; done
	@touch $@

# One jar per plugin serves every release the role knows: it is built and its JUnit tests run against the release the
# role installs by default, after a build against the oldest one gave byte-identical jars (the same references to
# Artemis's classes, each found in both). Artemis's own libraries are the broker's: the jars hold only our classes.
plugin_build = mvn -q -B -f broker-plugins/pom.xml clean package -Dartemis.groupId=$(1) -Dartemis.version=$(2) \
	-Dmicrometer.version=$$($(VENV)/bin/python -c 'import yaml; print(yaml.safe_load(open("roles/broker/vars/main.yml"))["_broker_metrics_registries"]["$(2)"]["micrometer"])')
$(PLUGIN_JARS) &: $(PLUGIN_SOURCES) roles/broker/vars/main.yml Makefile $(VENV)/.installed
	@mkdir -p .cache/plugins-$(PREVIOUS_ARTEMIS_VERSION) roles/broker/files/plugins
	$(call plugin_build,$(PREVIOUS_ARTEMIS_GROUP),$(PREVIOUS_ARTEMIS_VERSION)) -DskipTests
	for plugin in $(PLUGINS); do cp broker-plugins/$$plugin/target/$$plugin.jar .cache/plugins-$(PREVIOUS_ARTEMIS_VERSION)/; done
	$(call plugin_build,$(ARTEMIS_GROUP),$(ARTEMIS_VERSION))
	for plugin in $(PLUGINS); do \
	  cmp -s broker-plugins/$$plugin/target/$$plugin.jar .cache/plugins-$(PREVIOUS_ARTEMIS_VERSION)/$$plugin.jar || { \
	    echo "broker-plugins/$$plugin: built against Artemis $(PREVIOUS_ARTEMIS_VERSION) and $(ARTEMIS_VERSION) it differs;" \
	      "one jar cannot serve both releases" >&2; exit 1; }; \
	  cp broker-plugins/$$plugin/target/$$plugin.jar roles/broker/files/plugins/; \
	done

$(TOXIPROXY):
	@mkdir -p $(dir $@)
	GOBIN=$(CURDIR)/.cache/gobin $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	cp .cache/gobin/server $@

$(COLLECTION_LINK):
	@mkdir -p $(dir $@)
	ln -sfn ../../.. $@

$(AWX_COLLECTION): $(VENV)/.installed
	$(VENV)/bin/pip download -q --no-deps $(AWX_FROM) -d .cache/awx
	echo "$(AWX_FROM_SHA256)  $$(ls .cache/awx/ansible-*.whl)" | sha256sum -c --quiet
	$(VENV)/bin/python -c 'import sys, zipfile; wheel = zipfile.ZipFile(sys.argv[1]); \
	  wheel.extractall(".collections", [n for n in wheel.namelist() if n.startswith("ansible_collections/awx/awx/")])' \
	  .cache/awx/ansible-*.whl
	@touch $@

testbed-up: setup
	$(TESTBED) up $(TESTBED_ARGS)

testbed-down:
	$(TESTBED) down

demo: testbed-up
	ansible-playbook -i inventories/testbed site.yml
	@$(VENV)/bin/python tests/testbed/demo_info.py "$(ARTEMIS_HOME)"

lint: setup
	ansible-lint --profile production
	antsibull-changelog lint

# Regenerate the variables tables of the roles' READMEs from their meta/argument_specs.yml.
role-docs: setup
	python tests/support/role_docs.py

sanity: setup
	tests/sanity.sh

# Two workers, a test file each at a time: the Spark tests' session and the modules' fixtures stay in one worker.
# Then the broker plugins' JUnit tests (broker-plugins/), against the release the role installs by default.
unit: setup
	pytest -n 2 --dist loadfile tests/unit
	$(call plugin_build,$(ARTEMIS_GROUP),$(ARTEMIS_VERSION)) -o

# The whole suite on two datacentres of plain-process nodes; then the site tests on three datacentres of nodes booting
# systemd (the role's systemd path, one active and two passive, firewalld running on every node), the login from a
# directory (slapd on the router) and the brokers' metrics (this bed and the drills' layouts bed turn them on). The HA
# layouts' kills and the measurement installed offline on a systemd node are drills (make drills).
integration: setup
	pytest tests/integration -m "not systemd and not drill"
	TESTBED_SYSTEMD=1 TESTBED_DCS=3 pytest -m "not drill" tests/integration/test_site.py \
	  tests/integration/test_broker_metrics.py tests/integration/test_ldap_login.py \
	  tests/integration/test_host_access.py \
	  tests/integration/test_bridge_engine.py::test_messages_produced_at_a_datacentre_arrive_once_at_every_other_and_never_come_back \
	  tests/integration/test_staging_delay.py::test_with_three_datacentres_every_other_datacentre_removes_its_copy_and_counts_the_notice

# A Molecule scenario per role on the test bed (delegated driver: a scenario's create and destroy bring it up and
# down unless it was up already). The broker scenario builds its own; replication and rpo_job (whose prepare is
# site.yml) share one, which this target brings up and down unless it was up already. The docker scenario's
# configuration is validated and its playbooks syntax-checked (no engine here). make test runs molecule-broker
# (the role alone, and the docker check); the shared scenarios apply site.yml's roles as the integration passes do
# (converge, a second run that changes nothing, rpo.yml), so they run with make molecule and make drills.
MOLECULE_OWN_BED := broker
MOLECULE_SHARED_BED := replication rpo_job
molecule-broker: setup
	molecule test -s $(MOLECULE_OWN_BED)
	molecule list -s docker
	ansible-playbook --syntax-check -i extensions/molecule/docker/inventory \
	  extensions/molecule/replication/converge.yml extensions/molecule/replication/verify.yml

molecule: molecule-broker
	@if [ "$$($(TESTBED) status --json)" = "[]" ]; then $(TESTBED) up >/dev/null; brought_up=1; fi; status=0; \
	for scenario in $(MOLECULE_SHARED_BED); do molecule test -s $$scenario || { status=1; break; }; done; \
	if [ -n "$$brought_up" ]; then $(TESTBED) down >/dev/null; fi; exit $$status

# The static checks, side by side (each takes about one of the two cores); make prints each one's output whole when it
# ends.
static: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target lint sanity

# Each stage in turn, and how long each took at the end (the suite's budget is 45 minutes on the reference machine).
TEST_STAGES := static unit integration molecule-broker
test: setup
	@rm -f .cache/stage-times; for stage in $(TEST_STAGES); do \
	  started=$$(date +%s); $(MAKE) --no-print-directory $$stage || exit 1; \
	  echo "$$stage $$(( $$(date +%s) - started ))s" >> .cache/stage-times; \
	done; echo "== stage times"; cat .cache/stage-times; \
	awk '{ total += $$2 } END { printf "total %dm%02ds\n", total / 60, total % 60 }' .cache/stage-times

# Drills that take minutes, not part of make test: those in tests/drills build their own test bed and write their
# figures to tests/drills/results/ (committed with the runs that produced them); the integration tests marked drill
# run on the shared two-datacentre bed (the RPO measurement through WAN delay and a partition, the broker's own routing
# reloaded as the inventory adds and removes it), and the mirror's swapover there and back once more on three
# datacentres (the third one's relayed copies removed by the swap back).
drills: setup $(PREVIOUS_ARTEMIS_ARCHIVE)
	pytest tests/drills
	pytest tests/integration -m drill
	TESTBED_DCS=3 pytest tests/integration/test_swapover.py -m drill -k mirror
	$(MAKE) --no-print-directory molecule

# Faults and operations together under load (docs/chaos.md): the schedule of SEED on a bed of its own (ESTATE 2x2
# or 3x1), DURATION seconds, then the checker's verdicts (tests/drills/results/chaos/).
SEED ?= 1
ESTATE ?= 2x2
DURATION ?= 1200
chaos: setup $(PREVIOUS_ARTEMIS_ARCHIVE)
	cd tests && python -m chaos.runner --seed $(SEED) --estate $(ESTATE) --duration $(DURATION)

# Re-check an Artemis release for the mirror's create-queue race (docs/upstream/mirror-create-queue-race.md): what
# a 2 x 2 shared_nothing bed loses without reconciliation. Builds its own test bed.
reproduce-mirror-race: setup
	cd tests && python -m drills.reproduce_mirror_race

# Re-check an Artemis release for the mirror target's duplicate detection across several mirror connections of one
# source broker (docs/chaos.md, 3 x 1 seed 2): two plain brokers on the controller, no test bed.
reproduce-mirror-duplicate-cache: setup
	cd tests && python -m drills.reproduce_mirror_duplicate_cache

# Re-check an Artemis release for the relay a restarted broker drops (docs/upstream/mirror-relay-drop.md), with and
# without the replication plugin's RelayIdentities: three plain brokers on the controller, no test bed.
reproduce-mirror-relay-drop: setup
	cd tests && python -m drills.reproduce_mirror_relay_drop

# Re-check an Artemis release for an exception thrown at every message a client sends over TLS without a client
# certificate (docs/upstream/tls-auth-exceptions.md): one plain broker on the controller, no test bed.
reproduce-tls-auth-exceptions: setup
	cd tests && python -m drills.reproduce_tls_auth_exceptions

# The collection's figures (benchmarks/RESULTS.md), on a test bed of their own; not part of make test (a smoke of
# the rendering is). make bench BENCH_ARGS="--only B1 --rounds 3"
BENCH_ARGS ?=
bench: setup
	cd tests && python -m benchmarks.bench $(BENCH_ARGS)

# What the password hashes' PBKDF2 iterations cost each login, on the test bed (not part of make test); figures in
# tests/benchmarks/results/password_hash_cost.json.
bench-password-hash: setup
	python tests/benchmarks/password_hash_cost.py

# The RPO/RTO job on generated telemetry in Spark local mode (not part of make test): make bench-rpo ROWS=10000000
ROWS ?= 1000000
bench-rpo: setup
	python tests/benchmarks/rpo_job.py $(ROWS)

# A release of galaxy.yml's version (docs/testing.md): refused while the changelog does not describe it (its newest
# release is another version, a fragment waits for a release, CHANGELOG.rst is stale); then the artifact, built into
# dist/, is listed and refused if it holds what must never ship (tests/support/release.py).
release: $(VENV)/.installed $(PLUGIN_JARS)
	python tests/support/release.py check
	rm -f dist/continuity-artemis-*.tar.gz
	ansible-galaxy collection build --output-path dist
	python tests/support/release.py inspect dist/continuity-artemis-*.tar.gz

clean: testbed-down
	rm -rf $(VENV) .collections .cache/gobin
