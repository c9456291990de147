"""The config schema: defaults fill in, bad keys and values stop the run with a clear message."""

from __future__ import annotations

import copy

import pytest
import yaml
from workflow_helpers import REPO, TEST_CONFIG, copy_project, merged, snakemake

from dpcounts.config_check import ConfigError, check_config

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def load(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())


def test_shipped_configs_are_valid():
    """The defaults alone, and the test config merged over them (as `--configfile` does)."""
    check_config(load("config/config.yaml"), SCHEMA)
    check_config(merged(load("config/config.yaml"), load(TEST_CONFIG)), SCHEMA)


def test_defaults_are_filled_in():
    config = {"seed": 3, "figure_formats": ["png"]}
    check_config(config, SCHEMA)
    assert "data" in config and "truth" in config


def test_unknown_top_level_key_is_named():
    config = load("config/config.yaml")
    config["sed"] = 1
    with pytest.raises(ConfigError, match="sed"):
        check_config(config, SCHEMA)


@pytest.mark.parametrize(
    ("key", "value"),
    [("seed", -1), ("seed", "abc"), ("figure_formats", ["gif"]), ("figure_formats", [])],
)
def test_bad_values_are_rejected(key, value):
    config = copy.deepcopy(load("config/config.yaml"))
    config[key] = value
    with pytest.raises(ConfigError, match=key):
        check_config(config, SCHEMA)


@pytest.mark.process
def test_bad_config_stops_snakemake_before_any_job(tmp_path):
    work = copy_project(tmp_path / "proj")
    (work / "bad.yaml").write_text("seed: -5\n")
    result = snakemake(work, "-n", "--cores", "1", "--configfile", "bad.yaml")
    assert result.returncode != 0
    message = result.stdout + result.stderr
    assert "seed: got -5, expected an integer >= 0" in result.stderr
    assert "Traceback" not in message
    assert not (work / "results").exists()


def test_appendix_c_defaults_and_the_tiny_config():
    config = {"seed": 3, "figure_formats": ["png"]}
    check_config(config, SCHEMA)
    appendix = config["study1"]["appendix_c"]
    assert appendix["enabled"] is True
    assert appendix["age_groups"] == ["45-54", "55-64", "65-74", "75-84", "85+"]
    assert appendix["scenarios"] == [1, 2, 3, 4] and appendix["correlation"] == 0.7
    assert appendix["national_rate_per_100k"] == {
        "45-54": 180.2,
        "55-64": 494.1,
        "65-74": 1218.6,
        "75-84": 2993.1,
        "85+": 7777.1,
    }
    # the shipped default config says the same as the schema's defaults
    shipped = load("config/config.yaml")
    check_config(shipped, SCHEMA)
    assert shipped["study1"]["appendix_c"] == appendix
    # CI runs one older age group
    tiny = load(TEST_CONFIG)["study1"]["appendix_c"]
    assert len(tiny["age_groups"]) == 1


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("correlation", 1.5, "correlation"),
        ("age_groups", ["35-44"], "age_groups"),
        ("age_groups", [], "age_groups"),
        ("scenarios", [5], "scenarios"),
        ("national_rate_per_100k", {"85+": 0}, "85\\+"),
        ("national_rate_per_100k", {"90+": 100.0}, "90\\+"),
        ("colour", "red", "colour"),
    ],
)
def test_bad_appendix_c_values_are_rejected(key, value, message):
    config = copy.deepcopy(load("config/config.yaml"))
    config["study1"]["appendix_c"][key] = value
    with pytest.raises(ConfigError, match=message):
        check_config(config, SCHEMA)
