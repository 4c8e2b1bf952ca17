"""The documentation a user reads: every reference points at a file that exists, the reason codes in
docs/token-rules.md are exactly the ones the code emits, and the example config states the code's defaults."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
from kimi_eagle_data.prompts.prepare import REASON_STAGE
from kimi_eagle_data.sources.filters import default_max_chars
from kimi_eagle_data.validate.check import CHECK_REASONS
from kimi_eagle_data.formats.kimi_k2.rules import REASON_TEMPLATES
from kimi_eagle_data.formats.base import SAMPLE_CODES

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
    SourceRowError codes, and the codes prepare's steps fail a prompt with (`return "code", message`)."""
    codes = set(REASON_STAGE)
    for src in (PACKAGE / "sources").glob("*.py"):
        codes |= set(re.findall(r'SourceRowError\(\s*"(\w+)"', src.read_text(encoding="utf-8")))
    prepare = (PACKAGE / "prompts" / "prepare.py").read_text(encoding="utf-8")
    codes |= set(re.findall(r'(?:reject\(\w+, |return \(?)"(\w+)", ', prepare))
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
    emitted = set(REASON_TEMPLATES) | set(SAMPLE_CODES) | set(CHECK_REASONS) | emitted_prepare_codes()
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


def _option_problems(text: str) -> tuple[list[str], int]:
    """The options in `kimi-data COMMAND [SUBCOMMAND] …` text that the command does not take (click's own parser,
    no subprocess), and how many options were checked."""
    import click

    from kimi_eagle_data.cli.main import main as cli

    m = re.search(r"\bkimi-data\s+([a-z]+)(?:\s+([a-z]+))?(.*)", text)
    if not m:
        return [], 0
    cmd, rest = cli.commands.get(m[1]), m[3]
    if cmd is None:
        return [f"no command `kimi-data {m[1]}`"], 0
    if isinstance(cmd, click.Group):
        cmd = cmd.commands.get(m[2] or "")
        if cmd is None:
            return [f"no command `kimi-data {m[1]} {m[2]}`"], 0
    elif m[2]:
        rest = f" {m[2]}{rest}"
    names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    options = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)
    return [f"`kimi-data {cmd.name}` takes no {o}" for o in options if o not in names], len(options)


def test_every_option_a_docs_command_line_uses_exists():
    """Each `kimi-data COMMAND … --option` line in a code block of the README or docs/ names an option that
    command takes."""
    bad, checked = [], 0
    for md in markdown_files():
        for block in _code_blocks(md.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                problems, n = _option_problems(line.split("#")[0])
                checked += n
                bad += [f"{md.relative_to(ROOT)}: {p}" for p in problems]
    assert checked > 30, "the docs' command lines were not found"
    assert not bad, "\n".join(sorted(set(bad)))


def _inline_commands(text: str) -> list[str]:
    """The `kimi-data …` code spans of a Markdown text, outside fenced blocks (`\\|` in a table cell is a `|`)."""
    prose = re.sub(r"(?ms)^```.*?^```", "", text)
    return [span.replace("\\|", "|") for span in re.findall(r"`(kimi-data [^`]+)`", prose)]


def test_every_option_a_docs_code_span_uses_exists():
    """The same for `kimi-data COMMAND --option` written inline in the prose and tables of the README and docs/."""
    bad, checked = [], 0
    for md in markdown_files():
        for span in _inline_commands(md.read_text(encoding="utf-8")):
            problems, n = _option_problems(span)
            checked += n
            bad += [f"{md.relative_to(ROOT)}: `{span}`: {p}" for p in problems]
    assert checked > 20, "the docs' inline command lines were not found"
    assert not bad, "\n".join(sorted(set(bad)))


def _fenced_blocks(text: str) -> list[str]:
    """Every fenced block's text, whatever its language."""
    return re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)


def test_every_repository_path_in_the_docs_code_exists():
    """A repository path anywhere in a code block or code span — `python scripts/sglang_contract_check.py --url …`,
    `bash scripts/real_engines/run_tier.sh`, `python benchmarks/bench_emit.py` — is there (a path under a run
    directory, such as /shared/kimi/k25/slurm/…, is not a repository path)."""
    path = re.compile(r"(?<![\w/.~$-])((?:kimi_eagle_data|scripts|benchmarks|tests|examples|builders|cards)/[\w./-]*\w)")
    missing, checked = [], 0
    for md in markdown_files():
        text = md.read_text(encoding="utf-8")
        code = _fenced_blocks(text) + re.findall(r"`([^`\n]+)`", re.sub(r"(?ms)^```.*?^```", "", text))
        for snippet in code:
            for p in path.findall(snippet):
                checked += 1
                if not (ROOT / p.split("::")[0]).exists():
                    missing.append(f"{md.relative_to(ROOT)}: {p}")
    assert checked >= 30, f"only {checked} repository paths found in the docs' code: the pattern is broken"
    assert not missing, "paths in the docs' code that do not exist:\n" + "\n".join(sorted(set(missing)))


# A claimed default: "`--max-attempts`, default 5", "(`--limit`, default 200)", "`--retry-backoff`, default 1 s",
# "`max_turns`, default 4", "`min_script_share` (default 0.5)", "`ngram`-word n-gram (default 13", and a table row
# "| `--port P` | … (default 30000) |". Prose may wrap, so lines are joined first.
_VALUE = r"`?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)*|[a-z][\w-]*)`?(?: s)?(?=[),;:|]|$)"
DEFAULT_CLAIM = re.compile(r"`(--[a-z][a-z0-9-]*|[a-z][a-z0-9_.]*)(?: [A-Za-z_<>]+)?`[^`()|.]{0,20}?\(?(?:by )?"
                           r"default:? " + _VALUE)
DEFAULT_ROW = re.compile(r"^\| `(--[a-z][a-z0-9-]*)[^`]*` \|.*?\(default:? " + _VALUE)
# Settings of other tools the docs state defaults of (not ours to check).
OTHER_TOOLS_SETTINGS = {"data.max_length"}     # SpecForge's maximum row length


def _default_claims() -> list[tuple[str, str, str]]:
    claims = []
    for md in markdown_files():
        text = md.read_text(encoding="utf-8")
        where = str(md.relative_to(ROOT))
        claims += [(where, *m.groups()) for line in text.splitlines() if (m := DEFAULT_ROW.match(line))]
        claims += [(where, *m.groups()) for m in DEFAULT_CLAIM.finditer(re.sub(r"[ \t]*\n[ \t]*", " ", text))]
    return claims


def _same(claimed: str, actual) -> bool:
    if isinstance(actual, bool) or actual is None:
        return False
    if isinstance(actual, (int, float)):
        try:
            return float(claimed.replace(",", "")) == float(actual)
        except ValueError:
            return False
    return claimed == str(actual)


def _option_defaults() -> dict[str, list]:
    """Each option -> its defaults: RunSettings' declaration (settings.py) and every command's own click default."""
    import click

    from kimi_eagle_data.cli.main import main as cli
    from kimi_eagle_data.settings import DECLARED

    defaults: dict[str, list] = {}
    for f, s in DECLARED.values():
        if s.flag and f.default is not dataclasses.MISSING:
            defaults.setdefault(s.flag, []).append(f.default)

    def walk(cmd):
        for sub in (cmd.commands.values() if isinstance(cmd, click.Group) else ()):
            walk(sub)
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag:
                for o in p.opts:
                    defaults.setdefault(o, []).append(p.default)
    walk(cli)
    return defaults


def _config_defaults() -> dict[str, list]:
    """Each key of the partition config file -> its defaults (the dataclasses the file is read into)."""
    from kimi_eagle_data.sources.decontam import DecontamSettings
    from kimi_eagle_data.sources.dedup import DedupSettings
    from kimi_eagle_data.sources.modes import ModePlan
    from kimi_eagle_data.sources.partitions import Filters, Partition

    defaults: dict[str, list] = {}
    for cls in (Partition, Filters, DedupSettings, DecontamSettings, ModePlan):
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                defaults.setdefault(f.name, []).append(f.default)
    return defaults


def test_every_default_the_docs_claim_is_the_codes():
    """A default the README or docs/ states for an option or a config key is the one the code declares: an option's
    in settings.py (RunSettings) or on the command that takes it, a config key's in the dataclass it is read into."""
    from kimi_eagle_data.settings import DECLARED

    options, keys = _option_defaults(), _config_defaults()
    run_flags = {s.flag for _, s in DECLARED.values() if s.flag}
    claims = _default_claims()
    wrong, unknown, run_settings_checked = [], [], 0
    for where, name, value in claims:
        if name in OTHER_TOOLS_SETTINGS:
            continue
        actual = options.get(name) if name.startswith("--") else keys.get(name.split(".")[-1])
        if actual is None:
            unknown.append(f"{where}: `{name}` (default {value}): no such option or config key")
        elif not any(_same(value, a) for a in actual):
            wrong.append(f"{where}: `{name}` default {value}; the code's: {', '.join(sorted({str(a) for a in actual}))}")
        elif name in run_flags:
            run_settings_checked += 1
    assert len(claims) >= 15 and run_settings_checked >= 5, f"too few default claims found ({len(claims)}): pattern broken?"
    assert not unknown, "\n".join(unknown)
    assert not wrong, "defaults the docs state that the code does not have:\n" + "\n".join(wrong)


def test_the_code_map_names_every_module():
    """docs/architecture.md has a row per package of kimi_eagle_data/ (and one for its top-level modules); each
    row names every module of its package, subpackages included, and names no module the package lacks."""
    rows = {}
    for line in (DOCS / "architecture.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `kimi_eagle_data/([\w*.]+)/?` \|(.*)\|\s*$", line)
        if m:
            rows[m[1]] = set(re.findall(r"`(\w+\.py)`", m[2]))
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert len(packages) >= 10 and "conversation" in packages
    problems = [f"no row for kimi_eagle_data/{p}/" for p in packages if p not in rows]
    for key, named in rows.items():
        files = PACKAGE.glob("*.py") if key == "*.py" else (PACKAGE / key).rglob("*.py")
        modules = {f.name for f in files if f.name != "__init__.py"}
        problems += [f"kimi_eagle_data/{key}: {m} is not in the code map" for m in sorted(modules - named)]
        problems += [f"kimi_eagle_data/{key}: the code map names {m}, which is not there" for m in sorted(named - modules)]
    assert "*.py" in rows, "no row for the top-level modules (`kimi_eagle_data/*.py`)"
    assert not problems, "docs/architecture.md is behind the code:\n" + "\n".join(problems)


def _table_cells(md: Path, first: str) -> str:
    """The rest of the table row of `md` whose first cell is `first`."""
    for line in md.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0] == first:
            return " | ".join(cells[1:])
    raise AssertionError(f"{md.relative_to(ROOT)}: no table row {first}")


def _listed(cell: str) -> set[str]:
    """The `names` a cell lists, leaving out what it says in parentheses about them."""
    while True:
        bare = re.sub(r"\([^()]*\)", "", cell)
        if bare == cell:
            return set(re.findall(r"`(\w+)`", cell))
        cell = bare


def test_the_workdir_page_lists_every_column_of_every_file(tmp_path):
    """docs/workdir.md's table of files names exactly the columns (or keys, or tables) the code writes."""
    import sqlite3

    from kimi_eagle_data.records import Rejection
    from kimi_eagle_data.schema import LIGHT_SCHEMA, PROMPT_SCHEMA
    from kimi_eagle_data.store.checkpoint import Checkpoint

    page = DOCS / "workdir.md"
    assert _listed(_table_cells(page, "`prepared/<CONFIG>.parquet`")) == set(PROMPT_SCHEMA.names)
    assert _listed(_table_cells(page, "`validated/<CONFIG>.parquet`")) == set(LIGHT_SCHEMA.names)
    assert _listed(_table_cells(page, "`prepared/<CONFIG>.rejects.jsonl`")) == {f.name for f in dataclasses.fields(Rejection)}

    Checkpoint(tmp_path / "generations.sqlite").close()
    db = sqlite3.connect(tmp_path / "generations.sqlite")
    actual = {t: {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
              for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    documented = {}
    for part in _table_cells(page, "`generations.sqlite`").split(";"):
        m = re.match(r"\s*table `(\w+)`(.*)", part)
        assert m, f"docs/workdir.md: {part.strip()[:60]!r} is not 'table `NAME`: `column`, …'"
        documented[m[1]] = _listed(m[2])
    assert documented == actual


def test_the_row_schema_table_is_the_schema():
    """docs/data-format.md's row schema lists the emitted columns in the order schema.py writes them."""
    from kimi_eagle_data.schema import row_schema

    text = (DOCS / "data-format.md").read_text(encoding="utf-8")
    section = text[text.index("## Row schema"):]
    section = section[:section.index("\n## ")]
    listed = []
    for line in section.splitlines():
        m = re.match(r"^\| (`\w+`(?:, `\w+`)*) \|", line)
        if m:
            listed += re.findall(r"`(\w+)`", m[1])
    assert listed == row_schema(efforts=True).names     # `effort`: a profile with efforts only


@pytest.mark.parametrize("args", [["--dry-run", "--context-length", "16386"],
                                  ["--engine", "vllm", "--dry-run", "--tp", "8", "--context-length", "32768"]],
                         ids=["sglang", "vllm"])
def test_the_launch_lines_production_shows_are_what_serve_prints(args):
    """docs/production.md quotes `kimi-data serve … --dry-run`'s launch command: it is what the command prints."""
    from click.testing import CliRunner

    from kimi_eagle_data.cli.main import main as cli

    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 0, result.output
    printed = result.output.strip()
    assert printed.startswith(("python -m sglang.launch_server ", "vllm serve ")), printed
    flat = re.sub(r"\s+", " ", (DOCS / "production.md").read_text(encoding="utf-8"))
    assert printed in flat, f"docs/production.md does not show what `kimi-data serve {' '.join(args)}` prints:\n{printed}"


def test_every_option_a_docs_script_line_uses_exists():
    """`python benchmarks/bench_emit.py --tokens 10 --repeat 3`, `python scripts/tool_schema_fuzz.py --original …`:
    each option is one the script's argument parser declares (read from its source: running every script is slow)."""
    line = re.compile(r"\b(?:python3?|bash)\s+((?:benchmarks|scripts)/[\w/.-]+\.(?:py|sh))([^`\n#|;&]*)")
    bad, checked = [], 0
    for md in markdown_files():
        text = md.read_text(encoding="utf-8")
        code = _fenced_blocks(text) + re.findall(r"`([^`\n]+)`", re.sub(r"(?ms)^```.*?^```", "", text))
        for snippet in code:
            for script, rest in line.findall(snippet):
                if not (ROOT / script).is_file():
                    continue        # test_every_repository_path_in_the_docs_code_exists names it
                source = (ROOT / script).read_text(encoding="utf-8")
                # a shell script that hands its arguments on ("$@") takes what that script declares
                for passed in re.findall(r"((?:benchmarks|scripts)/[\w/.-]+\.py)[^\n]*\"\$@\"", source):
                    source += (ROOT / passed).read_text(encoding="utf-8")
                for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    checked += 1
                    if f'"{opt}"' not in source and f"'{opt}'" not in source:
                        bad.append(f"{md.relative_to(ROOT)}: {script} takes no {opt}")
    assert checked >= 5, "the docs' script lines were not found"
    assert not bad, "\n".join(sorted(set(bad)))
