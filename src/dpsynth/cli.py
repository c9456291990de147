"""The analyst's command line: ``dpsynth synthesize`` (also ``python -m dpsynth``).

Exit codes: 0 success, 2 bad input or options (the message names the file, column and
keys at fault; no release folder is left behind), 1 an unexpected internal error.
The work itself is done by :mod:`dpsynth.release`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from dpsynth import __version__
from dpsynth.calibration import MECHANISMS, METHODS

DESCRIPTION = """\
Release differentially private synthetic counts of a table of strata.

The input has one row per stratum: key columns that identify it (e.g. county, sex, age),
a count of events, a population and (for pg and truncated) a public prior rate. The total
of the counts is released exactly; every synthetic set sums to it. The calibration (the
public hyperparameters a, b, L, U) depends on epsilon, the total, the populations and
the prior rates only, never on the counts, and is published beside the synthetic sets.
"""

EPILOG = """\
output folder (--out):
  manifest.json            what the release is: mechanism, epsilon, method, keys, files,
                           library version, a salted seed commitment, the command (seed blanked)
  synthetic.parquet        all sets in one long table: set, keys..., count, population
  hyperparameters.parquet  keys..., cell, a, b, population, prior_rate, lower, upper
  private/                 for the data steward only, never publish: provenance.json (the
                           seed, the input's path and SHA-256), summary.md and its plots
                           of synthetic vs original totals (and a county map when a key
                           holds 5-digit county FIPS codes covered by the county frame)

example:
  dpsynth synthesize --input counts.csv --epsilon 1 --mechanism truncated \\
      --method certified --sets 10 --seed 42 --out release/
"""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _tail(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a probability in (0, 1), got {text!r}")
    return value


def _inflation(text: str) -> float:
    value = _positive_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpsynth",
        description="Differentially private synthetic count data.",
    )
    parser.add_argument("--version", action="version", version=f"dpsynth {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    syn = commands.add_parser(
        "synthesize",
        help="release synthetic counts of a table of strata",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    io = syn.add_argument_group("input and output")
    io.add_argument(
        "--input",
        required=True,
        type=Path,
        metavar="FILE",
        help="strata as CSV (.csv, .csv.gz, .txt) or Parquet (.parquet, .pq); with --wonder "
        "a CDC WONDER export (tab-delimited 'Export Results' text)",
    )
    io.add_argument(
        "--wonder",
        action="store_true",
        help="read --input with the CDC WONDER reader: count column 'deaths', keys the "
        "'... Code' columns (snake_case, e.g. county_code); suppressed cells are an error",
    )
    io.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="release folder to create; built in a temporary folder beside it and renamed "
        "into place only when complete",
    )
    io.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it exists and is not empty (refused otherwise)",
    )
    io.add_argument(
        "--format",
        dest="output_format",
        choices=("parquet", "csv"),
        default="parquet",
        help="file format of the synthetic sets and the hyperparameters (default: parquet)",
    )

    cols = syn.add_argument_group("columns")
    cols.add_argument(
        "--keys",
        nargs="+",
        metavar="COLUMN",
        help="key columns identifying a stratum (default: every column that is not the "
        "count, population or prior-rate column)",
    )
    cols.add_argument(
        "--count-column",
        metavar="NAME",
        help="column of event counts, whole numbers >= 0 (default: count; deaths with --wonder)",
    )
    cols.add_argument(
        "--population-column",
        default="population",
        metavar="NAME",
        help="column of populations, > 0 (default: population)",
    )
    cols.add_argument(
        "--prior-rate-column",
        default="prior_rate",
        metavar="NAME",
        help="column of public prior rates per person, > 0, in the input or in --prior "
        "(default: prior_rate); not used by md",
    )
    prior = cols.add_mutually_exclusive_group()
    prior.add_argument(
        "--prior",
        dest="prior_file",
        type=Path,
        metavar="FILE",
        help="CSV or Parquet file of prior rates joined on the key columns",
    )
    prior.add_argument(
        "--prior-rate-by",
        nargs="*",
        metavar="COLUMN",
        help="derive the prior rates from the input: total count / total population within "
        "each group of these columns (e.g. --prior-rate-by sex age: statewide rates by sex "
        "and age); with no column, one overall rate. These rates are treated as public, "
        "as the papers treat state rates; epsilon does not cover them",
    )

    mech = syn.add_argument_group("mechanism")
    mech.add_argument(
        "--epsilon", required=True, type=_positive_float, help="privacy budget, a number > 0"
    )
    mech.add_argument(
        "--mechanism",
        required=True,
        choices=MECHANISMS,
        help="md: multinomial-Dirichlet; pg: Poisson-gamma; truncated: truncated Poisson-gamma",
    )
    mech.add_argument(
        "--method",
        choices=METHODS,
        default="paper",
        help="calibration: paper (the papers' closed forms; nominal epsilon for pg and "
        "truncated), certified (proven epsilon-DP), exact (smallest shapes whose exact "
        "bivariate ratio stays within epsilon); md has paper only (default: paper)",
    )
    mech.add_argument(
        "--tail",
        type=_tail,
        metavar="P",
        help="truncated only: tail probability of the truncation bounds (default: "
        "min(0.001, 1/number of strata))",
    )
    mech.add_argument(
        "--inflation",
        type=_inflation,
        default=1.0,
        metavar="XI",
        help="truncated only: widen the bounds, L from n*rate/XI and U from XI*n*rate (default: 1)",
    )

    draw = syn.add_argument_group("drawing")
    draw.add_argument(
        "--sets",
        type=_positive_int,
        default=1,
        metavar="N",
        help="number of synthetic sets (default: 1)",
    )
    draw.add_argument(
        "--seed",
        type=_seed,
        metavar="INT",
        help="root seed, a whole number >= 0 (default: 128 fresh bits from the operating "
        "system's secure source); recorded in private/provenance.json, never in the "
        "manifest: keep it secret",
    )
    draw.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal anyway)"
    )

    summary = syn.add_argument_group("summary (private/summary.md)")
    summary.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="key column whose totals the summary plots, synthetic vs original (default: "
        "the first key)",
    )
    summary.add_argument(
        "--fips-column",
        metavar="COLUMN",
        help="key column of 5-digit county FIPS codes for the map (default: fips, "
        "county_fips or county_code when present)",
    )
    summary.add_argument(
        "--county-frame",
        type=Path,
        metavar="FILE",
        help="county boundaries for the map (default: the repository's data/counties_1980.parquet)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    from dpsynth.release import ReleaseError, ReleaseRequest, build_release

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)  # exits 2 with a usage message on bad options
    request = ReleaseRequest(
        input=args.input,
        out=args.out,
        epsilon=args.epsilon,
        mechanism=args.mechanism,
        method=args.method,
        tail=args.tail,
        inflation=args.inflation,
        sets=args.sets,
        seed=args.seed,
        wonder=args.wonder,
        count_column=args.count_column,
        population_column=args.population_column,
        prior_rate_column=args.prior_rate_column,
        prior_file=args.prior_file,
        prior_rate_by=None if args.prior_rate_by is None else tuple(args.prior_rate_by),
        keys=None if args.keys is None else tuple(args.keys),
        group_by=args.group_by,
        fips_column=args.fips_column,
        county_frame=args.county_frame,
        output_format=args.output_format,
        force=args.force,
        progress=False if args.quiet else None,
        command=("dpsynth", *argv),
    )
    try:
        manifest = build_release(request)
    except ReleaseError as err:
        print(f"dpsynth synthesize: error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.out}: {manifest['sets']} synthetic set(s) of {manifest['strata']} strata "
        f"(total {manifest['total']}), {manifest['mechanism']} / {manifest['method']}, "
        f"epsilon {manifest['epsilon']:g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
