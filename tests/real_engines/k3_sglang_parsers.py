"""Run inside the SGLang venv (scripts/real_engines/): SGLang 0.5.23's own Kimi-K3 output parsers (the reasoning
detector `kimi_k3` of `sglang/srt/parser/reasoning_parser.py`, the tool-call detector of
`sglang/srt/function_call/kimik3_detector.py`) split completions read from stdin, one JSON object per line
({"text", "thinking", "tools"}), and print one JSON line each: {"reasoning", "content", "calls": [[name,
arguments object], ...]}. As SGLang's chat path calls them: the reasoning detector (thinking mode: the prompt
opened the think channel, `force_reasoning`), then the tool-call detector on the rest when the request has tools."""

import json
import sys

from sglang.srt.entrypoints.openai.protocol import Tool
from sglang.srt.function_call.kimik3_detector import KimiK3Detector as ToolDetector
from sglang.srt.function_call.kimik3_format import strip_response_wrappers
from sglang.srt.parser.reasoning_parser import KimiK3Detector as ReasoningDetector


def main():
    for line in sys.stdin:
        case = json.loads(line)
        if case["thinking"]:
            split = ReasoningDetector(force_reasoning=True).detect_and_parse(case["text"])
            reasoning, rest = split.reasoning_text, split.normal_text
        else:
            reasoning, rest = "", case["text"]
        calls, content = [], rest
        if case["tools"]:
            tools = [Tool(**t) for t in case["tools"]]
            found = ToolDetector().detect_and_parse(rest or "", tools)
            content = found.normal_text
            calls = [[c.name, json.loads(c.parameters)] for c in found.calls]
        else:
            content = strip_response_wrappers(rest or "")
        print(json.dumps({"reasoning": reasoning or "", "content": content or "", "calls": calls}, ensure_ascii=False),
              flush=True)


if __name__ == "__main__":
    main()
