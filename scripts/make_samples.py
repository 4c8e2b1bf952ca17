"""Write the bundled sample rows: kimi_eagle_data/sources/samples/{config}-{name}.jsonl, one file per partition.

Rows are written by this project, in each upstream dataset's exact column schema
(as each upstream's dataset card and files show it), with short prompts (the embedded demo model has a 512-token
context) and the upstream pitfalls the adapters handle in a few rows each. B1 (glaive) declares tools drawn
only from the tiny model's tool pool (scripts/tiny_kimi/tool_pool.json), and most of its user
turns are the pool's example requests, because the tiny model only learned to call pool tools
when asked that way. The output is deterministic: run `python scripts/make_samples.py` and
`git diff --exit-code kimi_eagle_data/sources/samples` shows nothing.

Usage: python scripts/make_samples.py [--out DIR] [--pool PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

from sample_content import (b1_content, b2_content, b3_content, b4_content, b5_content, b6_content,
                            b7_content, b8_content)

ROOT = Path(__file__).resolve().parents[1]


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------ B1

GLAIVE_WITH_TOOLS = ("SYSTEM: You are a helpful assistant with access to the following functions. "
                     "Use them if required -\n")
GLAIVE_NO_TOOLS = "SYSTEM: You are a helpful assistant, with no access to external functions.\n"


def glaive_tool_json(tool: dict, compact: bool) -> str:
    """A pool tool as glaive writes it: {name, description, parameters}; tools without
    parameters are written with `"parameters": {}` (the upstream's empty-parameters pitfall)."""
    f = tool["function"]
    params = f["parameters"]
    if not params.get("properties"):
        params = {}
    obj = {"name": f["name"], "description": f["description"], "parameters": params}
    return json.dumps(obj, ensure_ascii=False) if compact else json.dumps(obj, indent=4, ensure_ascii=False)


def glaive_call(name: str, args: dict) -> str:
    # glaive's quirk: `arguments` is a single-quoted JSON string, so the call is not valid JSON
    return '<functioncall> {"name": "%s", "arguments": \'%s\'}' % (name, json.dumps(args, ensure_ascii=False))


def glaive_chat(turns: list[tuple[str, str]]) -> str:
    out = []
    for who, text in turns:
        if who == "USER":
            out.append(f"USER: {text}\n\n\n")
        elif who == "ASSISTANT":
            out.append(f"ASSISTANT: {text} <|endoftext|>\n\n\n")
        else:
            out.append(f"FUNCTION RESPONSE: {text}\n\n\n")
    return "".join(out)


def make_b1(pool: dict) -> list[dict]:
    rng = random.Random(1001)
    tools = {t["function"]["name"]: t for t in pool["tools"]}
    requests = pool["example_requests"]
    names = sorted(tools)
    c = b1_content()

    def system_for(tool_names: list[str], sep: str = "\n\n", compact: bool = False) -> str:
        return GLAIVE_WITH_TOOLS + sep.join(glaive_tool_json(tools[n], compact) for n in tool_names) + "\n"

    def pick_tools(target: str | None, k: int) -> list[str]:
        others = [n for n in names if n != target]
        chosen = ([target] if target else []) + rng.sample(others, k - (1 if target else 0))
        rng.shuffle(chosen)
        return chosen

    def follow_up_turns(follow_ups: list[tuple], declared: list[str] | None) -> list[tuple[str, str]]:
        """The turns after the first answer: each USER turn, then a text reply or a call with its response
        and the answer to it (the call's tool must be declared, as in the upstream's rows)."""
        turns = []
        for user, reply in follow_ups:
            turns.append(("USER", user))
            if isinstance(reply, str):
                turns.append(("ASSISTANT", reply))
                continue
            tool, args, response, answer = reply
            if tool not in (declared or []):
                raise SystemExit(f"B1: the follow-up {user!r} calls {tool!r}, which its row does not declare")
            turns += [("ASSISTANT", glaive_call(tool, args)),
                      ("FUNCTION RESPONSE", json.dumps(response, ensure_ascii=False)), ("ASSISTANT", answer)]
        return turns

    rows = []
    for i, (tool, request, args, response, answer, follow_ups) in enumerate(c["tool_requests"]):
        if tool not in tools:
            raise SystemExit(f"B1: tool {tool!r} is not in the tool pool; update scripts/sample_content/chat.py")
        if request not in requests.get(tool, []):
            raise SystemExit(f"B1: {request!r} is not an example request of {tool!r} in the pool")
        declared = pick_tools(tool, 2 + (i % 2))
        sep, compact = ("\n", True) if i % 7 == 3 else ("\n\n", False)
        chat = glaive_chat([("USER", request), ("ASSISTANT", glaive_call(tool, args)),
                            ("FUNCTION RESPONSE", json.dumps(response, ensure_ascii=False)),
                            ("ASSISTANT", answer)] + follow_up_turns(follow_ups, declared))
        rows.append({"system": system_for(declared, sep, compact), "chat": chat})
    for declared, request, answer, follow_ups in c["no_call"]:
        rows.append({"system": system_for(declared),
                     "chat": glaive_chat([("USER", request), ("ASSISTANT", answer)]
                                         + follow_up_turns(follow_ups, declared))})
    for request, answer, follow_ups in c["no_access"]:
        rows.append({"system": GLAIVE_NO_TOOLS, "chat": glaive_chat([("USER", request), ("ASSISTANT", answer)]
                                                                    + follow_up_turns(follow_ups, None))})
    # pitfall: an empty first USER turn (the adapter rejects it: empty_user_turn)
    rows.append({"system": system_for(["get_stock_price", "get_exchange_rate"]),
                 "chat": glaive_chat([("USER", ""), ("ASSISTANT", "Hello! How can I help you today?"),
                                      ("USER", "What is the stock price of AAPL?"),
                                      ("ASSISTANT", glaive_call("get_stock_price", {"symbol": "AAPL"})),
                                      ("FUNCTION RESPONSE", '{"symbol": "AAPL", "price": 189.84}'),
                                      ("ASSISTANT", "Apple (AAPL) is trading at $189.84.")])})
    # a clarification before the call: the first USER turn is not an example request
    rows.append({"system": system_for(["get_weather", "convert_currency", "get_stock_price"]),
                 "chat": glaive_chat([
                     ("USER", "I need to convert some money."),
                     ("ASSISTANT", "Of course. How much, and from which currency to which?"),
                     ("USER", "I need to convert 1200 EUR to INR."),
                     ("ASSISTANT", glaive_call("convert_currency",
                                               {"amount": 1200, "from_currency": "EUR", "to_currency": "INR"})),
                     ("FUNCTION RESPONSE", '{"converted_amount": 108540.0, "from_currency": "EUR", "to_currency": "INR"}'),
                     ("ASSISTANT", "1200 EUR is about 108,540 INR.")])})
    order = list(range(len(rows)))
    random.Random(7).shuffle(order)
    return [rows[i] for i in order]


# ------------------------------------------------------------------------------------------ B2

def make_b2() -> list[dict]:
    rows = []
    for i, t in enumerate(b2_content()):
        n = len(t["tests"])
        status = ["pass"] * n
        if i % 9 == 4:
            status[-1] = "fail"
        score = sum(s == "pass" for s in status) / n
        judgement = {
            "requirement_conformance": {"score": 5, "justification": t.get("j1", "The function meets all requirements of the task.")},
            "logical_correctness": {"score": 5 if score == 1 else 4,
                                    "justification": "The logic is correct." if score == 1
                                    else "Mostly correct; one edge case is mishandled."},
            "edge_case_consideration": {"score": 4, "justification": t.get("j3", "Handles the common edge cases such as empty input.")},
        }
        rows.append({
            "id": md5("oci:" + t["input"]) if t["input"].strip() else md5(f"oci-empty-{i}"),
            "input": t["input"],
            "output": t["output"],
            "domain": t["domain"],
            "generation_algorithm": t["algo"],
            "llm_judgement": json.dumps(judgement),
            "unit_tests": json.dumps(t["tests"]),
            "tests_execution_status": json.dumps(status),
            "average_test_score": f"{score:g}",
        })
    return rows


# ------------------------------------------------------------------------------------------ B3

def make_b3() -> list[dict]:
    rows = []
    for p in b3_content():
        for k, (reasoning, solution) in enumerate(p["responses"]):
            rows.append({
                "id": md5("ocr:" + p["input"]),
                "input": p["input"],
                "output": f"<think>\n{reasoning}\n</think>\n\n```python\n{solution}\n```",
                "source": p["source"],
                "license": p["license"],
                "dataset": p["dataset"],
                "split": "train",
                "difficulty": p["difficulty"],
                "solution": solution,
            })
    order = list(range(len(rows)))
    random.Random(3).shuffle(order)
    return [rows[i] for i in order]


# ------------------------------------------------------------------------------------------ B4

def make_b4() -> list[dict]:
    rows = []
    for q, think, answer, source in b4_content():
        assistant = f"<think>\n{think}\n</think>\n\n{answer}"
        q_text = q if isinstance(q, str) else "\n".join(p["text"] for p in q)
        num_tokens = (len(q_text) + len(assistant)) // 4 + 11
        rows.append({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": assistant}],
                     "num_tokens": num_tokens, "source": source})
    return rows


# ------------------------------------------------------------------------------------------ B5

def make_b5() -> list[dict]:
    c = b5_content()
    rows = []
    for q, thought, solution in c["items"]:
        rows.append({"system": c["system"], "conversations": [
            {"from": "user", "value": q},
            {"from": "assistant", "value": (f"<|begin_of_thought|>\n\n{thought}\n\n<|end_of_thought|>\n\n"
                                            f"<|begin_of_solution|>\n\n{solution}\n\n<|end_of_solution|>")},
        ]})
    order = list(range(len(rows)))
    random.Random(5).shuffle(order)
    return [rows[i] for i in order]


# ------------------------------------------------------------------------------------------ B6

def make_b6() -> list[dict]:
    rows = []
    for turns in b6_content():
        first = turns[0]
        if isinstance(first, str):
            prompt = first
        elif isinstance(first, list):
            prompt = "\n".join(p["text"] for p in first)
        else:
            prompt = ""
        msgs = [{"content": t, "role": "user" if k % 2 == 0 else "assistant"} for k, t in enumerate(turns)]
        rows.append({"prompt": prompt, "prompt_id": sha256(prompt or json.dumps(turns[1])), "messages": msgs})
    return rows


# ------------------------------------------------------------------------------------------ B7

def make_b7() -> list[dict]:
    rng = random.Random(77)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    rows = []
    for chunk, convo in b7_content():
        cid = "".join(rng.choice(alphabet) for _ in range(7))
        rows.append({"id": f"{cid}_{chunk}", "conversations": [{"from": f, "value": v} for f, v in convo]})
    return rows


# ------------------------------------------------------------------------------------------ B8

def make_b8() -> list[dict]:
    c = b8_content()
    rows = []
    for k, item in enumerate(c["items"]):
        system = c["long_system"] if item.get("long") else c["system"]
        user = c["user_template"].format(issue=item["issue"], repo=item["repo"])
        date = "01.01.2023" if k % 3 else "01.04.2024"
        traj = [
            {"role": "system", "text": None, "system_prompt": system, "mask": False, "cutoff_date": date},
            {"role": "user", "text": user, "system_prompt": None, "mask": False, "cutoff_date": date},
            {"role": "ai", "text": item["step1"], "system_prompt": None, "mask": True, "cutoff_date": date},
            {"role": "user", "text": item["obs1"], "system_prompt": None, "mask": False, "cutoff_date": date},
            {"role": "ai", "text": "DISCUSSION\nThe change is in place, so I will submit it.\n```\nsubmit\n```",
             "system_prompt": None, "mask": True, "cutoff_date": date},
        ]
        rows.append({
            "instance_id": item["instance_id"],
            "model_name": item["model"],
            "target": item["target"],
            "trajectory": traj,
            "exit_status": item.get("exit_status", "submitted"),
            "generated_patch": item["patch"],
            "eval_logs": (f"Will execute following command for apply_patch:\n```\ncd //{item['repo']} &&\n"
                          f"source activate base &&\nconda activate {item['repo']} &&\n"
                          f"git apply -v /swebench_matterhorn/prediction_patch.patch --allow-empty\n```\n\n"
                          f"Checking patch {item['file']}...\nApplied patch {item['file']} cleanly.\n"
                          f"Test results: {'PASSED' if item['target'] else 'FAILED'}\n"),
        })
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "kimi_eagle_data" / "sources" / "samples")
    ap.add_argument("--pool", type=Path, default=ROOT / "scripts" / "tiny_kimi" / "tool_pool.json")
    args = ap.parse_args(argv)
    pool = json.loads(args.pool.read_text(encoding="utf-8"))
    files = {
        "B1-glaive": make_b1(pool),
        "B2-opencodeinstruct": make_b2(),
        "B3-opencodereasoning": make_b3(),
        "B4-mixturethoughts": make_b4(),
        "B5-openthoughts": make_b5(),
        "B6-ultrachat": make_b6(),
        "B7-sharegpt": make_b7(),
        "B8-sweagent": make_b8(),
    }
    for stem, rows in files.items():
        write_jsonl(args.out / f"{stem}.jsonl", rows)
        print(f"{stem}.jsonl: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
