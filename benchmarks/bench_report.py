"""The report's scale (issue 36): a 64-layer x 64-head synthetic model (4,096 heads, ap_synth with
few tokens, analyzed by ap_analyze), its ap.report file's size (bound: 25 MB) and the time until
it is interactive in headless chromium (bound: 3 s): from the navigation's start to the page's
`data-ready` (the data decoded, the map, the table and the controls drawn), and a head's click
to its drawn profile. Also the demo-sized model's file (4 layers x 8 heads; bound: 2 MB).

usage: .venv/bin/python benchmarks/bench_report.py --build build --work build/report_bench [--rounds 5]

Needs chromium and chromium-driver (scripts/install_deps.sh --tests) and selenium
(requirements.txt). Not a timed unit test: numbers in benchmarks/README.md, section 9.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def run(*command):
    subprocess.run([str(c) for c in command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def analyzed(build, work, name, synth_args):
    folder = os.path.join(work, name)
    if not os.path.isfile(os.path.join(folder, "head_metrics.csv")):
        data = os.path.join(work, name + "_data")
        run(os.path.join(build, "examples", "ap_synth"), "--out", data, *synth_args)
        run(os.path.join(build, "examples", "ap_analyze"), "--data-root", data, "--output-dir", folder,
            "--sampling-unit", "token", "--threads", "2")
        shutil.rmtree(data)
    return folder


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import attention_plasticity as ap

    t = time.monotonic()
    big = analyzed(args.build, args.work, "big", ["--num-layers", "64", "--num-q-heads", "64", "--num-k-heads", "16",
                                                  "--dim", "16", "--tokens", "512", "--examples", "16", "--threads", "2"])
    print(f"64 x 64 synthetic set (ap_synth + ap_analyze): {time.monotonic() - t:.1f} s")
    demo = analyzed(args.build, args.work, "demo", ["--sliding-window-layers", "3", "--threads", "2"])
    t = time.monotonic()
    page = ap.report(big, os.path.join(args.work, "big.html"))
    print(f"ap.report of 4,096 heads: {time.monotonic() - t:.2f} s, {os.path.getsize(page) / 1e6:.1f} MB (bound 25 MB)")
    small = ap.report(demo, os.path.join(args.work, "demo.html"))
    print(f"ap.report of the demo (4 x 8 heads): {os.path.getsize(small) / 1e6:.3f} MB (bound 2 MB)")
    driver = browser()
    try:
        ready, walls, clicks = [], [], []
        for _ in range(args.rounds):
            driver.get("about:blank")
            wall = time.monotonic()
            driver.get("file://" + os.path.abspath(page))
            while not driver.execute_script("return document.body.dataset.ready || document.body.dataset.error"):
                time.sleep(0.01)
            walls.append(time.monotonic() - wall)
            # from the navigation's start (performance.now()'s origin) to data-ready
            ready.append(float(driver.execute_script("return document.body.dataset.readyAt")) / 1000.0)
            t = time.monotonic()
            driver.find_element("css selector", "#map rect.cell[data-layer='40'][data-head='30']").click()
            driver.find_element("id", "profile-chart")
            clicks.append(time.monotonic() - t)
        print(f"interactive (navigation start to data-ready), {args.rounds} rounds: median "
              f"{statistics.median(ready):.2f} s, max {max(ready):.2f} s (bound 3 s); as WebDriver sees it "
              f"(driver.get until data-ready is read, an upper bound): median {statistics.median(walls):.2f} s, "
              f"max {max(walls):.2f} s")
        print(f"a head's click to its profile: median {statistics.median(clicks):.2f} s")
    finally:
        driver.quit()
    return 0 if max(walls) <= 3.0 and os.path.getsize(page) <= 25e6 and os.path.getsize(small) < 2e6 else 1


if __name__ == "__main__":
    sys.exit(main())
