"""The checks' records and the one list of them.

A :class:`Check` is one comparison of ``dpcounts verify``: its topic (:data:`TOPICS`), a
name, a status (:data:`FAIL` fails the verification; :data:`OK`, :data:`WARNING` and
:data:`NOMINAL` do not) and what was compared. Every check the verifier may emit is a
:class:`CheckSpec` of :data:`CHECKS`, the one list, which each topic's module fills
(:func:`register`) beside the function that emits its checks; every :class:`Check` is made
by :func:`_check` from an entry of it (an unregistered name raises
:class:`UnregisteredCheck`, a bug, not a finding). ``dpcounts verify --help``
(:func:`describe_checks`) and docs/verify-checks.md (``tools/write_verify_checks.py``) are
written from it, and the tests check that every entry is emitted by some release of their
corpus and nothing else is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Statuses: ``FAIL`` makes the verification fail; the others do not.
OK, FAIL, WARNING, NOMINAL = "ok", "FAIL", "warning", "nominal"
#: The topics, in the order they run: a module of :mod:`dpcounts.verify` each.
TOPICS = ("files", "synthetic", "hyperparameters", "promise", "metadata")
#: Relative tolerance of the manifest's arithmetic (sums and products of decimals, read back
#: from JSON): not the ledger's budget check (``dpcounts.ledger.budget.BUDGET_RTOL``).
ARITHMETIC_RTOL = 1e-9
#: Relative tolerance of quantities the release computes by one division or a copy.
VALUE_RTOL = 1e-12


@dataclass(frozen=True)
class Check:
    """One comparison: its topic, a short name, the outcome and what was compared."""

    topic: str
    name: str
    status: str
    detail: str
    values: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


class UnregisteredCheck(LookupError):
    """A check emitted under a (topic, name) that :data:`CHECKS` does not hold: a
    programming error of the verifier, never a finding about a release."""


@dataclass(frozen=True)
class CheckSpec:
    """One check :func:`verify_release` may emit: its topic, its name (a pattern when it
    holds ``{file}``, a name of the manifest's ``files``) and one line saying what it
    compares and why that matters."""

    topic: str
    name: str
    what: str

    def matches(self, topic: str, name: str) -> bool:
        """Whether a :class:`Check` of ``topic`` named ``name`` is this check."""
        if topic != self.topic:
            return False
        head, placeholder, tail = self.name.partition("{file}")
        if not placeholder:
            return name == self.name
        return len(name) > len(head) + len(tail) and name.startswith(head) and name.endswith(tail)


def _e(x: float) -> str:
    """A tolerance as the docs write it: ``1e-9``."""
    return f"{x:.0e}".replace("e-0", "e-")


#: Every check of ``dpcounts verify``, by topic in the order it runs them: the one list,
#: from which ``dpcounts verify --help`` and docs/verify-checks.md
#: (``tools/write_verify_checks.py``) are written. A check named after its topic (or
#: ``listed files``) is the topic's failure when a file or field it reads cannot be read.
#: Each topic's module adds its checks (:func:`register`) where it runs them; importing
#: :mod:`dpcounts.verify` imports every topic, so the list is whole.
CHECKS: list[CheckSpec] = []
_REGISTERED: dict[tuple[str, str], CheckSpec] = {}


def register(*specs: CheckSpec) -> None:
    """Add a topic's checks to :data:`CHECKS`, in the order given, after the checks of
    their topic and of the topics before it (:data:`TOPICS`), whichever topic's module is
    imported first; a topic not in :data:`TOPICS` or a check registered twice is a
    ValueError."""
    for spec in specs:
        key = (spec.topic, spec.name)
        if spec.topic not in TOPICS:
            raise ValueError(f"{spec.topic}/{spec.name}: {spec.topic!r} is not one of {TOPICS}")
        if key in _REGISTERED:
            raise ValueError(f"{spec.topic}/{spec.name} is registered twice")
        rank = TOPICS.index(spec.topic)
        CHECKS.insert(sum(TOPICS.index(s.topic) <= rank for s in CHECKS), spec)
        _REGISTERED[key] = spec


def registered(topic: str, name: str) -> CheckSpec:
    """The entry of :data:`CHECKS` that a check of ``topic`` named ``name`` is (a listed
    file's name fills a pattern's ``{file}``); :class:`UnregisteredCheck` if none."""
    found = _REGISTERED.get((topic, name))
    if found is None:
        found = next((spec for spec in CHECKS if spec.matches(topic, name)), None)
    if found is None:
        raise UnregisteredCheck(f"{topic}/{name} is not in dpcounts.verify.CHECKS")
    return found


def _check(
    topic: str, name: str, status: str, detail: str, values: dict | None = None, **fields
) -> Check:
    """The :class:`Check` of the registered check ``(topic, name)``: ``name`` is the entry's
    name as :data:`CHECKS` spells it, a pattern's ``{file}`` given in ``fields``."""
    spec = _REGISTERED.get((topic, name))
    if spec is None:
        raise UnregisteredCheck(f"{topic}/{name} is not in dpcounts.verify.CHECKS")
    shown_name = spec.name.format(**fields) if fields else spec.name
    return Check(topic, shown_name, status, detail, {} if values is None else values)


def describe_checks(full: bool = False, width: int = 80) -> str:
    """The checks by topic, as ``dpcounts verify --help`` shows them: their names, a line or
    two a topic; with ``full`` (``--help-all``), each with what it checks."""
    import textwrap

    lines = []
    for topic in TOPICS:
        specs = [spec for spec in CHECKS if spec.topic == topic]
        if full:
            lines.append(f"{topic}:")
            for spec in specs:
                lines += textwrap.wrap(
                    f"{spec.name}: {spec.what.replace('`', '')}", width,
                    initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False,
                )  # fmt: skip
        else:  # a name is never cut across lines
            line = f"  {topic}:"
            for k, spec in enumerate(specs):
                word = spec.name + ("," if k < len(specs) - 1 else "")
                if len(line) + 1 + len(word) > width:
                    lines.append(line)
                    line = "   "
                line += " " + word
            lines.append(line)
    return "\n".join(lines) + "\n"
