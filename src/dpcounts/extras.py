"""Optional dependencies: the package's extras and the error that names the missing one.

``pip install dpcounts`` installs what the mechanisms, releases, audits and studies need.
The pseudo-posterior synthesizers' MCMC (NumPyro's NUTS on JAX, about 390 MB installed,
mostly jaxlib) is the extra ``mcmc``: ``pip install 'dpcounts[mcmc]'``. The workflow's
pinned ``requirements.txt`` (what ``make`` installs) has it. The names here match
``[project.optional-dependencies]`` in pyproject.toml (a test checks it).
"""

from __future__ import annotations

from typing import NoReturn

#: Extra -> the top-level modules it provides (jaxlib comes with jax).
EXTRAS: dict[str, tuple[str, ...]] = {"mcmc": ("jax", "jaxlib", "numpyro")}


def message(extra: str, needed_by: str, missing: str) -> str:
    return (
        f"{needed_by} needs {missing}, which `pip install dpcounts` does not install: "
        f"install the extra {extra!r} with `pip install 'dpcounts[{extra}]'` "
        f"(it provides {', '.join(EXTRAS[extra])}; `make` installs them from requirements.txt)"
    )


def raise_missing(extra: str, needed_by: str, error: ModuleNotFoundError) -> NoReturn:
    """Re-raise ``error`` (a failed import in module ``needed_by``), naming the extra to
    install when the missing module is one of the extra's; any other as it was."""
    missing = (error.name or "").partition(".")[0]
    if missing in EXTRAS[extra]:
        raise ModuleNotFoundError(message(extra, needed_by, missing), name=error.name) from error
    raise error
