"""What a release was asked to do, and how its privacy budget is split.

``epsilon`` is the *total* budget of the whole release. It is spent in two places:

* the sanitised prior (``prior_epsilon``, only with ``sanitised_prior_by``): group totals
  of the counts released with discrete Laplace noise;
* the synthetic sets: ``sets`` independent draws share ``epsilon - prior_epsilon``
  equally, each set calibrated to ``epsilon_per_set = (epsilon - prior_epsilon) / sets``.

``delta`` is the total delta of the release (the sampler's floating-point and tail
error, docs/privacy.md); the sets share it equally. By basic composition the whole release
is (epsilon, delta)-DP under the neighbouring relation of :data:`NEIGHBOURS`.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from dpcounts.calibration import DEFAULT_DELTA  # the default total delta, re-exported
from dpcounts.ledger import check_name, default_ledger_path, steward_home
from dpcounts.release.study_source import StudySource

#: The unit of privacy, stated once and copied into the manifest and ``--help``.
NEIGHBOURS = (
    "Two tables of counts are neighbours when they differ by one event moved from one "
    "stratum to another (one count down by 1, another up by 1). The total number of "
    "events, the strata (their keys) and their populations are released exactly and are "
    "public; so is any external prior file. Epsilon bounds how much the release can tell "
    "about which stratum an event is in, not whether the event exists."
)
#: Default share of epsilon spent on a sanitised prior when none is given.
DEFAULT_PRIOR_SHARE = 0.1
#: Share of this machine's memory a release may be forecast to need by default.
MEMORY_SHARE = 0.6
#: The default ceiling where the machine does not say how much memory it has, in bytes.
FALLBACK_MAX_MEMORY = 4 * 2**30


def machine_memory() -> float:
    """Bytes of memory a process here may use: the machine's physical memory, or its
    control group's limit (cgroup v2 ``memory.max``) when lower; infinite when neither
    is known."""
    import os

    try:
        memory = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        memory = math.inf
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            memory = min(memory, float(limit))
    except OSError:
        pass
    return memory


def default_max_memory() -> int:
    """The default ``--max-memory``: MEMORY_SHARE (60%) of :func:`machine_memory`, down
    to a tenth of a GiB, so a release that fits the machine runs (FALLBACK_MAX_MEMORY
    where the machine does not say)."""
    memory = machine_memory()
    if not math.isfinite(memory):
        return FALLBACK_MAX_MEMORY
    return int(math.floor(MEMORY_SHARE * memory / 2**30 * 10) / 10 * 2**30)


#: Default ceiling on the release's forecast memory, in bytes (:func:`default_max_memory`).
DEFAULT_MAX_MEMORY = default_max_memory()
#: Default ceiling on the release's forecast time on this machine, in minutes: an hour, so
#: that a release that fits the memory of a loaded 2-core machine runs (10M strata of issue
#: #36 take about 10 minutes there); --max-minutes sets a tighter one.
DEFAULT_MAX_MINUTES = 60.0
#: The words ``--strata`` takes besides a file, and the source each names (the manifest's
#: ``strata_list.source``, ``strata_list.STATEMENTS``); there is no default.
STRATA_WORDS = {"input": "declared", "cross-product": "cross-product"}
#: Why ``--strata`` has no default, and its three forms (the command line's error, and the
#: library's for a request without one).
STRATA_REQUIRED = """\
--strata is required: say where the list of strata comes from.
The release publishes its strata exactly, so the list must not depend on the counts (an
input that leaves out its strata without events, e.g. a county with no death in any age
group, would reveal them at any epsilon), and only you know where yours comes from:
  --strata FILE           a public CSV or Parquet list of every stratum and its population;
                          the input's counts are matched to it, unlisted strata count 0
  --strata input          you declare that the input lists every stratum, zero counts
                          included (e.g. nested keys such as state and county)
  --strata cross-product  you declare that every value of every key column appears in the
                          input; dpcounts checks that every combination of them has a row"""


#: Why ``--dataset`` has no default (the command line's error, and the library's).
DATASET_REQUIRED = (
    "--dataset NAME is required: the name of the confidential data this table counts (the "
    "people, the events), e.g. --dataset us-deaths-1999; the ledger adds up every release "
    "under NAME against its budget. Give every table of the same people the same NAME"
)


class ReleaseError(ValueError):
    """Bad input or options: the message names the file, column, key or option at fault."""


@dataclass(frozen=True)
class ReleaseRequest:
    """Everything ``dpcounts synthesize`` was asked to do (the parsed command line)."""

    input: Path
    out: Path
    epsilon: float
    mechanism: str
    keys: tuple[str, ...]
    #: where the list of every stratum comes from, declared by the steward (no default,
    #: :data:`STRATA_REQUIRED`): a public file (a Path; any other string than the words of
    #: :data:`STRATA_WORDS` is a file name), "input" (the input lists every stratum) or
    #: "cross-product" (every key value appears in the input; its combinations are checked)
    strata: Path | str
    #: the name of the confidential data the table counts (the people, the events), the
    #: unit of the privacy budget (no default, :data:`DATASET_REQUIRED`): the ledger adds
    #: up every release under one name, whatever its table, against the name's stored
    #: budget. A table released under a name must keep it (``dpcounts.ledger``). None only
    #: for a preview (``dpcounts calibrate`` without ``--dataset``); a release refuses it
    dataset: str | None
    method: str = "certified"
    allow_nominal: bool = False
    tail: float | None = None
    inflation: float = 1.0
    sets: int = 1
    delta: float = DEFAULT_DELTA
    test_seed: int | None = None
    wonder: bool = False
    count_column: str | None = None  # None: "count" ("deaths" for --wonder)
    population_column: str = "population"
    #: what ``population_column`` holds: ``population`` (people, person-years) or
    #: ``expected`` (expected counts of indirect standardisation, ``--expected-column``;
    #: rates are SMRs, no count bound; public like populations, docs/privacy.md)
    denominator: str = "population"
    prior_rate_column: str = "prior_rate"
    prior_file: Path | None = None
    sanitised_prior_by: tuple[str, ...] | None = None
    #: the steward's word that the prior rates (``prior_file`` or the input's column) are
    #: public although they fit the counts far better than chance (:mod:`.prior_check`)
    prior_is_public_i_am_sure: bool = False
    #: the steward's declaration of where public prior rates that vary stratum by stratum
    #: come from (:mod:`.prior_source`); written into the manifest
    prior_source: str | None = None
    #: the key columns of the population units when strata share a population (the causes
    #: of death of one county and age group); None: every stratum its own
    population_keys: tuple[str, ...] | None = None
    #: public columns of the strata published beside the keys (``--attributes``, a
    #: study's ``attributes``): one value per stratum, declared public by the steward like
    #: the keys, never computed from the counts; a sanitised prior and ``dpcounts
    #: estimate`` may group by them (:func:`.inputs.load_strata` checks them)
    attributes: tuple[str, ...] = ()
    #: the steward's word that the attributes are public although one splits the counts
    #: or rates with no overlap (:mod:`.attribute_check`)
    attributes_are_public_i_am_sure: bool = False
    #: the study whose entry decides the table, keys, prior and settings (``--study``,
    #: :mod:`.study_source`), or None
    study: StudySource | None = None
    #: the steward's word that the release goes ahead although the study's guide is missing
    #: or stale (``--release-without-guide``; :meth:`.StudySource.check_guide`); the
    #: private summary says so
    release_without_guide: bool = False
    prior_epsilon: float | None = None
    rounding: str = "refuse"  # fractional counts: refuse, or round to nearest (half to even)
    #: the dataset's budget: stored in the ledger if it has none (then every later release
    #: under the name is checked against it), else a cap of this release, refused when it
    #: exceeds the stored one
    budget: float | None = None
    ledger: Path | None = None
    #: the steward's declaration that the dataset counts other people than the released
    #: datasets whose strata its table overlaps (``--new-dataset``, recorded in the
    #: ledger; :mod:`dpcounts.ledger.index`)
    new_dataset: bool = False
    max_memory: int = DEFAULT_MAX_MEMORY
    max_minutes: float = DEFAULT_MAX_MINUTES
    group_by: str | None = None
    fips_column: str | None = None
    county_frame: Path | None = None
    output_format: str = "parquet"
    #: the steward's private folder (root key, summary of the original totals); None: a
    #: new folder in the steward's private area (:meth:`private_folder`)
    private_dir: Path | None = None
    force: bool = False
    #: the steward's Ed25519 private key (``--sign-key``, :mod:`.signature`): the release
    #: is signed with it; never inside ``out``
    sign_key: Path | None = None
    progress: bool | None = None  # None: only on a terminal

    @property
    def needs_prior(self) -> bool:
        from dpcounts.mechanisms import registry

        return registry.family(self.mechanism).uses_prior

    @property
    def strata_source(self) -> str:
        """Where the list of every stratum comes from (``strata_list.STATEMENTS``):
        ``cross-product`` (declared, its combinations checked; ``--strata cross-product``),
        ``declared`` (``--strata input``) or ``external-file`` (``--strata FILE``).
        :class:`ReleaseError` (:data:`STRATA_REQUIRED`) when the request names none."""
        if self.strata is None or (isinstance(self.strata, str) and not self.strata.strip()):
            raise ReleaseError(STRATA_REQUIRED)
        if isinstance(self.strata, str) and self.strata in STRATA_WORDS:
            return STRATA_WORDS[self.strata]
        return "external-file"

    @property
    def ledger_path(self) -> Path:
        """The ledger this release is recorded in (``--ledger``, else the default)."""
        return Path(self.ledger or default_ledger_path())

    def private_folder(self, commitment: str) -> Path:
        """Where the release whose manifest has seed commitment ``commitment`` puts its
        private folder: ``private_dir``, or by default a new folder
        ``<out name>-<first 16 hex digits of the commitment>`` in :func:`private_area`,
        away from the release so that publishing the folder that holds the release does not
        publish its key. The commitment links a published manifest to its private folder.
        """
        if self.private_dir is not None:
            return self.private_dir
        area = private_area()
        if self.out.resolve().is_relative_to(area.resolve()):
            raise ReleaseError(
                f"--out {self.out} lies in the steward's private area {area}, where the "
                "private folders go by default; put the release elsewhere (or give "
                "--private-dir)"
            )
        return area / f"{self.out.resolve().name}-{commitment[:16]}"


#: The default of every option of a request: the one source the command line shows and uses.
DEFAULTS = {f.name: f.default for f in fields(ReleaseRequest) if f.default is not MISSING}


def private_area() -> Path:
    """The folder of the releases' private folders by default: ``private/`` in the
    steward's folder (``$XDG_DATA_HOME/dpcounts``, beside the default ledger)."""
    return steward_home() / "private"


@dataclass(frozen=True)
class Budget:
    """The split of a release's total (epsilon, delta)."""

    epsilon: float
    delta: float
    epsilon_prior: float
    sets: int

    @property
    def epsilon_synthesis(self) -> float:
        return self.epsilon - self.epsilon_prior

    @property
    def epsilon_per_set(self) -> float:
        return self.epsilon_synthesis / self.sets

    @property
    def delta_per_set(self) -> float:
        return self.delta / self.sets

    def as_dict(self) -> dict:
        return {
            "epsilon_total": self.epsilon,
            "epsilon_prior": self.epsilon_prior,
            "epsilon_synthesis": self.epsilon_synthesis,
            "epsilon_per_set": self.epsilon_per_set,
            "delta_total": self.delta,
            "delta_per_set": self.delta_per_set,
            "sets": self.sets,
            "composition": (
                "basic sequential composition: epsilon_total = epsilon_prior + sets x "
                "epsilon_per_set and delta_total = sets x delta_per_set (the prior's noise "
                "is pure epsilon_prior-DP)"
            ),
        }


def plan_budget(request: ReleaseRequest) -> Budget:
    """Split the request's total budget; :class:`ReleaseError` names a bad option."""
    eps = request.epsilon
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ReleaseError(f"--epsilon must be a finite number > 0, got {eps!r}")
    if not (isinstance(request.sets, int) and request.sets >= 1):
        raise ReleaseError(f"--sets must be a whole number >= 1, got {request.sets!r}")
    delta = request.delta
    if not (math.isfinite(delta) and 0 < delta < 1e-3):
        raise ReleaseError(f"--delta must be a number in (0, 0.001), got {delta!r}")
    sanitised = request.sanitised_prior_by is not None and len(request.sanitised_prior_by) > 0
    if request.prior_epsilon is not None and not sanitised:
        raise ReleaseError("--prior-epsilon applies only with --sanitised-prior-by COLUMN...")
    eps_prior = 0.0
    if sanitised:
        eps_prior = (
            DEFAULT_PRIOR_SHARE * eps if request.prior_epsilon is None else request.prior_epsilon
        )
        if not (math.isfinite(eps_prior) and 0 < eps_prior < eps):
            raise ReleaseError(
                f"--prior-epsilon must lie strictly between 0 and --epsilon {eps:g} (the "
                f"total), got {eps_prior!r}"
            )
    if request.budget is not None and not (math.isfinite(request.budget) and request.budget > 0):
        raise ReleaseError(f"--budget must be a finite number > 0, got {request.budget!r}")
    if request.dataset is not None:
        try:
            check_name(request.dataset)
        except ValueError as err:
            raise ReleaseError(f"--dataset: {err}") from None
    return Budget(float(eps), float(delta), float(eps_prior), int(request.sets))
