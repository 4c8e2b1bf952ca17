"""Run inside the vLLM venv (scripts/real_engines/): vLLM 0.32.0's own Kimi-K3 output parsers
(`vllm/reasoning/kimi_k3_reasoning_parser.py`, `vllm/tool_parsers/kimi_k3_tool_parser.py`) split completions read
from stdin, one JSON object per line ({"text", "thinking", "tools"}), and print one JSON line each:
{"reasoning", "content", "calls": [[name, arguments object], ...]}.

The two parsers are called as `vllm/parser/kimi_k3.py` composes them for a chat request: the reasoning parser
splits off the think channel, then (the request has tools) the tool parser reads the response and tools channels;
without tools the reasoning parser unwraps the response itself."""

import json
import sys

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.reasoning.kimi_k3_reasoning_parser import KimiK3ReasoningParser
from vllm.tool_parsers.kimi_k3_tool_parser import KimiK3ToolParser


class CodePointTokenizer:
    """The parsers' text paths (used here) never read ids; their constructors encode the markers once."""

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def get_vocab(self):
        return {}


def main():
    tokenizer = CodePointTokenizer()
    for line in sys.stdin:
        case = json.loads(line)
        request = ChatCompletionRequest(model="k3", messages=[{"role": "user", "content": "x"}],
                                        tools=case["tools"] or None)
        reasoning_parser = KimiK3ReasoningParser(tokenizer, chat_template_kwargs={"thinking": case["thinking"]})
        reasoning, rest = reasoning_parser.extract_reasoning(case["text"], request)
        calls, content = [], rest
        if case["tools"]:
            info = KimiK3ToolParser(tokenizer, request.tools).extract_tool_calls(rest or "", request)
            content = info.content
            calls = [[c.function.name, json.loads(c.function.arguments)] for c in info.tool_calls]
        print(json.dumps({"reasoning": reasoning or "", "content": content or "", "calls": calls}, ensure_ascii=False),
              flush=True)


if __name__ == "__main__":
    main()
