"""What a study's guide judged, as a fingerprint a release checks (``--study``).

The study stage writes ``results/studies/<name>/guide.json`` beside ``guide.csv``
(:func:`write_fingerprint`): the entry's settings the verdicts depend on, the sha256 of
every file it reads (the table, the prior's file, the standard population: their bytes,
not their paths, so a checkout moved elsewhere keeps its guide), the measures' names and
:data:`MEASURES_VERSION`. ``dpcounts synthesize --study`` and ``calibrate --study``
compute the same fingerprint from the entry as it is today
(:meth:`dpcounts.release.study_source.StudySource.check_guide`) and refuse, before any
count is read, a guide that is missing or judged something else. Layout settings (the
titles, how the work is cut into jobs, the maps) change no verdict and are left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from dpcounts.studies.stage.definition import StudyDefinition

#: The version of the measures' and the guide's code: raised by a change that moves a
#: measure's value or a verdict (a new rule, a new measure), so that every guide judged by
#: the code before it is stale and a release on it refuses until the study runs again.
MEASURES_VERSION = 3
#: Fields of :class:`~dpcounts.studies.stage.definition.StudyDefinition` that change no
#: verdict: names in figures, how the work is cut into jobs, the maps.
LAYOUT = frozenset({
    "title", "sets_per_job", "epsilons_per_job", "batch", "map_epsilons", "geometry",
    "geometry_key", "geometry_outline", "geometry_missing",
})  # fmt: skip
#: Fingerprint keys -> the config key of ``studies.<name>`` that sets them (where the two
#: names differ), for a refusal's words.
CONFIG_KEYS = {
    "table": "table (its bytes)",
    "prior.path": "prior.path (its bytes)",
    "standard_population": "age.standard_population (its bytes)",
    "tolerance": "guide.tolerance",
    "tail": "truncation.tail",
    "inflation": "truncation.inflation",
    "age": "age.column",
    "age_bands": "age.bands",
    "single_years": "age.bands",
    "wonder": "format",
    "on_calibration_failure": "on_calibration_failure",
    "measures": "the measures (the registry's names)",
    "measures_version": "the measures' code (MEASURES_VERSION)",
}
#: The file that holds a study's fingerprint, beside its guide.
FILE_NAME = "guide.json"


def _file(path: Path | None):
    """A file the study reads, by its bytes: ``{"sha256": ...}``, or ``"missing"``."""
    if path is None:
        return None
    path = Path(path)
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return {"sha256": digest.hexdigest()}


def _plain(value):
    """``value`` as JSON values: mappings with sorted string keys, sequences as lists."""
    if isinstance(value, Path):
        return _file(value)
    if dataclasses.is_dataclass(value):
        drop = {"title", "label"}  # legend texts: no verdict depends on them
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in drop}  # fmt: skip
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def study_fingerprint(definition: StudyDefinition) -> dict:
    """What the guide of ``definition`` judges: every field but :data:`LAYOUT` (files by
    their sha256), the measures' names and :data:`MEASURES_VERSION`; JSON values."""
    from dpcounts.studies.stage.measures import study_measure_list

    out = {
        f.name: _plain(getattr(definition, f.name))
        for f in dataclasses.fields(definition)
        if f.name not in LAYOUT
    }
    out["measures"] = [m.name for m in study_measure_list(definition)]
    out["measures_version"] = MEASURES_VERSION
    return json.loads(json.dumps(out, sort_keys=True))  # tuples, floats as JSON reads them


def digest(fingerprint: dict) -> str:
    """The sha256 of a fingerprint's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint_record(definition: StudyDefinition) -> dict:
    """The content of ``guide.json``: the study's name, its fingerprint and its digest."""
    fingerprint = study_fingerprint(definition)
    return {"study": definition.name, "sha256": digest(fingerprint), "fingerprint": fingerprint}


def write_fingerprint(definition: StudyDefinition, path) -> None:
    """Write ``guide.json`` (:func:`fingerprint_record`) at ``path``, atomically."""
    from dpcounts.io import write_json

    write_json(fingerprint_record(definition), path)


def differences(judged: Mapping, today: Mapping, prefix: str = "") -> list[str]:
    """The keys (dotted, ``prior.epsilon``) whose values differ between two fingerprints,
    named as the config names them (:data:`CONFIG_KEYS`); never their values."""
    out = []
    for key in sorted(set(judged) | set(today)):
        a, b = judged.get(key), today.get(key)
        name = f"{prefix}{key}"
        if a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping) and set(a) != {"sha256"}:
            out += differences(a, b, f"{name}.")
        else:
            out.append(CONFIG_KEYS.get(name, name))
    return list(dict.fromkeys(out))
