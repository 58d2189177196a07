"""No number a person reads is written with an exponent (``3.53e-05 core-hours``): the
text (with details and audit), the web page's text and both email bodies, for any amounts."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.captured_reports import captured
from tests.helpers.reports import sample_report
from webapp.formatting import format_amount, format_number
from webapp.model import Audit, Finding, Severity, Waste, WasteItem
from webapp.renderers import email, text
from webapp.renderers.presentation import context
from webapp.renderers.templates import environment

EXPONENT = re.compile(r"\d(\.\d+)?[eE][+-]?\d")
AMOUNTS = st.one_of(st.floats(min_value=0, max_value=1e18, allow_nan=False),
                    st.floats(min_value=1e-300, max_value=1e-3))
ENV = environment()


class _Words(HTMLParser):
    """What a browser shows: text, not attributes, styles or SVG paths."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in ("style", "svg")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "svg")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.words.append(data)


def _shown(html: str) -> str:
    parser = _Words()
    parser.feed(html)
    return " ".join(parser.words)


@settings(max_examples=60, deadline=None)
@given(amount=AMOUNTS, unused=AMOUNTS, units=AMOUNTS, ratio=AMOUNTS, seconds=AMOUNTS,
       threshold=AMOUNTS)
def test_no_rendered_number_uses_an_exponent(amount, unused, units, ratio, seconds, threshold):
    base = captured("gpu-untouched")
    waste = Waste((WasteItem("cpu", "core-hours", amount, unused, ratio, units, units * ratio),
                   WasteItem("gpu", "GPU-hours", amount, unused, None, None, None)),
                  ratio, "the partition's TRESBillingWeights", ratio)
    audit = dataclasses.replace(base.audit, thresholds=(("cpu_efficiency_low", threshold, True),))
    finding = Finding("custom", Severity.WARNING, "m", "a",
                      {"slope_bytes_per_second": ratio, "fraction": threshold})
    report = dataclasses.replace(base, waste=waste, audit=audit, cpu_seconds=seconds,
                                 elapsed_seconds=seconds or 1.0, billing=ratio,
                                 findings=(finding, *base.findings))
    assert isinstance(report.audit, Audit)
    out = text.render(report, details=True, audit=True)
    assert not EXPONENT.search(out), EXPONENT.search(out)
    page = _shown(ENV.get_template("report.html").render(standalone=True,
                                                         **context(report, charts=[])))
    assert not EXPONENT.search(page), EXPONENT.search(page)
    msg = email.render(report, "alice@example.org", "j@example.org", pdf=b"%PDF")
    for body in (msg.get_body(("plain",)).get_content(),
                 _shown(msg.get_body(("html",)).get_content())):
        assert not EXPONENT.search(body), EXPONENT.search(body)


@given(AMOUNTS)
def test_amounts_and_settings_read_as_plain_numbers(value):
    assert not EXPONENT.search(format_amount(value, "core-hours"))
    assert not EXPONENT.search(format_number(value))


def test_small_waste_reads_as_less_than_a_hundredth():
    """The issue's line: ``cpu 0.0111 core-hours 3.53e-05 core-hours``."""
    assert format_amount(3.53e-05, "core-hours") == "< 0.01 core-hours"
    assert format_amount(0.0111, "core-hours") == "0.01 core-hours"
    assert format_amount(36, "GPU-hours") == "36 GPU-hours"
    out = text.render(sample_report(), details=True, audit=True)
    assert "e-0" not in out and "n/a" not in out
