"""`CREATE FLOW name AS AUTO CDC INTO target ...` (and the older `APPLY CHANGES INTO target ...`,
alone or as a flow) read into the arguments of `dp.create_auto_cdc_flow`, which then checks
and registers them as it does a Python file's.

Spark 4.2's parser has no AUTO CDC grammar, so its clauses are read here, in Databricks' words
(https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-apply-changes-into):

    AUTO CDC [ONCE] INTO target FROM STREAM(source) KEYS (keys)
      [IGNORE NULL UPDATES [ON {columns | * EXCEPT (columns)}]]
      [APPLY AS DELETE WHEN condition] [APPLY AS TRUNCATE WHEN condition]
      SEQUENCE BY expression
      [COLUMNS {columns | * EXCEPT (columns)}]
      [STORED AS {SCD TYPE 1 | SCD TYPE 2}]
      [TRACK HISTORY ON {columns | * EXCEPT (columns)}]

A clause is found where its keywords stand outside parentheses, literals and comments; its text
runs to the next clause. `AUTO CDC ONCE INTO target FROM source` is a one-time flow
(https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow): its source is not
read as a stream, so it is named without STREAM, and it is `once=True`. Conditions and the
sequence are Spark SQL expressions, parsed by
`create_auto_cdc_flow` as it parses a Python file's strings. `SYSTEM SEQUENCE BY`, `COLUMNS TO
UPDATE` and `STORED AS BITEMPORAL` are refused, one line each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exactly_once.local.graph.sql_files import Statement

_IDENTIFIER = r"`(?:[^`]|``)*`|[A-Za-z_]\w*"  # a quoted one doubles its backticks
_NAME = rf"(?:{_IDENTIFIER})(?:\s*\.\s*(?:{_IDENTIFIER}))*"
_HEAD = re.compile(rf"(?:AUTO\s+CDC(?P<once>\s+ONCE)?|APPLY\s+CHANGES)\s+INTO\s+"
                   rf"(?P<target>{_NAME})\s+FROM\s+"
                   rf"(?:STREAM\s*\(\s*(?P<paren>{_NAME})\s*\)|STREAM\s+(?P<bare>{_NAME})|"
                   rf"(?P<batch>{_NAME}))", re.I)
_CLAUSES = {
    "keys": r"KEYS",
    "ignore_null_updates": r"IGNORE\s+NULL\s+UPDATES",
    "deletes": r"APPLY\s+AS\s+DELETE\s+WHEN",
    "truncates": r"APPLY\s+AS\s+TRUNCATE\s+WHEN",
    "system_sequence": r"SYSTEM\s+SEQUENCE\s+BY",
    "sequence": r"SEQUENCE\s+BY",
    "columns_to_update": r"COLUMNS\s+TO\s+UPDATE",
    "columns": r"COLUMNS",
    "stored_as": r"STORED\s+AS",
    "track_history": r"TRACK\s+HISTORY\s+ON",
}
_REFUSED = {"system_sequence": "SYSTEM SEQUENCE BY", "columns_to_update": "COLUMNS TO UPDATE"}
_EXCEPT = re.compile(r"\*\s*EXCEPT\s*\((?P<columns>.*)\)\s*$", re.I | re.S)


@dataclass(frozen=True)
class AutoCdc:
    """An AUTO CDC flow: `create_auto_cdc_flow`'s keyword arguments, and CREATE FLOW's
    COMMENT, which the Python function has no argument for."""

    arguments: dict[str, Any] = field(default_factory=dict)
    comment: str | None = None

    @property
    def target(self) -> str:
        return str(self.arguments["target"])


def parse(statement: Statement, blanked: str, at: int, name: str | None) -> AutoCdc:
    """The AUTO CDC flow written from position `at` (`AUTO CDC INTO` or `APPLY CHANGES INTO`)
    of `statement`; `blanked` is its masked text, `name` the flow's (the target's by default)."""
    text = statement.text
    head = _HEAD.match(blanked, at)
    if head is None:
        raise statement.error("AUTO CDC INTO needs a target and FROM STREAM(source)")
    target = _dataset(text[head.start("target"):head.end("target")])
    once = bool(head.group("once"))
    group = "batch" if head.group("batch") else "paren" if head.group("paren") else "bare"
    source = text[head.start(group):head.end(group)].strip()
    if group == "batch" and not once:
        raise statement.error(f"AUTO CDC reads a stream: FROM STREAM({source}) (a one-time "
                              "flow that reads a batch is AUTO CDC ONCE INTO)")
    if once and group != "batch":
        raise statement.error(f"AUTO CDC ONCE reads its source once, as a batch: FROM {source}, "
                              "not STREAM")
    arguments: dict[str, Any] = {
        "target": target, "source": _dataset(source),
        "name": name or target}
    if once:
        arguments["once"] = True
    clauses = _clauses(statement, blanked, head.end())
    for key, what in _REFUSED.items():
        if key in clauses:
            raise statement.error(f"{what} is not supported by the local runtime")
    for required, words in (("keys", "KEYS (columns)"), ("sequence", "SEQUENCE BY")):
        if required not in clauses:
            raise statement.error(f"AUTO CDC INTO needs {words}")
    arguments["keys"] = _columns(statement, clauses["keys"], "KEYS", parenthesized=True)
    arguments["sequence_by"] = clauses["sequence"]
    if "ignore_null_updates" in clauses:
        arguments.update(_ignore_null_updates(statement, clauses["ignore_null_updates"]))
    for key, argument in (("deletes", "apply_as_deletes"), ("truncates", "apply_as_truncates")):
        if key in clauses:
            arguments[argument] = clauses[key]
    if "columns" in clauses:
        arguments.update(_selection(statement, clauses["columns"], "COLUMNS", "column_list",
                                    "except_column_list"))
    if "stored_as" in clauses:
        scd = re.fullmatch(r"SCD\s+TYPE\s+([12])", clauses["stored_as"], re.I)
        if scd is None:
            raise statement.error(f"STORED AS {clauses['stored_as']} is not supported by the "
                                  "local runtime (SCD TYPE 1 or SCD TYPE 2)")
        arguments["stored_as_scd_type"] = int(scd.group(1))
    if "track_history" in clauses:
        arguments.update(_selection(statement, clauses["track_history"], "TRACK HISTORY ON",
                                    "track_history_column_list",
                                    "track_history_except_column_list"))
    return AutoCdc(arguments)


def _clauses(statement: Statement, blanked: str, start: int) -> dict[str, str]:
    """Each clause's text after its keywords, by clause, from `start` on."""
    depth, top = 0, []  # whether each character stands outside parentheses
    for c in blanked:
        top.append(depth == 0)
        depth += (c == "(") - (c == ")")
    found: list[tuple[int, int, str]] = []
    for key, words in _CLAUSES.items():
        for match in re.finditer(rf"\b{words}\b", blanked[start:], re.I):
            begin, end = start + match.start(), start + match.end()
            taken = any(b <= begin < e for b, e, _ in found)
            if top[begin] and not taken:
                found.append((begin, end, key))
    found.sort()
    leading = blanked[start:found[0][0] if found else len(blanked)].strip()
    if leading:
        raise statement.error(f"`{statement.text[start:].split()[0]}` is not a clause of AUTO "
                              "CDC INTO")
    clauses: dict[str, str] = {}
    for i, (_, end, key) in enumerate(found):
        if key in clauses:
            raise statement.error(f"AUTO CDC INTO has two {key.replace('_', ' ')} clauses")
        stop = found[i + 1][0] if i + 1 < len(found) else len(statement.text)
        clauses[key] = statement.text[end:stop].strip()
    return clauses


def _ignore_null_updates(statement: Statement, text: str) -> dict[str, Any]:
    if not text:
        return {"ignore_null_updates": True}
    on = re.match(r"ON\s+(?P<rest>.*)$", text, re.I | re.S)
    if on is None:
        raise statement.error(f"IGNORE NULL UPDATES {text}: ON columns or ON * EXCEPT (columns)")
    return _selection(statement, on.group("rest"), "IGNORE NULL UPDATES ON",
                      "ignore_null_updates_column_list", "ignore_null_updates_except_column_list")


def _selection(statement: Statement, text: str, clause: str, listed: str,
               excepted: str) -> dict[str, Any]:
    """`columns` or `* EXCEPT (columns)` as one of two arguments."""
    except_ = _EXCEPT.match(text)
    if except_:
        return {excepted: _columns(statement, except_.group("columns"), clause)}
    return {listed: _columns(statement, text, clause)}


def _columns(statement: Statement, text: str, clause: str,
             parenthesized: bool = False) -> list[str]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    elif parenthesized:
        raise statement.error(f"{clause} takes a parenthesized list of columns, got {text!r}")
    names = [part.strip() for part in text.split(",")]
    for part in names:
        if not re.fullmatch(_IDENTIFIER, part):
            raise statement.error(f"{clause} takes column names, got {part!r}")
    # As written: create_auto_cdc_flow reads a name as `F.col` does, back quotes included.
    return names


def _dataset(name: str) -> str:
    """A dataset's name as written, `LIVE.` dropped, back quotes removed."""
    parts = [p.strip().strip("`") for p in re.split(r"\s*\.\s*(?=(?:[^`]*`[^`]*`)*[^`]*$)",
                                                     name.strip())]
    return ".".join(parts[1:] if len(parts) == 2 and parts[0].lower() == "live" else parts)
