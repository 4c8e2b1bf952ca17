"""The built-in partitions (dataset configs) B1-B8, as plain data.

Each partition names its upstream Hub dataset, the adapter that turns an upstream row into a
prompt (`kimi_eagle_data.sources.adapters.ADAPTERS`), the default prompt count, and the bundled sample
file (rows written by this project in the upstream's exact schema, used by the demo and tests).

A config file (`kimi_eagle_data.sources.config`) overrides any field of a built-in partition
(`dataclasses.replace`) and adds user-defined ones (adapter `chat`, a local file in `source`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kimi_eagle_data.sources.modes import ModePlan

# Multi-turn policies: which prompts one source conversation gives.
#   first_user         the conversation up to its first user turn (one prompt per row; the default)
#   every_user_prefix  one prompt per user turn: the conversation up to and including that turn
#                      (earlier assistant turns and tool results as upstream wrote them)
#   after_tool_result  glaive only: up to the first tool result, so the model writes the answer
#   own_history        a conversation regenerated turn by turn: the first user turn, then each of the source's
#                      next user turns (or tool results) after the model's OWN earlier turns
#                      (kimi_eagle_data/conversation/), at most `max_turns` turns
POLICIES = ("first_user", "every_user_prefix", "after_tool_result", "own_history")

# What prepare does with a source row whose text holds special-token strings (prompts/tokenizer.SpecialText):
#   reject     the row is rejected with reason special_token_text (the default)
#   as_served  the row is kept and tokenized as the serving stack tokenizes it: the strings become the special
#              ids themselves (neither K2.5's tokenizer nor SGLang's or vLLM's chat path can keep them plain
#              text); prepare counts such rows (special_text_kept)
SPECIAL_TEXT = ("reject", "as_served")


@dataclass(frozen=True)
class Filters:
    """Per-partition prompt filters (each rejection carries its reason code)."""

    validate_tools: bool = True                 # invalid_tool_schema
    scripts: tuple[str, ...] = ()               # language filter: allowed scripts; () = off
    min_script_share: float = 0.5               # share of letters in the allowed scripts
    max_chars: int | None = None                # too_many_chars: cheap cap before rendering


@dataclass(frozen=True)
class Partition:
    config: str            # dataset config name, e.g. "B4"
    name: str              # short name, e.g. "mixturethoughts"
    upstream: str          # Hub id of the source dataset (a user-defined partition: a label)
    upstream_config: str | None
    upstream_split: str
    adapter: str           # key into kimi_eagle_data.sources.adapters.ADAPTERS
    default_n: int | None  # prompts to prepare (None: every selected row)
    license: str
    prompt_rule: str       # one line for the dataset card
    # -- overridable by a config file ---------------------------------------------------------
    policy: str = "first_user"
    revision: str | None = None                 # upstream Hub revision (commit or tag)
    source: str | None = None                   # local JSONL/Parquet file instead of the Hub
    seed: int = 0                               # selection seed
    scan_limit: int | None = None               # read at most this many source rows
    oversample: float = 2.0                     # candidate rows kept per wanted prompt
    filters: Filters = field(default_factory=Filters)
    id_field: str | None = None                 # adapter `chat`: the row-key column
    near_dedup: bool | None = None              # None: the run-wide [dedup] near setting
    builtin: bool = True
    modes: ModePlan = field(default_factory=ModePlan)   # mode mix and sampling mix (sources/modes.py)
    max_turns: int = 4                          # own_history: turns generated per conversation at most
    special_text: str = "reject"                # SPECIAL_TEXT: special-token strings in a source row's text
    # The chat template's `preserve_thinking` for this partition's prompts (Kimi-K2.6's: every earlier assistant turn
    # keeps its reasoning); None: the run's (--preserve-thinking, else the profile's default).
    preserve_thinking: bool | None = None

    @property
    def template_options(self) -> dict[str, bool]:
        """The chat-template arguments the partition sets over the run's ({} where it sets none)."""
        return {} if self.preserve_thinking is None else {"preserve_thinking": self.preserve_thinking}

    @property
    def conversations(self) -> bool:
        """Whether the partition's prompts start conversations continued on the model's own turns."""
        return self.policy == "own_history"

    @property
    def n(self) -> int | None:
        return self.default_n

    @property
    def sample_file(self) -> Path:
        return SAMPLES_DIR / f"{self.config}-{self.name}.jsonl"

    @property
    def id_rule(self) -> str:
        """The prompt rule as it enters sample ids: the default policy keeps the historical ids;
        another policy gives other prompts from the same rows, hence other ids."""
        return self.prompt_rule if self.policy == "first_user" else f"{self.prompt_rule} [policy={self.policy}]"


SAMPLES_DIR = Path(str(resources.files(__package__) / "samples"))
# The demo's partition config: the built-ins with a share of instant-mode prompts in each.
DEMO_CONFIG = SAMPLES_DIR / "demo.toml"
# The same for a profile whose thinking has efforts: each partition's prompts spread over the efforts and thinking off.
DEMO_EFFORTS_CONFIG = SAMPLES_DIR / "demo-efforts.toml"

PARTITIONS: dict[str, Partition] = {
    p.config: p
    for p in (
        Partition("B1", "glaive", "glaiveai/glaive-function-calling-v2", None, "train", "glaive",
                  10_000, "apache-2.0",
                  "system tools parsed into tools=; first USER turn"),
        Partition("B2", "opencodeinstruct", "nvidia/OpenCodeInstruct", None, "train", "input_field",
                  14_000, "cc-by-4.0", "`input` as one user turn"),
        Partition("B3", "opencodereasoning", "nvidia/OpenCodeReasoning", "split_0", "split_0",
                  "input_field", 8_000, "cc-by-4.0", "`input` as one user turn, dedup by `input`"),
        Partition("B4", "mixturethoughts", "open-r1/Mixture-of-Thoughts", "math", "train", "messages",
                  12_000, "apache-2.0", "the user message"),
        Partition("B5", "openthoughts", "open-thoughts/OpenThoughts-114k", None, "train", "openthoughts",
                  10_000, "apache-2.0", "first human turn; Sky-T1 system prompt dropped"),
        Partition("B6", "ultrachat", "HuggingFaceH4/ultrachat_200k", None, "train_sft", "messages",
                  14_000, "mit", "first user turn"),
        Partition("B7", "sharegpt", "Aeala/ShareGPT_Vicuna_unfiltered", None, "train", "sharegpt",
                  12_000, "apache-2.0", "first human turn (rows starting with gpt skipped)"),
        Partition("B8", "sweagent", "nebius/SWE-agent-trajectories", None, "train", "sweagent",
                  8_000, "cc-by-4.0", "system + first user message"),
    )
}
