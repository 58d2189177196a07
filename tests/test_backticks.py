"""Commands between backticks render as code: <code> in HTML (page and email), \\texttt
in the PDF, escaped first so backticks are never a way in; plain text keeps them."""

from __future__ import annotations

from tests.helpers.reports import HTML_PAYLOAD, LATEX_PAYLOAD, sample_report
from webapp.model import Finding, Severity
from webapp.renderers import email, html, text
from webapp.renderers.backticks import code_html, split_code
from webapp.renderers.latex import code_latex

HOSTILE = f"Run `{HTML_PAYLOAD}` then `{LATEX_PAYLOAD}` and </code><b>`x`"


def test_split_code_pairs_backticks_and_leaves_a_lone_one():
    assert split_code("Ask for `--mem=4G` next time") == [
        ("Ask for ", False), ("--mem=4G", True), (" next time", False)]
    assert split_code("a ` lone") == [("a ` lone", False)]
    assert split_code("``") == [("``", False)]  # empty spans are not code
    assert split_code("`a`\n`b`") == [("a", True), ("\n", False), ("b", True)]


def test_html_escapes_before_it_adds_code():
    assert code_html("Ask for `--mem=4G`.") == "Ask for <code>--mem=4G</code>."
    out = str(code_html(HOSTILE))
    assert "<script>" not in out and "<b>" not in out
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in out
    # Three spans; the text's own "</code><b>" is escaped, never markup.
    assert out.count("<code>") == out.count("</code>") == 3
    assert "&lt;/code&gt;&lt;b&gt;" in out
    styled = str(code_html("`x`", 'font-family: "a"'))
    assert styled == '<code style="font-family: &#34;a&#34;">x</code>'


def test_latex_escapes_each_piece_and_uses_texttt():
    out = str(code_latex("Ask for `--mem=4G` or `$HOME/x_1`."))
    assert out == (r"Ask for \texttt{{-{}}{-{}}mem=4G} or \texttt{\$HOME/x\_1}.")
    hostile = str(code_latex(HOSTILE))
    assert "\\input" not in hostile and "\\textbackslash{}input" in hostile
    assert hostile.count("\\texttt{") == 3


def _hostile_report():
    finding = Finding("custom", Severity.WARNING, f"Message {HOSTILE}", f"Advice {HOSTILE}",
                      {"n": 1}, f"Evidence {HOSTILE}.")
    return sample_report(findings=(finding,))


def test_page_and_email_show_code_and_no_markup_from_the_text():
    report = _hostile_report()
    page = html.render(report)
    msg = email.render(report, "alice@example.org", "jobreport@example.org", pdf=b"%PDF")
    rich = msg.get_body(("html",)).get_content()
    # message, advice and evidence on the page; message and advice in the email
    for body, spans in ((page, 3), (rich, 2)):
        findings = body.split("Findings", 1)[1]
        assert "<script>" not in body and "<b>`" not in body
        assert findings.count("&lt;script&gt;alert(1)&lt;/script&gt;</code>") == spans
        assert "`" not in findings.split("No problems")[0].split("</div>")[0]
    assert '<code style="' in rich  # email clients ignore style sheets


def test_plain_text_keeps_the_backticks():
    report = sample_report(findings=(Finding(
        "custom", Severity.INFO, "m", "Ask for `--cpus-per-task=2` or `--ntasks=1` next time, "
        "which is a long enough sentence to wrap at eighty columns somewhere.", {}, "E."),))
    out = text.render(report)
    assert "`--cpus-per-task=2`" in out and "`--ntasks=1`" in out  # never split at a hyphen
    msg = email.render(report, "alice@example.org", "jobreport@example.org", pdf=b"%PDF")
    assert "`--cpus-per-task=2`" in msg.get_body(("plain",)).get_content()
