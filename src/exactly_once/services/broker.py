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
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from exactly_once.errors import BrokerError
from exactly_once.kafka import admin
from exactly_once.paths import BROKER_DIR, JARS_DIR
from exactly_once.services import lifecycle
from exactly_once.services.processes import HOST, free_port, port_free, reap, terminate

BROKER_JARS = JARS_DIR / "kafka-broker"
JVM_OPTS = ["-Xmx512m", "-Xms128m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


@dataclass(frozen=True)
class BrokerInfo:
    bootstrap: str
    pid: int
    home: Path
    log_file: Path

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


def _state(home: Path) -> lifecycle.StateFile:
    return lifecycle.StateFile(home / "broker.json")


def _log_file(home: Path) -> Path:
    return home / "logs" / "broker.out"


def _is_our_broker(pid: int, home: Path) -> bool:
    """Guards against pid reuse: the process must be kafka.Kafka with this home's config."""
    return lifecycle.runs(pid, b"kafka.Kafka", str(home / "server.properties").encode())


def status(home: Path = BROKER_DIR) -> BrokerInfo | None:
    """The broker running from `home`, or None if there is none (stale state is ignored)."""
    home = Path(home).resolve()
    state = _state(home).read()
    if not state or not _is_our_broker(state["pid"], home):
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
    tail = lifecycle.log_tail([_log_file(home), home / "logs" / "server.log"], lines,
                              lambda line: " ERROR " in line or line.startswith("java."))
    return "\n".join(tail) or "(no log output)"


def _wait_ready(pid: int, port: int, home: Path, timeout: float) -> None:
    """Returns once the broker answers a metadata request; raises if it dies or times out."""
    def died() -> str | None:
        reap(pid)
        return None if lifecycle.runs(pid) else \
            f"broker exited during startup:\n{_log_tail(home)}"

    try:
        lifecycle.wait_ready(
            lambda: lifecycle.port_answers(port) and admin.answers(f"{HOST}:{port}"), died,
            timeout, lambda: f"broker did not become ready on port {port}:\n{_log_tail(home)}",
            BrokerError)
    except BrokerError:
        if lifecycle.runs(pid):  # up but never ready
            terminate(pid, timeout=5)
        raise


def start(port: int = 9092, home: Path = BROKER_DIR, timeout: float = 60) -> BrokerInfo:
    """Starts the broker for `home` on `port`; a broker already running there is returned as is."""
    home = Path(home).resolve()
    running = status(home)
    if running is not None:
        if running.port != port:
            raise BrokerError(f"the broker in {home} is already running on port {running.port}")
        _wait_ready(running.pid, port, home, timeout)  # may still be starting
        return running
    if not port_free(port):
        raise BrokerError(f"port {port} is already in use by another process")
    if not list(BROKER_JARS.glob("kafka_*.jar")):
        raise BrokerError(f"Kafka broker jars missing in {BROKER_JARS}; run `make setup` first")
    (home / "logs").mkdir(parents=True, exist_ok=True)
    controller_port = _controller_port(port)
    (home / "server.properties").write_text(_server_properties(home, port, controller_port))
    (home / "log4j.properties").write_text(LOG4J.format(log_dir=home / "logs"))
    _format_storage(home)
    process = lifecycle.launch(_java("kafka.Kafka", str(home / "server.properties"), home=home),
                               _log_file(home), cwd=home)
    _state(home).write({"pid": process.pid, "port": port})
    _wait_ready(process.pid, port, home, timeout)
    return BrokerInfo(f"{HOST}:{port}", process.pid, home, _log_file(home))


def stop(home: Path = BROKER_DIR, timeout: float = 30) -> bool:
    """Stops the broker of `home`; False if none was running. Topics and data are kept."""
    home = Path(home).resolve()
    running = status(home)
    _state(home).remove()
    if running is None:
        return False
    terminate(running.pid, timeout)
    return True
