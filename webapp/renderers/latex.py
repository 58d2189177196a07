"""LaTeX for untrusted text: ``escaped`` is the only way text enters a document.

``code_latex`` is the PDF's counterpart of ``backticks.code_html``: each piece is escaped
first, then backticked spans are set in ``\\texttt``.

Escaped text is bounded: a field longer than ``MAX_CHARS`` is cut, and says so; a run of
characters without a space may break every ``BREAK_EVERY`` characters (a path wraps in
its column instead of running off the page); and the LaTeX source breaks its lines
(``%`` + newline, which typesets nothing) before they reach ``SOURCE_LINE`` characters.
pdflatex reads each source line into a fixed buffer (200,000 characters in TeX Live's
texmf.cnf): one work directory of 13,000 backslashes, 16 characters each escaped, used to
overflow it and fail the whole PDF.
"""

from __future__ import annotations

from functools import cache

from pylatex import NoEscape
from pylatex.utils import escape_latex

from webapp.formatting import visible
from webapp.renderers.backticks import split_code

# T1 ligatures that would turn "--" into a dash or "<<" into a guillemet.
_LIGATURE_CHARS = "-<>!?,"
# Characters T1 typesets as curly quotes; these commands print them as typed.
_QUOTES = {"'": r"\textquotesingle{}", "`": r"\textasciigrave{}", '"': r"\textquotedbl{}"}


MAX_CHARS = 1000  # of one field: ~25 lines of a table cell; a longer one is cut
BREAK_EVERY = 40  # characters without a space after which a line may break
SOURCE_LINE = 500  # characters of LaTeX source on one line, well inside pdflatex's buffer
_BREAK = r"\allowbreak{}"


def _printable(char: str) -> str:
    # Latin-1 is what inputenc utf8 + T1 + textcomp typeset without extra packages.
    return char if ord(char) < 0x100 else "?"


@cache
def _escaped_char(char: str) -> str:
    """One character as LaTeX that prints it as typed (at most 256 distinct ones)."""
    char = _printable(char)
    out: str = escape_latex(char).replace(r"\^{}", r"\textasciicircum{}")
    if char in _LIGATURE_CHARS:
        out = out.replace(char, char + "{}")
    return _QUOTES.get(char, out)


def escaped(text: object, limit: int = MAX_CHARS) -> NoEscape:
    """Untrusted text made inert for LaTeX: the ONLY way text enters the document. Its
    control characters are shown (``visible``: a line break reads ``\\n``); past
    ``limit`` characters it is cut, with a note of its length."""
    raw = str(text)
    shown = visible(raw)
    note = ""
    if len(shown) > limit:
        shown = shown[:limit]
        note = f" ... (cut, {len(raw):,} characters)"
    out: list[str] = []
    line = run = 0
    for char in shown + note:
        unit = _escaped_char(char)
        run = 0 if char == " " else run + 1
        if run > BREAK_EVERY:
            unit, run = _BREAK + unit, 1
        if line + len(unit) > SOURCE_LINE:
            # "{}" keeps a space that would start the next source line (TeX drops those).
            out.append("%\n{}" if char == " " else "%\n")
            line = 0
        out.append(unit)
        line += len(unit)
    return NoEscape("".join(out))


def code_latex(text: object) -> NoEscape:
    """Escaped text with each backticked span in ``\\texttt``."""
    return NoEscape("".join(
        r"\texttt{" + escaped(piece) + "}" if is_code else escaped(piece)
        for piece, is_code in split_code(str(text))
    ))
