"""Build a release folder: synthetic counts, their public hyperparameters and a manifest.

This is the library side of ``dpsynth synthesize`` (``dpsynth.cli`` only parses options):
read strata, check them, calibrate, draw synthetic sets, write the folder atomically.

Layout of a release (``--out``)::

    manifest.json            what the release is and how to read it (public)
    synthetic.parquet        the synthetic sets, long: column ``set`` (0..N-1), the key
                             columns, ``count`` (synthetic) and the population (public)
    hyperparameters.parquet  key columns + the calibration per stratum: a, b, population,
                             prior_rate, lower (L), upper (U) (public)
    private/                 for the data steward only; never publish it:
        provenance.json      the seed, the input file's path and SHA-256, the full command
        summary.md           what was done, and synthetic vs original totals
        totals_by_<col>.png  synthetic vs original totals by a grouping
        map_<col>.png        original and synthetic county totals (when FIPS are present)

Why a private folder: with the seed, anyone can rerun the sampler on candidate datasets
and keep the one that reproduces the release exactly, and the input's SHA-256 confirms a
guessed dataset just as well; the original totals in the summary are confidential
outright. The manifest carries a *salted* commitment to the seed instead,
SHA-256(salt + seed) with a random 128-bit salt kept in ``provenance.json`` (a bare hash
of a small seed such as ``--seed 42`` could be inverted by trying seeds), which the steward
can later open by showing both; and the command with ``--seed`` blanked.

Synthetic set ``k`` is drawn with ``default_rng(SeedSequence(seed).spawn(N)[k])``, so a set
depends only on the seed and its number, never on how many sets were asked for.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import dpsynth
from dpsynth.calibration import Calibration
from dpsynth.data.validation import SHOWN, validate_strata
from dpsynth.io import sha256_file, write_json

#: Manifest format version; bump when a field changes meaning.
RELEASE_FORMAT = 1
#: The synthetic count column of the release (the input's count column is replaced).
SYNTHETIC_COUNT = "count"
#: How each calibration method's privacy claim should be read (DESIGN.md sec 3-4).
GUARANTEES = {
    ("md", "paper"): "exact epsilon-DP (seed 000 eq 5; confirmed by the exact audit)",
    ("pg", "paper"): "paper calibration, nominal epsilon (not proven for unequal prior rates)",
    ("pg", "certified"): "certified epsilon-DP (docs/privacy.md)",
    ("pg", "exact"): "exact bivariate ratio within epsilon (optimised calibration)",
    ("truncated", "paper"): "paper calibration, nominal epsilon (not proven for unequal "
    "prior rates)",
    ("truncated", "certified"): "certified epsilon-DP (docs/privacy.md)",
    ("truncated", "exact"): "exact bivariate ratio within epsilon (optimised calibration)",
}
#: Key columns tried, in order, as the county FIPS column when none is named.
FIPS_CANDIDATES = ("fips", "county_fips", "county_code")
#: The county frame shipped with the repository (present in a source checkout).
DEFAULT_COUNTY_FRAME = Path(__file__).resolve().parents[2] / "data" / "counties_1980.parquet"


class ReleaseError(ValueError):
    """Bad input or options: the message names the file, column and keys at fault."""


@dataclass(frozen=True)
class ReleaseRequest:
    """Everything ``dpsynth synthesize`` was asked to do (the parsed command line)."""

    input: Path
    out: Path
    epsilon: float
    mechanism: str
    method: str = "paper"
    tail: float | None = None
    inflation: float = 1.0
    sets: int = 1
    seed: int | None = None
    wonder: bool = False
    count_column: str | None = None  # None: "count" ("deaths" for --wonder)
    population_column: str = "population"
    prior_rate_column: str = "prior_rate"
    prior_file: Path | None = None
    prior_rate_by: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    group_by: str | None = None
    fips_column: str | None = None
    county_frame: Path | None = None
    output_format: str = "parquet"
    force: bool = False
    progress: bool | None = None  # None: only on a terminal
    command: tuple[str, ...] = field(default_factory=tuple)

    @property
    def needs_prior(self) -> bool:
        return self.mechanism != "md"


@dataclass(frozen=True)
class Strata:
    """Checked strata in input order: key columns, counts, populations, prior rates."""

    keys: pd.DataFrame
    counts: np.ndarray
    population: np.ndarray
    prior_rate: np.ndarray | None
    prior_source: str | None
    count_column: str

    @property
    def total(self) -> int:
        return int(self.counts.sum())


# --- reading ---------------------------------------------------------------------------


def read_table(path: Path) -> pd.DataFrame:
    """A CSV (``.csv``, ``.csv.gz``, ``.txt``) or Parquet (``.parquet``, ``.pq``) file.

    CSV columns are read as text (so codes such as FIPS ``01001`` keep their leading
    zeros); value columns are converted and checked later.
    """
    if not path.is_file():
        raise ReleaseError(f"{path}: file not found; expected a CSV or Parquet file of strata")
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(path, dtype=str, skipinitialspace=True)
    except (ValueError, OSError) as err:  # pyarrow and the CSV parser raise these
        raise ReleaseError(f"{path}: could not be read ({err})") from err
    raise ReleaseError(
        f"{path}: unknown file type; expected .csv, .csv.gz, .txt, .parquet or .pq "
        "(or a CDC WONDER export with --wonder)"
    )


def _read_input(request: ReleaseRequest) -> tuple[pd.DataFrame, str, list[str]]:
    """The input frame, its count column and its key columns."""
    path = request.input
    if request.wonder:
        from dpsynth.data.wonder import read_wonder, snake_case

        if not path.is_file():
            raise ReleaseError(f"{path}: file not found; expected a CDC WONDER export")
        try:
            frame = read_wonder(path)
        except ValueError as err:
            raise ReleaseError(str(err)) from err
        count = request.count_column or "deaths"
        value_columns = {count, request.population_column, request.prior_rate_column}
        # WONDER's code columns identify a stratum; labels and rates merely describe it.
        default_keys = [c for c in frame.columns if c.endswith("_code")]
        keys = [snake_case(k) for k in request.keys] if request.keys else default_keys
        if not keys:
            raise ReleaseError(
                f"{path}: no '... Code' column to use as stratum keys; name them with --keys"
            )
        return frame, count, keys

    frame = read_table(path)
    count = request.count_column or "count"
    value_columns = {count, request.population_column, request.prior_rate_column}
    keys = list(request.keys) if request.keys else [c for c in frame if c not in value_columns]
    if not keys:
        raise ReleaseError(
            f"{path}: no key columns; expected columns besides {sorted(value_columns)} that "
            f"identify each stratum (found {list(frame.columns)}), or name them with --keys"
        )
    return frame, count, keys


def _numeric(frame: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def _describe_keys(keys: pd.DataFrame, mask: np.ndarray) -> str:
    rows = keys.loc[mask]
    shown = [
        ", ".join(f"{name}={value!r}" for name, value in zip(keys.columns, row, strict=True))
        for row in rows.head(SHOWN).itertuples(index=False)
    ]
    text = "; ".join(f"({item})" for item in shown)
    if len(rows) > SHOWN:
        text += f" and {len(rows) - SHOWN} more"
    return text


def _prior_from_file(request: ReleaseRequest, frame: pd.DataFrame, keys: list[str]) -> np.ndarray:
    prior_path = request.prior_file
    prior = read_table(prior_path)
    column = request.prior_rate_column
    missing = [name for name in [*keys, column] if name not in prior.columns]
    if missing:
        raise ReleaseError(
            f"{prior_path}: missing column(s) {missing}; expected the input's key columns "
            f"{keys} and {column!r}, found {list(prior.columns)}"
        )
    prior = prior[[*keys, column]]
    duplicated = prior.duplicated(subset=keys, keep=False).to_numpy()
    if duplicated.any():
        raise ReleaseError(
            f"{prior_path}: duplicate key(s) {_describe_keys(prior[keys], duplicated)}; "
            "expected one prior rate per stratum"
        )
    # Join on the keys as text, so a Parquet input with integer codes matches a CSV prior.
    left = frame[keys].astype(str).reset_index(drop=True)
    right = prior.astype({name: str for name in keys})
    joined = left.merge(right, on=keys, how="left", validate="one_to_one")
    absent = joined[column].isna().to_numpy()
    if absent.any():
        raise ReleaseError(
            f"{prior_path}: no {column!r} for stratum/strata "
            f"{_describe_keys(frame[keys].reset_index(drop=True), absent)} of {request.input}; "
            "expected a prior rate for every stratum of the input"
        )
    values = pd.to_numeric(joined[column], errors="coerce").to_numpy(dtype=float)
    return values


def _prior_by_groups(
    request: ReleaseRequest, frame: pd.DataFrame, counts, population
) -> tuple[np.ndarray, str]:
    groups = list(request.prior_rate_by or ())
    absent = [name for name in groups if name not in frame.columns]
    if absent:
        raise ReleaseError(
            f"{request.input}: --prior-rate-by column(s) {absent} not found; have "
            f"{list(frame.columns)}"
        )
    if not groups:
        rate = np.full(len(frame), counts.sum() / population.sum())
        return rate, "the overall rate total / sum(population), public like the total"
    table = pd.DataFrame({"count": counts, "population": population})
    for name in groups:
        table[name] = frame[name].astype(str).to_numpy()
    sums = table.groupby(groups, sort=False)[["count", "population"]].transform("sum")
    rate = (sums["count"] / sums["population"]).to_numpy(dtype=float)
    source = (
        f"rates of the input's counts by {groups} (sum of counts / sum of populations per "
        "group), treated as public as the papers treat state rates: they are not covered "
        "by epsilon, so publish them or use a prior file of rates that are public already"
    )
    return rate, source


def load_strata(request: ReleaseRequest) -> Strata:
    """Read and check the input; raise :class:`ReleaseError` naming what is wrong."""
    frame, count, keys = _read_input(request)
    source = str(request.input)
    population = request.population_column
    try:
        validate_strata(frame, count=count, population=population, keys=keys, source=source)
    except ValueError as err:
        raise ReleaseError(str(err)) from err
    frame = frame.reset_index(drop=True)
    counts_float = _numeric(frame, count)
    counts = counts_float.astype(np.int64)
    populations = _numeric(frame, population)
    key_frame = frame[keys].copy()

    prior_rate = prior_source = None
    if request.needs_prior:
        if request.prior_file is not None:
            prior_rate = _prior_from_file(request, frame, keys)
            prior_source = (
                f"column {request.prior_rate_column!r} of {request.prior_file.name}, "
                "joined on the keys"
            )
            where = str(request.prior_file)
        elif request.prior_rate_by is not None:
            prior_rate, prior_source = _prior_by_groups(request, frame, counts, populations)
            where = f"{source} (prior rates derived with --prior-rate-by)"
        else:
            column = request.prior_rate_column
            if column not in frame.columns:
                raise ReleaseError(
                    f"{source}: missing column {column!r}; mechanism {request.mechanism!r} "
                    "needs a public prior rate per stratum: add the column, name another "
                    "with --prior-rate-column, give --prior FILE, or derive one with "
                    "--prior-rate-by"
                )
            prior_rate = _numeric(frame, column)
            not_number = np.isnan(prior_rate) & frame[column].notna().to_numpy()
            if not_number.any():
                raise ReleaseError(
                    f"{source}: column {column!r} is not numeric at "
                    f"{_describe_keys(key_frame, not_number)}; expected rates such as 0.0012"
                )
            prior_source = f"column {column!r} of the input"
            where = source
        bad = ~np.isfinite(prior_rate) | (prior_rate <= 0)
        if bad.any():
            raise ReleaseError(
                f"{where}: prior rate missing or <= 0 at {_describe_keys(key_frame, bad)} "
                "where the population is positive; expected prior rates > 0 (the gamma "
                "prior's mean; a zero rate leaves no room for any event)"
            )
    return Strata(key_frame, counts, populations, prior_rate, prior_source, count)


# --- calibrating and drawing -----------------------------------------------------------
def calibrate_strata(request: ReleaseRequest, strata: Strata) -> Calibration:
    """``dpsynth.calibrate`` on the strata's public inputs (never their counts)."""
    from dpsynth.privacy.calibrate import calibrate

    kwargs = {"method": request.method}
    if request.mechanism == "truncated":
        kwargs.update(tail=request.tail, inflation=request.inflation)
    elif request.tail is not None or request.inflation != 1.0:
        raise ReleaseError(
            f"--tail and --inflation apply to --mechanism truncated only, not {request.mechanism!r}"
        )
    try:
        return calibrate(
            request.mechanism,
            request.epsilon,
            strata.total,
            strata.population,
            strata.prior_rate,
            **kwargs,
        )
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err


def draw_sets(y, cal: Calibration, sets: int, seed: int, *, progress: bool | None = None):
    """``sets`` synthetic vectors, set k drawn from ``SeedSequence(seed).spawn(sets)[k]``."""
    from tqdm import tqdm

    from dpsynth.sampling.conditioned import ConditionedSampler

    sampler = ConditionedSampler(y, cal)  # built once: the expensive part
    children = np.random.SeedSequence(seed).spawn(sets)
    out = np.empty((sets, cal.n_cells), dtype=np.int64)
    disable = None if progress is None else not progress
    for k, child in enumerate(tqdm(children, desc="synthetic sets", unit="set", disable=disable)):
        out[k] = sampler.draw(1, np.random.default_rng(child))[0]
    return out


# --- writing ---------------------------------------------------------------------------
def seed_commitment(seed: int, salt: str) -> str:
    """SHA-256 of ``salt:seed``: hiding (the salt is secret) and binding (SHA-256)."""
    return hashlib.sha256(f"{salt}:{seed}".encode()).hexdigest()


def fresh_seed() -> int:
    """A 128-bit seed from the operating system's secure source."""
    return secrets.randbits(128)


def redacted_command(command: Sequence[str]) -> list[str]:
    """The command with the value of ``--seed`` blanked (the seed is private)."""
    out, hide_next = [], False
    for arg in command:
        if hide_next:
            out.append("<private>")
            hide_next = False
        elif arg == "--seed":
            out.append(arg)
            hide_next = True
        elif arg.startswith("--seed="):
            out.append("--seed=<private>")
        else:
            out.append(arg)
    return out


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)


def check_out_folder(out: Path, force: bool) -> None:
    """Refuse an existing non-empty ``out`` unless ``force``; refuse a file always."""
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out}: exists and is not a folder; expected a folder for the release")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ReleaseError(
            f"{out}: folder exists and is not empty; choose another --out or pass --force "
            "to replace it"
        )


def _install(tmp: Path, out: Path) -> None:
    """Move the finished release ``tmp`` to ``out`` (replacing an old one)."""
    if out.is_dir():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rename(out, old / "release")
        os.rename(tmp, out)
        shutil.rmtree(old)
    else:
        os.rename(tmp, out)


def build_release(request: ReleaseRequest) -> dict:
    """Check, calibrate, draw and write the release folder; return the manifest."""
    if not (np.isfinite(request.epsilon) and request.epsilon > 0):
        raise ReleaseError(f"--epsilon must be a finite number > 0, got {request.epsilon}")
    if request.sets < 1:
        raise ReleaseError(f"--sets must be at least 1, got {request.sets}")
    check_out_folder(request.out, request.force)
    strata = load_strata(request)
    cal = calibrate_strata(request, strata)
    seed = request.seed if request.seed is not None else fresh_seed()
    try:
        from dpsynth.sampling.conditioned import check_feasible

        check_feasible(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: {err}") from err

    synthetic = draw_sets(strata.counts, cal, request.sets, seed, progress=request.progress)

    out = request.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        manifest = _write_release(tmp, request, strata, cal, synthetic, seed)
        _install(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return manifest


def _write_release(tmp, request, strata, cal, synthetic, seed) -> dict:
    suffix = ".csv" if request.output_format == "csv" else ".parquet"
    keys = list(strata.keys.columns)
    sets, cells = synthetic.shape

    long = strata.keys.iloc[np.tile(np.arange(cells), sets)].reset_index(drop=True)
    long.insert(0, "set", np.repeat(np.arange(sets), cells))
    long[SYNTHETIC_COUNT] = synthetic.reshape(-1)
    population = strata.population
    if np.all(population == np.round(population)):
        population = population.astype(np.int64)  # whole people stay whole in the output
    long[request.population_column] = np.tile(population, sets)
    synthetic_path = tmp / f"synthetic{suffix}"
    _write_table(long, synthetic_path)

    hyper = pd.concat([strata.keys.reset_index(drop=True), cal.to_frame()], axis=1)
    hyper_path = tmp / f"hyperparameters{suffix}"
    _write_table(hyper, hyper_path)

    private = tmp / "private"
    private.mkdir()
    private_files = write_summary(private, request, strata, cal, synthetic)
    salt = secrets.token_hex(16)
    provenance = {
        "seed": seed,
        "seed_commitment_salt": salt,
        "seed_given": request.seed is not None,
        "input": str(request.input.resolve()),
        "input_sha256": sha256_file(request.input),
        "prior_file": str(request.prior_file.resolve()) if request.prior_file else None,
        "prior_file_sha256": sha256_file(request.prior_file) if request.prior_file else None,
        "command": list(request.command),
    }
    write_json(provenance, private / "provenance.json")
    private_files = ["provenance.json", *private_files]

    manifest = {
        "dpsynth_release_format": RELEASE_FORMAT,
        "dpsynth_version": dpsynth.__version__,
        "mechanism": cal.mechanism,
        "method": cal.method,
        "guarantee": GUARANTEES[(cal.mechanism, cal.method)],
        "epsilon": cal.epsilon,
        "total": cal.total,
        "strata": cells,
        "sets": sets,
        "tail": cal.tail,
        "inflation": cal.inflation if cal.mechanism == "truncated" else None,
        "keys": keys,
        "input_file": request.input.name,
        "input_format": "cdc-wonder" if request.wonder else suffix_of(request.input),
        "count_column": strata.count_column,
        "population_column": request.population_column,
        "prior": strata.prior_source,
        "files": {
            "synthetic": {
                "path": synthetic_path.name,
                "sha256": sha256_file(synthetic_path),
                "layout": (
                    f"long: one row per set and stratum; 'set' numbers the sets 0..{sets - 1}, "
                    f"then the keys {keys}, '{SYNTHETIC_COUNT}' the synthetic count (each "
                    f"set sums to the total {cal.total}) and "
                    f"'{request.population_column}' the public population"
                ),
            },
            "hyperparameters": {
                "path": hyper_path.name,
                "sha256": sha256_file(hyper_path),
                "layout": (
                    "one row per stratum, in the order of the synthetic sets: the keys, "
                    "'cell' (position), 'a' (Dirichlet alpha or gamma shape), 'b' (gamma "
                    "rate = a / prior_rate), 'population', 'prior_rate', 'lower' and "
                    "'upper' (truncation bounds L, U); columns a mechanism does not use "
                    "are absent"
                ),
            },
        },
        "private": {
            "folder": "private",
            "files": private_files,
            "note": (
                "for the data steward only, never publish: the seed and the input's "
                "SHA-256 let anyone confirm a guessed dataset, and the summary shows "
                "the original totals"
            ),
        },
        "seed_commitment": seed_commitment(seed, salt),
        "command": redacted_command(request.command),
    }
    write_json(manifest, tmp / "manifest.json")
    return manifest


def suffix_of(path: Path) -> str:
    name = path.name.lower()
    return "parquet" if name.endswith((".parquet", ".pq")) else "csv"


# --- the steward's summary -------------------------------------------------------------
#: Groups listed in summary.md's table before it says "and N more" (the plot shows all).
TABLE_ROWS = 30


def _fips_column(request: ReleaseRequest, keys: pd.DataFrame) -> str | None:
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
    labels = keys[column].astype(str).to_numpy()
    codes, uniques = pd.factorize(labels, sort=True)
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


def _totals_figure(totals: pd.DataFrame, column: str, sets: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5), layout="constrained")
    x = totals["original"].to_numpy(dtype=float)
    y = totals["synthetic_mean"].to_numpy()
    spread = np.vstack([y - totals["synthetic_min"], totals["synthetic_max"] - y])
    ax.errorbar(x, y, yerr=spread, fmt="o", ms=4, capsize=2, alpha=0.8, label="synthetic")
    top = max(x.max(), totals["synthetic_max"].max()) * 1.05 + 1
    ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="synthetic = original")
    ax.set(xlim=(0, top), ylim=(0, top), xlabel=f"original total by {column}")
    ylabel = "synthetic total (mean; bars: min to max" if sets > 1 else "synthetic total ("
    ax.set_ylabel(f"{ylabel} over {sets} set{'s' if sets > 1 else ''})")
    ax.set_title(f"Totals by {column}: {len(totals)} groups")
    ax.legend(loc="upper left")
    return fig


def _map_figure(counties, by_fips: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpsynth.plots.maps import county_choropleth

    frame = counties.merge(by_fips, on="fips", how="inner")
    top = float(max(frame["original"].max(), frame["synthetic_mean"].max(), 1))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for ax, column, title in (
        (axes[0], "original", "original total"),
        (axes[1], "synthetic_mean", "synthetic total (mean over sets)"),
    ):
        county_choropleth(frame, column, ax, title=title, vmin=0, vmax=top, legend_label="events")
    return fig


def write_summary(folder: Path, request, strata: Strata, cal: Calibration, synthetic) -> list:
    """Write summary.md and its figures into ``folder``; return the file names written."""
    import matplotlib.pyplot as plt

    from dpsynth.io import save_figure

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
    plot_name = f"totals_by_{group}.png"
    fig = _totals_figure(totals, group, sets)
    save_figure(fig, folder / plot_name)
    plt.close(fig)
    written.append(plot_name)

    lines = [
        "# Synthetic release: summary for the data steward",
        "",
        "**Private: this file shows the original (confidential) totals. Do not publish "
        "the `private/` folder.**",
        "",
        f"- input: `{request.input.name}`, {cal.n_cells} strata, total {cal.total} events",
        f"- mechanism `{cal.mechanism}`, calibration `{cal.method}`, epsilon {cal.epsilon:g}: "
        f"{GUARANTEES[(cal.mechanism, cal.method)]}",
        f"- {sets} synthetic set{'s' if sets > 1 else ''}; seed in `provenance.json`",
        f"- prior rates: {strata.prior_source or 'not used by md'}",
        "",
        f"## Totals by `{group}`",
        "",
        f"![synthetic vs original totals by {group}]({plot_name})",
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

    fips = _fips_column(request, keys)
    lines += ["", "## Map", ""]
    if fips is None:
        lines.append(
            "No map: no key column of 5-digit county FIPS codes (name one with `--fips-column`)."
        )
    else:
        frame_path = request.county_frame or DEFAULT_COUNTY_FRAME
        note = _county_map(folder, frame_path, keys, fips, strata.counts, synthetic)
        if note.endswith(".png"):
            written.append(note)
            lines.append(f"![original and synthetic totals by county]({note})")
        else:
            lines.append(f"No map: {note}")
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    written.append("summary.md")
    return written


def _county_map(folder: Path, frame_path: Path, keys, fips: str, counts, synthetic) -> str:
    """Write the county map and return its file name, or return why there is none."""
    import matplotlib.pyplot as plt

    from dpsynth.data.counties import load_counties
    from dpsynth.io import save_figure

    if not Path(frame_path).is_file():
        return f"county frame `{frame_path}` not found (give one with `--county-frame`)."
    counties = load_counties(frame_path)
    by_fips = group_totals(keys, fips, counts, synthetic).rename(columns={fips: "fips"})
    unknown = sorted(set(by_fips["fips"]) - set(counties["fips"]))
    if unknown:
        return (
            f"{len(unknown)} FIPS code(s) of `{fips}` are not counties of "
            f"`{Path(frame_path).name}` (e.g. {unknown[:3]})."
        )
    name = f"map_{fips}.png"
    fig = _map_figure(counties, by_fips)
    save_figure(fig, folder / name)
    plt.close(fig)
    return name
