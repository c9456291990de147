"""Units: rates are per person everywhere in the library; tables and figures report them
per 100,000 people, as the papers do (Quick 2021 and 2022: rMSE and rates x 100,000)."""

#: People per reported rate: a rate per person times PER_100K is a rate per 100,000.
PER_100K = 1e5

#: What a table's denominator column holds: ``population`` (people or person-years: rates
#: per person, reported per 100,000) or ``expected`` (expected counts of indirect
#: standardisation: a rate is an SMR, observed / expected, reported as a ratio).
DENOMINATORS = ("population", "expected")


def rate_scale(denominator: str = "population") -> float:
    """The factor from a rate (count / denominator) to its reported unit:
    :data:`PER_100K` for populations, 1 for expected counts (an SMR is a ratio)."""
    if denominator not in DENOMINATORS:
        raise ValueError(f"denominator {denominator!r}; expected one of {list(DENOMINATORS)}")
    return PER_100K if denominator == "population" else 1.0


def rate_unit(denominator: str = "population") -> str:
    """The reported unit of a rate: ``per 100,000`` or ``SMR (observed / expected)``."""
    rate_scale(denominator)
    return "per 100,000" if denominator == "population" else "SMR (observed / expected)"
