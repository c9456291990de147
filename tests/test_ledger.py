"""dpcounts.ledger: the steward's privacy-budget ledger (paths, spending, corruption, races)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

import dpcounts
from dpcounts.ledger import (
    Charge,
    Entry,
    Ledger,
    LedgerError,
    check_name,
    default_ledger_path,
    format_summary,
)

A = hashlib.sha256(b"dataset a").hexdigest()
B = hashlib.sha256(b"dataset b").hexdigest()
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def _line(dataset: str = A, epsilon: float = 1.0, delta: float = 0.0, **extra) -> str:
    record = {"dataset": dataset, "epsilon": epsilon, "delta": delta}
    record["time"] = "2024-05-01T12:00:00Z"
    record.update(extra)
    return json.dumps(record)


# -- default path ------------------------------------------------------------------------


def test_default_path_honours_dpcounts_ledger(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("DPCOUNTS_LEDGER", str(tmp_path / "mine.jsonl"))
    assert default_ledger_path() == tmp_path / "mine.jsonl"


def test_default_path_uses_xdg_data_home(monkeypatch, tmp_path):
    monkeypatch.delenv("DPCOUNTS_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "dpcounts" / "ledger.jsonl"


@pytest.mark.parametrize("xdg", [None, ""])
def test_default_path_falls_back_to_local_share(monkeypatch, tmp_path, xdg):
    monkeypatch.delenv("DPCOUNTS_LEDGER", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_ledger_path() == tmp_path / ".local" / "share" / "dpcounts" / "ledger.jsonl"


# -- spending ----------------------------------------------------------------------------


def test_spend_entries_spent_round_trip(tmp_path):
    ledger = Ledger(tmp_path / "deep" / "er" / "ledger.jsonl")
    assert ledger.entries() == [] and ledger.spent(A) == (0.0, 0.0, 0)
    first = ledger.spend(Charge(A, 0.5, 1e-6), label="a.csv", release="out/a1", time=T0)
    other = ledger.spend(Charge(B, 2.0, 0.0), label="b.csv")
    second = ledger.spend(
        Charge(A.upper(), 0.25, 0.0),
        release="out/a2",
        time=datetime(2024, 5, 2, 14, 0, 0, 987).replace(tzinfo=timezone(timedelta(hours=2))),
    )

    assert first == Entry(A, 0.5, 1e-6, T0, "a.csv", "out/a1", dpcounts.__version__)
    assert second.dataset == A and second.time == datetime(2024, 5, 2, 12, 0, 0, tzinfo=UTC)
    assert second.label is None and second.short == A[:12]
    assert abs(other.time - datetime.now(UTC)) < timedelta(minutes=1)

    assert ledger.entries() == [first, other, second]
    assert Ledger(ledger.path).entries(A) == [first, second]
    assert ledger.entries(B) == [other]
    assert ledger.spent(A) == (0.75, 1e-6, 2)
    assert ledger.spent(B) == (2.0, 0.0, 1)

    lines = ledger.path.read_text().splitlines()
    assert len(lines) == 3
    record = json.loads(lines[0])
    assert len(record.pop("id")) == 32  # what the release's private folder names
    assert record.pop("prev") == hashlib.sha256(b"").hexdigest()  # the chain: first line
    assert record.pop("aliases") == [] and record.pop("private") is None
    assert record == {
        "dataset": A,
        "table": A,  # a release without a dataset name is counted under its table
        "label": "a.csv",
        "epsilon": 0.5,
        "delta": 1e-6,
        "release": "out/a1",
        "time": "2024-05-01T12:00:00Z",
        "version": dpcounts.__version__,
        "guarantee": None,
    }


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_new_ledger_file_is_private(tmp_path, umask):
    old = os.umask(umask)
    try:
        ledger = Ledger(tmp_path / "sub" / "ledger.jsonl")
        ledger.spend(Charge(A, 1.0, 0.0))
    finally:
        os.umask(old)
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o600


def test_budget_refusal_names_dataset_spending_budget_and_request(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 2.0, 1e-7, budget=5.0), label="deaths.csv")
    ledger.spend(Charge(A, 2.5, 0.0, budget=5.0), label="deaths.csv")
    ledger.spend(Charge(B, 100.0, 0.0))  # another dataset's spending does not count
    before = ledger.path.read_bytes()

    with pytest.raises(LedgerError) as info:
        ledger.spend(Charge(A, 1.0, 0.0, budget=5.0))
    message = str(info.value)
    assert "deaths.csv" in message and A[:12] in message and A[:13] not in message
    assert "2 releases" in message
    assert "epsilon = 4.5" in message  # spent
    assert "budget epsilon = 5" in message
    assert "asks for epsilon = 1" in message
    assert "remaining: 0.5" in message
    assert ledger.path.read_bytes() == before  # nothing recorded

    ledger.spend(Charge(A, 0.5, 0.0, budget=5.0))  # exactly up to the budget is allowed
    assert ledger.spent(A)[0] == 5.0
    with pytest.raises(LedgerError, match="3 releases"):
        ledger.spend(Charge(A, 1e-9, 0.0, budget=5.0))  # the tolerance is for rounding only


def test_budget_tolerates_float_rounding_only(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 0.1, 0.0, budget=0.3))
    ledger.spend(Charge(A, 0.2, 0.0, budget=0.3))  # 0.1 + 0.2 == 0.30000000000000004
    with pytest.raises(LedgerError, match="unlabelled"):
        ledger.spend(Charge(A, 1e-10, 0.0, budget=0.3))
    with pytest.raises(LedgerError, match="0 releases"):
        ledger.spend(Charge(B, 0.4, 0.0, budget=0.3))  # a single request over the budget
    assert ledger.spent(A)[2] == 2 and ledger.entries(B) == []


@pytest.mark.parametrize("epsilon", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, True, "1"])
def test_invalid_epsilon_is_refused_by_value(tmp_path, epsilon):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match="epsilon") as info:
        ledger.spend(Charge(A, epsilon, 0.0))
    assert repr(epsilon) in str(info.value) or repr(float(epsilon)) in str(info.value)
    assert not ledger.path.exists()


@pytest.mark.parametrize("delta", [-1e-9, 1.0, 1.5, math.nan, math.inf, None])
def test_invalid_delta_is_refused_by_value(tmp_path, delta):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match="delta") as info:
        ledger.spend(Charge(A, 1.0, delta))
    assert repr(delta) in str(info.value)
    assert not ledger.path.exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": "deaths.csv"}, "SHA-256"),
        ({"dataset": A[:-1]}, "SHA-256"),
        ({"budget": 0.0}, "budget"),
        ({"budget": math.inf}, "budget"),
        ({"time": datetime(2024, 5, 1, 12)}, "timezone"),
        ({"label": 3}, "label"),
    ],
)
def test_other_invalid_arguments(tmp_path, kwargs, match):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    args = {"dataset": A, "epsilon": 1.0, "delta": 0.0, **kwargs}
    record = {k: args.pop(k) for k in ("time", "label") if k in args}
    with pytest.raises(ValueError, match=match):
        ledger.spend(Charge(**args), **record)
    assert not ledger.path.exists()


# -- damaged ledgers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ('{"dataset": "' + A + '", "epsilon": 1.0, "del', "JSON is invalid"),
        ("[1, 2]", "expected a JSON object"),
        (_line(epsilon="one"), "epsilon must be a finite number"),
        (_line(epsilon=-1.0), "expected epsilon > 0"),
        (_line(delta=1.0), "expected delta in [0, 1)"),
        (_line(dataset="deaths.csv"), "SHA-256"),
        (_line(time="yesterday"), "ISO-8601"),
        (_line(time="2024-05-01T12:00:00"), "UTC offset"),
        (_line(label=7), "label"),
        (json.dumps({"dataset": A, "delta": 0.0, "time": "2024-05-01T12:00:00Z"}), "epsilon"),
        (b"\xff\xfe not text", "utf-8"),
    ],
)
def test_corrupt_line_is_reported_with_file_and_line(tmp_path, bad, expected):
    path = tmp_path / "ledger.jsonl"
    bad = bad if isinstance(bad, bytes) else bad.encode()
    path.write_bytes(f"{_line()}\n\n".encode() + bad + f"\n{_line(B)}\n".encode())
    ledger = Ledger(path)
    for call in (ledger.entries, lambda: ledger.spent(B), lambda: format_summary(ledger)):
        with pytest.raises(LedgerError) as info:
            call()
        message = str(info.value)
        assert f"{path}, line 3:" in message
        assert expected in message
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="line 3"):
        ledger.spend(Charge(B, 1.0, 0.0))  # no spending on top of a damaged ledger
    assert path.read_bytes() == before


@pytest.mark.parametrize("cut", [10, len(_line()) - 1, len(_line())])
def test_truncated_last_line_is_reported_not_dropped(tmp_path, cut):
    path = tmp_path / "ledger.jsonl"
    path.write_text(_line() + "\n" + _line(B) + "\n" + _line(epsilon=2.0)[:cut])
    ledger = Ledger(path)
    with pytest.raises(LedgerError) as info:
        ledger.spent(A)
    message = str(info.value)
    assert f"{path}, line 3:" in message and "incomplete last line" in message
    assert "Expected one complete JSON object per line" in message
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="line 3"):
        ledger.spend(Charge(A, 1.0, 0.0))
    assert path.read_bytes() == before

    path.write_text(path.read_text()[: -cut or None] + _line(epsilon=2.0) + "\n")  # repaired
    assert ledger.spent(A) == (3.0, 0.0, 2)


# -- concurrency -------------------------------------------------------------------------

_WORKER = """
import sys, time
from pathlib import Path
from dpcounts.ledger import Charge, Ledger, LedgerError

path, dataset, table, worker, n, epsilon, budget, barrier = sys.argv[1:]
budget = None if budget == "none" else float(budget)
table = None if table == "-" else table
barrier = Path(barrier)
(barrier / f"ready-{worker}").touch()
while not (barrier / "go").exists():
    time.sleep(0.001)
ledger = Ledger(path)
ok = 0
for i in range(int(n)):
    try:
        ledger.spend(Charge(dataset, float(epsilon), 1e-9, table=table, budget=budget),
                     release=f"{worker}-{i}")
        ok += 1
    except LedgerError:
        pass
print(ok)
"""


def _race(
    tmp_path: Path, workers: int, spends: int, epsilon, budget=None, dataset=None, table=None
) -> list[int]:
    """Start the workers together; return how many spends each one had accepted.
    ``dataset(w)`` and ``table(w)`` give worker w's budget key and table (default: A, none)."""
    dataset = dataset or (lambda w: A)
    table = table or (lambda w: None)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    path = tmp_path / "ledger.jsonl"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(path),
                dataset(w),
                table(w) or "-",
                str(w),
                str(spends),
                str(epsilon(w)),
                "none" if budget is None else str(budget),
                str(barrier),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < workers and time.monotonic() < deadline:
        time.sleep(0.01)
    (barrier / "go").touch()
    accepted = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        accepted.append(int(out))
    return accepted


@pytest.mark.process
def test_concurrent_spends_lose_no_entry(tmp_path):
    def epsilon(w):
        return 0.1 * (w + 1)

    accepted = _race(tmp_path, workers=8, spends=20, epsilon=epsilon)
    assert accepted == [20] * 8
    ledger = Ledger(tmp_path / "ledger.jsonl")
    entries = ledger.entries()
    assert len(entries) == 160
    assert sorted(e.release for e in entries) == sorted(
        f"{w}-{i}" for w in range(8) for i in range(20)
    )
    expected = math.fsum(epsilon(w) for w in range(8) for _ in range(20))
    assert ledger.spent(A) == (expected, math.fsum([1e-9] * 160), 160)
    assert len(ledger.path.read_text().splitlines()) == 160


@pytest.mark.process
@pytest.mark.parametrize(
    ("workers", "spends", "epsilon", "budget", "expected"),
    [(12, 1, 1.0, 5.0, 5), (8, 20, 0.5, 40.0, 80)],
)
def test_concurrent_spends_never_jointly_exceed_the_budget(
    tmp_path, workers, spends, epsilon, budget, expected
):
    accepted = _race(tmp_path, workers, spends, epsilon=lambda w: epsilon, budget=budget)
    assert sum(accepted) == expected
    assert Ledger(tmp_path / "ledger.jsonl").spent(A)[::2] == (budget, expected)


# -- summary -----------------------------------------------------------------------------


def test_format_summary_tables(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    assert "No releases recorded" in format_summary(ledger)
    ledger.spend(Charge(A, 1.0, 1e-6), label="old-name.csv", release="rel/one", time=T0)
    ledger.spend(Charge(B, 0.5, 0.0), label="b.csv", time=T0 + timedelta(hours=1))
    ledger.spend(
        Charge(A, 0.25, 0.0), label="deaths.csv", release="rel/two", time=T0 + timedelta(days=3)
    )

    lines = format_summary(ledger).splitlines()
    assert str(ledger.path) in lines[0]
    header = lines[2].split()
    assert header == ["label", "dataset", "releases", "epsilon", "delta", "first", "last"]
    row_a = next(line for line in lines if A[:12] in line).split()
    assert row_a == [
        "deaths.csv",
        A[:12],
        "2",
        "1.25",
        "1e-06",
        "2024-05-01T12:00:00Z",
        "2024-05-04T12:00:00Z",
    ]
    row_b = next(line for line in lines if B[:12] in line).split()
    assert row_b == ["b.csv", B[:12], "1", "0.5", "0", *["2024-05-01T13:00:00Z"] * 2]
    assert A[:13] not in "\n".join(lines) and "Releases:" not in lines

    for key in (A, A[:12], A.upper()):
        detail = format_summary(ledger, key)
        assert B[:12] not in detail
        assert "deaths.csv" in detail and "Releases:" in detail
        releases = detail.split("Releases:")[1].strip().splitlines()[2:]
        assert [r.split() for r in releases] == [
            [
                "2024-05-01T12:00:00Z",
                "1",
                "1e-06",
                "-",
                "old-name.csv",
                "rel/one",
                dpcounts.__version__,
            ],
            [
                "2024-05-04T12:00:00Z",
                "0.25",
                "0",
                "-",
                "deaths.csv",
                "rel/two",
                dpcounts.__version__,
            ],
        ]
    assert "No releases of dataset" in format_summary(ledger, "0" * 64)


def test_format_summary_rejects_ambiguous_prefix(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    twin = A[:20] + ("e" if A[20] == "f" else "f") * 44  # shares 20 hex digits with A
    ledger.spend(Charge(A, 1.0, 0.0))
    ledger.spend(Charge(twin, 2.0, 0.0))
    with pytest.raises(LedgerError, match="ambiguous"):
        format_summary(ledger, A[:12])
    row = next(line for line in format_summary(ledger, A[:21]).splitlines() if A[:12] in line)
    assert row.split()[2:4] == ["1", "1"]  # A alone: 1 release, epsilon 1
    assert "No releases of dataset deaths.csv" in format_summary(ledger, "deaths.csv")  # a name
    with pytest.raises(ValueError, match="hex digits of a table id"):
        format_summary(ledger, "deaths 1999")  # neither a name nor hex digits


def test_a_nominal_release_is_marked_and_no_budget_is_checked_across_it(tmp_path):
    """A nominal release's epsilon is a target the exact audit found exceeded: counted
    against a budget it would understate the spending, so --budget refuses once one is
    recorded for the dataset (or for a nominal release itself); the summary marks it."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 0.5, 0.0, guarantee="certified"), label="a.csv")
    with pytest.raises(LedgerError, match="this release is nominal"):
        ledger.spend(Charge(A, 0.5, 0.0, budget=5.0, guarantee="nominal"))
    assert ledger.spent(A) == (0.5, 0.0, 1) and ledger.budgets() == {}  # nothing recorded
    ledger.spend(Charge(A, 0.5, 0.0, guarantee="nominal"))  # without a budget: recorded, marked
    with pytest.raises(LedgerError, match="1 earlier release of it is nominal"):
        ledger.spend(Charge(A, 0.1, 0.0, budget=5.0, guarantee="certified"))
    ledger.spend(Charge(B, 0.1, 0.0, budget=5.0, guarantee="certified"))  # other tables unaffected
    summary = format_summary(ledger)
    assert "2 (1 nominal)" in summary and "bounds nothing" in summary
    assert [e.guarantee for e in Ledger(ledger.path).entries(A)] == ["certified", "nominal"]
    with pytest.raises(ValueError, match="guarantee"):
        ledger.spend(Charge(A, 0.1, 0.0, guarantee="proven"))


# -- dataset names: tables of the same people add up -------------------------------------

C = hashlib.sha256(b"dataset c").hexdigest()
NAME = "us-deaths-1999"


def test_a_name_adds_up_the_releases_of_its_tables(tmp_path):
    """Deaths by county x age, then by county x sex: two tables of the same events, whose
    releases compose (moving one event moves at most one event in each table)."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    age = ledger.spend(Charge(NAME, 1.0, 1e-9, table=A), label="age.csv", time=T0)
    sex = ledger.spend(Charge(NAME, 0.5, 1e-9, table=B), label="sex.csv", time=T0)
    ledger.spend(Charge(C, 4.0, 0.0), label="other.csv")  # another dataset's table: not added
    assert age.dataset == NAME and age.table == A and age.named and age.short == A[:12]
    assert ledger.entries(NAME) == [age, sex]
    assert ledger.spent(NAME) == (1.5, 2e-9, 2)
    # a table bound to a name reports the name's spending: what its next release is
    # checked against
    assert ledger.spent(A) == ledger.spent(B) == (1.5, 2e-9, 2)
    assert ledger.spent(C) == (4.0, 0.0, 1)
    record = json.loads(ledger.path.read_text().splitlines()[1])
    assert (record["dataset"], record["table"], record["label"]) == (NAME, B, "sex.csv")
    assert Ledger(ledger.path).entries() == [age, sex, ledger.entries(C)[0]]  # round trip


def test_a_names_budget_counts_every_table_and_what_they_spent_before_it(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(C, 2.0, 0.0), label="age-sex.csv")  # released before names existed
    ledger.spend(Charge(NAME, 1.5, 0.0, table=A, budget=5.0), label="age.csv")
    ledger.spend(Charge(NAME, 1.0, 0.0, table=B, budget=5.0), label="sex.csv")
    before = ledger.path.read_bytes()

    with pytest.raises(LedgerError) as info:  # C's earlier 2.0 comes along with the name
        ledger.spend(Charge(NAME, 1.0, 0.0, table=C, budget=5.0), label="age-sex.csv")
    message = str(info.value)
    assert NAME in message and all(t[:12] in message for t in (A, B, C))
    assert "3 releases already spent epsilon = 4.5" in message and "budget epsilon = 5" in message
    assert "remaining: 0.5" in message and "Nothing was recorded" in message
    assert ledger.path.read_bytes() == before
    with pytest.raises(LedgerError, match="2 releases"):  # a new table: 2.5 + 3 > 5
        ledger.spend(Charge(NAME, 3.0, 0.0, table=hashlib.sha256(b"d").hexdigest(), budget=5.0))
    assert ledger.path.read_bytes() == before

    ledger.spend(Charge(NAME, 0.5, 0.0, table=C, budget=5.0))  # exactly up to the budget
    assert ledger.spent(NAME) == (5.0, 0.0, 4) and ledger.spent(C) == (5.0, 0.0, 4)
    with pytest.raises(LedgerError, match="4 releases"):
        ledger.spend(Charge(NAME, 1e-9, 0.0, table=A, budget=5.0))


@pytest.mark.parametrize("budget", [None, 100.0])
def test_a_table_is_bound_to_the_name_it_was_released_under(tmp_path, budget):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 1.0, 0.0), label="age.csv")  # without a name: may be named later
    ledger.spend(Charge(NAME, 1.0, 0.0, table=A), label="age.csv")
    ledger.spend(Charge("other", 1.0, 0.0, table=B))
    before = ledger.path.read_bytes()

    for dataset, table, asked in [
        (A, None, "names no dataset"),
        (A, A, "names no dataset"),
        ("other", A, "names dataset other"),
        ("us-deaths", A, "names dataset us-deaths"),
    ]:
        with pytest.raises(LedgerError) as info:
            ledger.spend(Charge(dataset, 1.0, 0.0, table=table, budget=budget), label="age.csv")
        message = str(info.value)
        assert message.startswith(f"table age.csv ({A[:12]}) was released under --dataset {NAME}")
        assert asked in message and f"release it with --dataset {NAME}" in message
        assert 3 <= len(message.splitlines()) <= 7
        assert message.splitlines()[-1] == "Nothing was recorded."
        assert ledger.path.read_bytes() == before
    with pytest.raises(LedgerError, match="--dataset other"):
        ledger.spend(Charge(NAME, 1.0, 0.0, table=B))
    assert ledger.path.read_bytes() == before
    ledger.spend(Charge(NAME, 1.0, 0.0, table=A, budget=budget))  # under its name: recorded
    assert ledger.spent(NAME) == (3.0, 0.0, 3) and ledger.spent("other") == (1.0, 0.0, 1)


def test_old_format_lines_read_as_releases_of_their_table(tmp_path):
    """Lines recorded before names existed have no table: their dataset is the table id;
    naming the table later brings their spending along."""
    path = tmp_path / "ledger.jsonl"
    old = [_line(A, 1.0, label="age.csv", guarantee="certified"), _line(A, 0.5), _line(B, 2.0)]
    path.write_text("\n".join(old) + "\n")
    ledger = Ledger(path)
    assert [(e.dataset, e.table, e.named) for e in ledger.entries()] == [
        (A, A, False),
        (A, A, False),
        (B, B, False),
    ]
    assert ledger.spent(A) == (1.5, 0.0, 2)
    ledger.spend(Charge(NAME, 0.25, 0.0, table=A))
    assert ledger.spent(NAME) == (1.75, 0.0, 3) and ledger.spent(B) == (2.0, 0.0, 1)
    assert path.read_text().splitlines()[:3] == old  # never rewritten
    with pytest.raises(LedgerError, match="names no dataset"):
        ledger.spend(Charge(A, 0.1, 0.0))


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (_line(NAME), "expected a table (the SHA-256 of the table) with the dataset name"),
        (_line(NAME, table="deaths.csv"), "table must be a SHA-256"),
        (_line(A, table=B), "table id to equal"),
        (_line("2024", table=A), "not hex digits only"),
    ],
)
def test_a_damaged_named_line_is_reported(tmp_path, bad, expected):
    path = tmp_path / "ledger.jsonl"
    path.write_text(f"{_line()}\n{bad}\n")
    with pytest.raises(LedgerError, match="line 2") as info:
        Ledger(path).entries()
    assert expected in str(info.value)


def test_a_table_under_two_names_stops_the_ledger(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text(f"{_line(NAME, table=A)}\n{_line('other', table=A)}\n")  # a hand edit
    ledger = Ledger(path)
    for call in (
        lambda: ledger.spent(NAME),
        lambda: format_summary(ledger),
        lambda: ledger.spend(Charge(NAME, 1.0, 0.0, table=B)),
    ):
        with pytest.raises(LedgerError, match="two dataset names"):
            call()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": NAME}, "table .* is required with the dataset name"),
        ({"dataset": "2024", "table": A}, "not hex digits only"),
        ({"dataset": "us deaths", "table": A}, "dataset name"),
        ({"dataset": "", "table": A}, "dataset name"),
        ({"dataset": "x" * 201, "table": A}, "dataset name"),
        ({"dataset": NAME, "table": "age.csv"}, "table must be a SHA-256"),
        ({"dataset": A, "table": B}, "table id other than"),
    ],
)
def test_invalid_names_and_tables(tmp_path, kwargs, match):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match=match):
        ledger.spend(Charge(epsilon=1.0, delta=0.0, **kwargs))
    assert not ledger.path.exists()
    assert check_name("x") == "x" and check_name("deaths/US:1999@cdc+v2_x.y-z")


def test_nominal_releases_poison_a_names_budget(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(C, 0.5, 0.0, guarantee="nominal"))  # an unnamed table, nominal
    ledger.spend(Charge(NAME, 0.5, 0.0, table=A, guarantee="certified"))
    with pytest.raises(LedgerError, match="this release is nominal"):
        ledger.spend(Charge(NAME, 0.5, 0.0, table=B, budget=5.0, guarantee="nominal"))
    ledger.spend(Charge(NAME, 0.5, 0.0, table=B, guarantee="nominal"))  # no budget: recorded
    with pytest.raises(LedgerError, match="1 earlier release of it is nominal") as info:
        ledger.spend(Charge(NAME, 0.1, 0.0, table=A, budget=5.0, guarantee="certified"))
    assert NAME in str(info.value)
    ledger.spend(Charge("other", 0.1, 0.0, table=hashlib.sha256(b"d").hexdigest(), budget=5.0))
    with pytest.raises(LedgerError, match="earlier release of it is nominal"):  # C brings it
        ledger.spend(Charge("other", 0.1, 0.0, table=C, guarantee="certified"))  # the stored budget


def test_format_summary_shows_names_with_their_tables(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 1.0, 1e-6), label="age.csv", release="rel/1", time=T0)  # before the name
    ledger.spend(Charge(C, 0.5, 0.0), label="other.csv", time=T0 + timedelta(hours=1))
    ledger.spend(
        Charge(NAME, 0.5, 0.0, table=A),
        label="age.csv",
        release="rel/2",
        time=T0 + timedelta(days=1),
    )
    ledger.spend(
        Charge(NAME, 2.0, 0.0, table=B, guarantee="certified"),
        label="sex.csv",
        release="rel/3",
        time=T0 + timedelta(days=2),
    )

    lines = format_summary(ledger).splitlines()
    assert lines[2].split() == ["label", "dataset", "releases", "epsilon", "delta", "first", "last"]
    body = [line.split() for line in lines[4:8]]
    T0s = "2024-05-01T12:00:00Z"
    assert body == [
        ["(2", "tables)", NAME, "3", "3.5", "1e-06", T0s, "2024-05-03T12:00:00Z"],
        ["age.csv", A[:12], "2", "1.5", "1e-06", "2024-05-01T12:00:00Z", "2024-05-02T12:00:00Z"],
        ["sex.csv", B[:12], "1", "2", "0", *["2024-05-03T12:00:00Z"] * 2],
        ["other.csv", C[:12], "1", "0.5", "0", *["2024-05-01T13:00:00Z"] * 2],
    ]
    assert lines[5].startswith("  age.csv") and not lines[7].startswith(" ")
    assert "its total adds up its tables" in lines[-2]

    for key in (NAME, A[:12], B, B[:5].upper()):  # a name, or any of its tables
        detail = format_summary(ledger, key)
        assert C[:12] not in detail and "(2 tables)" in detail
        releases = detail.split("Releases:")[1].strip().splitlines()
        assert releases[0].split() == [
            "time",
            "epsilon",
            "delta",
            "guarantee",
            "table",
            "label",
            "release",
            "dpcounts",
        ]
        assert [r.split()[4:6] for r in releases[2:]] == [
            [A[:12], "age.csv"],
            [A[:12], "age.csv"],
            [B[:12], "sex.csv"],
        ]
    assert "No releases of dataset other" in format_summary(ledger, "other")
    assert "Releases:" in format_summary(ledger, C) and "table" not in format_summary(ledger, C)


@pytest.mark.process
def test_concurrent_releases_of_tables_of_one_name_never_jointly_exceed_its_budget(tmp_path):
    """Twelve workers, each releasing its own table under one name, budget 5: five pass."""
    tables = [hashlib.sha256(f"table {w}".encode()).hexdigest() for w in range(12)]
    accepted = _race(
        tmp_path,
        12,
        1,
        epsilon=lambda w: 1.0,
        budget=5.0,
        dataset=lambda w: NAME,
        table=lambda w: tables[w],
    )
    assert sum(accepted) == 5
    ledger = Ledger(tmp_path / "ledger.jsonl")
    assert ledger.spent(NAME)[::2] == (5.0, 5)
    assert len({e.table for e in ledger.entries()}) == 5


@pytest.mark.process
def test_concurrent_named_and_unnamed_releases_of_a_table_bind_it_once(tmp_path):
    """Half the workers release table A without a name, half under NAME: once a named
    release is recorded no unnamed one follows it, and every accepted spend counts."""
    accepted = _race(
        tmp_path,
        6,
        10,
        epsilon=lambda w: 0.1,
        dataset=lambda w: NAME if w % 2 else A,
        table=lambda w: A if w % 2 else None,
    )
    assert all(accepted[w] == 10 for w in range(1, 6, 2))  # named releases always pass
    entries = Ledger(tmp_path / "ledger.jsonl").entries()
    first_named = next(i for i, e in enumerate(entries) if e.named)
    assert not any(e.named for e in entries[:first_named])
    assert all(e.named for e in entries[first_named:])
    assert len(entries) == sum(accepted)
    assert Ledger(tmp_path / "ledger.jsonl").spent(NAME)[2] == len(entries)


def test_preview_finds_what_spend_finds_and_records_nothing(tmp_path):
    """A table's releases from before it had a name count in the name's preview, as they
    do when the release is spent; the preview's refusals are spend's, and it writes nothing."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(Charge(A, 1.0, 1e-12), label="age.csv")  # before the name existed
    before = ledger.path.read_bytes()
    seen = ledger.assess(Charge("us-deaths", 1.0, 1e-12, table=A, budget=1.5)).as_dict()
    assert seen["spent"] == {"epsilon": 1.0, "delta": 1e-12, "releases": 1}
    assert seen["after"] == {"epsilon": 2.0, "delta": 2e-12}
    assert seen["refusal"].startswith("privacy budget exceeded for dataset us-deaths")
    with pytest.raises(LedgerError, match="privacy budget exceeded for dataset us-deaths"):
        ledger.spend(Charge("us-deaths", 1.0, 1e-12, table=A, budget=1.5))
    assert ledger.path.read_bytes() == before
    assert (
        ledger.assess(Charge("us-deaths", 0.5, 0.0, table=A, budget=1.5)).as_dict()["refusal"]
        is None
    )
    ledger.spend(Charge("us-deaths", 0.5, 0.0, table=A, budget=1.5))
    bound = ledger.assess(Charge(A, 0.1, 0.0)).as_dict()  # the table now belongs to us-deaths
    assert bound["spent"]["epsilon"] == 1.5 and "--dataset us-deaths" in bound["refusal"]
    with pytest.raises(ValueError, match="budget must be a finite number > 0"):
        ledger.assess(Charge("us-deaths", 0.1, 0.0, table=A, budget=0)).as_dict()
