#!/usr/bin/env python3
"""gen_pretok_refs.py - reference splits for tests/tokenizer/pretok_ref_test.c.

For every row of the pre-tokenizer table in src/tokenizer/pretok.c (read from the C source,
so the expressions cannot drift), random texts are split the way llama.cpp applies an
expression list: each expression refines the pieces of the one before, matches and the text
between matches both becoming pieces. Matching is done by the third-party `regex` module
(the engine transformers' Python tokenizers use for these expressions); `$` becomes `\\Z`
because llama.cpp's std::regex only matches it at the very end. The C side must split the
same texts identically, through its hand-written matchers and through its regex engine.

    python3 tools/gen_pretok_refs.py > tests/tokenizer/data/pretok_refs.json
"""
import json
import random
import re
import sys

import regex

SRC = 'src/tokenizer/pretok.c'
TOKEN = re.compile(r'"((?:\\.|[^"\\])*)"|([A-Za-z_][A-Za-z0-9_]*)|(//[^\n]*|/\*.*?\*/)|(\S)', re.S)


def c_unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == '\\':
            e = s[i + 1]
            out.append({'n': '\n', 'r': '\r', 't': '\t', '\\': '\\', '"': '"', "'": "'"}[e])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return ''.join(out)


def tokens(text):
    for m in TOKEN.finditer(text):
        if m.group(3):
            continue
        if m.group(1) is not None:
            yield ('str', c_unescape(m.group(1)))
        elif m.group(2):
            yield ('id', m.group(2))
        else:
            yield ('punct', m.group(4))


def parse_table():
    src = open(SRC, encoding='utf-8').read()
    macros = {}
    for m in re.finditer(r'#define (RX_[A-Z0-9_]+)((?:[^\n]*\\\n)*[^\n]*)', src):
        body = m.group(2).replace('\\\n', '\n')
        macros[m.group(1)] = ''.join(v for k, v in tokens(body) if k == 'str')
    table = src[src.index('k_pretoks[] = {') + len('k_pretoks[] = {'):]
    table = table[:table.index('\n};')]
    rows, toks = [], list(tokens(table))
    i = 0
    while i < len(toks):
        if toks[i] == ('punct', '{') and toks[i + 1][0] == 'str':
            names = toks[i + 1][1]
            i += 3  # name, ',', '{'
            exprs, cur = [], None
            while toks[i] != ('punct', '}'):
                k, v = toks[i]
                if k == 'str' or k == 'id':
                    piece = v if k == 'str' else macros[v]
                    cur = piece if cur is None else cur + piece
                elif v == ',':
                    exprs.append(cur)
                    cur = None
                i += 1
            if cur is not None:
                exprs.append(cur)
            rows.append((names.split('|')[0], exprs))
        i += 1
    return rows


ALPHABET = (list("aAzZsStTrReEvVmMlLdDxQ'") + ['\u00e9', '\u00c9', '\u01c5', '\u02b0', '\u4e2d', '\u00df',
            '\u0301', '\u17b6', '0', '7', '\u0661', '\u2160', '\u00b2', ' ', ' ', ' ', '\t', '\n', '\n', '\r',
            '\u00a0', '\u3000', '\u2028'] + list('.,!?;:-/()[]{}"$+<=>^~|`') +
            ['\u3002', '\uff0c', '\u3001', '\uff08', '\uff01', '\u3041', '\u30a2', '\uac00', '\U0001f680',
             '\u200d', '\x01', '\x7f', '\ufffd', '\u1f7d', '\u0964'])


def split(exprs, text):
    pieces = [text]
    for e in exprs:
        if e.endswith('$') and not e.endswith('\\$'):
            e = e[:-1] + r'\Z'
        rx = regex.compile(e)
        out = []
        for p in pieces:
            pos = 0
            for m in rx.finditer(p):
                if m.start() > pos:
                    out.append(p[pos:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                pos = m.end()
            if pos < len(p):
                out.append(p[pos:])
        pieces = out
    return [len(p) for p in pieces]


def main():
    rng = random.Random(20261129)
    cases = []
    for name, exprs in parse_table():
        for _ in range(60):
            text = ''.join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40)))
            cases.append({'pre': name, 'text': text, 'pieces': split(exprs, text)})
    json.dump({'generator': 'tools/gen_pretok_refs.py with regex %s' % regex.__version__, 'cases': cases},
              sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
