"""dpsynth.ledger: the steward's privacy-budget ledger (paths, spending, corruption, races)."""

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

import dpsynth
from dpsynth.ledger import Entry, Ledger, LedgerError, default_ledger_path, format_summary

A = hashlib.sha256(b"dataset a").hexdigest()
B = hashlib.sha256(b"dataset b").hexdigest()
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def _line(dataset: str = A, epsilon: float = 1.0, delta: float = 0.0, **extra) -> str:
    record = {"dataset": dataset, "epsilon": epsilon, "delta": delta}
    record["time"] = "2024-05-01T12:00:00Z"
    record.update(extra)
    return json.dumps(record)


# -- default path ------------------------------------------------------------------------


def test_default_path_honours_dpsynth_ledger(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("DPSYNTH_LEDGER", str(tmp_path / "mine.jsonl"))
    assert default_ledger_path() == tmp_path / "mine.jsonl"


def test_default_path_uses_xdg_data_home(monkeypatch, tmp_path):
    monkeypatch.delenv("DPSYNTH_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "dpsynth" / "ledger.jsonl"


@pytest.mark.parametrize("xdg", [None, ""])
def test_default_path_falls_back_to_local_share(monkeypatch, tmp_path, xdg):
    monkeypatch.delenv("DPSYNTH_LEDGER", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_ledger_path() == tmp_path / ".local" / "share" / "dpsynth" / "ledger.jsonl"


# -- spending ----------------------------------------------------------------------------


def test_spend_entries_spent_round_trip(tmp_path):
    ledger = Ledger(tmp_path / "deep" / "er" / "ledger.jsonl")
    assert ledger.entries() == [] and ledger.spent(A) == (0.0, 0.0, 0)
    first = ledger.spend(A, 0.5, 1e-6, label="a.csv", release="out/a1", time=T0)
    other = ledger.spend(B, 2.0, 0.0, label="b.csv")
    second = ledger.spend(
        A.upper(),
        0.25,
        0.0,
        release="out/a2",
        time=datetime(2024, 5, 2, 14, 0, 0, 987).replace(tzinfo=timezone(timedelta(hours=2))),
    )

    assert first == Entry(A, 0.5, 1e-6, T0, "a.csv", "out/a1", dpsynth.__version__)
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
    assert record == {
        "dataset": A,
        "label": "a.csv",
        "epsilon": 0.5,
        "delta": 1e-6,
        "release": "out/a1",
        "time": "2024-05-01T12:00:00Z",
        "version": dpsynth.__version__,
        "guarantee": None,
    }


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_new_ledger_file_is_private(tmp_path, umask):
    old = os.umask(umask)
    try:
        ledger = Ledger(tmp_path / "sub" / "ledger.jsonl")
        ledger.spend(A, 1.0, 0.0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o600


def test_budget_refusal_names_dataset_spending_budget_and_request(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(A, 2.0, 1e-7, budget=5.0, label="deaths.csv")
    ledger.spend(A, 2.5, 0.0, budget=5.0, label="deaths.csv")
    ledger.spend(B, 100.0, 0.0)  # another dataset's spending does not count
    before = ledger.path.read_bytes()

    with pytest.raises(LedgerError) as info:
        ledger.spend(A, 1.0, 0.0, budget=5.0)
    message = str(info.value)
    assert "deaths.csv" in message and A[:12] in message and A[:13] not in message
    assert "2 releases" in message
    assert "epsilon = 4.5" in message  # spent
    assert "budget epsilon = 5" in message
    assert "asks for epsilon = 1" in message
    assert "remaining: 0.5" in message
    assert ledger.path.read_bytes() == before  # nothing recorded

    ledger.spend(A, 0.5, 0.0, budget=5.0)  # exactly up to the budget is allowed
    assert ledger.spent(A)[0] == 5.0
    with pytest.raises(LedgerError, match="3 releases"):
        ledger.spend(A, 1e-9, 0.0, budget=5.0)  # the tolerance is for rounding only


def test_budget_tolerates_float_rounding_only(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(A, 0.1, 0.0, budget=0.3)
    ledger.spend(A, 0.2, 0.0, budget=0.3)  # 0.1 + 0.2 == 0.30000000000000004
    with pytest.raises(LedgerError, match="unlabelled"):
        ledger.spend(A, 1e-10, 0.0, budget=0.3)
    with pytest.raises(LedgerError, match="0 releases"):
        ledger.spend(B, 0.4, 0.0, budget=0.3)  # a single request over the budget
    assert ledger.spent(A)[2] == 2 and ledger.entries(B) == []


@pytest.mark.parametrize("epsilon", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, True, "1"])
def test_invalid_epsilon_is_refused_by_value(tmp_path, epsilon):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match="epsilon") as info:
        ledger.spend(A, epsilon, 0.0)
    assert repr(epsilon) in str(info.value) or repr(float(epsilon)) in str(info.value)
    assert not ledger.path.exists()


@pytest.mark.parametrize("delta", [-1e-9, 1.0, 1.5, math.nan, math.inf, None])
def test_invalid_delta_is_refused_by_value(tmp_path, delta):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match="delta") as info:
        ledger.spend(A, 1.0, delta)
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
    with pytest.raises(ValueError, match=match):
        ledger.spend(**args)
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
        ledger.spend(B, 1.0, 0.0)  # no spending on top of a damaged ledger
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
        ledger.spend(A, 1.0, 0.0)
    assert path.read_bytes() == before

    path.write_text(path.read_text()[: -cut or None] + _line(epsilon=2.0) + "\n")  # repaired
    assert ledger.spent(A) == (3.0, 0.0, 2)


# -- concurrency -------------------------------------------------------------------------

_WORKER = """
import sys, time
from pathlib import Path
from dpsynth.ledger import Ledger, LedgerError

path, dataset, worker, n, epsilon, budget, barrier = sys.argv[1:]
budget = None if budget == "none" else float(budget)
barrier = Path(barrier)
(barrier / f"ready-{worker}").touch()
while not (barrier / "go").exists():
    time.sleep(0.001)
ledger = Ledger(path)
ok = 0
for i in range(int(n)):
    try:
        ledger.spend(dataset, float(epsilon), 1e-9, budget=budget, release=f"{worker}-{i}")
        ok += 1
    except LedgerError:
        pass
print(ok)
"""


def _race(tmp_path: Path, workers: int, spends: int, epsilon, budget=None) -> list[int]:
    """Start the workers together; return how many spends each one had accepted."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    path = tmp_path / "ledger.jsonl"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), A, str(w), str(spends), str(epsilon(w)),
             "none" if budget is None else str(budget), str(barrier)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]  # fmt: skip
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
    ledger.spend(A, 1.0, 1e-6, label="old-name.csv", release="rel/one", time=T0)
    ledger.spend(B, 0.5, 0.0, label="b.csv", time=T0 + timedelta(hours=1))
    ledger.spend(A, 0.25, 0.0, label="deaths.csv", release="rel/two", time=T0 + timedelta(days=3))

    lines = format_summary(ledger).splitlines()
    assert str(ledger.path) in lines[0]
    header = lines[2].split()
    assert header == ["label", "dataset", "releases", "epsilon", "delta", "first", "last"]
    row_a = next(line for line in lines if A[:12] in line).split()
    assert row_a == [
        "deaths.csv", A[:12], "2", "1.25", "1e-06", "2024-05-01T12:00:00Z", "2024-05-04T12:00:00Z"
    ]  # fmt: skip
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
                dpsynth.__version__,
            ],
            [
                "2024-05-04T12:00:00Z",
                "0.25",
                "0",
                "-",
                "deaths.csv",
                "rel/two",
                dpsynth.__version__,
            ],
        ]
    assert "No releases of dataset" in format_summary(ledger, "0" * 64)


def test_format_summary_rejects_ambiguous_prefix(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    twin = A[:20] + ("e" if A[20] == "f" else "f") * 44  # shares 20 hex digits with A
    ledger.spend(A, 1.0, 0.0)
    ledger.spend(twin, 2.0, 0.0)
    with pytest.raises(LedgerError, match="ambiguous"):
        format_summary(ledger, A[:12])
    row = next(line for line in format_summary(ledger, A[:21]).splitlines() if A[:12] in line)
    assert row.split()[2:4] == ["1", "1"]  # A alone: 1 release, epsilon 1
    with pytest.raises(ValueError, match="hex"):
        format_summary(ledger, "deaths.csv")


def test_a_nominal_release_is_marked_and_no_budget_is_checked_across_it(tmp_path):
    """A nominal release's epsilon is a target the exact audit found exceeded: counted
    against a budget it would understate the spending, so --budget refuses once one is
    recorded for the dataset (or for a nominal release itself); the summary marks it."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.spend(A, 0.5, 0.0, budget=5.0, label="a.csv", guarantee="certified")
    with pytest.raises(LedgerError, match="this release is nominal"):
        ledger.spend(A, 0.5, 0.0, budget=5.0, guarantee="nominal")
    assert ledger.spent(A) == (0.5, 0.0, 1)  # nothing recorded
    ledger.spend(A, 0.5, 0.0, guarantee="nominal")  # without a budget: recorded, marked
    with pytest.raises(LedgerError, match="1 earlier release of it is nominal"):
        ledger.spend(A, 0.1, 0.0, budget=5.0, guarantee="certified")
    ledger.spend(B, 0.1, 0.0, budget=5.0, guarantee="certified")  # other tables unaffected
    summary = format_summary(ledger)
    assert "2 (1 nominal)" in summary and "bounds nothing" in summary
    assert [e.guarantee for e in Ledger(ledger.path).entries(A)] == ["certified", "nominal"]
    with pytest.raises(ValueError, match="guarantee"):
        ledger.spend(A, 0.1, 0.0, guarantee="proven")
