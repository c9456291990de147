"""A release of a study's table (``--study CONFIG:NAME``, issue #33 item 2): what the study
expresses (shared populations, a prior grouped by an attribute, its settings) reaches the
release from the one entry, checked by the study stage's code; the command line gives only
what the study leaves open."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli as run
from workflow_helpers import REPO

KEYS = ["county", "cause", "age"]


def table(seed: int = 3) -> pd.DataFrame:
    """12 counties (two states) x 2 causes x 3 ages; the causes of one county and age share
    its person-years (population_keys: county, age)."""
    rng = np.random.default_rng(seed)
    frame = pd.MultiIndex.from_product(
        [[f"c{i:02d}" for i in range(12)], ["heart", "cancer"], ["young", "middle", "old"]],
        names=KEYS,
    ).to_frame(index=False)
    person_years = {(c, a): rng.integers(20_000, 90_000) for c in frame["county"].unique()
                    for a in frame["age"].unique()}  # fmt: skip
    pairs = zip(frame["county"], frame["age"], strict=True)
    frame["person_years"] = [person_years[pair] for pair in pairs]
    frame["state"] = np.where(frame["county"] < "c06", "north", "south")
    rate = frame["age"].map({"young": 2e-4, "middle": 1e-3, "old": 5e-3})
    frame["deaths"] = rng.poisson(frame["person_years"] * rate)
    return frame


def study(tmp_path, **changes) -> str:
    """A study config in ``tmp_path`` (paths absolute: the checkout is the repository)."""
    path = tmp_path / "causes.csv"
    table().to_csv(path, index=False)
    entry = {
        "table": str(path),
        "keys": KEYS,
        "count": "deaths",
        "population": "person_years",
        "population_keys": ["county", "age"],
        "attributes": ["state"],
        "area": "county",
        "prior": {"source": "sanitised", "by": ["state", "age"], "epsilon": 0.2},
        "arms": {"pg": ["certified"], "truncated": ["certified"]},
        "epsilons": [1.0, 10.0],
        "sets": 5,
        "disparities": [
            {
                "name": "south_vs_north",
                "numerator": {"state": "south"},
                "denominator": {"state": "north"},
            }
        ],  # fmt: skip
    } | changes
    config = {"studies": {"causes": entry}}
    (tmp_path / "my_study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return f"{tmp_path / 'my_study.yaml'}:causes"


@pytest.fixture
def in_checkout(monkeypatch):
    monkeypatch.chdir(REPO)  # where snakemake runs: the config's paths are relative to it


def synthesize(spec, out, *extra):
    return run(
        "synthesize", "--study", spec, "--mechanism", "pg", "--epsilon", "5", "--sets", "3",
        "--strata", "cross-product", "--dataset", "causes", "--out", str(out), "--quiet",
        "--release-without-guide", *extra,  # the study has not run (its own tests: #52)
    )  # fmt: skip


@pytest.mark.slow
def test_everything_the_study_says_reaches_the_release(tmp_path, in_checkout, private_area):
    code, _, stderr = synthesize(study(tmp_path), tmp_path / "out")
    assert code == 0, stderr
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["keys"] == KEYS and manifest["population_column"] == "person_years"
    prior = manifest["prior"]
    assert prior["kind"] == "sanitised" and prior["groups"] == ["state", "age"]
    assert manifest["budget"]["epsilon_prior"] == pytest.approx(0.2)
    assert any("attribute column(s) ['state']" in line for line in manifest["public"])
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    assert list(hyper.columns[:4]) == [*KEYS, "state"]  # the prior's attribute, public
    groups = pd.read_parquet(out / "prior.parquet")
    assert sorted(groups["state"].unique()) == ["north", "south"]
    code, stdout, _ = run("verify", str(out))
    assert code == 0, stdout

    (utility,) = private_area.glob("*/utility.md")
    text = utility.read_text()
    truth = table()
    people = truth.drop_duplicates(["county", "age"])["person_years"].sum()
    overall = truth["deaths"].sum() / people * 1e5  # each person-year counted once
    assert f"the overall rate ({overall:.3g})" in text
    lines = [line for line in text.splitlines() if line.startswith("- **") and "`)" in line]
    names = [line.split("(`")[1].split("`)")[0] for line in lines]
    from dpcounts.studies.stage.measures import MEASURES, margin_name

    assert names == [m.name for m in MEASURES] + [margin_name((key,)) for key in KEYS] + [
        "disparity:south_vs_north"
    ]  # the registry
    south = truth["state"] == "south"
    units = truth.drop_duplicates(["county", "age"])
    ratio = (truth.loc[south, "deaths"].sum() / units.loc[units["state"] == "south",
             "person_years"].sum()) / (truth.loc[~south, "deaths"].sum()
             / units.loc[units["state"] == "north", "person_years"].sum())  # fmt: skip
    assert f"(truth {ratio:.3g})" in lines[-1]  # the disparity, after the registry's
    assert all("the guide: not run" in line for line in lines)  # the study has not run
    # one no-privacy reference in the whole report: the study's rMSE against it reads as
    # the general section's (the same measure on the same tables)
    general = pd.read_csv(utility.with_name("utility.csv")).set_index("measure")
    theirs = float(re.search(r"against (\S+) with no privacy", lines[0]).group(1))
    assert theirs == pytest.approx(general.loc["rmse", "reference_median"], rel=1e-2)


@pytest.mark.slow
def test_a_new_measure_reaches_the_report_without_touching_the_release(
    tmp_path, in_checkout, private_area, monkeypatch
):
    from dpcounts.studies.stage import measures

    extra = measures.Measure(
        "total_events", "Total events", "events", measures.KINDS["ratio"],
        lambda m, counts, truth, rates: counts.sum(axis=1),
    )  # fmt: skip
    monkeypatch.setattr(measures, "MEASURES", (*measures.MEASURES, extra))
    code, _, stderr = synthesize(study(tmp_path), tmp_path / "out")
    assert code == 0, stderr
    (utility,) = private_area.glob("*/utility.md")
    assert "**Total events** (`total_events`)" in utility.read_text()


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--keys", "county"], "--keys (studies.NAME.keys)"),
        (["--rounding", "nearest"], "--rounding (studies.NAME.rounding)"),
        (["--sanitised-prior-by", "age"], "--sanitised-prior-by (studies.NAME.prior)"),
        (["--method", "exact"], "the study judged the arms pg / certified, truncated / "
         "certified, not pg / exact"),
    ],
)  # fmt: skip
def test_what_the_study_decides_is_not_given_twice(tmp_path, in_checkout, extra, words):
    code, stdout, stderr = synthesize(study(tmp_path), tmp_path / "out", *extra)
    assert code == 2 and not stdout and words in stderr
    assert not (tmp_path / "out").exists()


def test_a_wrong_study_is_one_line_naming_the_fix(tmp_path, in_checkout):
    spec = study(tmp_path)
    for bad, words in [
        (str(tmp_path / "my_study.yaml"), "expected CONFIG:NAME"),
        (f"{tmp_path / 'my_study.yaml'}:other", "no study 'other'"),
        (f"{tmp_path / 'none.yaml'}:causes", "not found"),
    ]:
        code, _, stderr = synthesize(bad, tmp_path / "out")
        assert code == 2 and words in stderr and "Traceback" not in stderr
    study(tmp_path, population_keys=["county", "nowhere"])
    code, _, stderr = synthesize(spec, tmp_path / "out")
    assert code == 2 and "studies.causes.population_keys" in stderr


@pytest.mark.slow
def test_calibrate_takes_the_study_too(tmp_path, in_checkout, private_ledger):
    code, stdout, stderr = run(
        "calibrate", "--study", study(tmp_path, prior={"source": "overall"}), "--mechanism",
        "truncated", "--epsilon", "4", "--strata", "cross-product", "--release-without-guide",
    )  # fmt: skip
    assert code == 0, stderr
    assert "truncated / certified on 72 strata" in stdout and "prior: total" in stdout
    assert not private_ledger.exists()


def test_a_set_beyond_the_tolerance_is_read_against_the_studys_own_tables():
    """The guide promises the typical table (the median over the study's sets): a
    single set beyond the tolerance but within the spread of the study's tables at that
    epsilon is said to vary as one table does, not to break the promise."""
    from dpcounts.release.report.promise import Kept

    def kept(value, study_range):
        return Kept(
            name="disparity:d", title="d", kind="ratio", truth=1.27,
            synthetic=np.array([value]), reference=np.array([1.29, 1.27, 1.31]),
            distance=abs(value / 1.29 - 1), tolerance=0.1, guide_verdict="met",
            guide_text="met from epsilon 13.3", guide_epsilon=13.28,
            study_range=study_range,
        )  # fmt: skip

    spread = (13.28, 1.13, 1.40)
    assert kept(1.30, spread).conclusion(13.3).endswith("kept, as the guide promised")
    assert "as one table varies" in kept(1.14, spread).conclusion(13.3)
    assert "NOT kept, though promised" in kept(1.47, spread).conclusion(13.3)
    assert "NOT kept, though promised" in kept(1.14, None).conclusion(13.3)
    below = kept(1.30, spread).conclusion(5.0)
    assert "not promised at this epsilon (the guide: from 13.3)" in below


@pytest.mark.slow
def test_the_private_report_says_what_suppression_would_keep_and_lose(
    tmp_path, in_checkout, private_area
):
    """A study with a suppression arm: the release's utility report states what the
    table suppressed under the same rule keeps, what differencing pins with the study's
    published margins, and what the release's sets give the same attacker (issue #53)."""
    spec = study(tmp_path, suppression={"enabled": True, "published": [["county"], ["state"]]})
    code, _, stderr = synthesize(spec, tmp_path / "out")
    assert code == 0, stderr
    (utility,) = private_area.glob("*/utility.md")
    text = utility.read_text()
    assert "## Against suppression (Suppression (counts 1-9 not shown), study `causes`)" in text
    hidden = int(((table()["deaths"] >= 1) & (table()["deaths"] <= 9)).sum())
    assert f"this table would hide {hidden} of its 72 counts" in text
    assert "With the margins the study publishes beside it (county; state)" in text
    assert re.search(r"this release's sets give \d+% of the true counts 1-9 exactly", text)
    assert not any("suppression" in p.name for p in (tmp_path / "out").iterdir())  # private


def release_arrays(out: Path):
    """A release folder's sets (sets x strata), its published calibration and the true
    table, all in the order of its hyperparameters."""
    from dpcounts.release.estimate import _calibration

    manifest = json.loads((out / "manifest.json").read_text())
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    long = pd.read_parquet(out / "synthetic.parquet")
    sets = long.pivot_table(index=KEYS, columns="set", values="count")
    sets = sets.reindex(pd.MultiIndex.from_frame(hyper[KEYS].astype(str))).to_numpy().T
    truth = hyper[KEYS].astype(str).merge(table(), on=KEYS, how="left")
    return np.round(sets).astype(np.int64), _calibration(manifest, hyper), truth


def percent(line: str, after: str) -> float:
    return float(re.search(re.escape(after) + r" (\d+)%", line).group(1)) / 100


@pytest.mark.slow
@pytest.mark.parametrize("sets", [3, 1])
def test_the_private_report_states_coverage_and_the_posterior_attacker(
    tmp_path, in_checkout, private_area, sets
):
    """A study with coverage and a suppression arm: utility.md states, per interval
    method, the share of this release's area intervals holding the confidential rate and
    their median width against the exact interval (issue #54), and the posterior
    attacker's shares on this release's sets (issue #53), each as the study's own
    functions score the same sets; with one set, the combining rules are said to need
    two."""
    from dpcounts.release.study_source import load_study
    from dpcounts.studies.stage.coverage import METHOD_WORDS, release_scores, study_areas
    from dpcounts.studies.stage.measures import posterior_shares

    coverage = {"enabled": True, "level": 0.9, "sets": 2, "releases": 2,
                "methods": ["combining", "posterior"]}  # fmt: skip
    spec = study(tmp_path, coverage=coverage,
                 suppression={"enabled": True, "published": [["county"], ["state"]]})  # fmt: skip
    code, _, stderr = run(
        "synthesize", "--study", spec, "--mechanism", "pg", "--epsilon", "5", "--sets",
        str(sets), "--strata", "cross-product", "--dataset", "causes", "--out",
        str(tmp_path / "out"), "--quiet", "--release-without-guide",
    )  # fmt: skip
    assert code == 0, stderr
    (utility,) = private_area.glob("*/utility.md")
    text = utility.read_text()
    synthetic, cal, truth = release_arrays(tmp_path / "out")
    assert synthetic.shape == (sets, 72)

    definition = load_study(spec).definition
    areas = study_areas(definition, truth, 0.9)
    assert "## Coverage of the areas' intervals (study `causes`)" in text
    assert "one release, one draw" in text
    lines = {line.split("**")[1]: line for line in text.splitlines()
             if line.startswith(("- **combining-rule**", "- **posterior**"))}  # fmt: skip
    assert set(lines) == {"combining-rule", "posterior"}
    if sets == 1:
        assert "the combining rules need 2 sets" in lines["combining-rule"]
    for method in ["posterior"] if sets == 1 else ["combining", "posterior"]:
        shares, ratios = release_scores(synthetic, areas, cal, method, 0.9, sets)
        line = lines[METHOD_WORDS[method]]
        assert percent(line, "**:") == pytest.approx(shares[0], abs=0.006)
        width = float(re.search(r"median width (\S+)x", line).group(1))
        assert width == pytest.approx(np.median(ratios), rel=6e-3)  # 3 digits printed

    y = truth["deaths"].to_numpy()
    expected = truth["person_years"].to_numpy(float) * cal.prior_rate
    attacker = posterior_shares(synthetic, y, cal, 1, 9, sets, expected)
    (line,) = [line for line in text.splitlines() if "published hyperparameters" in line]
    assert percent(line, "sets give") == pytest.approx(
        attacker["attack:posterior_exact"][0], abs=0.006
    )
    assert percent(line, "exactly and") == pytest.approx(
        attacker["attack:posterior_within_one"][0], abs=0.006
    )


def test_the_private_report_leaves_the_posterior_out_of_a_large_table(
    tmp_path, in_checkout, private_area, monkeypatch
):
    """Above ``POSTERIOR_REPORT_STRATA`` strata (lowered here to 50; this table has 72) the
    report's posterior line says it was not computed, and why, instead of paying minutes
    to hours; the combining rules' line is still computed."""
    from dpcounts.release.report import promise

    monkeypatch.setattr(promise, "POSTERIOR_REPORT_STRATA", 50)
    coverage = {"enabled": True, "level": 0.9, "sets": 2, "releases": 2,
                "methods": ["combining", "posterior"]}  # fmt: skip
    spec = study(tmp_path, coverage=coverage)
    code, _, stderr = run(
        "synthesize", "--study", spec, "--mechanism", "pg", "--epsilon", "5", "--sets", "2",
        "--strata", "cross-product", "--dataset", "causes", "--out", str(tmp_path / "out"),
        "--quiet", "--release-without-guide",
    )  # fmt: skip
    assert code == 0, stderr
    (utility,) = private_area.glob("*/utility.md")
    lines = {line.split("**")[1]: line for line in utility.read_text().splitlines()
             if line.startswith(("- **combining-rule**", "- **posterior**"))}  # fmt: skip
    assert "not computed for the 72 strata" in lines["posterior"]
    assert "more than 50" in lines["posterior"]
    assert "hold the confidential rate" in lines["combining-rule"]
