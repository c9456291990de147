"""Write the config schema's mechanism and method enums from the one registry of mechanisms
(``dpcounts.mechanisms.registry``), as ``config/README.md`` is written from the schema.

    python tools/write_schema_enums.py          # rewrite workflow/schemas/config.schema.yaml
    python tools/write_schema_enums.py --check  # exit 1 (with a diff) if it is stale

Lines of the schema that end in a marker comment are the registry's: ``# registry:
mechanisms`` (an enum of every mechanism), ``# registry: methods`` (of every method), and
the lines between ``# registry: arms`` and ``# registry: end`` (a study's ``arms``
mapping: each mechanism and the methods it takes). Everything else is left as it is.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MARKED = re.compile(
    r"^(?P<indent>\s*)(?P<key>\w+): \{enum: \[[^\]]*\]\}  # registry: (?P<what>\w+)$"
)


def _enum(values) -> str:
    return "[" + ", ".join(values) + "]"


def render(text: str) -> str:
    """The schema ``text`` with every marked line made from the registry as it is now."""
    import dpcounts  # noqa: F401  (registers the papers' families)
    from dpcounts.mechanisms import registry

    lists = {"mechanisms": registry.names(), "methods": registry.methods()}
    out, skipping = [], False
    for line in text.splitlines():
        if skipping:
            if line.strip() == "# registry: end":
                out.append(line)
                skipping = False
            continue
        marked = MARKED.match(line)
        if marked and marked["what"] in lists:
            what = marked["what"]
            out.append(f"{marked['indent']}{marked['key']}: {{enum: {_enum(lists[what])}}}"
                       f"  # registry: {what}")  # fmt: skip
            continue
        out.append(line)
        if line.strip() == "# registry: arms":
            indent = line[: len(line) - len(line.lstrip())]
            for name in registry.names():
                methods = _enum(registry.family(name).methods)
                out.append(f"{indent}{name}: {{type: array, minItems: 1, items: {{enum: "
                           f"{methods}}}}}")  # fmt: skip
            skipping = True
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = SCHEMA.read_text()
    wanted = render(text)
    if "--check" in argv:
        if wanted != text:
            diff = difflib.unified_diff(text.splitlines(), wanted.splitlines(), str(SCHEMA),
                                        "from the registry", lineterm="")  # fmt: skip
            print("\n".join(diff))
            print(f"{SCHEMA} is stale: run python tools/write_schema_enums.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
