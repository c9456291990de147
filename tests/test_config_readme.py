"""One source of defaults: the schema. config/README.md's defaults are generated from it
(tools/write_config_readme.py), every default is documented there, and config/config.yaml,
which lists every knob for the reader, states the schema's defaults and nothing else
(the studies it ships aside)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "write_config_readme", REPO / "tools" / "write_config_readme.py"
)
generator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generator)
SCHEMA = yaml.safe_load(generator.SCHEMA.read_text())


def defaults(node: dict, path: tuple[str, ...] = ()):
    """(dotted path, schema node) of every key with a default, depth first."""
    for key, child in node.get("properties", {}).items():
        if "default" in child:
            yield ".".join((*path, key)), child
        yield from defaults(child, (*path, key))


def test_config_readme_is_generated_from_the_schema():
    expected = generator.build(SCHEMA, generator.TEMPLATE.read_text())
    assert generator.OUTPUT.read_text() == expected, (
        "config/README.md is stale: run `python tools/write_config_readme.py` (make format)"
    )


def test_every_default_of_the_schema_is_in_the_readme():
    """A key is documented when its token, or an enclosing key's, is in the template; a
    section (an object) when every key of it with a default is."""
    named = set(generator.TOKEN.findall(generator.TEMPLATE.read_text()))
    keys = [path for path, _ in defaults(SCHEMA) if not path.startswith("studies")]
    keys += [f"study.{path}" for path, _ in defaults(SCHEMA["definitions"]["study"])]
    keys += [f"study2_figures.{p}" for p, _ in defaults(SCHEMA["definitions"]["study2_figures"])]

    def covered(path: str) -> bool:
        parts = path.split(".")
        if any(".".join(parts[:k]) in named for k in range(1, len(parts) + 1)):
            return True
        inner = [f"{path}.{p}" for p, _ in defaults(generator.schema_node(SCHEMA, path))]
        return bool(inner) and all(covered(p) for p in inner)

    missing = [path for path in keys if not covered(path)]
    assert not missing, f"defaults with no {{{{default:...}}}} in the template: {missing}"


def test_config_yaml_states_the_schema_defaults():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    differ = []

    def walk(value, path):
        node = generator.schema_node(SCHEMA, path)
        if isinstance(value, dict) and "properties" in node:
            for key, child in value.items():
                walk(child, f"{path}.{key}")
        elif generator.effective_default(node) != value:
            differ.append((path, value, generator.effective_default(node)))

    for key, value in config.items():
        if key != "studies":  # the shipped studies are examples, not defaults
            walk(value, key)
    assert not differ, f"config/config.yaml differs from the schema's defaults: {differ}"


def test_a_stale_readme_is_caught(tmp_path, monkeypatch):
    """The check fails (and names the fix) when the README and the schema disagree."""
    stale = tmp_path / "README.md"
    stale.write_text(re.sub(r"`20190601`", "`1`", generator.OUTPUT.read_text()))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    monkeypatch.setattr("sys.argv", ["write_config_readme.py", "--check"])
    assert generator.main() == 1
