"""The behaviour Quick (2021) reports, measured on Study 1's summary (checks.json)."""

import pandas as pd

from dpsynth.io import write_json
from dpsynth.studies.study1 import behaviour_checks

write_json(behaviour_checks(pd.read_parquet(snakemake.input[0])), snakemake.output[0])
