"""The public folder's README.md (issue #54, item 5): written from the manifest, listed in it
with its SHA-256, checked by ``dpcounts verify`` (``files/readme``), and telling its reader
how to check the folder and analyse it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli as run
from test_release_verify import KINDS, by_name, failures, manifest_of, release, set_manifest

from dpcounts.io import sha256_file
from dpcounts.release.readme import ENTRY, README, readme_text
from dpcounts.release.signature import make_keys
from dpcounts.verify import verify_release


def page(out: Path) -> str:
    return (out / README).read_text(encoding="utf-8")


def flat(out: Path) -> str:
    """The page's words with its line breaks (prose is wrapped) as spaces."""
    return " ".join(page(out).split())


@pytest.fixture(scope="module")
def truncated(tmp_path_factory) -> Path:
    """A truncated release of two sets (bounds, a declared prior)."""
    return release(tmp_path_factory.mktemp("readme"), **KINDS["truncated"])


def test_a_release_writes_its_readme_listed_with_its_hash_and_verify_passes(truncated):
    manifest = manifest_of(truncated)
    entry = manifest["files"][ENTRY]
    assert entry["path"] == README and (truncated / README).is_file()
    assert entry["sha256"] == sha256_file(truncated / README)
    # the page is what the manifest says, but for its own entry
    assert page(truncated) == readme_text(manifest)
    checks = verify_release(truncated)
    assert failures(checks) == []
    readme = by_name(checks)["files/readme"]
    assert readme.status == "ok" and readme.values["state"] == "as written"
    assert by_name(checks)["files/readme sha256"].status == "ok"


def test_its_numbers_are_the_manifest_s(truncated):
    m, text = manifest_of(truncated), flat(truncated)
    b = m["budget"]
    assert f"holds **{m['sets']} synthetic sets**" in text
    assert f"counts of **{m['strata']} strata**" in text
    assert f"public total {m['total']}." in text
    assert ", ".join(f"`{k}`" for k in m["keys"]) in text
    privacy = re.search(r"- privacy: epsilon (\S+) and delta (\S+) in total; each set epsilon "
                        r"(\S+) and delta (\S+); the prior epsilon (\S+) ", text)  # fmt: skip
    assert privacy is not None, text
    wanted = [b[k] for k in ("epsilon_total", "delta_total", "epsilon_per_set",
                             "delta_per_set", "epsilon_prior")]  # fmt: skip
    assert [float(x) for x in privacy.groups()] == pytest.approx(wanted, rel=1e-5)
    assert f"`{m['mechanism']}`, calibration method `{m['method']}`" in text
    assert m["guarantee"]["statement"] in text
    assert f"`{m['prior']['kind']}`" in text
    tail = re.search(r"the tail (\S+), inflation", text)
    assert tail is not None and float(tail.group(1)) == pytest.approx(m["truncation"]["tail"])
    # every file the manifest lists is on the page, by its path
    for name, entry in m["files"].items():
        assert f"- `{entry['path']}`: " in text, name
    assert "- `manifest.json`: " in text


def test_it_names_verify_and_an_estimate_command_that_runs(truncated, tmp_path):
    text = page(truncated)
    assert "dpcounts verify FOLDER\n" in text and "dpcounts verify FOLDER --key" in text
    first = manifest_of(truncated)["keys"][0]
    command = next(line for line in text.splitlines() if line.startswith("dpcounts estimate"))
    assert f"--by {first} " in command
    words = shlex.split(command.replace("FOLDER", str(truncated)))
    words[words.index("--out") + 1] = str(tmp_path / "rates.csv")
    code, _, err = run(*words[1:])
    assert code == 0, err
    rates = pd.read_csv(tmp_path / "rates.csv")
    synthetic = pd.read_parquet(truncated / manifest_of(truncated)["files"]["synthetic"]["path"])
    groups = sorted(map(str, synthetic[first].unique()))
    assert sorted(map(str, rates[first])) == groups  # one row per group
    assert set(rates["sets"]) == {manifest_of(truncated)["sets"]}
    # what it cannot tell: the bounds of a truncated release
    words = flat(truncated)
    assert "outside its stratum's bounds" in words and "not the true counts" in words


@pytest.mark.slow
def test_a_pg_release_without_bounds_says_nothing_of_them(tmp_path):
    out = release(tmp_path, **KINDS["pg"])
    text = page(out)
    assert "`lower`" not in text and "truncated" not in text
    # the hyperparameters' columns named are those the file holds beside the keys
    named = re.search(r"each set was drawn with \(([^)]*)\)", flat(out)).group(1)
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    keys = manifest_of(out)["keys"]
    assert named.replace("`", "").split(", ") == [c for c in hyper.columns if c not in keys]
    assert failures(verify_release(out)) == []


def _edit(out: Path, old: str, new: str) -> None:
    text = page(out)
    assert old in text
    (out / README).write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.slow
def test_a_tampered_readme_fails_verify_naming_the_file(tmp_path):
    out = release(tmp_path, **KINDS["pg"])
    _edit(out, "in total;", "in total (and far less in truth);")
    checks = verify_release(out)
    assert failures(checks) == ["files/readme", "files/readme sha256"]
    assert "README.md" in by_name(checks)["files/readme sha256"].detail
    # a careful forger relists its hash: the page still is not the manifest's
    manifest = manifest_of(out)
    manifest["files"][ENTRY]["sha256"] = sha256_file(out / README)
    set_manifest(out, manifest)
    checks = verify_release(out)
    assert failures(checks) == ["files/readme"]
    assert "README.md is not the page written from the manifest" in (
        by_name(checks)["files/readme"].detail
    )
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_the_signature_covers_the_readme(tmp_path):
    private, public = make_keys(tmp_path / "keys")
    out = release(tmp_path, **KINDS["pg"], sign_key=private)
    assert failures(verify_release(out, public)) == []
    _edit(out, "## Check it", "## Check it (no need)")
    checks = verify_release(out, public)
    assert "files/signature" in failures(checks)
    assert "README.md" in by_name(checks)["files/signature"].detail


@pytest.mark.slow
def test_a_release_made_before_the_readme_still_verifies(tmp_path):
    out = release(tmp_path, **KINDS["pg"])
    manifest = manifest_of(out)
    del manifest["files"][ENTRY]
    set_manifest(out, manifest)
    (out / README).unlink()
    checks = verify_release(out)
    assert failures(checks) == []
    assert by_name(checks)["files/readme"].values["state"] == "absent"
    # and a README left in the folder but unlisted is published by mistake
    (out / README).write_text("notes\n")
    assert failures(verify_release(out)) == ["files/nothing unlisted"]


@pytest.mark.slow
def test_a_readme_of_another_version_that_differs_is_a_warning(tmp_path):
    out = release(tmp_path, **KINDS["pg"])
    manifest = manifest_of(out)
    manifest["dpcounts_version"] = "0.0.1"  # the page says the version that wrote it
    set_manifest(out, manifest)
    checks = verify_release(out)
    assert failures(checks) == []
    readme = by_name(checks)["files/readme"]
    assert readme.status == "warning" and "0.0.1" in readme.detail


def test_the_readme_is_written_from_the_manifest_alone(truncated):
    """Nothing but the manifest's fields reaches the page: the same manifest, the same page,
    whatever else the folder holds; a field changed, the page changes with it."""
    manifest = manifest_of(truncated)
    assert readme_text(json.loads(json.dumps(manifest))) == page(truncated)
    changed = json.loads(json.dumps(manifest))
    changed["total"] += 1
    assert readme_text(changed) != page(truncated)
