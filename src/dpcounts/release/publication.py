"""The release's files: the public folder (synthetic sets, hyperparameters, the prior's
table, the README written from the manifest, the manifest last, then its signature with
``--sign-key``) and the steward's private folder (provenance with the root key, the summary
and the utility report), written into partial folders that
:func:`dpcounts.release.folder.install` then installs at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import dpcounts
from dpcounts.io import sha256_file, write_json
from dpcounts.mechanisms import registry
from dpcounts.release import folder, manifest, readme
from dpcounts.release.design import Design
from dpcounts.release.manifest import RELEASE_FORMAT, SYNTHETIC_COUNT
from dpcounts.release.randomness import RootKey, describe
from dpcounts.release.request import NEIGHBOURS, Budget
from dpcounts.release.strata_list import STATEMENTS as STRATA_STATEMENTS


def write_release(tmp: Path, request, strata, cal, synthetic, budget, root, salt) -> dict:
    """Write the public files; return what the manifest and provenance need (``salt``: the
    seed commitment's, :meth:`RootKey.commitment`)."""
    suffix = ".csv" if request.output_format == "csv" else ".parquet"
    keys = list(strata.keys.columns)
    attributes = list(request.attributes)  # public, beside the keys in both tables
    columns = strata.groupable()[[*keys, *attributes]].reset_index(drop=True)
    sets, cells = synthetic.shape

    population = strata.population
    if np.all(population == np.round(population)):
        population = population.astype(np.int64)  # whole people stay whole in the output
    what = "expected count" if request.denominator == "expected" else "population"
    files = {}
    synthetic_path = tmp / f"synthetic{suffix}"
    # the long table by parts of at most _ROWS_PER_PART rows, never whole in memory (#36)
    folder.write_public_parts(
        _long_parts(columns, synthetic, population, request.population_column),
        synthetic_path,
    )
    files["synthetic"] = (
        synthetic_path,
        f"long: one row per set and stratum, sorted by set then by the keys {keys}"
        + (f", each beside its attributes {attributes}" if attributes else "")
        + f"; 'set' numbers the sets 0..{sets - 1}, '{SYNTHETIC_COUNT}' is the synthetic "
        f"count (each set sums to the total {cal.total}) and "
        f"'{request.population_column}' the public {what}. Each group's rate with an "
        "interval from the sets: dpcounts estimate RELEASE --by KEYS (dpcounts' "
        "docs/analyse.md, with an analysis in R)",
    )
    # the attributes follow the keys, so verify can group a prior grouped by them
    hyper = pd.concat([columns, cal.hyperparameter_frame()], axis=1)
    hyper_path = tmp / f"hyperparameters{suffix}"
    folder.write_public_table(hyper, hyper_path)
    files["hyperparameters"] = (
        hyper_path,
        "one row per stratum, in the order of the synthetic sets: the keys"
        + (f", the attributes {attributes}" if attributes else "")
        + ", 'a' (Dirichlet "
        "alpha or gamma shape), 'b' (gamma rate = a / prior_rate), 'population', "
        "'prior_rate', 'lower' and 'upper' (truncation bounds L, U); columns a mechanism "
        "does not use are absent",
    )
    return dict(
        files=files,
        salt=salt,
        suffix=suffix,
        keys=keys,
        attributes=attributes,
        budget=budget,
        root=root,
        total=cal.total,
        tail=cal.tail,
        strata=cells,
        strata_list=request.strata_source,
        population_column=request.population_column,
        denominator=request.denominator,
        rounding=request.rounding,
    )


#: Rows of the long synthetic table built and written at once (:func:`_long_parts`).
_ROWS_PER_PART = 1 << 20


def _long_parts(keys: pd.DataFrame, synthetic, population, population_column: str):
    """The long synthetic table (set, keys..., count, population), sorted by set then by the
    keys, as frames of at most :data:`_ROWS_PER_PART` rows, in order."""
    sets, cells = synthetic.shape
    for k in range(sets):
        for start in range(0, cells, _ROWS_PER_PART):
            stop = min(start + _ROWS_PER_PART, cells)
            part = keys.iloc[start:stop].reset_index(drop=True)
            part.insert(0, "set", np.full(stop - start, k, dtype=np.int64))
            part[SYNTHETIC_COUNT] = synthetic[k, start:stop]
            part[population_column] = population[start:stop]
            yield part


def write_private(
    tmp: Path, request, strata, cal, synthetic, root: RootKey, info, design: Design
) -> None:
    """The steward's folder: provenance (the root key), the summary of totals and the
    utility report (its reference drawn from the root key's stream ``utility``)."""
    from dpcounts.release.report.summary import write_summary
    from dpcounts.release.report.utility import write_utility

    guarantee = design.guarantee()
    files = write_summary(tmp, request, strata, cal, synthetic, guarantee["statement"])
    files += write_utility(tmp, request, strata, cal, synthetic, root.generator("utility"))
    provenance = {
        folder.FORMAT_KEY: RELEASE_FORMAT,
        "note": "PRIVATE: never publish. The root key reproduces the release from the data.",
        "root_key": str(root.key),
        "from_test_seed": root.from_test_seed,
        "seed_commitment_salt": info["salt"],
        "input": str(request.input.resolve()),
        "input_sha256": sha256_file(request.input),
        "prior_file": str(request.prior_file.resolve()) if request.prior_file else None,
        "table_id": strata.table_id(),
        "ledger_dataset": request.dataset,  # the name its spending was recorded under
        # what it spent, as the ledger recorded it: a ledger deleted or cut is found by it,
        # and rebuilt from it (dpcounts ledger --rebuild)
        "ledger": info["ledger"],
        # depends on the counts: private (the manifest states only the rule)
        "rounding": {
            "mode": request.rounding,
            "strata_rounded": strata.rounded,
            "total_before": strata.rounding.total_before,
            "total_after": strata.rounding.total_after,
        },
        "files": ["provenance.json", *files],
        # depends on the counts: private (the manifest states only the public target)
        "sampler": info["sampler"],
        "release": str(request.out.resolve()),
    }
    write_json(provenance, tmp / folder.PROVENANCE)


def finish_manifest(tmp: Path, info, prior_table, prior_block, design: Design) -> None:
    """Write prior.* (if any), README.md from the manifest (:mod:`.readme`) and
    manifest.json last, so every listed file exists; with a
    signing key (``info["signer"]``, ``--sign-key``), its signature of the manifest after
    it, in the same partial folder (:mod:`.signature`)."""
    request_suffix = info["suffix"]
    files = dict(info["files"])
    budget: Budget = info["budget"]
    prior = {
        "epsilon": 0.0,
        "groups": None,
        "file": None,
        "floor": None,
        "declared_source": None,
        "count_fit_check": "not applicable",
    } | prior_block
    if prior_table is not None:
        path = tmp / f"prior{request_suffix}"
        folder.write_public_table(prior_table, path)
        files["prior"] = (
            path,
            f"one row per group of {prior['groups']}: the group's population, its noisy "
            "total (true total plus discrete Laplace noise) and the prior rate "
            "max(noisy_total, floor) / population used for its strata",
        )
        prior["file"] = path.name
    cal_total = info["total"]
    entry = {
        name: {"path": path.name, "sha256": sha256_file(path), "layout": layout}
        for name, (path, layout) in files.items()
    }
    budget_dict = budget.as_dict()
    public = [
        "the strata: key columns and their values",
        (
            "the expected counts (from public populations and public standard rates, declared "
            "public by the data steward)"
            if info.get("denominator") == "expected"
            else "the populations"
        ),
        f"the total number of events ({cal_total})",
        "the calibration (hyperparameters), computed from the above and the prior",
    ]
    if prior["kind"] in ("input-column", "external-file"):
        public.append("the prior rates, declared public by the data steward")
    attributes = info["attributes"]
    if attributes:
        grouping = [c for c in prior["groups"] or () if c in attributes]
        public.append(
            f"the attribute column(s) {attributes} of the strata, one value per stratum, "
            "published beside the keys"
            + (f" (the prior is grouped by {grouping})" if grouping else "")
            + ", declared public by the data steward (not computed from the counts)"
        )
    data = {
        folder.FORMAT_KEY: RELEASE_FORMAT,
        "dpcounts_version": dpcounts.__version__,
        "purpose": manifest.PURPOSE[info["root"].from_test_seed],
        "mechanism": design.mechanism,
        "method": design.method,
        "guarantee": design.guarantee(),
        "budget": budget_dict,
        "delta": {
            "per_set": budget.delta_per_set,
            "sampler_tv_target": design.tv_target,
            "how": (
                "each set's sampler is within total variation tv_target of the exact "
                "distribution of its calibration (floating-point and tail error, bounded "
                "when the sampler is built, rebuilt more precisely until the bound holds), "
                "so a set is (epsilon_per_set, (1 + e^epsilon_per_set) tv_target)-DP; "
                "docs/privacy.md"
            ),
        },
        "neighbouring_relation": NEIGHBOURS,
        "public": public,
        "prior": prior,
        "rounding": {
            "mode": info["rounding"],
            "statement": manifest.ROUNDING_STATEMENTS[info["rounding"]],
        },
        "truncation": (
            {"tail": info["tail"], "inflation": design.inflation}
            if registry.family(design.mechanism).bounded
            else None
        ),
        "strata": info["strata"],
        "strata_list": {
            "source": info["strata_list"],
            "statement": STRATA_STATEMENTS[info["strata_list"]],
        },
        "total": cal_total,
        "sets": budget.sets,
        "keys": info["keys"],
        "attributes": attributes,
        "population_column": info["population_column"],
        "denominator": {
            "kind": info.get("denominator", "population"),
            "statement": manifest.DENOMINATOR_STATEMENTS[info.get("denominator", "population")],
        },
        "files": entry,
        "randomness": describe(info["root"]),
        "seed_commitment": info["root"].commitment(info["salt"]),
    }
    # the README from the manifest as it stands (every file but itself), then listed in it
    path = tmp / readme.README
    path.write_text(readme.readme_text(data), encoding="utf-8")
    data["files"][readme.ENTRY] = {
        "path": path.name, "sha256": sha256_file(path), "layout": readme.LAYOUT,
    }  # fmt: skip
    manifest.validate(data)
    write_json(data, tmp / folder.MANIFEST)
    if info.get("signer") is not None:  # the manifest's bytes as published, in the partial
        info["signer"].sign_folder(tmp)
    info["manifest"] = data
