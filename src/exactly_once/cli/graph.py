"""`exactly-once graph`: the dataflow graph (datasets, flows and what they read)."""

from __future__ import annotations

import argparse

from exactly_once.cli import common

FORMATS = ("mermaid", "dot", "json")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "graph", handle, help="print the dataflow graph: "
                            "datasets with their kind, flows with their kind and what they read")
    common.add_bundle(parser, key="positional")
    common.add_pipelines(parser)
    parser.add_argument("--format", choices=FORMATS, default="mermaid")
    parser.add_argument("--source", type=common.source, help="as for `run`")
    common.add_overrides(parser)
    common.add_configuration(parser)


def handle(args: argparse.Namespace) -> int:
    analysis = common.analyze_pipelines(args)
    if not analysis.ok:  # what a broken query reads is not known: no half a graph
        return common.print_problems(analysis)
    print(analysis.dataflow.render(args.format))
    return 0
