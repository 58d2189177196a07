"""Splitting Slurm's comma lists where commas also appear inside brackets."""

from __future__ import annotations


def split_top(text: str, open_: str = "[", close: str = "]") -> list[str]:
    """``text`` split on the commas outside ``open_``/``close`` pairs, pieces kept as they are.

    Host lists nest ranges in brackets (``node[1,3-4],gpu01``); sinfo's Gres strings nest
    indexes in parentheses (``gpu:a30:4(IDX:0,2-3)``)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items
