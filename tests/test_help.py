"""Each command takes and shows only the options of what it reads, under headings (Run, Model, Sources, Sampling,
Engine, Validation, Output; the command's own options first), every shared option declared once (settings.py);
an option of another command is a usage error."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kimi_eagle_data.cli.main import main
from kimi_eagle_data.settings import DECLARED, SECTIONS

RUN = ["--workdir", "--shard", "--merge", "--no-progress"]
MODEL = ["--profile", "--model", "--tokenizer", "--preserve-thinking", "--no-preserve-thinking"]
SOURCES = ["--config", "--samples", "--source", "--revision", "--limit"]
SAMPLING = ["--max-new-tokens", "--temperature", "--top-p", "--max-seq-len"]
ENGINE = ["--engine", "--server", "--concurrency", "--batch-size", "--max-attempts", "--retry-backoff",
          "--request-timeout", "--health-timeout", "--allow-old-server", "--retry-failed"]
VALIDATION = ["--keep-truncated", "--workers"]

# What each command's help shows, heading by heading, in order: written out here, not derived from settings.py.
EXPECTED = {
    "demo": {"Options": ["--profile", "--help"], "Run": ["--workdir", "--no-progress"], "Sources": ["--limit"],
             "Validation": ["--workers"]},
    "build": {"Options": ["--help"], "Run": RUN, "Model": MODEL, "Sources": SOURCES, "Sampling": SAMPLING,
              "Engine": ENGINE, "Validation": VALIDATION, "Output": ["--dataset-version", "--model-label", "--repo"]},
    "prepare": {"Options": ["--dry-run", "--help"], "Run": ["--workdir", "--no-progress"], "Model": MODEL, "Sources": SOURCES,
                "Sampling": SAMPLING},
    "generate": {"Options": ["--help"], "Run": RUN, "Engine": ENGINE, "Validation": ["--keep-truncated"]},
    "validate": {"Options": ["--help"], "Run": ["--workdir", "--merge", "--no-progress"], "Validation": VALIDATION},
    "emit": {"Options": ["--help"], "Run": ["--workdir", "--merge", "--no-progress"], "Validation": VALIDATION,
             "Output": ["--dataset-version", "--model-label", "--repo"]},
    "score": {"Options": ["--limit", "--seed", "--threshold", "--json", "--help"],
              "Run": ["--workdir", "--no-progress"], "Engine": ENGINE},
}


def help_sections(command: str) -> dict[str, list[str]]:
    """{heading: the long options listed under it}, in the order `kimi-data COMMAND --help` prints them."""
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    sections: dict[str, list[str]] = {}
    heading = None
    for line in result.output.splitlines():
        if re.fullmatch(r"[A-Z]\w*:", line):
            heading = line[:-1]
            sections[heading] = []
        elif not line.strip():      # a heading's options end at a blank line (the epilog may follow)
            heading = None
        elif heading and line.startswith("  -"):
            sections[heading] += re.findall(r"--[\w-]+", line.strip().split("  ")[0])
    return sections


@pytest.mark.parametrize("command", list(EXPECTED))
def test_help_lists_exactly_the_commands_options_under_their_headings(command):
    sections = help_sections(command)
    assert sections == EXPECTED[command]
    assert list(sections) == [h for h in ("Options", *SECTIONS) if h in sections]   # the table's order
    assert "CONFIG" in CliRunner().invoke(main, [command, "--help"]).output or command == "demo"


def _value(setting: str) -> list[str]:
    return [] if DECLARED[setting][1].is_flag else ["x"]


@pytest.mark.parametrize("command", list(EXPECTED))
def test_an_option_of_another_command_is_a_usage_error(command, tmp_path):
    taken = {flag for flags in EXPECTED[command].values() for flag in flags}
    foreign = [(n, s.flag) for n, (_, s) in DECLARED.items() if s.flag and s.flag not in taken]
    assert foreign or command == "build"
    for name, flag in foreign:
        result = CliRunner().invoke(main, [command, "--workdir", str(tmp_path / "w"), flag, *_value(name)])
        assert result.exit_code == 2, (flag, result.output)
        assert re.search(rf"No such option:? '?{flag}\b", result.output), (flag, result.output)   # click 8.1, 8.2
    assert not (tmp_path / "w").exists()


def test_prepare_refuses_the_engine_and_validate_the_server():
    """The two the issue names: `prepare --server`, `validate --engine` are usage errors, before anything runs."""
    for args in (["prepare", "--server", "http://127.0.0.1:30000"], ["validate", "--engine", "sglang"]):
        result = CliRunner().invoke(main, [*args, "--workdir", "nowhere"])
        assert result.exit_code == 2 and "No such option" in result.output, (args, result.output)


def test_every_option_of_a_setting_is_under_one_heading():
    flagged = [n for n, (_, s) in DECLARED.items() if s.flag]
    listed = [n for names in SECTIONS.values() for n in names]
    assert sorted(listed) == sorted(flagged)


# -- --profile: a choice of the registry's profiles everywhere --------------------------------------------------

def _help(*command: str) -> str:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize("command", ["build", "prepare", "serve", "check", "render"])
def test_profile_help_lists_every_profile_from_the_registry(command):
    from kimi_eagle_data.profile import PROFILES

    text = _help(command)
    assert f"--profile [{'|'.join(PROFILES)}]" in text, text
    assert "kimi-k3 (Kimi-K3)" in text and "kimi-k2.5 (Kimi-K2.5)" in text, text


def test_demo_profile_help_lists_the_tiny_models():
    assert "--profile [tiny-kimi|tiny-kimi-k2.6|tiny-kimi-k3]" in _help("demo")


def test_each_profiles_defaults_show_in_help():
    from kimi_eagle_data.profile import PROFILES

    text = _help("build")
    assert f"kimi-k3 {PROFILES['kimi-k3'].sampling.max_new_tokens}" in text
    assert "tiny-kimi-k3 256" in text and "tiny-kimi 192" in text, text      # max_new_tokens per profile


def test_top_level_help_and_package_description_name_both_models():
    from tests.test_imports import ROOT, tomllib

    text = _help()
    assert "Kimi-K2.5" in text and "Kimi-K3" in text, text
    summary = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["description"]
    assert "Kimi-K2.5" in summary and "Kimi-K3" in summary, summary


@pytest.mark.parametrize("command", [["check", "rows.jsonl"], ["render", "row.json"]])
def test_an_unknown_profile_is_the_same_usage_error_on_check_and_render(command):
    from kimi_eagle_data.profile import PROFILES

    result = CliRunner().invoke(main, [*command, "--profile", "kimi-k9"])
    assert result.exit_code == 2, result.output
    assert f"unknown model profile 'kimi-k9'; known: {', '.join(sorted(PROFILES))}" in result.output


def test_every_stage_takes_no_progress():
    """Scripts pass --no-progress to each stage they run: every command that works on a workdir's stages takes it."""
    for command in ("build", "prepare", "generate", "validate", "emit", "score", "probe", "demo"):
        shown = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
        assert shown.exit_code == 0 and "--no-progress" in shown.output, command
