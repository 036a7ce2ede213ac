"""What every deployment deploys, whichever tool does it: the targets and the quality job's
command line."""

from __future__ import annotations

DEPLOY_TARGETS = ("dev", "prod")


def quality_parameters(target: str, schema: str) -> list[str]:
    """argv of `exactly-once` in the quality job: validate the target's published tables."""
    return ["quality", "validate", "--target", target, "--schema", schema]
