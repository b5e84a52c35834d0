"""scripts/failed-tests.py: what .ci/run prints at the end of a failed run."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "failed-tests.py"

LOG = """\
running 3 tests
test a::passes ... ok
test pinned::builds ... FAILED

failures:

---- pinned::builds stdout ----

thread 'pinned::builds' panicked at tests/it/pinned.rs:319:5:
assertion `left == right` failed: CMake configure failed (exit status: 1): `cmake -G Ninja`
--- first errors ---
    FAILED: CMakeFiles/cmTC_1.dir/main.cu.o
    nvcc error   : 'cicc' died due to signal 9 (Kill signal)
-- Detecting CUDA compiler ABI info - failed
CMake Error at Modules/CMakeTestCUDACompiler.cmake:56 (message):
""" + "noise line\n" * 200 + """\
hint: a compiler was killed by signal 9
  left: 1
 right: 0

---- other::fails stdout ----
thread 'other::fails' panicked at tests/it/other.rs:3:1:
""" + "x.cpp:1: error: bad\n" * 40 + """
failures:
    other::fails
    pinned::builds

test result: FAILED. 1 passed; 2 failed
"""


def test_each_failed_test_is_named_with_its_cause_lines(tmp_path):
    log = tmp_path / "test-command.log"
    log.write_text(LOG)
    out = subprocess.run([sys.executable, str(SCRIPT), str(log)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == f"=== pinned::builds (from {log})"
    assert lines[1:10] == [
        "    thread 'pinned::builds' panicked at tests/it/pinned.rs:319:5:",
        "    assertion `left == right` failed: CMake configure failed (exit status: 1): `cmake -G Ninja`",
        "        FAILED: CMakeFiles/cmTC_1.dir/main.cu.o",
        "        nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
        "    CMake Error at Modules/CMakeTestCUDACompiler.cmake:56 (message):",
        "    hint: a compiler was killed by signal 9",
        "      left: 1",
        "     right: 0",
        f"=== other::fails (from {log})",
    ]
    # Each test's lines are bounded, and the failures list and summary add nothing.
    assert len(lines) == 10 + 14
    assert "noise" not in out


def test_a_missing_log_is_said_and_not_fatal(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.log")], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.startswith("failed-tests: cannot read ")
