"""The analyst's command line: ``dpcounts synthesize`` (also ``python -m dpcounts``),
``calibrate``, ``ledger``, ``keygen`` (the steward's signing key) and the reviewer's
``verify``.

Exit codes: 0 success, 2 bad input or options (the message names the file, column and
keys at fault; no release folder is left behind), 130/143 interrupted by SIGINT/SIGTERM
(partial folders removed, nothing published), 1 an unexpected internal error.
The work itself is done by :mod:`dpcounts.release`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import signal
import sys
import textwrap
from pathlib import Path

from dpcounts import __version__
from dpcounts.data.rounding import ROUNDING
from dpcounts.mechanisms import registry

DESCRIPTION = """\
Release differentially private synthetic counts of a table of strata.

The input has one row per stratum: key columns that identify it (--keys), a count of
events, a population and, for pg and truncated, a prior rate (public, from an external
file, or sanitised from the counts with part of the budget). The total of the counts is
released exactly; every synthetic set sums to it.

{neighbours}

--epsilon is the TOTAL budget of the whole release: the sanitised prior (if any) takes
--prior-epsilon, and the --sets synthetic sets share the rest equally. --delta (default
{delta:g}) bounds the sampler's numerical error; the release is (epsilon, delta)-DP. The
default calibration (certified) is proven; paper and exact are nominal and need
--allow-nominal.
"""

EPILOG = """\
output (--out release/):
  release/manifest.json          PUBLIC: what the release is and promises (docs/manifest.md):
                                 mechanism, method, total epsilon and its split, delta,
                                 the neighbouring relation, files and their SHA-256
  release/synthetic.parquet      PUBLIC: all sets, long: set, keys..., count, population
  release/hyperparameters.parquet PUBLIC: keys..., a, b, population, prior_rate, lower, upper
  release/prior.parquet          PUBLIC, with --sanitised-prior-by: noisy group totals
  release/README.md              PUBLIC: the release in words for its analyst (verify,
                                 estimate), written from the manifest and listed in it

private folder (--private-dir, default a new folder in $XDG_DATA_HOME/dpcounts/private/,
i.e. ~/.local/share/dpcounts/private/release-<16 hex digits of the seed commitment>/):
  provenance.json, summary.md    PRIVATE, never publish: the root key, the input's SHA-256,
  utility.md, .csv, .png         the original totals and plots, the utility report (per
                                 key, true vs synthetic totals; rMSE and rank correlation
                                 against synthesis with no privacy). Kept apart from the
                                 release, so publishing the folder that holds the release
                                 does not publish the key; the command prints where it went

randomness: ChaCha20 keyed with 256 bits from the operating system; a user seed only with
--insecure-test-seed, which marks the release "reproducible test, not for publication".

ledger: every release adds its total epsilon and delta to a ledger outside the release
(--ledger, default $DPCOUNTS_LEDGER or ~/.local/share/dpcounts/ledger.jsonl) under its
--dataset NAME (required): every table of the same people (deaths by county x age, then
by county x sex) released under one name is added up against the name's budget, stored in
the ledger by `dpcounts ledger --set-budget NAME EPS` or by the first --budget given for
it, and checked on every later release. A table released under a name keeps it. The
ledger is checked against the releases' private folders: a deleted or cut ledger is
refused, never reset (`dpcounts ledger --rebuild`). `dpcounts ledger` shows the spending.

example:
  dpcounts synthesize --input counts.csv --keys county age --strata strata.csv \\
      --dataset us-deaths-1999 --epsilon 1 --sets 10 --mechanism truncated \\
      --prior rates.csv --out release/
"""


CALIBRATE_DESCRIPTION = """\
Show what a release of this table would promise, before anything is drawn or spent.

Takes the same input, column, mechanism and budget options as `dpcounts synthesize` and
prints the budget split, the guarantee (certified or nominal), delta and the sampler's
total-variation target, and the calibration (a, b, L, U) summarised over the strata. The
calibration depends on epsilon, the public total, the populations and the prior only,
never on the counts; nothing is written to the ledger. With --sanitised-prior-by the
prior is noisy and drawn only by a release, so the calibration cannot be shown: the
budget and the guarantee are.
"""

VERIFY_DESCRIPTION = """\
Check a published release folder against its manifest, with nothing but the folder.

For a reviewer: no data, no key, no private folder. It prints one line per check, by
topic (the checks are listed below; what each compares: --help-all, or
docs/verify-checks.md); the files' times and modes are warnings only. No table is read
beyond the rows its file holds.

What it cannot check: that the sets were drawn by this calibration (any table of whole
counts with the total fits the numbers, the confidential one too), a sanitised prior's
epsilon (its noise cannot be read from its noisy totals), a declared prior's source or the
count-fit check's verdict. The last line says what was recomputed from the public files
and what is taken on trust, and whether the folder is signed: with --key PUBLIC, the
steward's public key, the signature shows that no public file or manifest field changed
since the steward signed; without it, a signed folder is said signed but not checked.

exit codes: 0 every check passed (warnings allowed; a nominal release passes but promises
nothing proven), 1 a check failed, 2 not a release folder or a malformed manifest.
"""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _whole_number(minimum: int):
    """An argparse type: a whole number >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return parse


_positive_int = _whole_number(1)
_seed = _whole_number(0)


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


def _add_ledger_options(group, dataset_group=None) -> None:
    """--budget, --dataset and --ledger: what the release is added up with (synthesize
    records it, calibrate previews it); --dataset in ``dataset_group`` if given (the
    required arguments of synthesize)."""
    group.add_argument(
        "--budget",
        type=_positive_float,
        metavar="EPS",
        help="the dataset's epsilon budget: stored in the ledger if NAME has none yet (every "
        "later release under NAME is checked against it, with or without --budget), else a "
        "cap of this release below the stored one; larger than the stored one is refused",
    )
    (dataset_group or group).add_argument(
        "--dataset",
        metavar="NAME",
        help="REQUIRED for synthesize: the name of the confidential data this table counts "
        "(the people, the events), e.g. us-deaths-1999, the unit of the budget: the ledger "
        "adds up every release under NAME, whatever its table, against NAME's budget. Give "
        "the same NAME to every table of the same people; a table released under a NAME "
        "must keep it",
    )
    group.add_argument(
        "--ledger",
        type=Path,
        metavar="FILE",
        help="the steward's ledger (default: $DPCOUNTS_LEDGER or "
        "~/.local/share/dpcounts/ledger.jsonl); keep it private. A dataset already known to "
        "the steward's index is refused in any ledger but its own",
    )
    # issue #34: one budget per dataset per steward (dpcounts.ledger.index)
    group.add_argument(
        "--new-dataset",
        action="store_true",
        help="declare that NAME counts other people than the released datasets whose "
        "strata this table overlaps (births beside deaths over the same counties): "
        "without it such a table is refused before anything is spent; recorded in the "
        "ledger",
    )


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The limits a release is refused beyond, before anything is drawn or spent (calibrate
    shows the forecast and the refusal a release would meet)."""
    from dpcounts.release.request import DEFAULTS

    limits = parser.add_argument_group("limits (forecast from public numbers only)")
    limits.add_argument(
        "--max-memory",
        type=_positive_float,
        default=DEFAULTS["max_memory"] / 2**30,
        metavar="GIB",
        help="refuse a release forecast to need more memory, in GiB (default: 60%% of this "
        "machine's memory, or of its control group's limit when lower: %(default)g here)",
    )
    limits.add_argument(
        "--max-minutes",
        type=_positive_float,
        default=DEFAULTS["max_minutes"],
        metavar="MIN",
        help="refuse a release forecast to take longer on this machine, in minutes "
        "(default: %(default)g; dpcounts calibrate shows the forecast)",
    )


def _add_strata_options(syn: argparse.ArgumentParser, required) -> None:
    """Input, columns, mechanism and budget: what ``synthesize`` and ``calibrate`` share;
    the options they cannot run without go to the group ``required`` (checked by
    :func:`_check_required`, not by argparse)."""
    from dpcounts.release.request import DEFAULT_PRIOR_SHARE, DEFAULTS

    io = syn.add_argument_group("input")
    io.add_argument(
        "--study",
        metavar="CONFIG:NAME",
        help="release the table of the study NAME of the config file CONFIG (studies.NAME): "
        "its table, keys, count, population, population_keys, rounding, prior and "
        "truncation come from the entry, checked as the study stage checks them, and the "
        "utility report judges the release against the study's guide; --mechanism and "
        "--method must be one of the study's arms. Replaces --input, --keys and the column, "
        "prior and truncation options",
    )
    io.add_argument(
        "--release-without-guide",
        action="store_true",
        help="with --study: release although the study's guide is missing or judged other "
        "settings, another table or older measures than the entry's today (without it, such "
        "a release is refused before anything is read or spent); the private summary says so",
    )
    required.add_argument(
        "--input",
        type=Path,
        metavar="FILE",
        help="strata as CSV (.csv, .csv.gz, .txt) or Parquet (.parquet, .pq); with --wonder "
        "a CDC WONDER export (tab-delimited 'Export Results' text)",
    )
    io.add_argument(
        "--wonder",
        action="store_true",
        help="read --input with the CDC WONDER reader: count column 'deaths', keys are "
        "snake_case names such as county_code; WONDER's labels, rates and flags are dropped",
    )
    cols = syn.add_argument_group("columns (every input column must be named here)")
    required.add_argument(
        "--keys",
        nargs="+",
        metavar="COLUMN",
        help="key columns identifying a stratum (required); any input column that is not a "
        "key, the count, the population or the prior rate is refused",
    )
    cols.add_argument(
        "--count-column",
        metavar="NAME",
        help="column of event counts, whole numbers (see --rounding) >= 0 and <= population (no "
        "bound with --expected-column) "
        "(default: count; deaths with --wonder)",
    )
    cols.add_argument(
        "--rounding",
        choices=ROUNDING,
        default=DEFAULTS["rounding"],
        help="fractional counts (some tables allocate cases fractionally): refuse them with "
        "an error (default) or round every count to the nearest whole number, half to even, "
        "before anything else; the guarantee is then about the rounded table, and the "
        "manifest says that this rule was applied (not which counts it changed)",
    )
    required.add_argument(
        "--strata",
        metavar="FILE|input|cross-product",
        help="REQUIRED, no default: where the list of every stratum comes from. The release "
        "publishes the list, so it must not depend on the counts (an input without its "
        "zero-count rows would reveal them, and no check of the input can tell). FILE: a "
        "public CSV or Parquet list of every stratum with its population (and prior-rate "
        "column, for a prior in the input); the input then holds the keys and counts, and a "
        "listed stratum with no row counts 0 (a file named 'input' or 'cross-product': "
        "./input). 'input': you declare that the input lists every stratum, zero counts "
        "included (e.g. nested keys such as state and county). 'cross-product': you declare "
        "that every value of every key column appears in the input, and dpcounts checks that "
        "every combination of them has a row (two or more key columns)",
    )
    cols.add_argument(
        "--population-keys",
        nargs="+",
        metavar="COLUMN",
        help="the key columns of the population units when strata share a population (e.g. "
        "the causes of death of one county and age group share its person-years): rates of "
        "groups count each unit's population once (default: every stratum its own)",
    )
    cols.add_argument(
        "--attributes",
        nargs="+",
        metavar="COLUMN",
        help="public columns of the strata to publish beside the keys, in the synthetic "
        "sets and the hyperparameters (e.g. a county's urban flag): one value per stratum, "
        "no empty cell, not a key, the count, the population or the prior rate. Public "
        "like the keys: you declare them, and they must not be computed from the counts "
        "(one that splits the counts or rates as a threshold of them would is refused). "
        "--sanitised-prior-by and `dpcounts estimate --by` may group by them; with --strata "
        "FILE they are read from the list (with --study: the study's attributes)",
    )
    cols.add_argument(
        "--population-column",
        default=DEFAULTS["population_column"],
        metavar="NAME",
        help="column of populations, > 0 (default: %(default)s)",
    )
    cols.add_argument(
        "--expected-column",
        metavar="NAME",
        help="instead of --population-column: a column of expected counts E > 0 (observed "
        "vs expected, indirect standardisation; public like populations, docs/privacy.md); "
        "rates are SMRs (observed / expected) and counts may exceed E",
    )
    cols.add_argument(
        "--prior-rate-column",
        default=DEFAULTS["prior_rate_column"],
        metavar="NAME",
        help="column of prior rates per person, > 0, in the input (declared public by you) "
        "or in --prior (default: %(default)s); not used by md",
    )
    prior = cols.add_mutually_exclusive_group()
    prior.add_argument(
        "--prior",
        dest="prior_file",
        type=Path,
        metavar="FILE",
        help="CSV or Parquet file of public prior rates joined on the key columns",
    )
    prior.add_argument(
        "--sanitised-prior-by",
        nargs="*",
        metavar="COLUMN",
        help="derive the prior from the counts themselves, privately: the totals by these "
        "key columns get discrete Laplace noise (budget --prior-epsilon, part of --epsilon) "
        "and become rates; with no column, the overall rate total/population, which is "
        "public and costs nothing",
    )
    prior.add_argument(  # removed: parsed only to say so (_request), never shown
        "--prior-rate-by",
        nargs="*",
        metavar="COLUMN",
        help=argparse.SUPPRESS,
    )
    cols.add_argument(
        "--attributes-are-public-i-am-sure",
        action="store_true",
        help="release with attributes (--attributes) one of which splits the counts or rates "
        "with no overlap, which dpcounts otherwise refuses as computed from the counts (a "
        "threshold of them): only for columns truly made without them, such as an age band "
        "that orders the rates of a national table",
    )
    cols.add_argument(
        "--prior-is-public-i-am-sure",
        action="store_true",
        help="release with prior rates (--prior or the input's column) that fit the counts "
        "far better than chance allows, which dpcounts otherwise refuses as computed from "
        "the counts: only for rates truly made without them (they are published as they "
        "are; the manifest says the check was overridden)",
    )
    cols.add_argument(
        "--prior-source",
        metavar="TEXT",
        help="where the public prior rates (--prior FILE or the input's prior-rate column) "
        'come from, e.g. "state cancer registry rates 1990-94, published 1997": required for '
        "every such prior, grouped or stratum by stratum; written into the public manifest",
    )
    cols.add_argument(
        "--prior-epsilon",
        type=_positive_float,
        metavar="EPS",
        help="the part of --epsilon spent on the sanitised prior (default: "
        f"{DEFAULT_PRIOR_SHARE * 100:g}%% of --epsilon)",
    )

    mech = syn.add_argument_group("mechanism and privacy")
    required.add_argument(
        "--epsilon",
        type=_positive_float,
        metavar="EPS",
        help="TOTAL privacy budget of the whole release (prior and every set), a number > 0",
    )
    mech.add_argument(
        "--delta",
        type=_positive_float,
        default=DEFAULTS["delta"],
        help="total delta: bound on the sampler's numerical error over all sets (default: "
        "%(default)g)",
    )
    required.add_argument(
        "--mechanism",
        choices=registry.names(),
        help="md: multinomial-Dirichlet; pg: Poisson-gamma; truncated: truncated Poisson-gamma"
        " (every mechanism of dpcounts.mechanisms.registry)",
    )
    mech.add_argument(
        "--method",
        choices=registry.methods(),
        default=DEFAULTS["method"],
        help="calibration: certified (proven; default), paper (the papers' closed forms) or "
        "exact (smallest shapes whose exact bivariate ratio stays within epsilon); paper and "
        "exact are nominal for pg and truncated and need --allow-nominal",
    )
    mech.add_argument(
        "--allow-nominal",
        action="store_true",
        help="allow --method paper or exact for pg and truncated; the manifest then says "
        "'nominal, not a guarantee' and quotes the worst audited ratio",
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
        default=DEFAULTS["inflation"],
        metavar="XI",
        help="truncated only: widen the bounds, L from n*rate/XI and U from XI*n*rate "
        "(default: %(default)s)",
    )
    mech.add_argument(
        "--sets",
        type=_positive_int,
        default=DEFAULTS["sets"],
        metavar="N",
        help="number of synthetic sets; they share the budget (default: %(default)s)",
    )


#: The usage lines of the commands with many options: the options they cannot run without
#: (every option: --help-all), in two lines of at most 80 characters, which errors print
#: above their message.
SYNTHESIZE_USAGE = """\
%(prog)s --input FILE --keys COL... --dataset NAME --out DIR
  --strata FILE|input|cross-product --epsilon EPS --mechanism {md,pg,truncated}"""
CALIBRATE_USAGE = """\
%(prog)s --input FILE --keys COL... --epsilon EPS
  --strata FILE|input|cross-product --mechanism {md,pg,truncated} [options]"""

#: What a command cannot run without, as (option, attribute) in the order of its usage
#: line: checked by :func:`_check_required` after parsing, all missing ones in one message.
#: Not argparse's ``required=True``: --input and --keys have an alternative (--study), and
#: the errors of a missing --strata or --dataset explain why there is no default
#: (:data:`~dpcounts.release.request.STRATA_REQUIRED`, ``DATASET_REQUIRED``), which
#: argparse's own message would replace.
REQUIRED = {
    "synthesize": (
        ("--input", "input"),
        ("--keys", "keys"),
        ("--strata", "strata"),
        ("--dataset", "dataset"),
        ("--epsilon", "epsilon"),
        ("--mechanism", "mechanism"),
        ("--out", "out"),
    ),
    "calibrate": (
        ("--input", "input"),
        ("--keys", "keys"),
        ("--strata", "strata"),
        ("--epsilon", "epsilon"),
        ("--mechanism", "mechanism"),
    ),
}
#: Replaced by --study CONFIG:NAME.
_STUDY_DECIDES = ("--input", "--keys")
_REQUIRED_TITLE = "required arguments (--study CONFIG:NAME replaces --input and --keys)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser with errors a newcomer can read: the command's usage in at most
    two lines, the message, and "did you mean" for a mistyped option, command or choice.
    ``brief`` (description, sections, epilog) is what ``--help`` shows, a screen: the
    sections are (title, ((option, short help), ...)); ``--help-all`` shows everything."""

    def __init__(self, *args, brief=None, appendix=None, **kwargs):
        self.brief = brief
        self.appendix = appendix
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        """argparse's help, then ``appendix(full=True)`` when the command has one (a text
        imported only when help is asked for: ``dpcounts verify``'s list of checks)."""
        text = super().format_help()
        return text + self.appendix(True) if self.appendix else text

    def error(self, message: str):
        usage = self.format_usage().rstrip("\n")
        if usage.count("\n") > 1:
            usage = f"usage: {self.prog} [options]"
        hint = _did_you_mean(self, message)
        self.exit(2, f"{usage}\n{self.prog}: error: {message}\n{hint}")

    def format_brief_help(self) -> str:
        if self.brief is None:
            text = super().format_help()
            return text + self.appendix(False) if self.appendix else text
        description, sections, epilog = self.brief
        short = argparse.ArgumentParser(
            prog=self.prog,
            usage=self.usage,
            description=description,
            epilog=epilog,
            formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
                prog, max_help_position=34
            ),
            add_help=False,
        )
        for title, entries in sections:
            group = short.add_argument_group(title)
            for option, text in entries:
                action = copy.copy(self._option_string_actions[option])
                action.help = text
                group._add_action(action)
        return short.format_help()


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """A line "did you mean ...?" for unrecognized options or an invalid choice (a
    command, a mechanism) close to valid ones, else "". An option that begins a valid
    one (``--count`` of ``--count-column``) is matched first, then the closest spelling."""
    import difflib
    import re

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        given, valid = [choice[1]], re.findall(r"'([^']*)'", choice[2])
    elif message.startswith("unrecognized arguments: "):
        words = message.removeprefix("unrecognized arguments: ").split()
        given = [w.split("=", 1)[0] for w in words if w.startswith("-")]
        valid = [
            option
            for action in parser._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--")
        ]
    else:
        return ""

    def closest(word: str) -> str | None:
        begun = [option for option in valid if option.startswith(word) and len(word) > 3]
        if 0 < len(begun) <= 3:
            return " or ".join(begun)
        close = difflib.get_close_matches(word, valid, n=1, cutoff=0.6)
        return close[0] if close else None

    found = [(word, closest(word)) for word in given if word]
    found = [(word, match) for word, match in found if match]
    if not found:
        return ""
    if len(found) == 1:
        return f"did you mean {found[0][1]}?\n"
    return "did you mean " + ", ".join(f"{m} (for {w})" for w, m in found) + "?\n"


class _Help(argparse.Action):
    """-h/--help (a screen: :meth:`_Parser.format_brief_help`) or, with ``full``,
    --help-all (every option)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, full=False, help=None):
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, help=help)
        self.full = full

    def __call__(self, parser, namespace, values, option_string=None):
        print(parser.format_help() if self.full else parser.format_brief_help(), end="")
        parser.exit()


def _add_help_options(
    parser: argparse.ArgumentParser, full: str = "show every option, the output and exit"
) -> None:
    parser.add_argument("-h", "--help", action=_Help, help="show the essential options and exit")
    parser.add_argument("--help-all", action=_Help, full=True, help=full)


def _brief_sections(*required: tuple[str, str], common: tuple[tuple[str, str], ...]):
    return (
        (_REQUIRED_TITLE, required),
        ("common options (every option: --help-all)", common),
    )


SYNTHESIZE_BRIEF = (
    textwrap.fill(
        "Release differentially private synthetic counts of a table of strata: one row per "
        "stratum (key columns, a count of events, a population). --epsilon is the total "
        "privacy budget of the release; every synthetic set sums to the table's total, which "
        "is released exactly. Every option and the files written: --help-all. The guide, "
        "step by step: docs/release.md; the guarantee: docs/privacy.md.",
        78,
        break_on_hyphens=False,
    ),
    _brief_sections(
        ("--input", "the table, CSV or Parquet, a row per stratum"),
        ("--keys", "the key columns that identify a stratum"),
        ("--strata", "where the list of strata comes from (public)"),
        ("--dataset", "the people counted: the unit of the budget"),
        ("--epsilon", "TOTAL privacy budget of this release, > 0"),
        ("--mechanism", "md (multinomial-Dirichlet), pg or truncated"),
        ("--out", "the release folder to create (public)"),
        common=(
            ("--help", "show this screen and exit"),
            ("--help-all", "show every option and the files written"),
            ("--study", "take the table and its columns from a study"),
            ("--sets", "number of synthetic sets, sharing the budget"),
            ("--prior", "a file of public prior rates (pg, truncated)"),
            ("--sanitised-prior-by", "a noisy prior from the counts' group totals"),
            ("--attributes", "public columns to publish beside the keys"),
            ("--count-column", "column of counts (default: count)"),
            ("--population-column", "column of populations (default: population)"),
            ("--budget", "the dataset's budget, kept in the ledger"),
            ("--private-dir", "the private files' folder (never publish)"),
            ("--quiet", "no progress on stderr"),
        ),
    ),
    """\
example:
  dpcounts synthesize --input counts.csv --keys county age --strata strata.csv \\
      --dataset us-deaths-1999 --budget 2 --epsilon 1 --mechanism truncated \\
      --prior rates.csv --out release/
""",
)

CALIBRATE_BRIEF = (
    textwrap.fill(
        "Show what a release of this table would promise (the budget split, the guarantee, "
        "the calibration), before anything is drawn or spent. The options of dpcounts "
        "synthesize; every option: --help-all. The guide: docs/release.md.",
        78,
        break_on_hyphens=False,
    ),
    _brief_sections(
        *SYNTHESIZE_BRIEF[1][0][1][:3],
        *SYNTHESIZE_BRIEF[1][0][1][4:6],
        common=(
            ("--help", "show this screen and exit"),
            ("--help-all", "show every option"),
            ("--study", "take the table and its columns from a study"),
            ("--dataset", "the dataset whose budget it would spend"),
            ("--sets", "number of synthetic sets, sharing the budget"),
            ("--prior", "a file of public prior rates (pg, truncated)"),
            ("--hyperparameters", "also write the calibration of each stratum"),
        ),
    ),
    None,
)


def _synthesize_arguments(syn: argparse.ArgumentParser) -> None:
    """The options of ``dpcounts synthesize``."""
    from dpcounts.release.request import DEFAULTS

    _add_help_options(syn)
    required = syn.add_argument_group(_REQUIRED_TITLE)
    _add_strata_options(syn, required)
    io = syn.add_argument_group("output")
    required.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="release folder to create (public: publish it whole). Built in a hidden partial "
        "folder and renamed into place when complete",
    )
    io.add_argument(
        "--private-dir",
        type=Path,
        metavar="DIR",
        help="the steward's private folder to create (root key, original totals; never "
        "publish it). Default: a new folder in $XDG_DATA_HOME/dpcounts/private/ "
        "(~/.local/share/dpcounts/private/) named after --out and the manifest's "
        "seed_commitment. Refused if it is --out, inside it or around it; a folder beside "
        "--out is published with it whenever their parent folder is",
    )
    io.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it holds an earlier dpcounts release, and --private-dir if it "
        "holds an earlier private folder; other folders are never replaced (a default "
        "private folder is always new, earlier ones are kept)",
    )
    io.add_argument(
        "--sign-key",
        type=Path,
        metavar="PRIVATE",
        help="sign the release with this Ed25519 private key (dpcounts keygen makes one; "
        "never inside --out, readable by you alone): the release gets signature.json, and "
        "dpcounts verify --key PUBLIC shows that nothing changed since",
    )
    io.add_argument(
        "--format",
        dest="output_format",
        choices=("parquet", "csv"),
        default=DEFAULTS["output_format"],
        help="file format of the synthetic sets and the hyperparameters (default: %(default)s)",
    )

    _add_limit_options(syn)
    draw = syn.add_argument_group("drawing and accounting")
    draw.add_argument(
        "--insecure-test-seed",
        type=_seed,
        metavar="INT",
        help="draw from a seed you choose, for tests only: the manifest marks the release "
        "'reproducible test, not for publication' (a chosen seed can be guessed, and with "
        "it the data)",
    )
    _add_ledger_options(draw, required)
    draw.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal anyway)"
    )

    summary = syn.add_argument_group(
        "summary (summary.md and the utility report utility.md, in the private folder)"
    )
    summary.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="key column whose totals the summary plots, synthetic vs original (default: "
        "the first key); without a FIPS column, the utility report's areas",
    )
    summary.add_argument(
        "--fips-column",
        metavar="COLUMN",
        help="key column of 5-digit county FIPS codes for the map and the utility report's "
        "areas (default: fips, county_fips or county_code when present)",
    )
    summary.add_argument(
        "--county-frame",
        type=Path,
        metavar="FILE",
        help="county boundaries for the map (default: data/counties_1980.parquet in the current "
        "folder, the frame the project ships)",
    )


def _calibrate_arguments(cal: argparse.ArgumentParser) -> None:
    """The options of ``dpcounts calibrate``: those of synthesize that decide the release."""
    _add_help_options(cal)
    required = cal.add_argument_group(_REQUIRED_TITLE)
    _add_strata_options(cal, required)
    _add_limit_options(cal)
    _add_ledger_options(cal.add_argument_group("accounting (read, never written)"))
    cal.add_argument(
        "--hyperparameters",
        type=Path,
        metavar="FILE",
        help="also write the per-stratum calibration (keys, a, b, L, U) to FILE (.csv or "
        ".parquet); it is public, like the release's own hyperparameters",
    )


def _ledger_arguments(led: argparse.ArgumentParser) -> None:
    """The options of ``dpcounts ledger``."""
    led.add_argument("--ledger", type=Path, metavar="FILE", help="ledger file (default as above)")
    action = led.add_mutually_exclusive_group()
    action.add_argument(
        "--set-budget",
        nargs=2,
        metavar=("NAME", "EPS"),
        help="store EPS as the epsilon budget of dataset NAME: every later release under "
        "NAME is checked against it (a stored budget can be lowered, never raised)",
    )
    action.add_argument(
        "--rebuild",
        action="store_true",
        help="restore a deleted, cut or edited ledger from its own lines and the releases' "
        "private folders (the previous file is kept beside it)",
    )
    action.add_argument(
        "--dataset",
        metavar="NAME|ID",
        help="one dataset name, or one table's id (or its first 12 hex digits): its total and "
        "its releases (a table released under a name shows the name's)",
    )


def _verify_checks(full: bool) -> str:
    """The checks of ``dpcounts verify`` (:data:`dpcounts.verify.CHECKS`): their names
    by topic, or with ``full`` what each compares."""
    from dpcounts.verify import describe_checks

    more = "" if full else "; what each compares: --help-all"
    head = f"checks, by topic ({{file}}: a listed file{more}):"
    return f"\n{head}\n{describe_checks(full)}"


def _verify_arguments(ver: argparse.ArgumentParser) -> None:
    """The arguments of ``dpcounts verify``."""
    _add_help_options(ver, full="also show what each check compares, and exit")
    ver.add_argument("release", type=Path, metavar="RELEASE_DIR", help="the public release folder")
    ver.add_argument("--json", action="store_true", help="print the checks as JSON (for machines)")
    ver.add_argument(
        "--key",
        type=Path,
        metavar="PUBLIC",
        help="the steward's Ed25519 public key (obtained apart from the folder): check the "
        "folder's signature, that no public file or manifest field changed since it was signed",
    )


def _estimate_arguments(est: argparse.ArgumentParser) -> None:
    """The arguments of ``dpcounts estimate``."""
    est.add_argument("release", type=Path, metavar="RELEASE_DIR", help="the public release folder")
    est.add_argument("--by", nargs="+", default=[], metavar="KEY",
                     help="the key (or attribute) columns whose groups are estimated (strata "
                     "pooled); "
                     "required but for a disparity, where none gives one row")  # fmt: skip
    est.add_argument("--measure", choices=("rate", "age-adjusted", "disparity"),
                     default="rate",
                     help="rate (default): each group's crude rate (an SMR with expected "
                     "counts); age-adjusted: its directly age-adjusted rate (--age-column, "
                     "--standard); disparity: within each group, the rate of the --numerator "
                     "strata over that of the --denominator strata (age-adjusted with "
                     "--age-column), as a study's disparities")  # fmt: skip
    est.add_argument("--age-column", metavar="AGE",
                     help="the age key, its labels read as ages ('40-59', '85+', 'Under 40') "
                     "and matched to the standard's groups as a study's are")  # fmt: skip
    est.add_argument("--standard", default="us2000", metavar="NAME",
                     help="the standard population of an age-adjusted rate: us2000 (default, "
                     "the US 2000 standard, the one that ships) or a CSV file (age_start, "
                     "age_end, population)")  # fmt: skip
    for side in ("numerator", "denominator"):
        est.add_argument(f"--{side}", nargs="+", metavar="COLUMN=VALUE",
                         help=f"a disparity's {side}: the strata whose key (or attribute) "
                         "COLUMN takes VALUE "
                         "(repeat COLUMN=VALUE for several values or columns)")  # fmt: skip
    est.add_argument("--draws", type=int, default=20_000, metavar="N",
                     help="posterior, age-adjusted or disparity: the Monte Carlo draws "
                     "(default 20000: each tail's probability within about 0.0015)")  # fmt: skip
    est.add_argument("--seed", type=int, default=0,
                     help="posterior, age-adjusted or disparity: the draws' seed "
                     "(default 0)")  # fmt: skip
    est.add_argument("--level", type=float, default=0.9, help="the intervals' level (0.9)")
    est.add_argument("--method", choices=("posterior", "combining"), default="posterior",
                     help="posterior (default): the noise-aware posterior of each group's "
                     "count from the sets' likelihood under the published hyperparameters and "
                     "a public prior, conditioned on the public total; it covers where the "
                     "combining rules do not (docs/release.md). combining: the combining "
                     "rules for fully synthetic data (2 sets or more)")  # fmt: skip
    est.add_argument("--prior-shape", type=float, default=1.0, metavar="S",
                     help="posterior: the gamma shape of each stratum's prior rate, of mean "
                     "the published prior rate (md: the overall rate); its coefficient of "
                     "variation is 1/sqrt(S); at least 1 (default 1)")  # fmt: skip
    est.add_argument("--out", type=Path, metavar="FILE", help="a CSV file (default: stdout)")


def _filter_option(option: str, given) -> dict[str, list[str]] | None:
    """``COLUMN=VALUE ...`` as ``{column: [values]}`` (None when not given)."""
    if not given:
        return None
    out: dict[str, list[str]] = {}
    for item in given:
        column, equals, value = item.partition("=")
        if not (equals and column and value):
            raise ValueError(f"{option} {item!r}: expected COLUMN=VALUE, such as race=Black")
        out.setdefault(column, []).append(value)
    return out


def _estimate(args) -> int:
    from dpcounts.release.estimate import estimate, leaning_to_parity
    from dpcounts.verify import NotARelease

    try:
        sides = [_filter_option(f"--{side}", getattr(args, side))
                 for side in ("numerator", "denominator")]  # fmt: skip
        table = estimate(args.release, args.by, args.level, args.method, args.prior_shape,
                         args.measure, args.age_column, args.standard, *sides, args.draws,
                         args.seed)  # fmt: skip
    except (NotARelease, ValueError, OSError) as err:
        print(f"dpcounts estimate: error: {err}", file=sys.stderr)
        return 2
    text = table.to_csv(index=False, lineterminator="\n", float_format="%.6g")
    leaning = len(leaning_to_parity(table))
    if leaning:
        print(f"note: {leaning} of {len(table)} disparity intervals hold parity, and the "
              "release's prior does not tell their sides apart (column prior, within 1% of "
              "1): where the sets say little, the posterior leans both sides to the prior's "
              "rate, so these intervals may lean to parity; they are not evidence of no "
              "disparity (docs/analyse.md)", file=sys.stderr)  # fmt: skip
    if args.out is None:
        sys.stdout.write(text)
    else:
        from dpcounts.io import atomic_path

        with atomic_path(args.out) as tmp:
            tmp.write_text(text)
        also = "" if args.age_column is None else f" and the standard {args.standard}"
        words = (f"wrote {args.out}: {len(table)} {args.measure} rows of "
                 f"{', '.join(args.by) or 'the whole table'}, from {table['sets'].iloc[0]} "
                 f"synthetic sets of {args.release}{also} alone")  # fmt: skip
        print(words, file=sys.stderr)
    return 0


def _keygen_arguments(key: argparse.ArgumentParser) -> None:
    """The arguments of ``dpcounts keygen``."""
    key.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        required=True,
        help="folder for the key pair, kept apart from every release (made 0700 if new): "
        "dpcounts-signing.key (private, 0600) and dpcounts-signing.pub (public); an existing "
        "key is never replaced",
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: one function per command adds its arguments."""
    from dpcounts.release.request import DEFAULTS, NEIGHBOURS

    parser = _Parser(
        prog="dpcounts",
        description="Differentially private synthetic count data.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"dpcounts {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    neighbours = textwrap.fill(f"Unit of privacy: {NEIGHBOURS}", 88)
    _synthesize_arguments(
        commands.add_parser(
            "synthesize",
            help="release synthetic counts of a table of strata",
            usage=SYNTHESIZE_USAGE,
            description=DESCRIPTION.format(neighbours=neighbours, delta=DEFAULTS["delta"]),
            epilog=EPILOG,
            brief=SYNTHESIZE_BRIEF,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
            add_help=False,
        )
    )
    _calibrate_arguments(
        commands.add_parser(
            "calibrate",
            help="show what a release would promise, before drawing anything",
            usage=CALIBRATE_USAGE,
            description=CALIBRATE_DESCRIPTION,
            brief=CALIBRATE_BRIEF,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
            add_help=False,
        )
    )
    _ledger_arguments(
        commands.add_parser(
            "ledger",
            help="show the privacy budget spent per dataset and table of strata",
            description="Show the steward's ledger: total epsilon and delta spent per dataset "
            "name (--dataset of synthesize), with each of its tables, and per table of strata "
            "released without a name (identified by its keys and populations), and its "
            "releases.",
            allow_abbrev=False,
        )
    )
    _verify_arguments(
        commands.add_parser(
            "verify",
            help="check a published release against its manifest, as a reviewer",
            description=VERIFY_DESCRIPTION,
            appendix=_verify_checks,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
            add_help=False,
        )
    )
    _estimate_arguments(
        commands.add_parser(
            "estimate",
            help="an analyst's group rates and intervals from a release folder alone",
            description="Estimate the rate, age-adjusted rate or disparity (--measure) of "
            "each group of a release's strata, with an interval from its synthetic sets: by "
            "the noise-aware posterior (default; the sets' likelihood under the published "
            "hyperparameters, a public prior, the public total) or by the combining rules for "
            "fully synthetic data (Raghunathan, Reiter and Rubin 2003). Reads nothing but the "
            "public folder (and, for an age-adjusted rate, the standard population), and "
            "refuses one that dpcounts verify rejects. Writes a tidy table (the group's keys, "
            "measure, estimate, lower, upper, variance, df, adjusted, method, sets) to --out "
            "or stdout.",
            allow_abbrev=False,
        )
    )
    _keygen_arguments(
        commands.add_parser(
            "keygen",
            help="make the steward's key pair for signing releases",
            description="Make an Ed25519 key pair for signing releases (dpcounts synthesize "
            "--sign-key PRIVATE; reviewers check with dpcounts verify --key PUBLIC). Keep the "
            "private key apart from every release and back it up; publish the public key apart "
            "from the releases (a web page, a paper's supplement).",
            allow_abbrev=False,
        )
    )
    return parser


def _command_parser(parser: argparse.ArgumentParser, command: str) -> _Parser:
    return parser._subparsers._group_actions[0].choices[command]


def _check_required(parser: _Parser, args) -> None:
    """Every option of :data:`REQUIRED` missing from ``args``, named in one message (a
    usage error); a missing --strata or --dataset alone gets its explanation instead
    (raised as :class:`_Usage`)."""
    from dpcounts.release.request import DATASET_REQUIRED, STRATA_REQUIRED

    missing = [
        option
        for option, name in REQUIRED.get(args.command, ())
        if getattr(args, name) is None and not (option in _STUDY_DECIDES and args.study)
    ]
    explained = {"--strata": STRATA_REQUIRED, "--dataset": DATASET_REQUIRED}
    if missing == ["--dataset"]:  # said by _synthesize, after the other options' checks
        return
    if missing and all(option in explained for option in missing):
        also = [f"also required: {explained[o].split(' is required')[0]}" for o in missing[1:]]
        raise _Usage("\n".join([explained[missing[0]], *also]))
    if missing:
        shown = [
            f"{o} (or --study CONFIG:NAME)" if o == "--keys" and "--input" in missing else o
            for o in missing
        ]
        parser.error(f"the following arguments are required: {', '.join(shown)}")


def _synthesize(args) -> int:
    from dpcounts.release import ReleaseError, build_release
    from dpcounts.release.folder import PROVENANCE

    try:
        request = _request(
            args,
            out=args.out,
            test_seed=args.insecure_test_seed,
            budget=args.budget,
            dataset=args.dataset,
            ledger=args.ledger,
            new_dataset=args.new_dataset,
            max_memory=int(args.max_memory * 2**30),
            max_minutes=args.max_minutes,
            group_by=args.group_by,
            fips_column=args.fips_column,
            county_frame=args.county_frame,
            output_format=args.output_format,
            private_dir=args.private_dir,
            force=args.force,
            sign_key=args.sign_key,
            progress=False if args.quiet else None,
        )
    except _Usage as err:
        print(f"dpcounts synthesize: error: {err}", file=sys.stderr)
        return 2
    try:  # a missing --dataset is refused by the plan (DATASET_REQUIRED), as any option
        info = build_release(request)
    except ReleaseError as err:
        print(f"dpcounts synthesize: error: {err}", file=sys.stderr)
        return 2
    budget = info["budget"]
    private = request.private_folder(info["seed_commitment"])
    print(
        f"wrote {args.out}: {info['sets']} synthetic set(s) of {info['strata']} strata "
        f"(total {info['total']}), {info['mechanism']} / {info['method']} "
        f"({info['guarantee']['status']}), epsilon {budget['epsilon_total']:g} in total "
        f"({budget['epsilon_per_set']:g} per set), delta {budget['delta_total']:g}\n"
        f"private files (root key, original totals; never publish them): {private}\n"
        f"what the sets kept, against synthesis with no privacy (private): "
        f"{private / 'utility.md'}"
    )
    provenance = json.loads((private / PROVENANCE).read_text())
    if (provenance.get("ledger") or {}).get("budget") is None:
        print(
            f"dataset {request.dataset} has no stored budget: its releases add up without a "
            f"limit (store one: dpcounts ledger --set-budget {request.dataset} EPS)"
        )
    rounding = provenance["rounding"]
    if rounding["strata_rounded"]:
        print(
            f"counts (private: depends on the confidential counts, do not publish this line): "
            f"--rounding nearest rounded {rounding['strata_rounded']} fractional count(s) half "
            f"to even: total {rounding['total_before']} before, {rounding['total_after']} after"
        )
    beside = args.out.parent / f"{args.out.name}.private"  # where dpcounts once wrote them
    if (beside / PROVENANCE).is_file() and beside.resolve() != private.resolve():
        print(
            f"dpcounts synthesize: warning: {beside}, beside the release, is an earlier "
            "release's private folder (dpcounts once wrote them there); whoever publishes the "
            "folder that holds the release publishes it too: move it elsewhere",
            file=sys.stderr,
        )
    return 0


def _request(args, **extra):
    from dpcounts.release import ReleaseRequest
    from dpcounts.release.request import DEFAULTS, STRATA_REQUIRED, STRATA_WORDS

    if args.strata is None:
        raise _Usage(STRATA_REQUIRED)
    word = args.strata.strip().lower()
    if args.strata not in STRATA_WORDS and word in STRATA_WORDS and not Path(args.strata).exists():
        raise _Usage(
            f"--strata {args.strata!r}: no such file; did you mean --strata {word}? (the words "
            f"are {' and '.join(STRATA_WORDS)}, in lower case; anything else names a file)"
        )
    if args.prior_rate_by is not None:
        raise _Usage(
            "--prior-rate-by was removed: it published the counts' own group totals without "
            "noise. Use --sanitised-prior-by COLUMN... (noisy totals, budget --prior-epsilon) "
            "or --prior FILE of public rates"
        )
    expected = getattr(args, "expected_column", None)
    if expected is not None and args.population_column != DEFAULTS["population_column"]:
        raise _Usage("give --expected-column or --population-column, not both")
    table = dict(
        input=args.input,
        keys=None if args.keys is None else tuple(args.keys),
        tail=args.tail,
        inflation=args.inflation,
        wonder=args.wonder,
        count_column=args.count_column,
        population_column=args.population_column if expected is None else expected,
        denominator=None if expected is None else "expected",
        population_keys=None if args.population_keys is None else tuple(args.population_keys),
        attributes=None if args.attributes is None else tuple(args.attributes),
        prior_rate_column=args.prior_rate_column,
        prior_file=args.prior_file,
        sanitised_prior_by=(
            None if args.sanitised_prior_by is None else tuple(args.sanitised_prior_by)
        ),
        prior_epsilon=args.prior_epsilon,
        prior_source=args.prior_source,
        rounding=args.rounding,
    )
    if getattr(args, "release_without_guide", False) and args.study is None:
        raise _Usage("--release-without-guide applies to --study CONFIG:NAME only")
    if args.study is None:
        table["attributes"] = table["attributes"] or ()
    if args.study is not None:
        table = _from_study(args, table)
    elif table["denominator"] is None:
        table["denominator"] = "population"
    elif args.input is None or args.keys is None:
        missing = [o for o, v in (("--input", args.input), ("--keys", args.keys)) if v is None]
        raise _Usage(f"the following arguments are required: {', '.join(missing)} (or --study)")
    return ReleaseRequest(
        epsilon=args.epsilon,
        mechanism=args.mechanism,
        method=args.method,
        allow_nominal=args.allow_nominal,
        sets=args.sets,
        delta=args.delta,
        prior_is_public_i_am_sure=args.prior_is_public_i_am_sure,
        attributes_are_public_i_am_sure=args.attributes_are_public_i_am_sure,
        strata=args.strata if args.strata in STRATA_WORDS else Path(args.strata),
        **table,
        **({"dataset": args.dataset} | extra),
    )


def _from_study(args, given: dict) -> dict:
    """The table's fields from ``--study CONFIG:NAME`` (:mod:`dpcounts.release.study_source`);
    an option the study decides, given too, is a usage error naming its config key."""
    from dpcounts.release.request import DEFAULTS
    from dpcounts.release.study_source import DECIDED, StudySourceError, load_study

    def option(field):
        names = {"prior_file": "prior", "input": "input", "denominator": "expected_column"}
        return "--" + names.get(field, field).replace("_", "-")

    twice = [
        f"{option(field)} (studies.NAME.{DECIDED[field]})"
        for field, value in given.items()
        if value is not None and value != DEFAULTS.get(field) and value is not False
    ]
    if twice:
        raise _Usage(f"--study decides {', '.join(twice)}; leave them out or change the study")
    try:
        study = load_study(args.study)
        study.arm(args.mechanism, args.method)  # the guide is the plan's (plan_release)
    except StudySourceError as err:
        raise _Usage(str(err)) from None
    return study.request_fields(args.mechanism) | {
        "study": study,
        "release_without_guide": args.release_without_guide,
    }


class _Usage(Exception):
    """A removed or misused option: exit 2 with the message."""


def _calibrate(args) -> int:
    from dpcounts.release import ReleaseError
    from dpcounts.release.preview import format_preview, preview

    try:
        request = _request(
            args,
            out=Path("unused"),
            budget=args.budget,
            dataset=args.dataset,
            ledger=args.ledger,
            new_dataset=args.new_dataset,
            max_memory=int(args.max_memory * 2**30),
            max_minutes=args.max_minutes,
        )
        print(format_preview(preview(request, hyperparameters=args.hyperparameters)))
    except (ReleaseError, _Usage) as err:
        print(f"dpcounts calibrate: error: {err}", file=sys.stderr)
        return 2
    return 0


def _verify(args) -> int:
    from dpcounts import verify

    verify.return_freed_memory()
    try:
        key = None
        if args.key is not None:
            from dpcounts.release.signature import load_public_key

            key = load_public_key(args.key)
        checks, manifest = verify.report(args.release, key)
    except (verify.NotARelease, ValueError) as err:  # a SignatureError: the key is unusable
        print(f"dpcounts verify: error: {err}", file=sys.stderr)
        return 2
    show = verify.as_json if args.json else verify.format_checks
    print(show(checks, args.release, manifest))
    return 1 if verify.failed(checks) else 0


def _keygen(args) -> int:
    from dpcounts.release.signature import SignatureError, key_id, load_public_key, make_keys

    try:
        private, public = make_keys(args.out)
    except (SignatureError, OSError) as err:
        print(f"dpcounts keygen: error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {private} (private: sign releases with dpcounts synthesize --sign-key "
        f"{private}; never publish it) and {public} (public, key "
        f"{key_id(load_public_key(public).raw)}: hand it to reviewers, dpcounts verify --key "
        f"{public})"
    )
    return 0


def _ledger(args) -> int:
    from dpcounts.ledger import Ledger, LedgerError, default_ledger_path, format_summary

    ledger = Ledger(args.ledger or default_ledger_path())
    try:
        if args.set_budget is not None:
            name, text = args.set_budget
            try:
                budget = _positive_float(text)
            except argparse.ArgumentTypeError as err:
                raise ValueError(f"--set-budget {name} EPS: {err}") from None
            print(ledger.set_budget(name, budget))
        elif args.rebuild:
            print(ledger.rebuild())
        else:
            print(format_summary(ledger, args.dataset))
    except (LedgerError, ValueError) as err:
        print(f"dpcounts ledger: error: {err}", file=sys.stderr)
        return 2
    return 0


class _Terminated(Exception):
    """SIGTERM, turned into an exception so that clean-up code runs."""


def _on_sigterm(signum, frame):
    raise _Terminated


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)  # exits 2 with a usage message on bad options
    command = _command_parser(parser, args.command)
    if unknown:  # the command's usage and "did you mean", not the top level's
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        _check_required(command, args)
    except _Usage as err:
        print(f"dpcounts {args.command}: error: {err}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        handler = {
            "synthesize": _synthesize,
            "calibrate": _calibrate,
            "ledger": _ledger,
            "verify": _verify,
            "keygen": _keygen,
            "estimate": _estimate,
        }
        return handler[args.command](args)
    except KeyboardInterrupt:
        print(f"dpcounts {args.command}: interrupted; nothing was published", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"dpcounts {args.command}: terminated; nothing was published", file=sys.stderr)
        return 143
    except BrokenPipeError:  # the reader went away (dpcounts ledger | head): nothing to add
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
