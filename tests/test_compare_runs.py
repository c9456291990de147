"""tools/compare_runs.py on small synthetic run folders, in process: identical runs pass,
every kind of change fails naming its file."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib import image as mpimg

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("compare_runs", REPO / "tools" / "compare_runs.py")
compare_runs = sys.modules.setdefault("compare_runs", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(compare_runs)  # registered first: its dataclass looks itself up

TABLE = "results/study/summary.parquet"
FIGURE = "figures/study/rates.png"


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "arm": ["md", "pg", "pg"],
            "epsilon": [0.1, 1.0, np.nan],
            "median": [1.5, np.nan, 3.25],
            "count": [1, 2, 3],
        }
    )


def image() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, size=(20, 30, 3), dtype=np.uint8)


def write_run(root: Path) -> Path:
    for folder in ("results/study", "figures/study"):
        (root / folder).mkdir(parents=True)
    table().to_parquet(root / TABLE, index=False)
    checks = {"checks": [{"name": "ratio", "value": 0.8, "passed": True}], "nan": float("nan")}
    (root / "results/study/checks.json").write_text(json.dumps(checks, indent=2))
    (root / "results/run_config.yaml").write_text(yaml.safe_dump({"seed": 7, "eps": [1, 2]}))
    (root / "results/study/guide.csv").write_text("arm,epsilon\nmd,\npg,1.0\n")
    mpimg.imsave(root / FIGURE, image())
    (root / "results/README.md").write_text("What results/ holds.\n")
    return root


@pytest.fixture
def runs(tmp_path):
    before = write_run(tmp_path / "before")
    after = tmp_path / "after"
    shutil.copytree(before, after)
    return before, after


def run(before, after, *args, capsys):
    code = compare_runs.main([str(before), str(after), *args])
    return code, capsys.readouterr().out


def test_identical_runs_pass(runs, capsys):
    code, out = run(*runs, capsys=capsys)
    assert code == 0, out
    assert "IDENTICAL: 5 files" in out
    assert "excluded results/README.md" in out


def test_same_content_in_other_bytes_passes(runs, capsys):
    """Tables by content (another compression, NaN == NaN), JSON and YAML parsed."""
    before, after = runs
    table().to_parquet(after / TABLE, index=False, compression="gzip")
    text = json.dumps(json.loads((before / "results/study/checks.json").read_text()))
    (after / "results/study/checks.json").write_text(text)  # no indentation
    (after / "results/run_config.yaml").write_text("eps: [1, 2]\nseed: 7\n")
    (after / "results/README.md").write_text("Documentation, edited.\n")  # excluded
    assert (before / TABLE).read_bytes() != (after / TABLE).read_bytes()
    code, out = run(before, after, capsys=capsys)
    assert code == 0, out


def changed_number(after):
    frame = table()
    frame.loc[0, "median"] = np.nextafter(1.5, 2.0)
    frame.to_parquet(after / TABLE, index=False)


def nan_to_number(after):
    frame = table()
    frame.loc[2, "epsilon"] = 0.0
    frame.to_parquet(after / TABLE, index=False)


def changed_dtype(after):
    table().astype({"count": "float64"}).to_parquet(after / TABLE, index=False)


def renamed_column(after):
    table().rename(columns={"median": "centre"}).to_parquet(after / TABLE, index=False)


def reordered_rows(after):
    table().iloc[::-1].reset_index(drop=True).to_parquet(after / TABLE, index=False)


def dropped_file(after):
    (after / TABLE).unlink()


def extra_file(after):
    (after / "figures/study/new.png").write_bytes((after / FIGURE).read_bytes())


def changed_json(after):
    path = after / "results/study/checks.json"
    checks = json.loads(path.read_text())
    checks["checks"][0]["passed"] = False
    path.write_text(json.dumps(checks))


def changed_yaml(after):
    (after / "results/run_config.yaml").write_text("seed: 8\neps: [1, 2]\n")


def changed_csv(after):
    (after / "results/study/guide.csv").write_text("arm,epsilon\nmd,10.0\npg,1.0\n")


def changed_pixel(after):
    pixels = image()
    pixels[5, 7] = 255 - pixels[5, 7]
    mpimg.imsave(after / FIGURE, pixels)


def resized_figure(after):
    mpimg.imsave(after / FIGURE, image()[:, :-1])


def png_metadata(after):
    mpimg.imsave(after / FIGURE, image(), metadata={"Software": "another version"})


def changed_pdf(after):
    (after / "figures/study/rates.pdf").write_bytes(b"%PDF-1.4 two")


ALTERATIONS = [
    (changed_number, TABLE, "column 'median': 1 of 3 values differ, first at row 0"),
    (nan_to_number, TABLE, "column 'epsilon': 1 of 3 values differ, first at row 2: nan -> 0.0"),
    (changed_dtype, TABLE, "column 'count': dtype int64 -> float64"),
    (renamed_column, TABLE, "columns only in before ['median'], only in after ['centre']"),
    (reordered_rows, TABLE, "values differ"),
    (dropped_file, TABLE, "MISSING"),
    (extra_file, "figures/study/new.png", "EXTRA"),
    (changed_json, "results/study/checks.json", "checks[0].passed: True != False"),
    (changed_yaml, "results/run_config.yaml", "seed: 7 != 8"),
    (changed_csv, "results/study/guide.csv", "column 'epsilon'"),
    (changed_pixel, FIGURE, "pixels differ: 1 of 600"),
    (resized_figure, FIGURE, "image size (20, 30, 4) -> (20, 29, 4)"),
    (png_metadata, FIGURE, "pixels equal (metadata only)"),
    (changed_pdf, "figures/study/rates.pdf", "bytes differ"),
]


@pytest.mark.parametrize(
    ("alter", "path", "message"), ALTERATIONS, ids=[a[0].__name__ for a in ALTERATIONS]
)
def test_a_change_fails_naming_its_file(runs, capsys, alter, path, message):
    before, after = runs
    if alter is changed_pdf:
        (before / path).write_bytes(b"%PDF-1.4 one")
        (after / path).write_bytes(b"%PDF-1.4 one")
        assert run(before, after, capsys=capsys)[0] == 0
    alter(after)
    code, out = run(before, after, capsys=capsys)
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.split()[1:2] == [f"{path}:"]]
    assert len(lines) == 1, out
    assert message in lines[0], lines[0]
    assert "DIFFERENT: 1 of" in out


def test_rename_on_purpose_passes_and_only_where_it_applies(runs, capsys):
    before, after = runs
    renamed_column(after)
    assert run(before, after, "--rename", "median=centre", capsys=capsys)[0] == 0
    # the renamed column must still hold the same values
    frame = table().rename(columns={"median": "centre"})
    frame.loc[1, "centre"] = 2.0
    frame.to_parquet(after / TABLE, index=False)
    code, out = run(before, after, "--rename", "median=centre", capsys=capsys)
    assert code == 1 and "column 'centre': 1 of 3 values differ" in out, out
    # a table that keeps the old name is compared as it is
    table().to_parquet(after / TABLE, index=False)
    assert run(before, after, "--rename", "median=centre", capsys=capsys)[0] == 0


def test_a_dotted_rename_moves_a_key_of_the_documents_only(runs, capsys):
    before, after = runs
    config = {"seed": 7, "study": {"arms": [1, 2]}}
    (before / "results/run_config.yaml").write_text(
        yaml.safe_dump({"seed": 7, "study": {"mechanisms": [1, 2]}})
    )
    (after / "results/run_config.yaml").write_text(yaml.safe_dump(config))
    code, out = run(before, after, capsys=capsys)
    assert code == 1 and "run_config.yaml" in out
    moved = ("--rename", "study.mechanisms=study.arms")
    assert run(before, after, *moved, capsys=capsys)[0] == 0
    # the key moved, its value must not change
    config["study"]["arms"] = [1, 3]
    (after / "results/run_config.yaml").write_text(yaml.safe_dump(config))
    assert run(before, after, *moved, capsys=capsys)[0] == 1
    # and a dotted rename leaves table columns alone
    config["study"]["arms"] = [1, 2]
    (after / "results/run_config.yaml").write_text(yaml.safe_dump(config))
    renamed_column(after)
    code, out = run(before, after, *moved, "--rename", "x.median=x.centre", capsys=capsys)
    assert code == 1 and "summary.parquet" in out and "run_config.yaml" not in out, out


def test_keys_added_on_purpose_pass_and_only_those(runs, capsys):
    before, after = runs
    (before / "results/run_config.yaml").write_text(
        yaml.safe_dump({"seed": 7, "studies": {"a": {"arms": [{"name": "x"}, {"name": "y"}]}}})
    )
    config = {
        "seed": 7,
        "new": {"k": 1},
        "studies": {"a": {"title": "A", "arms": [{"name": "x", "title": "X"}, {"name": "y"}]}},
    }
    (after / "results/run_config.yaml").write_text(yaml.safe_dump(config))
    added = ("--added", "new", "--added", "studies.*.title", "--added", "studies.*.arms.*.title")
    assert run(before, after, *added[:4], capsys=capsys)[0] == 1  # the arm's title is not named
    assert run(before, after, *added, capsys=capsys)[0] == 0
    # a key BEFORE has is compared, named or not
    (before / "results/run_config.yaml").write_text(
        yaml.safe_dump({"seed": 7, "new": {"k": 2}, "studies": config["studies"]})
    )
    code, out = run(before, after, *added, capsys=capsys)
    assert code == 1 and "new.k: 2 != 1" in out, out


def test_not_a_run_folder_is_refused(runs, tmp_path, capsys):
    code = compare_runs.main([str(runs[0]), str(tmp_path / "nowhere")])
    assert code == 2
    assert "not a run folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare_runs.main([str(runs[0]), str(runs[1]), "--rename", "median"])
