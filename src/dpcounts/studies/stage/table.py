"""The strata of a study: read, selected, checked against the study's definition, sorted
(:func:`dpcounts.data.validation.key_order`, which releases use too), with a report of what
was read and done to the table (:func:`read_study_table`).

:func:`load_study_table` is what runs before any job (the workflow calls it when it reads
the config): every column, row selection, filter value and age band the definition names
must exist in the data, or :class:`StudyDataError` names the config key, the value and
what the data holds; so must the geometry's key column, with one shape per area. The
counts then pass the fractional-count rule and the one strata validator,
:func:`dpcounts.data.rounding.round_counts` and
:func:`dpcounts.data.validation.validate_strata`, which ``dpcounts synthesize`` uses too.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from dpcounts.data.rounding import RoundingReport, round_counts
from dpcounts.data.validation import (
    CSV_SUFFIXES,
    key_kinds,
    key_order,
    refuse_empty_cells,
    validate_strata,
)
from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.selection import (
    SHOWN,
    StudyDataError,
    filter_mask,
    levels,
    matching,
    natural_key,
)


def read_input(definition: StudyDefinition) -> pd.DataFrame:
    """The study's table as read from disk: CSV (text columns), Parquet or a WONDER export."""
    from dpcounts.data.validation import read_table

    path = definition.table
    where = f"config key studies.{definition.name}.table"
    if not path.is_file():
        raise StudyDataError(f"{where}: {path} not found; expected a CSV, Parquet or WONDER file")
    if definition.wonder:
        from dpcounts.data.wonder import read_wonder

        return read_wonder(path)
    try:
        return read_table(path)
    except ValueError as err:
        raise StudyDataError(f"{where}: {err}") from err


def _select_rows(definition: StudyDefinition, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows matching ``rows`` (the selection columns are dropped)."""
    mask = np.ones(len(frame), dtype=bool)
    for column, wanted in definition.rows.items():
        key = f"studies.{definition.name}.rows"
        mask &= matching(frame, column, wanted, key, str(definition.table))
    selected = frame.loc[mask]
    return selected.drop(columns=[c for c in definition.rows if c not in definition.columns])


def age_bands(definition: StudyDefinition, strata: pd.DataFrame) -> dict[str, tuple]:
    """Band label -> (first age, first age past), from the config or read from the labels,
    in the order of their ages (:func:`dpcounts.studies.stage.age.label_bands`)."""
    from dpcounts.studies.stage.age import label_bands

    return label_bands(definition, strata)


def _round_counts(
    definition: StudyDefinition, frame: pd.DataFrame
) -> tuple[pd.DataFrame, RoundingReport]:
    """Fractional counts refused or rounded by the helper ``dpcounts synthesize`` uses."""
    try:
        return round_counts(
            frame,
            count=definition.count,
            keys=list(definition.keys),
            rounding=definition.rounding,
            source=str(definition.table),
            option=f"studies.{definition.name}.rounding: nearest",
        )
    except ValueError as err:
        raise StudyDataError(str(err)) from None


def _geometry_table(definition: StudyDefinition) -> pd.DataFrame:
    """The geometry file's key (and outline) columns, read without the shapes."""
    path, name = definition.geometry, definition.name
    where = f"config key studies.{name}.geometry.path"
    if not path.exists():
        raise StudyDataError(f"{where}: {path} not found; expected the areas' boundaries "
                             "(GeoParquet, GeoPackage, shapefile or GeoJSON)")  # fmt: skip
    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        if parquet:
            import pyarrow.parquet as pq

            columns = [c for c in pq.read_schema(path).names if c != "geometry"]
        else:
            import pyogrio

            columns = list(pyogrio.read_info(path)["fields"])
    except Exception as err:  # pyarrow and GDAL raise errors of their own
        raise StudyDataError(f"{where}: {path} could not be read ({err}); expected "
                             "GeoParquet, GeoPackage, shapefile or GeoJSON") from None  # fmt: skip
    wanted = {"key": definition.geometry_key, "outline": definition.geometry_outline}
    for key, column in wanted.items():
        if column is not None and column not in columns:
            raise StudyDataError(f"config key studies.{name}.geometry.{key}: no column "
                                 f"{column!r} in {path}; columns are {columns}")  # fmt: skip
    read = [c for c in wanted.values() if c is not None]
    if parquet:
        return pd.read_parquet(path, columns=read)
    import pyogrio

    return pyogrio.read_dataframe(path, columns=read, read_geometry=False)


def _listed(values) -> str:
    """Up to :data:`SHOWN` values, quoted, then how many more."""
    values = sorted(values, key=natural_key)
    text = ", ".join(repr(v) for v in values[:SHOWN])
    return text + (f" and {len(values) - SHOWN} more" if len(values) > SHOWN else "")


def check_geometry(definition: StudyDefinition, strata: pd.DataFrame) -> None:
    """The geometry names a key column with one shape per value, and every area of the
    strata is one of its values (compared as text, as the maps join them): an area without
    a shape stops the study, naming them, unless ``geometry.missing: allow`` (then the
    map's footnote lists them). Shapes of no area are allowed (the maps leave them out)."""
    name, key, path = definition.name, definition.geometry_key, definition.geometry
    table = _geometry_table(definition)
    values = table[key].astype(str)
    repeated = values[values.duplicated()].unique()
    if len(repeated):
        shown = ", ".join(repr(v) for v in sorted(repeated)[:SHOWN])
        more = f" and {len(repeated) - SHOWN} more" if len(repeated) > SHOWN else ""
        raise StudyDataError(
            f"config key studies.{name}.geometry.key: {key!r} takes the same value on more "
            f"than one shape of {path}: {shown}{more}; expected one shape per area. A name "
            "that two areas share (counties of one name in two states) cannot key a map "
            "or a ranking: key the areas by a unique code such as FIPS (or dissolve the "
            f"shapes by {key!r} first if they are parts of one area)"
        )
    areas = strata[definition.area].astype(str)
    if not areas.isin(set(values)).any():
        raise StudyDataError(
            f"config key studies.{name}.geometry.key: none of the areas of "
            f"{definition.area!r} ({levels(areas)}) is a value of {key!r} in {path} (which "
            f"holds {levels(values)}); expected the same codes, compared as text"
        )
    missing = set(areas) - set(values)
    if missing and definition.geometry_missing != "allow":
        spare = set(values) - set(areas)
        spare_line = (f"\n  {len(spare)} shape(s) match no area: {_listed(spare)}"
                      if spare else "")  # fmt: skip
        raise StudyDataError(
            f"config key studies.{name}.geometry.key: {len(missing)} of {areas.nunique()} "
            f"areas of {definition.area!r} have no shape in {path}: {_listed(missing)}"
            f"\n  {key!r} of {path} holds {levels(values)}{spare_line}"
            "\n  expected one shape for every area, its code compared as text (codes shifted "
            "or retyped would colour one area's shape with another's rate); to map the "
            f"others and list these in the map's footnote, set studies.{name}.geometry."
            "missing: allow"
        )


class StudyTable(NamedTuple):
    """A study's strata and the report of what was read and done to its table."""

    strata: pd.DataFrame
    report: dict


def load_study_table(definition: StudyDefinition) -> pd.DataFrame:
    """The study's strata (:func:`read_study_table` without its report)."""
    return read_study_table(definition).strata


def read_study_table(definition: StudyDefinition) -> StudyTable:
    """The study's strata: its keys (as text), attributes, count and population (and the
    prior-rate column with ``prior.source: column``), sorted by the keys
    (:func:`dpcounts.data.validation.key_order`: ids 1, 2, 10 numerically), and the report
    of what was done to the table (``results/studies/<name>/table.json``): rows read and
    selected, empty strata left out, the rounding (strata changed, total before and
    after), the key order; ``warnings`` holds a line for each change to a count.

    Strata with zero population and zero count are left out (their emptiness is public:
    the populations are); every other stratum passes :func:`validate_strata`. A key or
    attribute cell that is empty is refused naming the column and the file's lines.
    """
    name = definition.name
    frame = read_input(definition)
    rows_read = len(frame)
    frame = _select_rows(definition, frame)
    rows_selected = len(frame)
    labels = {
        **{c: "keys" for c in definition.keys},
        definition.count: "count",
        definition.population: "population",
        **{c: "attributes" for c in definition.attributes},
    }
    if definition.prior.source == "column":
        labels[definition.prior.column] = "prior.column"
    for column, key in labels.items():
        if column not in frame.columns:
            raise StudyDataError(
                f"config key studies.{name}.{key}: {definition.table} has no column "
                f"{column!r}; columns are {list(frame.columns)}"
            )
    csv = not definition.wonder and definition.table.name.lower().endswith(CSV_SUFFIXES)
    try:
        refuse_empty_cells(
            frame, [*definition.keys, *definition.attributes], str(definition.table), lines=csv
        )
    except ValueError as err:
        raise StudyDataError(f"{err} (studies.{name})") from None
    frame = frame[list(labels)].reset_index(drop=True)
    frame, rounding = _round_counts(definition, frame)
    population = pd.to_numeric(frame[definition.population], errors="coerce")
    counts = pd.to_numeric(frame[definition.count], errors="coerce")
    empty = (population == 0) & (counts == 0)
    frame = frame.loc[~empty.to_numpy()].reset_index(drop=True)
    validate_strata(
        frame,
        count=definition.count,
        population=definition.population,
        keys=list(definition.keys),
        source=f"{definition.table} (studies.{name})",
        denominator=definition.denominator,
    )
    frame[definition.count] = pd.to_numeric(frame[definition.count]).astype("int64")
    frame[definition.population] = pd.to_numeric(frame[definition.population]).astype(float)
    order = key_kinds(frame, list(definition.keys))
    frame = key_order(frame, list(definition.keys))
    for column in definition.keys:
        frame[column] = frame[column].astype(str)
    for k, disparity in enumerate(definition.disparities):
        key = f"studies.{name}.disparities[{k}]"
        where = filter_mask(frame, disparity.where, f"{key}.where")
        for side in ("numerator", "denominator"):
            mask = filter_mask(frame, getattr(disparity, side), f"{key}.{side}") & where
            if not mask.any():
                raise StudyDataError(f"config key {key}.{side}: no stratum matches it together "
                                     f"with where = {dict(disparity.where)}")  # fmt: skip
    if definition.age is not None:  # bands, standard and populations (dpcounts.studies.stage.age)
        from dpcounts.studies.stage.age import age_adjustment

        age_adjustment(definition, frame)
    if definition.geometry is not None:
        check_geometry(definition, frame)
    warnings = []
    if rounding.strata_changed:
        warnings.append(f"{definition.table} (studies.{name}): {rounding.describe()}")
    report = {
        "study": name,
        "table": str(definition.table),
        "rows_read": rows_read,
        "rows_selection": {c: list(v) for c, v in definition.rows.items()},
        "rows_selected": rows_selected,
        "columns": list(labels),
        "empty_strata_dropped": int(empty.sum()),
        "rounding": rounding.as_dict(),
        "strata": len(frame),
        "total": int(frame[definition.count].sum()),
        "denominator": definition.denominator,
        "key_order": order,
        "stored_as": {
            **{c: "text" for c in definition.keys},
            definition.count: "int64",
            definition.population: "float64",
        },
        "warnings": warnings,
    }
    return StudyTable(frame, report)
