"""Commands in advice and messages, written between backticks (`--mem=4G`), as code.

HTML (the page and the email) escapes the whole text first and only then turns each
backticked span into ``<code>``, so no text from Slurm or a detector can inject markup;
the PDF does the same with ``\\texttt`` (``webapp.renderers.latex.code_latex``). Plain
text (terminal and the text email) keeps the backticks as typed: they mark the command
as Markdown does and a reader copies what is between them.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

# A span never crosses a line and is never empty; a lone backtick stays a backtick.
BACKTICKED = re.compile(r"`([^`\n]+)`")


def split_code(text: str) -> list[tuple[str, bool]]:
    """``text`` as (piece, is_code) pairs in order, without the backticks of code pieces."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in BACKTICKED.finditer(text):
        if m.start() > pos:
            out.append((text[pos:m.start()], False))
        out.append((m.group(1), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def code_html(text: object, style: str | None = None) -> Markup:
    """Escaped HTML with each backticked span in ``<code>`` (``style`` for emails, which
    ignore style sheets)."""
    opening = Markup('<code style="{}">').format(style) if style else Markup("<code>")
    return Markup("").join(
        opening + escape(piece) + Markup("</code>") if is_code else escape(piece)
        for piece, is_code in split_code(str(text))
    )
