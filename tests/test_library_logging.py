"""The library is quiet: outside kimi_eagle_data/cli/ nothing prints (no rich, print, click.echo, sys.stdout or
sys.stderr); it reports through `logging` and a progress.Progress, so a library caller (the datasets builder, a
script) routes or silences what it says. The CLI shows the same records and snapshots with rich."""

from __future__ import annotations

import ast
import io
import json
import logging
import subprocess
import sys
import textwrap

from rich.console import Console

from tests.test_imports import ENTRY_POINTS, ROOT, module_files, package_dirs

# The importable library: every module the package installs (builders/ and cards/ included, as pyproject.toml maps
# them) but the CLI's and the entry point (`python -m kimi_eagle_data`, which only calls the CLI). scripts/ and
# benchmarks/ are programs that print their reports, not library code.
LIBRARY = sorted(path for name, path in module_files(package_dirs(ROOT)).items()
                 if not (name == "kimi_eagle_data.cli" or name.startswith("kimi_eagle_data.cli."))
                 and name not in ENTRY_POINTS)


def printing(source: str) -> list[str]:
    """What in `source` writes to the terminal itself: rich imports, print, click.echo, sys.stdout/sys.stderr."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "rich"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rich":
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Name) and node.id == "print":
            found.append(f"print (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                (node.value.id, node.attr) in {("click", "echo"), ("click", "secho"), ("sys", "stdout"),
                                               ("sys", "stderr")}):
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def test_the_scan_finds_what_prints():
    assert sorted(printing("from rich.console import Console\nimport rich\nprint('x')\nf(echo=print)\n"
                           "click.echo('x')\nsys.stderr.write('x')\n")) == [
        "click.echo (line 5)", "from rich.console import", "import rich", "print (line 3)", "print (line 4)",
        "sys.stderr (line 6)"]
    assert printing("log = logging.getLogger(__name__)\nlog.info('x %s', 1)\n# print('x')\n") == []


def test_no_library_module_prints():
    assert len(LIBRARY) > 60 and not any("/cli/" in str(p) for p in LIBRARY)
    assert ROOT / "kimi_eagle_data" / "runs.py" in LIBRARY and ROOT / "builders" / "kimi_eagle.py" in LIBRARY
    found = {str(p.relative_to(ROOT)): hits for p in LIBRARY if (hits := printing(p.read_text(encoding="utf-8")))}
    assert found == {}


# A library caller: logging on stderr at WARNING, and a handler of its own that keeps every record of the library
# (whose logger it opens to INFO). The demo's settings, built twice (the second build reuses the first's completions
# and says so).
LIBRARY_BUILD = textwrap.dedent("""
    import json, logging, sys
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().handlers[0].setLevel(logging.WARNING)
    kept = []

    class Keep(logging.Handler):
        def emit(self, record):
            kept.append([record.name, record.levelname, record.getMessage()])

    logging.getLogger("kimi_eagle_data").setLevel(logging.INFO)
    logging.getLogger("kimi_eagle_data").addHandler(Keep())
    from kimi_eagle_data.runs import build, demo_settings, open_run

    for _ in range(2):
        ctx = open_run(demo_settings(sys.argv[1], limit=2, workers=1))
        report = build(ctx)
        ctx.lock.release()
    with open(sys.argv[2], "w") as f:
        json.dump({"records": kept, "train": sum(r.valid for r in report.validate.values())}, f)
""")


def test_a_library_build_prints_nothing_and_logs_its_notes_and_progress(tmp_path):
    records_file = tmp_path / "records.json"
    proc = subprocess.run([sys.executable, "-c", LIBRARY_BUILD, str(tmp_path / "w"), str(records_file)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == "", (proc.stdout, proc.stderr)
    result = json.loads(records_file.read_text())
    assert result["train"] > 0 and (tmp_path / "w" / "dataset" / "manifest.json").is_file()
    records = result["records"]
    progress = [m for name, level, m in records if name == "kimi_eagle_data.progress"]
    assert progress and progress[-1].startswith("generate: ") and "tok/s" in progress[-1], records
    done, total = progress[-1].removeprefix("generate: ").split(",")[0].split("/")
    assert done == total and int(total) > 0
    assert any(name == "kimi_eagle_data.generate.stage" and level == "INFO" and "reusing" in m
               and "completed samples from an earlier run" in m for name, level, m in records), records


def test_the_cli_shows_the_records_and_draws_the_snapshots():
    from kimi_eagle_data.cli.progress import RecordLines, RichProgress
    from kimi_eagle_data.progress import Snapshot

    out = io.StringIO()
    console = Console(file=out, width=200)
    handler = RecordLines(console)
    log = logging.getLogger("kimi_eagle_data.test")
    for level, message in ((logging.INFO, "reusing 3 completed samples"), (logging.WARNING, "a [bold]label[/]")):
        handler.handle(log.makeRecord(log.name, level, __file__, 1, message, (), None))
    assert out.getvalue().splitlines() == ["reusing 3 completed samples", "warning: a [bold]label[/]"]

    out.truncate(0)
    out.seek(0)
    bar = RichProgress(console)
    bar.start("generate", 4)
    for done in range(1, 8):
        bar.update(Snapshot("generate", done, 7, 100.0, 2, {"stop": done}))
    bar.stop()
    assert "generate" in out.getvalue() and "7/7" in out.getvalue() and "stop=7" in out.getvalue()
