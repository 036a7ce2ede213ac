"""A real single-node Apache Kafka broker (KRaft, broker+controller in one JVM) for local runs.

The broker runs detached from the Python process that started it, so `start` and `stop` can be
called from different CLI invocations. Everything it owns lives under one *home* directory:

    home/server.properties   generated on every start (the controller port changes each time)
    home/log4j.properties    sends the broker's logs to home/logs
    home/broker.json         pid and port of the running broker (the pid file)
    home/data/               the log dirs (formatted once, on first start)
    home/logs/broker.out     the JVM's stdout/stderr

Several homes can run side by side on different ports (the tests do this).
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from exactly_once.errors import BrokerError
from exactly_once.paths import BROKER_DIR, JARS_DIR
from exactly_once.processes import free_port, terminate
from exactly_once.processes import pid_alive as _pid_alive
from exactly_once.processes import port_free as _port_free
from exactly_once.processes import reap as _reap

BROKER_JARS = JARS_DIR / "kafka-broker"
HOST = "127.0.0.1"
JVM_OPTS = ["-Xmx512m", "-Xms128m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
# librdkafka logs every refused connection; the callers only care about the final outcome.
# Every client the project creates (admin, producer) logs here, through `client_config`.
RDKAFKA_LOGGER = logging.getLogger("exactly_once.kafka.rdkafka")
RDKAFKA_LOGGER.addHandler(logging.NullHandler())
RDKAFKA_LOGGER.propagate = False


@dataclass(frozen=True)
class BrokerInfo:
    bootstrap: str
    pid: int
    home: Path
    log_file: Path

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


def _state_file(home: Path) -> Path:
    return home / "broker.json"


def _log_file(home: Path) -> Path:
    return home / "logs" / "broker.out"


def _is_our_broker(pid: int, home: Path) -> bool:
    """Guards against pid reuse: the process must be kafka.Kafka with this home's config."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline and str(home / "server.properties").encode() in cmdline


def _port_answers(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _read_state(home: Path) -> dict | None:
    try:
        return json.loads(_state_file(home).read_text())
    except (OSError, ValueError):
        return None


def status(home: Path = BROKER_DIR) -> BrokerInfo | None:
    """The broker running from `home`, or None if there is none (stale state is ignored)."""
    home = Path(home).resolve()
    state = _read_state(home)
    if not state or not _pid_alive(state["pid"]) or not _is_our_broker(state["pid"], home):
        return None
    return BrokerInfo(f"{HOST}:{state['port']}", state["pid"], home, _log_file(home))


def _server_properties(home: Path, port: int, controller_port: int) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(home / "data"),
        "num.partitions": "2",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        # 50 partitions per internal topic (the default) makes the first group join slow.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.segment.bytes": str(16 * 1024 * 1024),
        # Generated streams carry fixed (possibly old) event timestamps: time-based retention
        # would silently delete them, and timestamp bounds would reject them.
        "log.retention.ms": "-1",
        # A topic given a short retention (the data-loss tests) loses its old segments within
        # seconds, not the default 5 minutes; with no retention the check costs nothing.
        "log.retention.check.interval.ms": "1000",
        "log.message.timestamp.before.max.ms": str(2**63 - 1),
        "log.message.timestamp.after.max.ms": str(2**63 - 1),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log_dir}/server.log
log4j.appender.file.MaxFileSize=10MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _java(main: str, *args: str, home: Path) -> list[str]:
    return [
        "java", *JVM_OPTS, f"-Dlog4j.configuration=file:{home / 'log4j.properties'}",
        f"-Dkafka.logs.dir={home / 'logs'}", "-cp", f"{BROKER_JARS}/*", main, *args,
    ]


def _cluster_id() -> str:
    """What `StorageTool random-uuid` prints (url-safe base64, no padding), without a JVM."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # Kafka rejects ids that look like command-line flags
            return cid


def _format_storage(home: Path) -> None:
    """Formats the log dir once; later starts reuse it (and its topics)."""
    if (home / "data" / "meta.properties").exists():
        return
    cmd = _java("kafka.tools.StorageTool", "format", "-t", _cluster_id(),
                "-c", str(home / "server.properties"), home=home)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise BrokerError(f"formatting {home / 'data'} failed: {' | '.join(tail)}")


def _controller_port(port: int) -> int:
    """A fresh free port for the KRaft controller listener (static voters allow it to change)."""
    while (candidate := free_port()) == port:
        pass
    return candidate


def _log_tail(home: Path, lines: int = 15) -> str:
    """The broker's error lines if it logged any (stack frames skipped), else its last lines."""
    text: list[str] = []
    for log in (_log_file(home), home / "logs" / "server.log"):
        if log.exists():
            text += log.read_text(errors="replace").splitlines()
    errors = [line for line in text if " ERROR " in line or line.startswith("java.")]
    return "\n".join((errors or text)[-lines:]) or "(no log output)"


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """A librdkafka client's configuration: `bootstrap`, the given settings, the quiet logger.

    Typed `Any` because librdkafka takes a `logging.Logger` as `logger`, which confluent-kafka's
    annotations (str, int, float, bool values) leave out.
    """
    return {"bootstrap.servers": bootstrap, **settings, "logger": RDKAFKA_LOGGER}


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap, **{"socket.timeout.ms": 5000}))


def require_reachable(bootstrap: str, timeout: float = 5) -> None:
    """Returns once Kafka at `bootstrap` answers a metadata request, else BrokerError."""
    try:
        _admin(bootstrap).list_topics(timeout=timeout)
    except KafkaException:
        raise BrokerError(f"cannot reach Kafka at {bootstrap}; start the local broker with "
                          "`exactly-once broker start`") from None


def log_start_offsets(bootstrap: str, partitions: list[tuple[str, int]],
                      timeout: float = 5) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the first offset the partition still holds: 0 until retention (or
    a records deletion) removes its oldest records, then the first one left."""
    requests = {TopicPartition(topic, partition): OffsetSpec.earliest()
                for topic, partition in partitions}
    admin = _admin(bootstrap)  # kept until the answers are in: a dropped client drops them
    try:
        futures = admin.list_offsets(requests, request_timeout=timeout)
        return {(tp.topic, tp.partition): future.result(timeout=timeout + 5).offset
                for tp, future in futures.items()}
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise BrokerError(f"cannot read the log start offsets from Kafka at {bootstrap}: "
                          f"{exc.args[0] if exc.args else 'no answer'}") from None


def _wait_ready(pid: int, port: int, home: Path, deadline: float) -> None:
    """Returns once the broker answers a metadata request; raises if it dies or times out."""
    while time.monotonic() < deadline:
        _reap(pid)
        if not _pid_alive(pid):
            raise BrokerError(f"broker exited during startup:\n{_log_tail(home)}")
        if _port_answers(port):
            try:
                _admin(f"{HOST}:{port}").list_topics(timeout=5)
                return
            except KafkaException:
                pass
        time.sleep(0.3)
    terminate(pid, timeout=5)
    raise BrokerError(f"broker did not become ready on port {port}:\n{_log_tail(home)}")


def start(port: int = 9092, home: Path = BROKER_DIR, timeout: float = 60) -> BrokerInfo:
    """Starts the broker for `home` on `port`; a broker already running there is returned as is."""
    home = Path(home).resolve()
    running = status(home)
    if running is not None:
        if running.port != port:
            raise BrokerError(f"the broker in {home} is already running on port {running.port}")
        _wait_ready(running.pid, port, home, time.monotonic() + timeout)  # may still be starting
        return running
    if not _port_free(port):
        raise BrokerError(f"port {port} is already in use by another process")
    if not list(BROKER_JARS.glob("kafka_*.jar")):
        raise BrokerError(f"Kafka broker jars missing in {BROKER_JARS}; run `make setup` first")
    (home / "logs").mkdir(parents=True, exist_ok=True)
    controller_port = _controller_port(port)
    (home / "server.properties").write_text(_server_properties(home, port, controller_port))
    (home / "log4j.properties").write_text(LOG4J.format(log_dir=home / "logs"))
    _format_storage(home)
    with _log_file(home).open("ab") as out:
        proc = subprocess.Popen(
            _java("kafka.Kafka", str(home / "server.properties"), home=home),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=home,
        )
    state = {"pid": proc.pid, "port": port}
    _state_file(home).write_text(json.dumps(state))
    _wait_ready(proc.pid, port, home, time.monotonic() + timeout)
    return BrokerInfo(f"{HOST}:{port}", proc.pid, home, _log_file(home))


def stop(home: Path = BROKER_DIR, timeout: float = 30) -> bool:
    """Stops the broker of `home`; False if none was running. Topics and data are kept."""
    home = Path(home).resolve()
    running = status(home)
    _state_file(home).unlink(missing_ok=True)
    if running is None:
        return False
    terminate(running.pid, timeout)
    return True


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30) -> None:
    """Creates the missing topics (replication 1); existing topics are left as they are."""
    admin = _admin(bootstrap)
    try:
        existing = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise BrokerError(f"cannot reach Kafka at {bootstrap}: {exc.args[0]}") from None
    missing = [NewTopic(name, num_partitions=n, replication_factor=1)
               for name, n in topics.items() if name not in existing]
    futures = admin.create_topics(missing, request_timeout=timeout) if missing else {}
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BrokerError(f"creating topic {name!r} failed: {exc.args[0]}") from None
    _wait_for_leaders(admin, list(topics), time.monotonic() + timeout)


def _wait_for_leaders(admin: AdminClient, names: list[str], deadline: float) -> None:
    """Topic creation returns before every partition has a leader; producing needs one."""
    while True:
        meta = admin.list_topics(timeout=5).topics
        if all(n in meta and meta[n].partitions and meta[n].error is None
               and all(p.leader >= 0 for p in meta[n].partitions.values()) for n in names):
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topics {names} have no partition leaders yet")
        time.sleep(0.2)
