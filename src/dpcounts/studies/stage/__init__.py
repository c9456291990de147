"""Studies on an analyst's own strata: which mechanism and which epsilon keep the rates,
rankings and disparities the users of a table need (config ``studies``).

One idea per module: :mod:`.definition` (the config entry), :mod:`.table` (the data,
checked against it), :mod:`.prior`, :mod:`.rates` (group rates), :mod:`.simulate`
(calibrations and draws), :mod:`.summary` (median and bands) and :mod:`.guide` (the
epsilon guide).
"""
