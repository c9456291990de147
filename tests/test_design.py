from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpsynth.design import chunk_labels, chunk_members, epsilon_grid


def test_grid_is_log_spaced_and_includes_extras():
    grid = epsilon_grid(0.01, 100, 5, extra=[3.0])
    assert grid == [0.01, 0.1, 1.0, 3.0, 10.0, 100.0]


@given(
    n_eps=st.integers(1, 30),
    eps_per=st.integers(1, 10),
    n_sets=st.integers(1, 60),
    per=st.integers(1, 25),
)
def test_chunks_cover_the_design_exactly_once(n_eps, eps_per, n_sets, per):
    epsilons = list(np.arange(n_eps) + 1.0)
    seen = []
    for label in chunk_labels(n_eps, eps_per, n_sets, per):
        eps, ids = chunk_members(label, epsilons, eps_per, n_sets, per)
        seen += [(e, int(i)) for e in eps for i in ids]
    assert sorted(seen) == sorted((e, i) for e in epsilons for i in range(n_sets))


def test_label_outside_design_is_refused():
    with pytest.raises(ValueError, match="outside the design"):
        chunk_members("e0_d9", [1.0], 1, 4, 2)
