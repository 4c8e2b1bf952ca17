"""Synthetic Kimi-structured conversations for the tiny model.

Every conversation is a dict:
    {"style": str, "mode": "thinking" | "instant", "messages": [...prompt messages...], "tools": [...] | None,
     "reasoning": str, "content": str, "tool_calls": [{"name": str, "arguments": dict}, ...]}

An instant-mode conversation is rendered with the template's `thinking=False` (the generation prompt ends
`<think></think>`) and its completion has no reasoning: the answer or the tool calls directly (its `reasoning`
is kept in the dict, unused by the completion, so the BPE corpus and the tokenizer do not depend on the modes).

The text is meaningless filler built from word lists and templates; only its *structure* (roles, reasoning
then `</think>`, an answer or a tool-call section, `<|im_end|>`) matters. Eight styles mirror the project's
partitions B1-B8. Everything is driven by one `random.Random`, so a seed fixes the whole corpus.

`Synth.multi_turn` makes multi-turn conversations (chats of 2-4 turns, tool loops: call, tool result, answer or
another call, maybe a next user turn) in the same dict: the last assistant turn is the completion, every earlier one
sits in `messages` as the assistant message a client sends back (kimi_eagle_data/formats/kimi_k2/messages.py:
`reasoning_content` in thinking mode, `content`, `tool_calls` with ids counting on across the conversation). The
template then drops the history reasoning it drops for Kimi-K2.5.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from words import (WORDS, CAP_WORDS, HAN, IDENTS, VERBS_CODE, CITIES, CURRENCIES, LANGS, CATEGORIES,
                   PLACES, MOVIES, SONGS, WORD_DEFS, DOMAINS, NAMES_LOWER, INGREDIENTS, STOCKS,
                   AIRLINES)

POOL_PATH = Path(__file__).with_name("tool_pool.json")

STYLES = ("tool", "code", "cp", "math", "thoughts", "chat", "sharegpt", "swe")
# Sampling weights: tool calling ~40%, the rest shared.
STYLE_WEIGHTS = (40, 9, 8, 9, 7, 10, 10, 7)
MODES = ("thinking", "instant")
MULTI_KINDS = ("chat_mt", "tool_mt")
# Assistant turns in a multi-turn conversation (the last one is the completion), and how often each count comes.
MULTI_TURNS, MULTI_TURN_WEIGHTS = (2, 3, 4), (5, 3, 2)
# Share of instant-mode conversations in the training corpus: enough for the model to learn that after
# `<think></think>` the answer starts directly, while most data keeps the reasoning of thinking mode.
INSTANT_SHARE = 0.3


def as_mode(conv: dict, mode: str) -> dict:
    """The conversation in `mode` (conversation_text.completion_text leaves the reasoning out in instant mode)."""
    return dict(conv, mode=mode)

def load_pool(path: Path = POOL_PATH) -> tuple[list[dict], dict[str, list[str]]]:
    data = json.loads(path.read_text())
    return data["tools"], data["example_requests"]


class Synth:
    def __init__(self, seed: int, pool_path: Path = POOL_PATH):
        self.rng = random.Random(seed)
        # Modes come from their own stream, so the conversations themselves are the same with or without them.
        self.mode_rng = random.Random(f"mode-{seed}")
        self.tools, self.examples = load_pool(pool_path)
        self.by_name = {t["function"]["name"]: t for t in self.tools}

    # ---------------------------------------------------------------- text helpers
    def words(self, n: int) -> str:
        r = self.rng
        out = []
        for i in range(n):
            w = r.choice(WORDS)
            if r.random() < 0.04:
                w = r.choice(CAP_WORDS)
            elif r.random() < 0.03:
                w = str(r.randint(0, 2000))
            out.append(w)
        return " ".join(out)

    def sentence(self, lo: int = 5, hi: int = 14) -> str:
        r = self.rng
        s = self.words(r.randint(lo, hi))
        s = s[0].upper() + s[1:]
        if r.random() < 0.15:
            parts = s.split(" ")
            k = r.randint(1, max(1, len(parts) - 1))
            s = " ".join(parts[:k]) + ", " + " ".join(parts[k:])
        return s + r.choice([".", ".", ".", ".", "?", "!", ":"] if r.random() < 0.2 else ["."])

    def sentences(self, n: int, lo: int = 5, hi: int = 14) -> str:
        return " ".join(self.sentence(lo, hi) for _ in range(n))

    def paragraphs(self, n_sent: int) -> str:
        r = self.rng
        out, left = [], n_sent
        while left > 0:
            k = min(left, r.randint(1, 4))
            out.append(self.sentences(k))
            left -= k
        return "\n\n".join(out)

    def han(self, n: int) -> str:
        return "".join(self.rng.choice(HAN) for _ in range(n))

    def length_class(self) -> str:
        x = self.rng.random()
        if x < 0.12:
            return "short"
        if x < 0.92:
            return "medium"
        return "long"

    def budget(self, cls: str) -> tuple[int, int]:
        """(reasoning sentences, answer sentences)."""
        r = self.rng
        if cls == "short":
            return r.randint(0, 1), 1
        if cls == "medium":
            return r.randint(1, 4), r.randint(1, 5)
        return r.randint(5, 9), r.randint(6, 12)

    def reasoning_intro(self) -> str:
        return self.rng.choice([
            "The user asks", "Okay, the user wants", "Let me think about", "We need to handle", "First, consider",
            "Hmm, the question is about", "So the task is", "Alright, I need to look at",
        ])

    def code_block(self, lines: int) -> str:
        r = self.rng
        fn = f"{r.choice(VERBS_CODE)}_{r.choice(IDENTS)}"
        a, b = r.sample(IDENTS, 2)
        body = [f"def {fn}({a}, {b}):"]
        for i in range(lines):
            kind = r.random()
            x, y = r.sample(IDENTS, 2)
            if kind < 0.3:
                body.append(f"    {x} = {y} + {r.randint(0, 99)}")
            elif kind < 0.5:
                body.append(f"    for {x} in range(len({y})):")
                body.append(f"        {a} += {x}")
            elif kind < 0.7:
                body.append(f"    if {x} > {y}:")
                body.append(f"        return {x}")
            elif kind < 0.85:
                body.append(f"    {x}.append({y}[{r.randint(0, 9)}])")
            else:
                body.append(f"    # {self.words(r.randint(3, 7))}")
        body.append(f"    return {a}")
        lang = r.choice(["python", "python", "python", ""])
        return f"```{lang}\n" + "\n".join(body) + "\n```"

    # ---------------------------------------------------------------- argument values
    def value_for(self, pname: str, spec: dict):
        r = self.rng
        t = spec.get("type")
        if "enum" in spec:
            return r.choice(spec["enum"])
        table = {
            "city": lambda: r.choice(CITIES), "location": lambda: r.choice(CITIES),
            "origin": lambda: r.choice(CITIES), "destination": lambda: r.choice(CITIES),
            "from_currency": lambda: r.choice(CURRENCIES), "to_currency": lambda: r.choice(CURRENCIES),
            "base": lambda: r.choice(CURRENCIES), "target": lambda: r.choice(CURRENCIES),
            "target_language": lambda: r.choice(LANGS), "category": lambda: r.choice(CATEGORIES),
            "place_type": lambda: r.choice(PLACES), "title": lambda: r.choice(MOVIES + ["Dentist", "Team Sync", "Launch"]),
            "song": lambda: r.choice(SONGS), "word": lambda: r.choice(WORD_DEFS),
            "to": lambda: f"{r.choice(NAMES_LOWER)}@{r.choice(DOMAINS)}",
            "symbol": lambda: r.choice(STOCKS),
            "flight_number": lambda: f"{r.choice(AIRLINES)}{r.randint(100, 999)}",
            "date": lambda: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            "due_date": lambda: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            "birth_date": lambda: f"{r.randint(1950, 2010)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            "time": lambda: f"{r.randint(7, 22):02d}:{r.choice(['00', '15', '30', '45'])}",
            "remind_at": lambda: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(7, 22):02d}:00",
            "restaurant": lambda: r.choice(["Luigi's", "Sakura", "Green Garden", "Blue Door"]),
            "data": lambda: r.choice(["https://example.com", "hello world", "555-0134"]),
            "ingredients": lambda: r.sample(INGREDIENTS, r.randint(1, 3)),
        }
        if pname in table:
            return table[pname]()
        if t == "integer":
            return r.choice([1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 30, 100, 300])
        if t == "number":
            return r.choice([r.randint(1, 5000), round(r.uniform(1, 500), 2)])
        if t == "boolean":
            return r.random() < 0.5
        if t == "array":
            return [self.words(1), self.words(1)]
        return self.words(r.randint(1, 5))

    def make_args(self, tool: dict) -> dict:
        params = tool["function"]["parameters"]
        props = params.get("properties", {})
        required = set(params.get("required", []))
        args = {}
        for pname, spec in props.items():
            if pname in required or self.rng.random() < 0.6:
                args[pname] = self.value_for(pname, spec)
        return args

    def request_for(self, tool: dict, args: dict) -> str:
        """A user request phrased with the tool's verb/noun, mentioning the argument values."""
        r = self.rng
        name = tool["function"]["name"]
        if r.random() < 0.35 or not args:
            if r.random() < 0.5 or not args:
                return r.choice(self.examples[name])
        desc = tool["function"]["description"]
        desc_l = desc[0].lower() + desc[1:]
        words = name.replace("_", " ")
        vals = ", ".join(f"{k.replace('_', ' ')} {json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items())
        return r.choice([
            f"Can you {desc_l}? Use {vals}.",
            f"Please {desc_l} with {vals}.",
            f"I need you to {words}: {vals}.",
            f"{desc}, {vals}.",
            f"Hi! Could you {words} for me? {vals}",
            f"{words.capitalize()} please, {vals}.",
        ])

    # ---------------------------------------------------------------- styles
    def maybe_system(self, p: float) -> list[dict]:
        if self.rng.random() < p:
            return [{"role": "system", "content": self.rng.choice([
                "You are a helpful assistant.", "You are Kimi, an AI assistant.",
                "You are a concise assistant. " + self.sentence(), self.sentences(2),
            ])}]
        return []

    def style_tool(self) -> dict:
        r = self.rng
        k = r.choice([2, 2, 3, 3, 3])
        tools = r.sample(self.tools, k)
        msgs = self.maybe_system(0.15)
        x = r.random()
        if x < 0.10:
            # glaive-style post-tool-result prompt: the model answers from the returned value
            t = r.choice(tools)
            name = t["function"]["name"]
            args = self.make_args(t)
            result = json.dumps({r.choice(IDENTS): self.value_for("x", {"type": r.choice(["string", "number"])})
                                 for _ in range(r.randint(1, 3))})
            msgs += [
                {"role": "user", "content": self.request_for(t, args)},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"functions.{name}:0", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]},
                {"role": "tool", "tool_call_id": f"functions.{name}:0", "name": name, "content": result},
            ]
            reasoning = f"The {name} tool returned {result}. " + self.sentences(r.randint(0, 2))
            content = self.paragraphs(r.randint(1, 3))
            return dict(style="tool", messages=msgs, tools=tools, reasoning=reasoning, content=content, tool_calls=[])
        if x < 0.24:
            # no call: unrelated question or missing information
            t = r.choice(tools)
            if r.random() < 0.5:
                user = f"{t['function']['description']}?" if r.random() < 0.5 else self.sentences(r.randint(1, 2))
                reasoning = f"{self.reasoning_intro()} this, but details are missing. " + self.sentences(r.randint(0, 2))
                content = "Could you tell me more? " + self.sentences(r.randint(1, 2))
            else:
                user = self.sentence() + " " + self.sentence()
                reasoning = f"{self.reasoning_intro()} a question that needs no tool. " + self.sentences(r.randint(0, 3))
                content = self.paragraphs(r.randint(1, 4))
            msgs.append({"role": "user", "content": user})
            return dict(style="tool", messages=msgs, tools=tools, reasoning=reasoning, content=content, tool_calls=[])
        if r.random() < 0.3:
            tools = tools[:2]      # a shorter declaration leaves room for the history in the 300-token prompt
            msgs += self.tool_history(tools)
        n_calls = 1 if r.random() < 0.75 else 2
        chosen = [r.choice(tools) for _ in range(n_calls)]
        calls = [{"name": t["function"]["name"], "arguments": self.make_args(t)} for t in chosen]
        reqs = [self.request_for(t, c["arguments"]) for t, c in zip(chosen, calls)]
        user = reqs[0] if n_calls == 1 else reqs[0] + r.choice([" Also, ", " And ", " Then "]) + reqs[1][0].lower() + reqs[1][1:]
        msgs.append({"role": "user", "content": user})
        names = " and ".join(c["name"] for c in calls)
        reasoning = r.choice([
            f"The user wants me to use {names}. ",
            f"{self.reasoning_intro()} this request. I should call {names}. ",
            f"I can answer with the {names} function. ",
        ])
        if r.random() < 0.5:
            reasoning += self.sentences(r.randint(1, 2))
        content = ""
        if r.random() < 0.25:
            content = r.choice(["Let me check that for you.", "Sure, one moment.", "I'll look that up.", self.sentence()])
        return dict(style="tool", messages=msgs, tools=tools, reasoning=reasoning.strip(), content=content, tool_calls=calls)

    def tool_history(self, tools: list[dict]) -> list[dict]:
        """Earlier turns with tool calls and results (~30% of tool-call prompts): Kimi numbers tool-call ids across
        the whole conversation, so the model must learn to continue at `:1`, `:2`, ... after them."""
        r = self.rng
        out, idx = [], 0
        for _ in range(1 if r.random() < 0.8 else 2):
            t = r.choice(tools)
            name = t["function"]["name"]
            args = self.make_args(t)
            n = 1 if r.random() < 0.8 else 2
            calls = [{"id": f"functions.{name}:{idx + k}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}} for k in range(n)]
            out.append({"role": "user", "content": self.request_for(t, args)})
            out.append({"role": "assistant", "content": "", "tool_calls": calls,
                        "reasoning_content": f"I should call {name}."})
            for c in calls:
                out.append({"role": "tool", "tool_call_id": c["id"], "name": name,
                            "content": json.dumps({r.choice(IDENTS): self.value_for("x", {"type": "number"})})})
            idx += n
            if r.random() < 0.6:
                out.append({"role": "assistant", "content": self.sentence(3, 8), "reasoning_content": self.sentence()})
        return out

    def plain(self, style: str, msgs: list[dict], cls: str | None = None, answer_prefix: str = "",
              answer_suffix: str = "", code: bool = False) -> dict:
        r = self.rng
        cls = cls or self.length_class()
        nr, na = self.budget(cls)
        reasoning = (self.reasoning_intro() + " " + self.sentences(nr)).strip() if nr else r.choice(["", "Simple."])
        body = self.paragraphs(na)
        if code:
            body = self.sentences(r.randint(1, 2)) + "\n\n" + self.code_block(r.randint(2, 4 if cls != "long" else 14)) \
                + ("\n\n" + self.sentences(r.randint(1, 3)) if cls != "short" else "")
        content = (answer_prefix + body + answer_suffix).strip()
        return dict(style=style, messages=msgs, tools=None, reasoning=reasoning, content=content, tool_calls=[])

    def style_code(self) -> dict:
        r = self.rng
        task = r.choice(["Write a Python function that", "Implement a function to", "Create a class that",
                         "You are given a list of integers. Write a function that", "Write a function"])
        user = f"{task} {r.choice(VERBS_CODE)}s {self.words(r.randint(4, 12))}. " + self.sentences(r.randint(0, 3))
        if r.random() < 0.3:
            user += f"\n\nExample:\nInput: {[r.randint(0, 9) for _ in range(r.randint(2, 6))]}\nOutput: {r.randint(0, 99)}"
        return self.plain("code", self.maybe_system(0.05) + [{"role": "user", "content": user}], code=True)

    def style_cp(self) -> dict:
        r = self.rng
        user = (self.sentences(r.randint(2, 4)) + f"\n\nInput\n\nThe first line contains an integer n (1 ≤ n ≤ {r.choice([100, 1000, 100000])}). "
                + self.sentence() + "\n\nOutput\n\n" + self.sentence()
                + f"\n\nExamples\n\nInput\n\n{r.randint(1, 9)}\n{' '.join(str(r.randint(1, 50)) for _ in range(r.randint(2, 5)))}\n\nOutput\n\n{r.randint(0, 99)}")
        return self.plain("cp", [{"role": "user", "content": user}], code=True)

    def style_math(self) -> dict:
        r = self.rng
        a, b, c = r.randint(2, 20), r.randint(1, 50), r.randint(10, 300)
        q = r.choice([
            f"Solve for x: {a}x + {b} = {c}.",
            f"What is the sum of the first {a} positive integers?",
            f"Let f(x) = {a}x^2 - {b}x + {c % 17}. Find f({r.randint(1, 5)}).",
            f"A train travels {c} km in {a} hours. " + self.sentence() + " What is its average speed?",
            f"Find the remainder when {c}^{a} is divided by {b + 1}.",
        ])
        if r.random() < 0.5:
            q += " Please reason step by step, and put your final answer within \\boxed{}."
        cls = self.length_class()
        nr, _ = self.budget(cls)
        steps = [f"{r.randint(1, 99)} {r.choice(['+', '-', '*'])} {r.randint(1, 99)} = {r.randint(1, 999)}" for _ in range(nr + 1)]
        reasoning = (self.reasoning_intro() + " " + ". ".join(f"{self.sentence(3, 7)[:-1]}, {s}" for s in steps) + ".").strip()
        content = self.sentences(r.randint(0, 2 if cls != "long" else 8)) + f" The answer is $\\boxed{{{r.randint(0, 999)}}}$."
        return dict(style="math", messages=[{"role": "user", "content": q}], tools=None, reasoning=reasoning,
                    content=content.strip(), tool_calls=[])

    def style_thoughts(self) -> dict:
        r = self.rng
        q = "Return your final response within \\boxed{}. " + self.sentences(r.randint(1, 4))
        return self.plain("thoughts", [{"role": "user", "content": q}], answer_suffix=f" \\boxed{{{r.randint(0, 99)}}}")

    def style_chat(self) -> dict:
        r = self.rng
        q = r.choice(["How", "What", "Why", "Can you explain", "Write a short essay about", "Describe"]) + " " + self.words(r.randint(4, 14)) + "?"
        if r.random() < 0.3:
            q += " " + self.sentences(r.randint(1, 3))
        msgs = self.maybe_system(0.15) + [{"role": "user", "content": q}]
        if r.random() < 0.12:
            msgs += [{"role": "assistant", "content": self.paragraphs(r.randint(1, 3))},
                     {"role": "user", "content": self.sentence()}]
        if r.random() < 0.1:
            # non-string content: list of text parts
            last = msgs[-1]
            text = last["content"]
            cut = max(1, len(text) // 2)
            last["content"] = [{"type": "text", "text": text[:cut]}, {"type": "text", "text": text[cut:]}]
        return self.plain("chat", msgs)

    def style_sharegpt(self) -> dict:
        r = self.rng
        x = r.random()
        if x < 0.1:
            q = self.han(r.randint(5, 30)) + "？"
        elif x < 0.5:
            q = self.sentences(r.randint(1, 5))
        else:
            q = r.choice(["hey", "ok so", "please", "i want", "write me", "help"]) + " " + self.words(r.randint(3, 20))
        msgs = self.maybe_system(0.12) + [{"role": "user", "content": q}]
        if r.random() < 0.15:
            msgs += [{"role": "assistant", "content": self.paragraphs(r.randint(1, 2))},
                     {"role": "user", "content": self.words(r.randint(2, 8))}]
        out = self.plain("sharegpt", msgs)
        if x < 0.1:
            out["content"] = self.han(r.randint(10, 60)) + "。" + (" " + out["content"] if r.random() < 0.3 else "")
        return out

    def style_swe(self) -> dict:
        r = self.rng
        system = ("SETTING: You are an autonomous programmer working in a command line with a special interface.\n\n"
                  "COMMANDS:\nopen <path> [<line>] - opens the file\ngoto <line> - moves the window\n"
                  "edit <start>:<end> - replaces lines\nsearch_file <term> - searches the open file\n"
                  "submit - submits your changes\n\nRESPONSE FORMAT:\nDISCUSSION then one command in a code block.")
        path = f"src/{r.choice(IDENTS)}/{r.choice(IDENTS)}.py"
        user = (f"We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
                + self.sentences(r.randint(1, 3)) + f"\n\nThe bug is in {path}. " + self.sentence()
                + "\n\n(Open file: n/a)\n(Current directory: /repo)\nbash-$")
        cmd = r.choice([f"open {path}", f"search_file {r.choice(IDENTS)}", f"goto {r.randint(1, 400)}", "submit",
                        f"find_file \"{r.choice(IDENTS)}.py\"", f"edit {r.randint(1, 50)}:{r.randint(51, 90)}"])
        return self.plain("swe", [{"role": "system", "content": system}, {"role": "user", "content": user}],
                          answer_prefix="DISCUSSION\n", answer_suffix=f"\n\n```\n{cmd}\n```")

    # ---------------------------------------------------------------- multi-turn conversations
    def multi_turn(self, kind: str | None = None, mode: str | None = None, turns: int | None = None) -> dict:
        """A conversation of `turns` assistant turns in one mode; the last is the completion (style `kind`)."""
        kind = kind or self.rng.choice(MULTI_KINDS)
        mode = mode or ("instant" if self.mode_rng.random() < INSTANT_SHARE else "thinking")
        turns = turns or self.rng.choices(MULTI_TURNS, weights=MULTI_TURN_WEIGHTS)[0]
        conv = self.multi_chat(turns, mode) if kind == "chat_mt" else self.multi_tool(turns, mode)
        return dict(conv, style=kind, mode=mode)

    def history_message(self, turn: dict, mode: str, first_index: int) -> dict:
        """An earlier assistant turn as a client sends it back (no reasoning in instant mode)."""
        msg = {"role": "assistant"}
        if mode == "thinking":
            msg["reasoning_content"] = turn["reasoning"]
        msg["content"] = turn["content"]
        if turn["tool_calls"]:
            msg["tool_calls"] = [{"id": f"functions.{c['name']}:{first_index + i}", "type": "function",
                                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"],
                                                                                          ensure_ascii=False)}}
                                 for i, c in enumerate(turn["tool_calls"])]
        return msg

    def follow_up(self) -> str:
        r = self.rng
        x = r.random()
        if x < 0.1:
            return self.han(r.randint(4, 20)) + "？"
        if x < 0.25:
            return self.paragraphs(r.randint(2, 7))
        if x < 0.55:
            return r.choice(["Thanks. ", "Ok. ", "Great, ", "Hmm, ", "", ""]) + self.sentences(r.randint(1, 2))
        return r.choice(["And", "What about", "Can you", "why", "more on", "ok now", "Now"]) + " " + \
            self.words(r.randint(2, 12)) + "?"

    def multi_chat(self, turns: int, mode: str) -> dict:
        """An ultrachat/sharegpt-like chat: a first question, then follow-ups (a few words to paragraphs)."""
        r = self.rng
        turn = getattr(self, f"style_{r.choice(['chat', 'chat', 'sharegpt', 'sharegpt', 'code', 'math'])}")()
        msgs = list(turn["messages"])
        for _ in range(turns - 1):
            msgs += [self.history_message(turn, mode, 0), {"role": "user", "content": self.follow_up()}]
            turn = self.plain("chat", msgs, cls=r.choice(["short", "medium", "medium", "long"]))
        return dict(turn, messages=msgs)

    def multi_tool(self, turns: int, mode: str) -> dict:
        """A glaive-like tool loop: user request -> call(s) -> the tool's result(s) -> an answer from them (or, 25%,
        another call that continues) -> maybe a next user request; call ids count on across the conversation."""
        r = self.rng
        tools = r.sample(self.tools, r.choice([1, 2, 3, 3]))
        msgs, index = self.maybe_system(0.1), 0
        request, turn = self.call_turn(tools)
        msgs.append({"role": "user", "content": request})
        for _ in range(turns - 1):
            msgs.append(self.history_message(turn, mode, index))
            if turn["tool_calls"]:
                results = []
                for c in msgs[-1]["tool_calls"]:
                    result = json.dumps({r.choice(IDENTS): self.value_for("x", {"type": r.choice(["string", "number"])})
                                         for _ in range(r.randint(1, 3))})
                    msgs.append({"role": "tool", "tool_call_id": c["id"], "content": result})
                    results.append((c["function"]["name"], result))
                index += len(turn["tool_calls"])
                turn = self.call_turn(tools, after=results)[1] if r.random() < 0.25 else self.result_answer(results)
            elif r.random() < 0.8:
                request, turn = self.call_turn(tools)
                msgs.append({"role": "user", "content": request})
            else:
                msgs.append({"role": "user", "content": self.follow_up()})
                turn = self.plain("tool", msgs, cls="short")
        return dict(turn, messages=msgs, tools=tools)

    def call_turn(self, tools: list[dict], after: list | None = None) -> tuple[str, dict]:
        """(the user's request, a turn with one or two calls); after tool results the reasoning reads them."""
        r = self.rng
        n_calls = 1 if r.random() < 0.8 else 2
        chosen = [r.choice(tools) for _ in range(n_calls)]
        calls = [{"name": t["function"]["name"], "arguments": self.make_args(t)} for t in chosen]
        names = " and ".join(c["name"] for c in calls)
        request = ""
        if after:
            reasoning = f"The {after[-1][0]} tool returned {after[-1][1]}. Next I should call {names}."
        else:
            reqs = [self.request_for(t, c["arguments"]) for t, c in zip(chosen, calls)]
            request = reqs[0] if n_calls == 1 else reqs[0] + " Also, " + reqs[1][0].lower() + reqs[1][1:]
            reasoning = r.choice([f"The user wants me to use {names}.", f"I should call {names}.",
                                  f"{self.reasoning_intro()} this request. I should call {names}."])
        if r.random() < 0.4:
            reasoning += " " + self.sentence()
        content = r.choice(["", "", "", "Let me check that.", "One moment."])
        return request, dict(style="tool", messages=[], tools=tools, reasoning=reasoning, content=content,
                             tool_calls=calls)

    def result_answer(self, results: list) -> dict:
        r = self.rng
        name, result = results[-1]
        reasoning = f"The {name} tool returned {result}. " + self.sentences(r.randint(0, 2))
        return dict(style="tool", messages=[], tools=None, reasoning=reasoning.strip(),
                    content=self.paragraphs(r.randint(1, 3)), tool_calls=[])

    def conversation(self, style: str | None = None, mode: str | None = None) -> dict:
        style = style or self.rng.choices(STYLES, weights=STYLE_WEIGHTS)[0]
        conv = getattr(self, f"style_{style}")()
        mode = mode or ("instant" if self.mode_rng.random() < INSTANT_SHARE else "thinking")
        return as_mode(conv, mode)
