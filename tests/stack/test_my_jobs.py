"""On the real stack, in headless Chromium with JavaScript off: alice's home page lists her
jobs and no one else's, with the reports' own figures; staff see /users/bob with the top
waste; the column headers sort the table through links."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from selenium.webdriver.common.by import By

from tests.helpers.browser import ARTIFACTS, login, serve, severe, wait_for_url
from webapp.formatting import format_percent
from webapp.settings import SETTINGS_DOC, Settings


@pytest.fixture(scope="module")
def app_url(stack_env, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("my-jobs")
    # Only this branch's settings; an archive of its own (empty): figures come from sacct.
    base = Settings.from_env({k: v for k, v in stack_env.items() if k in SETTINGS_DOC})
    base = dataclasses.replace(base, staff=frozenset({"staff"}),
                               archive_url=str(tmp / "archive.sqlite"))
    yield from serve(lambda: None, tmp, base=base, users=("alice", "bob", "staff"))


def _owners(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--format=JobID,User", "-j",
                          ",".join(job_ids)], capture_output=True, text=True, check=True).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


class _JobTable(HTMLParser):
    """The rows of ``#jobs`` as {"job": id, <td class>: text}: one read of the page source
    rather than a WebDriver call per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("data-job"):
            self.rows.append({"job": a["data-job"] or ""})
        elif tag == "td" and self.rows and a.get("class"):
            self._cell = (a["class"] or "").split()[-1]
            self.rows[-1][self._cell] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "tr"):
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self.rows[-1][self._cell] += data.strip()


def _rows(driver) -> list[dict[str, str]]:
    parser = _JobTable()
    parser.feed(driver.page_source)
    return parser.rows


def _screenshot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / name
    assert driver.save_screenshot(str(shot))
    with Image.open(shot) as img:
        assert img.format == "PNG" and img.size[0] == 1280 and img.size[1] >= 600
        colours = img.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 20, "a blank page"
    return shot


def test_alice_sees_only_her_jobs(app_url, driver, stack_jobs, service):
    login(driver, app_url, "", user="alice")
    wait_for_url(driver, lambda url: url.rstrip("/") == app_url)
    rows = _rows(driver)
    shown = [r["job"] for r in rows]
    assert stack_jobs["busy"] in shown and stack_jobs["short"] in shown
    assert stack_jobs["idle"] not in shown and stack_jobs["gpu-untouched"] not in shown
    numeric = sorted({j.split("_")[0] for j in shown})
    assert set(_owners(numeric).values()) == {"alice"}
    # One number: the list shows the figure the report computes.
    busy = next(r for r in rows if r["job"] == stack_jobs["busy"])
    report = service.build(stack_jobs["busy"])
    assert busy["cpu_eff"] == format_percent(report.cpu_efficiency)
    link = driver.find_element(By.CSS_SELECTOR, f'tr[data-job="{stack_jobs["busy"]}"] a')
    assert link.get_attribute("href").endswith(f"/jobs/{stack_jobs['busy']}")
    _screenshot(driver, "browser-my-jobs-alice.png")
    assert severe(driver) == []
    driver.get(f"{app_url}/users/bob")  # another user's page
    assert driver.title.startswith("403")
    driver.get_log("browser")  # the refused page's own log line, read here
    driver.delete_all_cookies()


def test_staff_sees_bob_and_sorts(app_url, driver, stack_jobs):
    login(driver, app_url, "", user="staff")
    driver.get(f"{app_url}/users/bob?days=1")
    assert driver.find_element(By.TAG_NAME, "h1").text == "User bob"
    rows = _rows(driver)
    shown = [r["job"] for r in rows]
    assert stack_jobs["idle"] in shown and stack_jobs["busy"] not in shown
    assert set(_owners(sorted({j.split("_")[0] for j in shown})).values()) == {"bob"}
    # The waste table leads with the job that left the most CPU-hours unused.
    unused = [float(r["cpu_waste"]) for r in rows if r.get("cpu_waste", "—") != "—"]
    top = driver.find_element(By.CSS_SELECTOR, "#waste-cpu_waste tr td.num").text
    assert unused and float(top) == max(unused) > 0
    idle = next(r for r in rows if r["job"] == stack_jobs["idle"])
    assert float(idle["cpu_waste"]) > 0  # 30 s on one core, none of it used
    _screenshot(driver, "browser-users-bob.png")

    def effs() -> list[float]:
        return [float(r["cpu_eff"].rstrip("%")) for r in _rows(driver)
                if r["cpu_eff"].endswith("%")]

    driver.find_element(By.LINK_TEXT, "CPU eff.").click()
    wait_for_url(driver, lambda url: "sort=cpu_eff" in url)
    first = effs()
    assert "order=desc" in driver.current_url and first == sorted(first, reverse=True)
    driver.find_element(By.PARTIAL_LINK_TEXT, "CPU eff.").click()
    wait_for_url(driver, lambda url: "order=asc" in url)
    second = effs()
    # Jobs of other tests end between the two loads: compare the orders, not the sets.
    assert second == sorted(second) and len(set(second)) > 1 and second[0] < first[0]
    _screenshot(driver, "browser-users-bob-sorted.png")
    assert severe(driver) == []
    driver.get(f"{app_url}/users/bob?sort=bogus")
    assert driver.title.startswith("400") and "sort must be one of" in driver.page_source
