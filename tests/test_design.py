from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpcounts.design import (
    GridError,
    at_epsilon,
    calibration_chunk,
    chunk_labels,
    chunk_members,
    epsilon_chunks,
    epsilon_grid,
    epsilon_label,
    epsilon_labels,
    epsilon_value,
    grid_from_config,
)


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


@given(
    start=st.floats(1e-4, 1.0),
    stop=st.floats(1.0, 1e4),
    num=st.integers(1, 60),
    extra=st.lists(st.floats(1e-3, 1e3), max_size=3),
)
def test_every_grid_epsilon_has_an_exact_invertible_label(start, stop, num, extra):
    grid = epsilon_grid(start, stop, num, extra)
    labels = [epsilon_label(e) for e in grid]
    assert [epsilon_value(label) for label in labels] == grid  # exact, float for float
    assert len(set(labels)) == len(grid)  # distinct epsilons, distinct labels


def test_labels_are_readable_and_strict():
    assert [epsilon_label(e) for e in (0.01, 0.014678, 1.0, 10.0, 100.0)] == [
        "0.01", "0.014678", "1", "10", "100"
    ]  # fmt: skip
    for bad in (1.0000001, 0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="not a grid value"):
            epsilon_label(bad)
    with pytest.raises(ValueError, match="not an epsilon label"):
        epsilon_value("1.0")  # the label of 1.0 is "1"


def test_lookups_match_labels_only():
    column = np.array([0.01, 1.0, np.nan, 1.00001, 10.0, 1.0])
    assert at_epsilon(column, 1.0).tolist() == [False, True, False, False, False, True]
    assert at_epsilon(column, [0.01, 10.0]).tolist() == [1, 0, 0, 0, 1, 0]
    assert np.isclose(1.0, 1.00001)  # what a float-closeness lookup would have confused
    assert not at_epsilon(column, 1.00002).any()  # a grid value absent from the column
    assert not at_epsilon(column, []).any() and at_epsilon([], 1.0).size == 0
    assert epsilon_labels(column)[2] is None


def test_a_draw_chunk_names_its_calibration_chunk():
    assert calibration_chunk("e3_d12") == "e3"
    assert all(
        calibration_chunk(label) in epsilon_chunks(7, 2) for label in chunk_labels(7, 2, 5, 2)
    )
    with pytest.raises(ValueError, match="not a draw chunk"):
        calibration_chunk("e3")


def test_grid_from_config_joins_and_rounds_the_map_epsilons():
    grid, maps = grid_from_config({"start": 0.1, "stop": 10, "num": 3}, [2.0000004, 10])
    assert grid == (0.1, 1.0, 2.0, 10.0) and maps == (2.0, 10.0)
    assert grid_from_config([4.0, 0.5, 4.0]) == ((0.5, 4.0), ())


@pytest.mark.parametrize(
    ("epsilons", "maps", "key"),
    [
        ({"start": 1, "stop": 0.5, "num": 3}, [], "epsilons.stop"),
        ({"start": 1, "stop": 2, "num": 0}, [], "epsilons.num"),
        ([0.5, -1.0], [], "epsilons[1]"),
        ("1, 2", [], "epsilons"),
        ([1.0], [1.0, float("inf")], "map_epsilons[1]"),
    ],
)
def test_grid_from_config_names_the_wrong_key(epsilons, maps, key):
    with pytest.raises(GridError) as caught:
        grid_from_config(epsilons, maps)
    assert caught.value.key == key
