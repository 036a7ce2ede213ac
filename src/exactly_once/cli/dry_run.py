"""`exactly-once dry-run`: check the pipeline without reading or writing data (as
`spark-pipelines dry-run`)."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "dry-run", handle, help="validate the pipeline files "
                            "(imports, datasets read, cycles, each query's analysis, expectation "
                            "SQL, AUTO CDC columns, settings) without reading or writing data")
    common.add_pipelines(parser)
    parser.add_argument("--source", type=common.source, help="as for `run`")
    common.add_overrides(parser)
    common.add_configuration(parser)


def handle(args: argparse.Namespace) -> int:
    analysis = common.analyze_pipelines(args)
    if not analysis.ok:
        print(f"dry run: {len(analysis.problems)} problem(s) in {args.pipelines}")
        return common.print_problems(analysis)
    flows = analysis.dataflow.flows
    print(f"dry run: {len(analysis.files)} pipeline files, {len(analysis.dataflow.datasets)} "
          f"datasets, {len(flows)} flows; no problems")
    print(analysis.dataflow.text())
    return 0
