"""A bad bundle is one line naming its file, line and key, as the Databricks CLI refuses it
(src/exactly_once/bundle/), or a local refusal where the bundle needs a workspace."""

from __future__ import annotations

import json

import pytest
from bundle_files import (
    BASE,
    BUNDLES,
    USER,
    a_bundle,
    pipeline_yml,
    refused,
    the_user,  # noqa: F401 - autouse: every test runs as the same workspace user
    with_target,
    write,
)
from test_cli_errors import covers

from exactly_once.bundle import load_bundle
from exactly_once.errors import BundleError


def test_no_databricks_yml(tmp_path, monkeypatch):
    assert refused(tmp_path) == f"{tmp_path}: no databricks.yml (nor databricks.yaml, " \
                                f"bundle.yml, bundle.yaml) in this folder"
    monkeypatch.chdir(tmp_path)
    assert refused().startswith(f"no databricks.yml in {tmp_path} or any folder above it")
    write(tmp_path, {"databricks.yml": BASE, "bundle.yml": BASE})
    assert "several bundle configuration files (databricks.yml, bundle.yml)" in refused()


def test_invalid_yaml_names_the_file_and_line(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\nvariables: [\n"})
    assert refused(tmp_path).startswith(f"{tmp_path}/databricks.yml:4: invalid YAML: ")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\n  name: c\n"})
    assert refused(tmp_path) == (f"{tmp_path}/databricks.yml:3: invalid YAML: mapping key "
                                 f"`name` already defined")


def test_an_unknown_target_lists_the_targets(tmp_path):
    message = refused(BUNDLES / "python_template_like", target="staging")
    assert message.endswith("databricks.yml: targets: no target `staging`; the bundle's "
                            "targets: dev, prod")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ntargets:\n  a: {}\n  b: {}\n"})
    assert refused(tmp_path).endswith("none is marked `default: true`; name one of a, b")


def test_a_variable_without_a_value_is_named(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\nvariables:\n  catalog:\n"
                                       "    description: c\n"})
    assert refused(tmp_path) == (f"{tmp_path}/databricks.yml:5: variables.catalog: no value "
                                 f"for variable `catalog` in target `default`; set its "
                                 f"`default` (or the target's `variables`), or pass --var "
                                 f"catalog=... or BUNDLE_VAR_catalog")
    write(tmp_path, {"databricks.yml": BASE})
    assert refused(tmp_path, variables={"nope": "1"}).startswith(
        "--var nope=...: variable `nope` is not declared in the bundle")


def test_an_unresolved_reference_names_the_file_line_and_key(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("""
        catalog: ${var.catalog}
        schema: ${var.schema}
    """))
    assert refused(root) == (f"{tmp_path}/resources/p.pipeline.yml:5: resources.pipelines.p"
                             f".schema: reference does not exist: ${{var.schema}}")


def test_a_cycle_of_references(tmp_path):
    base = BASE.replace("    default: main\n",
                        "    default: ${var.schema}\n  schema:\n    default: x_${var.catalog}\n")
    root = a_bundle(tmp_path, pipeline_yml("catalog: ${var.catalog}\n"), base=base)
    message = refused(root)
    assert "cycle detected in references: ${var.catalog} -> ${var.schema} -> ${var.catalog}" \
        in message or "cycle detected in references: ${var.schema} -> ${var.catalog} -> " \
        "${var.schema}" in message
    assert message.startswith(f"{tmp_path}/databricks.yml:")


def test_a_lookup_variable_is_refused_where_it_is_used(tmp_path):
    base = BASE + "  warehouse:\n    lookup:\n      warehouse: Shared\n"
    pipeline = pipeline_yml("configuration:\n  wh: ${var.warehouse}\n")
    root = a_bundle(tmp_path, pipeline, base=base)
    assert refused(root) == (
        f"{tmp_path}/resources/p.pipeline.yml:5: resources.pipelines.p.configuration.wh: "
        f"${{var.warehouse}} has no local value: variable `warehouse` is a `lookup`, which "
        f"needs a workspace; give it a value with --var warehouse=... or BUNDLE_VAR_warehouse")
    given = load_bundle(root, variables={"warehouse": "abc"})
    assert given.pipeline().configuration == {"wh": "abc"}
    unused = a_bundle(tmp_path, pipeline_yml("name: p\n"), base=base)
    assert load_bundle(unused).ignored["variables (lookup)"] == {
        "warehouse": {"warehouse": "Shared"}}


def test_references_with_no_local_value(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("configuration:\n  id: "
                                           "${workspace.current_user.id}\n"))
    assert refused(root).endswith("resources.pipelines.p.configuration.id: "
                                  "${workspace.current_user.id} has no local value: the "
                                  "workspace user's `id` is known only on a workspace; locally "
                                  f"the user is `{USER}`")
    root = a_bundle(tmp_path, pipeline_yml("configuration:\n  me: ${resources.pipelines.p.id}\n"))
    assert refused(root).endswith("${resources.pipelines.p.id} is known only once the bundle "
                                  "is deployed; it has no local value")


@pytest.mark.parametrize("library, files, expected", [
    ("glob:\n  include: ../src/none/**", {}, "resources.pipelines.p.libraries[0].glob.include: "
     "`../src/none/**` matches no Python or SQL source file"),
    ("file:\n  path: ../src/gone.py", {}, "resources.pipelines.p.libraries[0].file.path: file "
     "`../src/gone.py` not found"),
    ("notebook:\n  path: ../src/nb", {"src/nb.py": "# Databricks notebook source\n"},
     "notebook `../src/nb` not found; did you mean `../src/nb.py`? (the Databricks CLI wants "
     "a local notebook's extension)"),
    ("file:\n  path: ../src/nb.py", {"src/nb.py": "# Databricks notebook source\n"},
     "`../src/nb.py` is a notebook; list it as `notebook: path:`"),
    ("notebook:\n  path: ../src/a.py", {}, "`../src/a.py` is not a notebook"),
    ("glob:\n  include: ../src/**\n  exclude: ../src/b.sql", {},
     "libraries[0].glob: `exclude` is not a setting of a `glob` library"),
    ("file:\n  path: /Workspace/Users/me/a.py", {}, "`/Workspace/Users/me/a.py` is a workspace "
     "path, which has no local copy"),
    ("file:\n  path: ../../elsewhere.py", {}, "is outside the bundle's folder"),
    ("glob:\n  include: ../src", {}, "`../src` is a folder; write `../src/**` to include its "
     "files"),
])
def test_a_library_that_matches_nothing_or_is_not_what_it_says(tmp_path, library, files,
                                                               expected):
    root = a_bundle(tmp_path / "b", pipeline_yml("libraries:\n  - " +
                                                 library.replace("\n", "\n    ") + "\n"),
                    **files)
    message = refused(root)
    assert message.startswith(f"{tmp_path}/b/resources/p.pipeline.yml:")
    assert expected in message


def test_the_bundles_own_rules(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ninclude:\n  - resources/p.yml\n"})
    assert refused(tmp_path).endswith("include: `resources/p.yml` does not match any file")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ninclude:\n  - src/*\n",
                     "src/a.py": ""})
    assert "which is not a YAML or JSON file" in refused(tmp_path)
    write(tmp_path, {"databricks.yml": "include: []\n"})
    assert refused(tmp_path).endswith("databricks.yml: bundle.name: not set (every bundle has "
                                      "a name)")
    write(tmp_path, {"databricks.yml": with_target("  prod:\n    variables:\n      other: 1\n")})
    assert "targets.prod.variables.other: variable `other` is not defined" in \
        refused(tmp_path, target="prod")
    write(tmp_path, {"databricks.yml": BASE.replace("development", "testing")})
    assert "`testing` is not a mode" in refused(tmp_path)
    write(tmp_path, {"databricks.yml": with_target("  prod:\n    variables:\n      catalog: 1\n")})
    assert load_bundle(tmp_path, target="prod").variables == {"catalog": 1}  # a bare default


def test_a_resource_key_defined_twice_and_a_merge_of_two_types(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("name: p\n"),
                    **{"resources/q.yml": pipeline_yml("name: q\n")})
    assert "resources.pipelines.p: defined in" in refused(root)
    base = with_target("  prod:\n    resources:\n      pipelines:\n        p:\n"
                       "          photon: yes\n")
    root = a_bundle(tmp_path, pipeline_yml("photon: true\n"), base=base)
    (tmp_path / "resources/q.yml").unlink()
    assert refused(root, target="prod").endswith("resources.pipelines.p.photon: cannot merge "
                                                 "bool with string "
                                  "(a target or included file sets it as another type)")


def test_variable_overrides_file_and_complex_variables(tmp_path):
    base = BASE + "  conf:\n    type: complex\n    default:\n      k: v\n"
    root = a_bundle(tmp_path, pipeline_yml("configuration: ${var.conf}\n"), base=base)
    assert load_bundle(root).pipeline().configuration == {"k": "v"}
    write(tmp_path, {".databricks/bundle/dev/variable-overrides.json":
                     json.dumps({"conf": {"k": "from file"}, "catalog": "c2"})})
    bundle = load_bundle(root)
    assert bundle.pipeline().configuration == {"k": "from file"}
    assert bundle.variables["catalog"] == "c2"
    assert "variable `conf` is complex" in refused(root, variables={"conf": "x"})


@covers(BundleError)
def test_a_bundle_error_is_one_line_naming_the_file(tmp_path):
    """The other tests check their messages with `refused`, which also asserts one line."""
    root = a_bundle(tmp_path, pipeline_yml("schema: ${var.nope}\n"))
    assert refused(root).startswith(f"{tmp_path}/resources/p.pipeline.yml:4: ")
