"""`exactly-once dry-run`: check the pipeline without reading or writing data (as
`spark-pipelines dry-run`), and that the warehouse's tables can take what it writes now
(local/execution/schema_check.py)."""

from __future__ import annotations

import argparse
import sys

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "dry-run", handle, help="validate the pipeline files "
                            "(imports, datasets read, cycles, each query's analysis, expectation "
                            "SQL, AUTO CDC columns, settings) without reading or writing data")
    common.add_bundle(parser, key="positional")
    common.add_pipelines(parser)
    parser.add_argument("--source", type=common.source, help="as for `run`")
    common.add_warehouse(parser, help="the warehouse whose tables the pipeline must still fit: "
                         "a change they cannot take is a problem, as `run` refuses it "
                         "(default: the pipeline's, under the bundle's .local/)")
    common.add_overrides(parser)
    common.add_configuration(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.errors import ExactlyOnceError
    from exactly_once.local.execution import schema_check
    from exactly_once.local.graph.dry_run import Problem
    from exactly_once.local.storage.warehouse import Warehouse

    analysis = common.analyze_pipelines(args)
    pipeline = common.pipeline_of(args)
    lake = Warehouse(common.warehouse_of(args))
    try:  # where each table is stored (a declared `path`), as an update finds it
        lake = lake.declaring(analysis.graph.definitions())
    except ExactlyOnceError as err:
        analysis.problems.append(Problem(str(err)))
    found = schema_check.breakages(analysis, lake, [t.name for t in analysis.graph.tables()],
                                   schema_check.recorded(lake))
    if found:
        analysis.problems.append(Problem(str(schema_check.refusal(found, analysis.dataflow))))
    where = args.pipelines or f"pipeline `{pipeline.key}` of {pipeline.bundle.root}"
    if not analysis.ok:
        print(f"dry run: {len(analysis.problems)} problem(s) in {where}")
        return common.print_problems(analysis)
    flows = analysis.dataflow.flows
    print(f"dry run: {len(analysis.files)} pipeline files, {len(analysis.dataflow.datasets)} "
          f"datasets, {len(flows)} flows; no problems")
    print(f"publishes to {pipeline.namespace.catalog}.{pipeline.namespace.schema} "
          f"(target {pipeline.bundle.target}); warehouse {lake.root}")
    for line in common.not_local(pipeline):
        print(line)
    print(analysis.dataflow.text())
    for warning in analysis.warnings:
        print(f"exactly-once: warning: {warning.line()}", file=sys.stderr)
    return 0
