"""The public folder's ``README.md``: the release in words, for the analyst who receives the
folder and has never heard of dpcounts.

:func:`readme_text` writes it from the manifest alone (every number on the page is a field
of ``manifest.json``), so it publishes nothing the manifest does not: it is written once the
manifest is built but for its own entry in ``files``, then hashed and listed there like any
public file (:func:`dpcounts.release.publication.finish_manifest`), so the signature covers
it. ``dpcounts verify`` writes it again from the published manifest and compares
(``files/readme``).
"""

from __future__ import annotations

#: The page's file name in the release folder, and its name in the manifest's ``files``.
README = "README.md"
ENTRY = "readme"
#: The largest README a verifier reads, in bytes (a real one is a few kilobytes).
MAX_README_BYTES = 1 << 20
#: The page's ``layout`` line in the manifest's ``files``.
LAYOUT = (
    "this page in Markdown: what the folder is, every file, how to check it (dpcounts "
    "verify) and analyse it (dpcounts estimate), and what it cannot tell; written from this "
    "manifest alone (its numbers are the manifest's, to 6 significant digits)"
)
#: One line on each file a release lists, by its name in ``files``, in the page's order (a
#: name it does not know is not a release's, and ``verify``'s ``files/names`` fails it).
_FILE_LINES = {
    "synthetic": (
        "the {sets} in long form, one row per set and stratum: `set` ({numbers}), the "
        "keys{attributes}, `count` (the synthetic count) and `{population}`"
    ),
    "hyperparameters": (
        "one row per stratum: the keys{attributes}, then the public calibration each set was "
        "drawn with ({columns}){bounds}; `dpcounts estimate` reads it"
    ),
    "prior": "the sanitised prior's groups: their populations, noisy totals and prior rates",
}


def _hyperparameters(mechanism: str) -> tuple[str, ...]:
    """The columns the mechanism's hyperparameters publish beside the keys (the registry's
    :attr:`~dpcounts.mechanisms.registry.Family.hyperparameters`)."""
    from dpcounts.mechanisms import registry

    return registry.family(mechanism).hyperparameters


def _sets(sets: int) -> str:
    return "1 synthetic set" if sets == 1 else f"{sets} synthetic sets"


def _n(x) -> str:
    """A manifest number as the page writes it: 6 significant digits."""
    return f"{x:.6g}"


def readme_text(manifest: dict) -> str:
    """The README of the release whose manifest is ``manifest`` (its ``files`` entry of the
    README itself, if any, is not read): Markdown, from the manifest's fields alone."""
    m = manifest
    keys, budget = list(m["keys"]), m["budget"]
    attributes = list(m.get("attributes") or [])
    sets, bounded = m["sets"], m.get("truncation") is not None
    denominator = (m.get("denominator") or {}).get("kind", "population")
    prior = m["prior"]
    files = {name: entry for name, entry in m["files"].items() if name != ENTRY}
    first = keys[0]
    rate = "SMR (observed / expected)" if denominator == "expected" else "rate per 100,000"

    lines = [
        "# A differentially private synthetic release of a table of counts",
        "",
        f"This folder is a release made by dpcounts {m['dpcounts_version']} (purpose: "
        f"{m['purpose']}). It holds **{_sets(sets)}** of a confidential table of "
        f"counts of **{m['strata']} strata**, each stratum one combination of the keys "
        f"{', '.join(f'`{k}`' for k in keys)}"
        + (
            f", with the public attributes {', '.join(f'`{a}`' for a in attributes)}"
            if attributes
            else ""
        )  # fmt: skip
        + f". Each set is a whole table of every stratum and sums to the public total "
        f"{m['total']}. The sets are **not the true counts**: each was drawn at random from "
        "a distribution that depends on them, so that the release as a whole is "
        "differentially private.",
        "",
        f"- mechanism: `{m['mechanism']}`, calibration method `{m['method']}` "
        f"({m['guarantee']['status']})",
        f"- privacy: epsilon {_n(budget['epsilon_total'])} and delta "
        f"{_n(budget['delta_total'])} in total; each set epsilon "
        f"{_n(budget['epsilon_per_set'])} and delta {_n(budget['delta_per_set'])}; the "
        f"prior epsilon {_n(budget['epsilon_prior'])}",
        f"- the promise: {m['guarantee']['statement']}",
        f"- the unit of privacy (the neighbouring relation). {m['neighbouring_relation']}",
        f"- the prior, `{prior['kind']}`: "
        + prior["description"].removeprefix(f"{prior['kind']}: "),
        f"- `{m['population_column']}` holds "
        + ("expected counts: rates are SMRs" if denominator == "expected" else "populations"),
    ]
    if bounded:
        lines.append(
            f"- truncated: each stratum's synthetic counts lie within its bounds `lower` and "
            f"`upper` (in the hyperparameters), made so that a true count lies below `lower`, "
            f"or above `upper`, with probability at most {_n(m['truncation']['tail'] / 2)} "
            f"each (the tail {_n(m['truncation']['tail'])}, inflation "
            f"{_n(m['truncation']['inflation'])})"
        )
    lines += ["", "`manifest.json` states all of this exactly, field by field.", ""]

    lines += ["## The files", ""]
    fill = {
        "sets": _sets(sets),
        "numbers": "always 0" if sets == 1 else f"0 to {sets - 1}",
        "attributes": (", the attributes" if attributes else ""),
        "population": m["population_column"],
        "columns": ", ".join(f"`{c}`" for c in _hyperparameters(m["mechanism"])),
        "bounds": "; `lower` and `upper` are the truncation bounds" if bounded else "",
    }
    for name in (n for n in _FILE_LINES if n in files):  # manifest.json sorts its keys
        line = _FILE_LINES[name].format(**fill)
        lines.append(f"- `{files[name]['path']}`: {line}")
    lines += [
        "- `manifest.json`: what the release is and promises, and every file's SHA-256",
        f"- `{README}`: this page, written from the manifest and listed in it",
        "- `signature.json`, if present: the steward's Ed25519 signature of `manifest.json`",
        "",
        "## Check it",
        "",
        "Install dpcounts (the Python package that made it), then check the folder against "
        "its manifest: every file's SHA-256, the sets' totals, the privacy bound recomputed "
        "from the hyperparameters, the numbers of the promise:",
        "",
        "```sh",
        "dpcounts verify FOLDER",
        "dpcounts verify FOLDER --key STEWARD.pub   # a signed folder: the steward's key",
        "```",
        "",
        "`FOLDER` is this folder's path. Take the steward's public key from the steward, "
        "never from the folder. `dpcounts estimate` refuses a folder that verify rejects.",
        "",
        "## Analyse it",
        "",
        f"Each group's {rate} with a 90% interval, here by `{first}`:",
        "",
        "```sh",
        f"dpcounts estimate FOLDER --by {first} --level 0.9 --out rates.csv",
        "```",
        "",
        "`--by` takes any keys or attributes; `--measure age-adjusted --age-column AGE` gives "
        "directly age-adjusted rates, `--measure disparity --numerator COLUMN=VALUE "
        "--denominator COLUMN=VALUE` a ratio of rates; `--method posterior` (the default) "
        "uses the published hyperparameters, `--method combining` the combining rules for "
        "fully synthetic data. It reads nothing but this folder.",
        "",
        "Analyse every set and combine the results (dpcounts' docs/analyse.md shows how, "
        "in R too): never one set alone as if it were the data, and never the sets pooled "
        "as one larger table. The spread between the sets is what carries the privacy noise "
        "into the interval.",
        "",
        "## What it cannot tell",
        "",
        "- The sets are not the true counts, and no set is more true than another.",
    ]
    if bounded:
        lines.append(
            "- A true count outside its stratum's bounds `lower` and `upper` appears in no "
            "set, and no interval from the sets reaches it; where the truth often lies "
            "beyond the bounds, the intervals cover it less often than their level says."
        )
    lines += [
        "- The intervals assume the sets are what the manifest says; verify checks what a "
        "folder can show, not how the sets were drawn.",
        "",
    ]
    return "\n".join(_wrapped(lines))


#: The page's width: prose is wrapped to it, code is not.
WIDTH = 88


def _wrapped(lines: list[str]):
    """``lines`` with prose wrapped to :data:`WIDTH` (a list item's lines indented under
    it); a code block's lines, headings and blank lines as they are."""
    import textwrap

    code = False
    for line in lines:
        if line.startswith("```"):
            code = not code
        if code or line.startswith(("```", "#")) or len(line) <= WIDTH:
            yield line
            continue
        yield from textwrap.wrap(
            line,
            WIDTH,
            subsequent_indent="  " if line.startswith("- ") else "",
            break_long_words=False,
            break_on_hyphens=False,
        )
