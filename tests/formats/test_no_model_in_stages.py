"""No stage names a model: outside the profile registry (profile.py) and the formats (formats/), no module
imports or reads a profile constant (KIMI_K25, KIMI_K3, TINY_KIMI, TINY_KIMI_K3), none writes a profile's or a
format's name as a string (`or "kimi-k2.5"`; the one default, settings.py's DEFAULT_PROFILE, aside), and none falls
back to a format when it is handed none (`chat_format is None`, a `…format` parameter defaulting to None). A stage asks the run's
format (`RunContext.format`, `chat_format.ChatFormat`) for everything format-specific. Read with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kimi_eagle_data"
# Parts of the package that live beside it (pyproject.toml's package-dir): the card and the `datasets` builder.
BESIDE = (ROOT / "cards", ROOT / "builders")
MODEL_NAMES = frozenset({"KIMI_K25", "KIMI_K3", "TINY_KIMI", "TINY_KIMI_K3"})
# Where model facts live: the registry and the formats. Everything else is a stage or what stages share.
OWNERS = ("profile.py", "formats/")
# The one name a module outside them may give a profile's name: the run's default (settings.py).
NAMED_DEFAULTS = frozenset({"DEFAULT_PROFILE"})


def _declared_names() -> frozenset[str]:
    """Every profile's and format's name the package declares (the registry's, read as shipped)."""
    from kimi_eagle_data.profile import PROFILES

    return frozenset(PROFILES) | {p.chat_format for p in PROFILES.values()}


def _is_format(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("format") and name != "format"   # `str.format` is no chat format


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def model_names(source: str, where: str, literals: frozenset[str] = frozenset()) -> list[str]:
    """Every place `source` names a model (a constant, or one of `literals` as a whole string) or falls back from a
    missing format, as `where:line what`."""
    found = []
    tree = ast.parse(source)
    allowed = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id in NAMED_DEFAULTS for t in n.targets)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in literals \
                and id(node) not in allowed:
            found.append(f"{where}:{node.lineno} names {node.value!r}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if a.name in MODEL_NAMES]
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in MODEL_NAMES:
                found.append(f"{where}:{node.lineno} reads {name}")
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(_is_format(s) for s in sides) and any(_is_none(s) for s in sides):
                found.append(f"{where}:{node.lineno} compares a format with None")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + \
                [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            found += [f"{where}:{node.lineno} parameter {arg.arg} defaults to None" for arg, d in pairs
                      if arg.arg.endswith("format") and _is_none(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id.endswith("format") and node.value is not None and _is_none(node.value):
            found.append(f"{where}:{node.lineno} field {node.target.id} defaults to None")
    return sorted(found, key=lambda f: int(f.split(":")[1].split()[0]))


def test_no_stage_names_a_model_or_falls_back_to_one():
    found, literals = [], _declared_names()
    assert {"kimi-k2.5", "tiny-kimi", "kimi-k3", "kimi-k2"} <= literals     # the scan looks for the shipped names
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(OWNERS) or "assets/" in rel:
            continue
        found += model_names(path.read_text(encoding="utf-8"), rel, literals)
    for folder in BESIDE:
        for path in sorted(folder.rglob("*.py")):
            found += model_names(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix(), literals)
    assert not found, "model names or format fallbacks outside the registry and formats/: " + "; ".join(found)


# The names shaped after Kimi-K2.5's tokens (`formats/kimi_k2/tokens.py`, `K2TokenNames`): only K2.5's format
# reads them. The card asks the run's format instead (`ChatFormat.card_text`).
K25_SHAPED = frozenset({"think_open", "think_close", "generation_prompt", "instant_generation_prompt",
                        "end_of_turn", "rules_paragraph", "describe", "structural_tokens", "tool_calls_section_begin",
                        "tool_calls_section_end", "tool_call_begin", "tool_call_argument_begin", "tool_call_end"})


def k25_fields(source: str, where: str) -> list[str]:
    return [f"{where}:{node.lineno} reads {node.attr}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in K25_SHAPED]


def test_a_profile_holds_no_format_tokens():
    """What a profile is (`ModelProfile`) names no format's tokens: K2.5's live with its format (`K2TokenNames`,
    formats/kimi_k2/tokens.py), and no registered profile carries any of them."""
    import dataclasses

    from kimi_eagle_data.formats.kimi_k2.tokens import K2TokenNames
    from kimi_eagle_data.model_profile import ModelProfile
    from kimi_eagle_data.profile import PROFILES, get_profile

    generic = {f.name for f in dataclasses.fields(ModelProfile)} | set(vars(ModelProfile))
    assert not generic & K25_SHAPED, sorted(generic & K25_SHAPED)
    k2 = {f.name for f in dataclasses.fields(K2TokenNames)} | set(vars(K2TokenNames))
    assert K25_SHAPED - {"rules_paragraph"} <= k2
    assert type(get_profile("kimi-k2.5")) is ModelProfile
    assert not any(hasattr(get_profile(name), field) for name in PROFILES for field in K25_SHAPED)


def test_the_card_asks_the_format():
    found = [f for path in sorted((ROOT / "cards").rglob("*.py"))
             for f in k25_fields(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not found, "the card reads K2.5-shaped profile fields: " + "; ".join(found)
    assert k25_fields("rules = profile.rules_paragraph()\nx = text.rules\n", "m.py") == ["m.py:1 reads rules_paragraph"]


def test_the_scan_sees_each_kind_of_offence():
    """The checker itself: each of the shapes that crept into stages before is found."""
    source = '''
from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
import kimi_eagle_data.profile as profile
ids = profile.TINY_KIMI.generation_prompt
def render(tokenizer, chat_format=None):
    if chat_format is None:
        return 0
def check(x, *, chat_format: object = None): ...
class Modes:
    chat_format: object = None
ok = "{x}".format(x=1) if ids is not None else None
name = run.get("profile") or "kimi-k2.5"
DEFAULT_PROFILE = "kimi-k2.5"
help = "the default, kimi-k2.5, is Kimi-K2.5"
'''
    found = model_names(source, "m.py", frozenset({"kimi-k2.5"}))
    assert found == ["m.py:2 imports KIMI_K25", "m.py:4 reads TINY_KIMI",
                     "m.py:5 parameter chat_format defaults to None", "m.py:6 compares a format with None",
                     "m.py:8 parameter chat_format defaults to None", "m.py:10 field chat_format defaults to None",
                     "m.py:12 names 'kimi-k2.5'"]
