#!/usr/bin/env python3
"""gen_jinja_refs.py - reference renderings for tests/tokenizer/jinja_ref_test.c, made with
Python's jinja2 configured as transformers' apply_chat_template configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
raise_exception, strftime_now). Our interpreter must give exactly the same text.

Run from the repository root with ../shared present (jinja2 3.x needed, development only):
    python3 tools/gen_jinja_refs.py > tests/tokenizer/data/jinja_refs.json
"""
import json
import struct
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def gguf_kv(path, want):
    """One string value from a GGUF's metadata."""
    f = open(path, 'rb')
    f.read(4)
    struct.unpack('<I', f.read(4))
    _, nkv = struct.unpack('<QQ', f.read(16))
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rstr():
        n, = struct.unpack('<Q', f.read(8))
        return f.read(n).decode('utf-8')

    def skip(t):
        if t in sizes:
            f.read(sizes[t])
        elif t == 8:
            rstr()
        else:
            et, n = struct.unpack('<IQ', f.read(12))
            if et in sizes:
                f.read(sizes[et] * n)
            else:
                for _ in range(n):
                    skip(et)

    for _ in range(nkv):
        k = rstr()
        t, = struct.unpack('<I', f.read(4))
        if k == want and t == 8:
            return rstr()
        skip(t)
    return None


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters['tojson'] = tojson
env.globals['raise_exception'] = raise_exception

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
           "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city, in °C.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
        "days": {"type": "integer", "minimum": 1}},
        "required": ["city"]}}}]

CONVS = {
    'sys_user_asst_user': [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "  Say \"yes\" twice.\n"}],
    'think_in_content': [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n5"},
        {"role": "user", "content": "and 4+4?"}],
    'reasoning_field': [
        {"role": "user", "content": "Capital of Peru?"},
        {"role": "assistant", "content": "Lima.", "reasoning_content": "It is Lima."}],
    'tools': [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Paris for 3 days?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": {"city": "Paris", "days": 3, "opts": ["c", 1.5]}}}]},
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "22°C"},
        {"role": "assistant", "content": "Sunny, 22°C."},
        {"role": "user", "content": "Thanks — and Lyon?"}],
    'parts': [
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "image"},
                                      {"type": "text", "text": " please"}]}],
    'unicode': [
        {"role": "user", "content": "日本語 🚀 naïve\ttab"}],
}

SNIPPETS = [
    ("{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}", {}),
    ("[{{ '  x  '|trim }}][{{ ' x '.strip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\n\nhi\n'.lstrip('\n') }}][{{ 'hi\n\n'.rstrip() }}]", {}),
    ("{{ [1,2,3][::-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-2] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3][5:] }} {{ 'héllo'[1:] }}", {}),
    ("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}", {"d": {"a": 1, "b": [1, "x"]}}),
    ("{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ [] |tojson }}{{ {}|tojson }}{{ 'q\"\\\\'|tojson }}", {"d": {"b": [1, 2.5, None, True], "a": {"é": "ü\n", "n": -3}}}),
    ("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{% if not loop.last %},{% endif %}{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
    ("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"xs": [1, 2, 3, 4, 5]}),
    ("{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", {"xs": [1, 2, 3]}),
    ("{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}|{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {"xs": [7, 8]}),
    ("{% macro f(a, b=2, c='x') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, c='y') }} {{ f(1, 3) }} {{ f(a=4) }}", {}),
    ("{{ x is defined }} {{ y is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.5 is float }} {{ [] is iterable }} {{ {} is mapping }} {{ 3 is odd }} {{ 4 is even }} {{ 6 is divisibleby 3 }} {{ true is true }} {{ false is false }} {{ 'a' is in 'abc' }} {{ x is not none }} {{ y is undefined }} {{ 1 is sameas 1 }} {{ 'ab' is lower }}", {"x": 1}),
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' ~ 3 }} {{ 'ab' * 2 }} {{ 1 + 2.5 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-5 }} {{ 3 > 2 > 1 }} {{ 'b' in 'abc' }} {{ 'x' not in ['x'] }} {{ -(3) }} {{ 10 - 2 - 3 }} {{ 2 * 3 + 4 }} {{ 12345678901234567 }} {{ 1.5e300 * 10 }}", {}),
    ("{{ 'hello world'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello world'.title() }} {{ 'hello World'.capitalize() }} {{ 'aXbXc'.replace('X', '-') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }} {{ ', '.join(['a', 'b']) }} {{ 'ÉCOLE'.lower() }} {{ 'straße'.upper() }}", {}),
    ("{{ 'héllo'|length }} {{ xs|length }} {{ xs|first }} {{ xs|last }} {{ u|default('d') }} {{ ''|default('d', true) }} {{ ms|join(', ', attribute='role') }} {{ ms|map(attribute='role')|join('/') }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }} {{ ms|rejectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ [3, 1, 2, 1]|unique|list }} {{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ xs|reverse|list }} {{ '42'|int + 1 }} {{ '2.5'|float }} {{ 3|string ~ 'x' }} {{ -4|abs }} {{ 2.567|round(2) }} {{ 'ab'|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ 'a\nb'|indent(2) }} {{ 'x'|upper }} {{ [1, 0, 2]|select|list }} {{ ['a', 'B']|map('upper')|list }}", {"xs": [1, 2, 3], "ms": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}),
    ("[{{ 'yes' if false }}][{{ 'yes' if true else 'no' }}][{{ 0 or 'x' }}][{{ 1 and 'y' }}][{{ not 0 }}][{{ none }}][{{ true }}]", {}),
    ("<ul>\n  {% for x in xs %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n  {%+ if true %}kept{% endif %}\n{# comment #}\nafter\n   {{- ' trimmed ' -}}   \nend\n", {"xs": [1, 2]}),
    ("{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ {'a': \"it's\"} }} {{ ('t', 1) }} {{ 'q' }}", {}),
    ("{{ d.get('x', 'dflt') }} {{ d.get('a') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d['a'] }} {{ d.a }} {{ d.missing }}|{{ d.items()|list }}", {"d": {"a": 1, "b": 2}}),
    ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}in{{ 1 + 1 }}{% endcall %}", {}),
    ("{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("{{ 'a\\tb\\u00e9\\x41' }} {{ \"dq 'x'\" }} {{ 'con' 'cat' }}", {}),
    ("{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}", {}),
    ("{% for x in xs %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}|{{ loop.cycle('odd', 'even') }} {% endfor %}", {"xs": ["a", "b", "c"]}),
    ("{% raw %}{{ not rendered }}{% endraw %} {{ 1 }}", {}),
    ("line1\n{% if true %}\n  inside\n{% endif %}\n  {% if false %}no{% else %}\n  yes\n  {% endif %}\nlast\n", {}),
    ("{%- for m in messages -%}\n  {{ m.role }}: {{ m.content }}\n{%- endfor %}\n", {"messages": [{"role": "a", "content": "1"}, {"role": "b", "content": "2"}]}),
    ("{{ messages[0]['content'] | trim + '|' }}{{ 'x' ~ messages|length - 1 }}", {"messages": [{"role": "a", "content": " 1 "}]}),
    ("{{ raise_exception('boom') }}", {}),
]


def render(src, ctx):
    try:
        return {"expected": env.from_string(src).render(**ctx)}
    except Exception as e:  # noqa: BLE001 - any failure is an expected error
        return {"error": str(e)}


def main():
    refs = []
    qwen3 = gguf_kv('../shared/fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf', 'tokenizer.chat_template')
    llama3 = gguf_kv('../shared/fixtures/hf/llama3_vocab/llama3-vocab.gguf', 'tokenizer.chat_template')
    qwen35 = open('tests/tokenizer/data/qwen35.jinja').read()
    templates = [
        ("qwen3", {"template_gguf": "fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf"}, qwen3, "", "<|im_end|>"),
        ("llama3", {"template_gguf": "fixtures/hf/llama3_vocab/llama3-vocab.gguf"}, llama3,
         "<|begin_of_text|>", "<|end_of_text|>"),
        ("qwen35", {"template_file": "tests/tokenizer/data/qwen35.jinja"}, qwen35, "", "<|im_end|>"),
        ("smollm2", {"template": SMOLLM2}, SMOLLM2, "", "<|im_end|>"),
    ]
    for name, source, src, bos, eos in templates:
        for conv, msgs in CONVS.items():
            if name in ("smollm2", "llama3") and conv in ("tools", "parts", "reasoning_field"):
                continue  # these templates do not take such messages
            for agp in (True, False):
                for think in (None, False):
                    if think is False and name not in ("qwen3", "qwen35"):
                        continue
                    ctx = {"messages": msgs, "add_generation_prompt": agp, "bos_token": bos,
                           "eos_token": eos, "tools": TOOLS if conv == "tools" else None}
                    if think is not None:
                        ctx["enable_thinking"] = think
                    entry = {"name": "%s/%s/agp=%s/think=%s" % (name, conv, agp, think), **source,
                             "context": ctx}
                    entry.update(render(src, ctx))
                    refs.append(entry)
        ctx = {"messages": [], "add_generation_prompt": True, "bos_token": bos, "eos_token": eos, "tools": None}
        entry = {"name": "%s/empty" % name, **source, "context": ctx}
        entry.update(render(src, ctx))
        refs.append(entry)
    for i, (src, ctx) in enumerate(SNIPPETS):
        entry = {"name": "snippet%02d" % i, "template": src, "context": ctx}
        entry.update(render(src, ctx))
        refs.append(entry)
    json.dump({"generator": "tools/gen_jinja_refs.py with jinja2 %s" % jinja2.__version__,
               "refs": refs}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == '__main__':
    main()
