# The two commands a newcomer runs: `make demo` (the pipeline end to end on a local Kafka broker)
# and `make test`. Both install what they need first and are safe to run again.
VENV   := .venv
BIN    := $(VENV)/bin
JARS   := .cache/jars
M2     := .cache/m2
CLASS_ARCHIVE := .cache/jvm/spark-classes.jsa
LOCAL_FS_JAR  := .cache/jvm/exactly-once-local-fs.jar
LOCAL_CATALOG_JAR := .cache/jvm/exactly-once-local-catalog.jar
HADOOP_DEFAULTS_JAR := .cache/jvm/exactly-once-hadoop-defaults.jar
PYTHON ?= python3
MVN    := mvn -q -B -Dmaven.repo.local=$(CURDIR)/$(M2)

.PHONY: setup project-bytecode test-setup jars demo test lint docs broker-start broker-stop clean s3a-jars s3-server \
        s3-start s3-stop cluster-start cluster-stop

# What the pipeline needs; the tests also need the Databricks CLI, dbx's own env and Chromium.
setup: $(VENV)/.installed $(VENV)/.compiled project-bytecode $(JARS)/.resolved \
       $(LOCAL_FS_JAR) $(LOCAL_CATALOG_JAR) $(HADOOP_DEFAULTS_JAR) $(CLASS_ARCHIVE)
test-setup: setup databricks-cli dbx-env chromium s3a-jars s3-server

# --no-compile: the byte-code is made next, on every core (pip compiles one file at a time).
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile -e '.[dev]'
	touch $@

# Byte-code for the environment, once. Python writes it at a module's first import, except
# where PYTHONDONTWRITEBYTECODE is set (this machine; CI's figures say it too): there every
# process compiled the ~700 modules an update imports again, 6 s of a 36 s `exactly-once run`
# (BENCHMARKS.md, "The first update").
$(VENV)/.compiled: $(VENV)/.installed
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib
	touch $@

# The project's own modules change between set-ups: compiled at each one, only those new or
# changed (a tenth of a second when none is).
project-bytecode: $(VENV)/.installed
	$(BIN)/python -m compileall -q src tests

# JVM jars Spark and the local broker need, copied from Maven into a project-local cache.
jars: $(JARS)/.resolved
$(JARS)/.resolved: jvm/spark/pom.xml jvm/kafka-broker/pom.xml
	rm -rf $(JARS)/spark $(JARS)/kafka-broker
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) -f jvm/kafka-broker/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-broker
	touch $@

# Hadoop's local file system without chmod/readlink processes (local/engine/local_fs.py): three
# small classes compiled against the Hadoop client in the pyspark wheel; no download.
JVM_SOURCES := src/exactly_once/local/engine/jvm
LOCAL_FS_SOURCES := $(wildcard $(JVM_SOURCES)/local-fs/exactlyonce/localfs/*.java)
$(LOCAL_FS_JAR): $(LOCAL_FS_SOURCES) $(VENV)/.installed
	rm -rf $@.classes && mkdir -p $@.classes
	javac --release 17 -Xlint:all -Werror -d $@.classes \
	    -cp "$$(ls $(VENV)/lib/python*/site-packages/pyspark/jars/hadoop-client-api-*.jar)" \
	    $(LOCAL_FS_SOURCES)
	jar --create --file $@ -C $@.classes .
	rm -rf $@.classes
# The local catalog's catalog level (local/catalog/): one Spark catalog plugin class compiled
# against Spark's own jars in the pyspark wheel; no download.
LOCAL_CATALOG_SOURCES := $(wildcard $(JVM_SOURCES)/local-catalog/exactlyonce/catalog/*.java)
$(LOCAL_CATALOG_JAR): $(LOCAL_CATALOG_SOURCES) $(VENV)/.installed
	rm -rf $@.classes && mkdir -p $@.classes
	javac --release 17 -Xlint:all,-path,-classfile -Werror -d $@.classes \
	    -cp "$$(cd $(VENV)/lib/python*/site-packages/pyspark/jars && ls -d "$$PWD"/spark-catalyst_* \
	           "$$PWD"/spark-sql_* "$$PWD"/spark-sql-api_* "$$PWD"/spark-common-utils_* \
	           "$$PWD"/scala-library-* | paste -sd:)" \
	    $(LOCAL_CATALOG_SOURCES)
	jar --create --file $@ -C $@.classes .
	rm -rf $@.classes
# Hadoop's configuration without YARN's defaults (local/engine/hadoop_defaults.py): an empty
# yarn-default.xml for the JVMs' launch class path.
$(HADOOP_DEFAULTS_JAR): $(wildcard $(JVM_SOURCES)/hadoop-defaults/*.xml)
	mkdir -p $(@D)
	jar --create --file $@ -C $(JVM_SOURCES)/hadoop-defaults .
# Hadoop's S3A connector (hadoop-aws at the wheel's Hadoop, 3.5.0) and the AWS SDK v2 modules it
# uses, for a warehouse on an object store: only `s3` and `s3-transfer-manager` with what they
# need (18 MB), not the SDK's all-services `bundle` jar hadoop-aws names (686 MB).
s3a-jars: $(JARS)/.s3a-resolved
$(JARS)/.s3a-resolved: jvm/s3a/pom.xml
	rm -rf $(JARS)/s3a
	$(MVN) -f jvm/s3a/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/s3a
	touch $@

# The JVM's class-data-sharing archive (src/exactly_once/local/engine/class_archive.py): Spark
# sessions start faster with it, and work the same without it. Rebuilt when the jars change,
# or the session's settings: which classes an update loads depends on them.
$(CLASS_ARCHIVE): $(VENV)/.installed $(JARS)/.resolved $(LOCAL_FS_JAR) $(LOCAL_CATALOG_JAR) \
                  $(HADOOP_DEFAULTS_JAR) \
                  $(wildcard src/exactly_once/local/engine/*.py)
	$(BIN)/python -m exactly_once.local.execution.train_jvm $@

demo: setup
	$(BIN)/exactly-once broker start
	$(BIN)/exactly-once generate --orders 500 --players 200 --events 5000
	$(BIN)/exactly-once run

# Lint first: CI runs only `make test`, and the style and type checks are part of passing.
# The set-up's parts are independent (pip, Maven, the Go build of the Databricks CLI, dbx's pip,
# apt), so they and lint (once the venv is there) are made in parallel: the downloads overlap
# the Go build, which alone takes minutes. Each part's output is kept together.
# The tests run in two workers (pytest-xdist), a test file per worker at a time, so a file's
# module fixtures are set up once: each worker has its own Spark session and broker, on ports
# of their own; the files that use the standalone cluster run in one worker, which starts it
# once (tests/cluster_fixtures.py). 16.9 minutes against 20.5 in one (BENCHMARKS.md, "Test suite").
PYTEST_WORKERS ?= 2
test:
	$(MAKE) -j4 --output-sync=target test-setup lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

# Style, then types (mypy reads its settings, `files = src` included, from pyproject.toml).
# Only the venv: in `make test` lint then runs beside the class archive's training (a
# minute), not after it.
lint: $(VENV)/.installed
	$(BIN)/ruff check src tests pipelines docs/hooks
	$(BIN)/mypy

# The documentation site (mkdocs.yml) into site/, in strict mode: a broken link, a missing page or
# a page left out of the nav fails it. The CLI reference and the import layers are generated from
# the code as it builds (docs/hooks/generated.py). The suite builds it the same way (test_docs.py).
# Not --quiet: it hides the warnings, and strict mode then has none to fail on.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

broker-start: setup
	$(BIN)/exactly-once broker start
broker-stop: setup
	$(BIN)/exactly-once broker stop

# A Spark standalone cluster on this machine: a master and two one-core workers (README,
# "Beyond one machine").
cluster-start: setup
	$(BIN)/exactly-once cluster start
cluster-stop: setup
	$(BIN)/exactly-once cluster stop

# A local S3-compatible object store (versitygw, built below) on 127.0.0.1:9000, bucket `lake`.
s3-start: setup s3-server s3a-jars
	$(BIN)/python -m exactly_once.services.s3_server start 9000
s3-stop: setup
	$(BIN)/python -m exactly_once.services.s3_server stop

clean:
	-$(BIN)/exactly-once cluster stop
	-$(BIN)/python -m exactly_once.services.s3_server stop
	-$(BIN)/exactly-once broker stop
	rm -rf .local

# --- Deployment (docs/deploy.md) -------------------------------------------------------------------
# The Databricks CLI is a Go program, built from its released module source into .cache/go/bin
# (needs only the Go module proxy). Not `go install ...@version`: the proxy here refuses the
# module's version list, which `go install` reads for deprecation notices. The checksum database
# is not reachable either, so the module's checksum is pinned below and compared instead; its
# dependencies are verified against the module's own go.sum by `go build`.
# The module and build caches are Go's own (`go env GOMODCACHE GOCACHE`, under the user's home),
# shared by every checkout as pip's is: in the clone they cost each new clone 350 s of CPU to
# download and compile both programs; from Go's caches it is seconds. Built without inlining
# (`-l`): about 0.8 of the compile time from an empty cache, for about 1.2x the CPU per request
# of programs that mostly wait on a socket (BENCHMARKS.md, "A new clone's set-up").
DATABRICKS_CLI_VERSION := v0.298.0
DATABRICKS_CLI_SUM     := h1:gflUpHsNaM0rh/5uCVlwWMp4vdrEdQMDcsW3OwVZ6iY=
GO_CACHE   := $(CURDIR)/.cache/go
# Go's caches if it has a home to keep them in (it has none without $HOME), else the clone's.
GO_HOME_CACHES = $(shell c=$$(go env GOCACHE) m=$$(go env GOMODCACHE) && [ "$$c" != off ] && \
                   [ -n "$$m" ] && mkdir -p "$$c" "$$m" 2>/dev/null && echo yes)
GO_ENV     = $(if $(GO_HOME_CACHES),,GOMODCACHE=$(GO_CACHE)/mod GOCACHE=$(GO_CACHE)/build) \
             GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
             GONOSUMDB=github.com/databricks/cli,github.com/versity/versitygw
GO_BUILD   := go build -trimpath -gcflags=all=-l
# $(call go_module,MODULE,VERSION,SUM): download the module, compare its checksum with the pinned
# one, then cd into its source (shell, for a recipe line to continue with `&&`). `go mod download
# -json` reports a failed download in its JSON, on stdout: shown as it is.
go_module = { module=$$(env $(GO_ENV) go mod download -json $(1)@$(2)) || \
                { echo "$$module" >&2; exit 1; }; } && \
  sum=$$(echo "$$module" | $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["Sum"])') && \
  { test "$$sum" = "$(3)" || { echo "$(1) $(2): checksum $$sum, expected $(3)"; exit 1; }; } && \
  cd "$$(echo "$$module" | $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
DATABRICKS := $(GO_CACHE)/bin/databricks
DBX_VENV   := .venv-dbx

.PHONY: databricks-cli dbx-env bundle-config bundle-validate
databricks-cli: $(GO_CACHE)/bin/.databricks-$(DATABRICKS_CLI_VERSION)
$(GO_CACHE)/bin/.databricks-$(DATABRICKS_CLI_VERSION):
	@mkdir -p $(GO_CACHE)/bin
	$(call go_module,github.com/databricks/cli,$(DATABRICKS_CLI_VERSION),$(DATABRICKS_CLI_SUM)) && \
	  env $(GO_ENV) $(GO_BUILD) \
	    -ldflags "-X github.com/databricks/cli/internal/build.buildVersion=$(DATABRICKS_CLI_VERSION:v%=%)" \
	    -o $(DATABRICKS) .
	$(DATABRICKS) --version
	touch $@

# Versity's S3 gateway (versitygw), a real S3-compatible store over a directory, built from its
# Go module like the Databricks CLI above (checksum pinned, dependencies checked against its go.sum).
VERSITYGW_VERSION := v1.8.0
VERSITYGW_SUM     := h1:au+wI+aybno/STsQiSm35Uu6Q6iK5MWReQxgO6SEMFc=
s3-server: $(GO_CACHE)/bin/.versitygw-$(VERSITYGW_VERSION)
$(GO_CACHE)/bin/.versitygw-$(VERSITYGW_VERSION):
	@mkdir -p $(GO_CACHE)/bin
	$(call go_module,github.com/versity/versitygw,$(VERSITYGW_VERSION),$(VERSITYGW_SUM)) && \
	  env $(GO_ENV) $(GO_BUILD) -o $(GO_CACHE)/bin/versitygw ./cmd/versitygw
	$(GO_CACHE)/bin/versitygw --version
	touch $@

# dbx 0.8 (legacy) in its own environment: it pins pydantic<2, which must never reach $(VENV).
# typer 0.7 (a dbx dependency) crashes on `--help` with click >= 8.2.
dbx-env: $(DBX_VENV)/.installed
$(DBX_VENV)/.installed:
	test -x $(DBX_VENV)/bin/python || $(PYTHON) -m venv $(DBX_VENV)
	echo '*' > $(DBX_VENV)/.gitignore
	$(DBX_VENV)/bin/pip install -q --no-compile 'dbx==0.8.19' 'click<8.2'
	touch $@

# Regenerate resources/exactly_once.pipeline.yml and conf/deployment.yml from conf/.
bundle-config: $(VENV)/.installed
	$(BIN)/python -m exactly_once.deploy write

# `databricks bundle validate --strict` for both targets, offline (tests/test_bundle.py does this).
bundle-validate: test-setup
	$(BIN)/pytest -q tests/test_bundle.py

# Headless Chromium (Debian package) for the dashboard test; installed only when missing.
.PHONY: chromium
chromium:
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
