"""The rules' version is derived from the detectors' sources and the thresholds' defaults:
a change to either changes it, nothing else does (no path, time, host or hash seed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from webapp.detectors import RULES_VERSION
from webapp.detectors.rules_version import (
    DIGITS,
    detector_sources,
    rules_version,
    threshold_defaults,
)
from webapp.thresholds import DETECTORS, RATIO, Thresholds, threshold

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "webapp" / "detectors"


@pytest.fixture
def copy(tmp_path) -> Path:
    """The detectors' sources copied elsewhere (no __pycache__)."""
    out = tmp_path / "detectors"
    out.mkdir()
    for f in PACKAGE.glob("*.py"):
        shutil.copyfile(f, out / f.name)
    return out


def version_of(root: Path, cls: type = Thresholds) -> str:
    return rules_version(detector_sources(root), threshold_defaults(cls))


def test_the_version_is_the_same_computed_twice_and_from_a_copy(copy):
    again = rules_version(detector_sources(), threshold_defaults())
    assert RULES_VERSION == again == version_of(PACKAGE) == version_of(copy)
    assert len(RULES_VERSION) == DIGITS and int(RULES_VERSION, 16) >= 0


def test_another_process_elsewhere_gets_the_same_version(tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", "from webapp.detectors import RULES_VERSION; print(RULES_VERSION)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == RULES_VERSION


def test_a_changed_detector_source_changes_the_version(copy):
    before = version_of(copy)
    source = copy / "gpu_idle.py"
    source.write_text(source.read_text() + "\n# one more line\n")
    assert version_of(copy) != before


@pytest.mark.parametrize("change", ["add", "remove", "rename"])
def test_adding_removing_or_renaming_a_detector_file_changes_the_version(copy, change):
    before = version_of(copy)
    if change == "add":
        (copy / "new_rule.py").write_text('"""A new rule."""\n')
    elif change == "remove":
        (copy / "short_job.py").unlink()
    else:
        (copy / "short_job.py").rename(copy / "short_jobs.py")
    assert version_of(copy) != before


def test_line_ends_and_other_files_do_not_change_the_version(copy):
    before = version_of(copy)
    source = copy / "gpu_idle.py"
    source.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    (copy / "notes.txt").write_text("not a source\n")
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "gpu_idle.cpython-311.pyc").write_bytes(b"\0")
    assert version_of(copy) == before


def test_a_changed_threshold_default_changes_the_version():
    @dataclass(frozen=True)
    class Changed(Thresholds):
        gpu_idle: float = threshold(0.02, RATIO, "A GPU below this mean utilisation is idle.",
                                    DETECTORS)

    assert Thresholds().gpu_idle == 0.01 and Changed().gpu_idle == 0.02
    assert version_of(PACKAGE, Changed) != version_of(PACKAGE) == RULES_VERSION


def test_every_threshold_of_the_table_goes_in():
    names = [name for name, _ in threshold_defaults()]
    assert "gpu_idle" in names and "cpu_efficiency_low" in names
    assert "overridden" not in names  # the site's overrides are recorded beside it


def test_an_install_without_the_sources_is_refused(tmp_path):
    (tmp_path / "__init__.cpython-311.pyc").write_bytes(b"\0")
    with pytest.raises(RuntimeError, match="sources are missing"):
        detector_sources(tmp_path)


def test_the_docs_say_how_the_version_is_derived():
    findings = (ROOT / "docs" / "findings.md").read_text()
    assert "webapp/detectors/rules_version.py" in findings and "SHA-256" in findings
    assert "derived from the detectors' sources" in (ROOT / "docs" / "json-schema.md").read_text()
