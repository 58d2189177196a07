"""The text exposition format 0.0.4 of a registry's families, byte for byte as
prometheus_client's ``generate_latest`` writes it (tests/test_exporter_exposition.py holds
the two equal on real scrapes), in a third of its time.

The library (since 0.22) checks and escapes every label and metric name of every sample
against its UTF-8 naming rules and formats each line through several calls; a scrape of
64 jobs has ~1,400 samples of a dozen names, so this writer checks each name once and
escapes a label value only where it holds a character to escape. It writes the names that
every version of the library writes unchanged (the classic ``[a-zA-Z_:][a-zA-Z0-9_:]*``);
a family with another name, or of a kind it does not write (histograms, summaries, info,
OpenMetrics-only samples), goes through the library's writer, one family at a time. Only
the library's public API is used: the nodes' distributions ship older versions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# The kinds this writer writes, and the word of their TYPE line.
_TYPE_LINE = {"gauge": "gauge", "counter": "counter", "unknown": "untyped"}


class _One:
    """A registry of one family, for the library's writer."""

    def __init__(self, metric: Metric):
        self.metric = metric

    def collect(self) -> Iterable[Metric]:
        return (self.metric,)


def _number(value: float) -> str:
    """``floatToGoString``, its common case inline: a float whose repr needs no change."""
    text = repr(float(value))
    if text.find(".") > 6 or "n" in text:  # Go's exponent form; inf, nan
        go: str = floatToGoString(value)
        return go
    return text


def _value(text: str) -> str:
    if "\\" in text or "\n" in text or '"' in text:
        return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return text


class TextWriter:
    """Writes families as ``generate_latest`` does; keeps the names it has checked."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, bool], bool] = {}  # (name, a label's) -> unchanged
        self._labels: dict[tuple[str, ...], list[str] | None] = {}  # names -> 'name="'

    def write(self, registry: CollectorRegistry) -> bytes:
        out: list[str] = []
        for metric in registry.collect():
            lines = self._family(metric) if metric.type in _TYPE_LINE else None
            out.append("".join(lines) if lines is not None
                       else generate_latest(_One(metric)).decode())
        return "".join(out).encode()

    def _plain(self, name: str, label: bool = False) -> bool:
        found = self._names.get((name, label))
        if found is None:
            found = bool((_LABEL_NAME if label else _METRIC_NAME).fullmatch(name))
            self._names[name, label] = found
        return found

    def _heads(self, keys: tuple[str, ...]) -> list[str] | None:
        if keys not in self._labels:
            plain = all(self._plain(k, label=True) for k in keys)
            self._labels[keys] = [f'{k}="' for k in keys] if plain else None
        return self._labels[keys]

    def _family(self, metric: Metric) -> list[str] | None:
        """The family's lines; None where the library must write it: a name it may
        escape, an OpenMetrics-only sample (``_created``...) or a timestamp."""
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        if not self._plain(name):
            return None
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out = [f"# HELP {name} {doc}\n# TYPE {name} {_TYPE_LINE[metric.type]}\n"]
        created = metric.name + "_created"
        for sample in metric.samples:
            if sample.timestamp is not None or sample.name == created or not self._plain(
                    sample.name):
                return None
            labels = sample.labels
            if not labels:
                out.append(f"{sample.name} {_number(sample.value)}\n")
                continue
            keys = tuple(sorted(labels))
            heads = self._heads(keys)
            if heads is None:
                return None
            if len(keys) == 1:
                pairs = heads[0] + _value(labels[keys[0]]) + '"'
            else:
                pairs = ",".join(
                    [h + _value(labels[k]) + '"' for h, k in zip(heads, keys, strict=True)])
            out.append(f"{sample.name}{{{pairs}}} {_number(sample.value)}\n")
        return out
