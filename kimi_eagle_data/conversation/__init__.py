"""Conversations regenerated turn by turn on the model's own history (partition policy `own_history`).

A deployed Kimi-K2.5 only ever sees its own earlier turns in its history. Turn 1 is a prepared prompt (the
source's first user turn); each later turn's prompt is the conversation so far — every assistant turn the
model's own completion, sent back as a client sends it (messages.py) — followed by the source's next user turn
or, when the model's tool calls match the source's, the source's tool results (script.py). next_turn.py decides,
once a turn's completion is in, whether and how the conversation goes on, and why it ends.
"""
