"""How many of Monarch's own public-API tests pass on mesh_client with only the import changed.

Reads the tests that ship in the torchmonarch 0.7 wheel (site-packages ``tests/``; nothing of
them is copied into this repository), keeps the test functions that use only Monarch's public
actor API, runs them once on torchmonarch and once with ``monarch.actor`` / ``monarch.spmd``
imports rewritten to ``mesh_client.actor`` / ``mesh_client.spmd``, and counts the tests that pass
on mesh_client among those that pass on torchmonarch.

A test counts as public-API when every name it reaches (its body, decorators, fixtures and the
module-level helpers they use, transitively) that comes from a ``monarch`` module comes from
``monarch.actor`` or ``monarch.spmd``; ``SupervisionError`` and ``MeshFailure``, which Monarch's
tests import from the Rust bindings, count as public too. Other monarch imports stay as written
(they name torchmonarch internals that the selected tests do not use).

    python benchmarks/monarch_api_tests.py                 # table
    python benchmarks/monarch_api_tests.py --json          # JSON
    python benchmarks/monarch_api_tests.py --files test_supervision_hierarchy.py
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

PUBLIC_MODULES = {"monarch.actor": "mesh_client.actor", "monarch.spmd": "mesh_client.spmd"}
EXTRA_PUBLIC = {"SupervisionError": "mesh_client.actor"}  # Monarch's tests import it from the bindings
FILE_TIMEOUT = int(os.environ.get("HARNESS_FILE_TIMEOUT", "900"))  # seconds per test file and run


def wheel_tests() -> Path:
    spec = importlib.util.find_spec("monarch")
    if spec is None or spec.origin is None:
        raise SystemExit("torchmonarch is not installed: pip install 'procmesh[bench]' (torchmonarch==0.7.0)")
    tests = Path(spec.origin).parent.parent / "tests"
    if not (tests / "conftest.py").exists():
        raise SystemExit(f"no Monarch tests next to the wheel at {tests}")
    return tests


# Selecting public-API tests ----------------------------------------------------------------


def public_exports() -> dict[str, str]:
    """Every name Monarch's public modules export -> the mesh_client module that should give it."""
    import importlib

    out = dict(EXTRA_PUBLIC)
    for module, ours in PUBLIC_MODULES.items():
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")]):
            out.setdefault(name, ours)
    return out


def _is_monarch(module: str | None) -> bool:
    return bool(module) and str(module).split(".")[0] == "monarch"


def _bindings(tree: ast.Module, public: dict[str, str]) -> tuple[set[str], set[str]]:
    """Names bound by monarch imports: (private ones, public ones). A name Monarch exports
    publicly is public wherever a test imports it from."""
    private: set[str] = set()
    public_bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_monarch(node.module):
            for alias in node.names:
                (public_bound if alias.name in public else private).add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_monarch(alias.name) and alias.asname:
                    (public_bound if alias.name in PUBLIC_MODULES else private).add(alias.asname)
    return private, public_bound


def _monarch_attributes(node: ast.AST) -> list[str]:
    """Dotted ``monarch.x.y`` chains spelled out through the ``monarch`` name."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            chain = []
            cur: ast.AST = sub
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "monarch":
                out.append("monarch." + ".".join(reversed(chain)))
    return out


def public_tests(path: Path, public: dict[str, str]) -> list[str]:
    """Test ids (``test_x`` or ``Class::test_x``) of ``path`` that use Monarch's actor API and
    nothing of Monarch beyond its public names."""
    tree = ast.parse(path.read_text())
    private, public_bound = _bindings(tree, public)
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = node

    def tainted(root: ast.AST) -> bool:
        """True if ``root`` reaches a private monarch name, or no public one at all."""
        seen: set[str] = set()
        todo = [root]
        reached_public = False
        while todo:
            node = todo.pop()
            for dotted in _monarch_attributes(node):
                if any(dotted.startswith(m + ".") for m in PUBLIC_MODULES):
                    reached_public = True
                elif not any(dotted == m + "" or m.startswith(dotted) for m in PUBLIC_MODULES):
                    return True
            for sub in ast.walk(node):
                names = []
                if isinstance(sub, ast.Name):
                    names.append(sub.id)
                elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.extend(a.arg for a in sub.args.args)  # fixtures by parameter name
                for name in names:
                    if name in private:
                        return True
                    reached_public = reached_public or name in public_bound
                    if name in defs and name not in seen:
                        seen.add(name)
                        todo.append(defs[name])
        return not reached_public

    selected = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if not tainted(node):
                selected.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test") and not tainted(item):
                    selected.append(f"{node.name}::{item.name}")
    return selected


# Running -----------------------------------------------------------------------------------

SELECT_PLUGIN = '''
import json, os
_WANT = json.loads(os.environ["HARNESS_SELECTED"])
def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        base = item.nodeid.split("[")[0]
        (keep if base in _WANT else drop).append(item)
    items[:] = keep
    config.hook.pytest_deselected(items=drop)
'''


def rewrite_imports(text: str, public: dict[str, str]) -> str:
    """Take every public Monarch name from mesh_client instead; leave the rest as written."""
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_monarch(node.module) and node.end_lineno is not None:
            indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
            ours: dict[str, list[str]] = {}
            theirs = []
            for alias in node.names:
                text_alias = alias.name + (f" as {alias.asname}" if alias.asname else "")
                if alias.name in public:
                    ours.setdefault(public[alias.name], []).append(text_alias)
                else:
                    theirs.append(text_alias)
            new = [f"{indent}from {module} import {', '.join(names)}\n" for module, names in ours.items()]
            if theirs:
                new.append(f"{indent}from {node.module} import {', '.join(theirs)}\n")
            edits.append((node.lineno - 1, node.end_lineno, new))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    out = "".join(lines)
    for module, ours_module in PUBLIC_MODULES.items():
        out = re.sub(rf"\b{re.escape(module)}\b", ours_module, out)
    return out


def prepare(src: Path, dest: Path, files: list[str], public: dict[str, str] | None) -> None:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "test_*.py"))
    for name in files:
        text = (src / name).read_text()
        if public is not None:
            text = rewrite_imports(text, public)
        (dest / name).write_text(text)
    (dest / "harness_select.py").write_text(SELECT_PLUGIN)


def run(dest: Path, selected: dict[str, list[str]], extra_path: list[str]) -> dict[str, str]:
    """Outcome ('passed', 'failed', 'skipped', 'error') of each selected test id, file by file."""
    outcomes: dict[str, str] = {}
    for name, tests in selected.items():
        want = [f"{name}::{t}" for t in tests]
        report = dest / f"{name}.xml"
        env = dict(os.environ, HARNESS_SELECTED=json.dumps(want))
        env["PYTHONPATH"] = os.pathsep.join([str(dest), *extra_path, env.get("PYTHONPATH", "")])
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "harness_select", "-p", "no:cacheprovider", f"--junitxml={report}", name]
        # Its own session, output to a file: on timeout the whole tree goes (tests start
        # subprocesses that would otherwise keep a pipe, and this loop, waiting).
        with open(dest / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=dest, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=FILE_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        found = _junit(report) if report.exists() else {}
        for test_id in want:
            results = [v for k, v in found.items() if k.split("[")[0] == test_id]
            if not results:
                outcomes[test_id] = "error"
            else:
                outcomes[test_id] = "passed" if all(r == "passed" for r in results) else next(r for r in results if r != "passed")
    return outcomes


def _junit(report: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        classname = case.get("classname", "")
        parts = classname.split(".")
        module = parts[0] + ".py"
        cls = "::".join(parts[1:])
        test_id = f"{module}::{cls + '::' if cls else ''}{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
            elif child.tag == "skipped":
                status = "skipped"
        out[test_id] = status
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--files", nargs="*", help="only these test files of the wheel")
    parser.add_argument(
        "--ours", action="append", help="a procmesh checkout whose mesh_client to test (repeatable; default: this one)"
    )
    parser.add_argument("--monarch-outcomes", help="a JSON file: reuse torchmonarch's outcomes from it, or write them there")
    args = parser.parse_args()
    src = wheel_tests()
    names = args.files or sorted(p.name for p in src.glob("test_*.py"))
    public = public_exports()
    selected = {n: t for n in names if (t := public_tests(src / n, public))}
    checkouts = args.ours or [str(Path(__file__).resolve().parent.parent)]
    with tempfile.TemporaryDirectory(prefix="monarch-api-tests-") as tmp:
        on_monarch = Path(tmp) / "monarch"
        cached = Path(args.monarch_outcomes) if args.monarch_outcomes else None
        if cached is not None and cached.exists():
            theirs = json.loads(cached.read_text())
        else:
            prepare(src, on_monarch, list(selected), None)
            theirs = run(on_monarch, selected, [])
            if cached is not None:
                cached.write_text(json.dumps(theirs, indent=1))
        ours_by_checkout = {}
        for i, repo in enumerate(checkouts):
            on_ours = Path(tmp) / f"mesh_client{i}"
            prepare(src, on_ours, list(selected), public)
            ours_by_checkout[repo] = run(on_ours, selected, [repo, os.path.join(repo, "operator")])
    baseline = [t for t, o in theirs.items() if o == "passed"]
    result: dict[str, object] = {"selected": sum(len(t) for t in selected.values()), "pass_on_torchmonarch": len(baseline)}
    for repo, ours in ours_by_checkout.items():
        passing = [t for t in baseline if ours.get(t) == "passed"]
        result[repo] = {
            "pass_on_mesh_client": len(passing),
            "per_file": {
                n: {
                    "selected": len(t),
                    "torchmonarch": sum(theirs[f"{n}::{x}"] == "passed" for x in t),
                    "mesh_client": sum(f"{n}::{x}" in passing for x in t),
                }
                for n, t in selected.items()
            },
            "failing_on_mesh_client": sorted(set(baseline) - set(passing)),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for repo in checkouts:
        row_set = result[repo]
        assert isinstance(row_set, dict)
        print(f"\nmesh_client from {repo}")
        print(f"{'file':45} {'public':>6} {'monarch':>8} {'ours':>5}")
        for n, row in row_set["per_file"].items():
            print(f"{n:45} {row['selected']:6} {row['torchmonarch']:8} {row['mesh_client']:5}")
        print(f"{row_set['pass_on_mesh_client']} of {len(baseline)} public-API tests that pass on torchmonarch 0.7 pass on mesh_client")


if __name__ == "__main__":
    main()
