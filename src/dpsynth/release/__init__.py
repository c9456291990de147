"""Build a release: synthetic counts, their public hyperparameters and a manifest.

This is the library side of ``dpsynth synthesize`` (``dpsynth.cli`` only parses options).
The guarantee is about the whole release, under the neighbouring relation of
:data:`~dpsynth.release.request.NEIGHBOURS`, proved in ``docs/privacy.md``.

Layout. ``--out release/`` gives two folders, apart::

    release/                 PUBLIC: publish it whole
        manifest.json        what the release is and promises (docs/manifest.md)
        synthetic.parquet    the sets, long: set, keys..., count, population (sorted by key)
        hyperparameters.parquet  keys..., a, b, population, prior_rate, lower, upper
        prior.parquet        with --sanitised-prior-by: the groups' noisy totals and rates
    ~/.local/share/dpsynth/private/release-<16 hex digits>/
                             PRIVATE: never publish. By default in the steward's folder
                             ($XDG_DATA_HOME/dpsynth, beside the ledger), named after --out
                             and the start of the manifest's seed_commitment; or wherever
                             --private-dir says, never inside the release nor around it
        provenance.json      the root key, the commitment's salt, the input's path and SHA-256
        summary.md, map_*.png  synthetic vs original totals (and a county map)
        utility.md, .csv, .png  what the sets kept, against synthesis with no privacy

The public folder never names the private one (``tests/test_release.py`` checks), and its
files and itself carry one fixed time (1980-01-01) and fixed modes, never the time of the
run (:func:`.folder.fix_public_metadata`). Its list of strata comes from where the steward
said (``--strata``, no default; :mod:`.strata_list`).

Steps (each module has one idea): :mod:`.request` (options, budget split),
:mod:`.inputs` (reading, checking, sorting), :mod:`.design` (prior, calibration,
sampler), :mod:`.randomness` (ChaCha20 from the operating system), :mod:`.folder`
(atomic, locked installation), :mod:`.manifest` (the public manifest and its schema),
:mod:`.summary` (the steward's summary), :mod:`.utility` (the steward's utility report:
what the sets kept). The steward's ledger is :mod:`dpsynth.ledger`.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

import dpsynth
from dpsynth.io import sha256_file, write_json
from dpsynth.release import folder, manifest
from dpsynth.release.design import Design, estimate_cost, group_codes
from dpsynth.release.hold import hold
from dpsynth.release.inputs import Strata, check_prior_fit, load_strata
from dpsynth.release.manifest import RELEASE_FORMAT, SYNTHETIC_COUNT
from dpsynth.release.randomness import RootKey, describe
from dpsynth.release.request import (
    DATASET_REQUIRED,
    NEIGHBOURS,
    Budget,
    ReleaseError,
    ReleaseRequest,
    plan_budget,
)
from dpsynth.release.strata_list import STATEMENTS as STRATA_STATEMENTS
from dpsynth.release.summary import check_county_frame

__all__ = [
    "NEIGHBOURS",
    "Budget",
    "Design",
    "ReleaseError",
    "ReleaseRequest",
    "Strata",
    "build_release",
    "load_strata",
]

#: Multiply-adds a second that no laptop of the last decade falls below: a forecast at
#: this rate within the limits needs no measurement of the machine.
_SLOWEST_RATE = 2e7


def public_prior(request, strata: Strata):
    """(prior rates per stratum, manifest block) when the prior needs no budget, else None.

    md has no prior; an external file or an input column is declared public by the
    steward; the overall rate total / population is public. A sanitised group prior
    (``--sanitised-prior-by`` with columns) is drawn by the release: None.
    """
    if not request.needs_prior:
        return None, dict(kind="none", description="md uses no prior", epsilon=0.0)
    if request.sanitised_prior_by is None:
        kind = "external-file" if request.prior_file is not None else "input-column"
        checked = "overridden" if request.prior_is_public_i_am_sure else "passed"
        block = dict(
            kind=kind,
            description=strata.prior_description,
            groups=strata.prior_groups,
            declared_source=strata.prior_declared,
            count_fit_check=checked,
        )
        return strata.prior_rate, block
    if len(request.sanitised_prior_by) == 0:
        rate = strata.total / strata.population.sum()
        text = "the overall rate total / sum of populations (public: both are released exactly)"
        return np.full(strata.counts.size, rate), dict(kind="total", description=text, groups=[])
    return None


def _prior(request, strata: Strata, budget: Budget, root: RootKey):
    """Prior rates per stratum, the public prior table (or None) and the manifest block."""
    public = public_prior(request, strata)
    if public is not None:
        return public[0], None, public[1]
    from dpsynth.privacy.sanitised_prior import sanitised_group_prior

    columns = list(request.sanitised_prior_by)
    codes, groups = group_codes(strata.groupable(), columns)
    prior = sanitised_group_prior(
        strata.counts, codes, strata.population, budget.epsilon_prior, root.generator("prior")
    )
    table = groups.assign(
        population=prior.group_population,
        noisy_total=prior.noisy_totals,
        prior_rate=prior.group_rates,
    )
    text = (
        f"sanitised: the counts' totals by {columns} with discrete Laplace noise of scale "
        f"2/epsilon_prior (sensitivity 2 under move-one-event), floored at "
        f"{prior.floor:g} and divided by the group population (post-processing)"
    )
    block = dict(
        kind="sanitised",
        description=text,
        epsilon=budget.epsilon_prior,
        groups=columns,
        floor=float(prior.floor),
    )
    return prior.rates, table, block


def _draw(sampler, sets: int, root: RootKey, n_cells: int, progress) -> np.ndarray:
    from tqdm import tqdm

    out = np.empty((sets, n_cells), dtype=np.int64)
    disable = None if progress is None else not progress
    for k in tqdm(range(sets), desc="synthetic sets", unit="set", disable=disable):
        out[k] = sampler.draw(1, root.generator(f"set:{k}"))[0]
    return out


def _build(design: Design, counts, cal, progress):
    """The release sampler, with a progress bar on stderr (on a terminal, or when
    ``progress`` is True; never when False)."""
    from tqdm import tqdm

    disable = None if progress is None else not progress
    with tqdm(total=100, desc="building the sampler", unit="%", disable=disable) as bar:

        def advance(fraction: float) -> None:
            bar.n = round(100 * fraction)
            bar.refresh()

        return design.sampler(counts, cal, progress=advance)


def build_release(request: ReleaseRequest) -> dict:
    """Check, calibrate, record the spending, draw and install; return the manifest."""
    budget = plan_budget(request)
    if request.dataset is None:
        raise ReleaseError(DATASET_REQUIRED)
    manifest.check_method(request)
    root = RootKey.from_seed(request.test_seed) if request.test_seed is not None else None
    root = root or RootKey.fresh()
    salt = secrets.token_hex(16)
    private = request.private_folder(root.commitment(salt))
    folder.check_destination(request.out, request.force)
    folder.check_apart(request.out, private)
    folder.check_destination(private, request.force, private=True)
    # public decisions first (#36): the count-fit check, which reads the counts beyond
    # their total, waits until the forecast, limits and target have been checked below
    strata = load_strata(request, check_fit=False)
    for option, name in (("--group-by", request.group_by), ("--fips-column", request.fips_column)):
        if name is not None and name not in strata.keys.columns:
            raise ReleaseError(
                f"{request.input}: {option} {name!r} is not a key column; keys are "
                f"{list(strata.keys.columns)}"
            )
    check_county_frame(request, strata.keys)
    if (
        request.sanitised_prior_by
        and len(group_codes(strata.groupable(), request.sanitised_prior_by)[1]) < 2
    ):
        raise ReleaseError(
            f"--sanitised-prior-by {list(request.sanitised_prior_by)} makes a single group, "
            "whose total is public: give --sanitised-prior-by with no column (the overall "
            "rate, no budget) instead of spending --prior-epsilon on it"
        )
    design = Design(request.mechanism, request.method, budget, request.tail, request.inflation)

    # Spent before anything is drawn: a release that fails later still counts. A public
    # prior makes the calibration and every check on it public, so they come first and a
    # refusal costs nothing; a sanitised prior is drawn, so its budget is spent before it,
    # after every check the prior cannot change (check_before_prior).
    spend_first = public_prior(request, strata) is None
    if spend_first:
        check_before_prior(request, design, strata)
        entry = _spend(request, strata, budget, private)
    rates, prior_table, prior_block = _prior(request, strata, budget, root)
    try:
        cal = _checked_calibration(request, design, strata, rates)
    except ReleaseError as err:
        if not spend_first:
            raise
        raise ReleaseError(f"{err}. {_spent_note(request, budget)}") from err
    check_prior_fit(request, strata)  # after the public refusals, before spending (#36)
    if not spend_first:
        entry = _spend(request, strata, budget, private)
    hold("spent")

    try:
        sampler = _build(design, strata.counts, cal, request.progress)
    except (ValueError, RuntimeError) as err:
        # Whether this happens depends on the counts (docs/privacy.md, Part 5), and so do
        # the sampler's numbers in ``err``: the message states neither.
        raise ReleaseError(
            f"{request.input}: the release sampler could not be built within its target for "
            "this table (the one refusal that depends on the counts, docs/privacy.md, Part "
            f"5); nothing was published. {_spent_note(request, budget)} "
            "Please report it (the calibration is public: dpsynth calibrate prints it)"
        ) from err
    synthetic = _draw(sampler, budget.sets, root, cal.n_cells, request.progress)

    if request.private_dir is None:  # the steward's area: its listing is private too
        private.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with folder.parent_locks((private, request.out)) as parents:
        for parent in parents:
            folder.remove_stale_partials(parent)  # left by killed runs; they may hold a key
    partials = {}
    try:
        partials[private] = folder.new_partial(private)
        partials[request.out] = folder.new_partial(request.out)
        info = write_release(
            partials[request.out], request, strata, cal, synthetic, budget, root, salt
        )
        info["sampler"] = {"tail": sampler.tail, "tv_bound": sampler.tv_bound}
        info["ledger"] = entry
        write_private(partials[private], request, strata, cal, synthetic, root, info)
        _finish_manifest(partials[request.out], info, prior_table, prior_block, design)
        folder.install(partials, request.force, private)
    finally:
        for partial in partials.values():
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)
    return info["manifest"]


def check_before_prior(request, design: Design, strata: Strata) -> None:
    """With a sanitised prior, the refusals the public inputs decide, before the prior is
    drawn and anything spent (``dpsynth calibrate`` makes the same check)."""
    try:
        design.check_without_prior(strata.total, strata.population)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err


def _spent_note(request, budget: Budget) -> str:
    """What a refusal after spending says was spent."""
    return (
        f"The sanitised prior had been drawn: epsilon {budget.epsilon:g}, delta "
        f"{budget.delta:g} were spent on dataset {request.dataset} and stay recorded in the "
        f"ledger {request.ledger_path}"
    )


def _checked_calibration(request, design: Design, strata: Strata, rates):
    """The calibration, refused (ReleaseError) when it cannot be drawn within the limits or
    the sampler's total-variation target: every check sees public quantities only."""
    try:
        cal = design.calibrate(strata.total, strata.population, rates)
        from dpsynth.sampling.conditioned import check_feasible

        check_feasible(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err
    check_cost(request, design, strata, cal)
    try:  # public, like the limits above: a target the sampler may miss for some counts
        design.check_tv_target(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: {err}") from err
    return cal


def check_cost(request, design: Design, strata: Strata, cal, measure: bool = False) -> dict:
    """The forecast of building the sampler (:func:`~dpsynth.release.design.estimate_cost`,
    public), refused (ReleaseError) beyond ``--max-memory`` or ``--max-minutes``; the
    message names only the options that would let it run. The machine's speed is measured
    (:func:`~dpsynth.sampling.tree_build.machine_rate`) only when the forecast at the
    slowest rate would not fit the time limit, or when ``measure`` asks for it."""
    cost = estimate_cost(cal, design.tv_target, design.budget.sets)
    limit = request.max_minutes * 60.0
    rate = _SLOWEST_RATE
    if measure or cost.seconds(rate) > limit:
        from dpsynth.sampling.tree_build import machine_rate

        rate = machine_rate()
    seconds = cost.seconds(rate)
    forecast = {
        "bytes": cost.bytes,
        "multiply_adds": cost.multiply_adds,
        "seconds": seconds,
        "measured_rate": rate != _SLOWEST_RATE,
    }
    over_memory, over_time = cost.bytes > request.max_memory, seconds > limit
    if not (over_memory or over_time):
        return forecast
    where = ", ".join(f"{k}={v!r}" for k, v in strata.keys.iloc[cost.widest].items())
    ways = []  # only what would let this release run
    raises = []  # larger limits: useful only if every limit exceeded can be raised
    if over_memory and cost.bytes <= _physical_memory():
        raises.append(f"--max-memory {math.ceil(cost.bytes / 2**30 * 10) / 10:g}")
    if over_time and seconds <= _LONGEST_SUGGESTED:
        raises.append(f"--max-minutes {math.ceil(seconds / 60.0):d}")
    if len(raises) == over_memory + over_time:
        ways.append(" and ".join(raises) + (" (the machine has the memory)" if over_memory else ""))
    if request.mechanism == "pg" and _fits_truncated(request, design, strata, cal, rate):
        ways.append("--mechanism truncated (its bounded strata make a sampler within the limits)")
    ways.append("fewer strata or a smaller total")
    raise ReleaseError(
        f"{request.input}: the sampler would need about {cost.bytes / 2**30:.1f} GiB and "
        f"{seconds / 60.0:.1f} minutes on this machine ({cost.multiply_adds:.2g} "
        f"multiply-adds; limits --max-memory {request.max_memory / 2**30:g} GiB, --max-minutes "
        f"{request.max_minutes:g}); the widest stratum is ({where}). Use " + ", or ".join(ways)
    )


#: A forecast longer than this is not worth suggesting a larger --max-minutes for.
_LONGEST_SUGGESTED = 24 * 3600.0


def _physical_memory() -> float:
    """Bytes of memory this machine has (infinite where the system does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def _fits_truncated(request, design: Design, strata: Strata, cal, rate: float) -> bool:
    """Whether the truncated mechanism, same prior and budget, fits the limits."""
    truncated = Design("truncated", design.method, design.budget, design.tail, design.inflation)
    try:
        other = truncated.calibrate(strata.total, strata.population, cal.prior_rate)
        cost = estimate_cost(other, truncated.tv_target, design.budget.sets)
    except ValueError:
        return False
    return cost.bytes <= request.max_memory and cost.seconds(rate) <= request.max_minutes * 60


def _spend(request: ReleaseRequest, strata: Strata, budget: Budget, private: Path) -> dict:
    """Record the release in the ledger; return what its private folder records of it."""
    from dpsynth.ledger import Ledger, LedgerError

    path = request.ledger_path
    for folder_ in (request.out, private):
        if path.resolve().is_relative_to(folder_.resolve()):
            # the folder is replaced by this release (--force) or refused: the ledger would
            # be lost, or published, and its budget reset
            raise ReleaseError(
                f"the ledger {path} lies inside {folder_}, which this release creates or "
                "replaces; keep the ledger outside every release folder (--ledger, "
                "$DPSYNTH_LEDGER)"
            )
    ledger = Ledger(path)
    table = strata.dataset_id()
    try:
        entry = ledger.spend(
            request.dataset,
            budget.epsilon,
            budget.delta,
            table=table,
            aliases=strata.legacy_ids(),
            budget=request.budget,
            label=request.input.name,
            release=str(request.out.resolve()),
            private=str(private.resolve()),
            guarantee=(
                "certified"
                if (request.mechanism, request.method) in manifest.CERTIFIED
                else "nominal"
            ),
        )
        stored = ledger.stored_budget(request.dataset)
    except LedgerError as err:
        raise ReleaseError(str(err)) from err
    return {
        "path": str(path.resolve()),
        "entry": entry.record(),
        "budget": None if stored is None else json.loads(stored.to_json()),
    }


def write_release(tmp: Path, request, strata, cal, synthetic, budget, root, salt) -> dict:
    """Write the public files; return what the manifest and provenance need (``salt``: the
    seed commitment's, :meth:`RootKey.commitment`)."""
    suffix = ".csv" if request.output_format == "csv" else ".parquet"
    keys = list(strata.keys.columns)
    sets, cells = synthetic.shape

    population = strata.population
    if np.all(population == np.round(population)):
        population = population.astype(np.int64)  # whole people stay whole in the output
    files = {}
    synthetic_path = tmp / f"synthetic{suffix}"
    # the long table by parts of at most _ROWS_PER_PART rows, never whole in memory (#36)
    folder.write_public_parts(
        _long_parts(strata.keys, synthetic, population, request.population_column),
        synthetic_path,
    )
    files["synthetic"] = (
        synthetic_path,
        f"long: one row per set and stratum, sorted by set then by the keys {keys}; 'set' "
        f"numbers the sets 0..{sets - 1}, '{SYNTHETIC_COUNT}' is the synthetic count (each "
        f"set sums to the total {cal.total}) and '{request.population_column}' the public "
        "population",
    )
    # a sanitised prior grouped by attributes: they follow the keys, so verify can group
    grouped_by = [c for c in request.sanitised_prior_by or () if c not in keys]
    columns = strata.groupable()[[*keys, *grouped_by]].reset_index(drop=True)
    hyper = pd.concat([columns, cal.hyperparameter_frame()], axis=1)
    hyper_path = tmp / f"hyperparameters{suffix}"
    folder.write_public_table(hyper, hyper_path)
    files["hyperparameters"] = (
        hyper_path,
        "one row per stratum, in the order of the synthetic sets: the keys"
        + (f", the attributes {grouped_by} the prior is grouped by" if grouped_by else "")
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
        budget=budget,
        root=root,
        total=cal.total,
        tail=cal.tail,
        strata=cells,
        strata_list=request.strata_source,
        population_column=request.population_column,
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


def write_private(tmp: Path, request, strata, cal, synthetic, root: RootKey, info) -> None:
    """The steward's folder: provenance (the root key), the summary of totals and the
    utility report (its reference drawn from the root key's stream ``utility``)."""
    from dpsynth.release.summary import write_summary
    from dpsynth.release.utility import write_utility

    guarantee = manifest.guarantee(cal.mechanism, cal.method, info["budget"].as_dict())
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
        "dataset_id": strata.dataset_id(),
        "ledger_dataset": request.dataset,  # the name its spending was recorded under
        # what it spent, as the ledger recorded it: a ledger deleted or cut is found by it,
        # and rebuilt from it (dpsynth ledger --rebuild)
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


def _finish_manifest(tmp: Path, info, prior_table, prior_block, design: Design) -> None:
    """Write prior.* (if any) and manifest.json last, so every listed file exists."""
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
        "the populations",
        f"the total number of events ({cal_total})",
        "the calibration (hyperparameters), computed from the above and the prior",
    ]
    if prior["kind"] in ("input-column", "external-file"):
        public.append("the prior rates, declared public by the data steward")
    attributes = [c for c in prior["groups"] or () if c not in info["keys"]]
    if attributes:
        public.append(
            f"the attribute column(s) {attributes} of the strata, which group the prior, "
            "declared public by the data steward"
        )
    data = {
        folder.FORMAT_KEY: RELEASE_FORMAT,
        "dpsynth_version": dpsynth.__version__,
        "purpose": manifest.PURPOSE[info["root"].from_test_seed],
        "mechanism": design.mechanism,
        "method": design.method,
        "guarantee": manifest.guarantee(design.mechanism, design.method, budget_dict),
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
            if design.mechanism == "truncated"
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
        "population_column": info["population_column"],
        "files": entry,
        "randomness": describe(info["root"]),
        "seed_commitment": info["root"].commitment(info["salt"]),
    }
    manifest.validate(data)
    write_json(data, tmp / folder.MANIFEST)
    info["manifest"] = data
