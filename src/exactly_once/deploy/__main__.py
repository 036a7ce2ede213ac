"""`python -m exactly_once.deploy write | check | variables TARGET` (see the package docstring)."""

from __future__ import annotations

import sys

from exactly_once.deploy import bundle_resource, contract_schema, dbx_deployment
from exactly_once.paths import PROJECT_ROOT


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["write"]:
        written = [(bundle_resource.PIPELINE_RESOURCE, bundle_resource.render_pipeline_resource()),
                   (dbx_deployment.DBX_DEPLOYMENT, dbx_deployment.render_dbx_deployment())]
        for path, text in written:
            path.write_text(text)
        schemas = contract_schema.write()
        print("wrote " + ", ".join(str(p.relative_to(PROJECT_ROOT))
                                   for p in [*(p for p, _ in written), *schemas]))
        return 0
    if args == ["check"]:
        found = bundle_resource.problems() + dbx_deployment.problems() + \
            contract_schema.problems()
        for problem in found:
            print(problem, file=sys.stderr)
        return 1 if found else 0
    if len(args) == 2 and args[0] == "variables":
        for name, value in bundle_resource.target_variables(args[1]).items():
            print(f"{name}: {value}")
        return 0
    print("usage: python -m exactly_once.deploy write | check | variables TARGET", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
