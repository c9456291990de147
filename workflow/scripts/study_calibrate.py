"""Calibrate one arm of a study over one chunk of its epsilon grid."""

import logging
import time

import pandas as pd

from dpsynth.design import epsilon_chunk
from dpsynth.io import write_parquet
from dpsynth.study.definition import study_definition
from dpsynth.study.simulate import (
    CALIBRATION_COLUMNS,
    STATUS_COLUMNS,
    calibrate_arm,
    calibration_frame,
)

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
w = snakemake.wildcards
definition = study_definition(w.study, snakemake.params.entry)
arm = next(arm for arm in definition.arms if arm.label == w.arm)
strata = pd.read_parquet(snakemake.input.strata)
frames, status = [], []
for epsilon in epsilon_chunk(w.echunk, definition.epsilons, definition.epsilons_per_job):
    start = time.perf_counter()
    try:
        cal = calibrate_arm(definition, arm, epsilon, strata)
    except (ValueError, RuntimeError) as error:
        if definition.on_calibration_failure == "fail":
            raise RuntimeError(
                f"{arm.label} at epsilon={epsilon:g} cannot be calibrated: {error}. Set "
                f"studies.{w.study}.on_calibration_failure: skip to leave it out"
            ) from error
        logging.warning("%s at epsilon=%g skipped: %s", arm.label, epsilon, error)
        status.append((arm.label, epsilon, False, str(error)))
        continue
    # timings go to the log only: artifacts are the same bytes on every run
    logging.info("%s at epsilon=%g: %.2f s, median a %.4g", arm.label, epsilon,
                 time.perf_counter() - start, float(pd.Series(cal.a).median()))  # fmt: skip
    frames.append(calibration_frame(cal))
    status.append((arm.label, epsilon, True, ""))
frame = (
    pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CALIBRATION_COLUMNS)
)
frame.insert(0, "arm", arm.label)
write_parquet(frame, snakemake.output.calibrations)
write_parquet(pd.DataFrame(status, columns=STATUS_COLUMNS), snakemake.output.status)
