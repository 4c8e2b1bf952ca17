"""How the card and manifest name the model and tokenizer: a Hub id, never a local path.

A local path (`--model /data/ckpt`) says nothing to a reader on the Hub and may say too much about the
machine that built the data, so it is replaced by a placeholder and a warning asks for `--model-label`.
The tokenizer is also identified by its sha256 in the card, whatever its name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LOCAL_MODEL = "a local model (path not published)"
LOCAL_TOKENIZER = "a local tokenizer (path not published)"


def is_local_path(value: str) -> bool:
    """A directory or file path rather than a Hub id (`name` or `org/name`, which may not exist locally)."""
    return (os.path.isabs(value) or value.startswith((".", "~")) or value.count("/") > 1 or "\\" in value
            or Path(value).expanduser().exists())


@dataclass(frozen=True)
class PublishedNames:
    model: str
    tokenizer: str
    warning: str | None = None       # the model's local path was left out: name it with --model-label


def published_names(model_path: str, tokenizer: str | None, label: str | None,
                    profile_model: str = "") -> PublishedNames:
    """`model_path`: what was loaded or served (--model, else the profile's); `tokenizer`: --tokenizer when
    given; `label`: --model-label. The label wins; else the model's own id when it is a Hub id. `profile_model`:
    the run's profile's model, the example the warning gives when it is a Hub id."""
    if label:
        model = label
    elif not is_local_path(model_path):
        model = model_path
    else:
        model = LOCAL_MODEL
    if tokenizer is None:
        tok = model
    else:
        tok = LOCAL_TOKENIZER if is_local_path(tokenizer) else tokenizer
    warning = None
    if model == LOCAL_MODEL:
        example = f" (e.g. {profile_model})" if profile_model and not is_local_path(profile_model) else ""
        warning = (f"the model {model_path} is a local path: the card and manifest name the model \"{LOCAL_MODEL}\"; "
                   f"pass --model-label HUB_ID{example} to name the model it is")
    return PublishedNames(model, tok, warning)
