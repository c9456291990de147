"""What ``dpcounts verify`` checked and what it takes on trust, and the steward's signature
(issue #50, item 3): the closing line names what it recomputed from the public files and
what it cannot (a sanitised prior's epsilon, a declared prior's source, the count-fit
check's verdict); a release signed with ``--sign-key`` is checked with ``verify --key``,
which fails once any public file or manifest field changed; an unsigned folder says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli as run
from test_release_verify import (
    KINDS,
    _promise,
    by_name,
    failures,
    manifest_of,
    read,
    release,
    rewrite,
    set_manifest,
)

from dpcounts.release import ReleaseError
from dpcounts.release.signature import (
    PRIVATE_NAME,
    PUBLIC_NAME,
    SIGNATURE,
    SignatureError,
    Signer,
    load_private_key,
    load_public_key,
    make_keys,
)
from dpcounts.verify import as_json, failed, report, summary, verify_release

SANITISED = dict(mechanism="pg", sanitised_prior_by=("region",))  # prior: 0.1 of epsilon 1


@pytest.fixture
def keys(tmp_path) -> tuple[Path, Path]:
    """A steward's key pair, made as ``dpcounts keygen`` makes it, outside every release."""
    return make_keys(tmp_path / "steward-keys")


def closing(out: Path, *options: str) -> tuple[int, str, str]:
    """``dpcounts verify`` of ``out``: (exit code, its closing line, all it printed)."""
    code, stdout, stderr = run("verify", str(out), *options)
    return code, stdout.strip().splitlines()[-1] if stdout.strip() else "", stdout + stderr


def lower_the_prior_epsilon(out: Path) -> None:
    """The sanitised prior's epsilon divided by 100 and the total lowered with it, every
    derived field made consistent: the verification of issue #50 passed it and said the
    public numbers "back" the stated (0.901, 1e-12)-DP."""
    budget = manifest_of(out)["budget"]
    assert (budget["epsilon_total"], budget["epsilon_prior"]) == (1.0, pytest.approx(0.1))
    prior = budget["epsilon_prior"] / 100
    set_manifest(out, _promise(out, epsilon_prior=prior,
                               epsilon_total=prior + budget["epsilon_synthesis"]))  # fmt: skip


# --- the edited sanitised manifest ---------------------------------------------------------


@pytest.mark.slow
def test_an_edited_sanitised_prior_epsilon_is_not_checkable_and_fails_the_signature(tmp_path, keys):
    private, public = keys
    out = release(tmp_path, **SANITISED, sign_key=private)
    assert (out / SIGNATURE).is_file()
    lower_the_prior_epsilon(out)
    assert manifest_of(out)["budget"]["epsilon_total"] == pytest.approx(0.901)

    # without the key: every check passes (nothing in the folder shows the edit), and the
    # closing line says the prior's epsilon is taken on trust, never that it is backed
    code, last, printed = closing(out)
    assert code == 0 and last.startswith("PASSED:"), printed
    assert "back" not in last and "(0.901, 1e-12)-DP" not in last
    recomputed, trusted = last.split("; taken on trust, not checkable from the folder: ")
    assert "epsilon 0.9 of the 1 synthetic set(s)" in recomputed
    assert "the prior's rates from its noisy totals" in recomputed
    assert "epsilon_prior" not in recomputed
    assert "the sanitised prior's epsilon_prior 0.001 (its noise cannot be read" in trusted
    assert "that the sets were drawn by this calibration" in trusted
    assert "Signed (key ed25519:" in trusted and "but not checked: give --key PUBLIC" in trusted
    verdict = json.loads(run("verify", "--json", str(out))[1])
    assert verdict["passed"] and verdict["signature"] == "not checked"
    assert any("epsilon_prior 0.001" in phrase for phrase in verdict["trusted"])

    # with the steward's public key: the manifest is no longer the one signed
    code, last, printed = closing(out, "--key", str(public))
    assert code == 1 and last.startswith("FAILED:"), printed
    checks = verify_release(out, public)
    assert failures(checks) == ["files/signature"]
    assert "does not match manifest.json" in by_name(checks)["files/signature"].detail
    assert "The signature does not hold" in last


# --- signed and unsigned ---------------------------------------------------------------------


@pytest.mark.slow
def test_an_unsigned_release_says_it_is_unsigned_and_fails_with_a_key(tmp_path, keys):
    out = release(tmp_path)
    code, last, printed = closing(out)
    assert code == 0 and "Unsigned: no signature.json" in last, printed
    assert "ok      signature: unsigned: no signature.json" in printed
    assert json.loads(run("verify", "--json", str(out))[1])["signature"] == "unsigned"
    code, last, printed = closing(out, "--key", str(keys[1]))
    assert code == 1 and "FAIL    signature: no signature.json: the folder is unsigned" in printed


@pytest.mark.parametrize(
    "kind", [k if k == "pg" else pytest.param(k, marks=pytest.mark.slow) for k in sorted(KINDS)]
)
def test_a_signed_untouched_release_passes_verify_with_its_key(tmp_path, keys, kind):
    private, public = keys
    out = release(tmp_path, **KINDS[kind], sign_key=private)
    code, last, printed = closing(out, "--key", str(public))
    assert code == 0 and last.startswith("PASSED:"), printed
    key = load_public_key(public).id
    assert f"Signed by the given key {key}: no public file or manifest field changed" in last
    assert f"ok      signature: signed by the given key {key}" in printed
    assert "ok      nothing unlisted" in printed  # the signature is not an unlisted file
    assert "ok      times" in printed and "ok      modes" in printed  # public ones, signature too
    assert "back" not in last
    checks, manifest = report(out, load_public_key(public))
    assert by_name(checks)["files/signature"].values["state"] == "verified"
    assert json.loads(as_json(checks, out, manifest))["signature"] == "verified"


@pytest.mark.slow
def test_a_changed_byte_of_a_public_table_fails_the_signature(tmp_path, keys):
    private, public = keys
    out = release(tmp_path, sign_key=private)
    path = out / manifest_of(out)["files"]["synthetic"]["path"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    checks = verify_release(out, public)
    assert {"files/synthetic sha256", "files/signature"} <= set(failures(checks))
    detail = by_name(checks)["files/signature"].detail
    assert "synthetic.parquet" in detail and "changed since the steward signed" in detail
    assert closing(out, "--key", str(public))[0] == 1


@pytest.mark.slow
def test_a_careful_forger_who_relists_the_hash_fails_the_signature_alone(tmp_path, keys):
    """A table replaced and its new SHA-256 listed: every content check passes, the
    signature of the manifest does not."""
    private, public = keys
    out = release(tmp_path, sign_key=private)
    synthetic = read(out, "synthetic")
    synthetic.loc[[0, 1], "count"] = synthetic.loc[[1, 0], "count"].to_numpy()
    rewrite(out, "synthetic", synthetic)
    assert not failed(verify_release(out))  # as today: nothing in the folder shows it
    assert failures(verify_release(out, public)) == ["files/signature"]


@pytest.mark.slow
def test_another_stewards_key_or_a_key_in_the_folder_proves_nothing(tmp_path, keys):
    private, public = keys
    out = release(tmp_path, sign_key=private)
    _, other = make_keys(tmp_path / "someone else")
    checks = verify_release(out, other)
    assert failures(checks) == ["files/signature"]
    assert "not by the given key" in by_name(checks)["files/signature"].detail
    # a forger re-signs with their own key and ships it: a key from the folder is refused
    inside = out / "key.pub"
    inside.write_bytes(public.read_bytes())
    detail = by_name(verify_release(out, inside))["files/signature"].detail
    assert "lies inside the release folder" in detail


@pytest.mark.slow
def test_a_signature_file_that_is_not_one_fails_even_without_a_key(tmp_path, keys):
    out = release(tmp_path, sign_key=keys[0])
    signature = json.loads((out / SIGNATURE).read_text())
    signature["signature"] = "bm90IGEgc2lnbmF0dXJl"  # base64 of 15 bytes
    (out / SIGNATURE).write_text(json.dumps(signature))
    checks = verify_release(out)
    assert failures(checks) == ["files/signature"]
    assert "signature is not 64 bytes" in by_name(checks)["files/signature"].detail
    (out / SIGNATURE).write_text("\x1b[2J not json")
    assert failures(verify_release(out)) == ["files/signature"]


@pytest.mark.slow
def test_a_signed_folder_whose_manifest_is_unreadable_is_not_said_unsigned(tmp_path, keys):
    out = release(tmp_path, sign_key=keys[0])
    manifest = manifest_of(out)
    manifest["dpcounts_release_format"] = 999  # a format this version does not read
    set_manifest(out, manifest)
    code, last, _ = closing(out)
    assert code == 1 and "Unsigned" not in last and "The signature was not looked at." in last


@pytest.mark.slow
def test_summary_never_says_backed_of_anything(tmp_path):
    """No kind of release has its closing line say the numbers "back" anything: what was
    recomputed is named as recomputed, the rest as taken on trust."""
    for kind, options in sorted(KINDS.items()):
        out = release(tmp_path, kind, **options)
        checks, manifest = report(out)
        text = summary(checks, manifest)
        assert "back" not in text and "taken on trust" in text, (kind, text)
    md = summary(*report(tmp_path / "md"))  # nothing but the drawing is on trust
    assert "Recomputed from the public files: the stated (1, 1e-12)-DP" in md
    assert "not checkable from the folder: that the sets were drawn by this calibration." in md


# --- signing: the key, and the publication ------------------------------------------------


def test_keygen_makes_a_private_key_for_its_owner_alone_and_never_replaces_one(tmp_path):
    code, stdout, stderr = run("keygen", "--out", str(tmp_path / "k"))
    assert code == 0, stderr
    private, public = tmp_path / "k" / PRIVATE_NAME, tmp_path / "k" / PUBLIC_NAME
    assert os.stat(private).st_mode & 0o777 == 0o600
    assert os.stat(tmp_path / "k").st_mode & 0o777 == 0o700
    assert f"key {load_public_key(public).id}" in stdout and "never publish it" in stdout
    before = private.read_bytes()
    code, _, stderr = run("keygen", "--out", str(tmp_path / "k"))
    assert code == 2 and "a key is never replaced" in stderr
    assert private.read_bytes() == before


@pytest.mark.slow
def test_synthesize_signs_and_verify_checks_from_the_command_line(tmp_path):
    from test_release import STRATA

    assert run("keygen", "--out", str(tmp_path / "k"))[0] == 0
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    code, _, stderr = run(
        "synthesize", "--input", str(tmp_path / "s.csv"), "--keys", "code", "region",
        "--strata", "input", "--dataset", "test-data", "--epsilon", "1", "--mechanism", "pg",
        "--out", str(tmp_path / "out"), "--quiet", "--prior-source", "a public registry",
        "--sign-key", str(tmp_path / "k" / PRIVATE_NAME),
    )  # fmt: skip
    assert code == 0, stderr
    code, last, printed = closing(tmp_path / "out", "--key", str(tmp_path / "k" / PUBLIC_NAME))
    assert code == 0 and "Signed by the given key" in last, printed
    # the private key is no public key: verify says so, exit 2
    code, _, printed = closing(tmp_path / "out", "--key", str(tmp_path / "k" / PRIVATE_NAME))
    assert code == 2 and "is a private key" in printed


@pytest.mark.slow
def test_a_key_inside_the_release_or_readable_by_others_is_refused_before_any_spend(
    tmp_path, keys, private_ledger
):
    private, public = keys
    out = release(tmp_path)  # an earlier release, which --force would replace
    inside = out / "steward.key"  # where whoever publishes the folder publishes it
    inside.write_bytes(private.read_bytes())
    inside.chmod(0o600)
    spent = private_ledger.read_text()
    with pytest.raises(ReleaseError, match="lies inside the release folder"):
        release(tmp_path, force=True, sign_key=inside)
    private.chmod(0o640)
    with pytest.raises(ReleaseError, match="others can read it"):
        release(tmp_path, "elsewhere", sign_key=private)
    private.chmod(0o600)
    with pytest.raises(ReleaseError, match="is a public key"):
        release(tmp_path, "elsewhere", sign_key=public)
    assert private_ledger.read_text() == spent  # nothing spent
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "junk.key").write_text("not a key")
    (tmp_path / "junk.key").chmod(0o600)
    with pytest.raises(SignatureError, match="not a PEM private key"):
        load_private_key(tmp_path / "junk.key")


def test_a_signing_that_fails_publishes_nothing(tmp_path, keys, monkeypatch):
    """The signature is written in the release's partial folder, installed with the rest:
    a run whose signing fails leaves no release folder and no partial one."""

    def broken(self, folder):
        (folder / SIGNATURE).write_text("{")  # half written, then the failure
        raise OSError("disk full")

    monkeypatch.setattr(Signer, "sign_folder", broken)
    with pytest.raises(OSError, match="disk full"):
        release(tmp_path, sign_key=keys[0])
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
