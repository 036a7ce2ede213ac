"""Where quality outputs go (git-ignored, under .local/quality/)."""

from __future__ import annotations

from exactly_once.paths import LOCAL_DIR

QUALITY_DIR = LOCAL_DIR / "quality"
DEFAULT_DATA_DOCS = QUALITY_DIR / "data_docs"
DEFAULT_DASHBOARD = QUALITY_DIR / "dashboard.html"
