"""GPU counts per type from sinfo's ``Gres`` / ``GresUsed`` strings.

Forms seen in real output (CLUSTER.md): ``gpu:2``, ``gpu:rtx8000:8(S:0-1)``,
``gpu:tesla:0(IDX:N/A)``, ``gpu:(null):3(IDX:0-7)``, ``gpu:A30:4(IDX:0-3),gpu:Q6K:4(IDX:0-3)``,
MIG types with dots (``gpu:nvidia_h100_80gb_hbm3_4g.40gb:1``), ``tmp:844G`` and ``(null)``.
"""

from __future__ import annotations

from jobreport_common.split import split_top

UNTYPED = "untyped"


def split_items(text: str) -> list[str]:
    """Split on commas outside parentheses (``(IDX:0,2-3)`` holds commas)."""
    return [item.strip() for item in split_top(text, "(", ")") if item.strip()]


def parse_gpus(text: str) -> dict[str, int]:
    """GPUs per type: ``'gpu:A30:4(IDX:0-3),gpu:Q6K:4(IDX:0-3),tmp:844G'`` -> {A30: 4, Q6K: 4}.

    An untyped or ``(null)`` type is ``untyped``. ``(null)`` or empty text: no GPUs.
    """
    found: dict[str, int] = {}
    text = text.strip()
    if not text or text == "(null)":
        return found
    for item in split_items(text):
        if item.endswith(")") and not item.endswith("(null)"):
            item = item[: item.rindex("(")]  # (S:0-1), (IDX:0,2-3), (IDX:N/A)
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 2:
            gpu_type, count = "", parts[1]
        elif len(parts) == 3:
            gpu_type, count = parts[1], parts[2]
        else:
            raise ValueError(f"unexpected GRES item {item!r}")
        if gpu_type in ("", "(null)"):
            gpu_type = UNTYPED
        if not count.isdigit():
            raise ValueError(f"GPU count {count!r} in {item!r} is not a number")
        found[gpu_type] = found.get(gpu_type, 0) + int(count)
    return found
