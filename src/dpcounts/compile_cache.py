"""Where numba keeps the machine code of dpcounts's compiled loops, and what happens when
it can keep it nowhere.

The compiled modules (``dpcounts.sampling.tree_draw``, ``dpcounts.privacy.bivariate_loss``, ...)
ask numba to cache on disk, so only the first process of an install compiles (about 10 s
for a release's sampler; later processes load the code in well under a second). numba
looks for a writable place in this order: ``$NUMBA_CACHE_DIR`` when set; the package's own
``__pycache__`` (in site-packages after ``pip install``, in ``src/`` for a checkout); the
user's cache folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``). Where none is
writable (a read-only install with a read-only home), numba refuses to compile a cached
function at all; :func:`available` finds that out first, so the loops are then compiled in
memory in every process, with one warning naming ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

import warnings

from numba.core.caching import FunctionCache

_checked: dict[str, bool] = {}


def available(module_file: str) -> bool:
    """Whether numba can cache the compiled functions of ``module_file`` on disk (the
    ``cache=`` of their ``numba.njit``); warns once per module when it cannot."""
    if module_file not in _checked:

        def probe():  # a function "defined" in module_file, for numba's cache locators
            pass

        probe.__code__ = probe.__code__.replace(co_filename=module_file)
        try:
            FunctionCache(probe)
            _checked[module_file] = True
        except RuntimeError as error:  # "cannot cache function ...: no locator available"
            warnings.warn(
                f"numba cannot cache the compiled code of {module_file} ({error}): it is "
                "compiled again in every process (about 10 s). Set NUMBA_CACHE_DIR to a "
                "writable folder to keep it.",
                RuntimeWarning,
                stacklevel=2,
            )
            _checked[module_file] = False
    return _checked[module_file]


#: Printed on stderr before a release compiles its sampler for the first time.
FIRST_COMPILE = "compiling the sampler once, about 30 s; later runs reuse it"


def sampler_compiled(functions) -> bool:
    """Whether the machine code of the compiled ``functions`` (a release's sampler's entry
    points) is on disk and current (numba's index of each exists and its source stamp
    matches), so that a release loads it instead of compiling; True where numba cannot
    cache (every process compiles, and :func:`available` has warned)."""
    for function in functions:
        cache = getattr(function, "_cache", None)
        if not isinstance(cache, FunctionCache):
            return True
        try:
            if not cache._cache_file._load_index():
                return False
        except Exception:  # an unreadable index: numba compiles again
            return False
    return True
