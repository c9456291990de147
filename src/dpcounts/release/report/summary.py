"""The data steward's private summary: synthetic vs original totals, and a county map.

Written into the steward's private folder (apart from the release, never inside it): it
shows the original, confidential totals. What the sets kept of the table, measure by
measure and against synthesis with no privacy, is the utility report beside it
(:mod:`dpcounts.release.report.utility`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.validation import key_positions
from dpcounts.release.request import ReleaseError

#: Key columns tried, in order, as the county FIPS column when none is named.
FIPS_CANDIDATES = ("fips", "county_fips", "county_code")
#: The county frame the project ships, relative to the folder dpcounts runs in (the
#: project's root, as in the README); ``--county-frame`` names any other.
DEFAULT_COUNTY_FRAME = Path("data") / "counties_1980.parquet"

#: Groups listed in summary.md's table before it says "and N more" (the plot shows all).
TABLE_ROWS = 30


def fips_column(request, keys: pd.DataFrame) -> str | None:
    """The key column holding 5-digit county FIPS codes, if any."""
    if request.fips_column is not None:
        if request.fips_column not in keys.columns:
            raise ReleaseError(
                f"{request.input}: --fips-column {request.fips_column!r} is not a key column; "
                f"keys are {list(keys.columns)}"
            )
        return request.fips_column
    for name in FIPS_CANDIDATES:
        if name in keys.columns:
            codes = keys[name].astype(str)
            if codes.str.fullmatch(r"\d{5}").all():
                return name
    return None


def group_totals(keys: pd.DataFrame, column: str, original, synthetic) -> pd.DataFrame:
    """Per value of ``column``: the original total and the synthetic totals' mean, min, max."""
    from dpcounts.encoding import factorize

    labels = keys[column]  # as text; a text column is its own (its encoding is shared)
    if not isinstance(labels.dtype, pd.StringDtype) or labels.hasnans:
        labels = labels.astype(str)
    codes, texts = factorize(labels)
    texts = pd.Series(texts, dtype=labels.dtype)
    order = key_positions(pd.DataFrame({column: texts}), [column])  # the texts in key order
    uniques = texts.to_numpy()[order]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = rank[codes]
    original_totals = np.bincount(codes, weights=original, minlength=len(uniques))
    per_set = np.stack(
        [np.bincount(codes, weights=row, minlength=len(uniques)) for row in synthetic]
    )
    return pd.DataFrame(
        {
            column: uniques,
            "original": original_totals.astype(np.int64),
            "synthetic_mean": per_set.mean(axis=0),
            "synthetic_min": per_set.min(axis=0).astype(np.int64),
            "synthetic_max": per_set.max(axis=0).astype(np.int64),
        }
    )


def _map_figure(counties, by_fips: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpcounts.plots.maps import county_choropleth, extend_of, rate_scale
    from dpcounts.plots.style import RC

    frame = counties.merge(by_fips, on="fips", how="inner")
    # every map's colour rule, one scale for both maps (from the original totals: the
    # synthetic map's departures saturate, with arrows)
    scale = rate_scale(frame["original"])
    scale = type(scale)(scale.norm, extend_of(scale.norm, frame["original"],
                                              frame["synthetic_mean"]))  # fmt: skip
    with matplotlib.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
        for ax, column, title in (
            (axes[0], "original", "original total"),
            (axes[1], "synthetic_mean", "synthetic total (mean over sets)"),
        ):
            county_choropleth(frame, column, ax, title=title, scale=scale, legend_label="events",
                              values_name="the original totals")  # fmt: skip
    return fig


def rounding_note(mode: str, report) -> str:
    """What ``--rounding`` did to the counts (``report``, a
    :class:`dpcounts.data.rounding.RoundingReport`), for the steward (it depends on them)."""
    if mode == "refuse":
        return "rounding `refuse`: every count was whole"
    if report is None or report.strata_changed == 0:
        return "rounding `nearest`: no count was fractional, none was changed"
    return (f"rounding `nearest`: {report.strata_changed} fractional count(s) rounded half to "
            "even before the mechanism (the release protects the rounded table): total "
            f"{report.total_before} before, {report.total_after} after")  # fmt: skip


def prior_note(request, strata) -> str:
    """Where the prior rates came from, for the summary."""
    if not request.needs_prior:
        return "not used by md"
    if request.sanitised_prior_by is None:
        groups = strata.prior_groups
        if groups is None:
            shape = (
                "it varies stratum by stratum; public by the steward's declaration of its "
                f'source (--prior-source, in the manifest): "{strata.prior_declared}"'
            )
        elif groups:
            shape = f"constant within the groups of {groups} (two or more strata each)"
        else:
            shape = "one rate for every stratum"
        checked = (
            "the count-fit check was OVERRIDDEN (--prior-is-public-i-am-sure; the manifest says so)"
            if request.prior_is_public_i_am_sure
            else "the count-fit check passed"
        )
        return f"{strata.prior_description}; {shape}; {checked}"
    if len(request.sanitised_prior_by) == 0:
        if request.denominator == "expected":
            return "the overall SMR total / sum of expected counts (public, no budget)"
        return "the overall rate total / sum of populations (public, no budget)"
    return (
        f"sanitised: the totals by {list(request.sanitised_prior_by)} with discrete Laplace "
        "noise (budget --prior-epsilon), in the release's prior file"
    )


def _attributes_note(request) -> list[str]:
    """The line on the attributes and their split check (:mod:`..attribute_check`)."""
    if not request.attributes:
        return []
    checked = (
        "the check that none splits the counts as a threshold of them would was OVERRIDDEN "
        "(--attributes-are-public-i-am-sure)"
        if request.attributes_are_public_i_am_sure
        else "the check that none splits the counts as a threshold of them would passed"
    )
    return [f"- attributes {list(request.attributes)}, published exactly: {checked}"]


def _guide_note(request) -> list[str]:
    """A line when a study's release went ahead without a current guide
    (``--release-without-guide``), saying what was wrong with the guide."""
    if request.study is None or not request.release_without_guide:
        return []
    problem = request.study.guide_problem() or "the guide was current all the same"
    return [
        f"- **released without a current guide** (`--release-without-guide`): {problem}; "
        "the utility report's verdicts from the guide are not promises for this release"
    ]


def write_summary(folder: Path, request, strata, cal, synthetic, guarantee: str) -> list:
    """Write summary.md and its figures into ``folder``; return the file names written."""
    keys = strata.keys
    group = request.group_by or keys.columns[0]
    if group not in keys.columns:
        raise ReleaseError(
            f"{request.input}: --group-by {group!r} is not a key column; keys are "
            f"{list(keys.columns)}"
        )
    sets = synthetic.shape[0]
    totals = group_totals(keys, group, strata.counts, synthetic)
    written = []

    lines = [
        "# Synthetic release: summary for the data steward",
        "",
        "**Private: this file shows the original (confidential) totals. Never publish "
        "this folder.**",
        "",
        f"- input: `{request.input.name}`, {cal.n_cells} strata, total {cal.total} events",
        f"- mechanism `{cal.mechanism}`, calibration `{cal.method}`: {guarantee}",
        f"- {sets} synthetic set{'s' if sets > 1 else ''}; root key in `provenance.json`",
        f"- prior rates: {prior_note(request, strata)}",
        f"- {rounding_note(request.rounding, strata.rounding)}",
        *_attributes_note(request),
        *_guide_note(request),
        "",
        f"## Totals by `{group}`",
        "",
        f"Every key's totals, beside synthesis with no privacy, are drawn in `utility.png` "
        f"(its panel by {group}) and read in `utility.md`.",
        "",
        f"| {group} | original | synthetic mean | synthetic min | synthetic max |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in totals.head(TABLE_ROWS).itertuples(index=False):
        lines.append(
            f"| {row[0]} | {row.original} | {row.synthetic_mean:.1f} | {row.synthetic_min} "
            f"| {row.synthetic_max} |"
        )
    if len(totals) > TABLE_ROWS:
        lines.append(f"| ... {len(totals) - TABLE_ROWS} more groups (see the plot) | | | | |")

    fips = fips_column(request, keys)
    lines += ["", "## Map", ""]
    study_map = _study_map(request)
    if study_map is not None:  # drawn by the utility report, beside this file
        lines.append(
            f"The study's map (`studies.{request.study.name}.geometry`), true and synthetic "
            f"area rates, is `{study_map}` (read in `utility.md`):"
        )
        lines += ["", f"![true and synthetic area rates on the study's map]({study_map})"]
    if fips is None:
        if study_map is None:
            lines.append(
                "No map: no key column of 5-digit county FIPS codes (name one with "
                "`--fips-column`), and no study with a geometry (`--study`)."
            )
    else:
        frame_path = request.county_frame or DEFAULT_COUNTY_FRAME
        note = _county_map(folder, frame_path, keys, fips, strata.counts, synthetic)
        if note.endswith(".png"):
            written.append(note)
            lines += [""] * (study_map is not None)
            lines.append(f"![original and synthetic totals by county]({note})")
        else:
            lines += [""] * (study_map is not None)
            lines.append(f"No {'county ' if study_map else ''}map: {note}")
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    written.append("summary.md")
    return written


def _study_map(request) -> str | None:
    """The name of the study's map that the utility report draws into the same folder
    (:func:`dpcounts.release.report.promise.write_map`: a study with a geometry and an area), or
    None."""
    study = request.study
    if study is None or study.definition.geometry is None or study.definition.area is None:
        return None
    from dpcounts.release.report.promise import MAP

    return MAP


def check_county_frame(request, keys: pd.DataFrame) -> None:
    """Refuse, before anything is spent, a ``--county-frame`` the steward named that cannot
    draw the map: not found, not a county frame, or without the keys' FIPS codes. (The
    project's default frame, when absent or not matching, only leaves the summary without
    a map, saying why.)"""
    if request.county_frame is None:
        return
    fips = fips_column(request, keys)
    if fips is None:
        raise ReleaseError(
            f"--county-frame {request.county_frame}: the keys {list(keys.columns)} hold no "
            "column of 5-digit county FIPS codes to map; name it with --fips-column"
        )
    codes = pd.Series(keys[fips].astype(str).unique(), name="fips")
    _, why = _frame_for(request.county_frame, codes, fips)
    if why:
        raise ReleaseError(f"--county-frame: {why} Nothing was spent.")


def _frame_for(frame_path: Path, codes: pd.Series, fips: str):
    """The county frame at ``frame_path`` and ``""``, or None and why it cannot map the
    FIPS ``codes`` of the key ``fips``."""
    from dpcounts.data.counties import load_counties

    if not Path(frame_path).is_file():
        return None, f"county frame `{frame_path}` not found (give one with `--county-frame`)."
    try:
        counties = load_counties(frame_path)
    except (OSError, ValueError) as err:  # not a county frame (ValueError: pyarrow's too)
        return None, (
            f"county frame `{frame_path}` could not be read as the county frame (a GeoParquet "
            f"file with the columns of data/counties_1980.parquet): {str(err).splitlines()[0]}"
        )
    unknown = sorted(set(codes) - set(counties["fips"]))
    if unknown:
        return None, (
            f"{len(unknown)} FIPS code(s) of `{fips}` are not counties of "
            f"`{Path(frame_path).name}` (e.g. {unknown[:3]})."
        )
    return counties, ""


def _county_map(folder: Path, frame_path: Path, keys, fips: str, counts, synthetic) -> str:
    """Write the county map and return its file name, or return why there is none."""
    import matplotlib.pyplot as plt

    from dpcounts.io import save_figure

    by_fips = group_totals(keys, fips, counts, synthetic).rename(columns={fips: "fips"})
    counties, why = _frame_for(frame_path, by_fips["fips"], fips)
    if counties is None:
        return why
    name = f"map_{fips}.png"
    fig = _map_figure(counties, by_fips)
    save_figure(fig, folder / name)
    plt.close(fig)
    return name
