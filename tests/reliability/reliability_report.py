"""The figures of docs/reliability.md: written by a run of the suites, rendered into the page.

A run of the suites with ``NBINFER_RELIABILITY_FIGURES=DIR`` writes its figures as JSON files in
DIR (``outcomes.json`` from the conftest: every test's outcome and time, the machine, the commit;
``fuzz.json``, ``faults.json``, ``soak.json`` from the suites). This script reads them and rewrites
the blocks between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in the page::

    NBINFER_RELIABILITY_FIGURES=/tmp/figures python -m pytest -p no:cacheprovider tests/reliability
    python tests/reliability/reliability_report.py /tmp/figures

The run's summary is kept in the page (a ``<!-- run: {...} -->`` comment), so the page can be
rendered again from the tree without a run (``--from-page``, after adding a corpus case or a fault
test) and ``test_reliability_page.py`` can check that the page's stable figures (corpus size and
breakdown, fuzz budget, fault cases, soak bounds) agree with the tree.

Imports the stdlib and, for their budgets and fault descriptions, the suites' modules beside it;
nothing here may import a test framework at module level (the conftest imports it).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PAGE = ROOT / "docs" / "reliability.md"
CORPUS = HERE / "bad_inputs.json"
FIGURES_ENV = "NBINFER_RELIABILITY_FIGURES"

#: The corpus's kinds, in the page's order: what they hold, and what the server answers.
KINDS = {
    "lenient": (
        'lenient JSON: `null`, `true`, `"1"`, `{}` in every numeric datatype; numbers, `null`,'
        " strings in BOOL; fractions in integer datatypes; numbers and lone surrogates in BYTES",
        "400 naming the input and the element",
    ),
    "range": (
        "values that do not fit the datatype (`1e39` in FP32, `70000` in FP16, `128` in INT8,"
        " `2**64` in UINT64, `1e400`; gRPC integers out of INT8 / UINT8)",
        "400 / INVALID_ARGUMENT (`out of range`)",
    ),
    "structure": (
        "malformed JSON and structure: truncated, empty, non-UTF-8, trailing garbage,"
        " 100,000-deep nesting, wrong field types, negative / boolean / float / overflowing"
        " shapes, counts that disagree with shapes, ragged data, duplicate / missing / unknown"
        " inputs and outputs; gRPC bytes that are not protobuf, truncated messages, unknown"
        " datatypes, the wrong contents field",
        "400 / INVALID_ARGUMENT",
    ),
    "parameters": (
        "bad parameters (`timeout`, `priority`, `binary_data_output`, `classification`)",
        "400 / INVALID_ARGUMENT naming the parameter",
    ),
    "binary": (
        "binary extension and gRPC raw contents: lying `Inference-Header-Content-Length`,"
        " truncated bodies, unclaimed bytes, sizes that disagree with shapes, negative / string /"
        " huge `binary_data_size`, BYTES lengths past the buffer, raw and typed contents mixed",
        "400 / INVALID_ARGUMENT",
    ),
    "names": (
        "routes and names: path traversal in model names (`..%2F`, `..`, NUL, 5,000 characters),"
        " unknown models and versions, wrong methods, traversal in load names, `file:` uploads"
        " and shared-memory keys",
        "404 / 405 / 400, NOT_FOUND / INVALID_ARGUMENT",
    ),
    "limits": (
        "limits: 2,000 headers, a 200 KB header, a 2 GB announced body, a non-numeric"
        " `Content-Length`",
        "431 / 431 / 413 / 400",
    ),
    "model-error": ("a raising model", "500 / INTERNAL with the model's message"),
}

BAD_INPUTS_TEST = "test_bad_inputs.py::test_bad_input_is_refused_and_the_server_stays_healthy"


# ------------------------------------------------------------------ writing figures (the suites)


def record(suite: str, key: str, value: Any) -> None:
    """Merge ``{key: value}`` into ``$NBINFER_RELIABILITY_FIGURES/<suite>.json`` (when set)."""
    folder = os.environ.get(FIGURES_ENV)
    if not folder:
        return
    path = Path(folder) / f"{suite}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = json.loads(path.read_text()) if path.exists() else {}
    figures[key] = value
    path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


def machine() -> dict[str, Any]:
    """Where and when a run ends: UTC time, CPU, cores, load, Python, the commit of the tree."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    for line in (cpuinfo.read_text() if cpuinfo.exists() else "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        if _git("status", "--porcelain", "--untracked-files=no"):
            commit += " with local changes"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load": round(os.getloadavg()[1], 1),  # the last 5 minutes: other work on the cores
        "python": platform.python_version(),
        "commit": commit,
    }


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


# ------------------------------------------------------------------ the tree's stable figures


def corpus() -> list[dict[str, Any]]:
    return list(json.loads(CORPUS.read_text()))


def fault_cases() -> list[tuple[str, str, str]]:
    """``(test name, fault, what happens)`` of every test in test_faults.py, from its docstring.

    Each docstring reads ``Fault: what happens.``; parsed, not imported, so that rendering the
    page needs no server and no nbinfer.
    """
    tree = ast.parse((HERE / "test_faults.py").read_text())
    cases = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            doc = " ".join((ast.get_docstring(node) or "").split())
            fault, _, outcome = doc.partition(": ")
            cases.append((node.name, fault, outcome))
    return cases


def module_constants(name: str) -> dict[str, Any]:
    """The literal module-level constants of a suite (its budget), read without importing it."""
    tree = ast.parse((HERE / name).read_text())
    found: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id.isupper() and node.value is not None:
            try:
                found[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


# ------------------------------------------------------------------ a run's summary


def summarize(folder: Path) -> dict[str, Any]:
    """The figures the page shows, from the files a run wrote."""

    def load(name: str) -> dict[str, Any]:
        path = folder / f"{name}.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    outcomes = load("outcomes")
    tests: dict[str, list[Any]] = outcomes.get("tests", {})
    ran: Counter[str] = Counter()
    prefix = BAD_INPUTS_TEST + "["
    for nodeid, (outcome, _) in tests.items():
        if nodeid.startswith(prefix):
            ran[outcome] += 1
    faults: dict[str, list[Any]] = {}  # a parametrized test's cases in one row
    for nodeid, (outcome, seconds) in tests.items():
        if nodeid.startswith("test_faults.py::"):
            name = nodeid.split("::", 1)[1].split("[")[0]
            previous, total = faults.get(name, ["passed", 0.0])
            faults[name] = [previous if outcome == "passed" else outcome, total + seconds]
    notes: dict[str, list[str]] = {}
    for key, note in sorted(load("faults").items()):
        notes.setdefault(key.split("[")[0], []).append(note)
    return {
        "machine": outcomes.get("machine", {}),
        "seconds": round(outcomes.get("seconds", 0.0)),
        "tests": dict(Counter(outcome for outcome, _ in tests.values())),
        "corpus": dict(ran),
        "fuzz": load("fuzz"),
        "faults": {
            name: [outcome, round(seconds, 1)] for name, (outcome, seconds) in faults.items()
        },
        "fault_notes": {name: "; ".join(texts) for name, texts in notes.items()},
        "soak": load("soak").get("figures", {}),
    }


# ------------------------------------------------------------------ rendering


def _n(value: float) -> str:
    return f"{value:,.0f}"


def render_run(run: dict[str, Any]) -> str:
    m = run["machine"]
    tests = ", ".join(f"{count} {outcome}" for outcome, count in sorted(run["tests"].items()))
    return (
        f"The figures on this page come from one run of `tests/reliability` on {m['date']}"
        f" (commit {m['commit']}), on a machine with {m['cores']} cores ({m['cpu']}; load average"
        f" {m['load']} over the run's last 5 minutes), Python {m['python']}: {tests} in"
        f" {run['seconds']} s. They are rewritten by"
        " `tests/reliability/reliability_report.py` from the figures that run wrote (see"
        " [Rerun longer](#rerun-longer)); a test checks that the page agrees with the tree.\n"
        f"<!-- run: {json.dumps(run, sort_keys=True)} -->"
    )


def render_corpus(run: dict[str, Any]) -> str:
    cases = corpus()
    by = Counter((case["kind"], case["transport"]) for case in cases)
    transports = Counter(case["transport"] for case in cases)
    xfails = [case for case in cases if "xfail" in case]
    ran = run["corpus"]
    lines = [
        f"`tests/reliability/bad_inputs.json` holds **{len(cases)} malformed requests**"
        f" ({transports['http']} over HTTP, {transports['grpc']} over gRPC), one JSON object per"
        " line: the request, the transport, its kind, the expected HTTP status or gRPC code and a"
        " word the error message must contain. After **every** case the test checks that the"
        " server is ready and answers a correct `add_sub` inference over HTTP and over gRPC.",
        "",
        "| Kind | HTTP | gRPC | Answer |",
        "| --- | --- | --- | --- |",
    ]
    for kind, (what, answer) in KINDS.items():
        lines.append(f"| {what} | {by[kind, 'http']} | {by[kind, 'grpc']} | {answer} |")
    lines.append(f"| **all** | **{transports['http']}** | **{transports['grpc']}** | |")
    lines.append("")
    known = "; ".join(f"`{case['id']}` ({case['xfail']})" for case in xfails) or "none"
    lines.append(f"Known open bugs (cases marked `xfail`): {known}.")
    outcome = ", ".join(f"{count} {name}" for name, count in sorted(ran.items())) or "not run"
    lines.append(f"In the run above: {outcome}.")
    return "\n".join(lines)


def render_fuzz(run: dict[str, Any]) -> str:
    budget = module_constants("test_fuzz.py")
    examples = budget["EXAMPLES"]
    floor = budget["MIN_EXAMPLES_PER_SECOND"]
    lines = [
        f"CI runs a fixed **{_n(sum(examples.values()))} examples** in all, the same ones every"
        " run (hypothesis derandomized), shared as below; `NBINFER_FUZZ_SECONDS` runs the"
        " time-bounded fuzz instead: the targets share that many seconds as below, each running"
        f" hypothesis in rounds of {budget['ROUND']} fresh examples until its share is spent."
        " `test_every_fuzz_target_ran_its_budget` fails when a target ran fewer than its examples,"
        f" or stopped early or ran fewer than {floor} examples per second of its share.",
        "",
        "| Target | CI's examples | Share of a timed run | Examples in the run above | Time"
        " | Per second |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    total_examples = total_seconds = 0.0
    for target, (label, share) in budget["TARGETS"].items():
        fixed = _n(examples[target])
        ran = run["fuzz"].get(target)
        if ran is None:
            lines.append(f"| {label} | {fixed} | {share:.0%} | not run | | |")
            continue
        total_examples += ran["examples"]
        total_seconds += ran["seconds"]
        lines.append(
            f"| {label} | {fixed} | {share:.0%} | {_n(ran['examples'])} | {ran['seconds']:.0f} s"
            f" | {_n(ran['examples'] / ran['seconds'])} |"
        )
    lines.append(
        f"| **all** | **{_n(sum(examples.values()))}** | 100% | **{_n(total_examples)}**"
        f" | **{total_seconds:.0f} s** | |"
    )
    return "\n".join(lines)


def render_faults(run: dict[str, Any]) -> str:
    lines = ["| Fault | What happens (tested) | In the run above |", "| --- | --- | --- |"]
    for name, fault, outcome in fault_cases():
        result = run["faults"].get(name)
        cell = f"{result[0]} in {result[1]:.1f} s" if result else "not run"
        if name in run["fault_notes"]:
            cell += f"; {run['fault_notes'][name]}"
        lines.append(f"| {fault} | {outcome} | {cell} |")
    return "\n".join(lines)


def render_soak(run: dict[str, Any]) -> str:
    budget = module_constants("test_soak.py")
    soak = run["soak"]
    lines = [
        f"`tests/reliability/test_soak.py`: {budget['THREADS']} threads mix HTTP JSON, HTTP binary"
        " and gRPC calls over `add_sub`, BYTES, INT64 and BOOL models while one more thread"
        " unloads and reloads the BOOL model; every answer is compared with the expected values."
        f" CI runs {budget['DEFAULT_SECONDS']:.0f} s (`NBINFER_SOAK_SECONDS`); the server's RSS"
        f" may grow at most {budget['RSS_BOUND_MB']:.0f} MiB between warm-up and the end.",
        "",
    ]
    if not soak:
        lines.append("The run above did not include the soak.")
        return "\n".join(lines)
    counts = soak["counts"]
    lines.append(
        f"In the run above ({soak['seconds']:.0f} s): {_n(counts.get('ok', 0))} checked answers"
        f" ({_n(counts.get('ok', 0) / soak['seconds'])} per second),"
        f" {counts.get('mismatch', 0)} mismatches, {soak['errors']} unexpected errors,"
        f" {_n(counts.get('refused while unloaded', 0))} requests refused with a typed"
        ' "not ready" error while the model was unloaded,'
        f" {counts.get('load/unload cycles', 0)} load / unload cycles, server RSS"
        f" {soak['rss_before_mb']:.0f} MiB before and {soak['rss_after_mb']:.0f} MiB after."
    )
    return "\n".join(lines)


def render_rerun(run: dict[str, Any]) -> str:
    fuzz = module_constants("test_fuzz.py")
    soak = module_constants("test_soak.py")
    return "\n".join(
        [
            "<!-- not-run: the test suites of a clone, minutes long -->",
            "```bash",
            f"# everything in tests/reliability (about {run['seconds']} s), writing its figures",
            "NBINFER_RELIABILITY_FIGURES=/tmp/figures python -m pytest -p no:cacheprovider"
            " tests/reliability",
            "# ... and this page's figures from them",
            "python tests/reliability/reliability_report.py /tmp/figures",
            f"# fuzzing for {fuzz['LONG_SECONDS'] / 60:.0f} minutes",
            f"NBINFER_FUZZ_SECONDS={fuzz['LONG_SECONDS']:.0f} python -m pytest -p no:cacheprovider"
            " tests/reliability/test_fuzz.py",
            f"# a {soak['LONG_SECONDS'] / 60:.0f}-minute soak, printing its figures",
            f"NBINFER_SOAK_SECONDS={soak['LONG_SECONDS']:.0f} python -m pytest -s -p"
            " no:cacheprovider tests/reliability/test_soak.py",
            "```",
        ]
    )


BLOCKS = {
    "run": render_run,
    "corpus": render_corpus,
    "fuzz": render_fuzz,
    "faults": render_faults,
    "soak": render_soak,
    "rerun": render_rerun,
}
_BLOCK = re.compile(r"(<!-- figures:(\w+) -->\n)(?:.*?\n)?(<!-- /figures:\2 -->)", re.DOTALL)
_RUN = re.compile(r"<!-- run: (\{.*?\}) -->")


def run_in_page(page: str) -> dict[str, Any]:
    """The run summary a page was rendered from."""
    found = _RUN.search(page)
    if found is None:
        raise ValueError("the page holds no <!-- run: ... --> summary")
    return dict(json.loads(found.group(1)))


def render_page(page: str, run: dict[str, Any]) -> str:
    """``page`` with every figures block rendered from the tree and ``run``."""
    names = [match.group(2) for match in _BLOCK.finditer(page)]
    missing = set(BLOCKS) - set(names)
    if missing:
        raise ValueError(f"the page lacks the figures blocks {sorted(missing)}")
    return _BLOCK.sub(
        lambda m: m.group(1) + BLOCKS[m.group(2)](run) + "\n" + m.group(3),
        page,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("folder", nargs="?", type=Path, help="where a run wrote its figures")
    source.add_argument(
        "--from-page",
        action="store_true",
        help="keep the page's run figures, render the tree's (after a change to the suites)",
    )
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    run = run_in_page(page) if args.from_page else summarize(args.folder)
    if not args.from_page and not run["tests"]:
        parser.error(f"{args.folder} holds no outcomes.json: run the suites with {FIGURES_ENV}")
    PAGE.write_text(render_page(page, run))
    print(f"rewrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
