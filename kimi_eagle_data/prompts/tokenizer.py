"""Loading the model's own tokenizer and chat template, and fingerprinting both for provenance."""

from __future__ import annotations

import ast
import hashlib
import os
import re
from functools import lru_cache

import orjson

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.decoding import fast_decoder
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.profile import PROFILES


class TokenizerLoadError(KimiDataError, RuntimeError):
    pass


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__   # one line, however many the library's message has


def tokenizer_hint(path: str) -> str:
    """What to do when the tokenizer at `path` cannot be loaded: every command that loads one says the same. The
    embedded test model it names speaks the format of the profile whose model `path` is (`tiny-kimi-k3` for
    Kimi-K3's); for a path no profile names (a --tokenizer DIR), every embedded test model is named."""
    owners = {p.chat_format for p in PROFILES.values() if p.model_path == path}
    tinies = [p.name for p in PROFILES.values() if p.is_test_model and (not owners or p.chat_format in owners)]
    return (f"pass --tokenizer DIR (a local copy of the model's tokenizer files), or --profile "
            f"{' or --profile '.join(tinies)} for the embedded test model")

HUB_PROBE_TIMEOUT_S = 5.0


# Packages built against one torch that, installed beside another (speculators pulls them in), fail at import; and
# transformers imports them while it loads a model class, then reports the class as missing.
TORCH_COMPANIONS = ("torchvision", "torchaudio")


def broken_torch_companion() -> str | None:
    """`name (its import error)` of an installed torchvision/torchaudio that does not import beside this torch."""
    import importlib
    import importlib.util

    for name in TORCH_COMPANIONS:
        if importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a wrong build fails with RuntimeError, OSError, ImportError, ...
            return f"{name} ({type(e).__name__}: {_one_line(e)[:120]})"
    return None


def _what_to_do(e: BaseException, path: str) -> str:
    if isinstance(e, ImportError) and (broken := broken_torch_companion()):
        return (f"{broken} is installed but built for another torch, and transformers imports it: pip uninstall -y "
                f"{' '.join(TORCH_COMPANIONS)}, then rerun")
    if isinstance(e, ImportError):
        # transformers' check_imports names the packages a trust_remote_code tokenizer needs (K2.5's: tiktoken).
        missing = getattr(e, "name", None)
        return (f"install the package{f' {missing!r}' if missing else ''} its code imports (K2.5's and the tiny "
                "model's need tiktoken, a kimi-eagle-data dependency: pip install 'tiktoken>=0.7'), then rerun")
    return tokenizer_hint(path)


def is_hub_id(path: str) -> bool:
    """`org/name` (or `name`) as the Hub spells a repo id; a path such as /models/x or ./x is not one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(path)
    except HFValidationError:
        return False
    return True


def hub_unreachable() -> str | None:
    """Why nothing can be downloaded from the Hub now (offline mode, or one request to the endpoint got no HTTP
    answer), or None. One short probe: a download would retry with backoff for about a minute before failing."""
    import http.client
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"),
                               timeout=HUB_PROBE_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        pass                  # an HTTP answer, whatever its status: the Hub is there
    except (OSError, http.client.HTTPException, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        return f"the Hub at {constants.ENDPOINT} cannot be reached ({_one_line(reason)})"
    return None


@lru_cache(maxsize=4)
def load_tokenizer(path: str, chat_format: ChatFormat):
    """The tokenizer a run renders `chat_format`'s prompts with: `open_tokenizer`, then the format's
    `check_tokenizer` (K2.5's: the template declares tools exactly as our encoder). A tokenizer the format refuses
    is one TokenizerLoadError line, before any prompt is rendered."""
    tok = open_tokenizer(path)
    try:
        chat_format.check_tokenizer(tok)
    except Exception as e:   # noqa: BLE001 -- the format's one line, or whatever its renderer raised
        raise TokenizerLoadError(f"tokenizer {path!r} cannot render {chat_format.name} prompts: "
                                 f"{_one_line(e)}") from None
    return tok


@lru_cache(maxsize=4)
def open_tokenizer(path: str, revision: str | None = None):
    """The model directory's own tokenizer (`trust_remote_code`: K2.5 and the tiny model ship a tokenizer class),
    checked for what every format needs (a chat template or its own chat code; profile tokens that round-trip),
    without any format's own check: what a server that renders no prompt loads (`load_tokenizer` for a run). Any
    failure is one TokenizerLoadError line.

    A Hub id is looked up in the local cache only when the Hub cannot be reached (`hub_unreachable`): the
    command fails at once instead of after a minute of download retries."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    offline = None
    if not os.path.exists(path):
        if not is_hub_id(path):
            raise TokenizerLoadError(
                f"cannot load tokenizer {path!r}: no such directory -- {tokenizer_hint(path)}")
        offline = hub_unreachable()
    verbosity = hf_logging.get_verbosity()
    # transformers also logs a failed import of a trust_remote_code dependency; our one line says it all.
    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=True,
                                            local_files_only=offline is not None)
    except Exception as e:   # noqa: BLE001 -- OSError, ValueError, ImportError (check_imports), KeyError, ...
        if offline and not isinstance(e, ImportError):
            raise TokenizerLoadError(f"cannot load tokenizer {path!r}: {offline}, and it is not in the local "
                                     f"Hugging Face cache -- {tokenizer_hint(path)}") from None
        raise TokenizerLoadError(
            f"cannot load tokenizer {path!r}: {type(e).__name__}: {_one_line(e)} -- {_what_to_do(e, path)}") from e
    finally:
        hf_logging.set_verbosity(verbosity)
    # Length limits are ours (max_seq_len, checked at prepare), not the tokenizer's: silence its warning.
    tok.model_max_length = 1 << 62
    if not tok.chat_template and not own_chat_code(tok):
        raise TokenizerLoadError(f"tokenizer {path!r} has no chat template; the data path renders prompts "
                                 "only with the model's own template")
    check_profile_tokens(tok, path)
    return tok


def own_chat_code(tokenizer) -> bool:
    """Whether the tokenizer renders chats with its own code (Kimi-K3's trust_remote_code tokenizer builds
    segments in Python, without a Jinja template) rather than transformers' template path."""
    from transformers import PreTrainedTokenizerBase

    return type(tokenizer).apply_chat_template is not PreTrainedTokenizerBase.apply_chat_template


def check_profile_tokens(tok, path: str) -> None:
    """Every profile token the tokenizer names must decode back to its own string and be that id's added token.

    transformers 5.4.0-5.5.3 loaded `kimi_k25` through a generic fast backend whose special-token ids were wrong
    (transformers issue 45356): the string looked up one id, and that id decoded as something else. Refuse such
    a tokenizer here, at load, rather than build data with wrong structure ids."""
    wanted = sorted({t for p in PROFILES.values() for t in p.special_tokens})
    vocab = tok.get_vocab()
    added = {i: getattr(t, "content", str(t)) for i, t in tok.added_tokens_decoder.items()}
    for s in wanted:
        if s not in vocab:
            continue   # a token this tokenizer lacks: the format's token lookup names the required ones
        i = vocab[s]
        try:
            back = tok.decode([i], skip_special_tokens=False)
        except Exception as e:   # noqa: BLE001
            back = f"<error {type(e).__name__}>"
        if back != s or added.get(i) != s:
            import transformers
            raise TokenizerLoadError(
                f"tokenizer {path!r} maps {s!r} to id {i}, which decodes as {back!r} (added token: "
                f"{added.get(i)!r}) under transformers {transformers.__version__}; install transformers>=5.5.4,<6 "
                "(kimi-eagle-data's pin) and rerun")


def tokenizer_code_sha256(tokenizer) -> str:
    """sha256 over the Python files that come with the tokenizer's directory (its `trust_remote_code` classes),
    sorted by name: the same vocabulary and template under other tokenizer code can render differently."""
    h = hashlib.sha256()
    d = getattr(tokenizer, "name_or_path", "") or ""
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith(".py") and os.path.isfile(p):
                with open(p, "rb") as f:
                    data = f.read()
                h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    else:
        # A Hub id: the class file transformers loaded from its module cache.
        import inspect
        try:
            src = inspect.getsourcefile(type(tokenizer))
        except TypeError:
            src = None
        if src and "transformers_modules" in src:
            with open(src, "rb") as f:
                h.update(os.path.basename(src).encode() + b"\0" + f.read())
    return h.hexdigest()


class SpecialText:
    """Special-token strings in text: the strings the model's tokenizer turns into special ids wherever they
    stand, its added tokens (transformers splits text on them) and every special token of a tiktoken core (K2.5's
    `TikTokenTokenizer` encodes text with `allowed_special="all"`, the reserved `<|reserved_token_N|>` names
    included). A message holding the text of K2.5's end-of-turn and assistant tokens therefore renders as a real turn boundary: K2.5's
    own encode, transformers' `apply_chat_template` and the chat paths of SGLang and vLLM all give the special
    ids, and none has a mode that keeps the text plain (docs/token-rules.md, "Special-token text in a prompt").
    Build it with `special_text(tokenizer)` (one per tokenizer)."""

    def __init__(self, tokenizer):
        strings = {getattr(t, "content", str(t)) for t in tokenizer.added_tokens_decoder.values()}
        core = fast_decoder(tokenizer)
        if core is not None:
            strings |= set(core.special_tokens_set)
        strings.discard("")
        self.strings = frozenset(strings)
        self._pattern = re.compile(_trie_pattern(sorted(strings))) if strings else None

    def find(self, text: str) -> list[str]:
        """The special-token strings in `text`, in order (empty: none)."""
        return self._pattern.findall(text) if self._pattern is not None and text else []

    def in_chat(self, messages, tools=None) -> tuple[str, list[str]] | None:
        """(where, the strings) of the first message field (or the tools) whose text holds special-token
        strings; None when none does. Every string of a message is looked at (content, reasoning, names, tool
        calls' arguments), as the chat template may render any of them."""
        for i, m in enumerate(messages or ()):
            role = m.get("role", "?") if isinstance(m, dict) else "?"
            for path, text in _strings(m):
                found = self.find(text)
                if found:
                    return f"message {i} ({role}){' ' + path if path else ''}", found
        for path, text in _strings(tools, "tools"):
            found = self.find(text)
            if found:
                return path, found
        return None


def _trie_pattern(strings: list[str]) -> str:
    """A regex matching any of `strings`, the longest where one is a prefix of another, written as a trie of
    shared prefixes: one character test per position of a text that holds none (a flat alternation of a few
    hundred names tries each one, ~10x slower on prose)."""
    trie: dict = {}
    for text in strings:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if ends else body

    return walk(trie)


def _strings(obj, path: str = ""):
    """(path, text) of every string in a JSON-like value, dict keys included."""
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{path}.{k}" if path else str(k)
            if isinstance(k, str):
                yield key, k
            yield from _strings(v, key)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _strings(v, f"{path}[{i}]")


@lru_cache(maxsize=4)
def special_text(tokenizer) -> SpecialText:
    """The SpecialText of a tokenizer (built once: a few hundred strings in one pattern)."""
    return SpecialText(tokenizer)


def special_text_line(found: tuple[str, list[str]]) -> str:
    """One line for a hit of SpecialText.in_chat: where, and the strings (each once, a few at most)."""
    where, strings = found
    names = list(dict.fromkeys(strings))
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{where} holds special-token text {shown}"


def tokenizer_code_files(tokenizer) -> list[str]:
    """The tokenizer's own Python files: those of its directory, or (a Hub id) the class file transformers loaded
    from its module cache; none for a tokenizer without code of its own."""
    d = getattr(tokenizer, "name_or_path", "") or ""
    if os.path.isdir(d):
        return [os.path.join(d, n) for n in sorted(os.listdir(d))
                if n.endswith(".py") and os.path.isfile(os.path.join(d, n))]
    import inspect
    try:
        src = inspect.getsourcefile(type(tokenizer))
    except TypeError:
        return []
    return [src] if src and "transformers_modules" in src and os.path.isfile(src) else []


def tokenizer_modules_sha256(tokenizer, packages: tuple[str, ...] = ("kimi_eagle_data",)) -> dict[str, str]:
    """{module: sha256 of its file} of every module of `packages` the tokenizer's own code imports, directly or
    through another such module (every import statement of those files, a function's own included). A tiny model's
    tokenizer renders with the package's own renderer (`assets/tiny-kimi-k3` imports `formats/kimi_k3/render.py`),
    so its files' hash (`tokenizer_code_sha256`) covers the import lines, not the rendering: these hashes do. {}
    for a real checkpoint, whose code imports none of them."""
    import importlib.util

    def own(name: str) -> bool:
        return name.split(".")[0] in packages

    def imported(path: str, package: str | None) -> set[str]:
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), path)
        except (OSError, SyntaxError, ValueError):   # not Python this interpreter reads: nothing of ours runs from it
            return set()
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    if not package:
                        continue
                    base = importlib.util.resolve_name("." * node.level + base, package)
                names.add(base)
                names |= {f"{base}.{a.name}" for a in node.names}      # `from pkg import module`
        return {n for n in names if own(n)}

    def spec_of(name: str):
        try:
            return importlib.util.find_spec(name)
        except (ImportError, ValueError):     # `from module import function`: no module of that name
            return None

    found: dict[str, str] = {}
    todo = sorted(set().union(*(imported(p, None) for p in tokenizer_code_files(tokenizer))))
    while todo:
        name = todo.pop()
        if name in found:
            continue
        spec = spec_of(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, "rb") as f:
            found[name] = hashlib.sha256(f.read()).hexdigest()
        package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
        todo.extend(sorted(imported(spec.origin, package) - set(found)))
    return dict(sorted(found.items()))


def tokenizer_fingerprint(tokenizer) -> dict[str, str]:
    """Hashes of the vocabulary (string -> id, incl. added tokens), of the chat template and of the tokenizer's
    own Python code files."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    vocab_hash = hashlib.sha256(orjson.dumps(vocab)).hexdigest()
    template_hash = hashlib.sha256((tokenizer.chat_template or "").encode()).hexdigest()
    return {"tokenizer_sha256": vocab_hash, "chat_template_sha256": template_hash,
            "tokenizer_code_sha256": tokenizer_code_sha256(tokenizer),
            "vocab_size": str(len(tokenizer))}
