"""Which strata a release lists, and where the steward says the list comes from.

A release publishes its strata (their keys and populations) exactly. That is safe only if
the list does not depend on the counts: an input that leaves out the strata with no event
(CDC WONDER exports do, unless "Show Zero Values" is ticked) publishes which strata have
events, at any epsilon. Nothing in the input can show that it is complete (a county with
no event in any age group leaves no row, and no gap among the others), so the steward
says where the list comes from (``--strata``, required, no default), one of:

- ``external-file`` (``--strata FILE``): a public file lists every stratum with its
  population (and prior rate, if the prior is a column); the input's counts are matched to
  it by key, a listed stratum with no row gets count 0, and an input row that is not listed
  is refused. The one source that needs no declaration about the input.
- ``declared`` (``--strata input``): the steward declares that the input lists every
  stratum, zero counts included (nested keys such as state and county are no cross
  product).
- ``cross-product`` (``--strata cross-product``): the steward declares that every value of
  every key column appears in the input (the key values are public and complete); dpcounts
  checks that every combination of them has a row and refuses the input otherwise, naming
  missing combinations. The check cannot see a key value with no row at all, which is why
  this is a declaration: had dpcounts assumed it, a county whose only event moved away
  would vanish and the release go through, while its neighbour with that event is refused
  (``tests/test_release_strata.py``). With one key column there is nothing to check, so
  it is refused.
"""

from __future__ import annotations

import math

import pandas as pd

from dpcounts.data.validation import SHOWN, describe_duplicates
from dpcounts.release.request import ReleaseError

#: What the manifest says of each source of the list of strata.
STATEMENTS = {
    "cross-product": (
        "the steward declared that every value of every key column appears in the input "
        "(--strata cross-product), and dpcounts checked that every combination of those "
        "values has a row: the list of strata is the cross product of the key values. "
        "The check cannot see a key value without any row (e.g. a county with no event in "
        "any group, left out of an export without zero rows): that the values are complete "
        "is the steward's declaration, and a false one would reveal such strata"
    ),
    "external-file": (
        "the strata and their populations come from a public file that lists every "
        "stratum; the confidential counts were matched to it, a stratum without a row "
        "counting 0"
    ),
    "declared": (
        "the steward declared that the input lists every stratum, zero counts included "
        "(--strata input); a list that left out strata without events would reveal them"
    ),
}
#: Largest cross product whose missing combinations are listed by name.
_ENUMERATED = 10**7


def _examples(frame: pd.DataFrame) -> str:
    rows = [
        "(" + ", ".join(f"{k}={v!r}" for k, v in zip(frame.columns, row, strict=True)) + ")"
        for row in frame.head(SHOWN).itertuples(index=False)
    ]
    return "; ".join(rows) + (f" and {len(frame) - SHOWN} more" if len(frame) > SHOWN else "")


def check_cross_product(frame: pd.DataFrame, keys: list[str], source: str) -> None:
    """Refuse (ReleaseError) an input whose key values miss some of their combinations, or
    that has one key column (whose list of values nothing can check)."""
    if len(keys) == 1:
        raise ReleaseError(
            f"{source}: --strata cross-product with one key column ({keys[0]!r}) checks "
            "nothing: a stratum left out because it has no event leaves no gap, and the "
            "release publishes its strata. Give --strata FILE (a public list of every "
            "stratum and its population; unlisted strata count 0), or --strata input if "
            "the input lists every stratum, zero counts included"
        )
    values = [frame[key].drop_duplicates().sort_values() for key in keys]
    expected = math.prod(len(v) for v in values)
    if expected == len(frame):
        return
    missing_text = ""
    if expected <= _ENUMERATED:
        full = pd.MultiIndex.from_product(values, names=keys)
        missing = full.difference(pd.MultiIndex.from_frame(frame[keys]))
        missing_text = f", e.g. {_examples(missing.to_frame(index=False))}"
    raise ReleaseError(
        f"{source}: {expected - len(frame)} of the {expected} combinations of the key values "
        f"{keys} have no row{missing_text}. The release publishes its strata, so a stratum "
        "left out because it has no event would be revealed (CDC WONDER leaves such rows "
        "out unless 'Show Zero Values' is ticked). Add those rows with count 0 and their "
        "population, or give --strata FILE (a public list of every stratum and its "
        "population; unlisted strata count 0; the one source whose outcome never depends "
        "on the counts), or --strata input if the input lists every "
        "stratum and its keys are not a cross product (e.g. nested keys)"
    )


def match_to_list(
    frame: pd.DataFrame,
    listed: pd.DataFrame,
    keys: list[str],
    count: str,
    value_columns: list[str],
    source: str,
    list_source: str,
) -> pd.DataFrame:
    """The listed strata (``listed``: keys and ``value_columns``) with the input's counts,
    0 where the input has no row; refuses input rows that are not listed."""
    missing = [c for c in [*keys, *value_columns] if c not in listed.columns]
    if missing:
        raise ReleaseError(
            f"{list_source}: missing column(s) {missing}; expected the keys {keys} and "
            f"{value_columns}, found {list(listed.columns)}"
        )
    other = [c for c in listed.columns if c not in [*keys, *value_columns]]
    if other:
        raise ReleaseError(
            f"{list_source}: column(s) {other} are not the keys {keys} or {value_columns}; "
            "remove them (unnamed columns are refused so that nothing is used by accident)"
        )
    for table, where in ((listed, list_source), (frame, source)):
        if table.duplicated(subset=keys).any():
            raise ReleaseError(
                f"{where}: duplicate stratum/strata {describe_duplicates(table, keys)}; "
                "expected each stratum once"
            )
    # Matched on the keys as text, so a Parquet input with integer codes matches a CSV list.
    text = {key: str for key in keys}
    counts = frame[[*keys, count]].astype(text)
    names = listed[keys].astype(text)
    found = counts[keys].merge(names, on=keys, how="left", indicator=True)
    unlisted = found["_merge"].eq("left_only").to_numpy()
    if unlisted.any():
        raise ReleaseError(
            f"{source}: stratum/strata {_examples(frame.loc[unlisted, keys])} are not in the "
            f"list of strata {list_source}; expected every row of the input to be listed"
        )
    joined = names.merge(counts, on=keys, how="left", validate="one_to_one")
    out = listed.reset_index(drop=True).copy()
    zero = "0" if pd.api.types.is_string_dtype(joined[count]) else 0  # CSVs are read as text
    out[count] = joined[count].fillna(zero).to_numpy()
    return out
