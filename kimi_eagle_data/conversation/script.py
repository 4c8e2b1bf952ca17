"""What the source does after each of the model's turns: a conversation's script.

Prepare keeps, beside a conversation's first prompt, the source's messages after it (`PromptRecord.script`). Cut
at the source's assistant turns, they are one step per turn of the model:

    step k = (the source's answer to turn k, the user turn(s) or tool result(s) that follow it)

Turn k+1's prompt is the conversation so far, the model's own turn k, then step k's next messages; step k's
answer is what the source would have said instead (its tool calls must match the model's for its tool results to
follow; `kimi-data score` scores it). The script runs out when a step has no next messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class ScriptStep:
    answer: dict[str, Any] | None          # the source's assistant message for this turn (None: it has none)
    next: list[dict[str, Any]]             # what follows it: user turn(s) or tool result(s); [] where it ends


def script_steps(script: Sequence[dict[str, Any]] | None) -> list[ScriptStep]:
    """The script cut into steps, one per turn of the model (always at least one)."""
    steps: list[ScriptStep] = []
    answer: dict | None = None
    following: list[dict] = []
    for m in script or ():
        if m.get("role") == "assistant":
            if answer is not None or following:
                steps.append(ScriptStep(answer, following))
                following = []
            answer = m
        else:
            following.append(m)
    steps.append(ScriptStep(answer, following))
    return steps


def step(steps: Sequence[ScriptStep], turn: int) -> ScriptStep:
    """The step after turn `turn` (1-based); past the script's end, an empty one."""
    return steps[turn - 1] if turn - 1 < len(steps) else ScriptStep(None, [])
