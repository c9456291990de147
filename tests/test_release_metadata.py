"""Nothing of the input's metadata reaches a public file (issue #26, finding 0).

A Parquet input carries metadata of its own: pandas ``attrs`` (stored as ``PANDAS_ATTRS``),
the file's key-value metadata, a column's field metadata, a categorical key's list of
categories (unused ones included); a CDC WONDER export carries its footer (dataset, query
parameters, query date). Before the fix pandas copied ``attrs`` verbatim into the pandas
metadata of ``synthetic.parquet`` (and of ``prior.parquet`` with a sanitised prior), and
``dpcounts verify`` passed. Each slot here holds its own marker; the release's bytes, its
Parquet metadata and what pandas reads back are searched for every one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpcounts.io import sha256_file
from dpcounts.release import ReleaseRequest, build_release
from dpcounts.verify import failed, verify_release

MARKERS = {
    "attrs": "LEAK-ATTRS-7f3a",
    "schema": "LEAK-SCHEMA-91cc",
    "field": "LEAK-FIELD-04be",
    "category": "LEAK-CATEGORY-5d20",
    "wonder": "LEAK-WONDER-e611",
}
WONDER = Path(__file__).parent / "fixtures" / "wonder" / "good.txt"
#: Where the table's prior-rate column comes from (every prior the steward brings is declared).
PRIOR_SOURCE = "national rates by county, published 1999 (test)"


def marked_parquet(path: Path) -> Path:
    """A table of six strata whose every metadata slot holds a marker."""
    frame = pd.DataFrame(
        {
            "county": ["a", "a", "b", "b", "c", "c"],
            "sex": pd.Categorical(["f", "m"] * 3, categories=["f", "m", MARKERS["category"]]),
            "count": [4, 0, 9, 7, 3, 5],
            "population": [1000, 800, 1500, 900, 700, 1200],
            "prior_rate": [0.004, 0.004, 0.006, 0.006, 0.005, 0.005],
        }
    )
    frame.attrs = {"note": MARKERS["attrs"], "source": {"path": f"/secret/{MARKERS['attrs']}"}}
    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = [
        field.with_metadata({"comment": MARKERS["field"]}) if field.name == "count" else field
        for field in table.schema
    ]
    metadata = dict(table.schema.metadata) | {b"steward_note": MARKERS["schema"].encode()}
    table = table.cast(pa.schema(fields, metadata=metadata))
    pq.write_table(table, path)
    assert pd.read_parquet(path).attrs["note"] == MARKERS["attrs"]  # the slot is really filled
    return path


def leaks(folder: Path) -> list[str]:
    """Every (file, slot, marker) where a marker shows in the public folder."""
    found = []
    for path in sorted(folder.iterdir()):
        raw = path.read_bytes()
        texts = {"bytes": raw.decode("latin-1")}
        if path.suffix == ".parquet":
            schema = pq.read_schema(path)
            texts["schema metadata"] = repr(schema.metadata)
            texts["field metadata"] = repr([field.metadata for field in schema])
            frame = pd.read_parquet(path)
            texts["pandas attrs"] = json.dumps(frame.attrs, default=str)
            texts["categories"] = repr(
                [list(frame[c].cat.categories) for c in frame if frame[c].dtype == "category"]
            )
        for slot, text in texts.items():
            found += [f"{path.name} {slot}: {m}" for m in MARKERS.values() if m in text]
    return found


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(dict(mechanism="md"), marks=pytest.mark.slow),
        dict(mechanism="pg", prior_source=PRIOR_SOURCE),
        pytest.param(  # writes prior.parquet
            dict(mechanism="pg", sanitised_prior_by=("county",), sets=2), marks=pytest.mark.slow
        ),
        pytest.param(
            dict(mechanism="truncated", output_format="csv", prior_source=PRIOR_SOURCE),
            marks=pytest.mark.slow,
        ),
    ],
    ids=["md", "pg", "pg-sanitised-prior", "truncated-csv"],
)
def test_no_metadata_of_a_parquet_input_reaches_the_release(tmp_path, changes):
    source = marked_parquet(tmp_path / "marked.parquet")
    if changes.get("sanitised_prior_by") is not None:
        frame = pd.read_parquet(source).drop(columns="prior_rate")
        frame.attrs["note"] = MARKERS["attrs"]  # pandas keeps attrs through drop: restore it
        pa_table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(pa_table, source)
    fields = dict(input=source, out=tmp_path / "out", epsilon=1.0, keys=("county", "sex"),
                  dataset="test-data",
                  strata="cross-product", test_seed=1, progress=False)  # fmt: skip
    build_release(ReleaseRequest(**(fields | changes)))
    assert leaks(tmp_path / "out") == []
    assert not failed(verify_release(tmp_path / "out"))


@pytest.mark.slow
def test_no_part_of_a_wonder_footer_reaches_the_release(tmp_path):
    text = WONDER.read_text()
    text = text.replace("made-up test fixture", f"made-up test fixture {MARKERS['wonder']}")
    text = text.replace(
        '"Show Totals: True"',
        f'"Show Totals: True"\n"Show Zero Values: True"\n"Note: {MARKERS["wonder"]}"',
    )
    text = text.replace("Jan 1, 2000", f"Jan 1, 2000 {MARKERS['wonder']}")
    export = tmp_path / "export.txt"
    export.write_text(text)
    build_release(
        ReleaseRequest(
            input=export,
            out=tmp_path / "out",
            epsilon=1.0,
            mechanism="md",
            keys=("county_code", "age_group_code"),
            wonder=True,
            test_seed=1,
            progress=False,
            strata="cross-product",
            dataset="test-data",
        )  # fmt: skip
    )
    assert leaks(tmp_path / "out") == []


@pytest.mark.slow
def test_verify_fails_a_release_whose_parquet_embeds_metadata(tmp_path):
    """A release made by a writer that kept the input's attrs (as before the fix) fails."""
    source = marked_parquet(tmp_path / "marked.parquet")
    out = tmp_path / "out"
    build_release(
        ReleaseRequest(
            input=source,
            out=out,
            epsilon=1.0,
            mechanism="md",
            keys=("county", "sex"),
            strata="cross-product",
            dataset="test-data",
            test_seed=1,
            progress=False,
        )  # fmt: skip
    )
    path = out / "synthetic.parquet"
    frame = pd.read_parquet(path)
    frame.attrs = {"note": MARKERS["attrs"]}
    frame.to_parquet(path, index=False)  # pandas' own writer keeps attrs
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["synthetic"]["sha256"] = sha256_file(path)  # a consistent tampering
    (out / "manifest.json").write_text(json.dumps(manifest))
    checks = verify_release(out)
    bad = [c for c in checks if c.status == "FAIL"]
    assert [(c.topic, c.name) for c in bad] == [("metadata", "embedded")]
    assert "pandas attributes (attrs)" in bad[0].values["embedded"]["synthetic.parquet"]
