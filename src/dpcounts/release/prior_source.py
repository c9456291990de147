"""Where a public prior comes from: the steward's word, and the shape of the rates.

A release publishes its prior rates as they are (``hyperparameters.parquet``). Rates
computed from the counts, such as the table's own group rates, ``1.5 x count /
population`` or ``(count + 0.5) / population``, publish the counts (every group's total,
or every count) while the manifest states epsilon, and no test on the counts can tell
every such disguise from a real prior. So every prior the steward brings, a ``--prior
FILE`` or the input's prior-rate column, grouped or stratum by stratum, is published only
with the steward's declaration of its source (``--prior-source "state cancer registry
rates 1990-94, published 1997"``, or a study's ``prior: {source_note: ...}``), written into
the manifest, shown by ``dpcounts verify`` as taken on trust and stated in the summary;
docs/privacy.md says what it promises. The overall rate and the sanitised prior
(``--sanitised-prior-by``) need none: both are made by the release, the first from public
numbers, the second with a spent budget.

What can be told from public inputs alone is the prior's *shape*, recorded in the manifest
(``prior.groups``) and checked again by ``dpcounts verify``:

* **grouped**: the rates are constant within groups coarser than the strata, every group
  holding at least two strata (national rates by age and sex in a county x age x sex
  table; an overall rate). Such a prior can carry a group's total, never one stratum's
  count on its own; :func:`.prior_check.group_fit` refuses group rates that are the
  table's own (exactly, up to a factor, smoothed, or closer than chance).
* **by stratum**: any other prior, a different rate for (some) single strata, which
  :func:`.prior_check.prior_reproduces_counts` checks stratum by stratum.

:func:`grouping` finds the groups from the rates and the key columns (nothing else: the
counts never enter), :func:`group_codes` numbers them, :func:`check_declaration` checks
the steward's text and :func:`refusal` words the refusal of an undeclared prior.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The option that declares the source of a prior that varies stratum by stratum.
OPTION = "--prior-source"
#: The longest declaration accepted, in characters (a citation, not a document).
MAX_DECLARATION = 500


def _codes(frame: pd.DataFrame, columns: list[str], factorised: dict) -> np.ndarray:
    """One integer per row, equal exactly for rows equal on ``columns``."""
    code = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        values, size = factorised[column]
        if size and code.max(initial=0) > (np.iinfo(np.int64).max // size) - size:
            code = np.unique(code, return_inverse=True)[1].astype(np.int64)  # keep it small
        code = code * size + values
    return code


def _constant_within(code: np.ndarray, rate: np.ndarray) -> bool:
    """Whether ``rate`` takes one value in each group of ``code``."""
    first = np.empty(int(code.max(initial=-1)) + 1)
    first[code] = rate  # some member's rate per group
    return bool(np.array_equal(first[code], rate))


def _factorised(keys: pd.DataFrame) -> dict:
    """Per key column, its values as integer codes and how many distinct values: " n" and
    "n" are one key value (as in the table's id), so text values are stripped first."""
    from dpcounts.encoding import factorize

    factorised = {}
    for column in keys.columns:
        values = keys[column]
        codes, uniques = factorize(values)
        if values.dtype == object or pd.api.types.is_string_dtype(values):
            # the distinct values stripped, then numbered again (a national table's 10M
            # rows hold a few thousand distinct values)
            stripped = pd.Series(uniques, dtype=values.dtype).astype(str).str.strip()
            again, uniques = pd.factorize(stripped, sort=False, use_na_sentinel=False)
            codes = again[codes]
        factorised[column] = (codes.astype(np.int64), len(uniques))
    return factorised


def _dense(code: np.ndarray, n: int) -> np.ndarray:
    """``code`` numbered 0, 1, ... again when it is sparse (by hashing)."""
    if code.max(initial=0) >= 4 * n:
        return pd.factorize(code)[0].astype(np.int64)
    return code


def group_codes(keys: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Per stratum, the code of its group of ``columns`` (the groups :func:`grouping`
    finds; all zero for no columns). Codes are small integers, not necessarily dense."""
    if not columns:
        return np.zeros(len(keys), dtype=np.int64)
    frame = keys[list(columns)]
    return _dense(_codes(frame, list(columns), _factorised(frame)), len(keys))


def grouping(keys: pd.DataFrame, rate: np.ndarray) -> list[str] | None:
    """The columns of ``keys`` whose groups the prior ``rate`` is constant within, every
    group holding at least two strata ([] for one rate in all strata), or None when the
    prior varies stratum by stratum (no such columns; ``keys`` may be some of the key
    columns, as when ``dpcounts verify`` checks a manifest's ``prior.groups``).

    One pass drops the columns, the one with the most distinct values first, each dropped
    when the rate stays constant within the groups of the columns left; what is left is a
    minimal set of columns the rate is a function of (dropping any more breaks it). The
    rates are compared exactly: the same published rate is the same float.
    """
    rate = np.asarray(rate, dtype=float)
    n = rate.size
    if n == 0 or np.all(rate == rate[0]):
        return []
    # groups of at least two strata are at most n / 2 groups, so at most n / 2 rates
    if pd.unique(rate).size > n // 2:
        return None
    factorised = _factorised(keys)
    left = sorted(keys.columns, key=lambda c: -factorised[c][1])
    if not _constant_within(_codes(keys, left, factorised), rate):
        return None  # not a function of these columns (they are not all the keys)
    for column in list(left):
        fewer = [c for c in left if c != column]
        if _constant_within(_codes(keys, fewer, factorised), rate):
            left = fewer
    sizes = np.bincount(_dense(_codes(keys, left, factorised), n))
    if sizes[sizes > 0].min() < 2:
        return None
    return [c for c in keys.columns if c in left]  # in the keys' order


def check_declaration(text: str | None) -> str | None:
    """The steward's declaration, stripped, or a ``ValueError`` saying what is expected."""
    if text is None:
        return None
    if not isinstance(text, str) or not text.strip():
        raise ValueError(
            f'{OPTION} needs the source of the prior rates in words, e.g. {OPTION} "state '
            'cancer registry rates 1990-94, published 1997"'
        )
    text = " ".join(text.split())
    if len(text) > MAX_DECLARATION:
        raise ValueError(
            f"{OPTION} is {len(text)} characters; at most {MAX_DECLARATION} (a citation of "
            "the source: who published the rates, from what data, when)"
        )
    if any(not ch.isprintable() for ch in text):
        raise ValueError(f"{OPTION} holds control characters; expected plain text")
    return text


def refusal(where: str, keys: list[str], groups: list[str] | None, study=None) -> str:
    """The one-line refusal of a prior the steward brings without declaring its source
    (``groups``: the columns it is constant within, :func:`grouping`, or None)."""
    how = (
        "one rate for every stratum"
        if groups == []
        else f"one rate per group of {groups}"
        if groups
        else "rates that vary stratum by stratum"
    )
    declare = (
        f'prior: {{source_note: "..."}} in studies.{study.name} of {study.config}'
        if study is not None
        else f'{OPTION} "..."'
    )
    return (
        f"{where}: the prior ({how}) is published as it is, and only its source can make "
        "it public: rates computed from these counts, such as their own group rates or 1.5 "
        "x count / population, would publish the counts. If they were made without these "
        f'counts, declare where they come from with {declare} (e.g. "state cancer registry '
        'rates 1990-94, published 1997"; written into the manifest); otherwise use '
        "--sanitised-prior-by (noisy group totals, or with no column the overall rate)"
    )
