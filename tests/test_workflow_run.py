"""Real Snakemake runs of the tiny config: dry run, lint, determinism, kill and resume."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from chromium import Chromium, find_chromium
from matplotlib import image as mpimg
from workflow_helpers import (
    BIN,
    REPO,
    SNAKEMAKE,
    TEST_CONFIG,
    copy_project,
    generated_files,
    snakemake,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """The tiny config run once from raw data, on 2 cores."""
    work = copy_project(tmp_path_factory.mktemp("clean"))
    result = snakemake(work, "--cores", "2", "--configfile", TEST_CONFIG)
    assert result.returncode == 0, result.stderr[-4000:]
    return work


def make_project(work):
    """A copy of the project that `make` can run: the Makefile, and the shared virtualenv
    as .venv (each make call passes -o .venv/.installed: never reinstall it from here)."""
    (work / ".venv").symlink_to(BIN.parent)
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        (work / name).write_bytes((REPO / name).read_bytes())
    return work


def run_make(work, target, env):
    return subprocess.run(
        ["make", target, "-o", ".venv/.installed", f"SNAKEMAKE_ARGS=--configfile {TEST_CONFIG}"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.fixture(scope="module")
def make_run(tmp_path_factory):
    """`make` (every figure, then the report) on the tiny config, as a user runs it."""
    work = make_project(copy_project(tmp_path_factory.mktemp("make")))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    result = run_make(work, "all", env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return work, result


def test_make_prints_one_line_per_job(make_run):
    """`make`'s stderr: one line per finished job (the laptop profile's logger,
    src/snakemake_logger_plugin_dpcounts), no job blocks, and a closing line with the report
    and figures; every job's block is in the full log under logs/snakemake/."""
    work, result = make_run
    lines = result.stderr.splitlines()
    progress = [line for line in lines if re.match(r"\[ *\d+/\d+\] \w", line)]
    total = int(progress[-1].split("/")[1].split("]")[0])
    assert len(progress) == total, progress
    assert len(lines) < 300, f"{len(lines)} lines on stderr:\n" + result.stderr[-3000:]
    assert len(lines) <= total + 5, "\n".join(line for line in lines if line not in progress)
    assert not any("Shell command" in line or line.startswith("    input:") for line in lines)
    assert lines[-1] == f"dpcounts: report {work}/report.html, figures {work}/figures/"
    assert (work / "report.html").is_file() and (work / "figures").is_dir()
    closing = [line for line in lines if line.startswith("snakemake: ")]
    assert closing and closing[0].startswith(f"snakemake: {total} jobs finished; full log: ")
    full_log = work / closing[0].split("full log: ")[1]
    text = full_log.read_text()
    assert full_log.parent == work / "logs" / "snakemake"
    assert text.count("    input:") >= total - 10 and "study_summary" in text


def test_default_dag_dry_run(tmp_path):
    work = copy_project(tmp_path / "proj")
    result = snakemake(work, "-n", "--cores", "2")
    assert result.returncode == 0, result.stderr[-4000:]


def test_lint_is_clean():
    result = subprocess.run(
        [SNAKEMAKE, "--lint", "--cores", "1"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_style_is_clean():
    paths = ["src", "workflow", "tests", "benchmarks", "data", "tools"]
    paths = [p for p in paths if (REPO / p).exists()]
    for args in (["check", *paths], ["format", "--check", *paths]):
        result = subprocess.run(
            [str(BIN / "ruff"), *args], cwd=REPO, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_snakefmt_is_clean():
    result = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_tiny_run_makes_figures(clean_run):
    files = generated_files(clean_run)
    figures = [name for name in files if name.startswith("figures/") and name.endswith(".png")]
    assert figures, f"no figure made; files: {sorted(files)}"
    for name in figures:
        assert mpimg.imread(io.BytesIO(files[name])).size > 0


def test_study1_summaries_and_appendix_c_labels(clean_run):
    """The main summary keeps the issue's columns; Appendix C's adds age_group, labelled as
    configured (age groups, scenarios, the seven arms and the truth rows)."""
    import json

    import yaml

    from dpcounts.studies.study1 import ARM_NAMES, METRICS

    tiny = yaml.safe_load((REPO / TEST_CONFIG).read_text())["study1"]
    main = pd.read_parquet(clean_run / "results/study1/summary.parquet")
    columns = ["scenario", "arm", "epsilon", "metric", "median", "lower", "upper"]
    assert list(main.columns) == columns
    appendix = pd.read_parquet(clean_run / "results/study1/appendix_c/summary.parquet")
    assert list(appendix.columns) == ["age_group", *columns]
    groups = tiny["appendix_c"]["age_groups"]
    assert list(dict.fromkeys(appendix["age_group"])) == groups
    for group in groups:
        rows = appendix[appendix["age_group"] == group]
        assert set(rows["scenario"]) == set(tiny["appendix_c"]["scenarios"]) <= {1, 2, 3, 4}
        assert set(rows["arm"]) == {*ARM_NAMES, "truth"}
        truth = rows[rows["arm"] == "truth"]
        assert len(truth) == len(tiny["appendix_c"]["scenarios"]) * len(METRICS)
        assert truth["epsilon"].isna().all()
        # the older group's totals are modelled from its national rate, not 35-44's
        slug = group.replace("-", "_").replace("+", "plus")
        facts = json.loads((clean_run / f"results/data/truth_{slug}_summary.json").read_text())
        assert facts["age_group"] == group
        assert facts["expected_deaths"] == pytest.approx(facts["modelled_total_deaths"])
        assert facts["modelled_total_deaths"] > 11364
        first = tiny["appendix_c"]["scenarios"][0]
        run = clean_run / f"results/study1/appendix_c/{slug}"
        scenario = pd.read_parquet(run / f"scenario_{first}.parquet")
        assert scenario["total"].iloc[0] == facts["modelled_total_deaths"]
        assert (run / "checks.json").exists()
    for stem in ("appendix_c_rmse", "appendix_c_disparities"):
        assert (clean_run / f"figures/study1/{stem}.png").exists()


def test_same_bytes_on_one_core_in_bundled_jobs(clean_run, tmp_path):
    """Same config, same seed: identical artifacts whatever the core count and the job
    structure. clean_run has one job per unit (job_structure: split, the schema's
    default); this run goes through the laptop profile, whose bundled jobs do a whole
    Study-1 run (an age group's scenarios and summary) or study each."""
    work = copy_project(tmp_path / "one_core")
    profile = ["--profile", "workflow/profiles/default"]
    result = snakemake(work, *profile, "--cores", "1", "--configfile", TEST_CONFIG)
    assert result.returncode == 0, result.stderr[-4000:]
    ran = {p.name.split("_bundle")[0] for p in (work / "logs/benchmarks").rglob("*_bundle*")}
    assert ran == {"study1", "study"}, ran
    assert not list((work / "logs/benchmarks/study1").glob("score_*.tsv"))
    assert generated_files(work) == generated_files(clean_run)


def _check_readable(work):
    for name, data in generated_files(work).items():
        if name.endswith(".parquet"):
            pd.read_parquet(io.BytesIO(data))
        elif name.endswith(".png"):
            mpimg.imread(io.BytesIO(data))


def test_killed_run_resumes_to_the_same_artifacts(clean_run, tmp_path):
    """SIGKILL the whole run mid-way: nothing corrupt is left, and `make` finishes it."""
    work = copy_project(tmp_path / "killed")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", TEST_CONFIG],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    incomplete = work / ".snakemake" / "incomplete"
    deadline = time.monotonic() + 120
    # Kill while a job is running (Snakemake marks running jobs' outputs as incomplete).
    while time.monotonic() < deadline and proc.poll() is None:
        if incomplete.exists() and any(incomplete.iterdir()):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert generated_files(work) != generated_files(clean_run)
    _check_readable(work)

    # Resume the way a user would: the Makefile's snakemake invocation.
    make_project(work)
    # A hard kill leaves Snakemake's lock behind: `make unlock` (documented) clears it.
    for target in ("unlock", "all"):
        result = run_make(work, target, env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert generated_files(work) == generated_files(clean_run)
    assert (work / "report.html").exists()


def test_library_never_imports_snakemake():
    code = "import sys, dpcounts, pkgutil, importlib\n"
    code += "for m in pkgutil.walk_packages(dpcounts.__path__, 'dpcounts.'):\n"
    code += "    if not m.name.endswith('__main__'):\n"
    code += "        importlib.import_module(m.name)\n"
    code += "assert 'snakemake' not in sys.modules, 'dpcounts imported snakemake'\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


#: (dataset, kind, words of its source) of every dataset of the tiny config's run; the
#: stand-in (not run by default) must not appear.
RUN_DATASETS = [
    ("study homicide_1980", "real", "NCOVR county homicides (rows decade = 1980)"),
    ("study pennlc", "real", "pennLC"),
    ("pennLC", "real", "lung-cancer cases"),
    ("1980 county populations by age group", "modelled", "NCOVR NAT"),
    ("Study 1's true rates (35-44)", "modelled", "11,364 deaths"),
    ("Appendix C's true rates (85+)", "modelled", "heart-disease rates"),
    ("Study 1's datasets", "simulated", "L = 4 tables"),
    ("pseudo-posterior data set poisson", "simulated", "200 records"),
    ("pseudo-posterior data set negbin_mixture", "simulated", "200 records"),
    ("the toy example", "illustrative", "Quick (2022)"),
]


def test_report_reads_in_a_real_browser(make_run, tmp_path):
    """`make`'s report.html is one self-contained page. Opened in headless Chromium at a
    laptop's window size: the introduction (with its real-modelled-simulated paragraph) is
    on screen without scrolling and lists every dataset of the run with its kind and
    source, its study links open their categories, every figure has its own caption, which
    ends with its datasets, and shows it beside the figure in dark text on white, and the
    configuration is a file, not a dump on the page."""
    work, _ = make_run
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    from dpcounts import provenance

    with Chromium(executable, tmp_path / "profile", width=1280, height=800) as browser:
        browser.open((work / "report.html").as_uri())
        landing = browser.evaluate(LANDING_LIST)
        for dataset, kind, source in RUN_DATASETS:
            found = [item for item in landing if item.startswith(f"{dataset}: {kind}, ")]
            assert found, f"{dataset} ({kind}) not in the landing page's datasets: {landing}"
            assert source in found[0], (source, found)
        assert not any("stand-in" in item for item in landing), landing
        assert len(landing) == len(RUN_DATASETS), landing
        assert all(item.split(": ")[1].split(",")[0] in provenance.KINDS for item in landing)

        intro = browser.evaluate(INTRO_GEOMETRY)
        assert intro is not None, "the landing page shows no introduction"
        top, bottom, height = intro
        assert 0 <= top and bottom <= height, f"introduction at {top}..{bottom} px of {height}"

        figures = browser.evaluate(FIGURE_CAPTIONS)
        expected = {p for p in generated_files(work) if p.startswith("figures/")}
        assert set(figures) == {p for p in expected if p.endswith(".png")}
        texts = list(figures.values())
        assert all(len(text) > 80 for text in texts), "a figure without a real caption"
        assert len(set(texts)) == len(texts), "two figures share one caption"
        assert not any("seed 00" in text for text in texts), "a caption cites a seed file"

        for path, text in figures.items():  # each caption is what the reader sees
            shown = browser.evaluate(SHOW_RESULT % json.dumps(path))
            assert " ".join(text.split())[:120] in " ".join(shown.split()), path
            assert "Data. " in text and any(f": {k}, " in text for k in provenance.KINDS), path
            # its job's parameters in words: no config entry dumped, no markup shown raw
            params = shown.split("Job parameters", 1)[-1] if "Job parameters" in shown else ""
            assert "{'" not in params and "``" not in params and "**" not in params, params

        # A figure's caption is visible with the figure: on screen, the figure embedded
        # above it at a readable size, dark text on a light background.
        seen = browser.evaluate(CAPTION_SEEN % json.dumps("figures/study1/figure1_rmse.png"))
        assert seen["text"].startswith("Study 1, Figure 1"), seen
        assert 0 <= seen["top"] < seen["height"] and seen["bottom"] > seen["top"], seen
        assert seen["image"] >= 300 and seen["loaded"], seen
        assert seen["contrast"] >= 7, seen

        # the report sent alone (no figures/ beside it): the caption shows its embedded copy
        moved = tmp_path / "moved" / "report.html"
        moved.parent.mkdir()
        shutil.copy(work / "report.html", moved)
        browser.open(moved.as_uri())
        alone = browser.evaluate(CAPTION_IMAGE % json.dumps("figures/study1/figure1_rmse.png"))
        assert alone["loaded"] and alone["source"].startswith("data:image/png"), alone
        browser.open((work / "report.html").as_uri())

        config = browser.evaluate("results['results/run_config.yaml'].data_uri")
        assert config.startswith("data:text/plain") and "urban_threshold" not in (
            browser.evaluate("document.body.innerText")
        )
        browser.open((work / "report.html").as_uri())
        opened = browser.evaluate(STUDY_LINK_OPENS)
        assert opened == {"link": "Study 1", "category": "Study 1"}, opened


#: [top, bottom, viewport height] of the introduction's warning paragraph, or null.
INTRO_GEOMETRY = """
new Promise(resolve => setTimeout(() => {
  const p = Array.from(document.querySelectorAll(".prose p"))
    .find(p => p.innerText.includes("modelled"));
  if (!p) return resolve(null);
  const intro = p.closest(".prose").getBoundingClientRect(), r = p.getBoundingClientRect();
  resolve([Math.min(intro.top, r.top), r.bottom, window.innerHeight]);
}, 500))
"""

#: The landing page's list of datasets, one text per item.
LANDING_LIST = """
new Promise(resolve => setTimeout(() => {
  const p = Array.from(document.querySelectorAll(".prose p"))
    .find(p => p.innerText.startsWith("Real, modelled or simulated"));
  const list = p && p.nextElementSibling;
  resolve(list ? Array.from(list.querySelectorAll("li")).map(li => li.innerText) : []);
}, 500))
"""

#: Open one result's information (%s: its path as JSON); where its caption is, the width
#: of the figure embedded in it, and the contrast of its text against its background.
CAPTION_SEEN = """
app.showResultInfo(%s);
new Promise(resolve => setTimeout(() => {
  const li = Array.from(document.querySelectorAll("nav li.prose"))[0];
  const img = li.querySelector("img"), r = li.getBoundingClientRect();
  const rgb = s => s.match(/[0-9.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [R, G, B] = c.map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * R + 0.7152 * G + 0.0722 * B; };
  const p = Array.from(li.querySelectorAll("p")).find(p => p.innerText.length > 80);
  const fg = lum(rgb(getComputedStyle(p).color));
  const bg = lum(rgb(getComputedStyle(li).backgroundColor));
  resolve({text: p.innerText, top: r.top, bottom: r.bottom, height: window.innerHeight,
    image: img ? img.getBoundingClientRect().width : 0,
    loaded: img ? img.complete && img.naturalWidth > 0 : false,
    contrast: (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05)});
}, 300))
"""

#: Open one result's information (%s: its path as JSON); once its caption's image has
#: loaded or failed for good (polled, no fixed wait), whether it shows and from where.
CAPTION_IMAGE = """
app.showResultInfo(%s);
new Promise(resolve => {
  const look = () => {
    const img = document.querySelector("nav li.prose img");
    const done = img && img.complete && (img.naturalWidth > 0 || img.onerror === null);
    if (!done) return setTimeout(look, 50);
    resolve({loaded: img.naturalWidth > 0, source: img.currentSrc.slice(0, 40)});
  };
  look();
})
"""

#: {figure path: its caption as text} for every image result of the report.
FIGURE_CAPTIONS = """
Object.fromEntries(Object.entries(results)
  .filter(([path, r]) => path.endsWith(".png"))
  .map(([path, r]) => [path, new DOMParser()
    .parseFromString(r.caption || "", "text/html").body.innerText]))
"""

#: Open one result's information (%s: its path as JSON); the page's text afterwards.
SHOW_RESULT = """
app.showResultInfo(%s);
new Promise(resolve => setTimeout(() => resolve(document.body.innerText), 50))
"""

#: Click the landing page's Study 1 link; the category the app then shows.
STUDY_LINK_OPENS = """
new Promise(resolve => setTimeout(() => {
  const link = Array.from(document.querySelectorAll(".prose a"))
    .find(a => a.innerText === "Study 1");
  link.click();
  setTimeout(() => resolve({link: link.innerText, category: app.state.category}), 200);
}, 500))
"""
