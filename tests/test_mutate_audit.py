"""The mutation audit's judging (``scripts/mutate_defences.py``): what counts as a catch.

A mutant is caught only when pytest's junit report shows one of its listed tests
failed in the test itself. Each case feeds ``judge`` a report crafted in the form
pytest 8 writes (``--junitxml``, ``junit_family=xunit2``) with the exit code pytest
gives for it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.timescale import scaled

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate_defences.py"
LISTED = "tests/sandbox/test_escape_fs.py::test_attack[bubblewrap-overlay]"


@pytest.fixture(scope="module")
def audit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutate_defences", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _report(*cases: str) -> str:
    return ('<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
            '<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="1">'
            + "".join(cases) + "</testsuite></testsuites>")


def _case(name: str, inner: str = "", classname: str = "tests.sandbox.test_escape_fs") -> str:
    return f'<testcase classname="{classname}" name="{name}" time="0.1">{inner}</testcase>'


FAILURE = ('<failure message="assert b\'pwned\' not in ...">def test_attack(open_sb):\n'
           "&gt;       assert b'pwned' not in data\nE       AssertionError\n</failure>")
SETUP_ERROR = ('<error message="failed on setup with &quot;RuntimeError: boom&quot;">'
               "RuntimeError: boom</error>")
TEARDOWN_ERROR = ('<error message="failed on teardown with &quot;OSError: [Errno 16] '
                  'Device or resource busy&quot;">OSError</error>')
XPASS = '<failure message="[XPASS(strict)] host backend: x">[XPASS(strict)] x</failure>'


def _judge(audit: ModuleType, code: int | None, junit: str | None,
           tests: tuple[str, ...] = (LISTED,)) -> tuple[str, str]:
    mutation = audit.Mutation("m", "area", (), tests, "why")
    outcome = audit.judge(mutation, audit.PytestRun(code, "1 failed in 0.1s\n", junit), 0.0)
    return outcome.status, outcome.detail


def test_a_listed_test_failing_is_a_catch(audit: ModuleType) -> None:
    status, detail = _judge(audit, 1, _report(
        _case("test_attack[bubblewrap]"), _case("test_attack[bubblewrap-overlay]", FAILURE)))
    assert status == "caught"
    assert "test_escape_fs::test_attack[bubblewrap-overlay]" in detail


def test_a_failure_in_the_call_counts_even_with_a_teardown_error_after_it(
        audit: ModuleType) -> None:
    """pytest writes two test cases of the same name: the failure, then the error."""
    name = "test_attack[bubblewrap-overlay]"
    status, _ = _judge(audit, 1, _report(_case(name, FAILURE), _case(name, TEARDOWN_ERROR)))
    assert status == "caught"


@pytest.mark.parametrize("error", [TEARDOWN_ERROR, SETUP_ERROR], ids=["teardown", "setup"])
def test_exit_1_from_a_fixture_error_is_not_a_catch(audit: ModuleType, error: str) -> None:
    status, detail = _judge(audit, 1, _report(_case("test_attack[bubblewrap-overlay]", error)))
    assert status == "error"
    assert "error, not a failure" in detail and "failed on" in detail


def test_an_unlisted_test_failing_is_not_a_catch(audit: ModuleType) -> None:
    """Another parametrization of the listed test, and another test, fail: ids match exactly."""
    status, detail = _judge(audit, 1, _report(
        _case("test_attack[bubblewrap-overlay]"),
        _case("test_attack[bubblewrap]", FAILURE),
        _case("test_attack[bubblewrap-overlay-2]", FAILURE),
        _case("test_other", FAILURE)))
    assert status == "error"
    assert "not in its list" in detail


def test_exit_1_without_any_failure_in_the_report_is_not_a_catch(audit: ModuleType) -> None:
    """A crash in session cleanup: every test passed, pytest still exits 1."""
    status, detail = _judge(audit, 1, _report(_case("test_attack[bubblewrap-overlay]")))
    assert status == "error" and "pytest exit 1" in detail


def test_passing_listed_tests_survive(audit: ModuleType) -> None:
    status, _ = _judge(audit, 0, _report(_case("test_attack[bubblewrap-overlay]")))
    assert status == "survived"


@pytest.mark.parametrize(("code", "junit"), [(None, None), (1, None), (2, "<not xml")],
                         ids=["timeout", "no-report", "garbled-report"])
def test_no_usable_report_is_an_error(audit: ModuleType, code: int | None,
                                      junit: str | None) -> None:
    assert _judge(audit, code, junit)[0] == "error"


def test_a_strict_xpass_of_a_listed_test_is_a_catch(audit: ModuleType) -> None:
    status, _ = _judge(audit, 1, _report(_case("test_attack[bubblewrap-overlay]", XPASS)))
    assert status == "caught"


def test_a_bare_function_id_selects_its_parametrizations_and_classes_map(
        audit: ModuleType) -> None:
    bare = "tests/sandbox/test_escape_fs.py::test_attack"
    status, _ = _judge(audit, 1, _report(_case("test_attack[host]", FAILURE)), (bare,))
    assert status == "caught"
    status, _ = _judge(audit, 1, _report(_case("test_attack_more[host]", FAILURE)), (bare,))
    assert status == "error"
    method = "tests/sandbox/test_escape_fs.py::TestAttacks::test_one[x]"
    status, _ = _judge(audit, 1, _report(_case(
        "test_one[x]", FAILURE, classname="tests.sandbox.test_escape_fs.TestAttacks")), (method,))
    assert status == "caught"


def test_the_address_pytest_gives_a_test_id(audit: ModuleType) -> None:
    assert audit.junit_address("tests/a/test_b.py::C::test_d[x.y::z]") == (
        "tests.a.test_b.C", "test_d[x.y::z]")


# -- a catch is confirmed on the clean copy: real pytest runs in a tiny scratch copy --------

_DEFENCE = "def allowed(path):\n    return not path.startswith('/')\n"
_TESTS = '''
import os
from pathlib import Path
from defence import allowed

def _runs():  # how many times this test has run in this copy
    counter = Path(__file__).with_name("runs.txt")
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n

def test_absolute_is_refused():
    assert not allowed("/etc/passwd")

def test_always_fails():
    assert os.environ.get("NEVER_SET") == "x"  # fails on every copy, mutant or clean

def test_fails_every_other_run():
    assert _runs() % 2 == 0  # 1st run (the mutant's) fails, 2nd passes, 3rd fails
'''


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    (tmp_path / "defence.py").write_text(_DEFENCE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_defence.py").write_text(_TESTS)
    return tmp_path


def _mutant(audit: ModuleType, test: str) -> object:
    edit = audit.Edit("defence.py", "return not path.startswith('/')", "return True")
    return audit.Mutation("m", "area", (edit,), (f"tests/test_defence.py::{test}",), "why")


def test_a_catch_that_passes_on_the_clean_copy_stands(audit: ModuleType, copy: Path) -> None:
    outcome = audit.run_mutant(sys.executable, copy, _mutant(audit, "test_absolute_is_refused"),
                               scaled(120), False, 2)
    assert outcome.status == "caught", outcome.detail
    assert outcome.failed_ids == ("tests/test_defence.py::test_absolute_is_refused",)
    assert "passed 2x on the clean copy" in outcome.detail
    assert "return True" not in (copy / "defence.py").read_text()  # restored


@pytest.mark.parametrize(("test", "reruns"), [("test_always_fails", 1),
                                              ("test_fails_every_other_run", 2)],
                         ids=["fails-on-clean-too", "fails-intermittently"])
def test_a_catch_by_a_test_that_also_fails_on_clean_code_is_flaky(
        audit: ModuleType, copy: Path, test: str, reruns: int) -> None:
    """Without the rerun both would count as caught: the mutant's run failed."""
    outcome = audit.run_mutant(sys.executable, copy, _mutant(audit, test), scaled(120), False,
                               reruns)
    assert outcome.status == "flaky", outcome.detail
    assert "on the clean copy" in outcome.detail and test in outcome.detail
    assert "return True" not in (copy / "defence.py").read_text()


def test_every_test_mode_confirms_on_the_clean_copy_too(audit: ModuleType,
                                                        copy: Path) -> None:
    edit = audit.Edit("defence.py", "return not path.startswith('/')", "return True")
    mutation = audit.Mutation("m", "area", (edit,), (
        "tests/test_defence.py::test_absolute_is_refused",
        "tests/test_defence.py::test_always_fails"), "why")
    outcome = audit.run_mutant(sys.executable, copy, mutation, scaled(120), True, 1)
    assert outcome.status == "flaky", outcome.detail


def test_the_whole_audits_clean_reruns_run_at_once_and_find_the_flaky_catch(
        audit: ModuleType, copy: Path) -> None:
    """What the audit does by default: each mutant runs without its own rerun, then every
    catching test runs again on the clean copy in one pytest run."""
    outcomes = [audit.run_mutant(sys.executable, copy, _mutant(audit, test), scaled(120),
                                 False, 0)
                for test in ("test_absolute_is_refused", "test_always_fails")]
    assert [o.status for o in outcomes] == ["caught", "caught"]  # before the reruns
    confirmed = audit.confirm_all_on_clean(sys.executable, [copy], outcomes, scaled(120), 1)
    assert [o.status for o in confirmed] == ["caught", "flaky"]
    assert "passed 1x on the clean copy" in confirmed[0].detail
    assert "test_always_fails" in confirmed[1].detail


def test_a_junit_case_maps_back_to_its_pytest_id(audit: ModuleType, copy: Path) -> None:
    case = audit.JunitCase("tests.test_defence.TestX", "test_y[a.b]")
    assert audit.node_id(case, copy) == "tests/test_defence.py::TestX::test_y[a.b]"
    assert audit.node_id(audit.JunitCase("tests.missing", "test_z"), copy) is None
