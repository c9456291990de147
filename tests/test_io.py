from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from dpcounts.io import atomic_path, save_figure, write_json, write_parquet, write_yaml


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "out" / "x.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_failed_rewrite_keeps_the_old_file(tmp_path):
    target = tmp_path / "x.json"
    write_json({"a": 1}, target)
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("{broken")
            raise RuntimeError
    assert json.loads(target.read_text()) == {"a": 1}


def test_parquet_round_trip(tmp_path):
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    write_parquet(frame, tmp_path / "f.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "f.parquet"), frame)


def test_figures_are_byte_reproducible(tmp_path):
    def draw(stem):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        save_figure(fig, tmp_path / f"{stem}.png", tmp_path / f"{stem}.pdf")
        plt.close(fig)

    draw("a")
    draw("b")
    for ext in ("png", "pdf"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["constrained", "tight_layout", None])
def test_figures_laid_out_once_are_the_pixels_savefig_gives(tmp_path, layout):
    """save_figure lays a figure out and measures its crop once for all its formats: the
    PNG is byte for byte what matplotlib's own ``bbox_inches="tight"`` save gives (which
    lays out and draws the figure again for every format)."""

    def draw():
        fig, axes = plt.subplots(
            2, 3, figsize=(9, 5), layout=layout if layout != "tight_layout" else None
        )
        for k, ax in enumerate(axes.flat):
            ax.plot([0.01, 1, 100], [k + 1, 10 * (k + 1), 5], label=f"line {k}")
            ax.set(xscale="log", yscale="log", xlabel="a long x label", title=f"panel {k}")
        where = "outside lower center" if layout == "constrained" else "lower center"
        fig.legend(*axes[0, 0].get_legend_handles_labels(), loc=where)
        fig.suptitle("a title wider than most of the panels' titles, over two lines\nline two")
        if layout == "tight_layout":
            fig.tight_layout()
        return fig

    fig = draw()
    fig.savefig(tmp_path / "own.png", format="png", metadata={"Software": None}, dpi=150,
                bbox_inches="tight")  # fmt: skip
    plt.close(fig)
    fig = draw()
    save_figure(fig, tmp_path / "once.png", tmp_path / "once.pdf")
    plt.close(fig)
    assert (tmp_path / "once.png").read_bytes() == (tmp_path / "own.png").read_bytes()
    assert (tmp_path / "once.pdf").read_bytes().startswith(b"%PDF")


def test_artifacts_get_the_usual_permissions(tmp_path):
    import os

    write_json({"a": 1}, tmp_path / "p.json")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_sha256_file_matches_hashlib(tmp_path):
    import hashlib

    from dpcounts.io import sha256_file

    data = bytes(range(256)) * 5000  # more than one 1 MiB block
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_yaml_is_the_same_bytes_whatever_the_key_order(tmp_path):
    """The run's configuration file: keys sorted, the header commented, read back equal."""
    import yaml

    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write_yaml({"seed": 1, "study1": {"b": [1, 2], "a": None}}, first, header="line one\nline two")
    write_yaml({"study1": {"a": None, "b": [1, 2]}, "seed": 1}, second, header="line one\nline two")
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text()
    assert text.startswith("# line one\n# line two\n")
    assert yaml.safe_load(text) == {"seed": 1, "study1": {"a": None, "b": [1, 2]}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]
