"""Shared fixtures: the real Coral models in ../shared/testdata and marker-based skips."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTDATA = Path(os.environ.get("EDGEKIT_TESTDATA", REPO.parent / "shared" / "testdata"))
# The OpenSSH server the `remote` tests start on 127.0.0.1 (Debian's openssh-server; .ci/run installs it).
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def shared_file(name: str) -> Path:
    """A file from ../shared/testdata, or skip the test (with the reason) when it is absent."""
    p = TESTDATA / name
    if not p.exists():
        pytest.skip(f"real Coral test data not found: {p} (set EDGEKIT_TESTDATA)")
    return p


def shared_models(pattern: str = "*.tflite") -> list[Path]:
    return sorted(TESTDATA.glob(pattern)) if TESTDATA.is_dir() else []


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"real Coral test data not found: {TESTDATA} (set EDGEKIT_TESTDATA)")
    return TESTDATA


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_tf = importlib.util.find_spec("tensorflow") is not None
    has_compiler = bool(shutil.which(os.environ.get("EDGETPU_COMPILER", "edgetpu_compiler")))
    has_edgetpu = bool(os.environ.get("EDGEKIT_EDGETPU"))
    has_sshd = os.access(SSHD, os.X_OK)
    reasons = {
        "tf": (has_tf, "TensorFlow is not installed (pip install '.[convert]')"),
        "compiler": (has_compiler, "no real edgetpu_compiler on PATH (x86-64 Linux only; see README)"),
        "edgetpu": (has_edgetpu, "needs a real Edge TPU: set EDGEKIT_EDGETPU=1 where one is attached"),
        "remote": (has_sshd, f"no OpenSSH server ({SSHD}) to test SSH against: apt-get install openssh-server"),
    }
    for item in items:
        for marker, (available, reason) in reasons.items():
            if marker in item.keywords and not available:
                item.add_marker(pytest.mark.skip(reason=reason))


# ------------------------------------------------------------------ what the missing test data cost
# A clone without ../shared/testdata (how anyone outside the team gets the project) runs every test that builds
# its own models and skips the rest: the run ends saying how many were skipped for that, and why.
_NO_TESTDATA_WORDS = ("EDGEKIT_TESTDATA", "real Coral test data not found")
_skipped_for_testdata: list[str] = []


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        # without the folder, a test parametrized over its models has an empty parameter set (pytest's reason)
        empty = not TESTDATA.is_dir() and "got empty parameter set" in reason
        if empty or str(TESTDATA) in reason or any(words in reason for words in _NO_TESTDATA_WORDS):
            _skipped_for_testdata.append(report.nodeid)


def testdata_summary(skipped: int) -> str | None:
    """The run's last line when tests were skipped for the real Coral test data (None when none was)."""
    if not skipped:
        return None
    where = "absent" if not TESTDATA.is_dir() else "incomplete"
    return (
        f"{skipped} test{'s' if skipped != 1 else ''} skipped because the real Coral test data is {where}: "
        f"{TESTDATA} (put it at ../shared/testdata or set EDGEKIT_TESTDATA)"
    )


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's own summary line: the count of tests skipped for want of ../shared/testdata."""
    line = testdata_summary(len(set(_skipped_for_testdata)))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line, yellow=True, bold=True)
    if reporter is not None:  # the package's lines of code per folder, so growth is seen (tests/line_budget.py)
        from tests.line_budget import by_folder, summary

        reporter.write_line(summary(by_folder()))


# ------------------------------------------------------------------ the digits CNN (needs TensorFlow)
# Built once per session and shared: scikit-learn's digits as 32x32 RGB PNGs in class folders
# (train/ and test/), the small CNN trained on train/ and saved as .h5 with its record, and its
# full-int8 quantization by `edgekit quantize` (library call, calibrated on train/).
@pytest.fixture(scope="session")
def digits_folders(tmp_path_factory):
    from edgekit.training import digits

    return digits.write_digits(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="session")
def digits_keras(digits_folders, tmp_path_factory):
    """SimpleNamespace(model, path (.h5 with a record beside it), test_accuracy)."""
    from types import SimpleNamespace

    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.training import digits

    import_tensorflow()
    with silenced():
        model, stats = digits.train(digits_folders)
        path = digits.save(model, tmp_path_factory.mktemp("digits_model") / "digits.h5", digits_folders)
    return SimpleNamespace(model=model, path=path, test_accuracy=stats["test_accuracy"])


@pytest.fixture(scope="session")
def digits_int8(digits_keras, digits_folders):
    """The QuantizeResult of quantizing digits.h5 (output digits_int8.tflite beside it)."""
    from edgekit.converters.quantize import QuantizeOptions, quantize

    return quantize(QuantizeOptions(model=str(digits_keras.path), calib=str(digits_folders.train), show_progress=False))
