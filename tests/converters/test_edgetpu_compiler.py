"""edgekit compile: parsers on real compiler outputs, plumbing with a stand-in, the real compiler when present.

The parsers are tested on real edgetpu_compiler outputs copied verbatim into
tests/fixtures/compiler (sources in SOURCES.md there). The subprocess plumbing (timeout, exit
code, missing binary, outputs moved into place) is tested with
tests/fixtures/compiler/standin_edgetpu_compiler.py, a STAND-IN that replays those outputs; it is
never evidence that the real compiler works. Tests marked ``compiler`` run the real
edgetpu_compiler whenever it is on PATH (or EDGETPU_COMPILER).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.edgetpu import compiler as etc
from edgekit.edgetpu.compatibility import check_model
from edgekit.errors import CompilerError, InputError, MissingDependencyError
from edgekit.report import Collector
from edgekit.tflite import model as tflite_model
from tests.conftest import shared_file
from tests.helpers import default_stop_signals

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compiler"
STANDIN = FIXTURES / "standin_edgetpu_compiler.py"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_every_fixture_names_its_source():
    listed = fixture("SOURCES.md")
    files = [p.name for p in FIXTURES.iterdir() if p.suffix in (".txt", ".log")]
    assert len(files) >= 15
    for name in files:
        assert f"`{name}`" in listed, f"{name} is not listed in SOURCES.md"


# ------------------------------------------------------------------------------------- parsers
@pytest.mark.parametrize(
    "text, expected",
    [("0.00B", 0), ("1.75KiB", 1792), ("7.37MiB", round(7.37 * 1024**2)), ("1.00GiB", 1024**3), ("322.25KiB", 329984)],
)
def test_parse_size(text, expected):
    assert etc.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "7.37 MB", "-1B", "MiB"])
def test_parse_size_refuses_other_text(text):
    with pytest.raises(ValueError):
        etc.parse_size(text)


def test_v16_partial_mapping_stdout():
    r = m = etc.parse_compiler_output(fixture("v16_partial_yolov5s_224_stdout.txt"), returncode=0)
    assert r.compiler_version == "16.0.384591198" and r.succeeded and r.compile_ms == 3173
    assert (m.input_model, m.output_model) == ("yolov5s-int8-224.tflite", "yolov5s-int8-224_edgetpu.tflite")
    assert m.input_size_bytes == etc.parse_size("7.37MiB") and m.output_size_bytes == etc.parse_size("8.34MiB")
    assert (m.on_chip_used_bytes, m.on_chip_remaining_bytes, m.off_chip_used_bytes) == (
        etc.parse_size("6.08MiB"),
        0,
        etc.parse_size("1.70MiB"),
    )
    assert (m.subgraphs, m.total_ops, m.edgetpu_ops, m.cpu_ops) == (2, 294, 289, 5)
    assert len(r.ops) == 17 and r.segments == ()  # one model: its figures are the document's own
    per = r.ops_per_status
    # the table agrees with the summary lines the compiler printed above it
    assert per["Mapped to Edge TPU"] == 289 and sum(per.values()) - 289 == 5
    split = r.split_by_type()
    assert split["cpu"]["QUANTIZE"] == 2 and split["edgetpu"]["QUANTIZE"] == 24


def test_v16_full_mapping_log_and_v15_logs():
    version, inp, out, rows = etc.parse_operation_log(fixture("v16_full_yolov5s_160.log"))
    assert (version, inp, out) == ("16.0.384591198", "yolov5s-int8.tflite", "yolov5s-int8_edgetpu.tflite")
    assert len(rows) == 11 and all(r.mapped for r in rows) and sum(r.count for r in rows) == 262
    v15 = etc.parse_compiler_output(fixture("v15_partial_yolov5s_stdout.txt"))
    assert v15.compiler_version == "15.0.340273435" and v15.succeeded and v15.total_ops == 294
    assert sum(r.count for r in v15.ops) == 294 and v15.ops_per_status["Mapped to Edge TPU"] == 1
    assert ("STRIDED_SLICE", 4, "Only Strided-Slice with unitary strides supported") in [
        (r.operator, r.count, r.status) for r in v15.ops
    ]


def test_older_console_formats():
    v15 = etc.parse_compiler_output(fixture("v15_partial_stdout.txt"))
    assert v15.compiler_version == "15.0.340273435" and v15.succeeded
    assert (v15.edgetpu_ops, v15.cpu_ops, v15.off_chip_used_bytes) == (117, 48, 0)
    assert v15.output_model == "./EdgeTPU/model_edgetpu.tflite" and v15.ops == ()
    v14 = etc.parse_compiler_output(fixture("v14_no_subgraph_stdout_excerpt.txt"))
    assert v14.compiler_version == "14.1.317412892" and v14.succeeded and v14.subgraphs == 0
    assert v14.total_ops == 42 and v14.compile_ms == 70
    v2 = etc.parse_compiler_output(fixture("v2_1_partial_stdout_excerpt.txt"))
    assert v2.compiler_version == "2.1.302470888" and v2.on_chip_remaining_bytes == etc.parse_size("7.75KiB")
    assert [r.status for r in v2.ops].count("More than one subgraph is not supported") == 2


def test_search_delegate_output():
    r = etc.parse_compiler_output(fixture("v16_full_search_delegate_stdout_excerpt.txt"))
    assert r.succeeded and r.off_chip_used_bytes == etc.parse_size("41.75KiB")
    assert all(row.mapped for row in r.ops)


@pytest.mark.parametrize(
    "name, words, hint_words",
    [
        ("v16_op_version_transpose_conv.txt", "TRANSPOSE_CONV v4 needs TensorFlow Lite 2.13.0", "re-convert"),
        ("v16_op_version_exp.txt", "EXP v2 needs a TensorFlow Lite release newer than 2.5.0", "re-convert"),
        ("v16_op_version_quantize.txt", "QUANTIZE v3 needs TensorFlow Lite 2.7.0", "re-convert"),
        ("v16_dynamic_tensors.txt", "dynamic-sized tensors", "batch_size=1"),
        ("v16_large_activations.txt", "large activation tensors", "--search-delegate"),
        ("v14_internal_error.txt", "Internal compiler error", "--search-delegate"),
        ("v15_internal_error.txt", "Internal compiler error", "--search-delegate"),
        ("v14_not_quantized.txt", "Model not quantized", "edgekit quantize"),
        (
            "runtime_mismatch.txt",
            "compiled for Edge TPU runtime 14, but this runtime is version 13",
            "--min-runtime 13",
        ),
    ],
)
def test_known_failures_become_clear_errors(name, words, hint_words):
    text = fixture(name)
    if name != "runtime_mismatch.txt":
        assert not etc.parse_compiler_output(text, returncode=0).succeeded
    message, hint = etc.diagnose(text)
    assert words in message and hint_words in hint


def test_success_text_with_a_failing_exit_code_is_a_failure():
    assert not etc.parse_compiler_output(fixture("v16_partial_yolov5s_224_stdout.txt"), returncode=1).succeeded
    assert etc.diagnose(fixture("v16_partial_yolov5s_224_stdout.txt")) is None


def test_version_parsing():
    assert etc.parse_version(fixture("v16_version.txt")) == "16.0.384591198"
    assert etc.version_major("16.0.384591198") == 16 and etc.version_major(None) is None


# ---------------------------------------------------------------------------- plumbing (stand-in)
@pytest.fixture
def standin(tmp_path, monkeypatch):
    """A stand-in named edgetpu_compiler first on PATH; returns a function setting its behaviour."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "edgetpu_compiler"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.exit(runpy.run_path({str(STANDIN)!r}, "
        "run_name='standin')['main'](sys.argv[1:]))\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.delenv("EDGETPU_COMPILER", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("STANDIN_ARGV_FILE", str(argv_file))

    def configure(**env: str) -> Path:
        for k, v in env.items():
            monkeypatch.setenv(f"STANDIN_{k}", str(v))
        return argv_file

    return configure


@pytest.fixture
def model_copy(tmp_path):
    src = shared_file("split_concat.tflite")
    dst = tmp_path / "in" / "split_concat.tflite"
    dst.parent.mkdir()
    shutil.copyfile(src, dst)
    return dst


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_outputs_move_into_place_and_the_argument_list(standin, model_copy, tmp_path):
    argv_file = standin(OUTPUT_MODEL=shared_file("split_concat_edgetpu.tflite"))
    out = tmp_path / "out"
    out.mkdir()
    before = model_copy.read_bytes()
    report = etc.compile_model(model_copy, out)
    assert report.succeeded and report.compiler_version == "16.0.384591198"
    assert sorted(Path(p).name for p in report.outputs) == ["split_concat_edgetpu.log", "split_concat_edgetpu.tflite"]
    assert (out / "split_concat_edgetpu.tflite").read_bytes() == shared_file("split_concat_edgetpu.tflite").read_bytes()
    assert _leftovers(out) == [] and model_copy.read_bytes() == before
    argv = json.loads(argv_file.read_text())
    assert argv[-1] == str(model_copy.resolve())
    for flag in ("--out_dir", "--show_operations", "--timeout_sec"):
        assert flag in argv
    assert "--min_runtime_version" not in argv  # the compiler's own default (older compilers know no runtime 14)
    etc.compile_model(model_copy, out, min_runtime=13)
    argv = json.loads(argv_file.read_text())
    assert argv[argv.index("--min_runtime_version") + 1] == "13"


def test_a_note_says_what_runs_before_the_compile_starts(standin, model_copy, tmp_path):
    standin()
    told = Collector()
    etc.compile_model(model_copy, tmp_path, timeout=60, report=told)
    assert told.statuses == ["running edgetpu_compiler 16.0.384591198 on split_concat.tflite (stopped after 60 s)..."]
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(tmp_path), "--quiet"])
    assert r.exit_code == 0 and r.stderr == ""


def test_default_output_folder_is_beside_the_model_and_existing_outputs_are_replaced(standin, model_copy):
    standin()
    (model_copy.parent / "split_concat_edgetpu.tflite").write_bytes(b"old")
    etc.compile_model(model_copy)
    assert (model_copy.parent / "split_concat_edgetpu.tflite").read_bytes() == model_copy.read_bytes()
    assert _leftovers(model_copy.parent) == []


def test_nonzero_exit_code_fails_even_with_success_text(standin, model_copy, tmp_path):
    standin(EXIT=1)
    with pytest.raises(CompilerError, match=r"exit 1"):
        etc.compile_model(model_copy, tmp_path)
    assert not (tmp_path / "split_concat_edgetpu.tflite").exists() and _leftovers(tmp_path) == []


def test_failure_text_with_exit_zero_is_still_a_failure(standin, model_copy, tmp_path):
    standin(STDOUT="v16_large_activations.txt", EXIT=0)
    with pytest.raises(CompilerError, match="large activation tensors") as e:
        etc.compile_model(model_copy, tmp_path)
    assert "--segments" in e.value.hint
    assert not (tmp_path / "split_concat_edgetpu.tflite").exists()


def test_known_failure_with_no_outputs(standin, model_copy, tmp_path):
    standin(STDOUT="v16_dynamic_tensors.txt", EXIT=1, WRITE=0)
    with pytest.raises(CompilerError, match="dynamic-sized tensors") as e:
        etc.compile_model(model_copy, tmp_path)
    assert e.value.exit_code == 8 and "batch_size=1" in e.value.hint
    assert list(tmp_path.glob("*_edgetpu.*")) == [] and _leftovers(tmp_path) == []


def test_success_text_but_no_output_file(standin, model_copy, tmp_path):
    standin(WRITE=0)
    with pytest.raises(CompilerError, match="wrote no model") as e:
        etc.compile_model(model_copy, tmp_path)
    assert f"edgetpu_compiler -s {model_copy}" in e.value.hint


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a killed orphan may wait unreaped in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_timeout_stops_the_compiler_and_its_child_process(standin, model_copy, tmp_path):
    pid_file = tmp_path / "child.pid"
    standin(SLEEP=20, CHILD_PID_FILE=pid_file)
    with pytest.raises(CompilerError, match=r"did not finish within --timeout 1 s") as e:
        etc.compile_model(model_copy, tmp_path, timeout=1)
    assert "--timeout" in e.value.hint and _leftovers(tmp_path) == []
    if sys.platform.startswith("linux"):  # the compiling child is stopped too, not left running
        pid = int(pid_file.read_text())
        for _ in range(50):
            if not _alive(pid):
                break
            time.sleep(0.05)
        assert not _alive(pid)


def test_unknown_failure_text_with_outputs_and_exit_zero_is_a_failure(standin, model_copy, tmp_path):
    """Synthetic text (a real success output whose verdict line says failed): nothing is moved into place."""
    text = fixture("v16_partial_yolov5s_224_stdout.txt").replace("Compilation succeeded!", "Compilation failed!")
    stdout = tmp_path / "failed.txt"
    stdout.write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    standin(STDOUT=stdout, EXIT=0)
    with pytest.raises(CompilerError, match="did not succeed"):
        etc.compile_model(model_copy, out)
    assert list(out.iterdir()) == []


def test_an_already_compiled_model_is_refused_before_running_the_compiler(model_copy, tmp_path):
    compiled = tmp_path / "split_concat_edgetpu.tflite"
    shutil.copyfile(shared_file("split_concat_edgetpu.tflite"), compiled)

    def runner(argv, timeout):
        raise AssertionError("the compiler must not run")

    with pytest.raises(InputError, match="already compiled") as e:
        etc.compile_model(compiled, tmp_path, compiler="/opt/edgetpu_compiler", runner=runner)
    assert "without _edgetpu" in e.value.hint and e.value.exit_code == 3


def test_unwritable_output_folder_is_a_bad_input(standin, model_copy, tmp_path, monkeypatch):
    """Permission denied is simulated (the tests may run as root, who can write anywhere)."""
    standin()

    def denied(**_kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(etc.tempfile, "mkdtemp", denied)
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(tmp_path)])
    assert r.exit_code == 3
    assert (
        r.stderr == f"error: cannot write into the output folder {tmp_path}: Permission denied "
        "(choose a writable folder with -o)\n"
    )


def _yolov8n(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the yolov8n CPU model, its real compiled model and the compiler's real .log (one compile)."""
    stem = "pairs/coral_wifi_webserver__yolov8n_full_integer_quant"
    model = tmp_path / "yolov8n.tflite"
    shutil.copyfile(shared_file(f"{stem}.tflite"), model)
    return model, shared_file(f"{stem}_edgetpu.tflite"), shared_file(f"{stem}_edgetpu.log")


def test_op_table_from_the_log_when_stdout_has_none(standin, tmp_path):
    """Without -s the console has only the counts: the table comes from the .log (yolov8n's real one)."""
    model, compiled, log = _yolov8n(tmp_path)
    standin(OUTPUT_MODEL=compiled, LOG=log, TABLE="log")
    report = etc.compile_model(model, tmp_path / "out")
    _, _, _, rows = etc.parse_operation_log(log.read_text())
    assert [(r.operator, r.count, r.status) for r in report.ops] == [(r.operator, r.count, r.status) for r in rows]
    doc = report.to_dict()
    assert (doc["edgetpu_ops"], doc["cpu_ops"]) == (230, 25) and "check_disagreements" not in doc


def test_segments_are_all_moved_into_place(standin, model_copy, tmp_path):
    argv_file = standin()
    report = etc.compile_model(model_copy, tmp_path, segments=2)
    names = sorted(Path(p).name for p in report.outputs)
    assert names == [
        "split_concat_segment_0_of_2_edgetpu.log",
        "split_concat_segment_0_of_2_edgetpu.tflite",
        "split_concat_segment_1_of_2_edgetpu.log",
        "split_concat_segment_1_of_2_edgetpu.tflite",
    ]
    argv = json.loads(argv_file.read_text())
    assert argv[argv.index("--num_segments") + 1] == "2"


def test_missing_binary(monkeypatch, tmp_path, model_copy):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EDGETPU_COMPILER", raising=False)
    assert etc.find_compiler() is None
    with pytest.raises(MissingDependencyError) as e:
        etc.compile_model(model_copy, tmp_path)
    assert e.value.exit_code == 4
    monkeypatch.setenv("EDGETPU_COMPILER", str(tmp_path / "nope"))
    with pytest.raises(MissingDependencyError, match="EDGETPU_COMPILER"):
        etc.find_compiler()
    not_exec = tmp_path / "edgetpu_compiler"
    not_exec.write_text("#!/bin/sh\n")
    not_exec.chmod(0o644)
    with pytest.raises(MissingDependencyError):
        etc.run_subprocess([str(not_exec), "--version"], 5)


def test_missing_compiler_message_says_exactly_why(monkeypatch):
    monkeypatch.setattr(etc.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(etc.platform, "machine", lambda: "arm64")
    e = etc.missing_compiler_error()
    assert "does not exist for Darwin arm64" in e.message and "x86-64 Linux" in e.message
    monkeypatch.setattr(etc.platform, "system", lambda: "Linux")
    monkeypatch.setattr(etc.platform, "machine", lambda: "x86_64")
    e = etc.missing_compiler_error()
    assert "not installed" in e.message and "apt-get install edgetpu-compiler" in e.hint


def test_runner_seam_is_replaceable(model_copy, tmp_path):
    calls = []

    def runner(argv, timeout):
        calls.append(argv)
        if "--version" in argv:
            return etc.RunResult(0, fixture("v16_version.txt"), "")
        return etc.RunResult(1, fixture("v16_op_version_exp.txt"), "")

    with pytest.raises(CompilerError, match="EXP v2"):
        etc.compile_model(model_copy, tmp_path, compiler="/opt/edgetpu_compiler", runner=runner)
    assert calls[0] == ["/opt/edgetpu_compiler", "--version"] and calls[1][0] == "/opt/edgetpu_compiler"


# ------------------------------------------------------------------------------------------- CLI
def test_cli_compile_without_compiler_prints_check_and_exits_4(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EDGETPU_COMPILER", raising=False)
    path = str(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"))
    r = CliRunner().invoke(cli, ["compile", path])
    assert r.exit_code == 4
    assert "offline prediction" in r.stdout and "Verdict: PARTIAL" in r.stdout
    assert "edgetpu_compiler" in r.stderr and r.stderr.startswith("error: ")
    r = CliRunner().invoke(cli, ["compile", path, "--json"])
    assert r.exit_code == 4
    doc = json.loads(r.stdout)
    assert doc["compiled"] is False and doc["check"]["verdict"] == "partial"


def test_cli_compile_names_bad_arguments_before_a_missing_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EDGETPU_COMPILER", raising=False)
    r = CliRunner().invoke(cli, ["compile", str(shared_file("split_concat_edgetpu.tflite"))])
    assert r.exit_code == 3 and "already compiled" in r.stderr
    (tmp_path / "afile").write_text("")
    r = CliRunner().invoke(
        cli, ["compile", str(shared_file("split_concat.tflite")), "-o", str(tmp_path / "afile" / "sub")]
    )
    assert r.exit_code == 3 and f"cannot create output folder {tmp_path / 'afile' / 'sub'}" in r.stderr


def test_a_missing_output_folder_is_created_and_said(standin, model_copy, tmp_path):
    standin(OUTPUT_MODEL=shared_file("split_concat_edgetpu.tflite"))
    out = tmp_path / "new" / "deeper"
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"note: created output folder {out}" in r.stderr
    assert (out / "split_concat_edgetpu.tflite").is_file() and (out / "split_concat_edgetpu.log").is_file()
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(tmp_path / "q"), "--quiet"])
    assert r.exit_code == 0 and "created" not in r.stderr


@pytest.mark.parametrize("in_the_way", ["split_concat_edgetpu.log", "split_concat_edgetpu.tflite"])
def test_a_folder_in_the_way_of_an_output_writes_nothing(standin, model_copy, tmp_path, in_the_way):
    """Was: exit 70 with the compiled model already in place and the .log missing."""
    argv_file = standin(OUTPUT_MODEL=shared_file("split_concat_edgetpu.tflite"))
    out = tmp_path / "out"
    (out / in_the_way).mkdir(parents=True)
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(out)])
    assert r.exit_code == 3, r.output
    assert r.stderr.strip().splitlines() == [
        f"error: cannot write {out / in_the_way}: a folder of that name is "
        "in the way (move or remove that folder, or choose another -o)"
    ]
    assert sorted(p.name for p in out.iterdir()) == [in_the_way] and not argv_file.exists()  # compiler not run


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_stop_signal_stops_the_compiler_group_and_cleans_up(standin, model_copy, tmp_path, signame):
    """SIGTERM/SIGHUP did not reach the compiler (its own session): it ran on, orphaned, and the
    .edgekit-compile-* folder stayed. Now every stop signal acts as Ctrl-C does."""
    import signal
    import subprocess

    pid_file = tmp_path / "child.pid"
    argv_file = standin(SLEEP=30, CHILD_PID_FILE=pid_file)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    p = subprocess.Popen(
        [sys.executable, "-m", "edgekit", "compile", str(model_copy), "-o", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_stop_signals,
    )
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    assert argv_file.exists(), "the stand-in never started"
    child = int(pid_file.read_text())
    p.send_signal(getattr(signal, signame))
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + getattr(signal, signame), err
    assert err.strip() == ("interrupted" if signame == "SIGINT" else f"stopped by {signame}")
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)
    assert list(out.iterdir()) == []  # no .edgekit-compile-* folder, no output


def test_cli_compile_compares_with_check(standin, tmp_path):
    """The stand-in hands over deeplab's real compiled model with console text that names deeplab and no
    op table (there is no recorded deeplab log): it used to replay yolov5s's log beside deeplab's model,
    a report mixing two models. The comparison rests on the real compiled pair only."""
    model = tmp_path / "deeplab.tflite"
    shutil.copyfile(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"), model)
    text = (
        fixture("v16_version.txt").strip() + "\n\nModel compiled successfully in 1000 ms.\n\n"
        "Input model: deeplab.tflite\nOutput model: deeplab_edgetpu.tflite\n"
    )
    (tmp_path / "stdout.txt").write_text(text)
    (tmp_path / "log.txt").write_text("Edge TPU Compiler version 16.0.384591198\nInput: deeplab.tflite\n")
    standin(
        OUTPUT_MODEL=shared_file("deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite"),
        STDOUT=tmp_path / "stdout.txt",
        LOG=tmp_path / "log.txt",
    )
    r = CliRunner().invoke(cli, ["compile", str(model)])
    assert r.exit_code == 0, r.output
    assert "edgekit check agreed with the compiler on every op type" in r.output
    r = CliRunner().invoke(cli, ["compile", str(model), "--json"])
    doc = json.loads(r.stdout)
    assert doc["check_disagreements"] == [] and doc["succeeded"] and doc["compiler_version"] == "16.0.384591198"
    assert doc["input_model"] == "deeplab.tflite" and doc["ops"] == []  # nothing from another model
    assert set(doc) == {  # the schema in the README
        "compiler_version",
        "succeeded",
        "compile_ms",
        "returncode",
        "command",
        "input_model",
        "output_model",
        "input_size_bytes",
        "output_size_bytes",
        "on_chip_used_bytes",
        "on_chip_remaining_bytes",
        "off_chip_used_bytes",
        "subgraphs",
        "total_ops",
        "edgetpu_ops",
        "cpu_ops",
        "ops_per_status",
        "ops",
        "segments",
        "outputs",
        "errors",
        "check_disagreements",
    }


def test_the_op_table_of_a_real_log_is_rendered():
    """The op table part of the report, from one real recorded compile (yolov5s: stdout and log together)."""
    from edgekit.results import CompileResult

    report = etc.parse_compiler_output(fixture("v16_partial_yolov5s_224_stdout.txt"), 0)
    doc = report.to_dict()
    assert set(doc["ops"][0]) == {"operator", "count", "status"} and "check_disagreements" not in doc
    assert CompileResult.from_dict({**doc, "check_disagreements": None}) == report == CompileResult.from_dict(doc)
    compared = replace(report, check_disagreements=("CONV_2D: ...",))
    assert CompileResult.from_dict(compared.to_dict()) == compared
    text = report.render_text()
    assert "Operator                       Count      Status" in text and "yolov5s-int8-224.tflite" in text


def test_cli_compile_prints_disagreements(standin, tmp_path):
    model = tmp_path / "deeplab.tflite"
    shutil.copyfile(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"), model)
    standin()  # the stand-in "compiles" by copying the input: nothing mapped, and says so of this model
    r = CliRunner().invoke(cli, ["compile", str(model)])
    assert r.exit_code == 0
    assert "compiled deeplab.tflite" in r.output and "Edge TPU subgraphs: 0" in r.output
    assert "edgekit check disagreed with the compiler" in r.output
    assert "CONV_2D: check predicted 36 on the Edge TPU / 2 on the CPU, the compiler mapped 0 / 38" in r.output


def test_cli_compile_of_a_real_pair_reports_that_compile_and_checks_agreement(standin, tmp_path):
    """yolov8n's real compiled model and real .log, handed over by the stand-in: the report is that compile's,
    and check's prediction agrees with the compiled file op type by op type."""
    model, compiled, log = _yolov8n(tmp_path)
    standin(OUTPUT_MODEL=compiled, LOG=log)
    r = CliRunner().invoke(cli, ["compile", str(model), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["input_model"] == "yolov8n.tflite" and doc["subgraphs"] == 1
    assert (doc["edgetpu_ops"], doc["cpu_ops"], doc["total_ops"]) == (230, 25, 255)
    assert doc["check_disagreements"] == []


def test_cli_compile_json_describes_a_failed_compile(standin, model_copy):
    """Was: nothing on stdout with --json when the compiler failed (exit 8)."""
    standin(STDOUT="v16_dynamic_tensors.txt", EXIT=1, WRITE=0)
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "--json"])
    assert r.exit_code == 8
    doc = json.loads(r.stdout)
    assert doc["succeeded"] is False and "dynamic-sized tensors" in doc["error"]
    assert doc["compiler_version"] == "16.0.384591198" and doc["outputs"] == []
    assert list(doc)[-2:] == ["errors", "error"] and "check_disagreements" not in doc  # what the compiler said
    assert r.stderr.count("error:") == 1


def test_cli_compile_failure_exit_code(standin, model_copy):
    standin(STDOUT="v16_op_version_quantize.txt", EXIT=1, WRITE=0)
    r = CliRunner().invoke(cli, ["compile", str(model_copy)])
    assert r.exit_code == 8 and "QUANTIZE v3" in r.stderr


# --------------------------------------------------------------------------- the real compiler
REAL_PAIRS = ["mobilenet_v1_0.25_128_quant", "keras_lstm_mnist_ptq", "split_concat", "deeplabv3_mnv2_dm05_pascal_quant"]


@pytest.mark.compiler
@pytest.mark.parametrize("stem", REAL_PAIRS)
def test_real_compiler_agrees_with_check(stem, tmp_path):
    src = shared_file(f"{stem}.tflite")
    report = etc.compile_model(src, tmp_path)
    assert report.succeeded and report.compiler_version
    info = tflite_model.load(src)
    actual = etc.compiled_split(info, tflite_model.load(tmp_path / f"{stem}_edgetpu.tflite"))
    assert etc.disagreements(check_model(info).split_by_type(), actual) == []
    assert report.split_by_type()["edgetpu"] == actual["edgetpu"]


@pytest.mark.compiler
@pytest.mark.tf
def test_real_compiler_maps_every_op_of_a_model_made_by_edgekit_quantize(digits_int8, tmp_path):
    src = Path(digits_int8.output)
    report = etc.compile_model(src, tmp_path)
    assert report.succeeded
    actual = etc.compiled_split(tflite_model.load(src), tflite_model.load(tmp_path / f"{src.stem}_edgetpu.tflite"))
    assert +actual["cpu"] == {} and check_model(tflite_model.load(src)).verdict == "full"


@pytest.mark.compiler
def test_real_compiler_version():
    compiler = etc.find_compiler()
    assert etc.version_major(etc.compiler_version(compiler)) >= 14


def test_cli_compile_segments(standin, model_copy):
    standin()
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "--segments", "2", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert len([p for p in doc["outputs"] if p.endswith(".tflite")]) == 2
    assert isinstance(doc["check_disagreements"], list)


def test_cli_compile_passes_min_runtime_only_when_given(standin, model_copy, tmp_path):
    argv_file = standin()
    assert CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(tmp_path)]).exit_code == 0
    assert "--min_runtime_version" not in json.loads(argv_file.read_text())
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "-o", str(tmp_path), "--min-runtime", "13"])
    assert r.exit_code == 0
    argv = json.loads(argv_file.read_text())
    assert argv[argv.index("--min_runtime_version") + 1] == "13"


def test_cli_compile_without_an_op_table_prints_the_compilers_own_counts(standin, tmp_path):
    """No table on the console nor in the .log (the stand-in writes an empty one): the console's counts,
    yolov8n's real ones."""
    model, compiled, log = _yolov8n(tmp_path)
    standin(OUTPUT_MODEL=compiled, LOG=log, TABLE="none")
    r = CliRunner().invoke(cli, ["compile", str(model), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0 and "Ops: 230 on the Edge TPU, 25 on the CPU" in r.output


@pytest.mark.skipif(
    not (Path("/bin/true").exists() and Path("/bin/false").exists()), reason="needs /bin/true, /bin/false"
)
@pytest.mark.parametrize("exe, code", [("/bin/false", 1), ("/bin/true", 0)])
def test_a_compiler_that_prints_no_version_is_no_compiler(monkeypatch, exe, code):
    """Was: a 4-line error with the banner pasted in, "failed (exit 0)", and empty --json stdout."""
    monkeypatch.setenv("EDGETPU_COMPILER", exe)
    model = str(shared_file("split_concat.tflite"))
    r = CliRunner().invoke(cli, ["compile", model])
    assert r.exit_code == 4, r.output
    lines = r.stderr.strip().splitlines()  # GNU's print their --version banner: its first line is quoted
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"error: {exe} is not a working edgetpu_compiler: `--version` exited {code} and printed "
    )
    assert lines[0].endswith(
        ", not a version (point EDGETPU_COMPILER (or PATH) at Coral's edgetpu_compiler, "
        "and check that it runs here (x86-64 Linux))"
    )
    assert "offline prediction" in r.stdout
    r = CliRunner().invoke(cli, ["compile", model, "--json"])
    assert r.exit_code == 4 and json.loads(r.stdout)["compiled"] is False


def test_a_banner_without_a_version_is_quoted_on_one_line(standin, model_copy, tmp_path):
    exe = tmp_path / "bin" / "edgetpu_compiler"
    exe.write_text("#!/bin/sh\necho 'Some Other Tool 1.2'\necho 'usage: ...'\necho 'more'\nexit 2\n")
    r = CliRunner().invoke(cli, ["compile", str(model_copy)])
    assert r.exit_code == 4
    assert len(r.stderr.strip().splitlines()) == 1 and "printed 'Some Other Tool 1.2', not a version" in r.stderr


def test_a_hanging_version_probe_costs_its_own_short_timeout(standin, model_copy, tmp_path, monkeypatch):
    """Was: a fixed 30 s, and a hint to raise --timeout, which does not apply to the probe."""
    exe = tmp_path / "bin" / "edgetpu_compiler"
    exe.write_text("#!/bin/sh\nsleep 30\n")
    monkeypatch.setattr(etc, "VERSION_TIMEOUT_S", 0.5)
    start = time.monotonic()
    r = CliRunner().invoke(cli, ["compile", str(model_copy), "--timeout", "600"])
    assert time.monotonic() - start < 10
    assert r.exit_code == 4 and f"{exe} --version did not answer within 0.5 s" in r.stderr
    assert "--timeout" not in r.stderr
