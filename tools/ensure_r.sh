#!/usr/bin/env bash
# The no-privacy intervals' test (tests/test_intervals_epitools.py) compares them with the real
# R epitools' ageadjust.direct and base R's poisson.test. `make test` calls this first: with
# Rscript and epitools installed it does nothing; as root on Debian/Ubuntu it installs the
# distribution's r-base-core and r-cran-epitools (set R_INSTALL=no to skip); otherwise it says
# so, and that test is skipped with the same message.
set -euo pipefail

has_epitools() {
    command -v Rscript >/dev/null 2>&1 \
        && Rscript -e 'suppressPackageStartupMessages(library(epitools))' >/dev/null 2>&1
}

if has_epitools; then
    exit 0
fi
if [ "${R_INSTALL:-auto}" = "no" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "ensure_r: no Rscript with epitools; the epitools comparison test will be skipped" \
        "(Debian: apt-get install r-base-core r-cran-epitools)" >&2
    exit 0
fi
echo "ensure_r: installing Debian's r-base-core and r-cran-epitools for the epitools" \
    "comparison test" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/dev/null 2>&1 \
    && apt-get install -y -qq --no-install-recommends r-base-core r-cran-epitools \
        >/dev/null 2>&1; }; then
    echo "ensure_r: the install failed; the epitools comparison test will be skipped" >&2
    exit 0
fi
if ! has_epitools; then
    echo "ensure_r: installed, but Rscript cannot load epitools; that test will be skipped" >&2
fi
