"""The report as a reader sees it: index.html loaded in a real headless browser (Debian's
chromium, driven by selenium through the system chromedriver)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.analysis.report import plot_all
from harness.results.runset import read_runs

from .compare_synthetic import Effect, make_run
from .conftest import run_command
from .synthetic import make_points, write_run

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "report-screenshot.png"
GRID = {"dispatch": ["select", "epoll"], "cold_conns": [0, 1000, 2000]}
BROKEN_IMAGES = ("return Array.from(document.images)"
                 ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)")


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium and chromedriver are not installed (make test installs them: "
                    "scripts/setup-system.sh test)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                "--allow-file-access-from-files"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
    yield session
    session.quit()


def _report(tmp_path: Path, points) -> Path:
    runs = read_runs([write_run(tmp_path / "results", points)])
    plot_all(runs, tmp_path / "report")
    return tmp_path / "report" / "index.html"


def test_the_report_loads_without_errors_and_every_image_resolves(browser, tmp_path: Path):
    page = _report(tmp_path, make_points("my-sweep", GRID, repetitions=2))
    browser.get(page.as_uri())
    assert browser.title == "wanbench report"
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    images = browser.execute_script("return document.images.length")
    assert images == len(list((page.parent / "figures").glob("*.png"))) >= 3
    assert browser.execute_script(BROKEN_IMAGES) == []
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    assert SCREENSHOT.is_file(), f"the reference screenshot {SCREENSHOT} is committed"


def test_a_missing_figure_is_seen_as_broken(browser, tmp_path: Path):
    """The other direction: the check above can fail."""
    page = _report(tmp_path, make_points("my-sweep", GRID, repetitions=2))
    missing = next((page.parent / "figures").glob("*.png"))
    missing.unlink()
    browser.get(page.as_uri())
    assert len(browser.execute_script(BROKEN_IMAGES)) == 1
    # and the console says so (reading the log also empties it for the next test)
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert len(severe) == 1 and missing.name in severe[0]


def test_the_comparison_page_loads_with_every_figure(browser, tmp_path: Path):
    base = make_run(seed=1, repetitions=3).write(tmp_path)
    cand = make_run(seed=2, kernel="6.19.0-cand", repetitions=3).write(tmp_path)
    page = tmp_path / "compare" / "index.html"
    page.parent.mkdir()
    run_command("harness.commands.compare",
                ["compare", str(base), str(cand), "--format", "html", "--out", str(page)])
    browser.get(page.as_uri())
    assert browser.title == "wanbench compare"
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert browser.execute_script("return document.images.length") >= 3
    assert browser.execute_script(BROKEN_IMAGES) == []


# a computed colour whose red stands out from its green and blue: the regression colours
# (banner and rows) are; amber (inconclusive), green and grey are not
REDDISH = """return Array.from(document.querySelectorAll('*')).filter(e => {
  const c = getComputedStyle(e).backgroundColor.match(/\\d+/g);
  return c && (c.length < 4 || +c[3] > 0) && c[0] - Math.max(c[1], c[2]) >= 30;
}).map(e => e.tagName + '.' + e.className)"""
COMPARE_SCREENSHOT = REPO / "docs" / "compare-screenshot.png"


def _compare_page(tmp_path: Path, effect: Effect | None) -> Path:
    """Three runs per side, the candidate's changed by `effect` (None: an A/A pair)."""
    base = [str(make_run(seed=s).write(tmp_path / "base")) for s in range(1, 4)]
    kernel = "6.19.0-cand" if effect else "6.18.0-base"
    cand = [str(make_run(seed=s, kernel=kernel, effect=effect).write(tmp_path / "cand"))
            for s in range(4, 7)]
    page = tmp_path / "compare" / "index.html"
    page.parent.mkdir()
    run_command("harness.commands.compare", ["compare", *base, "--", *cand, "--format", "html",
                                             "--out", str(page), "--metric", "reply_rate_rps"])
    return page


def test_a_regression_shows_red_verdict_first(browser, tmp_path: Path):
    browser.get(_compare_page(tmp_path, Effect(throughput=0.8)).as_uri())
    first = browser.execute_script("return document.querySelector('h1').nextElementSibling")
    assert first.get_attribute("id") == "verdict" and first.text.startswith("regression (exit 1)")
    red = browser.execute_script(REDDISH)
    assert "DIV.verdict regression" in red and red.count("TR.regression") == 12
    assert COMPARE_SCREENSHOT.is_file(), f"the screenshot {COMPARE_SCREENSHOT} is committed"


def test_an_aa_pair_shows_no_red(browser, tmp_path: Path):
    browser.get(_compare_page(tmp_path, None).as_uri())
    first = browser.execute_script("return document.querySelector('h1').nextElementSibling")
    assert first.get_attribute("id") == "verdict" and "regression (exit 1)" not in first.text
    assert browser.execute_script(REDDISH) == []


# every table cell's text, and the colour of each validity cell that is not all valid
TABLE_TEXT = "return Array.from(document.querySelectorAll('th, td')).map(c => c.textContent)"
PAGE_WIDTH = "return document.documentElement.scrollWidth"
VALIDITY_COLORS = """return Array.from(document.querySelectorAll('td.bad, td.partly, td.good'))
  .map(c => [c.className.split(' ').pop(), getComputedStyle(c).color])"""


def _with_invalid(points):
    """Two repetitions of one point invalid, one of another: 1/2 and 0/2 in the table."""
    invalid = points.index[:3]
    return points.assign(valid=~points.index.isin(invalid))


def test_the_reports_tables_fit_the_window_and_read_as_people_write(browser, tmp_path: Path):
    page = _report(tmp_path, _with_invalid(make_points("my-sweep", GRID, repetitions=2)))
    browser.get(page.as_uri())
    assert browser.execute_script(PAGE_WIDTH) <= 1400
    cells = browser.execute_script(TABLE_TEXT)
    text = " ".join(cells)
    assert "e+0" not in text and "e-0" not in text
    assert "True" not in cells and "False" not in cells
    assert "reply_rate_rps" not in cells and "reply rate [replies/s]" in cells
    colors = dict(browser.execute_script(VALIDITY_COLORS))
    assert {"good", "bad"} <= set(colors) or {"good", "partly"} <= set(colors)
    assert len(set(colors.values())) == len(colors)  # each kind its own colour


def test_a_table_too_wide_for_the_window_scrolls_inside_itself(browser, tmp_path: Path):
    """The other direction: a table that cannot fit widens the page unless its wrapper
    scrolls; the check above would see it."""
    page = _report(tmp_path, make_points("my-sweep", GRID, repetitions=2))
    browser.get(page.as_uri())
    wide = ("const t = document.querySelector('div.table table');"
            "t.querySelector('td').textContent = 'x'.repeat(3000);")
    browser.execute_script(wide)
    assert browser.execute_script(PAGE_WIDTH) <= 1400
    browser.execute_script("document.querySelector('div.table').className = ''")
    assert browser.execute_script(PAGE_WIDTH) > 1400
