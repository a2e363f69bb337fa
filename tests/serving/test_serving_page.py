"""The forecast page in headless Chromium (Debian's ``chromium`` + ``chromium-driver``; no browser download):
upload a CSV, forecast, see the plot, get the CSV; a bad CSV shows the service's 422 message; /docs renders offline.

Skipped, with the reason, where /usr/bin/chromium or /usr/bin/chromedriver is missing
(``apt-get install -y chromium chromium-driver``; CI installs them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("TSFM_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("TSFM_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))
WAIT_S = 30

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason=f"headless browser test needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)",
)


@pytest.fixture
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs the selenium package")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def hourly_csv(path: Path) -> Path:
    lines = ["item_id,timestamp,target"]
    for item, level in (("north", 20.0), ("south", 35.0)):
        for t in range(24 * 7):
            stamp = f"2024-01-{1 + t // 24:02d} {t % 24:02d}:00:00"
            lines.append(f"{item},{stamp},{level + 5 * math.sin(2 * math.pi * t / 24):.3f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_upload_forecast_plot_and_download(
    browser: Any, live_server: Callable[..., str], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server()
    browser.get(base + "/")
    browser.find_element(By.ID, "csv-file").send_keys(str(hourly_csv(tmp_path / "hourly.csv")))
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "csv-text").get_attribute("value"))
    horizon = browser.find_element(By.ID, "horizon")
    horizon.clear()
    horizon.send_keys("12")
    browser.find_element(By.ID, "submit").click()

    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "svg#plot path.median"))
    status = browser.find_element(By.ID, "status").text
    assert status.startswith("Done: 2 series × 12 steps"), status
    plot = browser.find_element(By.CSS_SELECTOR, "svg#plot")
    for part in ("path.band-outer", "path.band-inner", "path.history"):
        assert plot.find_elements(By.CSS_SELECTOR, part), part
    median = plot.find_element(By.CSS_SELECTOR, "path.median").get_attribute("d")
    assert median.count("L") == 11  # twelve forecast points
    options = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#series-select option")]
    assert options == ["north", "south"]
    browser.save_screenshot(str(tmp_path / "page.png"))

    link = browser.find_element(By.ID, "download")
    assert link.get_attribute("href").startswith("blob:")
    csv_text = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.getElementById('download').href).then(r => r.text()).then(done);"
    )
    rows = csv_text.strip().split("\n")
    assert rows[0] == "item_id,timestamp,median,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"
    assert len(rows) == 1 + 2 * 12
    assert rows[1].startswith("north,2024-01-08 00:00:00,") and rows[13].startswith("south,2024-01-08 00:00:00,")

    # the second series draws on request
    browser.find_element(By.CSS_SELECTOR, "#series-select option[value='1']").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: "south" in d.find_element(By.CSS_SELECTOR, "svg#plot").get_attribute("aria-label")
    )


def test_service_errors_are_shown(browser: Any, live_server: Callable[..., str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server()
    browser.get(base + "/")
    csv_text = "item_id,timestamp,target\\na,2024-01-01,1.0\\na,2024-01-02,2.0\\nb,2024-01-01,\\nb,2024-01-02,\\n"
    browser.execute_script(f"document.getElementById('csv-text').value = '{csv_text}';")
    browser.find_element(By.ID, "submit").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "no observed values" in d.find_element(By.ID, "status").text)
    status = browser.find_element(By.ID, "status")
    assert 'series "b", target' in status.text and "error" in status.get_attribute("class")
    assert not browser.find_elements(By.CSS_SELECTOR, "svg#plot")


def test_pasted_nixtla_dialect_with_daily_dates(browser: Any, live_server: Callable[..., str]) -> None:
    """``unique_id, ds, y`` pasted (not uploaded), dates without times: the page infers a daily frequency."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server()
    browser.get(base + "/")
    rows = ["unique_id,ds,y"] + [f"shop,2024-02-{d:02d},{100 + 7 * math.sin(d):.2f}" for d in range(1, 29)]
    browser.execute_script("document.getElementById('csv-text').value = arguments[0];", "\n".join(rows))
    browser.find_element(By.ID, "horizon").clear()
    browser.find_element(By.ID, "horizon").send_keys("5")
    browser.find_element(By.ID, "submit").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "svg#plot path.median"))
    csv_text = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.getElementById('download').href).then(r => r.text()).then(done);"
    )
    stamps = [line.split(",")[1] for line in csv_text.strip().split("\n")[1:]]
    assert stamps == ["2024-02-29 00:00:00"] + [f"2024-03-0{d} 00:00:00" for d in range(1, 5)]  # a leap year


def test_swagger_ui_renders_the_api_without_network(browser: Any, live_server: Callable[..., str]) -> None:
    """``/docs`` draws every operation from local assets: this machine has no route to a CDN, so a page that
    fetched Swagger UI from one would stay blank."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server()
    browser.get(base + "/docs")
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
    paths = {e.get_attribute("data-path") for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/v1/forecast", "/v1/models", "/health", "/ready", "/metrics"} <= paths
    assert not browser.find_elements(By.CSS_SELECTOR, ".errors-wrapper"), "Swagger UI reported schema errors"


def test_allow_negative_box_asks_the_service_to_keep_negative_forecasts(browser: Any,
                                                                         live_server: Callable[..., str]) -> None:
    """Unticked, the request leaves ``infer_nonnegative`` to the model; ticked, it sends ``false``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = live_server()
    browser.get(base + "/")
    browser.execute_script(  # record every request body the page sends
        "window.sent = []; const original = window.fetch;"
        "window.fetch = (url, init) => { if (init && init.body) window.sent.push(JSON.parse(init.body));"
        " return original(url, init); };")
    rows = ["item_id,timestamp,target"] + [f"a,2024-01-{d:02d},{abs(math.sin(d)):.3f}" for d in range(1, 29)]
    browser.execute_script("document.getElementById('csv-text').value = arguments[0];", "\n".join(rows))
    for count, tick in enumerate((False, True), start=1):
        if tick:
            browser.find_element(By.ID, "allow-negative").click()
        browser.find_element(By.ID, "submit").click()

        def answered(driver: Any, count: int = count) -> bool:
            return driver.execute_script("return window.sent.length") >= count and \
                driver.find_element(By.ID, "status").text.startswith("Done")

        WebDriverWait(browser, WAIT_S).until(answered)
    sent = browser.execute_script("return window.sent")
    assert "infer_nonnegative" not in sent[0]["parameters"]
    assert sent[1]["parameters"]["infer_nonnegative"] is False
