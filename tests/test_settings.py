"""One settings model: every setting declared once (settings.py), building RunSettings reads nothing, every command
takes the same options with the same defaults, a command that fails leaves no workdir behind, and the accounting
identity is checked by the pipeline's stages."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields

import click
import pytest

from kimi_eagle_data.cli.main import main
from kimi_eagle_data.runs import (AccountingError, RunSettings, generate_and_account, load_partitions, open_run,
                                  validate_and_account)
from kimi_eagle_data.settings import DECLARED, INHERITED, SECTIONS, saved_options
from kimi_eagle_data.sources.config import ConfigError
from tests.helpers.cli import error_lines, run_cli


def test_every_field_is_declared_in_the_class_body_with_its_option():
    names = [f.name for f in fields(RunSettings)]
    assert names == list(DECLARED) and "concurrency" in RunSettings.__annotations__
    flags = [s.flag for _, s in DECLARED.values() if s.flag]
    assert len(flags) == len(set(flags))     # one option per setting, one setting per option
    assert RunSettings.__module__ == "kimi_eagle_data.settings"


def test_building_the_settings_reads_nothing(tmp_path):
    """A config file and a tokenizer that do not exist, a workdir with a run.json that says otherwise: building the
    settings neither reads them nor makes anything; the explicit steps do read them."""
    w = tmp_path / "w"
    w.mkdir()
    (w / "run.json").write_text(json.dumps({"options": {"engine": "sglang", "top_p": 0.5}}))
    missing_toml = tmp_path / "nowhere" / "partitions.toml"
    s = RunSettings(workdir=str(tmp_path / "new"), config_file=str(missing_toml), tokenizer=str(tmp_path / "no-tok"))
    assert s.configs == [] and s.engine == "local" and s.top_p is None
    assert not (tmp_path / "new").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["w"]
    assert RunSettings(workdir=str(w)).engine == "local"                   # run.json is not read by building
    run_json, saved = saved_options(w)                                     # ... but by this explicit step
    assert run_json == w / "run.json" and saved == {"engine": "sglang", "top_p": 0.5}
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_partitions(s)


def test_settings_are_frozen_and_checked_wherever_they_are_built(tmp_path):
    s = RunSettings(workdir=str(tmp_path))
    with pytest.raises(AttributeError):
        s.engine = "sglang"
    with pytest.raises(ValueError, match="request_timeout: must be > 0"):
        RunSettings(workdir=str(tmp_path), request_timeout=0.0)


def _params(command: str) -> dict[str, click.Parameter]:
    return {p.name: p for p in main.commands[command].params}


def test_score_takes_the_engine_options_with_generates_defaults():
    score, generate = _params("score"), _params("generate")
    engine_options = SECTIONS["Engine"]
    assert {"concurrency", "request_timeout", "max_attempts", "engine", "servers"} <= set(engine_options)
    for name in engine_options:
        assert score[name].default == generate[name].default, name
        assert score[name].opts == generate[name].opts, name
    assert score["concurrency"].default == RunSettings.concurrency == 256
    assert score["request_timeout"].default == RunSettings.request_timeout == 3600.0


def test_score_refuses_an_out_of_range_option_as_generate_does(tmp_path):
    for command in ("score", "generate"):
        proc = run_cli(command, "--workdir", str(tmp_path / "w"), "--request-timeout", "0", check=False)
        assert proc.returncode == 2 and "must be > 0, got 0.0" in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("args, code", [
    (("build", "--config", "{bad}"), 1),               # a config file with an error
    (("prepare", "B6", "--max-new-tokens", "0"), 2),   # an option out of range
    (("prepare", "B9"), 2),                            # an unknown config
    (("generate",), 1),                                # nothing prepared: a typo'd --workdir
    (("validate",), 1),
    (("emit",), 1),
    (("score",), 1),
])
def test_a_failing_command_leaves_no_workdir_behind(args, code, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[sampling]\ntop_p = 7\n")
    w = tmp_path / "typo"
    proc = run_cli(*(a.format(bad=bad) for a in args), "--workdir", str(w), check=False)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and not w.exists()
    if code == 1:
        assert len(error_lines(proc)) == 1, proc.stderr


def test_a_version_that_emit_would_refuse_stops_the_pipeline_before_it_touches_the_workdir(tmp_path):
    from kimi_eagle_data.emit.writer import EmitError
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    w = tmp_path / "w"
    with pytest.raises(EmitError, match="semver"):
        open_run(RunSettings(workdir=str(w), configs=["B6"], profile="tiny-kimi", model=str(TINY_MODEL_DIR),
                             samples=True, version="1.0"))
    assert not w.exists()


def _unbalanced_copy(generated_b6, tmp_path):
    """The generated B6 workdir with one more selected row in prepare's counts than it has prompts or rejections."""
    w = tmp_path / "w"
    shutil.copytree(generated_b6, w)
    report = w / "prepared" / "B6.json"
    counts = json.loads(report.read_text())
    counts["selected"] += 1
    report.write_text(json.dumps(counts))
    return w


def test_the_accounting_identity_is_checked_by_the_pipeline(generated_b6, tmp_path):
    w = _unbalanced_copy(generated_b6, tmp_path)
    _, saved = saved_options(w)
    assert set(saved) == set(INHERITED)
    ctx = open_run(RunSettings(workdir=str(w), progress=False, workers=1, **saved), create=False)
    shown: list[str] = []
    with pytest.raises(AccountingError, match="accounting does not balance for B6"):
        generate_and_account(ctx, lambda stage, report: shown.append(stage))
    assert shown == ["generate", "accounting"]      # the table is shown, then the identity refused
    shown.clear()
    with pytest.raises(AccountingError, match="accounting does not balance for B6"):
        validate_and_account(ctx, lambda stage, report: shown.append(stage))
    assert shown == ["validate"] and not json.loads((w / "validated" / "B6.json").read_text())["balanced"]


def test_an_unbalanced_workdir_is_one_error_line_from_the_cli(generated_b6, tmp_path):
    w = _unbalanced_copy(generated_b6, tmp_path)
    proc = run_cli("validate", "--workdir", str(w), "--workers", "1", check=False)
    assert proc.returncode == 1 and "dataset summary" in proc.stdout and "✓" not in proc.stdout
    assert error_lines(proc) == ["error: accounting does not balance for B6; this is a bug, please report it"]
