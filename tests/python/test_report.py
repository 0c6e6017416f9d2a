"""ap.report (attention_plasticity/report.py) in a real browser: Debian's chromium, headless,
driven by Selenium through the system's chromedriver (nothing downloads a browser or a driver).

Each report (the demo's synthetic model: ap_synth + ap_analyze as examples/run_demo.sh; the
trained decoder's dump tests/data/real_decoder, analyzed; a comparison, ap_compare's folder; a
PlasticityMonitor folder of a tiny model) is opened from disk, and then:
- no console error, and no request but the file itself (Chrome's performance log, every
  Network.requestWillBeSent; the page's resource timing entries);
- the numbers read from the page's DOM (``data-value``: the exact float64 the page holds) equal
  the CSVs' numbers, read here with the csv module;
- a head is clicked (and chosen by keyboard) and its profile shown; the quantity is switched;
- a screenshot is taken and checked not blank (png_check), with the key elements present.

Needs AP_SYNTH, AP_ANALYZE, AP_COMPARE (tests/python/bindings.cmake sets them), chromium and
chromium-driver (scripts/install_deps.sh --tests). AP_REPORT_SCREENSHOT=PATH also writes the
demo report's screenshot there (docs/report_screenshot.png is made so)."""

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest

import attention_plasticity as ap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from png_check import check_png  # noqa: E402

SYNTH = os.environ.get("AP_SYNTH")
ANALYZE = os.environ.get("AP_ANALYZE")
COMPARE = os.environ.get("AP_COMPARE")
FIXTURE = os.path.join(ROOT, "tests", "data", "real_decoder")

pytestmark = pytest.mark.skipif(not (SYNTH and ANALYZE and COMPARE),
                                reason="needs AP_SYNTH, AP_ANALYZE and AP_COMPARE")


# ---------- reading the CSVs independently ----------
def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def number(text):
    return float(text)  # "nan", "inf" included


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---------- the browser ----------
@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        pytest.fail("chromium and chromedriver are not installed (scripts/install_deps.sh --tests)")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-default-apps", "--disable-sync"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def open_report(driver, path):
    """Opens the file, waits for the page to be drawn; checks no console error and that the only
    request is the file itself. Returns the seconds until ready."""
    driver.get_log("browser"), driver.get_log("performance")  # empty the logs
    url = "file://" + os.path.abspath(path)
    start = time.monotonic()
    driver.get(url)
    for _ in range(400):
        state = driver.execute_script("return [document.body.dataset.ready, document.body.dataset.error]")
        if state[0] or state[1]:
            break
        time.sleep(0.025)
    seconds = time.monotonic() - start
    assert state[1] is None, f"{path}: the page failed: {state[1]}"
    assert state[0] == "1", f"{path}: the page did not become ready"
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, f"{path}: console errors {errors}"
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    assert requests and all(r == url for r in requests), f"{path}: requests other than the file: {requests}"
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    return seconds


def map_values(driver):
    """{(layer, head): value} of the map's cells, as the page holds them."""
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#map rect.cell')].map(r => [r.dataset.layer, r.dataset.head, r.dataset.value])")
    return {(int(l), int(h)): number(v) for l, h, v in cells}


def choose_quantity(driver, name):
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "quantity")).select_by_value(name)


def click_head(driver, layer, head):
    driver.find_element("css selector", f"#map rect.cell[data-layer='{layer}'][data-head='{head}']").click()
    assert driver.find_element("id", "head-title").text == f"Head: layer {layer}, query head {head}"


def chart_bands(driver, chart_id, series=None):
    """[(x, value, low, high)] of a chart's points whose series draws a band."""
    points = driver.execute_script(
        "return [...document.querySelectorAll('#' + arguments[0] + ' circle.point[data-lo]')]"
        ".map(c => [c.dataset.series, c.dataset.x, c.dataset.value, c.dataset.lo, c.dataset.hi])", chart_id)
    return [tuple(number(v) for v in p[1:]) for p in points if series is None or p[0] == series]


def chart_points(driver, chart_id, series=None):
    points = driver.execute_script(
        "return [...document.querySelectorAll('#' + arguments[0] + ' circle.point')]"
        ".map(c => [c.dataset.series, c.dataset.x, c.dataset.value])", chart_id)
    return [(number(x), number(v)) for s, x, v in points if series is None or s == series]


def screenshot(driver, path, element_ids):
    for element_id in element_ids:
        assert driver.find_elements("id", element_id), f"{path}: no #{element_id}"
    driver.save_screenshot(str(path))
    check_png(str(path), min_non_white=0.05)


def check_metric_map(driver, folder, quantity):
    rows = read_csv(os.path.join(folder, "head_metrics.csv"))
    got = map_values(driver)
    assert len(got) == len(rows)
    for row in rows:
        assert same(got[(int(row["layer"]), int(row["q_head"]))], number(row[quantity])), (quantity, row["layer"],
                                                                                           row["q_head"])


def check_profile(driver, folder, layer, head):
    rows = [r for r in read_csv(os.path.join(folder, "head_profile.csv"))
            if int(r["layer"]) == layer and int(r["q_head"]) == head]
    points = chart_points(driver, "profile-chart", "AP_j")
    assert points == [(number(r["tau"]), number(r["plasticity"])) for r in rows if not math.isnan(number(r["plasticity"]))]
    assert len(points) >= 2


# ---------- the sets ----------
def run(*command):
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def demo(work):
    """The demo's synthetic model (examples/run_demo.sh), and a second with layer 2 changed."""
    folders = []
    for name, extra in (("demo", []), ("changed", ["--query-seed", "5", "--changed-layers", "2",
                                                   "--change-factor", "3"])):
        run(SYNTH, "--out", work / (name + "_data"), "--sliding-window-layers", "3", "--threads", "2", *extra)
        run(ANALYZE, "--data-root", work / (name + "_data"), "--output-dir", work / name, "--sampling-unit", "token",
            "--threads", "2")
        folders.append(str(work / name))
    return folders


def test_result_set_page(browser, demo, work):
    folder = demo[0]
    page = ap.report(folder, work / "demo.html")
    assert os.path.getsize(page) < 2_000_000  # a 4-layer model's report (issue 36)
    html = open(page, encoding="utf-8").read()
    assert "<script src" not in html and "<link" not in html and "default-src 'none'" in html
    open_report(browser, page)
    check_metric_map(browser, folder, "ap_overall")
    legend = browser.find_element("id", "legend-range").text
    assert legend == "range [0, 1]"
    # the quantity switched
    choose_quantity(browser, "ap_drop")
    check_metric_map(browser, folder, "ap_drop")
    choose_quantity(browser, "q_R2_pos")
    check_metric_map(browser, folder, "q_R2_pos")
    # a head clicked: its profile, bucket heatmap, distance map, weights, metrics
    click_head(browser, 2, 5)
    check_profile(browser, folder, 2, 5)
    weights = [r for r in read_csv(os.path.join(folder, "head_component_weights.csv"))
               if (r["layer"], r["q_head"]) == ("2", "5")]
    bars = browser.execute_script(
        "return [...document.querySelectorAll('#component-weights rect[data-value]')].map(r => r.dataset.value)")
    assert [number(v) for v in bars] == [number(r["weight"]) for r in weights if math.isfinite(number(r["weight"]))]
    cells = browser.execute_script("return document.querySelectorAll('#bucket-heatmap rect[data-value]').length")
    assert cells == sum(1 for r in read_csv(os.path.join(folder, "head_bucket_plasticity.csv"))
                        if (r["layer"], r["q_head"]) == ("2", "5"))
    metric = browser.find_element("css selector", "#head-metrics td[data-col='ap_overall_se']")
    row = [r for r in read_csv(os.path.join(folder, "head_metrics.csv")) if (r["layer"], r["q_head"]) == ("2", "5")][0]
    assert same(number(metric.get_attribute("data-value")), number(row["ap_overall_se"]))
    # by keyboard: the map focused, two steps left and one up from the head clicked, Enter
    from selenium.webdriver.common.keys import Keys

    grid = browser.find_element("id", "map")
    browser.execute_script("arguments[0].focus()", grid)
    grid.send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_UP, Keys.ENTER)
    assert browser.find_element("id", "head-title").text == "Head: layer 1, query head 3"
    # the table: sorted by ap_overall (descending after two clicks), filtered by layer
    browser.find_element("css selector", "#head-table th button[data-col='ap_overall']").click()
    browser.find_element("css selector", "#head-table th button[data-col='ap_overall']").click()
    shown = browser.execute_script("return [...document.querySelectorAll(\"#head-table td[data-col='ap_overall']\")]"
                                   ".map(td => td.dataset.value)")
    expected = sorted((number(r["ap_overall"]) for r in read_csv(os.path.join(folder, "head_metrics.csv"))),
                      key=lambda v: -v)
    assert [number(v) for v in shown] == expected
    browser.find_element("id", "table-filter").send_keys("layer=3")
    layers = browser.execute_script("return [...document.querySelectorAll(\"#head-table td[data-col='layer']\")]"
                                    ".map(td => td.dataset.value)")
    assert layers == ["3"] * 8
    assert "attention_plasticity_version" in browser.find_element("id", "provenance-json").text
    # Without method_url the sections are named, not linked: no link points anywhere.
    assert browser.execute_script("return document.querySelectorAll('a[href]').length") == 0
    assert browser.execute_script("return document.querySelectorAll('span.section').length") > 0
    choose_quantity(browser, "ap_overall")
    click_head(browser, 2, 5)
    shot = work / "demo.png"
    screenshot(browser, shot, ["map-svg", "legend-svg", "profile-chart", "bucket-heatmap", "distance-map",
                               "component-weights", "head-table", "provenance-json", "quantity"])
    if os.environ.get("AP_REPORT_SCREENSHOT"):
        browser.set_window_size(1300, 1000)
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(os.environ["AP_REPORT_SCREENSHOT"])
        browser.set_window_size(1400, 1800)


def test_real_decoder_page(browser, work):
    result = ap.analyze_dump(FIXTURE, num_q_heads=4, num_k_heads=2, threads=2, progress=False, warn=False)
    assert result.write(work / "real")
    page = ap.report(result, work / "real.html")
    open_report(browser, page)
    check_metric_map(browser, work / "real", "ap_overall")
    choose_quantity(browser, "bias_strength")
    check_metric_map(browser, work / "real", "bias_strength")
    click_head(browser, 3, 1)
    check_profile(browser, work / "real", 3, 1)
    screenshot(browser, work / "real.png", ["map-svg", "profile-chart", "head-table"])
    # Two analyses of the real capture (other pair samples): sequence-level errors over its
    # documents, so each bucket's interval is Student's t law with a finite (Welch) df, about 118
    # here (SciPy's quantile: independent of the library's student_t.hpp); the normal law's 1.96
    # is 1% narrower at that df, far beyond the 1e-9 tolerance.
    from scipy import stats

    other = ap.analyze_dump(FIXTURE, num_q_heads=4, num_k_heads=2, threads=2, seed=1, progress=False, warn=False)
    assert other.write(work / "real_seed1")
    out = work / "real_compare"
    run(COMPARE, "--output-dir", out, work / "real", work / "real_seed1")
    open_report(browser, ap.report(str(out), work / "real_compare.html"))
    click_head(browser, 3, 1)
    buckets = [r for r in read_csv(out / "compare_heads.csv")
               if r["quantity"] == "ap_bucket" and (r["layer"], r["q_head"]) == ("3", "1")]
    bands = chart_bands(browser, "difference-chart", "B - A")
    assert len(bands) == len(buckets) > 0
    finite = 0
    for (x, value, low, high), r in zip(bands, buckets):
        df, se = number(r["df"]), number(r["se"])
        assert (x, value) == (number(r["q_bucket"]), number(r["difference"]))
        if math.isfinite(se) and se > 0:
            half = stats.t.ppf(0.975, df) * se
            assert math.isclose(high - value, half, rel_tol=1e-9), (r, high - value, half)
            assert math.isclose(value - low, half, rel_tol=1e-9), (r, value - low, half)
            finite += math.isfinite(df)
    assert finite > 0


def test_comparison_page(browser, demo, work):
    out = work / "compare"
    run(COMPARE, "--output-dir", out, *demo)
    page = ap.report(str(out), work / "compare.html")
    open_report(browser, page)
    heads = read_csv(out / "compare_heads.csv")
    for quantity in ("ap_overall", "ap_last20"):
        choose_quantity(browser, quantity)
        rows = [r for r in heads if r["quantity"] == quantity and r["q_bucket"] == ""]
        got = map_values(browser)
        assert len(got) == len(rows) == 32
        for r in rows:
            assert same(got[(int(r["layer"]), int(r["q_head"]))], number(r["difference"]))
        marked = browser.execute_script(
            "return [...document.querySelectorAll('#map circle.sig')].map(c => c.dataset.layer + ':' + c.dataset.head)")
        assert sorted(marked) == sorted(f"{r['layer']}:{r['q_head']}" for r in rows if r["significant"] == "1")
        assert marked  # layer 2 changed threefold: some heads differ
    assert "unpaired" in browser.find_element("id", "design").text
    summary = read_csv(out / "compare_summary.csv")
    shown = browser.execute_script("return [...document.querySelectorAll(\"#summary-table td[data-col='mean_difference']\")]"
                                   ".map(td => td.dataset.value)")
    assert [number(v) for v in shown] == [number(r["mean_difference"]) for r in summary]
    click_head(browser, 2, 1)
    buckets = [r for r in heads if r["quantity"] == "ap_bucket" and (r["layer"], r["q_head"]) == ("2", "1")]
    assert chart_points(browser, "profile-chart", "A") == [(number(r["q_bucket"]), number(r["value_a"])) for r in buckets]
    assert chart_points(browser, "profile-chart", "B") == [(number(r["q_bucket"]), number(r["value_b"])) for r in buckets]
    # each bucket's difference with its 95% interval of Student's t law with the row's df (SciPy's
    # quantile: an independent implementation of the library's student_t.hpp)
    from scipy import stats

    bands = chart_bands(browser, "difference-chart", "B - A")
    assert len(bands) == len(buckets) > 0
    for (x, value, low, high), r in zip(bands, buckets):
        half = stats.t.ppf(0.975, number(r["df"])) * number(r["se"])
        assert (x, value) == (number(r["q_bucket"]), number(r["difference"]))
        assert math.isclose(high - value, half, rel_tol=1e-9) and math.isclose(value - low, half, rel_tol=1e-9)
    screenshot(browser, work / "compare.png", ["map-svg", "profile-chart", "difference-chart", "summary-table"])
    # several result folders: compared here (compare_runs), each set's own profile and interval
    page = ap.report(demo, work / "compare2.html")
    open_report(browser, page)
    click_head(browser, 2, 1)
    assert chart_points(browser, "profile-chart", "A demo") == [
        (number(r["tau"]), number(r["plasticity"])) for r in read_csv(os.path.join(demo[0], "head_profile.csv"))
        if (r["layer"], r["q_head"]) == ("2", "1")]


def test_monitor_page(browser, work):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import test_monitor as tm

    folder = work / "monitor"
    with tm.monitor(folder, every=10, plot=False) as mon:
        tm.train_loop(steps=20, mon=mon)
    page = ap.report(str(folder), work / "monitor.html")
    open_report(browser, page)
    trajectory = read_csv(folder / "trajectory.csv")
    rows = [r for r in trajectory if r["quantity"] == "ap_overall" and r["layer"] == ""]
    assert chart_points(browser, "trajectory-ap_overall", "all layers") == [
        (number(r["step"]), number(r["mean"])) for r in rows]
    assert browser.find_elements("css selector", "#trajectory-ap_overall polygon.band")
    # the band is the trajectory's own interval (ci_low, ci_high: Student's t law, §8.6)
    assert chart_bands(browser, "trajectory-ap_overall", "all layers") == [
        (number(r["step"]), number(r["mean"]), number(r["ci_low"]), number(r["ci_high"])) for r in rows]
    shown = browser.execute_script("return [...document.querySelectorAll(\"#changes-table td[data-col='heads_changed']\")]"
                                   ".map(td => td.dataset.value)")
    assert [int(float(v)) for v in shown] == [int(r["heads_changed"]) for r in read_csv(folder / "changes.csv")]
    # the slider drives the map: the last step first, then the first step (keyboard: Home)
    check_metric_map(browser, folder / "step_000020", "ap_overall")
    from selenium.webdriver.common.keys import Keys

    browser.find_element("id", "step-slider").send_keys(Keys.HOME)
    assert browser.find_element("id", "step-value").text == "0"
    check_metric_map(browser, folder / "step_000000", "ap_overall")
    click_head(browser, 1, 0)
    check_profile(browser, folder / "step_000000", 1, 0)
    screenshot(browser, work / "monitor.png", ["map-svg", "trajectory-ap_overall", "step-slider", "profile-chart"])


def test_command_line(browser, demo, work):
    out = work / "cli.html"
    done = subprocess.run([sys.executable, "-m", "attention_plasticity", "report", demo[0], "-o", str(out),
                           "--method-url", "../docs/method.md"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.is_file() and "ap-data" in out.read_text(encoding="utf-8")
    # --method-url: every definition links to the reader's copy of the method (never opened by the test)
    open_report(browser, out)
    hrefs = browser.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    assert hrefs and set(hrefs) == {"../docs/method.md"}
    done = subprocess.run([sys.executable, "-m", "attention_plasticity", "report", str(work / "missing"), "-o",
                           str(work / "x.html")], capture_output=True, text=True)
    assert done.returncode == 2 and "missing" in done.stderr and not (work / "x.html").exists()


def test_bad_arguments(demo, work):
    with pytest.raises(ValueError, match="quantity 'nope'"):
        ap.report(demo[0], work / "x.html", quantity="nope")
    with pytest.raises(TypeError, match="obj must be"):
        ap.report(42, work / "x.html")


def test_the_readme_section_runs(browser, demo, work, monkeypatch):
    """README.md's "Explore a result in the browser" example, as written, on two result sets (the
    names the README's earlier sections define: before, after, changes)."""
    import re

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Explore a result in the browser\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    before, after = ap.read_results(demo[0]), ap.read_results(demo[1])
    changes = ap.compare_runs([before, after], names=["before", "after"])
    monkeypatch.chdir(work)
    exec(blocks[0], {"ap": ap, "before": before, "after": after, "changes": changes})
    for name in ("after.html", "changes.html", "compare.html"):
        open_report(browser, work / name)
