"""Columns built as SQL text: one py4j call where PySpark's Column API makes one a column.

In classic PySpark each `F.col`, each alias, each operator and each element of a list of
columns is a call to the JVM of its own, and the runtime builds plans on every micro-batch
(an AUTO CDC batch's was about 375 calls, a struct of twenty columns 42). `F.expr` over SQL
text is one call, whatever the expression's size; the parsed expression is the same as the
Column API's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark on first use: storage and the CLI name columns before a session
    from pyspark.sql import Column


def identifier(name: str) -> str:
    """`name` as a SQL identifier: in backticks, a backtick in it doubled (a keyword or a dot
    in a column's name is then the name's)."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column called `name`: a dot or a backtick in it is the name's, not a struct's field
    (`F.col` alone reads "a.b" as field b of struct a)."""
    from pyspark.sql import functions as F

    return F.col(identifier(name))


def struct_sql(names: Iterable[str]) -> str:
    """SQL for `struct(a, b, ...)` of the columns `names`: its fields named as the columns."""
    return f"struct({', '.join(identifier(n) for n in names)})"


def struct_of(names: Iterable[str]) -> Column:
    """`F.struct` of the columns `names`, as one expression."""
    from pyspark.sql import functions as F

    return F.expr(struct_sql(names))


def matched_on(names: Iterable[str]) -> str:
    """A Delta MERGE's condition: target `t` and source `s` equal on the columns `names`."""
    return " AND ".join(f"t.{identifier(n)} = s.{identifier(n)}" for n in names)


def from_source(names: Iterable[str]) -> dict[str, str | Column]:
    """A Delta MERGE's assignments (`set`, `values`): each column of `names` from source `s`'s."""
    return {identifier(n): f"s.{identifier(n)}" for n in names}
