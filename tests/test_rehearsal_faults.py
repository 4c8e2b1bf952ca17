"""Faults the production-size rehearsal met (issue 50), each ending in one line or the behaviour a user launching
a week-long run expects: options checked before anything is written, a local source that is what the rows say
they came from, a local model's positions, a config file's own partitions, and nothing silent."""

from __future__ import annotations

from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY

LOCAL_B4 = ["B4", "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens", "16", "--no-progress"]


def one_line(proc, exit_code: int = 1) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = error_lines(proc) or [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return " ".join(lines[0].split())


# -- options are checked before anything is written ------------------------------------------------------

def test_a_merge_directory_that_does_not_exist_is_a_usage_error_and_makes_nothing(tmp_path):
    w = tmp_path / "w"
    line = one_line(run_cli("build", *LOCAL_B4, "--samples", "--limit", "2", "--workdir", str(w),
                            "--merge", str(tmp_path / "nowhere"), check=False), 2)
    assert "--merge" in line and "does not exist" in line, line
    assert not w.exists()


def test_a_merge_directory_without_a_checkpoint_is_one_line_and_makes_nothing(tmp_path):
    w, other = tmp_path / "w", tmp_path / "other"
    other.mkdir()
    line = one_line(run_cli("build", *LOCAL_B4, "--samples", "--limit", "2", "--workdir", str(w),
                            "--merge", str(other), check=False))
    assert line.startswith(f"error: --merge {other}: no generations*.sqlite there"), line
    assert not w.exists()
