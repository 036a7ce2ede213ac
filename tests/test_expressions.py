"""How an update evaluates expressions (engine/expressions.py): interpreted while it runs, the
session's own setting back once it ends, also when updates overlap or one fails."""

from __future__ import annotations

import threading

import pytest

from exactly_once.local.engine.expressions import (
    FACTORY_MODE,
    compiled_classes,
    interpreted_expressions,
)


def mode(spark) -> str | None:
    return spark.conf.get(FACTORY_MODE, None)


def test_an_update_s_expressions_are_interpreted_and_the_user_s_setting_comes_back(spark):
    spark.conf.set(FACTORY_MODE, "CODEGEN_ONLY")  # a user's own choice, kept
    try:
        with interpreted_expressions(spark):
            assert mode(spark) == "NO_CODEGEN"
        assert mode(spark) == "CODEGEN_ONLY"
    finally:
        spark.conf.unset(FACTORY_MODE)
    with interpreted_expressions(spark):
        assert mode(spark) == "NO_CODEGEN"
    assert spark.conf.get(FACTORY_MODE) == "FALLBACK"  # Spark's default, as before


def test_overlapping_updates_restore_once_the_last_one_ends(spark):
    """Two updates of different warehouses in one session: the first to end must not give the
    other compiled expressions, nor the last leave the session interpreted."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[str | None] = []

    def first() -> None:
        with interpreted_expressions(spark):
            first_in.set()
            second_in.wait(30)
        first_out.set()

    def second() -> None:
        first_in.wait(30)
        with interpreted_expressions(spark):
            second_in.set()
            first_out.wait(30)
            seen.append(mode(spark))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == ["NO_CODEGEN"]
    assert mode(spark) is None


def test_a_failing_update_restores_the_setting(spark):
    with pytest.raises(RuntimeError), interpreted_expressions(spark):
        raise RuntimeError("a flow failed")
    assert mode(spark) is None


def test_interpreted_queries_compile_no_class(spark):
    """What `run --profile` counts: Janino compilations in the JVM."""
    query = spark.range(7).selectExpr("id * 3 + 11 AS x", "concat('k', id) AS k").where("x > 1")
    with interpreted_expressions(spark):
        before = compiled_classes(spark)
        assert len(query.collect()) == 7
        assert compiled_classes(spark) == before
    before = compiled_classes(spark)
    spark.range(5).selectExpr("id * 5 + 13 AS y", "concat('q', id) AS q").collect()
    assert compiled_classes(spark) > before  # the counter counts
