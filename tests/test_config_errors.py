"""check_config: a bad config stops the run with a few lines naming the key, the value and
what was expected; non-finite numbers are refused; defaults fill in as Snakemake's validate."""

from __future__ import annotations

import copy
from functools import reduce

import pytest
import yaml
from workflow_helpers import REPO, TEST_CONFIG, copy_project, merged, snakemake

from dpcounts.config_check import ConfigError, check_config, load_schema

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
MAX_LINES = 5

INF, NAN = float("inf"), float("nan")


def shipped(path: str = "config/config.yaml") -> dict:
    return yaml.safe_load((REPO / path).read_text())


def with_value(keys: tuple, value) -> dict:
    """The shipped config with the value at ``keys`` (mapping keys and list indices) set."""
    config = copy.deepcopy(shipped())
    parent = reduce(lambda node, key: node[key], keys[:-1], config)
    parent[keys[-1]] = value
    return config


def refused(config: dict) -> ConfigError:
    """The ConfigError of ``config``, checked to be short and free of schema dumps."""
    with pytest.raises(ConfigError) as info:
        check_config(config, SCHEMA)
    message = str(info.value)
    assert 1 <= len(message.splitlines()) <= MAX_LINES, message
    assert max(len(line) for line in message.splitlines()) <= 200, message
    assert "additionalProperties" not in message and "$schema" not in message
    return info.value


# ---- wrong values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "value", "first_line"),
    [
        (("seed",), "abc", 'seed: got "abc", expected an integer'),
        (("seed",), -1, "seed: got -1, expected an integer >= 0"),
        (("seed",), True, "seed: got true, expected an integer"),
        (("study1", "enabled"), "yes", 'study1.enabled: got "yes", expected true or false'),
        (("study1", "epsilons", "stop"), -1, "study1.epsilons.stop: got -1, expected a number > 0"),
        (("study1", "epsilons", "num"), 2.5, "study1.epsilons.num: got 2.5, expected an integer"),
        (("study1", "epsilons"), [1, 2], "study1.epsilons: got [1, 2], expected a mapping"),
        (
            ("study1", "appendix_c", "correlation"),
            1.5,
            "study1.appendix_c.correlation: got 1.5, expected a number <= 1",
        ),
        (
            ("studies", "pennlc", "truncation", "tail"),
            0.5,
            "studies.pennlc.truncation.tail: got 0.5, expected a number < 0.5",
        ),
        (
            ("studies", "pennlc", "truncation", "tail"),
            "x",
            'studies.pennlc.truncation.tail: got "x", expected a number or null',
        ),
        (
            ("study2", "primary"),
            "untruncated",
            'study2.primary: got "untruncated", expected one of truncated_paper, '
            "truncated_exact, truncated_certified",
        ),
        (
            ("figure_formats",),
            ["png", "gif"],
            'figure_formats[1]: got "gif", expected one of png, pdf, svg',
        ),
        (("figure_formats",), [], "figure_formats: got [], expected a list of at least 1 item"),
        (
            ("study1", "scenarios"),
            [1, 1],
            "study1.scenarios: got [1, 1], expected a list without repeated items",
        ),
        # items of nested lists: the index is in the path
        (
            ("studies", "pennlc", "disparities", 0, "name"),
            "Race Female",
            'studies.pennlc.disparities[0].name: got "Race Female", '
            "expected a string matching ^[A-Za-z0-9_]+$",
        ),
        (
            ("pseudo_posterior", "datasets", "negbin_mixture", "components", 1, "weight"),
            0,
            "pseudo_posterior.datasets.negbin_mixture.components[1].weight: got 0, "
            "expected a number > 0",
        ),
        (
            ("study2", "toy", "expected"),
            [15, 85, 10],
            "study2.toy.expected: got [15, 85, 10], expected a list of at most 2 items",
        ),
    ],
)
def test_a_wrong_value_names_the_key_the_value_and_what_was_expected(keys, value, first_line):
    error = refused(with_value(keys, value))
    assert str(error).splitlines()[0] == first_line
    assert error.path == first_line.split(": ")[0]


def test_the_key_description_follows_when_the_schema_has_one():
    message = str(refused(with_value(("seed",), -1)))
    assert message.splitlines()[1] == (
        "  (root seed; every job draws from SeedSequence(seed, spawn_key=<job key>))"
    )


# ---- unknown and missing keys -----------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "first_line"),
    [
        (
            ("sed",),
            "sed: unknown key; did you mean seed? (allowed: seed, figure_formats, job_structure, "
            "data, truth, study1, study2, pseudo_posterior, studies)",
        ),
        (
            ("study1", "epsilons", "stpo"),
            "study1.epsilons.stpo: unknown key; did you mean stop? (allowed: start, stop, num)",
        ),
        (
            ("study1", "appendix_c", "national_rate_per_100k", "90+"),
            "study1.appendix_c.national_rate_per_100k.90+: unknown key "
            "(allowed: 45-54, 55-64, 65-74, 75-84, 85+)",
        ),
    ],
)
def test_an_unknown_key_is_named_with_the_allowed_ones(keys, first_line):
    error = refused(with_value(keys, 1))
    assert str(error).splitlines()[0] == first_line
    assert error.path == ".".join(keys)


@pytest.mark.parametrize(
    ("old", "new"), [("datasets", "sets"), ("datasets_per_job", "sets_per_job")]
)
def test_a_renamed_key_is_refused_with_its_new_name(old, new):
    """Issue #51, one meaning per word: a study's synthetic sets were its ``datasets``. The
    old key is no alias: it stops the run, naming the key to write instead; the new key
    with the same value passes, and Study 1's ``datasets`` (simulated confidential tables)
    keeps its name."""
    config = copy.deepcopy(shipped())
    entry = config["studies"]["pennlc"]
    entry[old] = entry.pop(new)
    error = refused(config)
    assert str(error).splitlines()[0] == (
        f"studies.pennlc.{old}: renamed; write studies.pennlc.{new} instead "
        "(same meaning and values)"
    )
    assert error.path == f"studies.pennlc.{old}"
    entry[new] = entry.pop(old)
    check_config(config, SCHEMA)
    assert config["study1"]["datasets"] == shipped()["study1"]["datasets"]


@pytest.mark.parametrize(
    ("keys", "first_line"),
    [
        (
            ("studies", "pennlc", "count"),
            "studies.pennlc.count: missing, a required key; expected a string",
        ),
        (
            ("studies", "standin", "disparities", 1, "numerator"),
            "studies.standin.disparities[1].numerator: missing, a required key; expected a mapping",
        ),
        (
            ("pseudo_posterior", "datasets", "poisson", "size"),
            "pseudo_posterior.datasets.poisson.size: missing, a required key; "
            "expected an integer >= 2",
        ),
    ],
)
def test_a_missing_required_key_is_named_with_what_it_holds(keys, first_line):
    config = copy.deepcopy(shipped())
    parent = reduce(lambda node, key: node[key], keys[:-1], config)
    del parent[keys[-1]]
    error = refused(config)
    assert str(error).splitlines()[0] == first_line


def test_a_key_required_by_a_condition_says_which():
    config = with_value(("truth", "source"), "wonder")  # the WONDER export's path is null
    assert str(refused(config)).splitlines()[0] == (
        "truth.wonder.path: got null, expected a string (needed because truth.source is wonder)"
    )


def test_a_badly_named_key_is_named():
    config = copy.deepcopy(shipped())
    datasets = config["pseudo_posterior"]["datasets"]
    datasets["Bad-Name"] = datasets["poisson"]
    error = refused(config)
    assert str(error) == (
        'pseudo_posterior.datasets.Bad-Name: key "Bad-Name" not allowed, '
        "expected a key matching ^[a-z0-9_]+$"
    )


def test_other_problems_are_counted_not_listed():
    config = with_value(("seed",), -1)
    config["study1"]["epsilons"]["stop"] = 0
    message = str(refused(config))
    assert message.splitlines()[-1] == "  (1 other problem in the config)"


def test_a_config_that_is_not_a_mapping_is_refused():
    assert "got [1, 2]" in str(refused([1, 2]))  # type: ignore[arg-type]


# ---- non-finite numbers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "value", "message"),
    [
        # the schema alone accepts these two: exclusiveMinimum 0 and no bound at all
        (
            ("studies", "pennlc", "epsilons", "stop"),
            INF,
            "studies.pennlc.epsilons.stop: .inf is not a finite number",
        ),
        (
            ("pseudo_posterior", "lw", "g"),
            -INF,
            "pseudo_posterior.lw.g: -.inf is not a finite number",
        ),
        (
            ("study1", "epsilons", "start"),
            NAN,
            "study1.epsilons.start: .nan is not a finite number",
        ),
        (("study1", "epsilons", "num"), INF, "study1.epsilons.num: .inf is not a finite number"),
        (("study1", "map_epsilons", 1), NAN, "study1.map_epsilons[1]: .nan is not a finite number"),
        (
            ("study2", "toy", "expected", 0),
            INF,
            "study2.toy.expected[0]: .inf is not a finite number",
        ),
        (
            ("pseudo_posterior", "datasets", "negbin_mixture", "components", 0, "dispersion"),
            NAN,
            "pseudo_posterior.datasets.negbin_mixture.components[0].dispersion: "
            ".nan is not a finite number",
        ),
        (
            ("truth", "model", "total_deaths"),
            NAN,
            "truth.model.total_deaths: .nan is not a finite number",
        ),
    ],
)
def test_a_non_finite_number_is_refused_by_key(keys, value, message):
    error = refused(with_value(keys, value))
    assert str(error) == message
    assert error.path == message.split(": ")[0]


@pytest.mark.parametrize("spelling", [".inf", "-.Inf", ".NaN", ".nan"])
def test_the_yaml_spellings_of_non_finite_numbers_are_refused(spelling):
    override = yaml.safe_load(f"epsilons: {{stop: {spelling}}}")
    config = copy.deepcopy(shipped())
    config["studies"]["pennlc"]["epsilons"].update(override["epsilons"])
    assert str(refused(config)).startswith("studies.pennlc.epsilons.stop: ")
    assert str(refused(config)).endswith(" is not a finite number")


# ---- defaults -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(shipped(), id="config.yaml"),
        pytest.param(merged(shipped(), shipped(TEST_CONFIG)), id="test-config.yaml"),
        pytest.param({}, id="empty"),
        pytest.param({"seed": 3, "figure_formats": ["png"]}, id="minimal"),
        pytest.param({"truth": {"source": "wonder", "wonder": {"path": "w.txt"}}}, id="wonder"),
    ],
)
def test_defaults_are_filled_exactly_as_snakemake_validate_fills_them(config):
    from snakemake.utils import validate

    by_snakemake, by_dpcounts = copy.deepcopy(config), copy.deepcopy(config)
    validate(by_snakemake, str(SCHEMA))
    check_config(by_dpcounts, SCHEMA)
    assert by_dpcounts == by_snakemake


def test_defaults_are_copies_not_the_schema_s_objects():
    schema = load_schema(SCHEMA)
    first, second = {}, {}
    check_config(first, schema)
    first["study1"]["scenarios"].append(5)
    first["study2"]["pennlc"]["figure6"].clear()
    check_config(second, schema)
    assert second["study1"]["scenarios"] == [1, 2, 3, 4]
    assert len(second["study2"]["pennlc"]["figure6"]) == 2
    assert schema == load_schema(SCHEMA)


# ---- the workflow -------------------------------------------------------------------------


@pytest.mark.process
def test_snakemake_stops_on_an_infinite_epsilon_with_a_short_message(tmp_path):
    work = copy_project(tmp_path / "proj")
    (work / "inf.yaml").write_text("studies:\n  pennlc:\n    epsilons: {stop: .inf}\n")
    result = snakemake(work, "-n", "--cores", "1", "--configfile", "inf.yaml")
    assert result.returncode != 0
    assert len(result.stderr.splitlines()) <= 15, result.stderr
    assert "config error: studies.pennlc.epsilons.stop: .inf is not a finite number" in (
        result.stderr
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert not (work / "results").exists()
