"""Units: rates are per person everywhere in the library; tables and figures report them
per 100,000 people, as the papers do (Quick 2021 and 2022: rMSE and rates x 100,000)."""

#: People per reported rate: a rate per person times PER_100K is a rate per 100,000.
PER_100K = 1e5
