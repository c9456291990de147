"""Age adjustment of a study, checked before the first job (issue #33, item 5): single
years of age (``age.bands: single-years``, the standard spread evenly over single years),
bands against the standard's groups and the table's ages, disparities that compare ages,
band labels in the order of their ages, and hostile configs that a steward meets as
``snakemake`` stopping before any job with the key and the fix, never a traceback."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_project, filled_definition, snakemake

from dpcounts.data.standard_population import load_standard_population, standard_weights
from dpcounts.studies.stage.age import age_adjustment, single_year_standard
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.rates import band_key
from dpcounts.studies.stage.table import StudyDataError, load_study_table

STANDARD = REPO / "data/us_standard_population_2000.csv"
AREAS = [f"a{k:02d}" for k in range(6)]


def single_year_table(ages=None, seed=5) -> pd.DataFrame:
    """Areas x single years of age 0-89 and 90+ (labels '0', ..., '89', '90+'), deaths
    rising with age, two regions."""
    rng = np.random.default_rng(seed)
    ages = ages if ages is not None else [str(a) for a in range(90)] + ["90+"]
    rows = [(area, age, int(rng.integers(200, 2000))) for area in AREAS for age in ages]
    frame = pd.DataFrame(rows, columns=["area", "age", "pop"])
    first = frame["age"].str.extract(r"(\d+)", expand=False).astype(int)
    frame["deaths"] = rng.poisson(frame["pop"] * 1e-4 * np.exp(first / 20))
    frame["region"] = np.where(frame["area"] < "a03", "north", "south")
    return frame


def spec(path, **changes) -> dict:
    base = {
        "table": str(path),
        "keys": ["area", "age"],
        "count": "deaths",
        "population": "pop",
        "attributes": ["region"],
        "area": "area",
        "age": {"column": "age", "standard_population": str(STANDARD), "bands": "single-years"},
        "arms": {"pg": ["certified"]},
        "epsilons": [1.0],
        "sets": 2,
        "sets_per_job": 2,
        "epsilons_per_job": 1,
        "disparities": [
            {"name": "south_north", "numerator": {"region": "south"},
             "denominator": {"region": "north"}},
            {"name": "old_young", "numerator": {"age": [str(a) for a in range(65, 85)]},
             "denominator": {"age": [str(a) for a in range(20, 65)]}},
        ],
    }  # fmt: skip
    base.update(changes)
    return base


def study(tmp_path, frame=None, **changes):
    frame = single_year_table() if frame is None else frame
    path = tmp_path / "ages.csv"
    frame.to_csv(path, index=False)
    definition = filled_definition("s", spec(path, **changes))
    return definition, load_study_table(definition)


# ---- the single-year standard --------------------------------------------------------------
def test_the_single_year_standard_spreads_each_group_evenly():
    standard = load_standard_population(STANDARD)
    single = single_year_standard(standard)
    assert list(single["age_start"][:-1]) == list(range(85))
    assert single["age_start"].iloc[-1] == 85 and pd.isna(single["age_end"].iloc[-1])
    assert single["population"].sum() == pytest.approx(standard["population"].sum(), rel=1e-15)
    # ages 1-4 share the group's 15,191,619 evenly; 85+ is kept whole
    assert single.loc[single["age_start"].between(1, 4), "population"].tolist() == [
        15_191_619 / 4
    ] * 4  # fmt: skip
    assert single["population"].iloc[-1] == 4_259_173
    # every band on the shipped groups' edges keeps its weight
    bands = {"0-4": (0, 5), "5-44": (5, 45), "45-84": (45, 85), "85+": (85, None)}
    assert np.allclose(standard_weights(single, bands), standard_weights(standard, bands))


@pytest.mark.slow
def test_single_years_rates_follow_the_stated_rule(tmp_path):
    definition, strata = study(tmp_path)
    measures = study_measures(definition, strata)
    y = strata["deaths"].to_numpy()
    single = single_year_standard(load_standard_population(STANDARD))
    # the rule, by hand: years 0-84 weighted by their share of the spread standard, the
    # table's 85-89 and 90+ together as the standard's 85+
    weight = dict(zip(single["age_start"].astype(int), single["population"], strict=True))
    weight = {a: w / single["population"].sum() for a, w in weight.items()}
    first = strata["age"].str.extract(r"(\d+)", expand=False).astype(int)
    strata = strata.assign(band=np.minimum(first, 85))

    def adjusted(rows) -> float:
        by = rows.groupby("band")[["deaths", "pop"]].sum()
        return float(sum(weight[b] * by.loc[b, "deaths"] / by.loc[b, "pop"] for b in by.index))

    area_rates = measures.area_rates(y)[0]
    for k, area in enumerate(measures.areas):
        assert area_rates[k] == pytest.approx(adjusted(strata[strata["area"] == area]) * 1e5,
                                              rel=1e-12)  # fmt: skip
    values = measures.values(y, y).iloc[0]
    south, north = strata[strata["region"] == "south"], strata[strata["region"] == "north"]
    assert values["disparity:south_north"] == pytest.approx(
        adjusted(south) / adjusted(north), rel=1e-12
    )

    # a disparity that compares ages: each side adjusted over its own ages, the weights
    # normalised over them
    def adjusted_over(rows) -> float:
        by = rows.groupby("band")[["deaths", "pop"]].sum()
        total = sum(weight[b] for b in by.index)
        return sum(weight[b] / total * by.loc[b, "deaths"] / by.loc[b, "pop"] for b in by.index)

    old = strata[first.between(65, 84)]
    young = strata[first.between(20, 64)]
    assert values["disparity:old_young"] == pytest.approx(
        adjusted_over(old) / adjusted_over(young), rel=1e-12
    )
    assert np.isfinite(values.to_numpy(dtype=float)).all()


@pytest.mark.slow
def test_explicit_bands_on_the_standards_edges_are_unchanged(tmp_path):
    """Five-year labels without the shorthand: the weights are standard_weights' as
    before, and the shorthand gives the same rates (spreading evenly keeps each group's
    weight)."""
    ages = ["< 1", "1-4", *[f"{a}-{a + 4}" for a in range(5, 85, 5)], "85+"]
    frame = single_year_table(ages)
    plain, strata = study(tmp_path, frame, age={"column": "age",
                                                 "standard_population": str(STANDARD)},
                          disparities=[])  # fmt: skip
    shorthand, _ = study(tmp_path, frame, disparities=[])
    y = strata["deaths"].to_numpy()
    a = study_measures(plain, strata).area_rates(y)
    b = study_measures(shorthand, strata).area_rates(y)
    assert np.allclose(a, b, rtol=1e-12)
    weights = age_adjustment(plain, strata).weights
    assert list(weights.index) == sorted(ages)  # the sum's order as it always was


def test_band_labels_are_listed_in_the_order_of_their_ages():
    labels = ["10", "9", "85+", "Under 5", "100", "0", "80-84"]
    assert sorted(labels, key=band_key) == ["0", "Under 5", "9", "10", "80-84", "85+", "100"]


def test_an_area_without_people_in_some_years_is_named_in_age_order(tmp_path):
    frame = single_year_table()
    frame = frame[~((frame["area"] == "a02") & frame["age"].isin(["5", "10", "11"]))]
    with pytest.raises(StudyDataError) as error:
        study(tmp_path, frame)
    message = str(error.value)
    assert message.startswith("config key studies.s.area:")
    assert "'a02' in '5', '10', '11'" in message and "age.bands" in message


def test_single_years_without_the_shorthand_name_the_fix(tmp_path):
    bands = {str(a): [a, a + 1] for a in range(90)} | {"90+": [90, None]}
    age = {"column": "age", "standard_population": str(STANDARD), "bands": bands}
    with pytest.raises(StudyDataError) as error:
        study(tmp_path, age=age)
    message = str(error.value)
    assert message.startswith("config key studies.s.age.bands: band '1' (age 1)")
    assert "set studies.s.age.bands: single-years" in message
    assert "\n" not in message


def test_five_year_groups_written_as_numbers_are_not_single_years(tmp_path):
    """Ages labelled 0, 5, ..., 90 (five-year groups named by their first age) under
    single-years: refused, naming the labels seen and the groups that fit them (issue #52,
    item 4), where they used to be read as 19 single years and give wrong truths."""
    frame = single_year_table([str(a) for a in range(0, 95, 5)])
    with pytest.raises(StudyDataError) as error:
        study(tmp_path, frame, disparities=[])
    message = str(error.value)
    assert message.startswith("config key studies.s.age.bands: single-years reads")
    assert "'0', '5', '10', '15', '20', '25', '30', '35' and 11 more" in message
    assert "step by 5: no label holds ages 1-4 (between '0' and '5')" in message
    assert "studies.s.age.bands: {'0': [0, 5], '5': [5, 10], '10': [10, 15]," in message
    assert "'90': [90, null]}" in message
    assert "\n" not in message


def test_the_proposed_groups_are_accepted(tmp_path):
    """The mapping the refusal proposes, given as age.bands, runs."""
    frame = single_year_table([str(a) for a in range(0, 95, 5)])
    bands = {str(a): [a, a + 5] for a in range(0, 90, 5)} | {"90": [90, None]}
    age = {"column": "age", "standard_population": str(STANDARD), "bands": bands}
    definition, strata = study(tmp_path, frame, disparities=[], age=age)
    edges = age_adjustment(definition, strata).edges
    assert len(edges) == 18 and list(edges)[-1] == "85+"  # '85' and '90': the standard's 85+


def test_bands_that_leave_ages_out_are_refused(tmp_path):
    """A mapping that leaves 40-59 out: refused, naming the two bands, the ages left out,
    the labels and bands that meet."""
    first = single_year_table()["age"].str.extract(r"(\d+)", expand=False).astype(int)
    frame = single_year_table()
    frame["age"] = np.select([first < 40, first < 60], ["young", "middle"], "old")
    frame = frame[frame["age"] != "middle"]
    frame = frame.groupby(["area", "age", "region"], as_index=False)[["pop", "deaths"]].sum()
    bands = {"young": [0, 40], "old": [60, None]}
    age = {"column": "age", "standard_population": str(STANDARD), "bands": bands}
    with pytest.raises(StudyDataError) as error:
        study(tmp_path, frame, disparities=[], age=age)
    message = str(error.value)
    assert message.startswith(
        "config key studies.s.age.bands: bands 'young' (ages 0-39) and 'old' (ages 60+) of "
        "column 'age' leave ages 40-59 out"
    )
    assert "the column holds 'young', 'old'" in message
    assert "studies.s.age.bands: {'young': [0, 60], 'old': [60, null]}" in message


@pytest.mark.slow
def test_consecutive_single_years_from_a_later_age_are_accepted(tmp_path):
    """Consecutive single years still pass, also when the table starts above age 0 and
    ends with an open band or a closed year."""
    for ages in ([str(a) for a in range(20, 90)] + ["90+"], [str(a) for a in range(20, 101)]):
        definition, strata = study(tmp_path, single_year_table(ages), disparities=[])
        edges = age_adjustment(definition, strata).edges
        assert next(iter(edges.values())) == (20, 21)


# ---- hostile configs: the real path, snakemake stopping before any job ---------------------
def _bands(**edges):
    return {"column": "age", "standard_population": "data/us_standard_population_2000.csv",
            "bands": edges}  # fmt: skip


FIVE_YEARS = ["0-4", *[f"{a}-{a + 4}" for a in range(5, 85, 5)], "85+"]
HOSTILE = {
    "single years, no shorthand": (
        {"age": {"column": "age", "standard_population": "data/us_standard_population_2000.csv"}},
        None,
        "studies.mine.age.bands",
        "set studies.mine.age.bands: single-years",
    ),
    "single years typed out against the 5-year standard": (
        {"age": _bands(**{str(a): [a, a + 1] for a in range(90)}, **{"90+": [90, None]})},
        None,
        "studies.mine.age.bands: band '1'",
        "set studies.mine.age.bands: single-years",
    ),
    "band edges off the standard's groups": (
        {"age": _bands(**{"0-6": [0, 7], "7-14": [7, 15]})},
        ["0-6", "7-14"],
        "studies.mine.age.bands: band '0-6'",
        "merge the table's ages into bands on those edges",
    ),
    "five-year groups written as numbers": (
        {},
        [str(a) for a in range(0, 95, 5)],
        "studies.mine.age.bands: single-years reads each whole-number label",
        "studies.mine.age.bands: {'0': [0, 5], '5': [5, 10]",
    ),
    "bands leaving ages out": (
        {"age": _bands(**{"0-39": [0, 40], "60+": [60, None]})},
        ["0-39", "60+"],
        "studies.mine.age.bands: bands '0-39' (ages 0-39) and '60+' (ages 60+)",
        "leave ages 40-59 out",
    ),
    "bands overlapping": (
        {"age": _bands(**{"0-9": [0, 10], "5-14": [5, 15]})},
        ["0-9", "5-14"],
        "studies.mine.age.bands: bands '0-9' (ages 0-9) and '5-14'",
        "merge the overlapping rows into one label",
    ),
    "a band straddling the standard's open 85+": (
        {"age": _bands()},
        [*FIVE_YEARS[:-2], "80-89", "90+"],
        "studies.mine.age.bands: band '80-89' (ages 80-89) straddles age 85",
        "split the label at 85",
    ),
    "a band that holds no age": (
        {"age": _bands(**{"0-4": [5, 0]})},
        FIVE_YEARS,
        "studies.mine.age.bands.0-4",
        "with first < past",
    ),
    "a band of a label the table does not have": (
        {"age": _bands(**{"100": [100, 101]})},
        FIVE_YEARS,
        "studies.mine.age.bands.100: no stratum has age '100'",
        "expected a label of the column",
    ),
    "a misspelt shorthand": (
        {
            "age": {
                "column": "age",
                "standard_population": "data/us_standard_population_2000.csv",
                "bands": "single-year",
            }
        },
        None,
        "studies.mine.age.bands",
        "single-years",
    ),  # fmt: skip
    "the age column is not a key": (
        {
            "age": {
                "column": "agegroup",
                "bands": "single-years",
                "standard_population": "data/us_standard_population_2000.csv",
            }
        },
        None,
        "studies.mine.age.column: 'agegroup' is not one of the keys",
        "['area', 'age']",
    ),  # fmt: skip
    "the age column is missing from the table": (
        {
            "keys": ["area", "years"],
            "age": {
                "column": "years",
                "bands": "single-years",
                "standard_population": "data/us_standard_population_2000.csv",
            },
        },
        None,
        "studies.mine.keys: mine/ages.csv has no column 'years'",
        "columns are",
    ),  # fmt: skip
    "no standard population file": (
        {
            "age": {
                "column": "age",
                "standard_population": "data/no_such_standard.csv",
                "bands": "single-years",
            }
        },
        None,
        "studies.mine.age.standard_population",
        "expected a CSV with columns age_start, age_end",
    ),  # fmt: skip
    "a disparity on an absent attribute": (
        {"disparities": [{"name": "sex", "numerator": {"sex": "f"}, "denominator": {"sex": "m"}}]},
        None,
        "studies.mine.disparities[0].numerator.sex: no column 'sex'",
        "list a public column of the table under the study's attributes",
    ),  # fmt: skip
    "an area without people in some years": (
        {},
        "drop",
        "studies.mine.area: 1 area(s) of 'area' ('a04') have no population in some age band",
        "give coarser bands",
    ),
    "bands given as a list": (
        {"age": {**_bands(), "bands": [[0, 5], [5, 10]]}},
        None,
        "studies.mine.age.bands: got [[0, 5], [5, 10]], expected a mapping or exactly single-years",
        "label: [first age, first age past]",
    ),
    "a disparity's side without people in some years, no area": (
        {
            "area": None,
            "disparities": [
                {"name": "a4_a0", "numerator": {"area": "a04"}, "denominator": {"area": "a00"}}
            ],
        },
        "drop",
        "studies.mine.disparities[0].numerator: its strata have no population in age "
        "band(s) '3', '40'",
        "name the ages it compares (where: {age: [...]})",
    ),  # fmt: skip
    "an age disparity selecting a year its side lacks": (
        {
            "area": None,
            "disparities": [
                {
                    "name": "a4_a0",
                    "where": {"age": ["40", "41"]},
                    "numerator": {"area": "a04"},
                    "denominator": {"area": "a00"},
                }
            ],
        },
        "drop",
        "studies.mine.disparities[0].numerator: its strata have no population in age "
        "band(s) '40', which its filters select",
        "select only ages it has",
    ),
}


def write_project(work, changes, ages) -> None:
    if ages == "drop":
        frame = single_year_table()
        frame = frame[~((frame["area"] == "a04") & frame["age"].isin(["40", "3"]))]
    else:
        frame = single_year_table(ages)
    (work / "mine").mkdir(exist_ok=True)
    frame.to_csv(work / "mine/ages.csv", index=False)
    entry = {k: v for k, v in spec("mine/ages.csv").items() if k != "age"}
    entry["age"] = {"column": "age", "standard_population": "data/us_standard_population_2000.csv",
                    "bands": "single-years"}  # fmt: skip
    if ages is not None and ages != "drop":  # no single years: no disparity of them
        entry["disparities"] = entry["disparities"][:1]
    entry.update(changes)
    config = {"studies": {"mine": entry}}
    (work / "mine/config.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("ages"))


def dry_run(work):
    return snakemake(work, "results/studies/mine/guide.csv", "-n", "--cores", "1",
                     "--configfile", "mine/config.yaml")  # fmt: skip


@pytest.mark.process
def test_the_single_year_study_passes_the_check(project):
    write_project(project, {}, None)
    result = dry_run(project)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "study_strata" in result.stdout


@pytest.mark.process
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_age_config_stops_before_any_job(project, case):
    changes, ages, key, fix = HOSTILE[case]
    write_project(project, changes, ages)
    result = dry_run(project)
    said = result.stdout + result.stderr
    assert result.returncode != 0, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert key in result.stderr and fix in result.stderr, result.stderr[-3000:]
    assert "study_strata" not in result.stdout  # no job, not even planned
    assert len(result.stderr.strip().splitlines()) <= 6, result.stderr
    assert not (project / "results").exists()


def test_ages_stored_as_floats_are_single_years(tmp_path):
    """An age column written from floats (``7.0``, as R's data frames hold ages) reads as
    the same single years: the same rates as whole-number labels."""
    frame = single_year_table()
    whole, strata = study(tmp_path, frame, disparities=[])
    floats = frame.copy()
    first = floats["age"].str.extract(r"(\d+)", expand=False)
    floats["age"] = np.where(floats["age"] == "90+", "90+", first + ".0")
    as_floats, float_strata = study(tmp_path, floats, disparities=[])
    assert set(float_strata["age"]) >= {"0.0", "89.0"}
    a = study_measures(whole, strata).area_rates(strata["deaths"].to_numpy())
    b = study_measures(as_floats, float_strata).area_rates(float_strata["deaths"].to_numpy())
    assert np.array_equal(a, b)


def test_a_filter_value_the_table_lacks_lists_the_ages_in_order(tmp_path):
    disparities = [{"name": "d", "numerator": {"age": "95"}, "denominator": {"age": "5"}}]
    with pytest.raises(StudyDataError) as error:
        study(tmp_path, disparities=disparities)
    assert "'age' holds '0', '1', '2', '3', '4', '5', '6', '7' and 83 more" in str(error.value)


def test_labels_given_the_same_ages_are_one_band(tmp_path):
    """Single years mapped onto five-year bands in age.bands: the rates of the table
    summed into those bands."""
    ages = ["< 1", "1-4", *[f"{a}-{a + 4}" for a in range(5, 85, 5)], "85+"]
    bands = {"0": [0, 1], **{str(a): [1, 5] for a in range(1, 5)}}
    bands |= {str(a): [a - a % 5, a - a % 5 + 5] for a in range(5, 85)}
    bands |= {str(a): [85, None] for a in range(85, 90)} | {"90+": [85, None]}
    single = single_year_table()
    coarse, strata = study(tmp_path, single, disparities=[],
                           age={"column": "age", "standard_population": str(STANDARD),
                                "bands": bands})  # fmt: skip
    first = single["age"].str.extract(r"(\d+)", expand=False).astype(int)
    label = pd.cut(first, [0, 1, 5, *range(10, 90, 5), 200], right=False, labels=ages)
    summed = single.groupby(["area", label.astype(str).rename("age")], as_index=False)[
        ["deaths", "pop"]
    ].sum()
    summed["region"] = np.where(summed["area"] < "a03", "north", "south")
    plain = {"column": "age", "standard_population": str(STANDARD)}
    five, five_strata = study(tmp_path, summed, disparities=[], age=plain)
    a = study_measures(coarse, strata).area_rates(strata["deaths"].to_numpy())
    b = study_measures(five, five_strata).area_rates(five_strata["deaths"].to_numpy())
    assert np.allclose(a, b, rtol=1e-12)
