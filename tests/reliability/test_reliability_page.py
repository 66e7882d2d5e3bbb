"""docs/reliability.md agrees with the tree: its figures blocks are what reliability_report.py
renders from the tree (corpus size and breakdown, fuzz budget and targets, fault cases, soak
bounds, rerun commands) and from the run summary the page keeps.

When this fails after a change to the suites, rerun them and regenerate the page (the commands are
on the page, "Rerun longer"), or keep the last run's figures and render the tree's::

    python tests/reliability/reliability_report.py --from-page
"""

from __future__ import annotations

import difflib

import reliability_report


def test_the_page_figures_agree_with_the_tree() -> None:
    page = reliability_report.PAGE.read_text()
    expected = reliability_report.render_page(page, reliability_report.run_in_page(page))
    diff = "\n".join(
        difflib.unified_diff(
            page.splitlines(), expected.splitlines(), "docs/reliability.md", "the tree", lineterm=""
        )
    )
    assert page == expected, f"regenerate the page (see this test's docstring):\n{diff}"


def test_the_page_figures_come_from_one_whole_passing_run() -> None:
    """Every suite ran in the page's run (a case added since may be missing) and none failed."""
    run = reliability_report.run_in_page(reliability_report.PAGE.read_text())
    assert run["corpus"] and run["faults"] and run["soak"], "not a run of every suite"
    assert set(run["fuzz"]) == set(reliability_report.module_constants("test_fuzz.py")["TARGETS"])
    assert set(run["tests"]) <= {"passed", "xfailed"}, run["tests"]


def test_every_fault_test_says_its_fault_and_what_happens() -> None:
    """The fault table is made of test_faults.py's docstrings: ``Fault: what happens.``."""
    cases = reliability_report.fault_cases()
    assert len(cases) >= 7
    vague = [name for name, fault, outcome in cases if not (fault and outcome)]
    assert not vague, f"fault tests whose docstring is not 'Fault: what happens.': {vague}"
