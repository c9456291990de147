"""A newcomer's first contact with ``dpcounts`` (issue #35 item 3): short errors that say
what to type, required options shown as required, a --help that fits a screen, a hint for
a semicolon CSV or a spreadsheet, a word before the first compile, and a utility report
in a reader's numbers and the keys' order."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from dpcounts.cli import build_parser

DPCOUNTS = Path(sys.executable).parent / "dpcounts"

TABLE = pd.DataFrame(
    {
        "region": ["north"] * 3 + ["south"] * 3,
        "age": ["young", "middle", "old"] * 2,
        "count": [3, 12, 40, 5, 9, 31],
        "population": [4000, 3000, 2000, 5000, 2500, 1500],
        "prior_rate": [0.0012, 0.003, 0.025] * 2,  # public rates, not the table's own
    }
)
COLUMNS = ("--keys", "region", "age", "--strata", "cross-product")
#: Where the prior-rate column comes from (every prior the steward brings is declared).
PRIOR = ("--prior-source", "national rates by age band, published 1999 (test)")
REQUIRED = ("--input", "--keys", "--strata", "--dataset", "--epsilon", "--mechanism", "--out")


def dpcounts(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed command, as a newcomer meets it: 80 columns, not a terminal."""
    environment = os.environ | {"COLUMNS": "80"} | (env or {})
    return subprocess.run(
        [str(DPCOUNTS), *args], cwd=cwd, env=environment, capture_output=True, text=True
    )


def usage_lines(stderr: str) -> list[str]:
    """The lines of an error above its message."""
    lines = stderr.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if ": error: " in line)]


# --- errors: the command's usage in at most two lines, the message, "did you mean" -----------
@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "message", "suggestion"),
    [
        (["synthesize", "--epsillon", "1"], "unrecognized arguments: --epsillon 1",
         "did you mean --epsilon?"),
        (["calibrate", "--mechansim", "md"], "unrecognized arguments: --mechansim md",
         "did you mean --mechanism?"),
        (["synthesize", "--epsilon", "-1"], "argument --epsilon: expected a finite number > 0",
         None),
        (["synthesize", "--sets", "0"], "argument --sets: expected a whole number >= 1", None),
        (["synthesize", "--mechanism", "trunc"], "invalid choice: 'trunc'",
         "did you mean truncated?"),
        (["synthesise"], "invalid choice: 'synthesise'", "did you mean synthesize?"),
        # a prefix of the option meant, each unknown option answered
        (["synthesize", "--count", "deaths", "--prior-rate", "0.1"],
         "unrecognized arguments: --count deaths --prior-rate 0.1",
         "did you mean --count-column or --county-frame (for --count), --prior-rate-column "
         "(for --prior-rate)?"),
    ],
)  # fmt: skip
def test_an_error_is_two_lines_of_usage_the_message_and_a_suggestion(
    tmp_path, args, message, suggestion
):
    result = dpcounts(*args, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    usage = usage_lines(result.stderr)
    assert 1 <= len(usage) <= 2 and usage[0].startswith("usage: dpcounts"), result.stderr
    command = args[0] if args[0] != "synthesise" else None
    if command:  # the command's usage, not the top level's
        assert usage[0].startswith(f"usage: dpcounts {command} ")
    assert message in result.stderr
    rest = result.stderr.splitlines()[len(usage) + 1 :]
    assert rest == ([suggestion] if suggestion else []), result.stderr
    assert all(len(line) <= 80 for line in usage)


@pytest.mark.process
@pytest.mark.parametrize("command", ["synthesize", "calibrate"])
def test_a_bare_command_names_every_required_option_and_its_usage_shows_them(tmp_path, command):
    result = dpcounts(command, cwd=tmp_path)
    assert result.returncode == 2
    required = [o for o in REQUIRED if command == "synthesize" or o not in ("--dataset", "--out")]
    message = result.stderr.split("error: the following arguments are required: ", 1)[1]
    named = re.findall(r"--[a-z-]+", message.replace("--study CONFIG:NAME", ""))
    assert named == required, message
    usage = " ".join(usage_lines(result.stderr))
    for option in required:  # shown required: never in brackets
        assert option in usage and f"[{option}" not in usage
    assert all(len(line) <= 80 for line in usage_lines(result.stderr))


def test_missing_strata_and_dataset_explain_why_there_is_no_default(tmp_path):
    TABLE.to_csv(tmp_path / "t.csv", index=False)
    args = ["synthesize", "--input", str(tmp_path / "t.csv"), "--keys", "region", "age",
            "--epsilon", "1", "--mechanism", "md", "--out", str(tmp_path / "o")]  # fmt: skip
    code, _, err = run_cli(*args)
    assert code == 2 and err.startswith("dpcounts synthesize: error: --strata is required")
    assert err.rstrip().endswith("also required: --dataset NAME")


# --- help: a screen, and every option with --help-all ------------------------------------
@pytest.mark.process
@pytest.mark.parametrize("command", ["synthesize", "calibrate"])
def test_help_fits_a_screen_and_help_all_shows_every_option(tmp_path, command):
    short = dpcounts(command, "--help", cwd=tmp_path)
    assert short.returncode == 0
    lines = short.stdout.splitlines()
    assert len(lines) <= 50 and max(map(len, lines)) <= 80, short.stdout
    assert "required arguments" in short.stdout and "--help-all" in short.stdout
    block = short.stdout.split("required arguments", 1)[1].split("\n\n", 1)[0]
    for option in REQUIRED:
        if command == "synthesize" or option not in ("--dataset", "--out"):
            assert f"\n  {option} " in block, option
    assert "docs/release.md" in short.stdout

    full = dpcounts(command, "--help-all", cwd=tmp_path).stdout
    parser = build_parser()._subparsers._group_actions[0].choices[command]
    shown = [o for a in parser._actions if a.help != "==SUPPRESS==" for o in a.option_strings]
    assert all(option in full for option in shown)
    assert len(full.splitlines()) > 2 * len(lines)
    assert max(map(len, full.splitlines())) <= 100  # no paragraph left unwrapped


@pytest.mark.slow
# --- the input's format: a semicolon CSV is read, a spreadsheet is refused with a hint ------
@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_a_csv_with_another_delimiter_is_read_with_it(tmp_path, delimiter):
    TABLE.to_csv(tmp_path / "t.csv", index=False, sep=delimiter)
    TABLE.to_csv(tmp_path / "comma.csv", index=False)
    common = [*COLUMNS, "--epsilon", "1", "--mechanism", "truncated", *PRIOR]
    code, out, err = run_cli("calibrate", "--input", str(tmp_path / "t.csv"), *common)
    assert code == 0, err
    _, expected, _ = run_cli("calibrate", "--input", str(tmp_path / "comma.csv"), *common)
    assert out.replace(str(tmp_path / "t.csv"), "X") == expected.replace(
        str(tmp_path / "comma.csv"), "X"
    )


def test_a_csv_delimited_by_an_unsniffable_semicolon_is_refused_naming_it(tmp_path):
    from dpcounts.data.validation import read_table

    path = tmp_path / "t.csv"
    path.write_text("region;age;count\n")  # a header alone: nothing to sniff but one line
    try:
        frame = read_table(path)
    except ValueError as err:
        assert "';'" in str(err) and "comma-delimited" in str(err)
    else:  # read with the semicolon, sniffed
        assert list(frame.columns) == ["region", "age", "count"]


@pytest.mark.parametrize("name", ["t.xlsx", "t.xls", "t.ods", "t.csv"])
def test_a_spreadsheet_is_refused_with_save_as_csv(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04" + bytes(100))  # a zip, as .xlsx and .ods are
    code, _, err = run_cli(
        "calibrate", "--input", str(path), *COLUMNS, "--epsilon", "1", "--mechanism", "md"
    )
    assert code == 2 and "Traceback" not in err
    assert "spreadsheet" in err and "save the sheet as CSV" in err and "Parquet" in err


# --- the first compile is announced, and only the first ------------------------------------
@pytest.mark.process
def test_the_first_compile_is_announced_and_later_runs_are_silent(tmp_path):
    """A fresh numba cache: the first release says it compiles (not on a terminal, so no
    progress bar would say anything for ~30 s); the second, with the cache, says nothing."""
    from dpcounts.compile_cache import FIRST_COMPILE

    table = pd.DataFrame(
        {
            "age": ["0-4", "5-9", "10-14", "85+"] * 2,
            "sex": ["f"] * 4 + ["m"] * 4,
            "count": [30, 12, 9, 400, 35, 14, 10, 380],
            "population": [50_000, 52_000, 51_000, 20_000, 52_000, 54_000, 53_000, 14_000],
        }
    )
    table.to_csv(tmp_path / "t.csv", index=False)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    args = ["synthesize", "--input", "t.csv", "--keys", "age", "sex", "--strata", "input",
            "--dataset", "first-contact", "--epsilon", "1", "--mechanism", "md",
            "--insecure-test-seed", "7", "--private-dir"]  # fmt: skip
    first = dpcounts(*args, "p1", "--out", "r1", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines()[0] == FIRST_COMPILE
    second = dpcounts(*args, "p2", "--out", "r2", cwd=tmp_path, env=env)
    assert second.returncode == 0 and FIRST_COMPILE not in second.stderr, second.stderr

    utility = (tmp_path / "p2" / "utility.md").read_text()
    assert not re.search(r"\de[+-]\d", utility), "a number in exponent form"
    ages = re.findall(r"^\| (0-4|5-9|10-14|85\+) \|", utility, flags=re.MULTILINE)
    assert ages == ["0-4", "5-9", "10-14", "85+"]


# --- utility.md's numbers --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "digits", "shown"),
    [(170.4, 2, "170"), (1.7e2, 3, "170"), (12_345.6, 3, "12,300"), (1_000_000, 3, "1,000,000"),
     (0.25, 3, "0.25"), (0.0012345, 3, "0.00123"), (556, 3, "556"), (0, 3, "0")],
)  # fmt: skip
def test_utility_numbers_are_written_as_a_reader_writes_them(value, digits, shown):
    from dpcounts.release.report.utility import _human

    assert _human(value, digits) == shown


@pytest.mark.slow
def test_a_release_under_no_stored_budget_says_so_in_one_line(tmp_path):
    TABLE.to_csv(tmp_path / "t.csv", index=False)
    release = ("synthesize", "--input", str(tmp_path / "t.csv"), *COLUMNS, "--epsilon", "1",
               "--mechanism", "pg", *PRIOR, "--dataset", "towns")  # fmt: skip
    code, stdout, stderr = run_cli(*release, "--out", str(tmp_path / "a"), "--quiet")
    assert code == 0, stderr
    (line,) = [line for line in stdout.splitlines() if "no stored budget" in line]
    assert "dataset towns" in line and "--set-budget towns" in line
    code, stdout, stderr = run_cli(*release, "--out", str(tmp_path / "b"), "--budget", "3",
                                   "--quiet")  # fmt: skip
    assert code == 0 and "no stored budget" not in stdout
