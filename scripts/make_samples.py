"""Write the bundled sample rows: builders/samples/{config}-{name}.jsonl, one file per partition.

Rows are written by this project, in each upstream dataset's exact column schema
(REFERENCE.md "Upstream datasets"), with short prompts (the embedded demo model has a 512-token
context) and the upstream pitfalls of SPEC §2 in a few rows each. B1 (glaive) declares tools drawn
only from the tiny model's tool pool (scripts/tiny_kimi/tool_pool.json), and most of its user
turns are the pool's example requests, because the tiny model only learned to call pool tools
when asked that way. The output is deterministic: run `python scripts/make_samples.py` and
`git diff --exit-code builders/samples` shows nothing.

Usage: python scripts/make_samples.py [--out DIR] [--pool PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

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

    rows = []
    for i, (tool, request, args, response, answer) in enumerate(c["tool_requests"]):
        if tool not in tools:
            raise SystemExit(f"B1: tool {tool!r} is not in the tool pool; update sample_content.py")
        if request not in requests.get(tool, []):
            raise SystemExit(f"B1: {request!r} is not an example request of {tool!r} in the pool")
        declared = pick_tools(tool, 2 + (i % 2))
        sep, compact = ("\n", True) if i % 7 == 3 else ("\n\n", False)
        chat = glaive_chat([("USER", request), ("ASSISTANT", glaive_call(tool, args)),
                            ("FUNCTION RESPONSE", json.dumps(response, ensure_ascii=False)),
                            ("ASSISTANT", answer)])
        rows.append({"system": system_for(declared, sep, compact), "chat": chat})
    for declared, request, answer in c["no_call"]:
        rows.append({"system": system_for(declared),
                     "chat": glaive_chat([("USER", request), ("ASSISTANT", answer)])})
    for request, answer in c["no_access"]:
        rows.append({"system": GLAIVE_NO_TOOLS, "chat": glaive_chat([("USER", request), ("ASSISTANT", answer)])})
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


# ============================================================================================
# Content. Topics are plausible and varied; the tiny demo model's text is meaningless anyway.


def b1_content() -> dict:
    """glaive: (tool, pool example request, arguments, function response, final answer)."""
    tool_requests = [
        ("get_weather", "What's the weather in Paris right now?", {"city": "Paris"},
         {"city": "Paris", "temperature": 18, "condition": "Cloudy"},
         "It is currently 18 degrees and cloudy in Paris."),
        ("search_web", "Search the web for 5 results about quantum computing.",
         {"query": "quantum computing", "num_results": 5},
         {"results": ["What is quantum computing?", "Qubits explained", "Quantum error correction",
                      "Shor's algorithm", "Quantum hardware in 2024"]},
         "Here are five results about quantum computing, from an introduction to error correction."),
        ("convert_currency", "Convert 100 USD to EUR.",
         {"amount": 100, "from_currency": "USD", "to_currency": "EUR"},
         {"converted_amount": 92.4, "from_currency": "USD", "to_currency": "EUR"},
         "100 USD is about 92.40 EUR."),
        ("send_email", "Email bob@work.org that the report is ready.",
         {"to": "bob@work.org", "subject": "Report", "body": "Hi Bob, the report's ready."},
         {"status": "sent"}, "Done: I emailed Bob that the report is ready."),
        ("calculate_tip", "Calculate a 15% tip on a $80 bill.", {"bill_amount": 80, "tip_percentage": 15},
         {"tip_amount": 12.0}, "A 15% tip on an $80 bill is $12."),
        ("get_stock_price", "How is NVDA's stock price doing today?", {"symbol": "NVDA"},
         {"symbol": "NVDA", "price": 875.28, "change": "+2.1%"}, "NVIDIA is at $875.28 today, up 2.1%."),
        ("translate_text", "Translate 'good morning' into Spanish.",
         {"text": "good morning", "target_language": "Spanish"}, {"translated_text": "buenos días"},
         "'Good morning' in Spanish is 'buenos días'."),
        ("get_current_time", "What time is it right now?", {}, {"time": "14:32"}, "It is 14:32 right now."),
        ("generate_password", "I need a new random password, 12 characters with symbols.",
         {"length": 12, "include_symbols": True}, {"password": "q7#Lm2!vR9&x"},
         "Here is your new password: q7#Lm2!vR9&x"),
        ("create_calendar_event", "Create a calendar event 'Dentist' on 2024-05-14 at 09:30.",
         {"title": "Dentist", "date": "2024-05-14", "time": "09:30"}, {"status": "created"},
         "Your Dentist appointment is on the calendar for May 14 at 09:30."),
        ("get_random_joke", "I'm bored, get me a joke.", {},
         {"joke": "Why don't skeletons fight each other? They don't have the guts."},
         "Here's one: why don't skeletons fight each other? They don't have the guts."),
        ("get_movie_details", "Tell me about the movie 'The Matrix' from 1999.", {"title": "The Matrix", "year": 1999},
         {"title": "The Matrix", "year": 1999, "director": "The Wachowskis", "rating": 8.7},
         "The Matrix (1999), directed by the Wachowskis, is rated 8.7."),
        ("book_restaurant", "Book a table at Luigi's for 4 people at 19:00.",
         {"restaurant": "Luigi's", "party_size": 4, "time": "19:00"}, {"status": "confirmed", "table": 12},
         "Your table for 4 at Luigi's is confirmed for 19:00."),
        ("play_music", "Play the song 'Bohemian Rhapsody'.", {"song": "Bohemian Rhapsody"}, {"status": "playing"},
         "Now playing Bohemian Rhapsody."),
        ("set_reminder", "Set a reminder to call mom at 2024-05-01 18:00.",
         {"message": "Call mom", "remind_at": "2024-05-01 18:00"}, {"status": "scheduled"},
         "I'll remind you to call mom on May 1 at 18:00."),
        ("search_recipes", "Find me a recipe using eggs, spinach and cheese.",
         {"ingredients": ["eggs", "spinach", "cheese"]}, {"recipes": ["Spinach and cheese omelette", "Spinach frittata"]},
         "You could make a spinach and cheese omelette or a spinach frittata."),
        ("calculate_loan_payment", "Calculate the monthly loan payment for 200000 at 5% over 30 years.",
         {"principal": 200000, "annual_rate": 5, "years": 30}, {"monthly_payment": 1073.64},
         "The monthly payment would be about $1,073.64."),
        ("get_flight_status", "Check the status of flight UA902.", {"flight_number": "UA902"},
         {"flight_number": "UA902", "status": "On time", "departure": "17:45"},
         "Flight UA902 is on time, departing at 17:45."),
        ("get_definition", "What is the definition of 'serendipity'?", {"word": "serendipity"},
         {"definition": "The occurrence of events by chance in a happy or beneficial way."},
         "Serendipity means finding something good by chance."),
        ("check_spelling", "Please check spelling in this sentence: 'I beleive its definately true'.",
         {"text": "I beleive its definately true"}, {"corrected": "I believe it's definitely true"},
         "Corrected: 'I believe it's definitely true'."),
        ("get_random_quote", "Get an inspirational quote for today.", {},
         {"quote": "The best way out is always through.", "author": "Robert Frost"},
         "Today's quote: 'The best way out is always through.' (Robert Frost)"),
        ("create_todo", "Add a to-do item: renew passport, due 2024-09-01.",
         {"task": "Renew passport", "due_date": "2024-09-01"}, {"status": "created"},
         "Added 'Renew passport', due September 1, 2024."),
    ]
    no_call = [
        (["get_weather", "calculate_distance"], "What's a good way to remember the order of the planets?",
         "Try a mnemonic: My Very Educated Mother Just Served Us Noodles."),
        (["convert_currency", "get_exchange_rate"], "Can you explain what inflation is in simple terms?",
         "Inflation means prices rise over time, so the same money buys a little less."),
        (["get_news_headlines", "search_web", "play_music"], "Write a two-line poem about autumn leaves.",
         "Red and gold they drift and fall,\nautumn whispers to us all."),
        (["calculate_bmi", "calculate_age"], "Can you book a flight for me from New York to London?",
         "I'm sorry, but I can't book flights. My functions only calculate BMI and age."),
        (["roll_dice", "generate_qr_code", "get_random_quote"], "What is the capital of Australia?",
         "The capital of Australia is Canberra."),
    ]
    no_access = [
        ("How do I make a simple vinaigrette?",
         "Whisk three parts olive oil with one part vinegar, then add salt, pepper and a little mustard."),
        ("Explain the difference between a virus and a bacterium.",
         "Bacteria are living cells that can reproduce on their own; viruses need a host cell to copy themselves."),
        ("Suggest three names for a pet turtle.", "How about Shelly, Captain Slow, or Donatello?"),
    ]
    return {"tool_requests": tool_requests, "no_call": no_call, "no_access": no_access}


def _oci(func: str, task: str, sample_in: str, sample_out: str, code: str, tests: list[str],
         domain: str = "generic", algo: str = "self-instruct") -> dict:
    text = (f"{task}\n\n**Sample Input:**\n```\n{sample_in}\n```\n\n**Sample Output:**\n```\n{sample_out}\n```")
    return {"input": text, "output": f"```python\n{code}\n```", "domain": domain, "algo": algo, "tests": tests}


def b2_content() -> list[dict]:
    """OpenCodeInstruct: short coding tasks with a solution and unit tests."""
    return [
        _oci("reverse_words", "Write a function `reverse_words(s)` that returns the words of the string `s` in reverse order, separated by single spaces.",
             "\"hello big world\"", "\"world big hello\"",
             "def reverse_words(s):\n    return \" \".join(reversed(s.split()))",
             ["assert reverse_words('hello big world') == 'world big hello'", "assert reverse_words('') == ''", "assert reverse_words('a') == 'a'"]),
        _oci("is_palindrome", "Implement `is_palindrome(s)` that returns `True` if `s` reads the same forwards and backwards, ignoring case and non-alphanumeric characters.",
             "\"A man, a plan, a canal: Panama\"", "True",
             "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]",
             ["assert is_palindrome('A man, a plan, a canal: Panama')", "assert not is_palindrome('hello')", "assert is_palindrome('')"]),
        _oci("fizzbuzz", "Write `fizzbuzz(n)` returning a list of strings for 1..n: \"Fizz\" for multiples of 3, \"Buzz\" for multiples of 5, \"FizzBuzz\" for both, else the number.",
             "5", "['1', '2', 'Fizz', '4', 'Buzz']",
             "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n        out.append(s or str(i))\n    return out",
             ["assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']", "assert fizzbuzz(15)[-1] == 'FizzBuzz'", "assert fizzbuzz(0) == []"],
             algo="evol-instruct"),
        _oci("count_vowels", "Given a string, return the number of vowels (a, e, i, o, u, either case) it contains.",
             "\"Programming\"", "3",
             "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
             ["assert count_vowels('Programming') == 3", "assert count_vowels('xyz') == 0", "assert count_vowels('AEIOU') == 5"]),
        _oci("merge_sorted", "You are given two sorted lists of integers. Write `merge_sorted(a, b)` that merges them into one sorted list in O(len(a) + len(b)) time.",
             "[1, 4, 7], [2, 3, 8]", "[1, 2, 3, 4, 7, 8]",
             "def merge_sorted(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]",
             ["assert merge_sorted([1, 4, 7], [2, 3, 8]) == [1, 2, 3, 4, 7, 8]", "assert merge_sorted([], [1]) == [1]", "assert merge_sorted([], []) == []"],
             domain="algorithmic"),
        _oci("second_largest", "Write a function that returns the second largest distinct number in a list, or `None` if there is none.",
             "[4, 1, 4, 3]", "3",
             "def second_largest(nums):\n    s = sorted(set(nums))\n    return s[-2] if len(s) > 1 else None",
             ["assert second_largest([4, 1, 4, 3]) == 3", "assert second_largest([5]) is None", "assert second_largest([2, 2]) is None"]),
        _oci("word_frequencies", "Implement `word_frequencies(text)` returning a dictionary that maps each lowercase word to the number of times it occurs. Words are separated by whitespace.",
             "\"the cat and the hat\"", "{'the': 2, 'cat': 1, 'and': 1, 'hat': 1}",
             "from collections import Counter\n\ndef word_frequencies(text):\n    return dict(Counter(text.lower().split()))",
             ["assert word_frequencies('the cat and the hat')['the'] == 2", "assert word_frequencies('') == {}"]),
        _oci("flatten", "Write `flatten(nested)` that flattens an arbitrarily nested list of integers into a flat list.",
             "[1, [2, [3, 4]], 5]", "[1, 2, 3, 4, 5]",
             "def flatten(nested):\n    out = []\n    for x in nested:\n        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out",
             ["assert flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]", "assert flatten([]) == []", "assert flatten([[[]]]) == []"],
             algo="evol-instruct"),
        _oci("BankAccount", "Design a `BankAccount` class with `deposit(amount)`, `withdraw(amount)` and `balance()` methods. Withdrawing more than the balance must raise `ValueError`.",
             "acct = BankAccount(); acct.deposit(50); acct.withdraw(20); acct.balance()", "30",
             "class BankAccount:\n    def __init__(self):\n        self._balance = 0\n\n    def deposit(self, amount):\n        self._balance += amount\n\n    def withdraw(self, amount):\n        if amount > self._balance:\n            raise ValueError('insufficient funds')\n        self._balance -= amount\n\n    def balance(self):\n        return self._balance",
             ["a = BankAccount(); a.deposit(50); a.withdraw(20); assert a.balance() == 30", "a = BankAccount()\ntry:\n    a.withdraw(1)\n    assert False\nexcept ValueError:\n    pass"]),
        _oci("gcd", "Write `gcd(a, b)` computing the greatest common divisor of two non-negative integers with Euclid's algorithm.",
             "48 18", "6",
             "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
             ["assert gcd(48, 18) == 6", "assert gcd(7, 0) == 7", "assert gcd(0, 0) == 0"], domain="algorithmic"),
        _oci("unique_chars", "Determine whether all characters in a string are unique. Return a boolean.",
             "\"abcdef\"", "True",
             "def unique_chars(s):\n    return len(set(s)) == len(s)",
             ["assert unique_chars('abcdef')", "assert not unique_chars('hello')", "assert unique_chars('')"]),
        _oci("celsius_to_fahrenheit", "Convert a list of temperatures from Celsius to Fahrenheit, rounding each to one decimal place.",
             "[0, 37, 100]", "[32.0, 98.6, 212.0]",
             "def celsius_to_fahrenheit(temps):\n    return [round(t * 9 / 5 + 32, 1) for t in temps]",
             ["assert celsius_to_fahrenheit([0, 37, 100]) == [32.0, 98.6, 212.0]", "assert celsius_to_fahrenheit([]) == []"]),
        _oci("binary_search", "Implement `binary_search(arr, target)` for a sorted list. Return the index of `target`, or -1 if it is absent.",
             "[1, 3, 5, 7, 9], 7", "3",
             "def binary_search(arr, target):\n    lo, hi = 0, len(arr) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if arr[mid] == target:\n            return mid\n        if arr[mid] < target:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1",
             ["assert binary_search([1, 3, 5, 7, 9], 7) == 3", "assert binary_search([1, 3], 2) == -1", "assert binary_search([], 1) == -1"],
             domain="algorithmic"),
        _oci("chunk", "Write `chunk(lst, n)` that splits a list into consecutive chunks of size `n`; the last chunk may be shorter.",
             "[1, 2, 3, 4, 5], 2", "[[1, 2], [3, 4], [5]]",
             "def chunk(lst, n):\n    return [lst[i:i + n] for i in range(0, len(lst), n)]",
             ["assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]", "assert chunk([], 3) == []"]),
        _oci("parse_csv_line", "Parse one line of comma-separated values into a list of stripped strings. Empty fields stay as empty strings.",
             "\" a, b ,,c \"", "['a', 'b', '', 'c']",
             "def parse_csv_line(line):\n    return [field.strip() for field in line.split(',')]",
             ["assert parse_csv_line(' a, b ,,c ') == ['a', 'b', '', 'c']", "assert parse_csv_line('x') == ['x']"],
             algo="evol-instruct"),
        _oci("roman_to_int", "Convert a Roman numeral string (I, V, X, L, C, D, M) to an integer.",
             "\"MCMXCIV\"", "1994",
             "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for a, b in zip(s, s[1:] + ' '):\n        total += -v[a] if b != ' ' and v[a] < v[b] else v[a]\n    return total",
             ["assert roman_to_int('MCMXCIV') == 1994", "assert roman_to_int('III') == 3", "assert roman_to_int('IX') == 9"],
             domain="algorithmic"),
        _oci("moving_average", "Given a list of numbers and a window size `k`, return the list of averages of every contiguous window of length `k`.",
             "[1, 2, 3, 4, 5], 3", "[2.0, 3.0, 4.0]",
             "def moving_average(xs, k):\n    return [sum(xs[i:i + k]) / k for i in range(len(xs) - k + 1)]",
             ["assert moving_average([1, 2, 3, 4, 5], 3) == [2.0, 3.0, 4.0]", "assert moving_average([1], 2) == []"]),
        _oci("validate_email", "Write `is_valid_email(s)` that returns True when `s` has exactly one '@', a non-empty local part, and a domain containing a dot.",
             "\"user@example.com\"", "True",
             "def is_valid_email(s):\n    if s.count('@') != 1:\n        return False\n    local, domain = s.split('@')\n    return bool(local) and '.' in domain.strip('.')",
             ["assert is_valid_email('user@example.com')", "assert not is_valid_email('user@@x.com')", "assert not is_valid_email('@x.com')"]),
        _oci("group_anagrams", "Group a list of words into lists of anagrams. Return the groups sorted by their first word.",
             "[\"eat\", \"tea\", \"tan\", \"ate\", \"nat\"]", "[['eat', 'tea', 'ate'], ['tan', 'nat']]",
             "from collections import defaultdict\n\ndef group_anagrams(words):\n    groups = defaultdict(list)\n    for w in words:\n        groups[''.join(sorted(w))].append(w)\n    return sorted(groups.values(), key=lambda g: g[0])",
             ["assert group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat']) == [['eat', 'tea', 'ate'], ['tan', 'nat']]", "assert group_anagrams([]) == []"],
             algo="evol-instruct"),
        _oci("Stack", "Implement a `Stack` class with `push`, `pop`, `peek` and `is_empty`. `pop` and `peek` on an empty stack return `None`.",
             "s = Stack(); s.push(1); s.push(2); s.pop()", "2",
             "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, x):\n        self._items.append(x)\n\n    def pop(self):\n        return self._items.pop() if self._items else None\n\n    def peek(self):\n        return self._items[-1] if self._items else None\n\n    def is_empty(self):\n        return not self._items",
             ["s = Stack(); s.push(1); s.push(2); assert s.pop() == 2", "assert Stack().pop() is None", "assert Stack().is_empty()"]),
        _oci("prime_factors", "Return the prime factors of a positive integer `n` in ascending order, with multiplicity.",
             "60", "[2, 2, 3, 5]",
             "def prime_factors(n):\n    out, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    if n > 1:\n        out.append(n)\n    return out",
             ["assert prime_factors(60) == [2, 2, 3, 5]", "assert prime_factors(1) == []", "assert prime_factors(13) == [13]"],
             domain="algorithmic"),
        _oci("capitalize_words", "Capitalize the first letter of every word in a sentence and lowercase the rest.",
             "\"hELLO wORLD\"", "\"Hello World\"",
             "def capitalize_words(s):\n    return ' '.join(w.capitalize() for w in s.split(' '))",
             ["assert capitalize_words('hELLO wORLD') == 'Hello World'", "assert capitalize_words('') == ''"]),
        _oci("dict_invert", "Invert a dictionary so that values become keys. If several keys share a value, keep a sorted list of them.",
             "{'a': 1, 'b': 2, 'c': 1}", "{1: ['a', 'c'], 2: ['b']}",
             "def dict_invert(d):\n    out = {}\n    for k, v in d.items():\n        out.setdefault(v, []).append(k)\n    return {v: sorted(ks) for v, ks in out.items()}",
             ["assert dict_invert({'a': 1, 'b': 2, 'c': 1}) == {1: ['a', 'c'], 2: ['b']}", "assert dict_invert({}) == {}"]),
        _oci("running_max", "Return a list where element i is the maximum of the first i+1 elements of the input list.",
             "[3, 1, 4, 1, 5]", "[3, 3, 4, 4, 5]",
             "from itertools import accumulate\n\ndef running_max(xs):\n    return list(accumulate(xs, max))",
             ["assert running_max([3, 1, 4, 1, 5]) == [3, 3, 4, 4, 5]", "assert running_max([]) == []"]),
        _oci("compress", "Implement basic run-length encoding: \"aaabcc\" becomes \"a3b1c2\".",
             "\"aaabcc\"", "\"a3b1c2\"",
             "from itertools import groupby\n\ndef compress(s):\n    return ''.join(f'{k}{len(list(g))}' for k, g in groupby(s))",
             ["assert compress('aaabcc') == 'a3b1c2'", "assert compress('') == ''", "assert compress('z') == 'z1'"],
             algo="evol-instruct"),
        _oci("matrix_transpose", "Transpose a matrix given as a list of equal-length rows.",
             "[[1, 2, 3], [4, 5, 6]]", "[[1, 4], [2, 5], [3, 6]]",
             "def matrix_transpose(m):\n    return [list(r) for r in zip(*m)]",
             ["assert matrix_transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]", "assert matrix_transpose([]) == []"]),
        _oci("safe_divide", "Write `safe_divide(a, b)` that returns `a / b`, or the string \"undefined\" when `b` is zero.",
             "10 0", "\"undefined\"",
             "def safe_divide(a, b):\n    return 'undefined' if b == 0 else a / b",
             ["assert safe_divide(10, 0) == 'undefined'", "assert safe_divide(9, 3) == 3"]),
        # pitfall: an empty (whitespace-only) input -> empty_user_turn
        {"input": "   \n", "output": "```python\npass\n```", "domain": "generic", "algo": "self-instruct",
         "tests": ["assert True"]},
    ]


def _cp(statement: str, inp: str, out: str, ex_in: str, ex_out: str, source: str, difficulty: str,
        responses: list[tuple[str, str]], dataset: str = "code_contests", license: str = "cc-by-4.0") -> dict:
    text = (f"{statement}\n\nInput\n\n{inp}\n\nOutput\n\n{out}\n\nExamples\n\nInput\n\n{ex_in}\n\n"
            f"Output\n\n{ex_out}")
    return {"input": text, "source": source, "difficulty": difficulty, "dataset": dataset,
            "license": license, "responses": responses}


def b3_content() -> list[dict]:
    """OpenCodeReasoning split_0: competitive-programming problems; several responses per
    problem (same id and input), which is why B3 dedups by `input`."""
    return [
        _cp("Vasya has n coins. He wants to split them into two piles whose sizes differ by at most one. Print the size of the larger pile.",
            "The only line contains one integer n (1 ≤ n ≤ 10^9).", "Print one integer.", "7", "4",
            "codeforces", "EASY",
            [("The larger pile has ceil(n/2) coins, which is (n + 1) // 2.", "n = int(input())\nprint((n + 1) // 2)"),
             ("Splitting as evenly as possible gives n//2 and n - n//2; the larger is n - n//2.", "n = int(input())\nprint(n - n // 2)"),
             ("Check small cases: n=1 gives 1, n=2 gives 1, n=7 gives 4. So the answer is (n+1)//2.", "print((int(input()) + 1) // 2)")]),
        _cp("Given a string s of lowercase letters, print the number of distinct characters in it.",
            "A single line with the string s (1 ≤ |s| ≤ 10^5).", "Print the number of distinct letters.", "hello", "4",
            "atcoder", "0",
            [("A set of the characters gives the distinct ones; print its size.", "print(len(set(input().strip())))"),
             ("Use a boolean array of 26 letters and count the marked ones.", "s = input().strip()\nseen = [False] * 26\nfor c in s:\n    seen[ord(c) - 97] = True\nprint(sum(seen))"),
             ("Distinct count equals the size of the set. Strip the newline first.", "s = input().strip()\nprint(len(set(s)))")]),
        _cp("You are given an array of n integers. Find the maximum sum of a non-empty contiguous subarray.",
            "The first line contains n (1 ≤ n ≤ 2·10^5). The second line contains n integers a_i (|a_i| ≤ 10^9).",
            "Print the maximum subarray sum.", "5\n-2 3 -1 4 -5", "6", "codeforces", "MEDIUM",
            [("Kadane's algorithm: keep the best sum ending here and the best overall.",
              "n = int(input())\na = list(map(int, input().split()))\nbest = cur = a[0]\nfor x in a[1:]:\n    cur = max(x, cur + x)\n    best = max(best, cur)\nprint(best)"),
             ("Prefix sums: answer is max over j of prefix[j] - min prefix before j.",
              "n = int(input())\na = list(map(int, input().split()))\np = 0\nlo = 0\nbest = -10**19\nfor x in a:\n    p += x\n    best = max(best, p - lo)\n    lo = min(lo, p)\nprint(best)")]),
        _cp("Chef has a list of N exam scores. Print how many scores are strictly greater than the average score.",
            "The first line contains T, the number of test cases. Each test case has N, then N integers.",
            "For each test case print the count.", "1\n4\n10 20 30 40", "2", "codechef", "EASY",
            [("Compare each score with the average; to avoid floats compare x*N with the sum.",
              "for _ in range(int(input())):\n    n = int(input())\n    a = list(map(int, input().split()))\n    s = sum(a)\n    print(sum(x * n > s for x in a))"),
             ("Compute the mean as a float and count values above it.",
              "t = int(input())\nfor _ in range(t):\n    n = int(input())\n    a = list(map(int, input().split()))\n    m = sum(a) / n\n    print(len([x for x in a if x > m]))")]),
        _cp("A number is called lucky if its decimal digits are only 4 and 7. Given n, decide whether n is lucky.",
            "One integer n (1 ≤ n ≤ 10^18).", "Print YES or NO.", "4774", "YES", "codeforces", "EASY",
            [("Check every digit of the string.", "s = input().strip()\nprint('YES' if set(s) <= {'4', '7'} else 'NO')"),
             ("Strip 4s and 7s; if nothing is left the number is lucky.", "s = input().strip()\nprint('YES' if not s.replace('4', '').replace('7', '') else 'NO')"),
             ("all() over the digits.", "print('YES' if all(c in '47' for c in input().strip()) else 'NO')")]),
        _cp("Given the side lengths of a triangle, decide whether it is right-angled.",
            "Three integers a, b, c (1 ≤ a, b, c ≤ 1000).", "Print YES or NO.", "3 5 4", "YES", "aizu", "UNKNOWN_DIFFICULTY",
            [("Sort the sides; check a² + b² = c².", "a, b, c = sorted(map(int, input().split()))\nprint('YES' if a * a + b * b == c * c else 'NO')")]),
        _cp("Print the sum of the digits of a non-negative integer n.",
            "One integer n (0 ≤ n ≤ 10^100).", "Print the digit sum.", "1234", "10", "hackerearth", "EASY",
            [("Sum the characters as integers.", "print(sum(map(int, input().strip())))")]),
        _cp("There are n stairs. You can climb 1 or 2 stairs at a time. Count the ways to reach the top modulo 10^9+7.",
            "One integer n (1 ≤ n ≤ 10^6).", "Print the number of ways modulo 10^9+7.", "4", "5", "codechef", "MEDIUM",
            [("This is Fibonacci: ways(n) = ways(n-1) + ways(n-2).",
              "n = int(input())\na, b = 1, 1\nfor _ in range(n):\n    a, b = b, (a + b) % 1000000007\nprint(a)")]),
        _cp("Given n words, print them sorted by length, ties kept in input order.",
            "The first line has n (1 ≤ n ≤ 1000); then n lines with one word each.", "Print the words, one per line.",
            "3\nbanana\nkiwi\napple", "kiwi\napple\nbanana", "aizu", "UNKNOWN_DIFFICULTY",
            [("Python's sort is stable, so sorting by len keeps ties in order.",
              "n = int(input())\nws = [input().strip() for _ in range(n)]\nprint('\\n'.join(sorted(ws, key=len)))")]),
        _cp("Takahashi walks A meters per minute. How many whole minutes does he need to walk at least D meters?",
            "Two integers A and D (1 ≤ A, D ≤ 10^4).", "Print the answer.", "3 10", "4", "atcoder", "0",
            [("Ceil division: (D + A - 1) // A.", "a, d = map(int, input().split())\nprint((d + a - 1) // a)")]),
        _cp("Count the number of pairs (i, j), i < j, such that a_i + a_j is divisible by k.",
            "The first line has n and k (1 ≤ n ≤ 2·10^5, 1 ≤ k ≤ 100). The second line has n integers.",
            "Print the number of pairs.", "5 3\n1 2 3 4 5", "4", "codeforces", "MEDIUM",
            [("Count remainders; pair remainder r with (k - r) % k as we scan.",
              "n, k = map(int, input().split())\ncnt = [0] * k\nans = 0\nfor x in map(int, input().split()):\n    ans += cnt[(k - x % k) % k]\n    cnt[x % k] += 1\nprint(ans)")]),
        _cp("Given a grid of '.' and '#', count the connected regions of '#' cells (4-directional).",
            "The first line has h and w (1 ≤ h, w ≤ 100); then h lines of w characters.", "Print the number of regions.",
            "3 4\n#..#\n#..#\n.##.", "3", "aizu", "UNKNOWN_DIFFICULTY",
            [("Flood fill from every unvisited '#' with an explicit stack.",
              "h, w = map(int, input().split())\ng = [list(input()) for _ in range(h)]\nans = 0\nfor i in range(h):\n    for j in range(w):\n        if g[i][j] == '#':\n            ans += 1\n            st = [(i, j)]\n            g[i][j] = '.'\n            while st:\n                y, x = st.pop()\n                for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n                    ny, nx = y + dy, x + dx\n                    if 0 <= ny < h and 0 <= nx < w and g[ny][nx] == '#':\n                        g[ny][nx] = '.'\n                        st.append((ny, nx))\nprint(ans)")]),
        _cp("A string is balanced if every '(' has a matching ')'. Print YES if the bracket string is balanced.",
            "One line with the string (1 ≤ length ≤ 10^5).", "Print YES or NO.", "(()())", "YES", "hackerearth", "EASY",
            [("Track depth; it must never go negative and must end at zero.",
              "d = 0\nok = True\nfor c in input().strip():\n    d += 1 if c == '(' else -1\n    if d < 0:\n        ok = False\n        break\nprint('YES' if ok and d == 0 else 'NO')")]),
        _cp("Print all primes not greater than n, separated by spaces.",
            "One integer n (2 ≤ n ≤ 10^6).", "Print the primes in increasing order.", "20", "2 3 5 7 11 13 17 19",
            "codechef", "EASY",
            [("Sieve of Eratosthenes.",
              "n = int(input())\nis_p = [True] * (n + 1)\nis_p[0] = is_p[1] = False\nfor i in range(2, int(n ** 0.5) + 1):\n    if is_p[i]:\n        is_p[i * i::i] = [False] * len(is_p[i * i::i])\nprint(' '.join(str(i) for i in range(n + 1) if is_p[i]))")]),
        _cp("You have n tasks with durations t_i and one worker. Minimize the sum of completion times.",
            "The first line has n (1 ≤ n ≤ 10^5); the second has n integers t_i.", "Print the minimal sum.",
            "3\n3 1 2", "10", "codeforces", "MEDIUM",
            [("Shortest job first is optimal by an exchange argument.",
              "n = int(input())\nt = sorted(map(int, input().split()))\ntot = cur = 0\nfor x in t:\n    cur += x\n    tot += cur\nprint(tot)")]),
        _cp("Find the length of the longest substring without repeating characters.",
            "One line with the string s (1 ≤ |s| ≤ 10^5).", "Print the length.", "abcabcbb", "3", "leetcode", "MEDIUM",
            [("Sliding window with the last index of each character.",
              "s = input().strip()\nlast = {}\nstart = best = 0\nfor i, c in enumerate(s):\n    if last.get(c, -1) >= start:\n        start = last[c] + 1\n    last[c] = i\n    best = max(best, i - start + 1)\nprint(best)")],
            dataset="taco", license="mit"),
        _cp("Given a year, print whether it is a leap year in the Gregorian calendar.",
            "One integer y (1 ≤ y ≤ 10^4).", "Print Yes or No.", "1900", "No", "atcoder", "0",
            [("Divisible by 4, except centuries unless divisible by 400.",
              "y = int(input())\nprint('Yes' if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 'No')")]),
        _cp("Rotate an array of n integers to the right by k positions.",
            "The first line has n and k (1 ≤ n ≤ 10^5, 0 ≤ k ≤ 10^9). The second line has the array.",
            "Print the rotated array.", "5 2\n1 2 3 4 5", "4 5 1 2 3", "geeksforgeeks", "EASY",
            [("Reduce k modulo n and slice.",
              "n, k = map(int, input().split())\na = input().split()\nk %= n\nprint(' '.join(a[-k:] + a[:-k] if k else a))")],
            dataset="taco", license="apache-2.0"),
        _cp("Given a positive integer n, print the number of trailing zeros of n!.",
            "One integer n (1 ≤ n ≤ 10^9).", "Print the count.", "25", "6", "codechef", "EASY",
            [("Count factors of 5: n//5 + n//25 + ...",
              "n = int(input())\nc = 0\nwhile n:\n    n //= 5\n    c += n\nprint(c)")]),
        _cp("Two friends are at points x1 and x2 on a line and may each move. Print the minimum total distance they walk to meet.",
            "Two integers x1 and x2 (0 ≤ x1, x2 ≤ 10^9).", "Print the distance.", "3 10", "7", "codeforces", "EASY",
            [("Any meeting point between them costs |x1 - x2| in total.", "a, b = map(int, input().split())\nprint(abs(a - b))")]),
    ]


def b4_content() -> list[tuple]:
    """Mixture-of-Thoughts (math): (question, reasoning, answer, source). One question is stored
    as a list of text parts (the non-string-content pitfall; the adapter joins the parts)."""
    S1, S2 = "open-r1/OpenR1-Math-220k", "numina_math"
    return [
        ("What is the sum of the first 20 positive odd integers?", "The sum of the first n odd numbers is n^2, so 20^2 = 400.", "The sum is $\\boxed{400}$.", S1),
        ("Find all real x such that 2x + 7 = 3x - 5.", "Subtract 2x: 7 = x - 5, so x = 12.", "$x = \\boxed{12}$", S1),
        ("A rectangle has perimeter 30 and length twice its width. What is its area?", "2(l + w) = 30 and l = 2w give 6w = 30, w = 5, l = 10, area 50.", "The area is $\\boxed{50}$.", S2),
        ("How many positive divisors does 360 have?", "360 = 2^3 * 3^2 * 5, so (3+1)(2+1)(1+1) = 24.", "$\\boxed{24}$", S1),
        ("Compute $\\lim_{x \\to 0} \\frac{\\sin 3x}{x}$.", "sin(3x)/x = 3 * sin(3x)/(3x), which tends to 3.", "The limit is $\\boxed{3}$.", S1),
        ("Solve for x: $\\log_2 (x + 1) = 5$.", "x + 1 = 2^5 = 32, so x = 31.", "$x = \\boxed{31}$", S2),
        ("What is the remainder when $7^{100}$ is divided by 5?", "7 ≡ 2 mod 5; powers of 2 cycle 2,4,3,1 with period 4; 100 ≡ 0 mod 4, so the remainder is 1.", "$\\boxed{1}$", S1),
        ("A fair die is rolled twice. What is the probability that the sum is 7?", "Six ordered pairs out of 36 give 7: 6/36 = 1/6.", "$\\boxed{\\tfrac{1}{6}}$", S1),
        ("Find the area of a triangle with vertices (0,0), (4,0) and (0,3).", "A right triangle with legs 4 and 3: area = 4*3/2 = 6.", "The area is $\\boxed{6}$.", S2),
        ("How many ways can 5 books be arranged on a shelf if two particular books must be adjacent?", "Glue the pair: 4! arrangements times 2 orders = 48.", "$\\boxed{48}$", S1),
        ("If $f(x) = 3x^2 - 2x + 1$, what is $f'(2)$?", "f'(x) = 6x - 2, so f'(2) = 10.", "$f'(2) = \\boxed{10}$", S1),
        ("The arithmetic sequence 3, 7, 11, ... has which 25th term?", "a_n = 3 + 4(n - 1); a_25 = 3 + 96 = 99.", "$\\boxed{99}$", S2),
        ("Find the greatest common divisor of 252 and 198.", "252 - 198 = 54; 198 mod 54 = 36; 54 mod 36 = 18; 36 mod 18 = 0. GCD 18.", "$\\boxed{18}$", S1),
        ("What is $\\int_0^1 (3x^2 + 2x)\\,dx$?", "Antiderivative x^3 + x^2; from 0 to 1 gives 2.", "$\\boxed{2}$", S1),
        ("Solve the system x + y = 10, x - y = 4.", "Adding gives 2x = 14, x = 7, then y = 3.", "$(x, y) = \\boxed{(7, 3)}$", S2),
        ("A circle has circumference $10\\pi$. What is its area?", "2πr = 10π gives r = 5; area 25π.", "The area is $\\boxed{25\\pi}$.", S1),
        ("How many integers between 1 and 100 inclusive are divisible by 3 or 5?", "33 + 20 - 6 = 47 by inclusion-exclusion.", "$\\boxed{47}$", S1),
        ("Find the minimum value of $x^2 - 6x + 13$.", "Complete the square: (x - 3)^2 + 4, minimum 4 at x = 3.", "$\\boxed{4}$", S2),
        ("What is the units digit of $3^{2023}$?", "Units digits of powers of 3 cycle 3,9,7,1; 2023 ≡ 3 mod 4, so the digit is 7.", "$\\boxed{7}$", S1),
        ("A bag has 4 red and 6 blue marbles. Two are drawn without replacement. What is the probability both are red?", "(4/10)(3/9) = 12/90 = 2/15.", "$\\boxed{\\tfrac{2}{15}}$", S1),
        ("Simplify $\\sqrt{50} + \\sqrt{18}$.", "5√2 + 3√2 = 8√2.", "$\\boxed{8\\sqrt{2}}$", S2),
        ("Find x if $3^{x+1} = 81$.", "81 = 3^4 so x + 1 = 4 and x = 3.", "$x = \\boxed{3}$", S1),
        ("How many diagonals does a convex decagon have?", "n(n - 3)/2 = 10*7/2 = 35.", "$\\boxed{35}$", S1),
        ("The sum of two numbers is 12 and their product is 35. What is the sum of their squares?", "(a + b)^2 - 2ab = 144 - 70 = 74.", "$\\boxed{74}$", S2),
        ("Evaluate $\\binom{8}{3}$.", "8*7*6/6 = 56.", "$\\boxed{56}$", S1),
        ("A train travels 180 km in 2.5 hours. What is its average speed in km/h?", "180 / 2.5 = 72.", "$\\boxed{72}$ km/h", S1),
        ("What is the smallest positive integer n such that n! is divisible by 1000?", "Need three factors of 5 (and of 2): 15! has 5, 10, 15, so n = 15; 14! has only two.", "$\\boxed{15}$", S2),
        ([{"type": "text", "text": "Let a and b be the roots of $x^2 - 5x + 6 = 0$."},
          {"type": "text", "text": "Compute $a^2 + b^2$."}],
         "a + b = 5 and ab = 6, so a^2 + b^2 = 25 - 12 = 13.", "$\\boxed{13}$", S1),
    ]


SKY_T1_SYSTEM = (
    "Your role as an assistant involves thoroughly exploring questions through a systematic long thinking "
    "process before providing the final precise and accurate solutions. This requires engaging in a "
    "comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracing, and "
    "iteration to develop well-considered thinking process. Please structure your response into two main "
    "sections: Thought and Solution. In the Thought section, detail your reasoning process using the specified "
    "format: <|begin_of_thought|> {thought with steps separated with '\\n\\n'} <|end_of_thought|> Each step "
    "should include detailed considerations such as analyzing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The solution should "
    "remain a logical, accurate, concise expression style and detail necessary steps needed to reach the "
    "conclusion, formatted as follows: <|begin_of_solution|> {final formatted, precise, and clear solution} "
    "<|end_of_solution|> Now, try to solve the following question through the above guidelines:"
)

_BOXED = "Return your final response within \\boxed{}. "
_CODE = ("Generate an executable Python function generated from the given prompt. The function should take "
         "stdin as input and print the output. Simply call the function after the definition.")


def b5_content() -> dict:
    """OpenThoughts-114k: `system` is the Sky-T1 prompt (dropped by the adapter). Three questions
    are repeated (4, 4 and 3 times, with different responses), OpenThoughts3-style."""
    dup_a = _BOXED + "Find the number of ordered pairs of positive integers (a, b) with a + b = 20."
    dup_b = (_CODE + "You are given N integers. Print the number of distinct values among them.\n\n"
             "Input: N on the first line, then N integers.\nOutput: one integer.\n\nSample Input\n5\n1 2 2 3 3\n\n"
             "Sample Output\n3")
    dup_c = "Why does ice float on liquid water? Explain in terms of molecular structure."
    items = [
        (dup_a, "For each a from 1 to 19, b = 20 - a is positive. That gives 19 pairs.", "\\boxed{19}"),
        (dup_a, "a can be any of 1..19; a = 20 would make b = 0, which is not positive. So 19.", "\\boxed{19}"),
        (dup_a, "Stars and bars: positive solutions of a + b = 20 number C(19, 1) = 19.", "\\boxed{19}"),
        (dup_a, "List small cases: a + b = 3 has 2 pairs, a + b = 4 has 3; in general n - 1. So 19.", "\\boxed{19}"),
        (dup_b, "Read the numbers and put them in a set; its size is the answer.",
         "```python\ndef main():\n    import sys\n    d = sys.stdin.read().split()\n    print(len(set(d[1:])))\n\nmain()\n```"),
        (dup_b, "Sorting and counting changes also works, but a set is simpler.",
         "```python\ndef main():\n    n = int(input())\n    print(len(set(input().split())))\n\nmain()\n```"),
        (dup_b, "Careful: the numbers might span lines, so read all tokens.",
         "```python\nimport sys\n\ndef solve():\n    t = sys.stdin.read().split()\n    n = int(t[0])\n    print(len(set(t[1:n + 1])))\n\nsolve()\n```"),
        (dup_b, "Use a dict to count values, then print the number of keys.",
         "```python\ndef main():\n    n = int(input())\n    c = {}\n    for x in input().split():\n        c[x] = c.get(x, 0) + 1\n    print(len(c))\n\nmain()\n```"),
        (dup_c, "Hydrogen bonds in ice lock molecules into an open hexagonal lattice, which takes more space than the liquid.",
         "Ice is less dense than water because its hydrogen-bonded lattice is open, so it floats."),
        (dup_c, "Density decides floating. In the liquid, hydrogen bonds constantly break and molecules pack closer.",
         "The crystal lattice of ice holds molecules farther apart than in liquid water, so ice is about 9% less dense."),
        (dup_c, "Compare densities: ice about 0.92 g/cm^3, water about 1.00 g/cm^3.",
         "Hydrogen bonding forces an open tetrahedral arrangement in ice, lowering its density below water's."),
        (_BOXED + "What is the largest prime factor of 221?", "221 = 13 * 17, so the largest prime factor is 17.", "\\boxed{17}"),
        (_BOXED + "Solve for x: 5x - 3 = 2x + 9.", "3x = 12, so x = 4.", "\\boxed{4}"),
        (_BOXED + "How many subsets of {1, 2, 3, 4, 5} contain the element 3?", "Fix 3; the other 4 elements are free: 2^4 = 16.", "\\boxed{16}"),
        (_BOXED + "A square has diagonal 10. What is its area?", "Area = d^2 / 2 = 50.", "\\boxed{50}"),
        (_BOXED + "Find the sum of the interior angles of a hexagon in degrees.", "(n - 2) * 180 = 720.", "\\boxed{720}"),
        (_BOXED + "If 3 pencils cost 45 cents, how much do 7 pencils cost in cents?", "One pencil costs 15 cents, so 7 cost 105.", "\\boxed{105}"),
        (_BOXED + "What is the value of 1 + 2 + ... + 50?", "50 * 51 / 2 = 1275.", "\\boxed{1275}"),
        (_CODE + "Given a string S, print it reversed.\n\nSample Input\nabc\n\nSample Output\ncba",
         "Slicing with step -1 reverses a string.", "```python\ndef main():\n    print(input()[::-1])\n\nmain()\n```"),
        (_CODE + "Given two integers A and B, print their product if it is even, else print Odd.\n\nSample Input\n3 4\n\nSample Output\n12",
         "A product is even when either factor is even.",
         "```python\ndef main():\n    a, b = map(int, input().split())\n    p = a * b\n    print(p if p % 2 == 0 else 'Odd')\n\nmain()\n```"),
        (_CODE + "Print the number of vowels in a lowercase string S.\n\nSample Input\nbanana\n\nSample Output\n3",
         "Count characters in 'aeiou'.", "```python\ndef main():\n    print(sum(c in 'aeiou' for c in input()))\n\nmain()\n```"),
        ("What is the role of mitochondria in a eukaryotic cell?",
         "Mitochondria run cellular respiration and produce most ATP.", "They generate ATP through oxidative phosphorylation."),
        ("Why is the sky blue during the day?", "Rayleigh scattering is stronger for short wavelengths.",
         "Air molecules scatter blue light much more than red, so scattered skylight looks blue."),
        ("What happens to the boiling point of water at high altitude, and why?", "Lower air pressure means the vapor pressure matches it at a lower temperature.",
         "It drops, because the lower atmospheric pressure is reached at a lower temperature."),
        ("Explain why a metal spoon feels colder than a wooden one at the same temperature.", "Metal conducts heat away from the skin faster.",
         "Metals have higher thermal conductivity, so they draw heat from your hand faster."),
        ("What distinguishes an exothermic reaction from an endothermic one?", "Sign of the enthalpy change.",
         "Exothermic reactions release heat (negative ΔH); endothermic reactions absorb it (positive ΔH)."),
        (_BOXED + "The ratio of boys to girls in a class is 3:5. If there are 40 students, how many are girls?", "Girls are 5/8 of 40 = 25.", "\\boxed{25}"),
        (_BOXED + "Compute 2^10 - 10^2.", "1024 - 100 = 924.", "\\boxed{924}"),
        (_BOXED + "Find the number of trailing zeros in 100!.", "100/5 + 100/25 = 20 + 4 = 24.", "\\boxed{24}"),
        ("Why do heavier and lighter objects fall at the same rate in a vacuum?", "Gravitational force scales with mass, and so does inertia.",
         "Acceleration is F/m = g for every mass, so without air resistance all objects fall equally fast."),
    ]
    return {"system": SKY_T1_SYSTEM, "items": items}


def b6_content() -> list[list]:
    """ultrachat_200k (train_sft): alternating user/assistant turns. One conversation opens with a
    list of text parts (normalised), one with null content (rejected: wrong_type)."""
    return [
        ["How did the printing press change the spread of information in Europe?",
         "It made books cheaper and faster to produce, so ideas spread widely and literacy grew.",
         "Which books were printed first?", "The Gutenberg Bible is the most famous early printed book."],
        ["Can you give me three tips for improving my sleep?",
         "Keep a regular schedule, avoid screens an hour before bed, and keep your room cool and dark."],
        ["Write a short product description for a stainless steel water bottle.",
         "Keep drinks cold for 24 hours with this leak-proof, double-walled stainless steel bottle.",
         "Make it sound more playful.", "Meet your new favorite sidekick: it keeps water icy all day and never spills the tea."],
        ["What are the main differences between renewable and non-renewable energy sources?",
         "Renewable sources like wind and solar replenish naturally; fossil fuels are finite and emit more carbon."],
        ["Summarize the plot of Romeo and Juliet in three sentences.",
         "Two young lovers from feuding families secretly marry. A chain of misunderstandings follows. Both die, and their deaths reconcile the families."],
        ["How do I start learning to play the guitar as an adult?",
         "Learn a few open chords, practice 15 minutes daily, and play songs you enjoy.",
         "How long until I can play a full song?", "Many beginners manage a simple song within a few weeks."],
        ["Explain what a blockchain is to a ten-year-old.",
         "It's like a notebook that everyone shares, where pages can be added but never erased."],
        ["What should I pack for a three-day hiking trip?",
         "Layers, rain jacket, map, headlamp, first-aid kit, water filter, and easy-to-cook food."],
        ["Describe the water cycle.",
         "Water evaporates, condenses into clouds, falls as precipitation, and collects in rivers and oceans."],
        ["Give me a recipe idea that uses chickpeas and spinach.",
         "Try a chickpea and spinach curry with garlic, onion, tomatoes and garam masala."],
        ["What are some good habits for managing personal finances?",
         "Budget monthly, build an emergency fund, automate savings, and avoid high-interest debt."],
        ["Why do cats purr?", "Cats purr when content, but also to soothe themselves when stressed or hurt."],
        ["Write a haiku about the ocean.", "Waves fold into foam\nsalt wind carries gull voices\nthe tide keeps its time"],
        ["What is the difference between weather and climate?",
         "Weather is day-to-day conditions; climate is the long-term average over decades."],
        ["How can a small business use social media effectively?",
         "Pick one or two platforms, post consistently, show behind-the-scenes content, and reply to comments."],
        ["Explain the rules of chess castling.",
         "The king moves two squares toward a rook, which jumps over it; neither may have moved, and the king cannot pass through check."],
        ["Suggest a name for a coffee shop near a library.",
         "How about 'Chapter One Coffee' or 'The Reading Roast'?", "I like the second one. A slogan?",
         "'Brewed for every page.'"],
        ["What were the main causes of the First World War?",
         "Militarism, alliances, imperialism and nationalism, with the assassination of Archduke Franz Ferdinand as the trigger."],
        ["How does compound interest work?", "You earn interest on both your original money and the interest it has already earned."],
        ["Recommend three classic science fiction novels.", "Dune, The Left Hand of Darkness, and Foundation."],
        ["What is photosynthesis?", "Plants use sunlight, water and carbon dioxide to make glucose and release oxygen."],
        ["How do vaccines train the immune system?",
         "They show the immune system a harmless piece or version of a pathogen so it learns to recognize it."],
        ["Draft a polite email declining a meeting invitation.",
         "Thank you for the invitation. Unfortunately I can't attend, but I'd be glad to review the notes afterward."],
        ["What is the best way to memorize vocabulary in a new language?",
         "Spaced repetition with flashcards, plus using new words in sentences you say out loud."],
        ["Explain the difference between a simile and a metaphor.",
         "A simile compares using 'like' or 'as'; a metaphor says one thing is another."],
        ["What are some easy houseplants for beginners?", "Pothos, snake plants, and spider plants are very forgiving."],
        [[{"type": "text", "text": "I'm planning a garden."}, {"type": "text", "text": "Which vegetables grow fastest from seed?"}],
         "Radishes, lettuce and spinach can be ready in about a month."],
        [None, "Sorry, I didn't catch a question there. What would you like to know?"],
    ]


def b7_content() -> list[tuple[int, list[tuple[str, str]]]]:
    """ShareGPT (Vicuna, unfiltered): (chunk index, [(from, value)]). `from` covers human, gpt,
    chatgpt, bing, bard and system; two chunks start with gpt and one with chatgpt (skipped:
    starts_with_assistant); one opens with a system turn; one has an empty human turn."""
    return [
        (0, [("human", "Write a limerick about a programmer who loves coffee."),
             ("gpt", "A coder who lived on cold brew\nwrote functions all night, quite a few...")]),
        (0, [("human", "What's the difference between TCP and UDP?"),
             ("gpt", "TCP is connection-oriented and reliable; UDP is connectionless and faster but unreliable."),
             ("human", "When would I pick UDP?"), ("gpt", "For games, voice and video, where speed beats retransmission.")]),
        (0, [("human", "Give me 5 ideas for a birthday party for a 7 year old."),
             ("gpt", "A treasure hunt, a science party, a dinosaur dig, a backyard movie night, or a craft station.")]),
        (0, [("human", "Explain recursion with a simple example."),
             ("gpt", "A function that calls itself, like factorial(n) = n * factorial(n - 1) with factorial(0) = 1.")]),
        (1, [("gpt", "...and that's why the second approach uses less memory."),
             ("human", "Thanks. Can you show the code for it?"), ("gpt", "Sure, here it is:")]),
        (0, [("human", "Translate 'Where is the train station?' into French and German."),
             ("chatgpt", "French: Où est la gare ? German: Wo ist der Bahnhof?")]),
        (0, [("human", "What are the pros and cons of remote work?"),
             ("bing", "Pros: flexibility and no commute. Cons: isolation and blurred boundaries between work and home.")]),
        (0, [("human", "Summarize the theory of evolution in two sentences."),
             ("bard", "Species change over generations through natural selection acting on inherited variation. Traits that help survival and reproduction become more common.")]),
        (0, [("system", "You are a helpful assistant that answers in the style of a pirate."),
             ("human", "How do I boil an egg?"), ("gpt", "Arr, drop it in boilin' water fer nine minutes, matey!")]),
        (0, [("human", "Write a SQL query that finds the top 3 customers by total order amount."),
             ("gpt", "SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY customer_id ORDER BY total DESC LIMIT 3;")]),
        (0, [("human", "I feel unmotivated at work lately. Any advice?"),
             ("gpt", "Try setting one small goal per day, take real breaks, and talk to your manager about what drains you.")]),
        (2, [("gpt", "Here is the rest of the list:\n6. Kyoto\n7. Lisbon"),
             ("human", "Which of those is cheapest in winter?"), ("gpt", "Lisbon is usually the most affordable in winter.")]),
        (0, [("human", "Can you explain what a REST API is?"),
             ("chatgpt", "An interface that exposes resources over HTTP using verbs like GET, POST, PUT and DELETE.")]),
        (0, [("human", "Write a tweet announcing our new bakery opening on Saturday."),
             ("gpt", "Fresh bread, warm croissants and good vibes: our bakery opens this Saturday! Come say hi.")]),
        (0, [("human", "What is the capital of Canada, and why isn't it Toronto?"),
             ("gpt", "Ottawa. It was chosen in 1857 partly as a compromise between English and French Canada.")]),
        (0, [("human", "Generate a short workout I can do in a hotel room."),
             ("bing", "3 rounds: 15 squats, 10 push-ups, 20 lunges, 30-second plank.")]),
        (0, [("human", "How do I center a div in CSS?"),
             ("gpt", "Use flexbox on the parent: display: flex; justify-content: center; align-items: center;")]),
        (0, [("human", ""), ("gpt", "It looks like your message was empty. How can I help?")]),
        (0, [("human", "Write a two-sentence horror story."),
             ("gpt", "I heard my mom call me from the kitchen. As I headed down, she pulled me into the closet and whispered that she'd heard it too.")]),
        (0, [("human", "What's a good name for a golden retriever puppy?"),
             ("bard", "Sunny, Maple, Biscuit or Honey would all suit a golden.")]),
        (0, [("human", "Explain the Monty Hall problem briefly."),
             ("gpt", "Switching doors wins 2/3 of the time because the host's reveal gives you information.")]),
        (0, [("human", "Draft a short apology message for missing a friend's call."),
             ("chatgpt", "Sorry I missed your call! Things got hectic. Can I call you back tonight?")]),
        (3, [("chatgpt", "Continuing from above: the third option is to use a message queue."),
             ("human", "Which queue would you recommend?"), ("chatgpt", "RabbitMQ is a solid default.")]),
        (0, [("human", "List three common logical fallacies with one-line examples."),
             ("gpt", "Ad hominem: attacking the person. Straw man: misrepresenting an argument. False dilemma: only two options offered.")]),
        (0, [("human", "How can I make my Python script run faster?"),
             ("gpt", "Profile first, then use better algorithms, built-ins, and libraries like NumPy for heavy loops.")]),
        (0, [("human", "What does 'carpe diem' mean?"), ("gpt", "It is Latin for 'seize the day'.")]),
        (0, [("human", "Plan a one-day itinerary for Rome."),
             ("gpt", "Morning: Colosseum and Forum. Afternoon: Pantheon and Trevi Fountain. Evening: dinner in Trastevere.")]),
        (0, [("human", "Tell me a fun fact about octopuses."),
             ("bing", "Octopuses have three hearts and blue blood.")]),
        (0, [("human", "Is it better to rent or buy a house?"),
             ("gpt", "It depends on how long you'll stay, local prices, and your savings; buying usually pays off after 5+ years.")]),
        (0, [("human", "Write a regex that matches a US ZIP code."),
             ("gpt", "^\\d{5}(-\\d{4})?$")]),
    ]


SWE_SYSTEM_SHORT = (
    "SETTING: You are an autonomous programmer in a command line with a special interface.\n"
    "COMMANDS: open <path> [<line>], goto <line>, search_file <term>, find_file <name>, "
    "edit <start>:<end> (end with end_of_edit), submit.\n"
    "Reply with a DISCUSSION, then one command in a ``` block."
)

_SWE_COMMANDS = [
    ("open", "open <path> [<line_number>]", "opens the file at the given path in the editor. If line_number is provided, the window will be moved to include that line",
     [("path", "string", "the path to the file to open", True), ("line_number", "integer", "the line number to move the window to (if not provided, the window will start at the top of the file)", False)]),
    ("goto", "goto <line_number>", "moves the window to show <line_number>",
     [("line_number", "integer", "the line number to move the window to", True)]),
    ("scroll_down", "scroll_down", "moves the window down 100 lines", []),
    ("scroll_up", "scroll_up", "moves the window up 100 lines", []),
    ("create", "create <filename>", "creates and opens a new file with the given name",
     [("filename", "string", "the name of the file to create", True)]),
    ("search_dir", "search_dir <search_term> [<dir>]", "searches for search_term in all files in dir. If dir is not provided, searches in the current directory",
     [("search_term", "string", "the term to search for", True), ("dir", "string", "the directory to search in (if not provided, searches in the current directory)", False)]),
    ("search_file", "search_file <search_term> [<file>]", "searches for search_term in file. If file is not provided, searches in the current open file",
     [("search_term", "string", "the term to search for", True), ("file", "string", "the file to search in (if not provided, searches in the current open file)", False)]),
    ("find_file", "find_file <file_name> [<dir>]", "finds all files with the given name in dir. If dir is not provided, searches in the current directory",
     [("file_name", "string", "the name of the file to search for", True), ("dir", "string", "the directory to search in (if not provided, searches in the current directory)", False)]),
    ("edit", "edit <start_line>:<end_line>\n<replacement_text>\nend_of_edit",
     "replaces lines <start_line> through <end_line> (inclusive) with the given text in the open file. The replacement text is terminated by a line with only end_of_edit on it. All of the <replacement text> will be entered, so make sure your indentation is formatted properly. Python files will be checked for syntax errors after the edit. If the system detects a syntax error, the edit will not be executed. Simply try to edit the file again, but make sure to read the error message and modify the edit command you issue accordingly. Issuing the same command a second time will just lead to the same error message again.",
     [("start_line", "integer", "the line number to start the edit at", True), ("end_line", "integer", "the line number to end the edit at (inclusive)", True),
      ("replacement_text", "string", "the text to replace the current selection with", True)]),
    ("submit", "submit", "submits your current code and terminates the session", []),
]


def _swe_long_system() -> str:
    docs = []
    for name, sig, doc, args in _SWE_COMMANDS:
        block = f"{name}:\n  docstring: {doc}\n  signature: {sig}\n"
        if args:
            block += "  arguments:\n" + "".join(
                f"    - {a} ({t}) [{'required' if req else 'optional'}]: {d}\n" for a, t, d, req in args)
        docs.append(block)
    return (
        "SETTING: You are an autonomous programmer, and you're working directly in the command line with a "
        "special interface.\n\nThe special interface consists of a file editor that shows you 100 lines of a "
        "file at a time.\nIn addition to typical bash commands, you can also use the following commands to help "
        "you navigate and edit files.\n\nCOMMANDS:\n" + "\n".join(docs) +
        "\nPlease note that THE EDIT COMMAND REQUIRES PROPER INDENTATION.\nIf you'd like to add the line "
        "'        print(x)' you must fully write that out, with all those spaces before the code! Indentation is "
        "important and code that is not indented correctly will fail and require fixing before it can be run.\n\n"
        "RESPONSE FORMAT:\nYour shell prompt is formatted as follows:\n(Open file: <path>) <cwd> $\n\nYou need to "
        "format your output using two fields; discussion and command.\nYour output should always include _one_ "
        "discussion and _one_ command field EXACTLY as in the following example:\nDISCUSSION\nFirst I'll start by "
        "using ls to see what files are in the current directory. Then maybe we can look at some relevant files to "
        "see what they look like.\n```\nls -a\n```\n\nYou should only include a *SINGLE* command in the command "
        "section and then wait for a response from the shell before continuing with more discussion and commands. "
        "Everything you include in the DISCUSSION section will be saved for future reference.\nIf you'd like to "
        "issue two commands at once, PLEASE DO NOT DO THAT! Please instead first submit just the first command, and "
        "then after receiving a response you'll be able to issue the second command.\nYou're free to use any other "
        "bash commands you want (e.g. find, grep, cat, ls, cd) in addition to the special commands listed above.\n"
        "However, the environment does NOT support interactive session commands (e.g. python, vim), so please do "
        "not invoke them."
    )


SWE_USER_TEMPLATE = (
    "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
    "{issue}\n\nINSTRUCTIONS: Solve this issue on your own, one command per response, then run `submit`.\n"
    "(Open file: n/a)\n(Current directory: /{repo})\nbash-$"
)


def _swe(instance_id: str, model: str, target: bool, issue: str, file: str, line: int, old: str, new: str,
         **extra) -> dict:
    repo = instance_id.rsplit("-", 1)[0]
    patch = (f"diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -{line},1 +{line},1 @@\n"
             f"-{old}\n+{new}\n")
    return {"instance_id": instance_id, "repo": repo, "model": model, "target": target, "issue": issue,
            "file": file, "patch": patch,
            "step1": f"DISCUSSION\nLet me find the file mentioned in the issue first.\n```\nfind_file {file.rsplit('/', 1)[-1]}\n```",
            "obs1": f"Found 1 matches for \"{file.rsplit('/', 1)[-1]}\" in /{repo}:\n/{repo}/{file}\n(Open file: n/a)\n(Current directory: /{repo})\nbash-$",
            **extra}


def b8_content() -> dict:
    """nebius/SWE-agent-trajectories: short system prompt + short issue; two rows carry the full
    ~4,000-character SWE-agent system prompt (deliberately over-long for the demo model's context)."""
    M70, M8, M405 = "swe-agent-llama-70b", "swe-agent-llama-8b", "swe-agent-llama-405b"
    items = [
        _swe("marshmallow-code__marshmallow-1359", M70, True, "DateTime field fails to serialize timezone-aware values when format='iso' and the value has microseconds.",
             "src/marshmallow/fields.py", 1114, "        return value.isoformat()", "        return value.isoformat(timespec='auto')"),
        _swe("pydicom__pydicom-1139", M70, False, "Dataset.__repr__ crashes on PersonName values that contain non-ASCII characters.",
             "pydicom/valuerep.py", 640, "        return str(self.original_string)", "        return self.original_string.decode('utf-8', 'replace')"),
        _swe("pvlib__pvlib-python-1072", M8, True, "temperature.fuentes raises a TypeError when given a pandas Series with a timezone-aware index.",
             "pvlib/temperature.py", 599, "    timedelta_hours = np.diff(poa_global.index).astype(float)", "    timedelta_hours = poa_global.index.to_series().diff().dt.total_seconds() / 3600"),
        _swe("sqlfluff__sqlfluff-1625", M70, True, "L031 reports a false positive for table aliases used in a WHERE clause without a JOIN.",
             "src/sqlfluff/rules/L031.py", 149, "        if not from_expression:", "        if not from_expression or not join_clauses:"),
        _swe("pyvista__pyvista-4315", M405, True, "Rectilinear grid constructor rejects plain Python lists for the x coordinates.",
             "pyvista/core/grid.py", 220, "        if not isinstance(x, np.ndarray):", "        if not isinstance(x, (np.ndarray, list)):"),
        _swe("pylint-dev__astroid-1978", M8, False, "Importing numpy emits a deprecation warning from astroid's brain plugin.",
             "astroid/raw_building.py", 470, "        getattr(sys.modules[modname], name)", "        inspect.getattr_static(sys.modules[modname], name)"),
        _swe("joke2k__faker-1520", M70, True, "pyfloat can return values outside [min_value, max_value] when right_digits is set.",
             "faker/providers/python/__init__.py", 128, "        result = float(f'{left_number}.{self.random_number(right_digits)}')", "        result = min(max(float(f'{left_number}.{self.random_number(right_digits)}'), min_value), max_value)"),
        _swe("python-jsonschema__jsonschema-1048", M405, False, "ErrorTree.__getitem__ raises KeyError for a valid path with no errors instead of returning an empty tree.",
             "jsonschema/exceptions.py", 285, "        return self._contents[index]", "        return self._contents.get(index, self.__class__())"),
        _swe("tox-dev__tox-2212", M8, True, "The --skip-missing-interpreters flag is ignored when given in tox.ini as 'true'.",
             "src/tox/config/cli/parser.py", 310, "        return value == 'True'", "        return str(value).lower() == 'true'"),
        _swe("encode__httpx-1303", M70, True, "Response.iter_lines splits lines incorrectly when a chunk ends with a carriage return.",
             "httpx/_decoders.py", 204, "        lines = text.splitlines(True)", "        lines = self._split(text)"),
        _swe("mwaskom__seaborn-2848", M70, False, "pairplot fails with hue_order containing values missing from the data.",
             "seaborn/_oldcore.py", 151, "            normed = self.norm(key)", "            normed = self.norm(key) if key in self.lookup_table else np.nan"),
        _swe("pallets__click-2271", M405, True, "Boolean flags with secondary names show the wrong default in the help output.",
             "src/click/core.py", 2789, "            default_string = str(default_value)", "            default_string = self.secondary_opts[0] if not default_value and self.secondary_opts else str(default_value)"),
        _swe("iterative__dvc-4066", M8, False, "dvc ignore patterns with a trailing slash do not match directories.",
             "dvc/ignore.py", 55, "        return self.ignore_spec.match_file(path)", "        return self.ignore_spec.match_file(path) or self.ignore_spec.match_file(path + '/')"),
        _swe("Project-MONAI__MONAI-3384", M70, True, "RandAffined ignores the `device` argument and always runs on CPU.",
             "monai/transforms/spatial/dictionary.py", 712, "        self.rand_affine = RandAffine(prob=1.0)", "        self.rand_affine = RandAffine(prob=1.0, device=device)"),
        _swe("conan-io__conan-10875", M70, True, "`conan inspect` prints None for the license attribute when it is a tuple.",
             "conans/client/conan_api.py", 320, "        result[attr] = str(value)", "        result[attr] = ', '.join(value) if isinstance(value, tuple) else str(value)"),
        _swe("getmoto__moto-5752", M8, True, "SSM get_parameters_by_path drops parameters whose names contain a dot.",
             "moto/ssm/models.py", 1310, "        if not re.match(r'^[\\w/-]+$', name):", "        if not re.match(r'^[\\w./-]+$', name):"),
        _swe("python__mypy-11290", M405, False, "Incorrect 'unused type: ignore' warning for ignores on decorated overloads.",
             "mypy/errors.py", 488, "            if not used:", "            if not used and not self.is_overload_decorator(line):"),
        _swe("spulec__freezegun-435", M70, True, "freeze_time does not patch time.monotonic_ns on Python 3.7+.",
             "freezegun/api.py", 42, "real_monotonic = time.monotonic", "real_monotonic = time.monotonic\nreal_monotonic_ns = getattr(time, 'monotonic_ns', None)"),
        _swe("beetbox__beets-3869", M8, False, "The web plugin returns 500 when an album has no artwork.",
             "beetsplug/web/__init__.py", 248, "    return flask.send_file(album.artpath)", "    return flask.send_file(album.artpath) if album.artpath else flask.abort(404)"),
        _swe("psf__requests-2317", M70, True, "`method = builtin_str(method)` turns b'GET' into the literal string \"b'GET'\" on Python 3.",
             "requests/sessions.py", 428, "        method = builtin_str(method)", "        method = to_native_string(method)"),
        _swe("pydata__xarray-4094", M405, True, "to_unstacked_dataset breaks for single-dimension variables.",
             "xarray/core/dataarray.py", 1961, "            data_dict[k] = self.sel({variable_dim: k}).squeeze(drop=True)", "            data_dict[k] = self.sel({variable_dim: k}, drop=True).squeeze(drop=True)"),
        _swe("marshmallow-code__marshmallow-1359", M8, False, "DateTime field fails to serialize timezone-aware values when format='iso' and the value has microseconds.",
             "src/marshmallow/fields.py", 1114, "        return value.isoformat()", "        return value.isoformat(sep='T')", exit_status="submitted (exit_cost)"),
        _swe("Suor__funcy-87", M70, True, "`chunks` with a step larger than the size drops the final partial chunk.",
             "funcy/seqs.py", 312, "    return _cut(True, n, step, seq)", "    return _cut(False, n, step, seq)"),
        _swe("alecthomas__voluptuous-393", M8, True, "Schema.extend loses the `extra` setting of the original schema.",
             "voluptuous/schema_builder.py", 450, "        result = type(self)(schema, required=self.required)", "        result = type(self)(schema, required=self.required, extra=self.extra)"),
        _swe("sqlfluff__sqlfluff-1625", M405, True, "L031 reports a false positive for table aliases used in a WHERE clause without a JOIN.",
             "src/sqlfluff/rules/L031.py", 149, "        if not from_expression:", "        if not from_expression or not join_clauses:", long=True),
        _swe("pvlib__pvlib-python-1072", M70, False, "temperature.fuentes raises a TypeError when given a pandas Series with a timezone-aware index.",
             "pvlib/temperature.py", 599, "    timedelta_hours = np.diff(poa_global.index).astype(float)", "    timedelta_hours = np.diff(poa_global.index.asi8) / 3.6e12", long=True, exit_status="early_exit"),
    ]
    return {"system": SWE_SYSTEM_SHORT, "long_system": _swe_long_system(), "user_template": SWE_USER_TEMPLATE,
            "items": items}


# ------------------------------------------------------------------------------------------

def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "builders" / "samples")
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
