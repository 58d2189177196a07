"""Property-based tests: every parser of Slurm text raises only its documented error on
any input, and every escaping function gives back the literal text."""

from __future__ import annotations

import html
import json
import re
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP, default
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jobreport_common.slurm_values import parse_tres
from tests.helpers.sacct_fields import CAPTURED_FIELDS
from webapp.formatting import visible
from webapp.model import InvalidJobId, JobId
from webapp.renderers.backticks import BACKTICKED, code_html
from webapp.renderers.email import header_text
from webapp.renderers.latex import MAX_CHARS, SOURCE_LINE, code_latex
from webapp.renderers.pdf import _printable, escaped
from webapp.renderers.templates import environment
from webapp.sources import accounting, sacct_values
from webapp.sources.prometheus import promql_string
from webapp.sources.sacct import FIELDS, parse_sacct
from webapp.sources.sacct_records import delimiter_of, new_delimiter

settings.register_profile("jobreport", max_examples=300, deadline=None)
settings.load_profile("jobreport")

# Text as Slurm hands it over: anything, with a bias towards its own punctuation.
slurm_text = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(
    list("0123456789:-.[],|=/+_KMGTPcn ")), max_size=60)


@given(slurm_text)
def test_job_id_parses_or_is_invalid(text):
    try:
        job = JobId.parse(text)
    except InvalidJobId:
        return
    assert JobId.parse(str(job)) == job


@given(st.integers(0, 10**10 - 1), st.one_of(st.none(), st.integers(0, 10**10 - 1)))
def test_job_id_round_trips(job, task):
    text = f"{job}" if task is None else f"{job}_{task}"
    assert str(JobId.parse(text)) == text


@given(slurm_text)
def test_sacct_value_parsers_raise_only_value_error(text):
    for parse in (sacct_values.parse_sacct_duration, sacct_values.parse_memory,
                  sacct_values.parse_req_mem, sacct_values.parse_time,
                  sacct_values.parse_nodelist, parse_tres,
                  sacct_values.parse_sacct_state):
        try:
            parse(text)
        except ValueError:
            pass


@given(st.from_regex(r"[a-z]{1,4}\[[0-9]{1,7}-[0-9]{1,7}(,[0-9]{1,3})*\]", fullmatch=True))
def test_host_lists_are_bounded(text):
    try:
        hosts = sacct_values.parse_nodelist(text)
    except ValueError:
        return
    assert len(hosts) <= sacct_values.MAX_HOSTS


@given(st.lists(st.lists(slurm_text, min_size=1, max_size=len(FIELDS) + 2), max_size=6))
def test_sacct_output_never_breaks_the_parser(rows):
    text = "\n".join("|".join(r) for r in rows)
    parse_sacct(text, FIELDS)  # bad lines are logged and skipped


@given(slurm_text)
def test_accounting_tres_ids(text):
    out = accounting.parse_tres_ids(text, {1: "cpu"})
    assert all(isinstance(v, float) for v in out.values())


# --- escaping: the literal text comes back ---------------------------------------------

@given(st.text(max_size=80))
def test_html_autoescape_round_trips(text):
    rendered = environment().from_string("<p>{{ t }}</p>").render(t=text)
    assert html.unescape(rendered[3:-4]) == text
    assert "<" not in rendered[3:-4] and '"' not in rendered[3:-4]


# A break opportunity and a source line's end ("%" + newline) typeset nothing.
_LATEX_BACK = [("%\n", ""), (r"\allowbreak{}", ""),
               (r"\textasciicircum{}", "^"), (r"\textasciitilde{}", "~"),
               (r"\textbackslash{}", "\\"), (r"\textquotesingle{}", "'"),
               (r"\textasciigrave{}", "`"), (r"\textquotedbl{}", '"'), ("{}", "")]
# A literal character in its own group ({-}, {[}) only stops a ligature or an option.
_GROUPED_CHAR = re.compile(r"\{([^\\{}$&#%^_~])\}")


def _unlatex(out: str) -> str:
    out = out.replace("~", "\xa0")  # a bare ~ is the no-break space it stands for
    for command, char in _LATEX_BACK:
        out = out.replace(command, char)
    out = _GROUPED_CHAR.sub(r"\1", out)
    return re.sub(r"\\([&%$#_{}])", r"\1", out)


@given(st.text(max_size=80))
def test_latex_escaping_round_trips(text):
    out = str(escaped(text))
    # No command but the escapes themselves: nothing can \input, open a group or math.
    stripped = out
    for command, _ in _LATEX_BACK:
        stripped = stripped.replace(command, "")
    stripped = _GROUPED_CHAR.sub("", stripped)
    stripped = re.sub(r"\\[&%$#_{}]", "", stripped)
    assert not re.search(r"[\\{}$&#%^_]", stripped), out
    assert _unlatex(out) == "".join(_printable(c) for c in visible(text))


@settings(max_examples=50)
@given(st.text(alphabet=st.sampled_from(list("\\ a{}%~^-'\n\x07é日")), min_size=300,
               max_size=MAX_CHARS))
def test_long_latex_text_round_trips_in_short_lines(text):
    """Up to the cut, long text (backslashes: 16 characters each) comes back whole, in
    source lines that stay short whatever the text (pdflatex's line buffer is fixed)."""
    out = str(escaped(text))
    # "{}" before a space that starts a line, "%" that ends one
    assert max(len(line) for line in out.split("\n")) <= SOURCE_LINE + 3
    shown = visible(text)
    if len(shown) <= MAX_CHARS:
        assert _unlatex(out) == "".join(_printable(c) for c in shown)
    else:
        assert _unlatex(out).endswith("characters)") and "(cut," in _unlatex(out)


# Text with commands in it: backticks, markup and TeX specials, paired or not.
command_text = st.lists(
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list("``<>&\"'\\{}$%#_^~-=")),
            max_size=8)
    | st.sampled_from(["`--mem=4G`", "</code>", "<code>", "\\texttt{", "`", "\n"]),
    max_size=10).map("".join)


def _untexttt(out: str) -> str:
    """``out`` with each ``\\texttt{...}`` (balanced braces) replaced by its content."""
    while (start := out.find("\\texttt{")) >= 0:
        depth, i = 1, start + len("\\texttt{")
        while depth:
            if out[i] == "\\":  # an escaped brace \{ or \} counts for nothing
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(out[i], 0)
            i += 1
        out = out[:start] + out[start + len("\\texttt{"):i - 1] + out[i:]
    return out


@given(command_text)
def test_code_html_adds_only_code_elements_and_keeps_the_text(text):
    out = str(code_html(text))
    spans = len(BACKTICKED.findall(text))
    assert out.count("<code>") == out.count("</code>") == spans
    bare = out.replace("<code>", "").replace("</code>", "")
    assert "<" not in bare and ">" not in bare and '"' not in bare
    assert html.unescape(bare) == BACKTICKED.sub(r"\1", text)


@given(command_text)
def test_code_latex_adds_only_texttt_and_keeps_the_text(text):
    out = str(code_latex(text))
    spans = len(BACKTICKED.findall(text))
    assert out.count(r"\texttt{") == spans
    bare = _untexttt(out)
    # What is left is escaped text alone: the same check as escaped()'s own.
    stripped = bare
    for command, _ in _LATEX_BACK:
        stripped = stripped.replace(command, "")
    stripped = _GROUPED_CHAR.sub("", stripped)
    stripped = re.sub(r"\\[&%$#_{}]", "", stripped)
    assert not re.search(r"[\\{}$&#%^_]", stripped), out
    plain = BACKTICKED.sub(r"\1", text)
    assert _unlatex(bare) == "".join(_printable(c) for c in visible(plain))


@given(st.text(max_size=80))
def test_email_header_round_trips_and_adds_nothing(text):
    msg = EmailMessage(policy=default)
    msg["From"] = "jobreport@example.org"
    msg["Subject"] = header_text(text)
    msg.set_content("body")
    received = message_from_bytes(msg.as_bytes(policy=SMTP), policy=default)
    assert sorted(received.keys()) == sorted(msg.keys())
    shown = str(received["Subject"]).replace("\N{WORD JOINER}", "")
    expected = visible(text).strip()
    # RFC 2047 drops white space between adjacent encoded-words: compare the rest.
    assert "".join(shown.split()) == "".join(expected.split())


def _go_unquote(literal: str) -> str:
    assert literal[0] == literal[-1] == '"'
    return re.sub(r'\\(x[0-9a-f]{2}|\\|")',
                  lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else m.group(1),
                  literal[1:-1])


@given(st.text(max_size=60))
def test_promql_string_round_trips(text):
    literal = promql_string(text)
    body = literal[1:-1]
    assert not re.search(r'(?<!\\)"', body.replace("\\\\", "")), literal
    assert not any(ord(c) < 0x20 for c in body)
    assert _go_unquote(literal) == text



# --- job text through sacct's output: what Slurm was given comes back ---------------------

# A real answer (jobs 78-80, local stack) whose name and work directory the properties
# swap for others, as sacct would print them; its argv holds the delimiter it asked for.
_FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
_META = json.loads((_FIX / "local-linebreaks-78.json").read_text())
_ANSWER = (_FIX / "local-linebreaks-78-jobs.psv").read_bytes().decode()
_DELIMITER = delimiter_of(_META["argv"]["jobs"])
# Anything Slurm keeps (no NUL), with a bias towards line ends and delimiters.
job_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00")
                   | st.sampled_from(["\n", "\r", "|", "~", "\x0b", "\x1c"]),
                   max_size=40)


def _answer(name: str, work_dir: str, delimiter: str = _DELIMITER) -> str:
    text = _ANSWER.replace(_META["names"][0], name, 1).replace(_META["workdir"], work_dir)
    return text.replace(_DELIMITER, delimiter)


def _check(text: str, name: str, work_dir: str, delimiter: str) -> None:
    jobs = {j.job_id: j for j in parse_sacct(text, CAPTURED_FIELDS, delimiter=delimiter)}
    assert list(jobs) == _META["ids"]
    assert jobs["78"].job_name == (name or None)
    assert [j.work_dir for j in jobs.values()] == [work_dir or None] * 3
    assert jobs["79"].job_name == _META["names"][1] and jobs["80"].exit_code == "3:0"
    assert jobs["78"].cpus == 2 and [s.step_id for s in jobs["78"].steps] == ["batch", "0"]


@given(job_text, job_text)
def test_any_name_and_directory_come_back_with_a_random_delimiter(name, work_dir):
    delimiter = new_delimiter()
    _check(_answer(name, work_dir, delimiter), name, work_dir, delimiter)


@given(job_text.map(lambda t: t.replace("\n", "")), st.sampled_from(["|", _DELIMITER]))
def test_a_name_holding_the_delimiter_comes_back(text, delimiter):
    # The delimiter inside the one glued column, with no line break beside it (with both
    # in one name, where the name ends is ambiguous: the reason for a random delimiter).
    name = text.replace("~", delimiter)
    _check(_answer(name, "/home/alice", delimiter), name, "/home/alice", delimiter)
