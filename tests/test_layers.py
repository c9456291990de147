"""The library's layers: every module of ``src/dpcounts`` imports only from its own layer
and the layers below it, and nothing imports Snakemake.

:data:`LAYERS` is the one table of layers; ``docs/architecture.md`` shows it (a test below
checks that the page lists the same modules in the same layers). Imports are read with
``ast``: module-level and function-level ``import`` / ``from ... import`` statements,
relative ones resolved, and the lazy ``_PUBLIC`` tables of the packages' ``__init__``
(names resolved by ``importlib`` on first use) count as imports too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "dpcounts"
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

#: Bottom to top: (layer, its modules and packages). A package entry holds every module
#: under it; ``dpcounts`` itself (the root ``__init__``: ``__version__`` and the lazy public
#: API ``calibrate``, ``audit``, ``synthesize``, ``posterior_rates``) sits in ``privacy``,
#: the highest layer its public names come from.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "values",
        (
            "arms",
            "calibration",
            "compile_cache",
            "config_check",
            "design",
            "extras",
            "fast_exit",
            "io",
            "mechanisms.registry",
            "provenance",
            "seeding",
            "encoding",
            "table_kernels",
            "units",
        ),
    ),
    ("sampling", ("sampling",)),
    ("mechanisms", ("mechanisms",)),
    ("privacy", ("__init__", "privacy")),
    ("baselines", ("baselines", "attack")),
    ("inference", ("inference",)),
    ("data", ("data",)),
    ("studies", ("studies",)),
    ("figures", ("plots",)),
    ("releases", ("__main__", "cli", "ledger", "release", "verify")),
)
FORBIDDEN = ("snakemake",)


def _dotted(entry: str) -> str:
    return "dpcounts" if entry == "__init__" else f"dpcounts.{entry}"


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of a dotted module name (``KeyError`` if it has none)."""
    best, depth = None, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            name = _dotted(entry)
            exact = module == name
            inside = entry != "__init__" and module.startswith(name + ".")
            if (exact or inside) and name.count(".") > depth:
                best, depth = index, name.count(".")
    if best is None:
        raise KeyError(f"{module} is in no layer of tests/test_layers.py's LAYERS")
    return best


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, root: Path) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _public_table(tree: ast.Module) -> dict[str, str]:
    """The ``_PUBLIC = {"name": "module", ...}`` table of a lazy package, if any."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return {
                k.value: v.value
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
    return {}


def imports_of(source: str, module: str, is_package: bool, root: Path = SRC):
    """``(line, imported module)`` for every import in ``source`` (any depth), with
    ``from package import name`` resolved to the submodule ``name`` when it is one."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if _is_module(sub, root) else target))
    found += [(0, target) for target in _public_table(tree).values()]
    return found


def violations(source: str, module: str, is_package: bool = False, root: Path = SRC) -> list:
    """Every import of ``module`` that reaches a higher layer or a forbidden package."""
    own = layer_of(module)
    out = []
    for line, target in sorted(set(imports_of(source, module, is_package, root))):
        top = target.split(".")[0]
        if top in FORBIDDEN:
            out.append(f"{module}:{line} imports {target} (the library never imports it)")
        elif top == "dpcounts" and layer_of(target) > own:
            out.append(
                f"{module}:{line} ({LAYERS[own][0]}) imports {target} "
                f"({LAYERS[layer_of(target)][0]}, a higher layer)"
            )
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    unplaced = []
    for path in MODULES:
        try:
            layer_of(module_name(path))
        except KeyError as err:
            unplaced.append(str(err))
    assert not unplaced, unplaced


def test_every_layer_entry_exists():
    for _, entries in LAYERS:
        for entry in entries:
            assert _is_module(_dotted(entry), SRC), f"{entry} of LAYERS is not a module"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_go_down_the_layers(path):
    name = module_name(path)
    assert not violations(path.read_text(), name, path.name == "__init__.py")


def test_the_check_sees_upward_lazy_relative_and_snakemake_imports():
    # A study module may use privacy; a privacy module may not use a study, not even
    # inside a function, through a relative import or through a lazy _PUBLIC table.
    assert (
        violations("from dpcounts.privacy.calibrate import calibrate\n", "dpcounts.studies.study1")
        == []
    )
    upward = "def f():\n    from dpcounts.studies.stage.summary import summarise_study\n"
    assert "a higher layer" in violations(upward, "dpcounts.privacy.audit")[0]
    relative = "from ..release.request import ReleaseError\n"
    assert violations(relative, "dpcounts.data.validation")
    lazy = '_PUBLIC = {"figure": "dpcounts.plots.maps"}\n'
    assert violations(lazy, "dpcounts.data", is_package=True)
    package = "from dpcounts import plots\n"
    assert violations(package, "dpcounts.mechanisms.poisson_gamma")
    assert violations("import snakemake\n", "dpcounts.release.report.summary")
    assert violations("from snakemake.io import Namedlist\n", "dpcounts.cli")
    with pytest.raises(KeyError, match="no layer"):
        layer_of("dpcounts.brand_new_module")


def _documented_layers() -> list[tuple[str, set[str]]]:
    """(layer, modules) of the table in docs/architecture.md's section on the layers."""
    text = ARCHITECTURE.read_text()
    section = text.split("## The library's layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        modules = {
            m.removesuffix(".py").removesuffix("/").replace("/", ".")
            for m in re.findall(r"`([^`]+)`", cells[1])
        }
        rows.append((cells[0], modules))
    return rows


def test_architecture_page_shows_the_table():
    documented = _documented_layers()
    assert documented == [(layer, set(entries)) for layer, entries in LAYERS]
    section = ARCHITECTURE.read_text().split("## The library's layers", 1)[1].split("\n## ")[0]
    assert "Known exceptions" not in section
