"""Publish the calibrations of one Study-2 mechanism for one chunk of the epsilon grid."""

import logging
import time

import pandas as pd

from dpsynth.design import chunk_members
from dpsynth.io import write_parquet
from dpsynth.study2 import CALIBRATION_COLUMNS, calibration_frame, study_calibration

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, w = snakemake.params, snakemake.wildcards
strata = pd.read_parquet(snakemake.input.strata)
epsilons, _ = chunk_members(f"{w.echunk}_d0", p.epsilons, p.epsilons_per_job, 1, 1)
frames, status = [], []
for epsilon in epsilons:
    start = time.perf_counter()
    try:
        cal = study_calibration(w.mechanism, epsilon, strata, tail=p.tail, inflation=p.inflation)
    except (ValueError, RuntimeError) as error:  # no solution at this epsilon: say so
        logging.warning("%s at epsilon=%g: %s", w.mechanism, epsilon, error)
        status.append((w.mechanism, epsilon, False, str(error)))
        continue
    seconds = time.perf_counter() - start
    logging.info(
        "%s at epsilon=%g: %.2f s, median a %.4g",
        w.mechanism,
        epsilon,
        seconds,
        float(pd.Series(cal.a).median()),
    )
    frames.append(calibration_frame(cal, w.mechanism))
    status.append((w.mechanism, epsilon, True, ""))
# Timings go to the log only: artifacts must be the same bytes on every run.
columns = ["mechanism", "epsilon", "ok", "error"]
status = pd.DataFrame(status, columns=columns)
if frames:
    frame = pd.concat(frames, ignore_index=True)
else:
    frame = pd.DataFrame(columns=CALIBRATION_COLUMNS)
write_parquet(frame, snakemake.output.calibrations)
write_parquet(status, snakemake.output.status)
