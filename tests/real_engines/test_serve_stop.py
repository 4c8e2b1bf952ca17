"""`kimi-data serve` stopped by SIGTERM (a scheduler ending the job) exits as every stopped command does: 143 and
"interrupted by SIGTERM: the server stopped", whatever status the engine it stopped exits with, and the engine is
gone. Real vLLM on CPU (its recipe's venv; the tier fails, never skips, when it is missing)."""

from __future__ import annotations

import os
import re
import signal

import pytest

from tests.helpers.servers import free_port, wait_for
from tests.real_engines.servers import installed_venv, vllm_server

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3600)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> set[int]:
    found = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(d))
    return found


def test_sigterm_to_serve_of_a_healthy_engine_exits_143_and_stops_the_engine(tmp_path):
    installed_venv("vllm")
    server = vllm_server(tmp_path, port=free_port()).start()       # healthy, a request answered
    try:
        engines = children(server.proc.pid)
        assert engines, "serve started no engine process"
        # serve has seen the engine healthy itself (its own line), not only the test's probe
        wait_for(lambda: "is healthy at" in server.log.read_text(errors="replace"), 300, "serve never said healthy")
        os.kill(server.proc.pid, signal.SIGTERM)      # serve alone, as a scheduler's signal to the job step
        assert server.proc.wait(timeout=300) == 143, server.log_tail()
        log = server.log.read_text(errors="replace")
        assert "interrupted by SIGTERM: the server stopped" in " ".join(log.split()), server.log_tail()
        # No traceback through serve's own code. vLLM's own shutdown may log one in its lines (its output handler
        # meeting the engine core it is stopping: "(APIServer pid=…) ERROR … async_llm.py"); that one is vLLM's.
        after = log.split("is healthy at", 1)[1]
        assert not re.search(r'File "[^"]*kimi_eagle_data', after), server.log_tail()
        assert all("(APIServer" in line or "EngineCore" in line for line in after.splitlines()
                   if "Traceback" in line), server.log_tail()
        wait_for(lambda: not any(alive(p) for p in engines), 120, "the engine outlived serve")
    finally:
        server.stop(signal.SIGKILL)
