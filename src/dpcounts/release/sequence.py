"""A release of a :class:`~.plan.Plan`, as one named sequence of steps.

    plan -> charge -> (prior) -> draw -> write -> report

* **plan** (:func:`.plan.plan_release`): every refusal the options and public inputs
  decide, the calibration, the forecast and the plan's privacy map, before anything is
  spent; ``dpcounts calibrate`` prints the plan and stops (:mod:`.preview`);
* **charge**: the checks that read the counts beyond their total, a declared prior's fit
  and the attributes' split (:func:`.inputs.check_count_fit`), the randomness, the folders
  and the signing key checked, then the ledger charged the plan's :class:`Charge`, once:
  the one point where a release spends (a release that fails later still counts);
* **prior**: with a sanitised prior, the prior drawn (its budget spent above) and the
  completed plan made from it (:meth:`.plan.Plan.with_prior`); a refusal now says what was
  spent;
* **draw**: the release sampler built and the sets drawn, each from its own stream;
* **write**: the public files and the provenance into partial folders
  (:mod:`.publication`);
* **report**: the steward's summary and utility report into the private partial, then
  both folders installed at once (:func:`.folder.install`).

:func:`build_release` plans and releases; :func:`release` releases a plan. Whether the
release is certified or nominal is decided once, by its :class:`.design.Design`.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from pathlib import Path

import numpy as np

from dpcounts.release import folder
from dpcounts.release.design import group_codes
from dpcounts.release.hold import hold
from dpcounts.release.inputs import check_count_fit
from dpcounts.release.plan import Plan, Prior, plan_release
from dpcounts.release.publication import finish_manifest, write_private, write_release
from dpcounts.release.randomness import RootKey
from dpcounts.release.request import ReleaseError, ReleaseRequest

#: The steps, in order (module docstring).
STEPS = ("plan", "charge", "prior", "draw", "write", "report")


def _sanitised_prior(plan: Plan, root: RootKey) -> Prior:
    """A sanitised group prior, drawn: rates per stratum, its public table, manifest block."""
    from dpcounts.privacy.sanitised_prior import sanitised_group_prior

    request, strata, budget = plan.request, plan.strata, plan.budget
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
    return Prior(prior.rates, block, table)


def _progress_bar(progress, **options):
    from tqdm import tqdm

    return tqdm(disable=None if progress is None else not progress, **options)


class _Releasing:
    """The private state of one release of a plan, step by step (module docstring): the
    root key, the folders, what the ledger recorded, the sets."""

    def __init__(self, plan: Plan):
        request = plan.request
        self.plan = plan
        self.root = RootKey.fresh() if request.test_seed is None else RootKey.from_seed(
            request.test_seed)  # fmt: skip
        self.salt = secrets.token_hex(16)
        self.private = request.private_folder(self.root.commitment(self.salt))
        self.partials: dict[Path, Path] = {}
        self.entry: dict | None = None
        self.sampler = None
        self.synthetic: np.ndarray | None = None
        self.info: dict = {}
        self.signer = None

    # --- charge ----------------------------------------------------------------------------
    def charge(self) -> None:
        """The count-fit checks, the folders and the key, then the ledger charged once."""
        from dpcounts.ledger import Ledger, LedgerError
        from dpcounts.release.plan import _check_ledger_apart

        plan, request = self.plan, self.plan.request
        check_count_fit(request, plan.strata)  # the refusals that read the counts
        if request.sign_key is not None:
            from dpcounts.release.signature import SignatureError, load_private_key

            try:
                self.signer = load_private_key(request.sign_key, request.out)
            except SignatureError as err:
                raise ReleaseError(str(err)) from None
        folder.check_destination(self.private, request.force, private=True)
        _check_ledger_apart(request, self.private)
        path = request.ledger_path
        ledger = Ledger(path)
        try:
            entry = ledger.spend(
                plan.charge,
                label=request.input.name,
                release=str(request.out.resolve()),
                private=str(self.private.resolve()),
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

    # --- prior -----------------------------------------------------------------------------
    def draw_prior(self) -> None:
        """A sanitised prior drawn and the completed plan made from it."""
        if not self.plan.sanitised:
            return
        try:
            self.plan = self.plan.with_prior(_sanitised_prior(self.plan, self.root))
        except ReleaseError as err:
            raise ReleaseError(f"{err}. {self._spent_note()}") from err

    def _spent_note(self) -> str:
        """What a refusal after spending says was spent."""
        request, budget = self.plan.request, self.plan.budget
        return (
            f"The sanitised prior had been drawn: epsilon {budget.epsilon:g}, delta "
            f"{budget.delta:g} were spent on dataset {request.dataset} and stay recorded in "
            f"the ledger {request.ledger_path}"
        )

    # --- draw ------------------------------------------------------------------------------
    def draw(self) -> None:
        """The release sampler (a progress bar on a terminal), then each set from its own
        stream ``set:k`` of the root key."""
        plan = self.plan
        request, cal = plan.request, plan.calibration
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
                self.sampler = plan.design.sampler(
                    plan.strata.counts, cal, progress=advance, spill_dir=self.private.parent,
                    spilled=(plan.forecast or {}).get("spilled"),
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
        sets = plan.budget.sets
        self.synthetic = np.empty((sets, cal.n_cells), dtype=np.int64)
        bar = _progress_bar(request.progress, iterable=range(sets), desc="synthetic sets",
                            unit="set")  # fmt: skip
        for k in bar:
            self.synthetic[k] = self.sampler.draw(1, self.root.generator(f"set:{k}"))[0]

    # --- write -----------------------------------------------------------------------------
    def write(self) -> None:
        """The public files and the provenance, into new partial folders."""
        plan = self.plan
        request = plan.request
        if request.private_dir is None:  # the steward's area: its listing is private too
            self.private.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with folder.parent_locks((self.private, request.out)) as parents:
            for parent in parents:
                folder.remove_stale_partials(parent)  # left by killed runs; may hold a key
        self.partials[self.private] = folder.new_partial(self.private)
        self.partials[request.out] = folder.new_partial(request.out)
        self.info = write_release(
            self.partials[request.out], request, plan.strata, plan.calibration,
            self.synthetic, plan.budget, self.root, self.salt,
        )  # fmt: skip
        self.info["sampler"] = {"cutoff": self.sampler.cutoff, "tv_bound": self.sampler.tv_bound}
        self.info["ledger"] = self.entry
        self.info["signer"] = self.signer

    # --- report ----------------------------------------------------------------------------
    def report(self) -> dict:
        """The steward's summary and utility report, the manifest last, then both folders
        installed at once; returns the manifest."""
        plan = self.plan
        request = plan.request
        write_private(self.partials[self.private], request, plan.strata, plan.calibration,
                      self.synthetic, self.root, self.info, plan.design)  # fmt: skip
        finish_manifest(self.partials[request.out], self.info, plan.prior.table,
                        plan.prior.block, plan.design)  # fmt: skip
        folder.install(self.partials, request.force, self.private)
        return self.info["manifest"]

    def discard_partials(self) -> None:
        for partial in self.partials.values():
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)


def release(plan: Plan) -> dict:
    """Release ``plan`` (module docstring); return the manifest. Spent before anything is
    drawn: a release that fails after the charge still counts."""
    if not plan.releasing:
        raise ReleaseError("a plan made for a preview (releasing=False) cannot be released")
    state = _Releasing(plan)
    state.charge()
    state.draw_prior()
    state.draw()
    try:
        state.write()
        return state.report()
    finally:
        state.discard_partials()


def build_release(request: ReleaseRequest) -> dict:
    """Plan ``request`` and release it (:func:`release`); return the manifest."""
    return release(plan_release(request))
