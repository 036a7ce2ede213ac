"""The contract's fields as `topics.<topic>.schema` declares them, and the one JSON form each of
their types reads, without Spark: what the pipeline's parse (transforms/silver.py) and the
published JSON Schema (deploy/contract_schema.py) share.

    STRING          a JSON string
    INT, BIGINT     a JSON integer literal within the type's range (not 1.0, 1e2 or "1")
    DECIMAL(p, s)   a decimal string with at most s places that DECIMAL(p, s) holds exactly
    TIMESTAMP       an RFC 3339 date-time string with a zone (TIMESTAMP_PATTERN)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exactly_once.errors import SettingsError

# TIMESTAMP fields: an RFC 3339 date-time with a zone, read to the microsecond (more digits would
# be truncated), years 1000-9999, offsets within +-14:00 (the ones in use). `\z` is the end of the
# text (Java's `$` would also match before a final line break).
TIMESTAMP_PATTERN = (r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                     r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
                     r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)\z")
DECIMAL_LITERAL = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?\z"
NEGATIVE_ZERO = r"^-0(\.0+)?\z"
# The integer types' ranges.
INTEGER_BOUNDS = {"int": (-2**31, 2**31 - 1), "bigint": (-2**63, 2**63 - 1)}


def decimal_pattern(precision: int, scale: int) -> str:
    """A non-negative decimal string that DECIMAL(precision, scale) holds exactly."""
    return rf"^(0|[1-9][0-9]{{0,{precision - scale - 1}}})(\.[0-9]{{1,{scale}}})?\z"


@dataclass(frozen=True)
class ContractField:
    """One field of the contract: its name and Spark type, as `simpleString` writes it
    (`string`, `int`, `bigint`, `decimal(18,2)`, `timestamp`)."""

    name: str
    type: str

    @property
    def decimal(self) -> tuple[int, int] | None:
        """(precision, scale) of a DECIMAL field."""
        found = re.fullmatch(r"decimal\((\d+),(\d+)\)", self.type)
        return (int(found[1]), int(found[2])) if found else None


_TYPE = re.compile(r"(string|int|integer|bigint|long|timestamp|decimal\s*\(\s*\d+\s*,\s*\d+\s*\))",
                   re.IGNORECASE)
_CANONICAL = {"integer": "int", "long": "bigint"}


def contract_fields(ddl: str, setting: str = "schema") -> list[ContractField]:
    """The fields of a contract's DDL (`event_id STRING, amount DECIMAL(18,2), ...`), in order;
    a type the contract has no JSON form for is a SettingsError naming `setting`."""
    fields = []
    for part in re.split(r",(?![^(]*\))", ddl):
        name, _, type_text = part.strip().partition(" ")
        kind = _TYPE.fullmatch(type_text.strip())
        if not name or kind is None:
            raise SettingsError(f"setting {setting}: `{part.strip()}` is not `NAME TYPE` with "
                                "TYPE one of STRING, INT, BIGINT, DECIMAL(p,s), TIMESTAMP")
        type_name = re.sub(r"\s+", "", kind[1].lower())
        fields.append(ContractField(name.strip("`"), _CANONICAL.get(type_name, type_name)))
    return fields
