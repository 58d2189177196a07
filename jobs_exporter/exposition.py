"""The text exposition format 0.0.4 of a registry's families, byte for byte as
prometheus_client's ``generate_latest`` writes it (tests/test_exporter_exposition.py holds
the two equal on real scrapes), in a third of its time.

The library checks and escapes every label and metric name of every sample against its
UTF-8 naming rules and formats each line through several calls; a scrape of 64 jobs has
~1,400 samples of a dozen names, so this writer escapes each name once (``_names``) and
each label value only where it holds a character to escape. Families of the kinds it
does not write (histograms, summaries, info, OpenMetrics-only samples) go through the
library's writer, one family at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.utils import floatToGoString

_SIMPLE = frozenset({"gauge", "counter", "unknown"})
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
        return floatToGoString(value)
    return text


def _value(text: str) -> str:
    if "\\" in text or "\n" in text or '"' in text:
        return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return text


class TextWriter:
    """Writes families as ``generate_latest`` does; keeps the escaped names it has seen."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}  # metric or label name -> as written
        self._labels: dict[tuple[str, ...], list[str]] = {}  # label names -> 'name="'

    def write(self, registry: CollectorRegistry) -> bytes:
        out: list[str] = []
        for metric in registry.collect():
            if metric.type not in _SIMPLE or not self._plain(metric):
                out.append(generate_latest(_One(metric)).decode())
                continue
            self._family(metric, out)
        return "".join(out).encode()

    def _plain(self, metric: Metric) -> bool:
        """No OpenMetrics-only sample (``_created``...) and no timestamp: the lines the
        library writes in order, one per sample."""
        created = metric.name + "_created"
        return all(s.timestamp is None and s.name != created for s in metric.samples)

    def _name(self, name: str, label: bool = False) -> str:
        found = self._names.get(name)
        if found is None:
            found = escape_label_name(name) if label else escape_metric_name(name)
            self._names[name] = found
        return found

    def _family(self, metric: Metric, out: list[str]) -> None:
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        written = self._name(name)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {written} {doc}\n# TYPE {written} {_TYPE_LINE[metric.type]}\n")
        for sample in metric.samples:
            labels = sample.labels
            if not labels:
                out.append(f"{self._name(sample.name)} {_number(sample.value)}\n")
                continue
            keys = tuple(sorted(labels))
            heads = self._labels.get(keys)
            if heads is None:
                heads = [f'{self._name(k, label=True)}="' for k in keys]
                self._labels[keys] = heads
            if len(keys) == 1:
                pairs = heads[0] + _value(labels[keys[0]]) + '"'
            else:
                pairs = ",".join(
                    [h + _value(labels[k]) + '"' for h, k in zip(heads, keys, strict=True)])
            out.append(f"{self._name(sample.name)}{{{pairs}}} {_number(sample.value)}\n")
