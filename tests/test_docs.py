"""The documentation: a short README, links that resolve, test files that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# The pages a link check covers, and every page that names test files.
LINKED = (README, *sorted((ROOT / "docs").glob("*.md")))
DOCS = (*LINKED, ROOT / "jobs_exporter" / "README.md", ROOT / "bench" / "README.md",
        ROOT / "slurm_exporter" / "README.md", ROOT / "SECURITY.md")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# `tests/stack/test_x.py`, `tests/test_exporter_*.py`, or a bare `test_x.py`.
TEST_PATH = re.compile(r"\b((?:tests/[\w/]*)?test_[\w*]+\.py)\b")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_docs_folder_exists():
    assert len(LINKED) > 1, "docs/*.md holds what the README leaves out"


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_and_headings_that_exist(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_test_files_named_in_the_docs_exist(page):
    missing = []
    for name in set(TEST_PATH.findall(page.read_text())):
        if name.startswith("tests/"):
            found = list(ROOT.glob(name))
        else:  # a bare file name: anywhere under tests/
            found = list((ROOT / "tests").rglob(name))
        if not found:
            missing.append(name)
    assert not missing, f"{page.relative_to(ROOT)} names test files that do not exist: {missing}"


def test_slug_matches_githubs_anchors():
    assert slug("Settings (`JOBREPORT_EXPORTER_*`)") == "settings-jobreport_exporter_"
    assert slug("Login nodes: `jobreport` for every user") == "login-nodes-jobreport-for-every-user"
