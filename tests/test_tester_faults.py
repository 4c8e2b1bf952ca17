"""Faults a tester met on a single node, each ending in one line or the right behaviour (docs/reliability.md's
table): `--server` without `--engine`, an integer past 64 bits, an unknown `--profile`, a workdir with no run in it
or one that cannot be made."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from kimi_eagle_data.profile import PROFILES, plugin_hint
from tests.helpers.cli import error_lines, run_cli
from tests.helpers.servers import TINY, Server

LOCAL_B6 = ["B6", "--profile", "tiny-kimi", "--model", TINY, "--samples", "--max-new-tokens", "16", "--no-progress"]


def one_line(proc, exit_code: int = 1) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = error_lines(proc) or [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return " ".join(lines[0].split())


# -- --server names a server engine ----------------------------------------------------------------------

def test_server_without_engine_generates_on_that_server_with_sglang(tmp_path):
    server = Server().start()
    try:
        w = tmp_path / "w"
        run_cli("build", *LOCAL_B6, "--workdir", str(w), "--server", server.url, "--retry-backoff", "0.05")
        served = server.served()
    finally:
        server.kill()
    options = json.loads((w / "run.json").read_text())["options"]
    assert options["engine"] == "sglang" and options["servers"] == [server.url]
    with closing(sqlite3.connect(w / "generations.sqlite")) as db:
        (engine,) = db.execute("SELECT value FROM meta WHERE key = 'engine'").fetchone()
        rows = db.execute("SELECT count(*) FROM completions").fetchone()[0]
    assert json.loads(engine)["engine"] == "sglang"
    assert rows > 0 and served >= rows       # every completion came from the server, none from an in-process model


def test_local_engine_with_a_server_is_a_usage_error_and_makes_nothing(tmp_path):
    w = tmp_path / "w"
    proc = run_cli("build", *LOCAL_B6, "--workdir", str(w), "--engine", "local", "--server", "http://127.0.0.1:9",
                   check=False)
    line = one_line(proc, exit_code=2)
    assert "the local engine runs the model in this process and talks to no server: drop --server, or use " \
           "--engine sglang (or vllm)" in line, line
    assert not w.exists()


def test_a_library_caller_cannot_pair_the_local_engine_with_servers():
    from kimi_eagle_data.run_checks import SettingError
    from kimi_eagle_data.settings import RunSettings

    with pytest.raises(SettingError, match="engine 'local' runs the model in this process"):
        RunSettings(workdir="w", engine="local", servers=["http://127.0.0.1:9"])


def test_an_explicit_local_engine_drops_the_servers_run_json_names(tmp_path):
    """A workdir generated on servers, then continued in-process: the servers were the server engine's."""
    from kimi_eagle_data.settings import inherit

    values = inherit({"workdir": str(tmp_path), "engine": "local", "servers": []}, {"engine"},
                     {"engine": "sglang", "servers": ["http://127.0.0.1:9"]}, tmp_path / "run.json")
    assert values["engine"] == "local" and values["servers"] == []
    values = inherit({"workdir": str(tmp_path), "engine": "local", "servers": ["http://127.0.0.1:9"]}, {"servers"},
                     {"engine": "vllm"}, tmp_path / "run.json")
    assert values["engine"] == "vllm"     # the server engine run.json names stays


# -- numbers past 64 bits, an unknown profile --------------------------------------------------------------

@pytest.mark.parametrize("toml, key", [("[partitions.B6]\nn = 99999999999999999999999\n", "partitions.B6.n"),
                                       ("seed = -99999999999999999999999\n", "seed"),
                                       ("[sampling]\nmax_new_tokens = 99999999999999999999999\n",
                                        "sampling.max_new_tokens")])
def test_an_integer_past_64_bits_in_a_config_file_is_one_line_and_leaves_nothing(toml, key, tmp_path):
    file = tmp_path / "partitions.toml"
    file.write_text(toml)
    w = tmp_path / "w"
    for command in ("build", "prepare"):
        line = one_line(run_cli(command, *LOCAL_B6[:-1], "--workdir", str(w), "--config", str(file), check=False))
        assert line.startswith(f"error: {file}: {key}: ") and "is out of range: at most 9,223,372,036,854,775,807 " \
                                                             "(a 64-bit integer)" in line, line
        assert not w.exists()     # no run.json, no .lock


@pytest.mark.parametrize("option", ["--max-new-tokens", "--limit", "--batch-size", "--workers"])
def test_an_option_past_64_bits_is_a_usage_error(option, tmp_path):
    w = tmp_path / "w"
    line = one_line(run_cli("build", *LOCAL_B6, "--workdir", str(w), option, "9" * 23, check=False), exit_code=2)
    assert "is out of range: at most 9,223,372,036,854,775,807 (a 64-bit integer)" in line, line
    assert not w.exists()


# The registry's names, as the line lists them (kimi-k2.5, kimi-k3 and their tiny models).
KNOWN_PROFILES = ", ".join(sorted(PROFILES))


@pytest.mark.parametrize("command", [["prepare", "B6", "--samples"], ["build", "B6", "--samples"],
                                     ["serve", "--device", "cpu", "--dry-run"]])
def test_an_unknown_profile_is_one_line_on_every_command(command, tmp_path):
    w = tmp_path / "w"
    where = ["--workdir", str(w)] if command[0] != "serve" else []
    line = one_line(run_cli(*command, *where, "--profile", "kimi-k9", check=False), exit_code=2)
    assert line.endswith(f"unknown model profile 'kimi-k9'; known: {KNOWN_PROFILES}"), line
    assert not w.exists()


def test_an_unknown_profile_in_run_json_names_run_json(prepared_b6, tmp_path):
    import shutil

    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    run = json.loads((w / "run.json").read_text())
    run["options"]["profile"] = "kimi-k9"
    (w / "run.json").write_text(json.dumps(run))
    line = one_line(run_cli("validate", "--workdir", str(w), check=False))
    assert line == f"error: {w.resolve()}/run.json: options.profile: unknown model profile 'kimi-k9'; known: " \
                   f"{KNOWN_PROFILES}; the workdir was made with it: {plugin_hint()}", line


# -- a workdir with no run, or one that cannot be made ---------------------------------------------------

@pytest.mark.parametrize("command", ["generate", "validate", "emit", "score"])
def test_a_workdir_without_run_json_says_there_is_no_run(command, tmp_path):
    for w, why in ((tmp_path, "it has no run.json"), (tmp_path / "nowhere", "it does not exist")):
        line = one_line(run_cli(command, "--workdir", str(w), check=False))
        assert line == f"error: no run in {w.resolve()} ({why}): start one there with `kimi-data build` (or " \
                       "`prepare`), or pass the --workdir of an existing run", line
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("workdir", ["/proc/x", "/proc/x/y"])
def test_a_workdir_that_cannot_be_made_is_one_line_naming_it(workdir):
    line = one_line(run_cli("build", *LOCAL_B6, "--workdir", workdir, check=False))
    assert line == f"error: cannot make the workdir {workdir} (No such file or directory); pass a --workdir in a " \
                   "folder you can write", line


# -- emit with pending samples ------------------------------------------------------------------------------

def test_an_emit_with_pending_samples_names_them_per_config(prepared_b6, tmp_path):
    """A shard-only emit (shard 0 of 2 generated, shard 1 not yet): the dataset of what is done, exit 0, and a
    warning that counts the pending samples per config, as the manifest records them."""
    import re
    import shutil

    w = tmp_path / "w"
    shutil.copytree(prepared_b6, w)
    run_cli("generate", "--workdir", str(w), "--shard", "0/2", "--no-progress")
    proc = run_cli("emit", "--workdir", str(w))
    counts = json.loads((w / "dataset" / "manifest.json").read_text())["configs"]["B6"]["counts"]
    assert 0 < counts["pending"] < counts["prepared"]
    warning = " ".join(line for line in " ".join(proc.stderr.split()).split("warning: ") if "pending" in line)
    assert re.fullmatch(
        rf"{counts['pending']} samples are pending \(B6 {counts['pending']} of {counts['prepared']}\): neither "
        r"generated nor failed yet, so this dataset lacks them \(the manifest and card count them as pending\); "
        rf"finish their generate \(`kimi-data generate --workdir {w.resolve()}`, or every shard's, merged with "
        r"--merge\) and emit again ?", warning), proc.stderr
    run_cli("generate", "--workdir", str(w), "--shard", "1/2", "--no-progress")
    proc = run_cli("emit", "--workdir", str(w))
    assert "pending" not in proc.stderr, proc.stderr
    assert json.loads((w / "dataset" / "manifest.json").read_text())["configs"]["B6"]["counts"]["pending"] == 0
