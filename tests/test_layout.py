"""The house: layers hold (import-linter), no import cycle, the one ADDR:PORT parser,
`jobreport serve` on IPv6 loopback, one name for each test file."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
import requests

from jobreport_common.bind import parse_bind
from tests.helpers.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("webapp", "jobs_exporter", "slurm_exporter", "mgmt", "jobreport_common")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def imports(module: str):
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, imports(root))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, imports(child)))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_anywhere():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "__init__.py").write_text("")
    (tmp_path / "loop" / "a.py").write_text("from loop import b\n")
    (tmp_path / "loop" / "b.py").write_text("from loop import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("loop")) == [["loop.a", "loop.b"]]


def _unexplained_ignores(text: str) -> list[int]:
    """Lines (1-based) holding a ``# type: ignore`` with no reason: a comment after it on
    the line, or a comment line right above it."""
    lines = text.splitlines()
    return [i + 1 for i, line in enumerate(lines) if "# type: ignore" in line
            and "#" not in line.split("# type: ignore", 1)[1]
            and not (i and lines[i - 1].strip().startswith("#"))]


def test_every_type_ignore_says_why():
    bare = [f"{path.relative_to(ROOT)}:{n}" for pkg in PACKAGES
            for path in sorted((ROOT / pkg).rglob("*.py"))
            for n in _unexplained_ignores(path.read_text())]
    assert bare == [], "say why mypy is wrong there, on the line above"


def test_an_ignore_without_a_reason_is_found():
    text = ("x = f()  # type: ignore[arg-type]\n"
            "# the stub is wrong: f takes any iterable\ny = f()  # type: ignore[arg-type]\n"
            "z = f()  # type: ignore[arg-type]  # the stub again\n")
    assert _unexplained_ignores(text) == [1]


def test_import_contracts_hold():
    run = subprocess.run([str(LINT_IMPORTS)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "broken" not in run.stdout.lower().replace("0 broken", "")


def test_a_cross_layer_import_breaks_the_contracts(tmp_path):
    # A copy of the tree where a detector imports the report service above it.
    for name in (*PACKAGES, "pyproject.toml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    bad = tmp_path / "webapp" / "detectors" / "gpu_idle.py"
    bad.write_text(bad.read_text() + "\nimport webapp.report.service  # noqa: E402,F401\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode != 0
    assert "webapp.detectors is not allowed to import webapp.report" in run.stdout


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:8000", ("127.0.0.1", 8000)),
    ("[::1]:8000", ("::1", 8000)),
    (":8000", ("0.0.0.0", 8000)),
    ("node1.example.org:9306", ("node1.example.org", 9306)),
])
def test_parse_bind(text, expected):
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["8000", "host:", "host:0", "host:65536", "[::1:8000",
                                  "::1:8000", "a b:80", "host:http"])
def test_parse_bind_refuses(text):
    with pytest.raises(ValueError):
        parse_bind(text)


def _free_port6() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def test_serve_on_ipv6_loopback(tmp_path):
    port = _free_port6()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    # JOBREPORT_CONFIG empty: no machine's /etc/jobreport/jobreport.conf (a stack's) read
    env.update(JOBREPORT_BIND=f"[::1]:{port}", JOBREPORT_SECRET_KEY="x" * 40,
               JOBREPORT_OUTBOX=str(tmp_path / "outbox.sqlite"), JOBREPORT_CONFIG="")
    jobreport = Path(sys.executable).parent / "jobreport"
    proc = subprocess.Popen([str(jobreport), "serve"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def healthz() -> list[requests.Response] | None:
            try:
                return [requests.get(f"http://[::1]:{port}/healthz", timeout=2)]
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read().decode()
                return None

        (answer,) = wait_for(healthz, 20, "jobreport serve answering on ::1", every=0.2)
        assert answer.status_code == 200 and answer.json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_every_package_ships_in_the_wheel():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {str(p.parent.relative_to(ROOT)).replace("/", ".")
             for name in PACKAGES for p in (ROOT / name).rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages"


def test_a_test_file_name_says_which_one_it_is():
    """No two test files share a name across tests/, tests/stack/ and tests/vm/: the stack's
    test of what a unit test covers too is ``<name>_live.py``."""
    seen: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_every_name_is_imported_from_the_module_that_defines_it():
    """No ``from A import x as x`` re-export kept for earlier callers: one place per name."""
    import ast

    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names
                              if a.asname == a.name]
    assert found == []
