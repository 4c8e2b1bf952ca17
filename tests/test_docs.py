"""The documentation a user reads: every reference points at a file that exists, the reason codes in
docs/token-rules.md are exactly the ones the code emits, and the example config states the code's defaults."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.profile import KIMI_K25
from kimi_eagle_data.prompts.prepare import REASON_STAGE
from kimi_eagle_data.sources.filters import default_max_chars
from kimi_eagle_data.validate.check import CHECK_REASONS
from kimi_eagle_data.validate.rules import REASON_TEMPLATES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "kimi_eagle_data"

# The team's internal brief is not part of the repository: nothing may cite it. Spelled in pieces, joined at run
# time, so that neither this file nor its bytecode matches a search for the name.
_BRIEF_NAME, _NOTES_NAME = "".join(["SP", "EC"]), "".join(["REFER", "ENCE"])
BRIEF = re.compile(rf"\b{_BRIEF_NAME}\s*§|\b{_BRIEF_NAME}\.md|\b{_NOTES_NAME}\.md")
DOC_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*\w\.md")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
SKIP_DIRS = {".git", "__pycache__", "build", "dist", "node_modules"}


def text_files() -> list[Path]:
    """The repository's text files: `git ls-files` where this is a git checkout, else the tree without build
    outputs and virtual environments."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        paths = [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for p in ROOT.rglob("*"):
            rel = p.relative_to(ROOT).parts
            if rel[0] == ".git" or any(part in SKIP_DIRS or part.startswith(".") or part.endswith(".egg-info") for part in rel[:-1]):
                continue
            if p.is_file() and not any((ROOT / Path(*rel[:i]) / "pyvenv.cfg").exists() for i in range(1, len(rel))):
                paths.append(p)
    files = []
    for p in paths:
        if not p.is_file() or p.stat().st_size > 4 << 20:
            continue
        data = p.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(p)
    return files


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", md.read_text(encoding="utf-8"))    # no headings inside code blocks
    return {slug(m[1]) for m in re.finditer(r"(?m)^#{1,6}\s+(.+?)\s*#*\s*$", text)}


def test_docs_exist_and_the_readme_links_them():
    for name in ("README.md", "data-format.md", "token-rules.md", "workdir.md", "reliability.md"):
        assert (DOCS / name).is_file(), f"docs/{name} is missing"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/README.md)" in readme


def test_nothing_cites_a_document_outside_the_repository():
    files = text_files()
    assert len(files) > 50, "the repository's files were not found"
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
            for p in files for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if BRIEF.search(line)]
    assert not hits, "references to a document that is not in the repository:\n" + "\n".join(hits)


def test_every_docs_path_mentioned_anywhere_exists():
    missing = sorted({f"{p.relative_to(ROOT)}: {m}" for p in text_files()
                      for m in DOC_PATH.findall(p.read_text(encoding="utf-8")) if not (ROOT / m).is_file()})
    assert not missing, "docs/ paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("md", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(md: Path):
    broken = []
    for target in MD_LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):       # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{md.relative_to(ROOT)}:\n" + "\n".join(broken)


def emitted_prepare_codes() -> set[str]:
    """Every reason a prepare rejection can carry: the filters' (REASON_STAGE), the adapters' and readers'
    SourceRowError codes, and the codes prepare passes to its reject()."""
    codes = set(REASON_STAGE)
    for src in (PACKAGE / "sources").glob("*.py"):
        codes |= set(re.findall(r'SourceRowError\(\s*"(\w+)"', src.read_text(encoding="utf-8")))
    codes |= set(re.findall(r'reject\(\w+, "(\w+)"', (PACKAGE / "prompts" / "prepare.py").read_text(encoding="utf-8")))
    return codes


def documented_codes() -> set[str]:
    """The reason codes docs/token-rules.md lists: the `reason code` column of its tables."""
    codes: set[str] = set()
    column = None
    for line in (DOCS / "token-rules.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if column is None:          # a table's header row
            column = cells.index("reason code") if "reason code" in cells else -1
        elif column >= 0 and not set(cells[column]) <= set("-: "):
            code = re.fullmatch(r"`([a-z_]+)`", cells[column])
            assert code, f"docs/token-rules.md: {cells[column]!r} in a reason-code column is not one `code`"
            codes.add(code[1])
    return codes


def test_every_reason_code_the_code_emits_is_documented():
    emitted = set(REASON_TEMPLATES) | set(CHECK_REASONS) | emitted_prepare_codes()
    assert len(REASON_TEMPLATES) >= 20 and "tool_schema_unsupported" in emitted and "placeholder_input" in emitted
    documented = documented_codes()
    assert not emitted - documented, f"reason codes missing from docs/token-rules.md: {sorted(emitted - documented)}"
    assert not documented - emitted, f"docs/token-rules.md lists codes the code never emits: {sorted(documented - emitted)}"


def commented_table(text: str, header: str) -> dict:
    """The `# key = value` lines right after a commented `# [header]` line, parsed as TOML."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"# [{header}]"))
    body = []
    for ln in lines[start + 1:]:
        if not re.match(r"^# \w+ = ", ln):
            break
        body.append(ln[2:].split("#")[0])
    return tomllib.loads("\n".join(body))


def test_example_config_states_the_code_defaults():
    text = (ROOT / "examples" / "partitions.toml").read_text(encoding="utf-8")
    sampling = commented_table(text, "sampling")
    d = KIMI_K25.sampling
    assert sampling == {"max_new_tokens": d.max_new_tokens, "temperature": d.temperature, "top_p": d.top_p,
                        "max_seq_len": KIMI_K25.max_seq_len}
    max_chars = re.search(r"(?m)^# max_chars = (\d+)", text)
    assert max_chars and int(max_chars[1]) == default_max_chars(KIMI_K25.max_seq_len)


# A repository path as the docs write it: `kimi_eagle_data/…`, `scripts/…`, `benchmarks/…`, `tests/…`, `examples/…`,
# `builders/…`, `cards/…` inside backticks. Paths under a run directory (DIR/…, run/…) are not repository paths.
REPO_PATH = re.compile(r"`((?:kimi_eagle_data|scripts|benchmarks|tests|examples|builders|cards)/[\w./-]*[\w/])`")


def test_every_repository_path_the_docs_name_exists():
    missing = []
    for md in markdown_files():
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for path in REPO_PATH.findall(line):
                if not (ROOT / path.split("::")[0]).exists():
                    missing.append(f"{md.relative_to(ROOT)}:{n}: {path}")
    assert not missing, "paths the docs name that do not exist:\n" + "\n".join(missing)


def test_the_readme_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move detail into docs/"


def _code_blocks(text: str) -> list[str]:
    """The shell code blocks of a Markdown text (fenced ```bash, ```sh, ```console or without a language)."""
    blocks, current, shell = [], None, False
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, shell = [], line[3:].strip() in ("", "bash", "sh", "console")
            else:
                if shell:
                    blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_every_option_a_docs_command_line_uses_exists():
    """Each `kimi-data COMMAND … --option` line in a code block of the README or docs/ names an option that
    command takes (click's own parser, no subprocess)."""
    import click

    from kimi_eagle_data.cli.main import main as cli

    bad, checked = [], 0
    for md in markdown_files():
        for block in _code_blocks(md.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                m = re.search(r"\bkimi-data\s+([a-z]+)(?:\s+([a-z]+))?(.*)", line.split("#")[0])
                if not m:
                    continue
                cmd = cli.commands.get(m[1])
                if cmd is None:
                    bad.append(f"{md.relative_to(ROOT)}: no command `kimi-data {m[1]}`")
                    continue
                rest = m[3]
                if isinstance(cmd, click.Group):
                    sub = cmd.commands.get(m[2] or "")
                    if sub is None:
                        bad.append(f"{md.relative_to(ROOT)}: no command `kimi-data {m[1]} {m[2]}`")
                        continue
                    cmd = sub
                elif m[2]:
                    rest = f" {m[2]}{rest}"
                names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
                for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    checked += 1
                    if opt not in names:
                        bad.append(f"{md.relative_to(ROOT)}: `kimi-data {cmd.name}` takes no {opt}")
    assert checked > 30, "the docs' command lines were not found"
    assert not bad, "\n".join(sorted(set(bad)))
