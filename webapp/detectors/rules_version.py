"""The two versions every report records beside its verdicts, derived from what decides
them rather than bumped by hand: equal code and policy versions, same judgement.

**The code version** (``RULES_VERSION``, the report's ``coverage.rules_version``) covers
every module a verdict rests on. Which modules is worked out from the imports, not kept
by hand (``verdict_modules``):

- the roots are every module of ``webapp.detectors`` (the judging: detectors, measures,
  advice, the site policy's engine, this file) and of ``webapp.report`` (the figures they
  judge: the peak and its precedence, the steps, waste, coverage and what is withheld);
- then, transitively, every module of the project's packages (``PROJECT``: ``webapp``,
  ``jobreport_common``) that one of them imports, at module level or inside a function,
  and the packages above each (their ``__init__`` runs first): so ``webapp.states``,
  ``webapp.thresholds``, ``webapp.unused`` (idle nodes), ``webapp.model``, the sources'
  queries (the memory held), ``jobreport_common.units`` and the rest come in by
  themselves, and a module a detector starts to import comes in with it;
- left out, and not followed, are the layers that only show or send a report
  (``LEFT_OUT``: ``webapp.renderers``, ``webapp.web``, ``webapp.mail``, ``webapp.cli``) and
  imports under ``if TYPE_CHECKING:``, which never run. A module imported by name at run
  time (``importlib.import_module``) is not seen; none of the verdict's modules imports
  one of the project's so (``tests/test_rules_version.py`` compares the set with what
  importing them runs);
- with them, the data files shipped beside them (``DATA``: ``*.csv``, the carbon
  intensities behind the CO2e figure a site rule may test).

The version is the first 12 hex digits of a SHA-256 over, in path order, each file's path
in the package (``webapp/report/peak.py``) and bytes (line ends as ``\\n``), then each
threshold's name and ``repr`` of its default in table order. The files are read from the
installed packages (``importlib.resources``); no absolute path, time or host goes in, so
the same sources give the same version on every machine, from a checkout or the wheel.
The cost, a read of some hundred files and a parse of their import statements, is
paid once, when ``webapp.detectors`` loads.

**The policy version** (``coverage.policy_version``) is the site's: the policy
directory's version (``Policy.version``: its ``*.toml`` files' names and bytes, what
``jobreport policy check`` prints) and the settings in effect that change a verdict
(``overrides_in_effect``: each detector threshold JOBREPORT_THRESHOLDS sets to other than
its default, and JOBREPORT_MIN_COVERAGE when not the default). With none of those
settings it is the directory's version itself; with some, 12 hex digits of a SHA-256 over
that version and each setting's name and value. No directory and no such setting: null,
the code's defaults alone judged the job.

``code_version`` and ``policy_version`` are pure (sources in, version out); reading the
files is ``code_sources``'s.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import NamedTuple

from webapp.settings import Settings
from webapp.thresholds import DETECTORS, Thresholds

DIGITS = 12
# The project's packages a verdict's module may come from (the exporters and mgmt are
# other deployables: the web app never imports them).
PROJECT = ("webapp", "jobreport_common")
# Every module of these is a root: the judging, and the figures judged.
ROOTS = ("webapp.detectors", "webapp.report")
# What only shows or sends a report: neither versioned nor followed.
LEFT_OUT = ("webapp.renderers", "webapp.web", "webapp.mail", "webapp.cli")
# Data files beside a versioned package's modules that a figure is read from.
DATA = (".csv",)

Source = tuple[str, bytes]  # (path in the packages, e.g. "webapp/report/peak.py"; bytes)


class Module(NamedTuple):
    path: str  # "webapp/report/peak.py", "webapp/report/__init__.py"
    source: bytes

    @property
    def is_package(self) -> bool:
        return self.path.endswith("/__init__.py")


Reader = Callable[[str], Module | None]  # a module's name -> its source; None: not ours


# An import statement at the start of a line (a parenthesized list may span lines), and
# an ``if TYPE_CHECKING:`` block: its line and the more indented (or blank) ones after it.
IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import(?:[ \t]*\([^)]*\)|[^\n]*)"
                    rb"|import[ \t]+[^\n]*)", re.M)
TYPE_CHECKING_BLOCK = re.compile(
    rb"^([ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[^\n]*\n"
    rb"(?:(?:\1[ \t]+[^\n]*|[ \t\r]*)\n)*", re.M)


def imported(name: str, module: Module) -> set[str]:
    """The absolute names ``module`` (called ``name``) imports when it runs, at module
    level or in a function, not under ``if TYPE_CHECKING:``: ``import a.b`` gives
    ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (a module or not: the reader
    tells); relative imports resolved. Each import statement is found by its line and
    parsed alone, a twentieth of the time a parse of the whole file takes; a line of a
    string that reads as an import counts too (a module more, never one less)."""
    package = name if module.is_package else name.rpartition(".")[0]
    source = TYPE_CHECKING_BLOCK.sub(b"", module.source)
    out: set[str] = set()
    for match in IMPORT.finditer(source):
        try:
            statements = ast.parse(match.group().strip()).body
        except SyntaxError:  # not a statement: a string's line
            continue
        for node in statements:
            if isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                out.add(base)
                out.update(f"{base}.{alias.name}" for alias in node.names
                           if alias.name != "*")
    return out


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _left_out(name: str) -> bool:
    return (name.split(".")[0] not in PROJECT
            or any(name == p or name.startswith(p + ".") for p in LEFT_OUT))


def verdict_modules(roots: Iterable[str], read: Reader) -> dict[str, Module]:
    """``roots`` and every project module they import, transitively, with the packages
    above each; not those ``LEFT_OUT`` nor what only they import. Pure given ``read``."""
    found: dict[str, Module] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found or _left_out(name):
            continue
        module = read(name)
        if module is None:  # a name imported from a module, not a module
            continue
        found[name] = module
        todo += _parents(name)
        todo += imported(name, module)
    return found


def _base(top: str, root: Traversable | Path | None) -> Traversable | Path:
    return resources.files(top) if root is None else root / top


def project_reader(root: Traversable | Path | None = None) -> Reader:
    """Reads the project's modules from the installed packages (or from ``root``, a
    folder holding copies of them)."""
    def read(name: str) -> Module | None:
        top, *rest = name.split(".")
        if top not in PROJECT:
            return None
        folder = _base(top, root)
        for part in rest[:-1]:
            folder = folder / part
        candidates = ([("__init__.py",)] if not rest
                      else [(rest[-1] + ".py",), (rest[-1], "__init__.py")])
        for candidate in candidates:
            f = folder
            for part in candidate:
                f = f / part
            if f.is_file():
                return Module("/".join([top, *rest[:-1], *candidate]), f.read_bytes())
        return None
    return read


def package_modules(package: str, root: Traversable | Path | None = None) -> list[str]:
    """The names of every module of ``package`` and of its subpackages."""
    top, *rest = package.split(".")
    folder = _base(top, root)
    for part in rest:
        folder = folder / part
    names = []
    for f in folder.iterdir():
        if f.is_file() and f.name.endswith(".py"):
            stem = f.name[:-3]
            names.append(package if stem == "__init__" else f"{package}.{stem}")
        elif f.is_dir() and (f / "__init__.py").is_file():
            names += package_modules(f"{package}.{f.name}", root)
    return sorted(names)


def code_sources(root: Traversable | Path | None = None) -> list[Source]:
    """(path, bytes) of every file a verdict rests on (``verdict_modules`` from every
    module of ``ROOTS``, and the ``DATA`` files beside them), in path order. Read from
    the installed packages, or from ``root``, a folder holding copies of them. No
    sources (an install that ships only bytecode) is an error: a version derived without
    them would not change with the rules."""
    roots = [name for package in ROOTS for name in package_modules(package, root)]
    modules = verdict_modules(roots, project_reader(root))
    sources = {m.path: m.source for m in modules.values()}
    for m in modules.values():
        if m.is_package:
            folder = _base(m.path.split("/")[0], root)
            for part in m.path.split("/")[1:-1]:
                folder = folder / part
            folder_path = m.path.rpartition("/")[0]
            sources.update((f"{folder_path}/{f.name}", f.read_bytes())
                           for f in folder.iterdir()
                           if f.is_file() and f.name.endswith(DATA))
    if "webapp/detectors/__init__.py" not in sources:
        raise RuntimeError(f"{root or 'webapp'}: the detectors' sources are missing; the "
                           "rules' version is derived from them")
    return sorted(sources.items())


def threshold_defaults(cls: type = Thresholds) -> list[tuple[str, str]]:
    """(name, repr of the default) of every threshold of ``cls``, in table order."""
    return [(f.name, repr(f.default)) for f in dataclasses.fields(cls)
            if "unit" in f.metadata]


def code_version(sources: Iterable[Source], defaults: Iterable[tuple[str, str]]) -> str:
    """The version of these sources (path, bytes) and threshold defaults."""
    digest = hashlib.sha256()
    for path, data in sources:
        data = data.replace(b"\r\n", b"\n")
        digest.update(f"source {path} {len(data)}\n".encode())
        digest.update(data)
    for name, default in defaults:
        digest.update(f"threshold {name} {default}\n".encode())
    return digest.hexdigest()[:DIGITS]


MIN_COVERAGE = Settings().min_coverage  # JOBREPORT_MIN_COVERAGE's default


def overrides_in_effect(thresholds: Thresholds,
                        min_coverage: float = MIN_COVERAGE) -> list[tuple[str, str]]:
    """(name, repr of the value) of each setting in force that changes a verdict: every
    detector threshold of ``thresholds`` (the settings', JOBREPORT_THRESHOLDS, not one
    job's under the policy) away from its default, in table order, then
    ``min_coverage`` (JOBREPORT_MIN_COVERAGE) away from its own."""
    defaults = Thresholds()
    out = [(name, repr(value)) for name, value in thresholds.part(DETECTORS).items()
           if value != getattr(defaults, name)]
    if min_coverage != MIN_COVERAGE:
        out.append(("min_coverage", repr(float(min_coverage))))
    return out


def policy_version(directory: str | None, overrides: Iterable[tuple[str, str]]) -> str | None:
    """The site's policy version: the policy directory's (``Policy.version``; None: no
    policy directory) with these settings in effect (``overrides_in_effect``). Without
    any setting it is the directory's own; None when there is neither."""
    overrides = list(overrides)
    if not overrides:
        return directory
    digest = hashlib.sha256()
    digest.update(f"policy {directory or '-'}\n".encode())
    for name, value in overrides:
        digest.update(f"setting {name} {value}\n".encode())
    return digest.hexdigest()[:DIGITS]
