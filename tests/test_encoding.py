"""dpcounts.encoding.factorize: pandas' factorisation, through pyarrow where it holds the
text, computed once per array and shared by the steps of a release that ask for it."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpcounts import encoding
from dpcounts.encoding import factorize

TEXT = st.text(alphabet=st.sampled_from(["a", "B", "0", "1", " ", "é", "\u00e9", "z"]), max_size=3)


@given(st.lists(TEXT, min_size=1, max_size=30), st.sampled_from(["object", "string", "str"]))
def test_codes_group_and_order_as_pandas(values, dtype):
    """Equal texts share a code and only they do; sorted, the codes and uniques are
    pandas' own (Python's order of the texts)."""
    column = pd.Series(values, dtype=dtype)
    codes, uniques = factorize(column)
    assert [uniques[c] for c in codes] == list(values)
    assert len(set(uniques)) == len(uniques)
    codes, uniques = factorize(column, sort=True)
    theirs, their_uniques = pd.factorize(column, sort=True, use_na_sentinel=False)
    assert np.array_equal(codes, theirs) and list(uniques) == list(their_uniques)


def test_an_array_is_encoded_once_and_forgotten_with_it():
    """A pyarrow column's encoding is kept while its array lives (a copy of the frame
    shares it), read-only, and goes with the array."""
    frame = pd.DataFrame({"k": pd.Series(["b", "a", "b"], dtype="string[pyarrow]")})
    codes, _ = factorize(frame["k"])
    again, _ = factorize(frame.copy()["k"])
    assert again is codes and not codes.flags.writeable
    with pytest.raises(ValueError):
        codes[0] = 5
    known = len(encoding._ENCODED)
    del frame, codes, again
    gc.collect()
    assert len(encoding._ENCODED) == known - 1
