"""The test harness's forked `kimi-data` runs (tests/helpers/forked_cli.py) print and exit exactly as a fresh
`python -m kimi_eagle_data` does: the suite's CLI tests hold for the real command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.cli import popen_cli, run_cli

CASES = [("serve", "--dry-run", "--port", "30123"),                        # stdout, exit 0
         ("generate", "B6", "--engine", "sglang", "--server", "notaurl"),   # a usage error, exit 2
         ("stats", "--workdir", "{tmp}/missing"),                            # a user error, one line, exit 1
         ("prepare", "B6", "--workdir", "{tmp}/w", "--profile", "tiny-kimi", "--samples", "--limit", "3")]                                                  # a table, a workdir written


@pytest.mark.parametrize("args", CASES, ids=[a[0] for a in CASES])
def test_a_forked_run_prints_and_exits_as_a_fresh_interpreter(args, tmp_path):
    runs = {}
    for how in ("forked", "fresh"):
        where = tmp_path / how
        where.mkdir()
        argv = [a.format(tmp=where) for a in args]
        if how == "fresh":
            proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", *argv], capture_output=True, text=True,
                                  env={**os.environ, "COLUMNS": "200"}, timeout=600)
        else:
            proc = run_cli(*argv, check=False)
        runs[how] = (proc.returncode, proc.stdout.replace(str(where), "DIR"), proc.stderr.replace(str(where), "DIR"))
    assert runs["forked"] == runs["fresh"]


def test_a_forked_process_is_a_process_of_its_own(tmp_path):
    proc = popen_cli("serve", "--engine", "local", "--port", "1", "--model", str(tmp_path / "no-model"),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=600)
    assert proc.pid != os.getpid() and proc.returncode == 1, (proc.returncode, err)
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
