"""A Databricks Asset Bundle, read as the Databricks CLI reads it, in plain Python: its files
and target (config.py), variables (variables.py), `${...}` references (references.py), the
local user (current_user.py), its pipelines (pipelines.py) and their notebooks (notebooks.py).
`load_bundle` (loader.py) puts them together.

Imports only `exactly_once.errors` (and PyYAML): the runtime and the CLI build on it.
"""

from exactly_once.bundle.loader import Bundle, load_bundle
from exactly_once.bundle.notebooks import LibrarySource, read_library
from exactly_once.bundle.pipelines import PipelineResource

__all__ = ["Bundle", "LibrarySource", "PipelineResource", "load_bundle", "read_library"]
