"""Prometheus answers as ``Series``: range (matrix), instant (vector, scalar), and joined.

Every function here is pure: it reads the JSON Prometheus' HTTP API answers (``/api/v1/query``
and ``/api/v1/query_range``), already decoded or, for the fast matrix path, as the raw body.
``merge_series`` joins the answers of the chunks and pieces one range query was split into.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from itertools import chain, islice
from operator import itemgetter, lt
from typing import Any

from webapp.model import GpuDevice, GpuFault, Replay, Series


def parse_matrix(payload: Mapping[str, Any], label: str) -> list[Series]:
    """A ``query_range`` answer -> one ``Series`` per result, named by ``label`` (a/b joins).

    ``{"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},
    "values":[[1435781430.781,"1"], ...]}]}}``
    """
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    out = []
    parts = label.split("/")
    for item in payload["data"]["result"]:
        metric = item.get("metric", {})
        name = "/".join([metric.get(part, "?") for part in parts])
        points = tuple(
            [(float(t), float(v)) for t, v in item.get("values", []) if v not in _NOT_FINITE]
        )
        out.append(Series(name, points))
    return sorted(out, key=lambda s: s.label)


_NOT_FINITE = frozenset(("NaN", "+Inf", "-Inf"))
_VALUES = '"values":['
_NUMBER_CHARS = str.maketrans("", "", "0123456789.eE+-")


def parse_matrix_body(body: bytes, label: str) -> list[Series] | None:
    """``parse_matrix(json.loads(body), label)`` for a successful answer, without building
    a Python list per sample (a 256-core week is 256,000 of them); None when the body is
    not exactly what Prometheus writes (then use ``parse_matrix``, which decides).

    Each ``"values":[[t,"v"],...]`` array is cut out of the text before ``json.loads``
    and split on its separators; any whitespace, escape, quoted time or other surprise
    shows up as a count mismatch or a ``float()`` error, and means None.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    kept: list[str] = []
    arrays: list[str] = []
    pos = 0
    while (i := text.find(_VALUES, pos)) >= 0:
        start = i + len(_VALUES)
        end = start if text.startswith("]", start) else text.find("]]", start) + 1
        if end <= 0:
            return None
        kept.append(text[pos:start])
        arrays.append(text[start:end])
        pos = end
    kept.append(text[pos:])
    try:
        payload = json.loads("".join(kept))
        if not isinstance(payload, dict) or payload.get("status") != "success":
            return None
        result = payload["data"]["result"]
        if sum(1 for item in result if "values" in item) != len(arrays):
            return None
        points = iter([_points(a) for a in arrays])
        out = []
        parts = label.split("/")
        for item in result:
            metric = item.get("metric", {})
            name = "/".join([metric.get(part, "?") for part in parts])
            out.append(Series(name, next(points) if "values" in item else ()))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return sorted(out, key=lambda s: s.label)


def _points(array: str) -> tuple[tuple[float, float], ...]:
    """``[t,"v"],[t,"v"]`` -> ((t, v), ...) without the non-finite values; ValueError when the
    text is anything else."""
    if not array:
        return ()
    n = array.count("[")
    if not (array[0] == "[" and array.endswith('"]') and array.count("]") == n):
        raise ValueError("unexpected values array")
    if array.count('"') != 2 * n:
        raise ValueError("unexpected values array")
    fields = array[1:-2].replace('"],[', ',"').split(',"')
    if len(fields) != 2 * n:
        raise ValueError("unexpected values array")
    times, values = fields[0::2], fields[1::2]
    # Times are JSON numbers: anything float() reads but JSON does not ("1_0", " 2", "inf")
    # is refused, and so is "-0" (json.loads reads it as the integer 0, float() as -0.0).
    if "".join(times).translate(_NUMBER_CHARS) or "[-0," in array:
        raise ValueError("unexpected time in values array")
    if _NOT_FINITE.isdisjoint(values):
        return tuple(zip(map(float, times), map(float, values), strict=True))
    return tuple(
        [(float(t), float(v)) for t, v in zip(times, values, strict=True) if v not in _NOT_FINITE]
    )


def parse_vector(payload: Mapping[str, Any], label: str) -> list[Series]:
    """An instant ``query`` answer (vector) -> a one-point ``Series`` per result.

    ``{"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
    "value":[1435781451.781,"1"]}]}}``
    """
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    out = []
    for item in payload["data"]["result"]:
        metric = item.get("metric", {})
        name = "/".join(metric.get(part, "?") for part in label.split("/"))
        t, v = item["value"]
        if v not in ("NaN", "+Inf", "-Inf"):
            out.append(Series(name, ((float(t), float(v)),)))
    return sorted(out, key=lambda s: s.label)


def parse_scalar(payload: Mapping[str, Any]) -> float | None:
    """An instant ``query`` answer (vector) -> its single value, or None when empty."""
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    result = payload["data"]["result"]
    if not result:
        return None
    value = float(result[0]["value"][1])
    return None if math.isnan(value) else value


def merge_series(parts: Iterable[list[Series]]) -> tuple[Series, ...]:
    """Join the chunks of one query: series with the same label are concatenated.

    Points are sorted by time; where chunks overlap, the later chunk's value wins.
    """
    runs: dict[str, list[tuple[tuple[float, float], ...]]] = {}
    for part in parts:
        for s in part:
            runs.setdefault(s.label, []).append(s.points)
    return tuple(Series(k, _join(v)) for k, v in sorted(runs.items()))


def _join(runs: list[tuple[tuple[float, float], ...]]) -> tuple[tuple[float, float], ...]:
    # Chunks come back in order and do not overlap: then joining is concatenating. Anything
    # else (unsorted, repeated or overlapping times) goes through a dict, later values winning.
    last: float | None = None
    for run in runs:
        ts = list(map(_time, run))
        if not ts:
            continue
        if (last is not None and not last < ts[0]) or not all(map(lt, ts, islice(ts, 1, None))):
            break
        last = ts[-1]
    else:
        return tuple(runs[0]) if len(runs) == 1 else tuple(chain.from_iterable(runs))
    points: dict[float, float] = {}
    for run in runs:
        points.update(run)
    return tuple(sorted(points.items()))


_time = itemgetter(0)


def parse_mean_since(
    payload: Mapping[str, Any], label: str, start: float, at: float
) -> list[Series]:
    """A counter's raw last samples (an instant query of ``counter[lookback]``) -> the mean
    rate since ``start`` per ``label``: last value / (its time - start), summed over the
    series sharing a label, one point at ``at`` (what ``sum by (...) (c / (timestamp(c) -
    start))`` evaluated at ``at`` gives, without Prometheus evaluating it per series).

    ``{"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},
    "values":[[1435781430,"10"],[1435781460,"12.5"]]}]}}``
    """
    sums: dict[str, float] = {}
    for s in parse_matrix(payload, label):
        if s.points:
            t, v = s.points[-1]
            mean = mean_since(v, t, start, at)
            if mean is not None:
                sums[s.label] = sums.get(s.label, 0.0) + mean
    return [Series(name, ((at, value),)) for name, value in sorted(sums.items())]


def mean_since(total: float, at: float, start: float, end: float) -> float | None:
    """A counter's mean rate over the run: its value ``total`` sampled at ``at`` over the
    time from ``start`` to that sample, counted up to the run's ``end`` (the final sample
    may come a scrape after the end: the job did not run in between); None before it."""
    span = min(at, end) - start
    return total / span if span > 0 else None


# -- GPU faults ----------------------------------------------------------------------
def _fault_key(labels: Mapping[str, str], node: str) -> tuple[str, str, str | None]:
    """(gpu as the series label it, kind, XID code) of a fault counter's labels."""
    gpu = f"{labels.get(node, '?')}/{labels.get('gpu', '?')}"
    if labels.get("xid"):
        return gpu, "xid", labels["xid"]
    return gpu, f"ecc_{labels.get('type', 'uncorrected')}", None


def parse_gpu_faults(answer: list[tuple[dict[str, str], float]], node: str
                     ) -> tuple[GpuFault, ...]:
    """The combined fault answer (``GPU_FAULT_QUERIES``) as faults, in GPU order."""
    out = [GpuFault(*_fault_key(labels, node), count=round(value, 3))
           for labels, value in answer]
    return tuple(sorted(out, key=lambda f: (f.gpu, f.kind, f.code or "")))


def parse_fault_matrix(payload: Mapping[str, Any], node: str
                          ) -> list[tuple[tuple[str, str, str | None], list[tuple[float, float]]]]:
    """A range answer as (fault key, points) pairs."""
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    return [(_fault_key(item.get("metric", {}), node),
             [(float(t), float(v)) for t, v in item["values"]])
            for item in payload["data"]["result"]]


def dated(faults: tuple[GpuFault, ...],
          series: list[tuple[tuple[str, str, str | None], list[tuple[float, float]]]]
          ) -> tuple[GpuFault, ...]:
    """Each fault with the time of the first sample above its counter's first value."""
    first: dict[tuple[str, str, str | None], float] = {}
    for key, points in series:
        base = points[0][1] if points else 0.0
        when = next((t for t, v in points if v > base), None)
        if when is not None:
            first[key] = when
    return tuple(dataclasses.replace(f, first_at=first.get((f.gpu, f.kind, f.code)))
                 for f in faults)


def parse_gpu_devices(answer: list[tuple[dict[str, str], float]], node: str
                      ) -> tuple[GpuDevice, ...]:
    """``jobs_gpu_info``'s labels as devices, labelled as the GPU series are."""
    return tuple(sorted(
        (GpuDevice(f"{m.get(node, '?')}/{m.get('gpu', '?')}", m.get("vendor", ""),
                   m.get("model", ""), m.get("profile", ""), m.get("uuid", ""),
                   m.get("pci_bus_id", ""), m.get("power_share", ""))
         for m, _ in answer), key=lambda d: d.gpu))


def parse_replayed(answer: list[tuple[dict[str, str], float]], node: str
                   ) -> tuple[Replay, ...]:
    """``REPLAY_QUERY``'s answer (``jobs_exporter_replay_info``'s labels on the job's
    nodes) as the replays, by node and source."""
    found = {Replay(m.get(node, "?"), m.get("source", ""), m.get("recording", ""))
             for m, value in answer if value > 0}
    return tuple(sorted(found, key=lambda r: (r.node, r.source, r.recording)))
