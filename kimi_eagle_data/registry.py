"""The registry of chat formats and model profiles, and where they come from.

Three sources declare them, each with a `Declaration` (its formats by name, its profiles as plain data):

- the package's format folders (formats/*/): each folder's `__init__` holds one, `DECLARATION`, and the registry
  finds the folders by their place in the package, so no format or profile is named here;
- installed plug-ins: a distribution's entry point in the `kimi_eagle_data.formats` group names its declaration
  (or a module holding `DECLARATION`), so `kimi-data`, its worker processes and the Slurm jobs it writes (which
  call `kimi-data` from the same environment) all find it;
- KIMI_DATA_PLUGINS=module,…: modules of the same kind that are not installed as a distribution (a checkout on
  PYTHONPATH, a cluster where nothing may be installed): entry points exist only for installed distributions.
  Child processes inherit the variable, and the Slurm job scripts export it.

They are read once, on the registry's first lookup (the CLI's first is its `--profile` help, before it builds its
commands); a library caller adds its own with `register_format` / `register_profile` and a test takes them out again
with `unregister_format` / `unregister_profile`. A format object is imported on its first use (K3's renderer loads
only for a K3 run). A plug-in that fails to load is left out with a warning, and an unknown name's message says why.

This module imports no format: the registry sits below the stages, the format objects above them.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterator, Mapping

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.model_profile import ModelProfile

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kimi_eagle_data.formats"
PLUGINS_VARIABLE = "KIMI_DATA_PLUGINS"
FORMATS_PACKAGE = "kimi_eagle_data.formats"


@dataclass(frozen=True)
class Declaration:
    """What a format folder or a plug-in adds to the registry. `formats`: a format's name (what a profile's
    `chat_format` holds) -> its `ChatFormat` object, or "module:attribute" naming it (imported on first use);
    `profiles`: its model profiles, plain data (a plug-in may declare profiles of a format declared elsewhere)."""

    formats: Mapping[str, Any] = None  # type: ignore[assignment]
    profiles: tuple[ModelProfile, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "formats", dict(self.formats or {}))
        object.__setattr__(self, "profiles", tuple(self.profiles))


class UnknownProfileError(KimiDataError, ValueError):
    """A profile name no profile has (from --profile, run.json or a library caller): one line."""


class UnknownFormatError(KimiDataError, ValueError):
    """A format name no format has (a profile's `chat_format`): one line."""


_formats: dict[str, Callable[[], ChatFormat]] = {}
_profiles: dict[str, ModelProfile] = {}
_failures: list[str] = []          # one line per plug-in left out
_plugin_modules: list[str] = []    # the modules the loaded plug-ins were declared in
_loaded = False


def _lazy(name: str, spec: str) -> Callable[[], ChatFormat]:
    """A format named "module:attribute", imported on its first use and then kept."""
    held: list[ChatFormat] = []

    def get() -> ChatFormat:
        if not held:
            module, _, attr = spec.partition(":")
            held.append(_checked(getattr(importlib.import_module(module), attr), name))
        return held[0]
    return get


def _checked(chat_format, name: str | None = None) -> ChatFormat:
    if not isinstance(chat_format, ChatFormat):
        raise TypeError(f"{type(chat_format).__name__} is no kimi_eagle_data.chat_format.ChatFormat: a format "
                        "subclasses it and writes its core members (docs/architecture.md, \"The format interface\")")
    if not chat_format.name or not chat_format.tool_encoder_version:
        raise TypeError(f"{type(chat_format).__name__} names no `name` or no `tool_encoder_version`: a format states "
                        "both (chat_format.ChatFormat)")
    if chat_format.bound:
        raise TypeError(f"chat format {chat_format.name!r} is bound to a profile and tokenizer: register it unbound")
    if name is not None and chat_format.name != name:
        raise ValueError(f"the chat format declared as {name!r} is named {chat_format.name!r}")
    return chat_format


def _builtin_declarations() -> Iterator[tuple[str, Declaration]]:
    """Each format folder of the package, in name order: its `DECLARATION`."""
    package = importlib.import_module(FORMATS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.ispkg:
            module = importlib.import_module(f"{FORMATS_PACKAGE}.{info.name}")
            if isinstance(getattr(module, "DECLARATION", None), Declaration):
                yield f"{FORMATS_PACKAGE}.{info.name}", module.DECLARATION


def _declaration_of(loaded, where: str) -> Declaration:
    found = getattr(loaded, "DECLARATION", loaded)
    if not isinstance(found, Declaration):
        raise TypeError(f"{where} gives {type(found).__name__}, not a kimi_eagle_data.registry.Declaration "
                        "(or a module holding one as DECLARATION)")
    return found


def _plugin_declarations() -> Iterator[tuple[str, str, Callable[[], Declaration]]]:
    """(where, module, declaration) of the installed plug-ins' entry points (by name), then of the modules
    KIMI_DATA_PLUGINS names (in its order)."""
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = f" of {ep.dist.name}" if getattr(ep, "dist", None) else ""
        where = f"plug-in {ep.name!r} (entry point {ep.value}{dist})"
        yield where, ep.value.partition(":")[0].strip(), lambda ep=ep, where=where: _declaration_of(ep.load(), where)
    for name in filter(None, (n.strip() for n in os.environ.get(PLUGINS_VARIABLE, "").split(","))):
        where = f"plug-in {name!r} ({PLUGINS_VARIABLE})"
        module, _, attr = name.partition(":")
        yield where, module, lambda m=module, a=attr, where=where: _declaration_of(
            getattr(importlib.import_module(m), a) if a else importlib.import_module(m), where)


def _add(declaration: Declaration) -> None:
    """A declaration's formats and profiles, all or none: a name taken by another is refused."""
    for name, chat_format in declaration.formats.items():
        if name in _formats:
            raise ValueError(f"a chat format named {name!r} is registered already")
    for p in declaration.profiles:
        if p.name in _profiles and _profiles[p.name] != p:
            raise ValueError(f"a model profile named {p.name!r} is registered already")
    for name, chat_format in declaration.formats.items():
        _formats[name] = (_lazy(name, chat_format) if isinstance(chat_format, str)
                          else (lambda f=_checked(chat_format, name): f))
    for p in declaration.profiles:
        _profiles[p.name] = p


def load_declarations() -> None:
    """Read every declaration once: the package's format folders, then the plug-ins. Later calls do nothing."""
    global _loaded
    if _loaded:
        return
    _loaded = True      # first, so a plug-in that looks a built-in profile up while it loads finds it
    for _, declaration in _builtin_declarations():
        _add(declaration)
    for where, module, declared in _plugin_declarations():
        try:
            _add(declared())
            _plugin_modules.append(module)
        except Exception as e:  # noqa: BLE001 - any error of someone else's code: that plug-in is left out
            problem = f"{where} failed to load: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            _failures.append(problem)
            log.warning("%s; it is left out", problem)


def _failure_note() -> str:
    return f" ({'; '.join(_failures)})" if _failures else ""


class _Profiles(Mapping[str, ModelProfile]):
    """The registered profiles by name, read when asked (a plug-in registered later is in it)."""

    def __getitem__(self, name: str) -> ModelProfile:
        load_declarations()
        return _profiles[name]

    def __iter__(self):
        load_declarations()
        return iter(list(_profiles))

    def __len__(self) -> int:
        load_declarations()
        return len(_profiles)

    def __repr__(self) -> str:
        return f"registered profiles: {', '.join(self)}"


PROFILES: Mapping[str, ModelProfile] = _Profiles()


def get_profile(name: str) -> ModelProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfileError(f"unknown model profile {name!r}; known: {', '.join(sorted(PROFILES))}"
                                  f"{_failure_note()}") from None


def plugin_hint() -> str:
    """What to do about a profile a workdir or dataset was made with that no declaration loaded now has: it came
    from a plug-in this environment lacks."""
    return (f"install the plug-in that declares it (entry point group {ENTRY_POINT_GROUP}) or name its module in "
            f"{PLUGINS_VARIABLE}=MODULE (docs/architecture.md, \"Adding a model\")")


def format_named(name: str) -> ChatFormat:
    """The chat format of that name."""
    load_declarations()
    try:
        get = _formats[name]
    except KeyError:
        raise UnknownFormatError(f"unknown chat format {name!r}; known: {', '.join(sorted(_formats))}"
                                 f"{_failure_note()}") from None
    return get()


def plugin_packages() -> tuple[str, ...]:
    """The top-level packages of the plug-ins loaded (a plug-in's test model may render with its code, as the
    package's tiny models render with theirs: run.json binds what they import, prompts/tokenizer.py)."""
    load_declarations()
    return tuple(dict.fromkeys(m.split(".")[0] for m in _plugin_modules))


def format_names() -> tuple[str, ...]:
    load_declarations()
    return tuple(_formats)


def register_format(chat_format: ChatFormat) -> ChatFormat:
    """Add a format under its `name` (a profile names it in `chat_format`). A name already taken by another format
    is refused; registering the same object again does nothing."""
    load_declarations()
    _checked(chat_format)
    known = _formats.get(chat_format.name)
    if known is not None and known() is not chat_format:
        raise ValueError(f"a chat format named {chat_format.name!r} is registered already")
    _formats[chat_format.name] = lambda: chat_format
    return chat_format


def register_profile(profile: ModelProfile) -> ModelProfile:
    """Add a profile (its format, `profile.chat_format`, registered with `register_format` or declared). A name
    already taken by another profile is refused; registering an equal one again does nothing."""
    load_declarations()
    _add(Declaration(profiles=(profile,)))
    return profile


def unregister_format(name: str) -> None:
    """Take a format out (a test's own, once it is done); an unknown name is refused."""
    load_declarations()
    if _formats.pop(name, None) is None:
        raise UnknownFormatError(f"unknown chat format {name!r}; nothing to unregister")


def unregister_profile(name: str) -> None:
    """Take a profile out (a test's own, once it is done); an unknown name is refused."""
    load_declarations()
    if _profiles.pop(name, None) is None:
        raise UnknownProfileError(f"unknown model profile {name!r}; nothing to unregister")
