#!/usr/bin/env python3
"""Renders every template in tests/data/chat/templates/ over a set of
conversations the way transformers' apply_chat_template does, and writes the
results to tests/data/chat/expected.json for tests/test_chat.c.

The environment mirrors transformers/utils/chat_template_utils.py
(_cached_compile_jinja_template): ImmutableSandboxedEnvironment with
trim_blocks=True, lstrip_blocks=True, the loopcontrols extension, a
`generation` block tag, tojson = json.dumps(ensure_ascii=False, ...),
raise_exception and strftime_now globals; render() gets messages, tools,
documents=None, add_generation_prompt and the special tokens.
strftime_now is pinned to NOW (UTC) so the output is reproducible; the C side
is given the same time.

Usage: python3 scripts/gen-chat-expected.py   (needs jinja2 >= 3.1)
"""
import json
import os
import sys
from datetime import datetime, timezone

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "chat")
NOW = 1721952000  # 2024-07-26 00:00:00 UTC


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker, minus the tracking: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW, timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "content": "  Hi!  "},
    ],
    "tricky_text": [
        {"role": "system", "content": "Quotes: 'single' \"double\" and a backslash \\ here.\n"},
        {"role": "user", "content": "  Line one\nLine two\n\tTabbed {{ not a tag }} {% raw %} <|im_end|>\n"},
        {"role": "assistant", "content": "Unicode: é ñ 中文 🙂 — “curly”"},
        {"role": "user", "content": "\n\nEmpty-ish lines\n\n"},
    ],
    "thinking": [
        {"role": "user", "content": "What is 3*3?"},
        {"role": "assistant", "content": "<think>\nMultiply.\n</think>\n\n9"},
        {"role": "user", "content": "And 4*4?"},
    ],
    "tool_call": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "id": "call_1",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3, "threshold": 0.5}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "Thanks"},
    ],
    "tool_call_null_content": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "id": "call_2",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "cold"},
    ],
    "content_parts": [
        {"role": "user", "content": [{"type": "text", "text": "Describe this:"}, {"type": "image"}]},
    ],
}

# Extra keyword arguments some templates read (rendered as additional variants).
def extra_variants(fn, conv_name):
    n = fn.lower()
    out = []
    if conv_name == "thinking" and ("qwen3" in n or "smollm3" in n):
        out.append(({"enable_thinking": False}, None))
    if conv_name == "system_user" and "gpt-oss" in n:
        out.append(({"reasoning_effort": "high", "model_identity": "You are Tester."}, None))
    if conv_name == "tool_call" and ("llama-3.1" in n or "llama-3.3" in n):
        out.append(({"builtin_tools": ["code_interpreter", "brave_search"]}, TOOLS))
    if conv_name == "system_user" and "granite" in n:
        out.append(({"thinking": True}, None))
    if conv_name == "system_user" and "gigachat" in n:
        out.append(({"additional_special_tokens": ["<|message_sep|>", "<|role_sep|>"]}, None))
    return out

# Special tokens per template family (what tokenizer_config.json would give).
def tokens_for(name):
    n = name.lower()
    if "llama-3" in n or "hermes-3" in n or "deepseek-r1-distill-llama" in n:
        return "<|begin_of_text|>", "<|eot_id|>"
    if "qwen" in n or "smollm" in n or "openhermes" in n:
        return "", "<|im_end|>"
    if "gemma" in n:
        return "<bos>", "<eos>"
    if "deepseek" in n:
        return "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
    if "granite" in n:
        return "", "<|end_of_text|>"
    if "phi-3" in n or "phi-4" in n:
        return "<s>", "<|endoftext|>"
    if "starcoder" in n:
        return "", "<|endoftext|>"
    if "gpt-oss" in n:
        return "<|startoftext|>", "<|return|>"
    return "<s>", "</s>"


def main():
    env = make_env()
    tdir = os.path.join(DATA, "templates")
    out = []
    for fn in sorted(os.listdir(tdir)):
        if not fn.endswith(".jinja"):
            continue
        src = open(os.path.join(tdir, fn), encoding="utf-8").read()
        bos, eos = tokens_for(fn)
        try:
            tmpl = env.from_string(src)
        except Exception as e:
            print(f"{fn}: does not compile: {e}", file=sys.stderr)
            continue
        cases = []
        for conv_name, msgs in CONVERSATIONS.items():
            for agp in (False, True):
                variants = [({}, TOOLS if conv_name.startswith("tool_call") else None)]
                variants += extra_variants(fn, conv_name)
                for extra, tools in variants:
                    case = {"conversation": conv_name, "add_generation_prompt": agp}
                    if extra:
                        case["extra"] = extra
                    if tools:
                        case["tools"] = True
                    try:
                        case["expected"] = tmpl.render(messages=json.loads(json.dumps(msgs)), tools=tools,
                                                       documents=None, add_generation_prompt=agp,
                                                       bos_token=bos, eos_token=eos, **extra)
                    except jinja2.exceptions.TemplateError as e:
                        case["error"] = str(e)
                    except Exception as e:  # TypeError etc. from the template's own code
                        case["error"] = f"{type(e).__name__}: {e}"
                    cases.append(case)
        out.append({"template": fn, "bos_token": bos, "eos_token": eos, "cases": cases})
    doc = {"now": NOW, "tools": TOOLS, "conversations": CONVERSATIONS, "templates": out}
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = sum(len(t["cases"]) for t in out)
    e = sum(1 for t in out for c in t["cases"] if "error" in c)
    print(f"{len(out)} templates, {n} cases ({e} raise an error)")


if __name__ == "__main__":
    main()
