"""Check a workflow configuration against its JSON schema, with a short message on failure.

:func:`check_config` fills the schema's defaults into the configuration (in place, the way
``snakemake.utils.validate(config, schema, set_default=True)`` does), refuses every
non-finite float (no key of the configuration legitimately holds ``.inf`` or ``.nan``) and
raises :class:`ConfigError` naming the key, the offending value and what was expected, in
a few lines instead of a dump of the whole schema. A key an object's schema lists under
``x-renamed`` (``{old: new}``) is refused with the name of its new key. No Snakemake
import: the library is usable (and testable) without the workflow engine.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import validators
from jsonschema.exceptions import ValidationError, best_match

__all__ = ["ConfigError", "check_config", "load_schema"]

#: The schema keyword of an object's renamed keys, ``{old: new}``: an old key is refused as
#: unknown (no alias is kept), with the new key's name instead of a guess.
RENAMED = "x-renamed"
#: Longest rendering of an offending value before it is cut with "...".
_MAX_VALUE_CHARS = 70
#: Longest schema description quoted under the error line.
_MAX_DESCRIPTION_CHARS = 140


class ConfigError(ValueError):
    """The configuration breaks its schema; the message names the key and what was wanted."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        #: dotted key path of the offending value ("study1.epsilons.stop"); None for the root
        self.path = path


def load_schema(schema_path: str | PathLike[str]) -> dict:
    """Read a JSON schema stored as JSON or YAML (YAML needs PyYAML)."""
    text = Path(schema_path).read_text(encoding="utf-8")
    try:
        schema = json.loads(text)
    except ValueError:
        import yaml  # a YAML schema; Snakemake and the workflow bring PyYAML

        schema = yaml.safe_load(text)
    if not isinstance(schema, dict):
        raise ValueError(f"{schema_path}: a JSON schema must be a mapping at its top level")
    return schema


def check_config(config: dict, schema: str | PathLike[str] | Mapping[str, Any]) -> None:
    """Validate ``config`` against ``schema`` (a path or a loaded schema) and fill its defaults.

    Defaults are filled in place as by Snakemake's ``validate(..., set_default=True)``:
    whenever an object is checked against a ``properties`` keyword, every listed property
    that is absent and has a ``default`` gets a copy of it, before the properties themselves
    are checked (so nested defaults fill in too). Raises :class:`ConfigError` for a
    non-finite float anywhere in ``config`` and for the most relevant schema violation
    (``jsonschema.exceptions.best_match``).
    """
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a mapping of keys, got {_show(config)}")
    for path, value in _non_finite(config, ()):
        raise ConfigError(f"{_dotted(path)}: {_show(value)} is not a finite number", _dotted(path))

    if isinstance(schema, Mapping):
        schema_dict = copy.deepcopy(dict(schema))
        base_uri = ""
    else:
        schema_dict = load_schema(schema)
        base_uri = Path(schema).resolve().as_uri()
    cls = validators.validator_for(schema_dict, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema_dict)
    validator = _with_defaults(cls)(schema_dict, registry=_registry(schema_dict, base_uri))

    errors = list(validator.iter_errors(config))
    error = best_match(errors)
    if error is None:
        return
    path, line = _explain(error, schema_dict)
    lines = [line]
    description = _description(error)
    if description:
        lines.append(f"  ({_cut(description, _MAX_DESCRIPTION_CHARS)})")
    if len(errors) > 1:
        others = len(errors) - 1
        lines.append(f"  ({others} other problem{'s' if others > 1 else ''} in the config)")
    raise ConfigError("\n".join(lines), path)


# ---- defaults -----------------------------------------------------------------------------


def _with_defaults(validator_class: type) -> type:
    """``validator_class`` whose ``properties`` keyword first fills absent defaults."""
    check_properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator, properties, instance, schema) -> Iterator[ValidationError]:
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if isinstance(subschema, Mapping) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": fill_then_check})


def _registry(schema: dict, base_uri: str):
    """A registry resolving ``$ref`` inside ``schema`` and to schema files beside it."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    from referencing import Registry, Resource

    def retrieve(uri: str) -> Resource:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise ValueError(f"only local schema files are resolved, not {uri}")
        return Resource.from_contents(load_schema(url2pathname(parsed.path)))

    registry = Registry(retrieve=retrieve)
    if base_uri:
        schema["$id"] = base_uri  # relative $ref resolve beside the schema file
        registry = registry.with_resource(base_uri, Resource.from_contents(schema))
    return registry


# ---- non-finite numbers -------------------------------------------------------------------


def _non_finite(value: Any, path: tuple) -> Iterator[tuple[tuple, float]]:
    """(path, value) of every float in ``value`` that is inf, -inf or nan, in file order."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, (*path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, (*path, index))


# ---- messages -----------------------------------------------------------------------------

_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}

_BOUNDS = {
    "minimum": ">=",
    "exclusiveMinimum": ">",
    "maximum": "<=",
    "exclusiveMaximum": "<",
}

#: Size keywords: (what is sized, the bound, the unit counted).
_SIZES = {
    "minItems": ("a list of", "at least", "item"),
    "maxItems": ("a list of", "at most", "item"),
    "minLength": ("a string of", "at least", "character"),
    "maxLength": ("a string of", "at most", "character"),
    "minProperties": ("a mapping with", "at least", "key"),
    "maxProperties": ("a mapping with", "at most", "key"),
}


def _dotted(path) -> str:
    """``study2.pennlc.subgroups[0].name`` from a jsonschema path (keys and list indices)."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "the config"


def _show(value: Any) -> str:
    """``value`` as it would be written in the YAML config (flow style), cut when long."""
    return _cut(_yaml_flow(value), _MAX_VALUE_CHARS)


def _yaml_flow(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)}: {_yaml_flow(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    return repr(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) and re.fullmatch(r"[\w+\-]+", key) else _yaml_flow(key)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(value: Any) -> str:
    """A value inside an 'expected' phrase: strings unquoted when they are simple words."""
    if isinstance(value, str) and re.fullmatch(r"[\w+\-.]+", value):
        return value
    return _yaml_flow(value)


def _noun(schema: Mapping) -> str:
    """'an integer', 'a number or null'... from a schema's ``type`` ('a value' if none)."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, str):
        return _TYPE_NAMES.get(kind, kind)
    if isinstance(kind, list) and kind:
        return " or ".join(_TYPE_NAMES.get(k, k) for k in kind)
    return "a value"


def _expected(keyword: str, wanted: Any, schema: Mapping) -> str | None:
    """What the schema keyword ``keyword`` with value ``wanted`` asks for, in words."""
    if keyword == "type":
        return _noun({"type": wanted})
    if keyword in _BOUNDS:
        noun = _noun({"type": [t for t in _as_list(schema.get("type")) if t != "null"]})
        return f"{'a number' if noun == 'a value' else noun} {_BOUNDS[keyword]} {wanted}"
    if keyword == "enum":
        return "one of " + ", ".join(_plain(v) for v in wanted)
    if keyword == "const":
        return f"exactly {_plain(wanted)}"
    if keyword == "pattern":
        return f"a string matching {wanted}"
    if keyword in _SIZES:
        sized, bound, unit = _SIZES[keyword]
        return f"{sized} {bound} {wanted} {unit}{'s' if wanted != 1 else ''}"
    if keyword == "uniqueItems":
        return "a list without repeated items"
    if keyword == "multipleOf":
        return f"a multiple of {wanted}"
    if keyword == "not" and wanted == {}:  # a key renamed: its description names the new one
        return "the key left out (renamed: see below)"
    return None


def _describe(schema: Any) -> str:
    """The values a (sub)schema accepts, in words: 'one of a, b', 'a number > 0'..."""
    if not isinstance(schema, Mapping):
        return "a value"
    if "enum" in schema:
        return _expected("enum", schema["enum"], schema)
    if "const" in schema:
        return _expected("const", schema["const"], schema)
    bounds = [f"{_BOUNDS[k]} {schema[k]}" for k in _BOUNDS if k in schema]
    noun = _noun(schema)
    return f"{noun} {' and '.join(bounds)}" if bounds else noun


def _resolved(schema: Any, root: Mapping) -> Any:
    """``schema``, or the definition its local ``$ref`` (``#/definitions/x``) names."""
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, Mapping) else {}
        return node
    return schema


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _explain(error: ValidationError, root: Mapping) -> tuple[str | None, str]:
    """(dotted path, one line) for a jsonschema error against the schema ``root``."""
    path = list(error.absolute_path)
    keyword = error.validator
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    condition = _condition(error, root)
    where = f" ({condition})" if condition else ""

    if "propertyNames" in error.relative_schema_path:
        # the instance is the offending key itself; the path is its mapping's
        key_path = _dotted([*path, error.instance])
        wanted = _expected(keyword, error.validator_value, schema) or error.message
        wanted = wanted.replace("a string matching", "a key matching")
        return key_path, f"{key_path}: key {_show(error.instance)} not allowed, expected {wanted}"

    if keyword == "required" and isinstance(error.instance, Mapping):
        missing = [k for k in error.validator_value if k not in error.instance]
        name = missing[0] if missing else "?"
        key_path = _dotted([*path, name])
        sub = _resolved(schema.get("properties", {}).get(name), root)
        return key_path, f"{key_path}: missing, a required key{where}; expected {_describe(sub)}"

    if keyword == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        unknown = [
            k
            for k in error.instance
            if k not in allowed and not any(re.search(p, str(k)) for p in patterns)
        ]
        name = unknown[0] if unknown else "?"
        key_path = _dotted([*path, name])
        renamed = schema.get(RENAMED, {})
        if isinstance(renamed, Mapping) and name in renamed:
            new = _dotted([*path, renamed[name]])
            return key_path, f"{key_path}: renamed; write {new} instead (same meaning and values)"
        close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        listed = ", ".join(str(a) for a in allowed) or "none"
        return key_path, f"{key_path}: unknown key{hint} (allowed: {_cut(listed, 120)})"

    key_path = _dotted(path)
    wanted = _expected(keyword, error.validator_value, schema)
    if keyword in ("anyOf", "oneOf") and isinstance(error.validator_value, list):
        # every alternative, in words: "a mapping or exactly single-years"
        alternatives = [_describe(_resolved(sub, root)) for sub in error.validator_value]
        wanted = " or ".join(dict.fromkeys(alternatives))
    if wanted is None:
        return key_path, f"{key_path}: {_cut(error.message, 160)}{where}"
    return key_path, f"{key_path}: got {_show(error.instance)}, expected {wanted}{where}"


def _condition(error: ValidationError, root: Mapping) -> str:
    """'needed because truth.source is wonder' when the failing check sits under an if/then.

    Follows the error's schema path from the root schema to the object holding the ``if``
    (empty string when the path crosses a ``$ref`` or the ``if`` is not a list of ``const``).
    """
    steps = list(error.schema_path)
    branches = [i for i, step in enumerate(steps) if step in ("then", "else")]
    if not branches:
        return ""
    k = branches[-1]
    node: Any = root
    try:
        for step in steps[:k]:
            node = node[step]
        if_schema = node["if"]
    except (KeyError, IndexError, TypeError):
        return "needed by a condition of the schema (if/then)"
    # instance levels entered below the branch: the object that the if/then tests
    depth, rest = 0, iter(steps[k + 1 :])
    for step in rest:
        if step in ("properties", "patternProperties", "prefixItems"):
            next(rest, None)
            depth += 1
        elif step in ("additionalProperties", "items", "contains", "unevaluatedItems"):
            depth += 1
        elif step in ("allOf", "anyOf", "oneOf"):
            next(rest, None)
    path = list(error.absolute_path)
    owner = path[: len(path) - depth] if depth <= len(path) else []
    tests = [
        f"{_dotted([*owner, name])} is {_plain(sub['const'])}"
        for name, sub in (if_schema.get("properties") or {}).items()
        if isinstance(sub, Mapping) and "const" in sub
    ]
    if not tests:
        return "needed by a condition of the schema (if/then)"
    verb = "needed because" if steps[k] == "then" else "needed unless"
    return f"{verb} {' and '.join(tests)}"


def _description(error: ValidationError) -> str | None:
    """The schema description of the offending key, if the schema gives one."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [k for k in error.validator_value if k not in error.instance]
        sub = schema.get("properties", {}).get(missing[0]) if missing else None
        return sub.get("description") if isinstance(sub, Mapping) else None
    if error.validator == "additionalProperties" or "propertyNames" in error.relative_schema_path:
        return None
    return schema.get("description")
