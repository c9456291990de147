"""Topic ``synthetic``: the synthetic sets, streamed against the hyperparameters: their
columns, sets, whole counts, sums, order, strata and (truncated) bounds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpcounts.mechanisms import registry
from dpcounts.release.manifest import SYNTHETIC_COUNT
from dpcounts.verify.checks import FAIL, OK, VALUE_RTOL, CheckSpec, _check, register
from dpcounts.verify.readers import MAX_CELL_BYTES, MAX_FOOTER_BYTES, _floats, _Release
from dpcounts.verify.words import _g, shown

register(
    CheckSpec("synthetic", "synthetic",
              "The synthetic sets could be read within the bounds (the rows the manifest "
              "says, flat columns of numbers or text, texts of at most "
              f"{MAX_CELL_BYTES >> 10} KiB, a footer of at most {MAX_FOOTER_BYTES >> 20} MiB); "
              "a table they refuse fails here, with the reason."),
    CheckSpec("synthetic", "columns",
              "`synthetic.*` has the columns `set`, the `keys`, the `attributes`, `count` and "
              "the `population_column`, in that order."),
    CheckSpec("synthetic", "sets",
              "`sets` sets of `strata` rows, numbered set by set: as many sets as the budget "
              "was split over."),
    CheckSpec("synthetic", "whole counts",
              "Every count is a whole number >= 0, as every draw of the mechanisms is."),
    CheckSpec("synthetic", "set sums",
              "Each set sums to the published `total`, as every synthetic set does."),
    CheckSpec("synthetic", "order",
              "Rows sorted by `set`, then by the `keys` (`dpcounts.data.validation.key_order`: "
              "a key column whose every value is a number numerically, ties such as `01` and "
              "`1` by their text, any other as text)."),
    CheckSpec("synthetic", "strata",
              "Every set has the keys, attributes and populations of `hyperparameters.*`, "
              "stratum by stratum: an attribute is the same on every set of a stratum."),
    CheckSpec("synthetic", "bounds",
              "truncated: every count within [`lower`, `upper`] of its stratum, the support "
              "the privacy bound is proven for."),
)  # fmt: skip


def _is_sorted(frame: pd.DataFrame, columns: list[str], in_key_order: bool) -> bool:
    """Whether the rows are in lexicographic order of ``columns``: the releases' key order
    (``in_key_order``, :func:`dpcounts.data.validation.key_order`: a column whose every value
    is a number numerically, ties broken by the text, any other as text), or each column
    compared as written or, when every value is a number, as numbers (releases made before
    key_order; a Parquet input's integer keys written to CSV read back as text)."""
    if in_key_order:
        return True
    for numeric in (False, True):
        view = frame[columns].copy()
        if numeric:
            for column in columns:
                converted = pd.to_numeric(view[column], errors="coerce")
                if not converted.isna().any():
                    view[column] = converted
        order = view.sort_values(columns, kind="stable").index
        if np.array_equal(order.to_numpy(), np.arange(len(view))):
            return True
    return False


class _Key:
    """One key column of the hyperparameters, to compare the synthetic sets' with: its
    distinct values and each stratum's position among them, so that a dictionary-encoded
    column compares by its dictionary (looked up once) and integer codes. ``reference``
    is an Arrow array, dictionary-encoded or not (then encoded here); its distinct values
    are looked up once, a null as one more value."""

    def __init__(self, reference):
        import pyarrow as pa
        import pyarrow.compute as pc

        if not pa.types.is_dictionary(reference.type):
            reference = pc.dictionary_encode(reference)
        values, indices = reference.dictionary, reference.indices
        if indices.null_count:
            values = pa.concat_arrays([values, pa.nulls(1, values.type)])
            indices = indices.fill_null(len(values) - 1)
        self.type = values.type
        self.distinct = pc.unique(values)
        self.codes = self._lookup(values)[indices.to_numpy(zero_copy_only=False)]
        self._dictionary = (None, None)

    def _lookup(self, values) -> np.ndarray:
        import pyarrow.compute as pc

        found = pc.index_in(values, value_set=self.distinct)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)

    def same(self, column, stratum: np.ndarray) -> np.ndarray:
        """Whether each value of ``column`` is the key of its stratum; values of another
        type that do not convert to the hyperparameters' are not equal."""
        import pyarrow as pa
        import pyarrow.compute as pc

        values = column.dictionary if pa.types.is_dictionary(column.type) else column
        if values.type != self.type:
            try:
                values = pc.cast(values, self.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return np.zeros(len(column), dtype=bool)
        if pa.types.is_dictionary(column.type):
            key, mapping = self._dictionary
            if key is None or len(key) != len(values) or not key.equals(values):
                mapping = self._lookup(values)
                self._dictionary = (values, mapping)
            if column.null_count or not len(mapping):
                indices = column.indices.fill_null(-1).to_numpy(zero_copy_only=False)
                ok = (indices >= 0) & bool(len(mapping))
                codes = np.where(ok, mapping[np.where(ok, indices, 0)] if len(mapping) else -1, -1)
            else:
                codes = mapping[column.indices.to_numpy()]
        else:
            codes = self._lookup(values)
        return codes == self.codes[stratum]


def _batch_floats(column, name: str) -> np.ndarray:
    """An Arrow column as doubles; text is parsed (correctly rounded) by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        return column.to_numpy(zero_copy_only=False).astype(float, copy=False)
    try:
        return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ValueError(f"column {shown(name, 60)} is not numeric") from None


def _synthetic_checks(release: _Release):
    """The synthetic sets, streamed batch by batch against the hyperparameters (held once):
    memory is that of the hyperparameters and a batch, whatever the number of sets; the
    first batch with a wrong row ends the reading (the checks then say where)."""
    m = release.manifest
    keys, sets, strata, total = m["keys"], m["sets"], m["strata"], m["total"]
    # beside the keys in the sets since the manifest names them (before: none there)
    published = list(m.get("attributes") or [])
    population = m["population_column"]
    name = shown(release.file("synthetic").name)
    out = []
    columns = ["set", *keys, *published, SYNTHETIC_COUNT, population]
    hyper = release.table("hyperparameters").reset_index(drop=True)
    comparable = len(hyper) == strata and set(keys + published) <= set(hyper.columns)
    if comparable:
        release.key_runs()  # before the sets' batches are held: the peak is one or the other
        references = [_Key(release.key_column("hyperparameters", k)) for k in keys + published]
        hyper_pop = _floats(hyper, "population")
        if registry.family(m["mechanism"]).bounded:
            lower, upper = _floats(hyper, "lower"), _floats(hyper, "upper")
    rows = counted = whole_count = 0
    first_bad_whole = first_bad_set = None
    bad_sets: list[int] = []
    wrong: dict[int, float] = {}
    wrong_sums = 0
    carry: tuple[int, float] | None = None
    inside_count, low_set, high_set = 0, math.inf, -math.inf
    keys_in_order = comparable
    stopped = None
    for batch in release.batches("synthetic"):
        if rows == 0:
            found = batch.schema.names
            if found != columns:
                out.append(
                    _check("synthetic", "columns", FAIL,
                          f"{name} has columns {shown(found)}, expected {shown(columns)}")
                )  # fmt: skip
                return out, True
            kind = (m.get("denominator") or {}).get("kind", "population")
            held = f"; {population!r} holds expected counts (SMRs)" if kind == "expected" else ""
            out.append(
                _check("synthetic", "columns", OK, f"{name}: columns {shown(columns)}{shown(held)}")
            )
        n = batch.num_rows
        expected_set, stratum = np.divmod(np.arange(rows, rows + n), strata)  # by position
        numbers = _batch_floats(batch.column("set"), "set")
        counts = _batch_floats(batch.column(SYNTHETIC_COUNT), SYNTHETIC_COUNT)
        bad = False
        if numbers.size:
            low_set, high_set = min(low_set, numbers.min()), max(high_set, numbers.max())
        off = np.flatnonzero(numbers != expected_set)
        if off.size and first_bad_set is None:
            first_bad_set, bad = rows + int(off[0]), True
        whole = np.isfinite(counts) & (counts == np.round(counts)) & (counts >= 0)
        whole_count += int(whole.sum())
        if not whole.all() and first_bad_whole is None:
            first_bad_whole, bad = rows + int(np.flatnonzero(~whole)[0]), True
        # sums of the sets by position; the last set of a batch may go on in the next
        first = int(expected_set[0]) if n else 0
        finite = counts if whole.all() else np.where(np.isfinite(counts), counts, 0)
        sums = np.bincount(expected_set - first, weights=finite)
        if carry is not None and carry[0] == first:
            sums[0] += carry[1]
        done = len(sums) if (rows + n) % strata == 0 else len(sums) - 1
        off_sums = np.flatnonzero(sums[:done] != total)
        if off_sums.size:
            wrong_sums += int(off_sums.size)
            bad = True
            for k in off_sums[: 3 - len(wrong)]:
                wrong[first + int(k)] = float(sums[k])
        carry = (first + done, float(sums[done])) if done < len(sums) else None
        if comparable:
            same = np.ones(n, dtype=bool)  # the keys, then the attributes
            for key, ref in zip(keys, references, strict=False):
                same &= ref.same(batch.column(key), stratum)
            alike = same.copy()
            for column, ref in zip(published, references[len(keys) :], strict=True):
                alike &= ref.same(batch.column(column), stratum)
            pop = _batch_floats(batch.column(population), population)
            expected_pop = hyper_pop[stratum]
            close = pop == expected_pop
            if not close.all():
                close |= np.isclose(pop, expected_pop, rtol=VALUE_RTOL, atol=0)
            good = alike & close
            if not good.all():
                keys_in_order = keys_in_order and bool(same.all())
                bad = True
                for k in np.unique(expected_set[~good])[:5]:
                    if len(bad_sets) < 5 and int(k) not in bad_sets:
                        bad_sets.append(int(k))
            if registry.family(m["mechanism"]).bounded:
                inside = (counts >= lower[stratum]) & (counts <= upper[stratum])
                inside_count += int(inside.sum())
                bad = bad or not inside.all()
        rows += n
        counted += n
        if bad and rows < sets * strata:
            stopped = rows
            break
    if rows == 0:
        raise ValueError(f"{name} holds no rows")
    read = (f"; reading stopped after row {stopped} of {sets * strata}, the first batch "
            "with a wrong row") if stopped else ""  # fmt: skip
    shape_ok = first_bad_set is None and stopped is None
    out.append(
        _check(
            "synthetic", "sets", OK if first_bad_set is None else FAIL,
            f"set numbers {_g(low_set)}..{_g(high_set)} over {counted} rows"
            + ("" if first_bad_set is None else f", first out of place at row {first_bad_set}")
            + f"; the manifest says {sets} set(s) x {strata} strata = {sets * strata} rows, "
            "set by set" + read,
            {"rows": counted, "expected_rows": sets * strata},
        )
    )  # fmt: skip
    out.append(
        _check(
            "synthetic", "whole counts", OK if first_bad_whole is None else FAIL,
            f"{whole_count} of {counted} counts whole and >= 0"
            + ("" if first_bad_whole is None else f" (first bad row {first_bad_whole})"),
        )
    )  # fmt: skip
    if wrong_sums:
        listed = ", ".join(f"set {k} sums to {_g(v)}" for k, v in wrong.items())
        more = f" ({wrong_sums} set(s) in all)" if wrong_sums > len(wrong) else ""
        detail = f"{listed}{more}; total {total}"
    else:
        complete = counted // strata
        detail = f"each of the {complete} set(s) sums to {total} (total {total})"
    out.append(
        _check("synthetic", "set sums", FAIL if wrong_sums else OK, detail,
              {"total": total, "wrong": wrong})
    )  # fmt: skip
    sorted_ok = (
        comparable
        and first_bad_set is None
        and keys_in_order
        and _is_sorted(hyper, list(keys), release.key_runs()[0])
    )
    out.append(
        _check(
            "synthetic", "order", OK if sorted_ok else FAIL,
            f"rows {'' if sorted_ok else 'NOT '}sorted by set then by the keys {shown(keys)}"
            + ("" if sorted_ok or not comparable else
               " (each set in the hyperparameters' order, itself sorted by the keys)"),
        )
    )  # fmt: skip
    if comparable:
        out.append(
            _check(
                "synthetic", "strata", FAIL if bad_sets else OK,
                f"set(s) {bad_sets[:5]} differ from the hyperparameters' keys"
                + (", attributes" if published else "") + " or populations"
                if bad_sets
                else f"every set has the {strata} keys"
                + (f", attributes {shown(published)}" if published else "")
                + " and populations of the hyperparameters",
            )
        )  # fmt: skip
    else:
        out.append(
            _check("synthetic", "strata", FAIL,
                  f"not compared: {len(hyper)} hyperparameter rows, expected {strata}")
        )  # fmt: skip
    if registry.family(m["mechanism"]).bounded and comparable and shape_ok:
        out.append(
            _check(
                "synthetic", "bounds", OK if inside_count == counted else FAIL,
                f"{inside_count} of {counted} counts within [lower, upper] of the "
                "hyperparameters",
            )
        )  # fmt: skip
    return out, True
