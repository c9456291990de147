"""What a release says (issue #26, finding 6): the audit's window, the summary's prior, no
confidential value in an error, the usage line, --out in the steward's folder, a prior
column beside --sanitised-prior-by."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli as run
from test_release import KEYS, STRATA, request_for

from dpcounts.privacy.release_audit import audit_release, window_for
from dpcounts.release import ReleaseError, build_release, load_strata
from dpcounts.release.design import Design
from dpcounts.release.request import Budget


def test_the_audit_at_the_default_prior_share_says_it_is_exact_within_a_window():
    design = Design("pg", "certified", Budget(1.0, 1e-12, 0.1, 1))  # the default 10% share
    audit = audit_release(design, np.array([120.0, 300.0]), 2, groups=[0, 1], window=3)
    assert 0.9 < audit.window_mass_outside <= 1.0  # a probability, not a sum of bounds
    assert audit.describe().startswith("exact within a window: noisy totals within 3")
    assert f"{audit.window_mass_outside:.3g}" in audit.describe()
    public = audit_release(
        Design("pg", "certified", Budget(1.0, 1e-12, 0.0, 1)),
        np.array([120.0, 300.0]),
        2,
        prior_rate=np.array([0.004, 0.006]),
    )
    assert public.describe().startswith("exact: every output")
    assert window_for(0.1, 2, 1e-6) == 290  # what "negligible" would cost at the default


@pytest.mark.slow
def test_the_summary_names_a_sanitised_prior(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "n.csv", index=False)
    for mechanism, by in (("pg", ("region",)), ("truncated", ())):
        private = tmp_path / f"private-{mechanism}"
        build_release(
            request_for(
                tmp_path / "n.csv",
                tmp_path / mechanism,
                mechanism=mechanism,
                sanitised_prior_by=by,
                private_dir=private,
            )  # fmt: skip
        )
        text = (private / "summary.md").read_text()
        assert "not used by md" not in text
        assert ("sanitised: the totals by ['region']" if by else "the overall rate") in text


@pytest.mark.parametrize(("value", "rounding"), [("3,08", "refuse"), ("3.08", "refuse")])
def test_an_error_names_the_stratum_not_the_confidential_count(tmp_path, value, rounding):
    table = STRATA.astype({"count": object})
    table.loc[2, "count"] = value
    table.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ReleaseError) as err:
        load_strata(request_for(tmp_path / "s.csv", tmp_path / "out", rounding=rounding))
    # the file's path (pytest's numbered folders, e.g. pytest-208) may hold any digits
    message = str(err.value).replace(str(tmp_path), "<tmp>")
    assert "code=" in message and "3" in message.split("code=")[1][:4] and "count" in message
    assert "3,08" not in message and "3.08" not in message and "08" not in message


def test_the_usage_line_shows_strata_required_and_not_the_removed_option():
    for command in ("synthesize", "calibrate"):
        code, _, stderr = run(command)
        usage = stderr.split("error:")[0]
        assert code == 2 and " --strata FILE|input|cross-product" in usage
        assert "[--strata" not in usage and "--prior-rate-by" not in usage


def test_out_inside_the_stewards_folder_is_refused(tmp_path, private_ledger):
    STRATA.to_csv(tmp_path / "s.csv", index=False)
    home = Path(os.environ["XDG_DATA_HOME"]) / "dpcounts"
    code, stdout, stderr = run(
        "synthesize", "--input", str(tmp_path / "s.csv"), "--keys", *KEYS, "--strata",
        "input", "--dataset", "deaths", "--epsilon", "1", "--mechanism", "pg",
        "--out", str(home / "release"), "--private-dir", str(tmp_path / "private"),
    )  # fmt: skip
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "steward's folder" in stderr and "ledger" in stderr
    assert not (home / "release").exists() and not private_ledger.exists()


def test_a_prior_column_beside_a_sanitised_prior_says_what_to_do(tmp_path):
    STRATA.to_csv(tmp_path / "s.csv", index=False)  # it has a prior_rate column
    request = request_for(tmp_path / "s.csv", tmp_path / "out", sanitised_prior_by=("region",))
    with pytest.raises(ReleaseError) as err:
        load_strata(request)
    message = str(err.value)
    assert "'prior_rate' holds prior rates" in message and "drop the column" in message
    assert "instead of --sanitised-prior-by" in message and "not named" not in message


def test_counts_under_another_name_point_to_the_option_that_names_them(tmp_path):
    STRATA.rename(columns={"count": "deaths"}).to_csv(tmp_path / "d.csv", index=False)
    request = request_for(tmp_path / "d.csv", tmp_path / "out")
    with pytest.raises(ReleaseError) as err:
        load_strata(request)
    message = str(err.value)
    assert "missing column(s) ['count']" in message
    assert "name the counts' column with --count-column (one of ['deaths'])" in message
    assert "--population-column" not in message
