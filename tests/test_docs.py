"""The documentation a newcomer reads: the README, the site built from docs/ (mkdocs.yml), and
BENCHMARKS.md. No Spark.

The site is built here as `make docs` builds it, in strict mode, so a broken link or anchor, a
missing page or a page left out of the nav fails the suite; its generated parts (the CLI
reference, the import layers: docs/hooks/generated.py) are read back against the code. Every
`exactly-once` command shown in a code block parses with the real parser, every `make` target
shown exists, every benchmark script shown is there, and every error class has its entry in
Troubleshooting.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

import exactly_once
from exactly_once import cli, errors, local
from exactly_once.paths import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
README = PROJECT_ROOT / "README.md"
BENCHMARKS = PROJECT_ROOT / "BENCHMARKS.md"
# The dated history records the commands of its day, at their commits; it is kept as it was.
HISTORY = DOCS / "benchmarks-history.md"
PAGES = sorted(p for p in DOCS.glob("*.md") if p != HISTORY)


def build_site(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=300,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    built = build_site(PROJECT_ROOT, site)
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return site


def page_text(site: Path, page: str) -> str:
    html = (site / page / "index.html").read_text()
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">") \
        .replace("&amp;", "&").replace("&quot;", '"').replace("&#39;", "'")


# -- the site --------------------------------------------------------------------------------------
def test_every_page_of_docs_is_built(site):
    for page in PAGES:
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.exists(), page


def test_the_cli_reference_lists_every_command_and_argument_the_parser_has(site):
    text = page_text(site, "cli")
    assert "<!-- generated" not in text

    def check(prog: str, parser: argparse.ArgumentParser) -> None:
        assert f"{prog}" in text, prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    check(f"{prog} {name}", sub)
            elif action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
                for option in action.option_strings:
                    assert option in text, (prog, option)
                if action.help:
                    words = action.help.replace("`", "").split()[:3]
                    assert " ".join(words) in text, (prog, action.help)

    check("exactly-once", cli.build_parser())
    assert str(PROJECT_ROOT) not in text, "defaults name the reader's checkout, not this one"


def test_the_architecture_page_draws_the_layers_the_code_declares(site):
    text = page_text(site, "architecture")
    assert "<!-- generated" not in text
    layers = re.search(r"flowchart TB.*?layer1 --> .*?$", text, re.S | re.M)
    assert layers, "the import layers' picture"
    for layer in exactly_once.LAYERS:
        if layer != ("local",):
            assert " · ".join(layer) in layers.group(0), layer
    wings = " --> ".join(f"wing_{wing}" for wing in local.WINGS)
    assert wings in layers.group(0)


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """What strict mode is for: a copy of the docs with one link to a page that is not there."""
    for name in ("mkdocs.yml", "README.md", "BENCHMARKS.md"):
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "src").symlink_to(PROJECT_ROOT / "src")
    page = tmp_path / "docs" / "getting-started.md"
    page.write_text(page.read_text() + "\nSee [the old page](no-such-page.md).\n")
    built = build_site(tmp_path, tmp_path / "site")
    output = built.stdout + built.stderr
    assert built.returncode != 0
    assert "contains a link 'no-such-page.md', but the target is not found" in output, output
    assert "Aborted with 1 warnings in strict mode" in output, output


# -- what the pages say against the code -----------------------------------------------------------
def test_every_error_class_has_an_entry_in_troubleshooting():
    text = (DOCS / "troubleshooting.md").read_text()
    listed = set(re.findall(r"^### `(\w+)`$", text, re.M))

    def subclasses(cls: type) -> set[type]:
        return {sub for direct in cls.__subclasses__() for sub in {direct, *subclasses(direct)}}

    classes = {errors.ExactlyOnceError, *subclasses(errors.ExactlyOnceError)}
    assert listed == {c.__name__ for c in classes}


def code_blocks(path: Path) -> list[str]:
    """The lines of the shell code blocks of a Markdown file, a command's continuation lines
    joined to it."""
    lines = []
    for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", path.read_text(), re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.strip())
    return lines


def shown_commands() -> list[tuple[str, str]]:
    return [(path.relative_to(PROJECT_ROOT).as_posix(), line)
            for path in [README, BENCHMARKS, *PAGES] for line in code_blocks(path)]


@pytest.mark.parametrize("where, line", [pytest.param(*c, id=f"{c[0]}: {c[1][:60]}")
                                         for c in shown_commands()])
def test_a_command_shown_is_one_the_code_has(where, line):
    """An `exactly-once` command parses with the parser (argparse exits 2 on anything it does
    not have); a `make` target is the Makefile's; a benchmark script is in benchmarks/."""
    words = shlex.split(line, comments=True)
    words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # VAR=value before it
    if not words:
        return
    program = Path(words[0]).name
    if program == "exactly-once":
        try:
            cli.parse(words[1:])  # as `exactly-once` parses it
        except SystemExit as exit:
            pytest.fail(f"{where}: `{line}` does not parse (exit {exit.code})")
    elif program == "make":
        targets = set(re.findall(r"^([\w.-]+):", (PROJECT_ROOT / "Makefile").read_text(), re.M))
        for target in (w for w in words[1:] if not w.startswith("-") and "=" not in w):
            assert target in targets, f"{where}: make {target}"
    for script in (w for w in words if w.startswith("benchmarks/")):
        assert (PROJECT_ROOT / script).exists(), f"{where}: {script}"


def test_the_commands_are_checked_at_all():
    programs = {Path(shlex.split(line, comments=True)[0]).name for _, line in shown_commands()
                if shlex.split(line, comments=True)}
    assert {"exactly-once", "make"} <= programs, programs


# -- links outside the site ------------------------------------------------------------------------
def headings(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {slugify(h.strip().replace("`", ""), "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("source", [README, BENCHMARKS], ids=lambda p: p.name)
def test_the_links_of_the_files_outside_the_site_resolve(source):
    """MkDocs checks the site's links; README.md and BENCHMARKS.md are read on GitHub."""
    links = re.findall(r"\]\(([^)\s]+)\)", source.read_text())
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (source.parent / path) if path else source
        assert target.exists(), f"{source.name}: {link}"
        if anchor:
            assert anchor in headings(target), f"{source.name}: {link}"


# -- the README a newcomer reads ---------------------------------------------------------------
def test_the_readme_fits_on_a_few_screens_and_starts_with_what_a_newcomer_needs():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:60])
    for needed in ("make demo", "make test", "## Your own bundle", "## Test your pipeline"):
        assert needed in first_screen, needed


def test_benchmarks_open_with_todays_figures():
    """One section per question, each with a figure, a commit and a command."""
    text = BENCHMARKS.read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert [s.splitlines()[0] for s in sections] == [
        "A small update", "The first update", "Throughput against a raw append",
        "Against `spark-pipelines`", "The suite", "A test of your pipeline", "The cluster",
        "The object store",
        "Set-up"]
    for section in sections:
        assert re.search(r"^\|.*`[0-9a-f]{7}`", section, re.M), section.splitlines()[0]
