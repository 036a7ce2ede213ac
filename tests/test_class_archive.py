"""`make setup`'s class-data-sharing archive is the one a session's JVM maps at start."""

from __future__ import annotations

import subprocess
import sys

from exactly_once.local.engine import class_archive
from exactly_once.paths import CLASS_ARCHIVE

# -Xshare:on turns "archive skipped" (the default's silent fallback) into a failed start, so the
# session starting at all shows the archive fits this JDK and Spark's class path.
SESSION = """
import sys; from pathlib import Path
from exactly_once.local.engine.session import build_session
from exactly_once.local.engine import jvm_options
options = f'{jvm_options.JIT} {jvm_options.GC} -XX:SharedArchiveFile={sys.argv[2]} -Xshare:on'
build_session(Path(sys.argv[1]), log_level='OFF',
              extra_conf={'spark.driver.extraJavaOptions': options}).stop()
"""


def start_session(tmp_path, archive) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / "wh"), str(archive)],
                          capture_output=True, text=True, timeout=300)


def test_sessions_start_from_the_archive(tmp_path):
    assert CLASS_ARCHIVE.is_file(), "`make setup` builds it"
    assert class_archive.java_options().startswith(f"-XX:SharedArchiveFile={CLASS_ARCHIVE} ")
    done = start_session(tmp_path, CLASS_ARCHIVE)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_an_archive_the_jvm_cannot_use_fails_a_start_that_requires_it(tmp_path):
    """The check above can fail: the same start with an archive that is not one."""
    bogus = tmp_path / "bogus.jsa"
    bogus.write_bytes(b"not an archive")
    assert start_session(tmp_path, bogus).returncode != 0
    assert class_archive.java_options(tmp_path / "missing.jsa") == ""
