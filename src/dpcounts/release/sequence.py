"""A release as one named sequence of steps, shared by ``synthesize`` and ``calibrate``.

    read -> check -> account -> calibrate -> draw -> write -> report

* **read**: the options' budget split and the strata (:func:`.inputs.load_strata`: the
  input or the study's table, checked and sorted; a public prior's shape and fit);
* **check**: every refusal the public inputs decide, before anything is spent. With a
  public prior (a file, a column, the overall rate, or md's none) that is the calibration
  itself, its feasibility, the sampler's forecast cost (:func:`.limits.check_cost`) and
  its total-variation target, then the count-fit check of a declared prior
  (:func:`.inputs.check_prior_fit`, the one that reads the counts); with a sanitised
  prior, which exists only once drawn, what no prior can change
  (:meth:`.design.Design.check_without_prior`);
* **account**: the ledger, at this one point: ``synthesize`` records the spending (a
  release that fails later still counts), ``calibrate`` reads what it would be;
* **calibrate**: a sanitised prior is drawn (its budget spent above) and the calibration
  made from it and checked; a refusal now says what was spent;
* **draw**: the release sampler built and the sets drawn, each from its own stream;
* **write**: the public files and the provenance into partial folders
  (:mod:`.publication`);
* **report**: the steward's summary and utility report into the private partial, then
  both folders installed at once (:func:`.folder.install`).

:func:`build_release` runs them all; :meth:`Release.preview` (``dpcounts calibrate``,
:mod:`.preview`) runs read, check and account without spending and stops. Whether the
release is certified or nominal is decided once, by its :class:`.design.Design`.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpcounts.release import folder, manifest
from dpcounts.release.design import Design, group_codes
from dpcounts.release.hold import hold
from dpcounts.release.inputs import Strata, check_prior_fit, load_strata
from dpcounts.release.limits import check_cost
from dpcounts.release.publication import finish_manifest, write_private, write_release
from dpcounts.release.randomness import RootKey
from dpcounts.release.request import (
    DATASET_REQUIRED,
    Budget,
    ReleaseError,
    ReleaseRequest,
    plan_budget,
)
from dpcounts.release.summary import check_county_frame

#: The steps, in order (:class:`Release`'s methods of the same names).
STEPS = ("read", "check", "account", "calibrate", "draw", "write", "report")


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
        if request.denominator == "expected":
            text = ("the overall SMR total / sum of expected counts (public: both are "
                    "released exactly)")  # fmt: skip
        return np.full(strata.counts.size, rate), dict(kind="total", description=text, groups=[])
    return None


def _sanitised_prior(request, strata: Strata, budget: Budget, root: RootKey):
    """A sanitised group prior, drawn: rates per stratum, its public table, manifest block."""
    from dpcounts.privacy.sanitised_prior import sanitised_group_prior

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


def checked_calibration(request, design: Design, strata: Strata, rates, measure: bool = False):
    """The calibration and the sampler's forecast (:func:`.limits.check_cost`), refused
    (ReleaseError) when it cannot be drawn within the limits or the sampler's
    total-variation target: every check sees public quantities only. Returns (calibration,
    forecast, the sampler's floating-point floor)."""
    from dpcounts.sampling.bounds import check_feasible

    try:
        cal = design.calibrate(strata.total, strata.population, rates)
        check_feasible(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err
    check_privacy_map(request, cal)
    forecast = check_cost(request, design, strata, cal, measure=measure)
    try:  # public, like the limits above: a target the sampler may miss for some counts
        floor = design.check_tv_target(cal)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: {err}") from err
    return cal, forecast, floor


def check_privacy_map(request, cal) -> None:
    """A certified calibration's own privacy map (the registry's, the one ``dpcounts verify``
    recomputes from the published hyperparameters) proves its epsilon per set: refused
    (ReleaseError) otherwise, before anything is drawn. A nominal calibration claims no
    proof: not checked."""
    from dpcounts.mechanisms import registry
    from dpcounts.release.manifest import status

    if status(cal.mechanism, cal.method) != "certified":
        return
    bound, how = registry.family(cal.mechanism).proven_epsilon(cal)
    if not bound <= cal.epsilon * (1 + registry.BOUND_RTOL):
        raise ReleaseError(
            f"{request.input}: the {cal.mechanism}/{cal.method} calibration proves epsilon "
            f"{bound:.12g} per set ({how}), more than the {cal.epsilon:.12g} it was made for: "
            "refused before anything is drawn (a bug: please report it)"
        )


def check_before_prior(request, design: Design, strata: Strata) -> None:
    """With a sanitised prior, the refusals the public inputs decide, before the prior is
    drawn and anything spent."""
    try:
        design.check_without_prior(strata.total, strata.population)
    except ValueError as err:
        raise ReleaseError(f"{request.input}: cannot calibrate: {err}") from err


def _progress_bar(progress, **options):
    from tqdm import tqdm

    return tqdm(disable=None if progress is None else not progress, **options)


@dataclass
class Release:
    """One release of ``request``, step by step (:data:`STEPS`); each step fills what the
    next needs."""

    request: ReleaseRequest
    budget: Budget | None = None
    design: Design | None = None
    strata: Strata | None = None
    #: the prior rates per stratum, its public table (sanitised) and its manifest block
    rates: np.ndarray | None = None
    prior_table: object = None
    prior_block: dict | None = None
    cal: object = None
    forecast: dict | None = None
    floor: float | None = None
    entry: dict | None = None  # what the ledger recorded, for the private folder
    synthetic: np.ndarray | None = None
    sampler: object = None
    root: RootKey | None = None
    salt: str = ""
    private: Path | None = None
    partials: dict = field(default_factory=dict)
    signer: object = None  # the steward's signing key (--sign-key), loaded before any spend
    info: dict = field(default_factory=dict)

    # --- read ------------------------------------------------------------------------------
    def read(self, releasing: bool = True) -> None:
        """The budget split, the randomness and folders (a release), the strata."""
        request = self.request
        self.budget = plan_budget(request)
        if releasing and request.dataset is None:
            raise ReleaseError(DATASET_REQUIRED)
        manifest.check_method(request)
        if releasing:
            root = None
            if request.test_seed is not None:
                root = RootKey.from_seed(request.test_seed)
            self.root = root or RootKey.fresh()
            self.salt = secrets.token_hex(16)
            self.private = request.private_folder(self.root.commitment(self.salt))
            folder.check_destination(request.out, request.force)
            folder.check_apart(request.out, self.private)
            if request.sign_key is not None:
                from dpcounts.release.signature import SignatureError, load_private_key

                try:
                    self.signer = load_private_key(request.sign_key, request.out)
                except SignatureError as err:
                    raise ReleaseError(str(err)) from None
            folder.check_destination(self.private, request.force, private=True)
        # public decisions first (#36): the count-fit check, which reads the counts beyond
        # their total, waits for check, after the forecast, limits and target
        self.strata = load_strata(request, check_fit=False)
        self.design = Design(
            request.mechanism, request.method, self.budget, request.tail, request.inflation
        )

    # --- check -----------------------------------------------------------------------------
    def check(self, measure: bool = False) -> None:
        """Every refusal the public inputs decide; with a public prior, its calibration."""
        request, strata = self.request, self.strata
        keys = list(strata.keys.columns)
        for option, name in (("--group-by", request.group_by),
                             ("--fips-column", request.fips_column)):  # fmt: skip
            if name is not None and name not in keys:
                raise ReleaseError(
                    f"{request.input}: {option} {name!r} is not a key column; keys are {keys}"
                )
        check_county_frame(request, strata.keys)
        if (
            request.sanitised_prior_by
            and len(group_codes(strata.groupable(), request.sanitised_prior_by)[1]) < 2
        ):
            raise ReleaseError(
                f"--sanitised-prior-by {list(request.sanitised_prior_by)} makes a single "
                "group, whose total is public: give --sanitised-prior-by with no column (the "
                "overall rate, no budget) instead of spending --prior-epsilon on it"
            )
        public = public_prior(request, strata)
        if public is None:  # sanitised: drawn after the account, checked as far as it can be
            check_before_prior(request, self.design, strata)
            return
        self.rates, self.prior_block = public
        self.cal, self.forecast, self.floor = checked_calibration(
            request, self.design, strata, self.rates, measure=measure
        )
        check_prior_fit(request, strata)  # the one refusal here that reads the counts

    # --- account ---------------------------------------------------------------------------
    def account(self) -> None:
        """Record the release in the ledger: the one point where a release spends."""
        from dpcounts.ledger import Ledger, LedgerError

        request, strata, budget = self.request, self.strata, self.budget
        path = request.ledger_path
        for folder_ in (request.out, self.private):
            if path.resolve().is_relative_to(folder_.resolve()):
                # the folder is replaced by this release (--force) or refused: the ledger
                # would be lost, or published, and its budget reset
                raise ReleaseError(
                    f"the ledger {path} lies inside {folder_}, which this release creates or "
                    "replaces; keep the ledger outside every release folder (--ledger, "
                    "$DPCOUNTS_LEDGER)"
                )
        ledger = Ledger(path)
        try:
            table, aliases = strata.identities()
            entry = ledger.spend(
                request.dataset,
                budget.epsilon,
                budget.delta,
                table=table,
                aliases=aliases,
                keys=strata.coded_keys(),
                counts=strata.counts,
                populations=strata.population,
                new_dataset=request.new_dataset,
                budget=request.budget,
                label=request.input.name,
                release=str(request.out.resolve()),
                private=str(self.private.resolve()),
                guarantee=self.design.status,
            )
            stored = ledger.stored_budget(request.dataset)
        except LedgerError as err:
            raise ReleaseError(str(err)) from err
        self.entry = {
            "path": str(path.resolve()),
            "entry": entry.record(),
            "budget": None if stored is None else json.loads(stored.to_json()),
        }
        hold("spent")

    def preview_account(self) -> dict | None:
        """What :meth:`account` would record and whether the ledger would refuse it (the
        ledger read, never written); None without a dataset name."""
        from dpcounts.ledger import Ledger, LedgerError

        request = self.request
        if request.dataset is None:
            return None
        path = request.ledger_path
        try:
            table, aliases = self.strata.identities()
            account = Ledger(path).preview(
                request.dataset,
                self.budget.epsilon,
                self.budget.delta,
                table=table,
                aliases=aliases,
                keys=self.strata.coded_keys(),
                counts=self.strata.counts,
                populations=self.strata.population,
                new_dataset=request.new_dataset,
                budget=request.budget,
                guarantee=self.design.status,
            )
        except LedgerError as err:
            raise ReleaseError(str(err)) from err
        except ValueError as err:
            raise ReleaseError(f"{path}: {err}") from err
        return account | {"path": str(path)}

    # --- calibrate -------------------------------------------------------------------------
    def calibrate(self) -> None:
        """A sanitised prior drawn and the calibration made from it (a public prior's was
        made by :meth:`check`)."""
        if self.cal is not None:
            return
        request = self.request
        self.rates, self.prior_table, self.prior_block = _sanitised_prior(
            request, self.strata, self.budget, self.root
        )
        try:
            self.cal, self.forecast, self.floor = checked_calibration(
                request, self.design, self.strata, self.rates
            )
        except ReleaseError as err:
            raise ReleaseError(f"{err}. {self._spent_note()}") from err

    def _spent_note(self) -> str:
        """What a refusal after spending says was spent."""
        request, budget = self.request, self.budget
        return (
            f"The sanitised prior had been drawn: epsilon {budget.epsilon:g}, delta "
            f"{budget.delta:g} were spent on dataset {request.dataset} and stay recorded in "
            f"the ledger {request.ledger_path}"
        )

    # --- draw ------------------------------------------------------------------------------
    def draw(self) -> None:
        """The release sampler (a progress bar on a terminal), then each set from its own
        stream ``set:k`` of the root key."""
        request, cal = self.request, self.cal
        if request.progress is not False:  # on a terminal or not: 30 s of silence look hung
            from dpcounts import compile_cache
            from dpcounts.sampling import tree_build, tree_draw

            entry_points = (tree_draw.tilted_success, tree_build._leaves_serial,
                            tree_draw.draw_tree_exact)  # fmt: skip
            if not compile_cache.sampler_compiled(entry_points):
                print(compile_cache.FIRST_COMPILE, file=sys.stderr, flush=True)
        try:
            with _progress_bar(request.progress, total=100, desc="building the sampler",
                               unit="%") as bar:  # fmt: skip

                def advance(fraction: float) -> None:
                    bar.n = round(100 * fraction)
                    bar.refresh()

                # a large tree goes to an unlinked file beside the private folder (private
                # like it; the system removes it when the process ends, however it ends)
                self.sampler = self.design.sampler(
                    self.strata.counts, cal, progress=advance, spill_dir=self.private.parent,
                    spilled=(self.forecast or {}).get("spilled"),
                )  # fmt: skip
        except (ValueError, RuntimeError) as err:
            # Whether this happens depends on the counts (docs/privacy.md, Part 5), and so
            # do the sampler's numbers in ``err``: the message states neither.
            raise ReleaseError(
                f"{request.input}: the release sampler could not be built within its target "
                "for this table (the one refusal that depends on the counts, docs/privacy.md, "
                f"Part 5); nothing was published. {self._spent_note()} Please report it (the "
                "calibration is public: dpcounts calibrate prints it)"
            ) from err
        sets = self.budget.sets
        self.synthetic = np.empty((sets, cal.n_cells), dtype=np.int64)
        bar = _progress_bar(request.progress, iterable=range(sets), desc="synthetic sets",
                            unit="set")  # fmt: skip
        for k in bar:
            self.synthetic[k] = self.sampler.draw(1, self.root.generator(f"set:{k}"))[0]

    # --- write -----------------------------------------------------------------------------
    def write(self) -> None:
        """The public files and the provenance, into new partial folders."""
        request = self.request
        if request.private_dir is None:  # the steward's area: its listing is private too
            self.private.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with folder.parent_locks((self.private, request.out)) as parents:
            for parent in parents:
                folder.remove_stale_partials(parent)  # left by killed runs; may hold a key
        self.partials[self.private] = folder.new_partial(self.private)
        self.partials[request.out] = folder.new_partial(request.out)
        self.info = write_release(
            self.partials[request.out], request, self.strata, self.cal, self.synthetic,
            self.budget, self.root, self.salt,
        )  # fmt: skip
        self.info["sampler"] = {"tail": self.sampler.tail, "tv_bound": self.sampler.tv_bound}
        self.info["ledger"] = self.entry
        self.info["signer"] = self.signer

    # --- report ----------------------------------------------------------------------------
    def report(self) -> dict:
        """The steward's summary and utility report, the manifest last, then both folders
        installed at once; returns the manifest."""
        request = self.request
        write_private(self.partials[self.private], request, self.strata, self.cal,
                      self.synthetic, self.root, self.info, self.design)  # fmt: skip
        finish_manifest(self.partials[request.out], self.info, self.prior_table,
                        self.prior_block, self.design)  # fmt: skip
        folder.install(self.partials, request.force, self.private)
        return self.info["manifest"]

    def discard_partials(self) -> None:
        for partial in self.partials.values():
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)


def build_release(request: ReleaseRequest) -> dict:
    """Every step of :data:`STEPS`; return the manifest. Spent before anything is drawn:
    a release that fails after :meth:`Release.account` still counts."""
    release = Release(request)
    release.read()
    release.check()
    release.account()
    release.calibrate()
    release.draw()
    try:
        release.write()
        return release.report()
    finally:
        release.discard_partials()
