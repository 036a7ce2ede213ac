# The two commands a newcomer runs: `make demo` (the pipeline end to end on a local Kafka broker)
# and `make test`. Both install what they need first and are safe to run again.
VENV   := .venv
BIN    := $(VENV)/bin
JARS   := .cache/jars
M2     := .cache/m2
PYTHON ?= python3
MVN    := mvn -q -B -Dmaven.repo.local=$(CURDIR)/$(M2)

.PHONY: setup jars demo test lint broker-start broker-stop clean

setup: $(VENV)/.installed $(JARS)/.resolved

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# JVM jars Spark and the local broker need, copied from Maven into a project-local cache.
jars: $(JARS)/.resolved
$(JARS)/.resolved: jvm/spark/pom.xml jvm/kafka-broker/pom.xml
	rm -rf $(JARS)/spark $(JARS)/kafka-broker
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) -f jvm/kafka-broker/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	    -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-broker
	touch $@

demo: setup
	$(BIN)/exactly-once broker start
	$(BIN)/exactly-once generate --orders 500 --players 200 --events 5000
	$(BIN)/exactly-once run

test: setup
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check src tests pipelines

broker-start: setup
	$(BIN)/exactly-once broker start
broker-stop: setup
	$(BIN)/exactly-once broker stop

clean:
	-$(BIN)/exactly-once broker stop
	rm -rf .local
