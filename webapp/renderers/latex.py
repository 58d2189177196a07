"""LaTeX for untrusted text: ``escaped`` is the only way text enters a document.

``code_latex`` is the PDF's counterpart of ``backticks.code_html``: each piece is escaped
first, then backticked spans are set in ``\\texttt``.
"""

from __future__ import annotations

from pylatex import NoEscape
from pylatex.utils import escape_latex

from webapp.formatting import visible
from webapp.renderers.backticks import split_code

# T1 ligatures that would turn "--" into a dash or "<<" into a guillemet.
_LIGATURE_CHARS = "-<>!?,"
# Characters T1 typesets as curly quotes; these commands print them as typed.
_QUOTES = {"'": r"\textquotesingle{}", "`": r"\textasciigrave{}", '"': r"\textquotedbl{}"}


def _printable(char: str) -> str:
    # Latin-1 is what inputenc utf8 + T1 + textcomp typeset without extra packages.
    return char if ord(char) < 0x100 else "?"


def escaped(text: object) -> NoEscape:
    """Untrusted text made inert for LaTeX: the ONLY way text enters the document. Its
    control characters are shown (``visible``: a line break reads ``\\n``)."""
    plain = "".join(_printable(c) for c in visible(str(text)))
    out = escape_latex(plain).replace(r"\^{}", r"\textasciicircum{}")
    for char in _LIGATURE_CHARS:
        out = out.replace(char, char + "{}")
    for char, command in _QUOTES.items():
        out = out.replace(char, command)
    return NoEscape(out)


def code_latex(text: object) -> NoEscape:
    """Escaped text with each backticked span in ``\\texttt``."""
    return NoEscape("".join(
        r"\texttt{" + escaped(piece) + "}" if is_code else escaped(piece)
        for piece, is_code in split_code(str(text))
    ))
