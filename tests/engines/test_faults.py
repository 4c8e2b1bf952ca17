"""Bad inputs and broken servers, each answered without a traceback: malformed /generate answers,
out-of-range settings (CLI, TOML, run.json), a 50 MB source row, a bad --server, a run whose
samples all failed, config names with path pieces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import orjson
import pytest

from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.engines.sglang import check_output_ids
from kimi_eagle_data.run_checks import url_problem

from tests.helpers.cli import REPO, error_lines, run_cli
from tests.helpers.servers import Server, free_port, get_json, sglang_router
from tests.helpers.standin_server import BAD_OUTPUT_MODES
from tests.helpers.workdirs import completions, prepare_args, prepared_count, sglang_args


# -- the response check, unit by unit ----------------------------------------------------------------

@pytest.mark.parametrize("ids, meta, why", [
    (["x"], None, "is str"),
    ([True], None, "is bool"),
    ([1.0], None, "is float"),
    ([2 ** 70], None, "outside the vocabulary"),
    ([100], None, "outside the vocabulary"),
    ([-1], None, "outside the vocabulary"),
    ([1] * 9, None, "9 output ids for max_new_tokens 8"),
    ([1, 2], 3, "completion_tokens 3 but 2"),
    ("12", None, "expected a list"),
    ([5, True, 7], None, "output_ids[1] is bool"),                  # one bad id among good ones: named
    ([3, 4, 2 ** 70], None, "output_ids[2] = 1180591620717411303424 is outside"),
])
def test_check_output_ids_refuses(ids, meta, why):
    problem = check_output_ids(ids, max_new_tokens=8, vocab_size=100, completion_tokens=meta)
    assert problem and why in problem


def test_check_output_ids_accepts_a_good_answer():
    assert check_output_ids([0, 99, 5], max_new_tokens=3, vocab_size=100, completion_tokens=3) is None
    assert check_output_ids([], max_new_tokens=3, vocab_size=100, completion_tokens=None) is None


# -- malformed answers from a real server ------------------------------------------------------------

@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """One prepared workdir (tiny model) the per-mode tests copy and generate against the stand-in."""
    w = tmp_path_factory.mktemp("faults") / "w"
    run_cli("prepare", *prepare_args(w))
    return w


@pytest.fixture(scope="module")
def healthy():
    s = Server().start()
    yield s
    s.kill()


def test_bad_answers_are_failures_then_retried(prepared, healthy, tmp_path):
    """One server answering every way in BAD_OUTPUT_MODES in turn: each malformed answer is refused (a
    completion stored from any of them would show), the samples are failures, and --retry-failed against a
    healthy server completes them."""
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    n = prepared_count(w)
    modes = sorted(BAD_OUTPUT_MODES)
    bad = Server(*(a for m in modes for a in ("--bad-output", m))).start()
    try:
        proc = run_cli("generate", "--workdir", str(w), "--engine", "sglang", "--server", bad.url, "--max-attempts",
                       "2", "--retry-backoff", "0.01", "--no-progress", check=False)
        assert get_json(bad.url + "/server_info")["bad_answers"] >= len(modes) * 2   # every way, twice at least
    finally:
        bad.kill()
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"0 completed, {n} failed" in proc.stdout and "accounting" in proc.stdout
    assert "--retry-failed" in proc.stderr and len(error_lines(proc)) == 1
    assert completions(w) == []                                       # nothing malformed was stored
    import sqlite3

    rows = sqlite3.connect(w / "generations.sqlite").execute("SELECT reason, message FROM failures").fetchall()
    assert {r[0] for r in rows} == {"bad_response"} and len(rows) == n
    again = run_cli("generate", "--workdir", str(w), "--server", healthy.url, "--retry-failed")
    assert f"generate: {n} completed, 0 failed" in again.stdout
    assert len(set(completions(w))) == n


def test_a_rid_an_earlier_client_left_running_is_aborted_then_generated(prepared, tmp_path):
    """A client killed mid-request leaves its requests running on SGLang, which refuses the rerun's request with the
    same rid (HTTP 400 "Duplicate request ID detected"). The stand-in keeps its first rids stale until
    `/abort_request` names them, so the run completes only if the client aborts the stale request and retries."""
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    n = prepared_count(w)
    stale = Server("--stale-rids", "3").start()
    try:
        proc = run_cli("generate", "--workdir", str(w), "--engine", "sglang", "--server", stale.url, "--retry-backoff",
                       "0.01",
                       "--no-progress")
    finally:
        stale.kill()
    assert f"generate: {n} completed, 0 failed" in proc.stdout
    assert len(set(completions(w))) == n


def test_a_stale_rid_behind_the_router_is_aborted_on_its_worker_then_generated(prepared, tmp_path):
    """The same behind the real sglang-router, which has no /abort_request of its own: the client sends the abort
    to the workers the router lists (one here, so that a retry cannot dodge the stale request on another)."""
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    n = prepared_count(w)
    stale = Server("--stale-rids", "3").start()
    try:
        with sglang_router(stale.url) as url:
            proc = run_cli("generate", "--workdir", str(w), "--server", url, "--retry-backoff", "0.01",
                           "--no-progress")
    finally:
        stale.kill()
    assert f"generate: {n} completed, 0 failed" in proc.stdout
    assert len(set(completions(w))) == n


def test_a_timed_out_request_is_aborted_and_retried_under_a_fresh_id(prepared, tmp_path):
    """A server slower than --request-timeout: every try times out. Each timed-out request is aborted on the server
    (it would otherwise generate on beside its retry), the retry goes out under a fresh id (never refused as a
    duplicate of the one just abandoned), and the samples fail with reason `timeout` after --max-attempts tries."""
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    n = prepared_count(w)
    slow = Server("--delay", "30").start()
    try:
        proc = run_cli("generate", "--workdir", str(w), "--engine", "sglang", "--server", slow.url,
                       "--request-timeout", "1", "--max-attempts", "2", "--retry-backoff", "0.01", "--no-progress",
                       check=False)
        aborted = slow.aborted()
        still_running = slow.running()
    finally:
        slow.kill()
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    import sqlite3

    rows = sqlite3.connect(w / "generations.sqlite").execute("SELECT id, reason, attempts, message FROM failures"
                                                             ).fetchall()
    assert len(rows) == n and {(r[1], r[2]) for r in rows} == {("timeout", 2)}, rows
    assert "--request-timeout 1 s" in rows[0][3]
    # Every timed-out request was aborted before the client gave up: the first try's id and the retry's fresh one.
    assert sorted(aborted) == sorted(x for r in rows for x in (r[0], f"{r[0]}.retry2")), aborted
    assert still_running == set()


def test_all_failed_build_exits_3_and_says_how_to_retry(tmp_path):
    w = tmp_path / "w"
    broken = Server("--error-rate", "1.0").start()
    try:
        proc = run_cli("build", *sglang_args(w, broken.url, extra=("--max-attempts", "1")), check=False)
    finally:
        broken.kill()
    n = prepared_count(w)
    assert proc.returncode == 3, proc.stderr
    assert f"0 completed, {n} failed" in proc.stdout and "dataset summary" in proc.stdout
    assert "rerun with --retry-failed" in proc.stderr and "Traceback" not in proc.stderr


# -- settings: one check, wherever they come from ----------------------------------------------------

BAD_SETTINGS = [("temperature", "-1", "must be in [0, 2], got -1.0"),
                ("temperature", "1e308", "must be in [0, 2], got 1e+308"),    # sampled uniformly, before bounds
                ("top_p", "7", "must be in (0, 1]"),
                ("top_p", "0", "must be in (0, 1]"), ("max_new_tokens", "-3", "must be at least 1")]


@pytest.mark.parametrize("key, value, why", BAD_SETTINGS)
def test_bad_sampling_in_the_cli_is_a_usage_error(key, value, why, tmp_path):
    proc = run_cli("prepare", "B6", "--workdir", str(tmp_path / "w"), f"--{key.replace('_', '-')}", value,
                   check=False)
    assert proc.returncode == 2 and why in proc.stderr


@pytest.mark.parametrize("key, value, why", BAD_SETTINGS)
def test_bad_sampling_in_the_toml_is_one_line(key, value, why, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[sampling]\n{key} = {value}\n")
    proc = run_cli("prepare", "B6", "--workdir", str(tmp_path / "w"), "--config", str(cfg), check=False)
    assert proc.returncode == 1 and len(error_lines(proc)) == 1, proc.stderr
    assert f"sampling.{key}: {why}" in proc.stderr and not (tmp_path / "w" / "run.json").exists()


def test_bad_sampling_in_run_json_is_one_line(prepared, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    run = json.loads((w / "run.json").read_text())
    run["options"]["top_p"] = 7
    (w / "run.json").write_text(json.dumps(run))
    proc = run_cli("generate", "--workdir", str(w), check=False)
    assert proc.returncode == 1 and len(error_lines(proc)) == 1, proc.stderr
    assert "run.json: options.top_p: must be in (0, 1], got 7.0" in proc.stderr


def test_run_settings_outside_the_cli_get_the_same_check(tmp_path):
    from kimi_eagle_data.runs import RunSettings
    from kimi_eagle_data.run_checks import SettingError

    with pytest.raises(SettingError, match=r"temperature: must be in \[0, 2\], got -1.0"):
        RunSettings(workdir=str(tmp_path), temperature=-1.0)
    with pytest.raises(SettingError, match=r"max_new_tokens: 1,000,000,000,000 leaves no room for a prompt in "
                                           r"max_seq_len 1,022 \(profile tiny-kimi's\): at most 1,021"):
        RunSettings(workdir=str(tmp_path), profile="tiny-kimi", max_new_tokens=10 ** 12)


# max_new_tokens must leave a prompt room in max_seq_len: the profile's context when unset. Before, a value past it
# reached prepare, which rejected every row (prompt_too_long) without naming the option.
TINY_SEQ = 1022     # the tiny-kimi profile's max_seq_len (asserted below)
PAST_THE_CONTEXT = ("1,000,000,000,000 leaves no room for a prompt in max_seq_len 1,022 (profile tiny-kimi's): at "
                    "most 1,021")


def test_max_new_tokens_past_the_context_names_the_option_and_the_limit(tmp_path):
    from kimi_eagle_data.profile import get_profile

    assert get_profile("tiny-kimi").max_seq_len == TINY_SEQ
    w = tmp_path / "w"
    args = ("B6", "--samples", "--profile", "tiny-kimi", "--workdir", str(w))
    proc = run_cli("prepare", *args, "--max-new-tokens", "1000000000000", check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"Invalid value for '--max-new-tokens': {PAST_THE_CONTEXT}" in " ".join(proc.stderr.split())
    # A max_seq_len below the profile's max_new_tokens leaves no room either: that option is named.
    proc = run_cli("prepare", *args, "--max-seq-len", "100", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Invalid value for '--max-seq-len': 100 leaves no room for a prompt after max_new_tokens 192 (profile " \
           "tiny-kimi's): at least 193" in " ".join(proc.stderr.split())
    cfg = tmp_path / "c.toml"
    cfg.write_text("[sampling]\nmax_new_tokens = 1000000000000\n")
    proc = run_cli("prepare", *args, "--config", str(cfg), check=False)
    assert proc.returncode == 1, proc.stderr
    assert error_lines(proc) == [f"error: {cfg}: sampling.max_new_tokens: {PAST_THE_CONTEXT}"], proc.stderr
    assert not w.exists()


def test_max_new_tokens_past_the_context_in_run_json_names_run_json(prepared, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    run = json.loads((w / "run.json").read_text())
    run["options"]["max_new_tokens"] = 10 ** 12
    (w / "run.json").write_text(json.dumps(run))
    proc = run_cli("generate", "--workdir", str(w), check=False)
    assert proc.returncode == 1 and error_lines(proc) == \
        [f"error: {w.resolve()}/run.json: options.max_new_tokens: {PAST_THE_CONTEXT}"], proc.stderr


# -- a 50 MB source row --------------------------------------------------------------------------------

HUGE_ROW_SCRIPT = textwrap.dedent("""
    import resource, sys, orjson
    import kimi_eagle_data.sources.readers as readers
    from kimi_eagle_data.formats.kimi_k2.format import KimiK2Format
    from kimi_eagle_data.sources.partitions import PARTITIONS
    from kimi_eagle_data.sources.filters import max_row_bytes
    from kimi_eagle_data.prompts.prepare import PromptModes, prepare_rows
    from kimi_eagle_data.profile import get_profile
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
    from kimi_eagle_data.sources.readers import iter_source
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    parsed, rendered = [], []      # bytes the JSON parser was given, characters the chat template was given

    class RecordingParser:         # the readers' orjson, recording the size of every input it parses
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(data):
            parsed.append(len(data))
            return orjson.loads(data)

    class RecordingFormat(KimiK2Format):   # K2.5's, recording the characters of every prompt it renders
        def render_prompt(self, messages, tools, mode="thinking", effort=None):
            rendered.append(sum(len(str(m.get("content") or "")) for m in messages))
            return super().render_prompt(messages, tools, mode, effort)

    readers.orjson = RecordingParser
    tok = open_tokenizer(str(TINY_MODEL_DIR))
    gen = tok.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    part = PARTITIONS["B6"]
    cap = max_row_bytes(16384)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    desc, rows = iter_source(part, sys.argv[1], max_row_bytes=cap)
    rows = list(rows)                      # the huge row is refused here, while read
    handed_out = [len(orjson.dumps(row)) for _, row in rows if isinstance(row, dict)]
    records, rejections, report = prepare_rows(part, rows, tok, max_new_tokens=64,
                                               modes=PromptModes.of(get_profile("tiny-kimi"), tok, RecordingFormat(), gen),
                                               max_seq_len=16384, source_desc=desc)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    print(orjson.dumps({"cap": cap, "parsed": parsed, "handed_out": handed_out, "rendered": rendered, "grew": grew,
                        "prepared": report.prepared, "rejected": dict(report.rejected),
                        "messages": [r.message for r in rejections]}).decode())
""")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_50_mb_row_is_rejected_unparsed_with_flat_memory(fmt, tmp_path):
    size = 50_000_000
    ok = {"prompt": "hi", "prompt_id": "ok", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
    huge = {"prompt": "x", "prompt_id": "huge", "messages": [{"role": "user", "content": "a" * size}]}
    path = tmp_path / f"rows.{fmt}"
    if fmt == "jsonl":
        path.write_bytes(orjson.dumps(ok) + b"\n" + orjson.dumps(huge) + b"\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([ok, huge]), path)
    del huge
    proc = subprocess.run([sys.executable, "-c", HUGE_ROW_SCRIPT, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["prepared"] == 1 and r["rejected"] == {"too_many_chars": 1}, r
    assert "not parsed" in r["messages"][0]
    # Refused while read: never parsed into a Python row nor rendered (both were done once, 6 minutes of it).
    assert max(r["parsed"], default=0) <= r["cap"] and max(r["handed_out"]) <= r["cap"], r
    assert r["rendered"] == [len("What is 2 + 2?")], r          # the small row only
    # Parquet holds the batch in Arrow (one copy of the row); JSONL never holds it. Either way far
    # below the row × 10 (and 12.5 GB) of parsing and rendering it.
    assert r["grew"] < (2 * size if fmt == "parquet" else size // 2), r
    print(f"{fmt}: rejected unparsed, peak RSS grew {r['grew'] / 1e6:.1f} MB")


def test_default_max_chars_rejects_before_rendering(tiny_tokenizer):
    from kimi_eagle_data.sources.partitions import PARTITIONS
    from kimi_eagle_data.sources.filters import default_max_chars
    from kimi_eagle_data.profile import get_profile
    from kimi_eagle_data.prompts.prepare import PromptModes, prepare_rows

    rows = [(1, {"prompt": "x", "prompt_id": "p", "messages": [{"role": "user", "content": "b" * 20_000}]})]
    modes = PromptModes.of(get_profile("tiny-kimi"), tiny_tokenizer, KIMI_K2_FORMAT, [1])
    _, rejections, _ = prepare_rows(PARTITIONS["B6"], rows, tiny_tokenizer, modes=modes, max_new_tokens=64,
                                    max_seq_len=510, source_desc="t")
    assert [r.reason for r in rejections] == ["too_many_chars"] and default_max_chars(510) < 20_000
    assert "default: max_seq_len × 32" in rejections[0].message


# -- --server -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["notaurl", "ftp://host:1", "http://", "http://host:notaport", "127.0.0.1:30000"])
def test_a_server_that_is_not_a_url_is_a_usage_error_at_once(url, tmp_path):
    proc = run_cli("generate", "B6", "--workdir", str(tmp_path / "w"), "--engine", "sglang", "--server", url,
                   check=False)
    assert proc.returncode == 2 and "--server" in proc.stderr and "http" in proc.stderr, proc.stderr
    # At once: refused while the options are read, before a workdir exists or any server is waited for.
    assert not (tmp_path / "w").exists() and "not healthy" not in proc.stderr and url_problem(url)


def test_fault_injection_is_the_test_stand_ins_not_the_user_facing_serve():
    proc = run_cli("serve", "--engine", "local", "--delay", "1", check=False)
    assert proc.returncode == 2 and "No such option '--delay'" in proc.stderr, proc.stderr
    shown = run_cli("serve", "--help").stdout
    assert not any(flag in shown for flag in ("--error-rate", "--drop-rate", "--bad-output", "--stale-rids",
                                              "--fault-seed", "--record-requests", "--skip-tokenizer-init"))
    stand_in = subprocess.run([sys.executable, "-m", "tests.helpers.standin_server", "--help"], capture_output=True,
                              text=True, cwd=REPO, timeout=600)
    assert stand_in.returncode == 0 and "--error-rate" in stand_in.stdout and "--delay" in stand_in.stdout


def test_connection_refused_still_waits_for_health(prepared, tmp_path):
    w = tmp_path / "w"
    shutil.copytree(prepared, w)
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("generate", "--workdir", str(w), "--engine", "sglang", "--server", url, "--health-timeout", "3",
                   check=False)
    # The line is written only when the health deadline has passed, naming the refusal it kept getting.
    assert proc.returncode == 1 and "not healthy after 3s" in proc.stderr, proc.stderr
    assert "(connection refused)" in proc.stderr and len(error_lines(proc)) == 1, proc.stderr
    assert f"waiting for the sglang server at {url}: connection refused" in proc.stderr


# -- config names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("inspect", "{w}", "../../x", "B6-0000"),
    ("stats", "../x", "--workdir", "{w}"),
    ("export", "{w}", "--configs", "B6,../x", "--out", "{w}/out.jsonl"),
    ("plan", "--workdir", "{w}", "--counts", "../x=3"),
    ("prepare", "../x", "--workdir", "{w}"),
])
def test_config_names_with_path_pieces_are_usage_errors(args, prepared):
    proc = run_cli(*(a.format(w=prepared) for a in args), check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "config name" in proc.stderr and "Traceback" not in proc.stderr


def test_workdir_paths_refuse_a_bad_config_name(tmp_path):
    from kimi_eagle_data.run_checks import SettingError
    from kimi_eagle_data.store.workdir import Workdir

    wd = Workdir.at(tmp_path)
    assert wd.prepared("B4") == tmp_path.resolve() / "prepared" / "B4.parquet"
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(SettingError):
            wd.prepared(bad)
