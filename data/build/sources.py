"""Fetch the pinned source packages into the raw cache and extract the files we use.

Each source is a package from an ordinary registry, fetched with that registry's own
client and pinned to one version, so ``make data`` sees the same bytes every time:

* PyPI sdist ``pysal==1.14.4``      -> ``pysal/examples/nat/`` (NCOVR NAT, BSD-3-Clause)
* npm ``vega-datasets@3.2.1``       -> ``data/population.json`` (BSD-3-Clause)
* Debian ``r-cran-rgooglemaps``     -> ``.../RgoogleMaps/data/pennLC.rda`` (GPL-2)
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

PYSAL_VERSION = "1.14.4"
VEGA_VERSION = "3.2.1"
RGOOGLEMAPS_VERSION = "1.4.5.3-2"

NAT_MEMBERS = ("NAT.shp", "NAT.shx", "NAT.dbf", "nat_queen.gal", "nat_queen_old.gal")
NAT_DIR = f"PySAL-{PYSAL_VERSION}/pysal/examples/nat"
PENNLC_PATH = "usr/lib/R/site-library/RgoogleMaps/data/pennLC.rda"


@dataclass(frozen=True)
class RawInputs:
    """Paths of the downloaded archives and of the files extracted from them."""

    pysal_sdist: Path
    vega_tarball: Path
    rgooglemaps_deb: Path
    nat_shp: Path
    nat_gal: Path
    nat_gal_by_row: Path
    population_json: Path
    pennlc_rda: Path

    def archives(self) -> dict[str, Path]:
        return {
            f"PyPI pysal=={PYSAL_VERSION} (sdist)": self.pysal_sdist,
            f"npm vega-datasets@{VEGA_VERSION}": self.vega_tarball,
            f"Debian r-cran-rgooglemaps {RGOOGLEMAPS_VERSION}": self.rgooglemaps_deb,
        }


def run(cmd: list[str], cwd: Path) -> None:
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, cwd=cwd, check=True)


def fetch_pysal(raw: Path) -> Path:
    raw = Path(raw).resolve()  # pip runs in raw: a relative -d would land in raw/raw
    sdist = raw / f"PySAL-{PYSAL_VERSION}.tar.gz"
    if not sdist.exists():
        run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"pysal=={PYSAL_VERSION}", "-d", str(raw)],
            cwd=raw,
        )  # fmt: skip
    target = raw / NAT_DIR
    if not all((target / m).exists() for m in NAT_MEMBERS):
        with tarfile.open(sdist) as tar:
            members = [tar.getmember(f"{NAT_DIR}/{m}") for m in NAT_MEMBERS]
            tar.extractall(raw, members=members, filter="data")
    return sdist


def fetch_vega(raw: Path) -> Path:
    tarball = raw / f"vega-datasets-{VEGA_VERSION}.tgz"
    if not tarball.exists():
        run(["npm", "pack", f"vega-datasets@{VEGA_VERSION}"], cwd=raw)
    if not (raw / "package/data/population.json").exists():
        with tarfile.open(tarball) as tar:
            members = [tar.getmember(m) for m in ("package/data/population.json",
                                                  "package/package.json")]  # fmt: skip
            tar.extractall(raw, members=members, filter="data")
    return tarball


def fetch_rgooglemaps(raw: Path) -> Path:
    deb = raw / f"r-cran-rgooglemaps_{RGOOGLEMAPS_VERSION}_all.deb"
    if not deb.exists():
        # Debian's archive keeps one version per suite; fall back to the current one
        # (and a changed checksum in data/README.md will show it) if the pin is gone.
        try:
            run(["apt-get", "download", f"r-cran-rgooglemaps={RGOOGLEMAPS_VERSION}"], cwd=raw)
        except subprocess.CalledProcessError:
            run(["apt-get", "download", "r-cran-rgooglemaps"], cwd=raw)
            deb = next(raw.glob("r-cran-rgooglemaps_*_all.deb"))
    if not (raw / "rgm" / PENNLC_PATH).exists():
        run(["dpkg-deb", "-x", str(deb), str(raw / "rgm")], cwd=raw)
    return deb


def fetch_all(raw: Path) -> RawInputs:
    """Download what is missing from ``raw`` and return the paths of every input."""
    raw = Path(raw).resolve()
    raw.mkdir(parents=True, exist_ok=True)
    pysal_sdist = fetch_pysal(raw)
    vega_tarball = fetch_vega(raw)
    deb = fetch_rgooglemaps(raw)
    return RawInputs(
        pysal_sdist=pysal_sdist,
        vega_tarball=vega_tarball,
        rgooglemaps_deb=deb,
        nat_shp=raw / NAT_DIR / "NAT.shp",
        nat_gal=raw / NAT_DIR / "nat_queen.gal",
        nat_gal_by_row=raw / NAT_DIR / "nat_queen_old.gal",
        population_json=raw / "package/data/population.json",
        pennlc_rda=raw / "rgm" / PENNLC_PATH,
    )
