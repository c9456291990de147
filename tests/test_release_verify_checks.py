"""The one list of ``dpcounts verify``'s checks (:data:`dpcounts.verify.CHECKS`):
every check the verifier emits is made from an entry of it, every entry is emitted by
some release of the corpus (valid releases of each kind, the hostile folders and the
forgeries of :mod:`hostile_releases`), and what is written from it (``dpcounts verify
--help``, docs/verify-checks.md) is up to date."""

from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path

import pytest
from hostile_releases import FORGED, HOSTILE
from test_release_verify import KINDS, release

from dpcounts import verify
from dpcounts.cli import build_parser
from dpcounts.release.signature import make_keys
from dpcounts.verify import (
    CHECKS,
    OK,
    TOPICS,
    NotARelease,
    UnregisteredCheck,
    registered,
    verify_release,
)
from dpcounts.verify.checks import _check, register
from dpcounts.verify.release import _run

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "write_verify_checks", REPO / "tools" / "write_verify_checks.py"
)
generator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generator)


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def test_every_check_is_made_from_an_entry_of_the_list():
    """Read from the source of every module of the package: ``Check`` is built in
    ``_check`` alone, and every call of ``_check`` (and of ``_run``, whose name is its
    topic's failure) names a registered (topic, name) in plain strings, so no check can be
    emitted under another name."""
    modules = sorted(Path(verify.__file__).parent.glob("*.py"))
    trees = [ast.parse(path.read_text()) for path in modules]
    keys = {(spec.topic, spec.name) for spec in CHECKS}
    made, named = [], []
    for function in (node for tree in trees for node in ast.walk(tree)):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id == "Check":
                made.append(function.name)
            elif node.func.id == "_check" and function.name != "_run":
                named.append((_literal(node.args[0]), _literal(node.args[1])))
            elif node.func.id == "_run":
                named.append((_literal(node.args[1]), _literal(node.args[2])))
    assert made == ["_check"]
    assert len(named) >= len(CHECKS)
    assert [key for key in named if key not in keys] == []


def test_the_list_is_well_formed():
    keys = [(spec.topic, spec.name) for spec in CHECKS]
    assert len(keys) == len(set(keys))
    order = [TOPICS.index(spec.topic) for spec in CHECKS]  # every topic known, in order
    assert order == sorted(order)
    for spec in CHECKS:
        assert spec.what.endswith(".") and "\n" not in spec.what, spec
        assert spec.name.count("{") == spec.name.count("{file}"), spec


def test_an_unregistered_name_is_a_programming_error():
    assert registered("files", "synthetic sha256").name == "{file} sha256"
    assert registered("files", "notes\\n path").name == "{file} path"
    with pytest.raises(UnregisteredCheck):
        registered("files", "sha256")
    with pytest.raises(UnregisteredCheck):
        _check("files", "a new check", OK, "never registered")
    with pytest.raises(UnregisteredCheck):  # not turned into a release's failure by _run
        _run([], "files", "manifest", lambda r: [_check("x", "y", "ok", "")], None)


def test_a_topic_registers_each_check_once_and_in_a_known_topic():
    before = list(CHECKS)
    with pytest.raises(ValueError, match="registered twice"):
        register(CHECKS[0])
    with pytest.raises(ValueError, match="is not one of"):
        register(verify.CheckSpec("signatures", "a new check", "Never registered."))
    assert CHECKS == before


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> dict[tuple[str, str], list[str]]:
    """Every (topic, name) the corpus's verifications emit, with the folders that did."""
    base = tmp_path_factory.mktemp("checks")
    kinds = {"pg", "truncated", "sanitised"} | {kind for kind, _ in FORGED.values()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPCOUNTS_LEDGER", str(base / "ledger.jsonl"))
        patch.setenv("XDG_DATA_HOME", str(base / "data"))
        valid = {kind: release(base, kind, **KINDS[kind]) for kind in sorted(kinds)}
        private, _ = make_keys(base / "keys")  # a signed release: its signature's check
        signed = release(base, "signed", **KINDS["pg"], sign_key=private)
    folders = dict(valid, signed=signed)
    for name, make in HOSTILE.items():
        folders[name] = base / f"hostile {name}"
        shutil.copytree(valid["pg"], folders[name])
        make(folders[name])
    for name, (kind, make) in FORGED.items():
        folders[name] = base / f"forged {name}"
        shutil.copytree(valid[kind], folders[name])
        make(folders[name])
    found: dict[tuple[str, str], list[str]] = {}
    for name, folder in folders.items():
        try:
            checks = verify_release(folder)
        except NotARelease:
            continue
        for check in checks:
            found.setdefault((check.topic, check.name), []).append(name)
    return found


@pytest.mark.slow
def test_every_emitted_check_is_registered(emitted):
    unregistered = []
    for topic, name in emitted:
        try:
            registered(topic, name)
        except UnregisteredCheck:
            unregistered.append(f"{topic}/{name}")
    assert unregistered == []


@pytest.mark.slow
def test_every_registered_check_is_emitted_by_the_corpus(emitted):
    never = [
        f"{spec.topic}/{spec.name}"
        for spec in CHECKS
        if not any(spec.matches(topic, name) for topic, name in emitted)
    ]
    assert never == [], "no release of the corpus emits these: add a forgery to FORGED"


def test_the_docs_page_is_generated_from_the_list():
    assert generator.OUTPUT.read_text() == generator.build(), (
        "docs/verify-checks.md is stale: run `python tools/write_verify_checks.py` (make format)"
    )


def _command():
    return build_parser()._subparsers._group_actions[0].choices["verify"]


def test_help_lists_every_check_in_a_screen():
    short = _command().format_brief_help()
    lines = short.splitlines()
    assert len(lines) <= 50 and max(map(len, lines)) <= 100, short
    listed = short.split("checks, by topic", 1)[1]
    for spec in CHECKS:
        assert spec.name in listed, spec.name
    full = " ".join(_command().format_help().split())
    for spec in CHECKS:
        assert f"{spec.name}: {spec.what.replace('`', '')}" in full, spec.name
