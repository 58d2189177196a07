"""The code's version covers every module a verdict rests on, found from the imports, and
changes with any of them; the site policy's version covers its files and the settings that
change a verdict. Nothing else changes either (no path, time, host or hash seed)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.reports import sample_report
from webapp.detectors import RULES_VERSION
from webapp.detectors.rules_version import (
    DIGITS,
    LEFT_OUT,
    MIN_COVERAGE,
    Module,
    code_sources,
    code_version,
    imported,
    overrides_in_effect,
    policy_version,
    threshold_defaults,
    verdict_modules,
)
from webapp.json_codec import decode, encode
from webapp.renderers import text
from webapp.renderers.sections import audit_rows
from webapp.report.coverage import audited
from webapp.thresholds import DETECTORS, RATIO, Thresholds, parse_thresholds, threshold

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("webapp", "jobreport_common")


@pytest.fixture(scope="module")
def sources() -> list[tuple[str, bytes]]:
    return code_sources()


@pytest.fixture
def copy(tmp_path) -> Path:
    """The project's packages copied elsewhere (sources and data, no __pycache__)."""
    out = tmp_path / "site"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, out / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return out


def version_of(root: Path | None = None, cls: type = Thresholds) -> str:
    return code_version(code_sources(root), threshold_defaults(cls))


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def versioned_modules(sources: list[tuple[str, bytes]]) -> set[str]:
    return {module_name(p) for p, _ in sources if p.endswith(".py")}


def replaced(sources: list[tuple[str, bytes]], path: str, data: bytes | None
             ) -> list[tuple[str, bytes]]:
    """``sources`` with ``path``'s bytes replaced (None: left out)."""
    assert path in dict(sources)
    return [(p, data if p == path else d) for p, d in sources
            if p != path or data is not None]


# -- the code's version ---------------------------------------------------------------------
def test_the_version_is_the_same_computed_twice_and_from_a_copy(copy):
    assert RULES_VERSION == version_of() == version_of(copy)
    assert len(RULES_VERSION) == DIGITS and int(RULES_VERSION, 16) >= 0


def test_another_process_elsewhere_gets_the_same_version(tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", "from webapp.detectors import RULES_VERSION; print(RULES_VERSION)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == RULES_VERSION


def test_the_files_named_as_verdicts_rest_on_are_versioned(sources):
    paths = {p for p, _ in sources}
    for path in ["webapp/report/peak.py", "webapp/report/precedence.py",
                 "webapp/report/coverage.py", "webapp/report/build.py", "webapp/states.py",
                 "webapp/thresholds.py", "webapp/unused.py", "webapp/model.py",
                 "webapp/settings.py", "webapp/detectors/policy.py",
                 "webapp/detectors/measures.py", "webapp/detectors/rules_version.py",
                 "webapp/sources/prometheus_queries.py", "jobreport_common/units.py",
                 "webapp/__init__.py", "webapp/report/__init__.py",
                 "webapp/carbon_intensity.csv"]:
        assert path in paths, path
    assert {f"webapp/detectors/{f.name}" for f in (ROOT / "webapp/detectors").glob("*.py")} \
        <= paths
    assert not [p for p in paths if p.startswith(("webapp/renderers/", "webapp/web/",
                                                  "webapp/mail/", "webapp/cli/"))]
    assert [p for p, _ in sources] == sorted(paths)  # in path order, once each


IMPORTS = r"""
import builtins, importlib, importlib.util, json, pkgutil, sys

edges = set()
real = builtins.__import__


def record(name, globals=None, locals=None, fromlist=(), level=0):
    module = real(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    if importer.split(".")[0] in ("webapp", "jobreport_common"):
        target = (importlib.util.resolve_name("." * level + name, globals["__package__"])
                  if level else name)
        edges.add((importer, target))
        edges.update((importer, f"{target}.{item}") for item in fromlist or ()
                     if f"{target}.{item}" in sys.modules)
    return module


builtins.__import__ = record
roots = []
for package in ("webapp.detectors", "webapp.report"):
    roots.append(package)
    path = importlib.import_module(package).__path__
    roots += [m.name for m in pkgutil.walk_packages(path, package + ".")]
for name in roots:
    importlib.import_module(name)
print(json.dumps({"roots": roots, "edges": sorted(edges)}))
"""


def test_every_module_importing_the_verdicts_loads_is_versioned(sources, tmp_path):
    """The closure found independently of the version's scan: every import statement that
    runs while the detectors' and the report's modules load, recorded by a hook on
    ``__import__`` in a fresh process, followed from them (not through what only shows or
    sends a report), with the packages above each module."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = json.loads(subprocess.run(
        [sys.executable, "-c", IMPORTS], cwd=tmp_path, env=env, capture_output=True,
        text=True, check=True, timeout=120).stdout)
    edges: dict[str, set[str]] = {}
    for importer, target in found["edges"]:
        edges.setdefault(importer, set()).add(target)
    reached, todo = set(), list(found["roots"])
    while todo:
        name = todo.pop()
        if (name in reached or name.split(".")[0] not in PACKAGES
                or any(name == p or name.startswith(p + ".") for p in LEFT_OUT)):
            continue
        reached.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += edges.get(name, ())
    reached = {n for n in reached if (ROOT / n.replace(".", "/")).is_dir()
               or (ROOT / (n.replace(".", "/") + ".py")).is_file()}  # modules, not names
    assert {"webapp.report.peak", "webapp.report.precedence", "webapp.states",
            "webapp.thresholds", "webapp.unused", "jobreport_common.units"} <= reached
    assert not reached - versioned_modules(sources), "left out of the code's version"


def test_a_changed_byte_of_any_versioned_file_changes_the_version(sources):
    """Pure: the sources are passed in; no file is touched."""
    defaults = threshold_defaults()
    before = code_version(sources, defaults)
    assert before == RULES_VERSION
    peak = dict(sources)["webapp/report/peak.py"]
    for changed in [replaced(sources, "webapp/report/peak.py", peak + b"\n# one more line\n"),
                    replaced(sources, "webapp/report/peak.py", peak.replace(b"def ", b"def  ", 1)),
                    replaced(sources, "webapp/report/precedence.py", None),
                    replaced(sources, "webapp/states.py", dict(sources)["webapp/states.py"] + b"#"),
                    replaced(sources, "webapp/carbon_intensity.csv", b"")]:
        assert code_version(changed, defaults) != before
    renamed = [("webapp/report/peaks.py" if p == "webapp/report/peak.py" else p, d)
               for p, d in sources]
    assert code_version(renamed, defaults) != before


def test_a_changed_detector_source_on_disk_changes_the_version(copy):
    before = version_of(copy)
    source = copy / "webapp" / "detectors" / "gpu_idle.py"
    source.write_text(source.read_text() + "\n# one more line\n")
    assert version_of(copy) != before


@pytest.mark.parametrize("change", ["add", "remove", "rename"])
def test_adding_removing_or_renaming_a_detector_file_changes_the_version(copy, change):
    before = version_of(copy)
    detectors = copy / "webapp" / "detectors"
    if change == "add":
        (detectors / "new_rule.py").write_text('"""A new rule."""\n')
    elif change == "remove":
        (detectors / "short_job.py").unlink()
    else:
        (detectors / "short_job.py").rename(detectors / "short_jobs.py")
    assert version_of(copy) != before


def test_a_module_a_detector_starts_to_import_comes_in(copy):
    before = code_sources(copy)
    assert "webapp/opt_out_token.py" not in dict(before)
    source = copy / "webapp" / "detectors" / "gpu_idle.py"
    source.write_text(source.read_text() + "\n\ndef _later():\n"
                      "    from webapp import opt_out_token  # noqa\n")
    assert "webapp/opt_out_token.py" in dict(code_sources(copy))


def test_line_ends_renderers_and_other_files_do_not_change_the_version(copy):
    before = version_of(copy)
    source = copy / "webapp" / "detectors" / "gpu_idle.py"
    source.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    (copy / "webapp" / "detectors" / "notes.txt").write_text("not a source\n")
    (copy / "webapp" / "detectors" / "__pycache__").mkdir()
    (copy / "webapp" / "detectors" / "__pycache__" / "gpu_idle.cpython-311.pyc").write_bytes(b"\0")
    (copy / "webapp" / "renderers" / "text.py").write_text("# a new look\n")
    (copy / "webapp" / "cli" / "show.py").write_text("# a new command\n")
    assert version_of(copy) == before


def test_a_changed_threshold_default_changes_the_version(sources):
    @dataclass(frozen=True)
    class Changed(Thresholds):
        gpu_idle: float = threshold(0.02, RATIO, "A GPU below this mean utilisation is idle.",
                                    DETECTORS)

    assert Thresholds().gpu_idle == 0.01 and Changed().gpu_idle == 0.02
    assert (code_version(sources, threshold_defaults(Changed))
            != code_version(sources, threshold_defaults()) == RULES_VERSION)


def test_every_threshold_of_the_table_goes_in():
    names = [name for name, _ in threshold_defaults()]
    assert "gpu_idle" in names and "cpu_efficiency_low" in names
    assert "overridden" not in names  # the site's overrides are the policy's version


def test_an_install_without_the_sources_is_refused(tmp_path):
    for package in ("webapp/detectors", "webapp/report", "jobreport_common"):
        (tmp_path / package).mkdir(parents=True)
    (tmp_path / "webapp/detectors/__init__.cpython-311.pyc").write_bytes(b"\0")
    with pytest.raises(RuntimeError, match="sources are missing"):
        code_sources(tmp_path)


# -- which modules: the scan of the imports, pure -------------------------------------------
MODULES = {
    "webapp": b'"""The package."""\nfrom typing import TYPE_CHECKING\n'
              b"if TYPE_CHECKING:\n    from webapp.web import app\n",
    "webapp.detectors": b"from webapp.detectors import rule\nfrom . import helper as h\n",
    "webapp.detectors.rule": b"from webapp.states import DONE, ended\n"
                             b"import webapp.renderers.text\n\n"
                             b"def later():\n    from ..unused import (\n        idle,\n    )\n",
    "webapp.detectors.helper": b'"""Helps."""\n',
    "webapp.states": b"DONE = 1\n",
    "webapp.unused": b"import jobreport_common.units\nfrom webapp.also_used import T  # noqa\n",
    "webapp.renderers": b"",
    "webapp.renderers.text": b"from webapp import shown_only\n",
    "webapp.shown_only": b"",
    "webapp.web": b"", "webapp.web.app": b"",
    "webapp.also_used": b"",
    "jobreport_common": b"", "jobreport_common.units": b"GIB = 2**30\n",
}


def read(name: str) -> Module | None:
    if name not in MODULES:
        return None
    is_package = any(other.startswith(name + ".") for other in MODULES)
    path = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")
    return Module(path, MODULES[name])


def test_the_closure_follows_every_import_that_runs_and_no_other():
    found = verdict_modules(["webapp.detectors"], read)
    assert set(found) == {"webapp", "webapp.detectors", "webapp.detectors.rule",
                          "webapp.detectors.helper", "webapp.states", "webapp.unused",
                          "jobreport_common", "jobreport_common.units", "webapp.also_used"}
    assert found["webapp.detectors"].path == "webapp/detectors/__init__.py"


def test_imports_are_resolved_and_type_checking_ones_skipped():
    assert imported("webapp", read("webapp")) == {"typing", "typing.TYPE_CHECKING"}
    assert imported("webapp.detectors.rule", read("webapp.detectors.rule")) == {
        "webapp.states", "webapp.states.DONE", "webapp.states.ended",
        "webapp.renderers.text", "webapp.unused", "webapp.unused.idle"}
    crlf = Module("webapp/x.py", b"if TYPE_CHECKING:  # typing only\r\n    import a\r\n\r\n"
                                 b"    import b\r\nelse:\r\n    import c\r\nimport d; import e\r\n")
    assert imported("webapp.x", crlf) == {"c", "d", "e"}


# -- the site policy's version --------------------------------------------------------------
def test_the_policy_version_is_the_directory_s_without_settings_that_change_a_verdict():
    assert policy_version(None, []) is None  # no policy, the defaults: none
    assert policy_version("0123456789ab", []) == "0123456789ab"  # `policy check` prints it
    assert overrides_in_effect(Thresholds(), MIN_COVERAGE) == []
    # set to the default, or a threshold only the staff report or `watch` reads: no change
    same = parse_thresholds("T", "gpu_idle=0.01,min_core_hours=5")
    assert same.overridden and overrides_in_effect(same, MIN_COVERAGE) == []


def test_the_settings_that_change_a_verdict_change_the_policy_version():
    site = parse_thresholds("T", "cpu_efficiency_low=0.5,gpu_idle=0.02")
    assert overrides_in_effect(site) == [("gpu_idle", "0.02"), ("cpu_efficiency_low", "0.5")]
    assert overrides_in_effect(Thresholds(), 0.5) == [("min_coverage", "0.5")]
    versions = {policy_version(directory, overrides)
                for directory in (None, "0123456789ab", "ba9876543210")
                for overrides in ([], overrides_in_effect(site), [("gpu_idle", "0.03")],
                                  overrides_in_effect(Thresholds(), 0.5))}
    assert len(versions) == 12  # None among them: no directory, no setting
    again = policy_version("0123456789ab", overrides_in_effect(site))
    assert again == policy_version("0123456789ab", overrides_in_effect(site))
    assert again is not None and len(again) == DIGITS


def test_the_report_names_both_versions_side_by_side(tmp_path):
    site = parse_thresholds("T", "cpu_efficiency_low=0.5")
    report = audited(sample_report(), site, 0.8, policy_version="0123456789ab",
                     site_thresholds=site)
    a = report.audit
    assert a is not None and a.rules_version == RULES_VERSION
    assert a.policy_version == policy_version("0123456789ab", [("cpu_efficiency_low", "0.5")])
    # the job's thresholds under a policy's scope do not change the site's version
    scoped = dataclasses.replace(site, gpu_idle=0.2, overridden=site.overridden | {"gpu_idle"})
    under_scope = audited(sample_report(), scoped, 0.8, policy_version="0123456789ab",
                          site_thresholds=site).audit
    assert under_scope is not None and under_scope.policy_version == a.policy_version
    row = dict(audit_rows(report))["Rules' versions"]
    assert row == f"code {RULES_VERSION}, site policy {a.policy_version}"
    assert f"code {RULES_VERSION}, site policy {a.policy_version}" in " ".join(
        text.render(report, details=True, audit=True).split())
    coverage = encode(report)["coverage"]
    assert (coverage["rules_version"], coverage["policy_version"]) == (
        RULES_VERSION, a.policy_version)
    assert decode(encode(report)).audit == a
    plain = audited(sample_report(), Thresholds(), 0.8)
    assert plain.audit is not None and plain.audit.policy_version is None
    assert dict(audit_rows(plain))["Rules' versions"] == (
        f"code {RULES_VERSION}, site policy none (the defaults)")


def test_a_report_judged_under_a_policy_names_the_site_s_version_in_every_scope(tmp_path):
    """The settings' thresholds count, not the job's under the policy's scope."""
    from webapp.detectors import NAMES
    from webapp.detectors.policy import load
    from webapp.report.rejudge import judged
    from webapp.sources.gpu_metrics import JOBS

    (tmp_path / "site.toml").write_text(
        '[[override]]\npartition = "debug"\nthresholds = { cpu_efficiency_low = 0.3 }\n')
    policy = load(tmp_path, NAMES)
    site = parse_thresholds("T", "cpu_efficiency_low=0.5")
    versions = {judged(dataclasses.replace(sample_report(), partition=p), site, policy, 0.8,
                       JOBS).audit.policy_version for p in ("debug", "gpu")}
    assert versions == {policy_version(policy.version, [("cpu_efficiency_low", "0.5")])}
    plain = judged(sample_report(), Thresholds(), policy, 0.8, JOBS).audit
    assert plain is not None and plain.policy_version == policy.version


def test_the_docs_say_how_the_versions_are_derived():
    findings = (ROOT / "docs" / "findings.md").read_text()
    assert "webapp/detectors/rules_version.py" in findings and "SHA-256" in findings
    schema = (ROOT / "docs" / "json-schema.md").read_text()
    assert "every module a verdict rests on" in schema and "JOBREPORT_THRESHOLDS" in schema
    assert "JOBREPORT_THRESHOLDS" in (ROOT / "docs" / "policy.md").read_text()
