#!/usr/bin/env python3
"""Checks that data.render writes what GLM-5's chat template (rendered by
transformers' own chat-template code) writes for the same conversation, on a
few hundred generated samples of every task. Run from the repository root."""
import os
import sys

from transformers.utils.chat_template_utils import render_jinja_template

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402

TEMPLATE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja")).read()



def main():
    calls = []
    orig = data.render

    def spy(messages, tools=None, add_generation_prompt=False, enable_thinking=True, keep_reasoning=True):
        calls.append((messages, tools, keep_reasoning))
        return orig(messages, tools, add_generation_prompt, enable_thinking, keep_reasoning)

    data.render = spy
    g = data.Gen(7)
    for name, _ in data.Gen.MIX:
        for _ in range(60):
            getattr(g, name)()
    data.render = orig
    bad = 0
    for messages, tools, keep in calls:
        ours = data.text_of(orig(messages, tools, keep_reasoning=keep))
        hf_msgs = []
        for m in messages:
            m2 = {"role": m["role"], "content": m.get("content", "")}
            if m["role"] == "assistant":
                m2["reasoning_content"] = m.get("reasoning", "")
                if m.get("tool_calls"):
                    m2["tool_calls"] = [{"type": "function", "function": tc} for tc in m["tool_calls"]]
            hf_msgs.append(m2)
        kw = {"clear_thinking": False} if keep else {}
        out, _ = render_jinja_template(conversations=[hf_msgs], tools=tools, chat_template=TEMPLATE, **kw)
        want = out[0]
        # A final assistant turn ends with the token the model must say next.
        end = data.OBSERVATION if messages[-1].get("tool_calls") else data.USER
        if ours != want + end:
            bad += 1
            if bad <= 3:
                i = next(i for i in range(min(len(ours), len(want))) if ours[i] != want[i]) if ours[:len(want)] != want else len(want)
                print("mismatch at", i, repr(ours[max(0, i - 60):i + 60]), "\nvs", repr((want + end)[max(0, i - 60):i + 60]))
    print(f"{len(calls) - bad}/{len(calls)} renderings equal the template's")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
