"""Studies on an analyst's own strata: which mechanism and which epsilon keep the rates,
rankings and disparities the users of a table need (config ``studies``).

One idea per module: :mod:`~dpsynth.study.definition` (the config entry),
:mod:`~dpsynth.study.table` (the data, checked against it), :mod:`~dpsynth.study.prior`,
:mod:`~dpsynth.study.rates` (group rates), :mod:`~dpsynth.study.simulate` (calibrations
and draws), :mod:`~dpsynth.study.summary` (median and bands) and
:mod:`~dpsynth.study.guide` (the epsilon guide).
"""
