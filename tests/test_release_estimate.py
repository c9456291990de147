"""What an analyst can infer from a release folder alone (issue #54, item 1, the combining
rules): the rules against a hand computation, `estimate` on real releases (every group,
the sets' own rates, a refused folder), the command line, and that it opens no data file
outside the folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run
from scipy import stats
from test_release_verify import read, release, rewrite

import dpcounts
from dpcounts.inference.combining import combine
from dpcounts.release.estimate import COLUMNS, estimate


def test_the_combining_rules_by_hand():
    """Three sets giving 10, 12 and 14 with variance 1 each: q = 12, b = 4, u = 1, T = (1 +
    1/3) 4 - 1 = 13/3, nu = 2 (1 - 3 / (4 x 4))^2 = 1.3203125 (Raghunathan, Reiter and
    Rubin 2003)."""
    out = combine([[10.0], [12.0], [14.0]], [[1.0], [1.0], [1.0]], level=0.9)
    assert out["estimate"][0] == 12 and out["variance"][0] == pytest.approx(13 / 3)
    assert out["df"][0] == pytest.approx(1.3203125)
    half = stats.t.ppf(0.95, 1.3203125) * np.sqrt(13 / 3)
    assert (out["lower"][0], out["upper"][0]) == pytest.approx((12 - half, 12 + half))
    assert not out["adjusted"][0]


def test_a_negative_variance_gets_the_documented_adjustment():
    """Sets that agree (b = 0): T = -u < 0, so T* = u (Reiter 2002) with a normal quantile."""
    out = combine([[5.0, 1.0], [5.0, 2.0]], [[2.0, 0.1], [2.0, 0.1]], level=0.95)
    assert out["adjusted"].tolist() == [True, False]
    assert out["variance"][0] == 2.0 and np.isinf(out["df"][0])
    half = stats.norm.ppf(0.975) * np.sqrt(2.0)
    assert (out["lower"][0], out["upper"][0]) == pytest.approx((5 - half, 5 + half))
    with pytest.raises(ValueError, match="at least 2 synthetic sets"):
        combine([[1.0]], [[1.0]])


@pytest.mark.slow
def test_estimate_pools_each_groups_strata_over_the_sets(tmp_path):
    out = release(tmp_path, sets=5)
    table = estimate(out, ["region"], level=0.9, method="combining")
    assert list(table.columns) == ["region", *COLUMNS]
    synthetic, hyper = read(out, "synthetic"), read(out, "hyperparameters")
    regions = sorted(hyper["region"].astype(str).unique())
    assert table["region"].astype(str).tolist() == regions
    people = hyper.groupby("region")["population"].sum()
    merged = synthetic.merge(hyper[["code", "region"]], on=["code", "region"])
    rates = merged.groupby(["set", "region"])["count"].sum().unstack() / people * 1e5
    assert table["estimate"].to_numpy() == pytest.approx(rates.mean().to_numpy())
    assert (table["lower"] <= table["estimate"]).all()
    assert (table["estimate"] <= table["upper"]).all()
    assert set(table["sets"]) == {5} and set(table["method"]) == {"combining"}


@pytest.mark.slow
def test_estimate_refuses_what_verify_rejects_and_what_it_cannot_estimate(tmp_path):
    out = release(tmp_path, sets=3)
    with pytest.raises(ValueError, match=r"--by \['county'\]: expected one or more of"):
        estimate(out, ["county"])
    one = release(tmp_path, "one", sets=1)
    with pytest.raises(ValueError, match="a release of 1 set"):
        estimate(one, ["region"], method="combining")
    synthetic = read(out, "synthetic")
    synthetic.loc[0, "count"] += 1  # one count moved: the set no longer sums to the total
    rewrite(out, "synthetic", synthetic)
    with pytest.raises(ValueError, match="dpcounts verify rejects this folder"):
        estimate(out, ["region"])


@pytest.mark.process
def test_the_command_reads_the_folder_alone(tmp_path):
    """`dpcounts estimate` writes the table; run under an audit hook, the only data files
    it opens (tables, JSON) are the folder's."""
    out = release(tmp_path, sets=4)
    code, stdout, stderr = run("estimate", str(out), "--by", "region")
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0] == ",".join(["region", *COLUMNS]) and len(lines) > 2
    script = (
        "import json, sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda e, a: opened.append(str(a[0])) if e == 'open' else None)\n"
        "from dpcounts.release.estimate import estimate\n"
        f"estimate({str(out)!r}, ['region'])\n"
        "print(json.dumps(opened))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)  # fmt: skip
    opened = json.loads(done.stdout.splitlines()[-1])
    # the libraries' own files (jsonschema's metaschemas, dpcounts' package data) aside
    own = (sys.prefix, str(Path(dpcounts.__file__).parent))
    data = [p for p in opened if p.endswith((".parquet", ".csv", ".json", ".jsonl"))
            and not p.startswith(own)]  # fmt: skip
    assert data and all(p.startswith(str(out)) for p in data), data
    frame = pd.read_csv(pd.io.common.StringIO(stdout))
    assert frame["estimate"].notna().all()
