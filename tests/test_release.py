"""dpsynth.release in-process: seeding of sets, group totals, atomic folders, prior joins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth import release
from dpsynth.privacy.calibrate import calibrate
from dpsynth.release import (
    ReleaseError,
    ReleaseRequest,
    build_release,
    draw_sets,
    group_totals,
    load_strata,
    redacted_command,
)

STRATA = pd.DataFrame(
    {
        "code": [1, 2, 3, 4],
        "count": [4, 0, 9, 7],
        "population": [1000, 800, 1500, 900],
        "prior_rate": [0.004, 0.004, 0.006, 0.006],
    }
)


def request_for(path, out, **changes) -> ReleaseRequest:
    fields = dict(input=path, out=out, epsilon=1.0, mechanism="pg", seed=1, progress=False)
    fields.update(changes)
    return ReleaseRequest(**fields)


def test_redacted_command_blanks_the_seed_only():
    command = ["dpsynth", "synthesize", "--seed", "99", "--sets", "3", "--seed=7"]
    assert redacted_command(command) == [
        "dpsynth", "synthesize", "--seed", "<private>", "--sets", "3", "--seed=<private>",
    ]  # fmt: skip


def test_group_totals_match_pandas():
    rng = np.random.default_rng(0)
    keys = pd.DataFrame({"g": rng.choice(["a", "b", "c"], size=30)})
    original = rng.integers(0, 10, size=30)
    synthetic = rng.integers(0, 10, size=(4, 30))
    totals = group_totals(keys, "g", original, synthetic).set_index("g")
    per_set = pd.DataFrame(synthetic.T).groupby(keys["g"].to_numpy()).sum()
    expected_original = pd.Series(original).groupby(keys["g"].to_numpy()).sum()
    assert totals["original"].tolist() == expected_original.loc[totals.index].tolist()
    np.testing.assert_allclose(totals["synthetic_mean"], per_set.mean(axis=1).loc[totals.index])
    assert totals["synthetic_min"].tolist() == per_set.min(axis=1).loc[totals.index].tolist()
    assert totals["synthetic_max"].tolist() == per_set.max(axis=1).loc[totals.index].tolist()


def test_draw_sets_streams_are_per_set():
    y = STRATA["count"].to_numpy()
    cal = calibrate("pg", 1.0, int(y.sum()), STRATA["population"], STRATA["prior_rate"])
    three = draw_sets(y, cal, 3, seed=123, progress=False)
    five = draw_sets(y, cal, 5, seed=123, progress=False)
    np.testing.assert_array_equal(three, five[:3])
    assert np.all(five.sum(axis=1) == y.sum())
    assert not np.array_equal(draw_sets(y, cal, 5, seed=124, progress=False), five)


def test_parquet_integer_keys_join_a_csv_prior(tmp_path):
    STRATA.drop(columns="prior_rate").to_parquet(tmp_path / "s.parquet", index=False)
    STRATA[["code", "prior_rate"]].iloc[::-1].to_csv(tmp_path / "prior.csv", index=False)
    strata = load_strata(
        request_for(tmp_path / "s.parquet", tmp_path / "out", prior_file=tmp_path / "prior.csv")
    )
    np.testing.assert_array_equal(strata.prior_rate, STRATA["prior_rate"].to_numpy())
    assert strata.keys["code"].tolist() == [1, 2, 3, 4]


def test_md_needs_no_prior(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    strata = load_strata(request_for(tmp_path / "s.csv", tmp_path / "o", mechanism="md"))
    assert strata.prior_rate is None


def test_pg_without_a_prior_says_how_to_give_one(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match=r"s\.csv: missing column 'prior_rate'.*--prior"):
        load_strata(request_for(tmp_path / "s.csv", tmp_path / "o"))


def test_tail_with_pg_is_refused(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError, match="--tail and --inflation apply to --mechanism truncated"):
        build_release(request_for(tmp_path / "s.csv", tmp_path / "o", tail=0.01))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


def test_a_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    """The folder is built beside --out and renamed only when complete."""
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    real_write = release._write_release

    def write_then_fail(tmp, *args):
        real_write(tmp, *args)  # every file written into the temporary folder ...
        raise RuntimeError("disk full")  # ... and then the run dies before the rename

    monkeypatch.setattr(release, "_write_release", write_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        build_release(request_for(tmp_path / "s.csv", tmp_path / "out"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


def test_force_replaces_an_old_release_whole(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    out = tmp_path / "out"
    build_release(request_for(tmp_path / "s.csv", out, sets=2))
    (out / "stale.txt").write_text("from before")
    with pytest.raises(ReleaseError, match="not empty"):
        build_release(request_for(tmp_path / "s.csv", out))
    build_release(request_for(tmp_path / "s.csv", out, force=True, sets=1))
    assert not (out / "stale.txt").exists()
    assert pd.read_parquet(out / "synthetic.parquet")["set"].max() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s.csv"]


def test_empty_out_folder_is_used(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "out").mkdir()
    build_release(request_for(tmp_path / "s.csv", tmp_path / "out"))
    assert (tmp_path / "out" / "manifest.json").exists()


def test_out_that_is_a_file_is_refused(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "out").write_text("x")
    with pytest.raises(ReleaseError, match="not a folder"):
        build_release(request_for(tmp_path / "s.csv", tmp_path / "out", force=True))


def test_no_map_without_fips(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    build_release(request_for(tmp_path / "s.csv", tmp_path / "out"))
    summary = (tmp_path / "out" / "private" / "summary.md").read_text()
    assert "No map: no key column of 5-digit county FIPS codes" in summary


def test_fips_outside_the_county_frame_gives_no_map(tmp_path):
    frame = STRATA.assign(fips=["01001", "01003", "99999", "01005"]).drop(columns="code")
    frame.to_csv(tmp_path / "s.csv", index=False)
    build_release(request_for(tmp_path / "s.csv", tmp_path / "out"))
    summary = (tmp_path / "out" / "private" / "summary.md").read_text()
    assert "No map: 1 FIPS code(s) of `fips` are not counties" in summary
    assert not list((tmp_path / "out" / "private").glob("map_*.png"))
