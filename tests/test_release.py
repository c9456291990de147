"""dpcounts.release in-process: budget, prior, columns, randomness, order, folders, inputs.

Each test names the item of issue #12 it guards; every one of them failed on the code
before that issue (a per-set epsilon in the manifest, unnoised data-derived priors,
unnamed columns published, seeds in argv, nominal defaults, no delta, no ledger, a private
folder inside the release, row-order dependence, unsafe folders, inputs that slipped).
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from dpcounts.ledger import Ledger
from dpcounts.privacy.calibrate import calibrate
from dpcounts.release import (
    NEIGHBOURS,
    ReleaseError,
    ReleaseRequest,
    build_release,
    load_strata,
    sequence,
)
from dpcounts.release import folder as release_folder
from dpcounts.release.manifest import SCHEMA, validate
from dpcounts.release.randomness import RootKey

STRATA = pd.DataFrame(
    {
        "code": [1, 2, 3, 4, 5, 6],
        "region": ["n", "n", "n", "s", "s", "s"],
        "count": [4, 0, 9, 7, 3, 5],
        "population": [1000, 800, 1500, 900, 700, 1200],
        "prior_rate": [0.004, 0.004, 0.004, 0.006, 0.006, 0.006],  # public, by region
    }
)
KEYS = ("code", "region")  # nested (a code lies in one region): no cross product
#: where the tests' public prior rates come from (every prior the steward brings is declared)
PRIOR_SOURCE = "national rates by region, published 1999 (test)"


def request_for(path, out, **changes) -> ReleaseRequest:
    """A release of ``path``, whose rows list every stratum (declared: nested keys)."""
    fields = dict(input=path, out=out, epsilon=1.0, mechanism="pg", keys=KEYS, test_seed=1,
                  dataset="test-data",
                  progress=False, strata="input")  # fmt: skip
    fields.update(changes)
    if fields.get("mechanism") != "md" and fields.get("sanitised_prior_by") is None:
        fields.setdefault("prior_source", PRIOR_SOURCE)  # the prior column is declared
    return ReleaseRequest(**fields)


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "s.csv"
    STRATA.to_csv(path, index=False)
    return path


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


# --- 1. composition ------------------------------------------------------------------
@pytest.mark.slow
def test_epsilon_is_the_total_shared_by_the_sets(csv, tmp_path):
    info = build_release(request_for(csv, tmp_path / "out", epsilon=1.5, sets=3))
    budget = info["budget"]
    assert budget["epsilon_total"] == 1.5
    assert budget["epsilon_per_set"] == pytest.approx(0.5)
    assert budget["delta_total"] == pytest.approx(3 * budget["delta_per_set"])
    hyper = pd.read_parquet(tmp_path / "out" / "hyperparameters.parquet")
    y = STRATA["count"].to_numpy()
    per_set = calibrate(
        "pg", 0.5, int(y.sum()), STRATA["population"], STRATA["prior_rate"], method="certified"
    )
    np.testing.assert_allclose(hyper["a"].to_numpy(), per_set.a, rtol=1e-12)
    assert "epsilon" not in info  # no bare per-set epsilon next to "sets"


# --- 2. the prior --------------------------------------------------------------------
@pytest.mark.slow
def test_sanitised_prior_spends_its_share_and_adds_noise(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    out = tmp_path / "out"
    info = build_release(
        request_for(
            tmp_path / "s.csv",
            out,
            epsilon=2.0,
            sanitised_prior_by=("code", "region"),  # one group per stratum: the worst case
            prior_epsilon=0.2,
            test_seed=None,
        )
    )
    assert info["budget"]["epsilon_prior"] == 0.2
    assert info["budget"]["epsilon_per_set"] == pytest.approx(1.8)
    assert info["prior"]["kind"] == "sanitised" and info["prior"]["epsilon"] == 0.2
    prior = pd.read_parquet(out / info["files"]["prior"]["path"])
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    exact = STRATA["count"] / STRATA["population"]
    # Scale 2 / 0.2 = 10: six groups all without noise has probability below 1e-6.
    assert not np.allclose(hyper["prior_rate"].to_numpy(), exact.to_numpy())
    assert not np.array_equal(prior["noisy_total"].to_numpy(), STRATA["count"].to_numpy())
    np.testing.assert_allclose(
        prior["prior_rate"], np.maximum(prior["noisy_total"], 0.5) / prior["population"]
    )


@pytest.mark.slow
def test_sanitised_prior_without_columns_is_the_public_overall_rate(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    info = build_release(request_for(tmp_path / "s.csv", tmp_path / "o", sanitised_prior_by=()))
    hyper = pd.read_parquet(tmp_path / "o" / "hyperparameters.parquet")
    rate = STRATA["count"].sum() / STRATA["population"].sum()
    np.testing.assert_allclose(hyper["prior_rate"], rate)
    assert info["budget"]["epsilon_prior"] == 0 and info["prior"]["kind"] == "total"


def test_a_single_sanitised_group_spends_nothing(tmp_path):
    STRATA.drop(columns="prior_rate").assign(region="all").to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match="makes a single group, whose total is public"):
        build_release(
            request_for(tmp_path / "s.csv", tmp_path / "o", sanitised_prior_by=("region",))
        )


def test_prior_epsilon_must_leave_budget_for_the_sets(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match="--prior-epsilon must lie strictly between 0"):
        build_release(
            request_for(
                tmp_path / "s.csv", tmp_path / "o", sanitised_prior_by=("region",), prior_epsilon=1
            )
        )


# --- 3. columns ----------------------------------------------------------------------
def test_unnamed_columns_are_refused_by_name(tmp_path):
    STRATA.assign(crude_rate=STRATA["count"] / STRATA["population"]).to_csv(
        tmp_path / "s.csv", index=False
    )
    with pytest.raises(ReleaseError, match=r"s\.csv: column\(s\) \['crude_rate'\] are not named"):
        build_release(request_for(tmp_path / "s.csv", tmp_path / "o"))
    assert listing(tmp_path) == ["s.csv"]


@pytest.mark.parametrize("reserved", ["cell", "set", "a"])
def test_keys_that_clash_with_the_release_columns_are_refused(tmp_path, reserved):
    STRATA.rename(columns={"code": reserved}).to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match=rf"\['{reserved}'\] clash with the release"):
        build_release(request_for(tmp_path / "s.csv", tmp_path / "o", keys=(reserved, "region")))


@pytest.mark.slow
def test_only_named_columns_reach_the_release(csv, tmp_path):
    build_release(request_for(csv, tmp_path / "o"))
    synthetic = pd.read_parquet(tmp_path / "o" / "synthetic.parquet")
    assert list(synthetic.columns) == ["set", "code", "region", "count", "population"]


# --- 4. randomness -------------------------------------------------------------------
@pytest.mark.slow
def test_releases_draw_from_chacha_keyed_by_the_operating_system(csv, tmp_path, private_folder):
    info = build_release(request_for(csv, tmp_path / "o", test_seed=None))
    assert info["purpose"] == "publication"
    assert "ChaCha20" in info["randomness"] and "operating system" in info["randomness"]
    generator = RootKey.fresh().generator("set:0")
    assert type(generator.bit_generator).__name__ == "ChaCha"
    provenance = json.loads((private_folder(tmp_path / "o") / "provenance.json").read_text())
    assert provenance["from_test_seed"] is False
    assert int(provenance["root_key"]).bit_length() > 200  # 256 random bits, not a small seed


@pytest.mark.slow
def test_a_test_seed_is_reproducible_and_marked_not_for_publication(csv, tmp_path):
    one = build_release(request_for(csv, tmp_path / "one", test_seed=42))
    build_release(request_for(csv, tmp_path / "two", test_seed=42))
    assert one["purpose"] == "reproducible test, not for publication"
    assert (tmp_path / "one" / "synthetic.parquet").read_bytes() == (
        tmp_path / "two" / "synthetic.parquet"
    ).read_bytes()
    # whitelisted fields only: no seed, no argv (denominator: optional, releases since #33;
    # attributes: optional, releases since --attributes)
    assert set(one) == {*SCHEMA["required"], "denominator", "attributes"}


@pytest.mark.slow
def test_set_k_does_not_depend_on_the_number_of_sets(csv, tmp_path):
    # Same budget per set (epsilon scales with the sets), so the same calibration.
    build_release(request_for(csv, tmp_path / "two", sets=2, epsilon=2.0))
    build_release(request_for(csv, tmp_path / "four", sets=4, epsilon=4.0))
    two = pd.read_parquet(tmp_path / "two" / "synthetic.parquet")
    four = pd.read_parquet(tmp_path / "four" / "synthetic.parquet")
    pd.testing.assert_frame_equal(two, four[four["set"] < 2].reset_index(drop=True))


# --- 5. certified by default -----------------------------------------------------------
def test_nominal_methods_need_an_explicit_opt_in(csv, tmp_path):
    with pytest.raises(ReleaseError, match="nominal calibration, not a guarantee.*--allow-nominal"):
        build_release(request_for(csv, tmp_path / "o", method="paper"))
    info = build_release(request_for(csv, tmp_path / "o", method="paper", allow_nominal=True))
    assert info["guarantee"]["status"] == "nominal"
    assert info["guarantee"]["audited_worst_ratio"] > 1
    assert "nominal, not a guarantee" in info["guarantee"]["statement"]


@pytest.mark.slow
def test_default_is_certified(csv, tmp_path):
    info = build_release(request_for(csv, tmp_path / "o"))
    assert info["method"] == "certified" and info["guarantee"]["status"] == "certified"


# --- 6, 7. delta and the unit of privacy ------------------------------------------------
def test_manifest_states_delta_and_the_neighbouring_relation(csv, tmp_path):
    info = build_release(request_for(csv, tmp_path / "o", sets=2, delta=1e-12))
    assert info["neighbouring_relation"] == NEIGHBOURS
    assert "moved from one stratum to another" in NEIGHBOURS
    assert info["budget"]["delta_total"] == 1e-12
    per_set = info["budget"]["epsilon_per_set"]
    assert info["delta"]["sampler_tv_target"] == pytest.approx(5e-13 / (1 + math.exp(per_set)))
    validate(info)


# --- 8. ledger -----------------------------------------------------------------------
@pytest.mark.slow
def test_ledger_adds_up_releases_and_enforces_a_budget(csv, tmp_path, private_ledger):
    build_release(request_for(csv, tmp_path / "a", epsilon=1.0))
    shuffled = tmp_path / "shuffled.parquet"  # same strata, other row order and format
    STRATA.sample(frac=1.0, random_state=3).to_parquet(shuffled, index=False)
    build_release(request_for(shuffled, tmp_path / "b", epsilon=0.5))
    entries = Ledger(private_ledger).entries()
    assert len(entries) == 2 and len({e.dataset for e in entries}) == 1
    assert sum(e.epsilon for e in entries) == pytest.approx(1.5)
    with pytest.raises(ReleaseError, match="budget"):
        build_release(request_for(csv, tmp_path / "c", epsilon=1.0, budget=2.0))
    assert not (tmp_path / "c").exists()
    assert len(Ledger(private_ledger).entries()) == 2


def _by_region(tmp_path):
    """STRATA re-aggregated by region: another table of the same events."""
    path = tmp_path / "by_region.csv"
    agg = {"count": "sum", "population": "sum", "prior_rate": "mean"}
    STRATA.groupby("region", as_index=False).agg(agg).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_a_dataset_name_adds_up_the_releases_of_its_tables(
    csv, tmp_path, private_ledger, private_area
):
    """Deaths by code and region, then by region alone: one dataset, one budget."""
    fine = build_release(request_for(csv, tmp_path / "a", epsilon=1.0, dataset="s-deaths"))
    by_region = _by_region(tmp_path)
    coarse = dict(
        keys=("region",), dataset="s-deaths", budget=2.0, prior_source="the tests' regional rates"
    )  # one rate per stratum now
    build_release(request_for(by_region, tmp_path / "b", epsilon=0.5, **coarse))
    entries = Ledger(private_ledger).entries()
    assert [e.dataset for e in entries] == ["s-deaths"] * 2 and len({e.table for e in entries}) == 2
    assert Ledger(private_ledger).spent("s-deaths")[:2] == (1.5, pytest.approx(2e-12))
    private = request_for(csv, tmp_path / "a").private_folder(fine["seed_commitment"])
    provenance = json.loads((private / "provenance.json").read_text())
    assert provenance["ledger_dataset"] == "s-deaths"
    assert provenance["table_id"] == entries[0].table
    folders = sorted(private_area.iterdir())
    before = private_ledger.read_bytes()

    # 1.5 spent on the fine table counts against a release of the coarse one
    with pytest.raises(ReleaseError, match="budget exceeded for dataset s-deaths") as info:
        build_release(request_for(by_region, tmp_path / "c", epsilon=1.0, **coarse))
    assert all(e.table[:12] in str(info.value) for e in entries)
    assert not (tmp_path / "c").exists() and sorted(private_area.iterdir()) == folders
    assert private_ledger.read_bytes() == before
    # without the name the coarse table is its own, unnamed budget key: refused (bound)
    with pytest.raises(ReleaseError, match="release it with --dataset s-deaths"):
        build_release(
            request_for(
                by_region,
                tmp_path / "c",
                keys=("region",),
                budget=2.0,
                prior_source="the tests' regional rates",
            )
        )
    assert private_ledger.read_bytes() == before


@pytest.mark.parametrize("sanitised", [False, True])
@pytest.mark.parametrize("name", ["other-deaths"])
def test_a_table_released_under_a_name_is_refused_without_it_before_anything(
    csv, tmp_path, private_ledger, private_area, sanitised, name
):
    """The binding refusal comes before the ledger records, the prior or the sets are drawn
    and any folder is written; its message names the name to use and no count."""
    build_release(request_for(csv, tmp_path / "a", dataset="s-deaths"))
    table = Ledger(private_ledger).entries()[0].table
    folders = sorted(private_area.iterdir())
    before = private_ledger.read_bytes()
    prior, path = {}, csv
    if sanitised:  # the same table (keys, populations) without its prior column
        prior, path = dict(sanitised_prior_by=("region",)), tmp_path / "sanitised" / "s.csv"
        path.parent.mkdir()
        STRATA.drop(columns="prior_rate").to_csv(path, index=False)
    with pytest.raises(ReleaseError) as info:
        build_release(request_for(path, tmp_path / "b", dataset=name, **prior))
    asked = f"names dataset {name}" if name else "names no dataset"
    assert str(info.value) == (
        f"table s.csv ({table[:12]}) was released under --dataset s-deaths, but this "
        f"release {asked}.\n"
        "Its releases count against the budget of s-deaths: release it with --dataset "
        "s-deaths.\n"
        "A table belongs to one dataset: without the name, or under a second one, its\n"
        "releases would not be added up with the other releases about the same people.\n"
        "Other events over the same strata and populations (births beside deaths) need a\n"
        "ledger of their own (--ledger FILE) and --new-dataset: a table is known by its keys.\n"
        "Nothing was recorded."
    )  # the table's label, short id and names: no count
    assert private_ledger.read_bytes() == before
    assert not (tmp_path / "b").exists() and sorted(private_area.iterdir()) == folders
    with pytest.raises(ReleaseError, match="--dataset: a dataset name is"):
        build_release(request_for(csv, tmp_path / "b", dataset="2024"))  # hex digits only
    with pytest.raises(ReleaseError, match="--dataset NAME is required"):  # issue #26
        build_release(request_for(path, tmp_path / "b", dataset=None, **prior))
    assert private_ledger.read_bytes() == before


# --- 9. private files apart from the release ---------------------------------------------
@pytest.mark.slow
def test_release_folder_holds_only_what_the_manifest_lists(csv, tmp_path, private_area):
    info = build_release(request_for(csv, tmp_path / "out", sets=2))
    listed = {entry["path"] for entry in info["files"].values()}
    assert listed == {"synthetic.parquet", "hyperparameters.parquet", "README.md"}
    assert set(listing(tmp_path / "out")) == listed | {"manifest.json"}
    assert listing(tmp_path) == ["out", "s.csv"]  # nothing beside the release
    # by default in the steward's folder, named after --out and the seed commitment
    private = private_area / f"out-{info['seed_commitment'][:16]}"
    assert listing(private_area) == [private.name]
    assert {"provenance.json", "summary.md"} <= set(listing(private))
    assert oct(private.stat().st_mode & 0o777) == "0o700"
    assert oct(private_area.stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "out").stat().st_mode & 0o777) == "0o755"


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_public_files_carry_one_fixed_time_and_fixed_modes(tmp_path, private_folder, umask):
    """The files were written after the sampler was built and the sets drawn, so their
    modification times (kept by zip, tar and rsync -a) told how long that took, which
    depends on the counts. Every public path now has the public time PUBLIC_MTIME
    (1980-01-01, the earliest a ZIP holds) and modes 0644 (files) and 0755 (the folder),
    whatever the umask; the private folder keeps its real times."""
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "n.csv", index=False)
    releases = {
        tmp_path / "a": dict(sanitised_prior_by=("region",), sets=2),  # with prior.parquet
        tmp_path / "b": dict(output_format="csv", sanitised_prior_by=()),
    }
    old = os.umask(umask)
    try:
        for out, changes in releases.items():
            build_release(request_for(tmp_path / "n.csv", out, **changes))
    finally:
        os.umask(old)
    assert release_folder.PUBLIC_MTIME == 315532800  # 1980-01-01T00:00:00Z
    for out in releases:
        folder_stat = out.stat()  # before listing it, which may update its access time
        names = listing(out)
        assert "prior.parquet" in names or out.name == "b"
        stats = {name: (out / name).stat() for name in names}  # stat reads no content
        stats["."] = folder_stat
        for name, st in stats.items():
            assert st.st_mtime_ns == release_folder.PUBLIC_MTIME * 10**9, (out, name)
            assert st.st_atime_ns == release_folder.PUBLIC_MTIME * 10**9, (out, name)
            mode = 0o755 if name == "." else 0o644
            assert oct(st.st_mode & 0o7777) == oct(mode), (out, name)
            assert os.path.isdir(out / name) == (name == ".")
        private = private_folder(out)
        assert private.stat().st_mtime > release_folder.PUBLIC_MTIME + 10**9  # real times
        assert oct(private.stat().st_mode & 0o777) == "0o700"


@pytest.mark.slow
def test_the_default_private_area_is_in_the_home_without_xdg(csv, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    info = build_release(request_for(csv, tmp_path / "out"))
    area = tmp_path / "home" / ".local" / "share" / "dpcounts" / "private"
    assert listing(area) == [f"out-{info['seed_commitment'][:16]}"]


@pytest.mark.slow
def test_releases_never_share_a_private_folder(csv, tmp_path, private_area):
    """Same --out name in two places, and one --out replaced with --force: each release
    gets its own private folder, and a replaced release's key is kept."""
    infos = [build_release(request_for(csv, tmp_path / "a" / "out")),
             build_release(request_for(csv, tmp_path / "b" / "out")),
             build_release(request_for(csv, tmp_path / "b" / "out", force=True))]  # fmt: skip
    names = [f"out-{info['seed_commitment'][:16]}" for info in infos]
    assert listing(private_area) == sorted(names) and len(set(names)) == 3
    for info, name, out in zip(infos, names, ("a", "b", "b"), strict=True):
        provenance = json.loads((private_area / name / "provenance.json").read_text())
        assert provenance["release"] == str(tmp_path / out / "out")
        opened = f"{provenance['seed_commitment_salt']}:{provenance['root_key']}".encode()
        assert hashlib.sha256(opened).hexdigest() == info["seed_commitment"]


@pytest.mark.slow
def test_private_dir_puts_the_private_folder_where_it_says(csv, tmp_path, private_area):
    keys = tmp_path / "vault" / "2026"
    build_release(request_for(csv, tmp_path / "out", private_dir=keys))
    assert {"provenance.json", "summary.md"} <= set(listing(keys))
    assert oct(keys.stat().st_mode & 0o777) == "0o700"
    assert not private_area.exists()
    assert listing(tmp_path) == ["out", "s.csv", "vault"]
    # --force replaces an earlier private folder there, and nothing else
    with pytest.raises(ReleaseError, match="not empty; choose another --private-dir"):
        build_release(request_for(csv, tmp_path / "new", private_dir=keys))
    build_release(request_for(csv, tmp_path / "out", private_dir=keys, force=True))
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "holiday.jpg").write_text("precious")
    with pytest.raises(ReleaseError, match="holds no dpcounts private folder"):
        build_release(request_for(csv, tmp_path / "out", private_dir=photos, force=True))
    with pytest.raises(ReleaseError, match="holds no dpcounts private folder"):  # a release
        build_release(request_for(csv, tmp_path / "new", private_dir=tmp_path / "out", force=True))
    assert (photos / "holiday.jpg").read_text() == "precious"


@pytest.mark.slow
def test_no_public_file_names_the_private_folder(csv, tmp_path, private_area, private_folder):
    """A path can name the steward (a user name): the public folder never holds it."""
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "n.csv", index=False)
    build_release(request_for(tmp_path / "n.csv", tmp_path / "a", sanitised_prior_by=("region",)))
    build_release(request_for(csv, tmp_path / "b", private_dir=tmp_path / "steward_keys",
                              output_format="csv"))  # fmt: skip
    for out, private in ((tmp_path / "a", private_folder(tmp_path / "a")),
                         (tmp_path / "b", tmp_path / "steward_keys")):  # fmt: skip
        assert (private / "provenance.json").exists()
        secrets_ = {str(private), str(private.resolve()), str(private.parent.resolve())}
        assert len(listing(out)) >= 3
        for path in out.iterdir():
            data = path.read_bytes()
            for text in secrets_:
                assert text.encode() not in data, (path, text)


# --- 10. row order ---------------------------------------------------------------------
@pytest.mark.slow
def test_release_ignores_and_hides_the_input_row_order(csv, tmp_path):
    build_release(request_for(csv, tmp_path / "a"))
    STRATA.iloc[::-1].to_csv(tmp_path / "r.csv", index=False)
    build_release(request_for(tmp_path / "r.csv", tmp_path / "b"))
    for name in ("synthetic.parquet", "hyperparameters.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    keys = pd.read_parquet(tmp_path / "b" / "hyperparameters.parquet")[list(KEYS)]
    pd.testing.assert_frame_equal(keys, keys.sort_values(list(KEYS)).reset_index(drop=True))


# --- 11. the output folder ---------------------------------------------------------------
@pytest.mark.slow
def test_force_replaces_only_a_dpcounts_release(csv, tmp_path):
    out = tmp_path / "out"
    build_release(request_for(csv, out, sets=2))
    with pytest.raises(ReleaseError, match="not empty"):
        build_release(request_for(csv, out))
    build_release(request_for(csv, out, force=True))
    assert pd.read_parquet(out / "synthetic.parquet")["set"].max() == 0
    other = tmp_path / "photos"
    other.mkdir()
    (other / "holiday.jpg").write_text("precious")
    with pytest.raises(ReleaseError, match="holds no dpcounts release"):
        build_release(request_for(csv, other, force=True))
    assert (other / "holiday.jpg").read_text() == "precious"


def test_working_directory_and_its_ancestors_are_refused(csv, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for out in (work, tmp_path, tmp_path.parent):
        with pytest.raises(ReleaseError, match="working directory or one of its ancestors"):
            build_release(request_for(csv, out, force=True))
    assert listing(work) == []


@pytest.mark.parametrize("step", ["write_private", "install"])
@pytest.mark.parametrize("private_dir", [None, "keys"])
def test_a_failure_while_writing_leaves_nothing(csv, tmp_path, monkeypatch, private_area,
                                                step, private_dir):  # fmt: skip
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(release_folder if step == "install" else sequence, step, fail)
    keys = None if private_dir is None else tmp_path / private_dir
    with pytest.raises(RuntimeError, match="disk full"):
        build_release(request_for(csv, tmp_path / "out", private_dir=keys))
    assert listing(tmp_path) == ["s.csv"]
    assert not private_area.exists() or listing(private_area) == []


@pytest.mark.slow
def test_stale_partials_of_dead_processes_are_removed(csv, tmp_path, private_area):
    dead = tmp_path / ".out.999999999.abc123.partial"
    dead.mkdir()
    (dead / "provenance.json").write_text("{}")  # a killed run's private files
    alive = tmp_path / f".out.{os.getpid()}.abc123.partial"
    alive.mkdir()
    removed = release_folder.remove_stale_partials(tmp_path)
    assert removed == [dead] and not dead.exists() and alive.exists()
    alive.rmdir()
    dead.mkdir()
    private_area.mkdir(parents=True)
    dead_private = private_area / ".out-0123456789abcdef.999999999.abc123.partial"
    dead_private.mkdir()
    (dead_private / "provenance.json").write_text("{}")
    build_release(request_for(csv, tmp_path / "out"))  # the next release cleans up
    assert listing(tmp_path) == ["out", "s.csv"]
    assert not dead_private.exists() and len(listing(private_area)) == 1


@pytest.mark.slow
def test_empty_out_folder_is_taken_over(csv, tmp_path):
    (tmp_path / "out").mkdir()
    build_release(request_for(csv, tmp_path / "out"))
    assert (tmp_path / "out" / "manifest.json").exists()


# --- 12. inputs that slipped through ------------------------------------------------------
BAD_VALUES = {
    "count above population": ("count", 0, "5000", "'count' above 'population'"),
    "infinite count": ("count", 1, "inf", "infinite 'count'"),
    "count beyond 2^53": ("count", 2, "1e20", r"beyond 2\^53"),
    "fractional count": ("count", 3, "2.5", "fractional counts"),
    "infinite population": ("population", 4, "inf", "infinite 'population'"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_are_refused_naming_the_stratum(tmp_path, case):
    column, row, value, message = BAD_VALUES[case]
    frame = STRATA.astype({column: object})
    frame.loc[row, column] = value
    frame.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match=message) as err:
        load_strata(request_for(tmp_path / "s.csv", tmp_path / "o"))
    assert f"code='{row + 1}'" in str(err.value)


def test_huge_epsilon_is_refused_clearly(csv, tmp_path):
    with pytest.raises(ReleaseError, match="too large.*underflow"):
        build_release(request_for(csv, tmp_path / "o", mechanism="md", epsilon=2000.0))


@pytest.mark.slow
def test_a_sampler_too_large_is_refused_before_it_is_built(tmp_path):
    frame = STRATA.assign(count=10**12, population=10**13)
    frame.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match=r"GiB.*widest stratum is \(code=") as err:
        build_release(request_for(tmp_path / "s.csv", tmp_path / "o"))
    # weeks of work beyond the machine's memory: no limit worth raising, and truncated
    # cannot calibrate expected counts of 1e12
    assert str(err.value).endswith("Use fewer strata or a smaller total")
    assert listing(tmp_path) == ["s.csv"]


def test_truncation_bounds_beyond_scipy_are_refused_by_name(tmp_path):
    """Issue #27: a table of 1e12 events gave "cal bounds must satisfy 0 <= lower <= upper"."""
    frame = STRATA.assign(count=10**12, population=10**13)
    frame.to_csv(tmp_path / "s.csv", index=False)
    request = request_for(tmp_path / "s.csv", tmp_path / "o", mechanism="truncated")
    with pytest.raises(ReleaseError, match="expected count of .* cannot be computed"):
        build_release(request)


def test_a_refusal_for_size_names_only_options_that_would_help(csv, tmp_path):
    """Issue #27: a truncated release too large was told to use --mechanism truncated. Over
    the memory limit alone, the way out is a larger --max-memory; truncated is suggested
    only when its own forecast fits the limits (here nothing fits in one byte). Any release
    needs the interpreter and its libraries (about 0.4 GiB, issue #36)."""
    for mechanism in ("truncated", "pg"):
        with pytest.raises(ReleaseError, match=r"Use --max-memory 0.4 \(the machine") as err:
            build_release(request_for(csv, tmp_path / "o", mechanism=mechanism, max_memory=1))
        advice = str(err.value).split(". Use ")[-1]
        # truncated would not fit in 1 byte either
        assert (
            advice
            == "--max-memory 0.4 (the machine has the memory), or fewer strata or a smaller total"
        )
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_release_forecast_beyond_max_minutes_is_refused_with_the_time_it_needs(csv, tmp_path):
    """Issue #27: the fixed work limit is gone; a release is refused on its forecast time on
    this machine, which the steward can raise, and the message says by how much."""
    request = request_for(csv, tmp_path / "o", mechanism="truncated", max_minutes=1e-7)
    with pytest.raises(ReleaseError, match=r"minutes on this machine") as err:
        build_release(request)
    advice = str(err.value).split(". Use ")[-1]
    assert advice.startswith("--max-minutes 1,") and "--max-memory" not in advice
    assert not (tmp_path / "o").exists()


# --- dpcounts calibrate: the promise before the draw ----------------------------------------
@pytest.mark.slow
def test_preview_shows_the_calibration_a_release_publishes(csv, tmp_path, private_ledger):
    from dpcounts.release.preview import format_preview, preview

    request = request_for(csv, tmp_path / "out", mechanism="truncated", sets=4, epsilon=2.0)
    info = preview(request, hyperparameters=tmp_path / "h.parquet")
    assert not private_ledger.exists() or not private_ledger.read_text()  # nothing spent
    build_release(request)
    published = pd.read_parquet(tmp_path / "out" / "hyperparameters.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "h.parquet"), published)
    assert info["budget"]["epsilon_per_set"] == 0.5
    assert info["calibration"]["a"]["max"] == pytest.approx(published["a"].max())
    text = format_preview(info)
    assert "certified" in text and "4 set(s) x 0.5" in text


def test_preview_of_a_sanitised_prior_says_why_there_is_no_calibration(tmp_path):
    from dpcounts.release.preview import preview

    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    info = preview(request_for(tmp_path / "s.csv", tmp_path / "o", sanitised_prior_by=("region",)))
    assert info["calibration"] is None and "known only after" in info["calibration_note"]
    assert info["budget"]["epsilon_prior"] == pytest.approx(0.1)


# --- issue #26: the budget a steward sets is the budget spent ------------------------------


@pytest.mark.slow
def test_swapped_key_columns_are_one_table_bound_to_its_name(csv, tmp_path, private_ledger):
    """--keys code region then --keys region code: one table id, so one binding (#26, 1)."""
    build_release(request_for(csv, tmp_path / "a", dataset="s-deaths"))
    before = private_ledger.read_bytes()
    with pytest.raises(ReleaseError, match="release it with --dataset s-deaths"):
        build_release(request_for(csv, tmp_path / "b", keys=KEYS[::-1], dataset="other"))
    assert private_ledger.read_bytes() == before and not (tmp_path / "b").exists()
    build_release(request_for(csv, tmp_path / "c", keys=KEYS[::-1], dataset="s-deaths"))
    assert len({e.table for e in Ledger(private_ledger).entries()}) == 1


def test_the_table_id_ignores_the_file_type_and_spaces(csv, tmp_path):
    parquet = tmp_path / "s.parquet"
    STRATA.assign(region=[" n", "n", "n ", "s", "s", "s"]).to_parquet(parquet, index=False)
    text = load_strata(request_for(csv, tmp_path / "a"))
    typed = load_strata(request_for(parquet, tmp_path / "b", keys=KEYS[::-1]))
    assert text.table_id() == typed.table_id()


@pytest.mark.slow
def test_a_stored_budget_is_checked_on_every_later_release(csv, tmp_path, private_ledger):
    """Three releases with --budget 1.5 on the first alone never reach epsilon 1.5 (#26, 2)."""
    build_release(request_for(csv, tmp_path / "a", dataset="s-deaths", budget=1.5))
    build_release(request_for(csv, tmp_path / "b", dataset="s-deaths", epsilon=0.4))
    before = private_ledger.read_bytes()
    with pytest.raises(ReleaseError, match="of the budget epsilon = 1.5"):
        build_release(request_for(csv, tmp_path / "c", dataset="s-deaths", epsilon=0.4))
    with pytest.raises(ReleaseError, match="exceeds the budget epsilon = 1.5 stored"):
        build_release(request_for(csv, tmp_path / "c", dataset="s-deaths", budget=3.0))
    assert private_ledger.read_bytes() == before and not (tmp_path / "c").exists()
    assert Ledger(private_ledger).spent("s-deaths")[0] == pytest.approx(1.4)


@pytest.mark.slow
def test_a_deleted_or_cut_ledger_is_refused_and_rebuilt_from_the_private_folders(
    csv, tmp_path, private_ledger, private_area
):
    """Deleting the ledger, or its first line, resets nothing (#26, 2)."""
    build_release(request_for(csv, tmp_path / "a", dataset="s-deaths", budget=1.5))
    build_release(request_for(csv, tmp_path / "b", dataset="s-deaths", epsilon=0.25))
    whole = private_ledger.read_bytes()
    folders = sorted(private_area.iterdir())
    private_ledger.write_bytes(b"".join(whole.splitlines(keepends=True)[1:]))  # first line
    with pytest.raises(ReleaseError, match="--rebuild"):
        build_release(request_for(csv, tmp_path / "c", dataset="s-deaths", epsilon=0.1))
    private_ledger.unlink()
    with pytest.raises(ReleaseError, match="missing") as info:
        build_release(request_for(csv, tmp_path / "c", dataset="s-deaths", epsilon=0.1))
    assert "\n" not in str(info.value) and "dpcounts ledger" in str(info.value)
    assert not private_ledger.exists() and sorted(private_area.iterdir()) == folders
    assert not (tmp_path / "c").exists()
    Ledger(private_ledger).rebuild()
    assert Ledger(private_ledger).spent("s-deaths")[0] == pytest.approx(1.25)
    assert Ledger(private_ledger).budgets() == {"s-deaths": 1.5}
    with pytest.raises(ReleaseError, match="of the budget epsilon = 1.5"):
        build_release(request_for(csv, tmp_path / "c", dataset="s-deaths", epsilon=0.5))


@pytest.mark.parametrize("option", [dict(delta=1e-40), dict(epsilon=5000.0)])
@pytest.mark.parametrize("mechanism", ["pg", "truncated"])
def test_public_refusals_with_a_sanitised_prior_spend_nothing(
    csv, tmp_path, private_ledger, option, mechanism
):
    """--delta 1e-40 or --epsilon 5000 is refused before the prior is drawn (#26, 4)."""
    STRATA.drop(columns="prior_rate").to_csv(csv, index=False)
    request = request_for(csv, tmp_path / "a", mechanism=mechanism,
                          sanitised_prior_by=("region",), **option)  # fmt: skip
    with pytest.raises(ReleaseError, match="cannot calibrate"):
        build_release(request)
    assert not private_ledger.exists()


def test_a_pg_release_over_the_memory_limit_is_told_the_lighter_family_that_fits(tmp_path):
    """The registry's ``lighter`` (pg: truncated): a pg sampler over --max-memory whose
    truncated sampler of the same inputs fits is told to use --mechanism truncated, decided
    from the two public forecasts (memory, not this machine's speed)."""
    from dpcounts.release.plan import plan_release

    frame = STRATA.assign(population=STRATA["population"] * 10_000)
    frame["count"] = (frame["population"] * frame["prior_rate"]).round().astype(int)
    frame.to_csv(tmp_path / "s.csv", index=False)
    ledger = dict(ledger=tmp_path / "l.jsonl", new_dataset=True, epsilon=5.0)
    forecast = {m: plan_release(request_for(tmp_path / "s.csv", tmp_path / "o", mechanism=m,
                                            **ledger), releasing=False).forecast["bytes"]
                for m in ("pg", "truncated")}  # fmt: skip
    assert forecast["truncated"] < forecast["pg"]
    between = (forecast["truncated"] + forecast["pg"]) / 2
    request = request_for(tmp_path / "s.csv", tmp_path / "o", max_memory=between, **ledger)
    with pytest.raises(ReleaseError, match="Use ") as err:
        build_release(request)
    assert "--mechanism truncated (its bounded strata make a sampler within the limits)" in str(
        err.value
    )
    assert not (tmp_path / "o").exists()
