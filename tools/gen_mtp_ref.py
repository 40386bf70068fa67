#!/usr/bin/env python3
"""gen_mtp_ref.py - an independent reference for the multi-token-prediction (MTP) block of
a Qwen3.5 GGUF (qwen35 / qwen35moe with nextn_predict_layers = 1), in plain Python (no
numpy): it reads the GGUF itself (F32, F16 and Q8_0 tensors, dequantised to float), and
runs the block as vLLM's Qwen3-Next MTP does:

    h  = output_norm(hidden)                    the main model's final-normed hidden state
    x  = eh_proj(concat(enorm(embed(id)), hnorm(h)))      (embedding first)
    x += gated full attention over the block's own cache (positions 0..p, RoPE at p)
    x += FFN (SwiGLU, or the MoE block: softmax router, top-k renormalised, plus the
         sigmoid-gated shared expert)
    o  = shared_head_norm(x);  logits = output(o)  (token_embd when tied)

Every norm weight is stored by the converter as 1 + w, so each norm is x / rms(x) * w.

Inputs: the GGUF, the prompt ids, the main model's hidden states (pre-norm, [T, n_embd]
float32, dumped from our CPU path by tests/model/mtp_test with POOLED_MTP_DUMP) and the id
that follows the prompt. Output (float32, [T - 1 + depth, n_vocab]): row p < T-1 is the
block at position p from (hidden p, id p+1), i.e. its guess at id p+2; then `depth`
chained rows from position T-1: (hidden T-1, next), then (the block's own normed output,
the previous row's argmax).

    tools/gen_mtp_ref.py MODEL.gguf HIDDEN.f32 OUT.f32 --ids "1 2 3" --next 7 [--depth 3]
"""
import argparse
import math
import struct
import sys


# ---- GGUF ----

def read_gguf(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et = take("I")
            n = take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)

    if buf[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    pos = 4
    take("I")  # version
    n_tensors = take("Q")
    n_kv = take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = {}
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        typ = take("I")
        off = take("Q")
        infos[name] = (dims, typ, off)
    align = meta.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    return buf, data, meta, infos


def f16(bits):
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def tensor(g, name):
    """The tensor as a list of rows (each a list of floats), or a flat list for 1-D."""
    buf, data, _, infos = g
    dims, typ, off = infos[name]
    n = 1
    for d in dims:
        n *= d
    at = data + off
    if typ == 0:  # F32
        vals = list(struct.unpack_from("<%df" % n, buf, at))
    elif typ == 1:  # F16
        vals = [f16(b) for b in struct.unpack_from("<%dH" % n, buf, at)]
    elif typ == 8:  # Q8_0: blocks of an f16 scale and 32 int8
        vals = []
        for b in range(n // 32):
            p = at + b * 34
            d = f16(struct.unpack_from("<H", buf, p)[0])
            vals.extend(d * q for q in struct.unpack_from("<32b", buf, p + 2))
    else:
        raise ValueError("%s: tensor type %d not handled" % (name, typ))
    if len(dims) == 1:
        return vals
    row = dims[0]
    return [vals[i:i + row] for i in range(0, n, row)]


# ---- the math ----

def rms_norm(x, w, eps):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * s * wi for v, wi in zip(x, w)]


def matvec(rows, x):
    return [sum(a * b for a, b in zip(r, x)) for r in rows]


def silu(v):
    return v / (1.0 + math.exp(-v))


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def swiglu(gate, up, down, x):
    g, u = matvec(gate, x), matvec(up, x)
    return matvec(down, [silu(a) * b for a, b in zip(g, u)])


class Block:
    def __init__(self, g, arch):
        meta = g[2]
        key = lambda s: meta["%s.%s" % (arch, s)]
        self.d = key("embedding_length")
        self.n_layer = key("block_count") - key("nextn_predict_layers")
        self.n_head, self.n_kv = key("attention.head_count"), key("attention.head_count_kv")
        self.hd = key("attention.key_length")
        self.rope_dim = key("rope.dimension_count")
        self.base = key("rope.freq_base")
        self.eps = key("attention.layer_norm_rms_epsilon")
        self.n_used = meta.get("%s.expert_used_count" % arch, 0)
        b = "blk.%d." % self.n_layer
        t = lambda s: tensor(g, b + s)
        self.embd = tensor(g, "token_embd.weight")
        self.out_norm = tensor(g, "output_norm.weight")
        self.output = tensor(g, "output.weight") if "output.weight" in g[3] else self.embd
        self.eh, self.enorm, self.hnorm = t("nextn.eh_proj.weight"), t("nextn.enorm.weight"), \
            t("nextn.hnorm.weight")
        self.shnorm = t("nextn.shared_head_norm.weight")
        self.attn_norm, self.post_norm = t("attn_norm.weight"), t("post_attention_norm.weight")
        self.wq, self.wk, self.wv = t("attn_q.weight"), t("attn_k.weight"), t("attn_v.weight")
        self.q_norm, self.k_norm = t("attn_q_norm.weight"), t("attn_k_norm.weight")
        self.wo = t("attn_output.weight")
        self.moe = b + "ffn_gate_inp.weight" in g[3]
        if self.moe:
            self.router = t("ffn_gate_inp.weight")
            n_exp = len(self.router)

            def split(rows):
                per = len(rows) // n_exp
                return [rows[e * per:(e + 1) * per] for e in range(n_exp)]
            self.gate_e, self.up_e = split(t("ffn_gate_exps.weight")), split(t("ffn_up_exps.weight"))
            self.down_e = split(t("ffn_down_exps.weight"))
            self.sh_gate_inp = t("ffn_gate_inp_shexp.weight")
            self.gate_s, self.up_s = t("ffn_gate_shexp.weight"), t("ffn_up_shexp.weight")
            self.down_s = t("ffn_down_shexp.weight")
        else:
            self.gate, self.up, self.down = t("ffn_gate.weight"), t("ffn_up.weight"), \
                t("ffn_down.weight")
        self.keys, self.vals = {}, {}  # position -> per kv-head vectors

    def rope(self, v, pos):
        half = self.rope_dim // 2
        out = list(v)
        for i in range(half):
            ang = pos * self.base ** (-2.0 * i / self.rope_dim)
            c, s = math.cos(ang), math.sin(ang)
            a, b = v[i], v[i + half]
            out[i], out[i + half] = a * c - b * s, b * c + a * s
        return out

    def ffn(self, x):
        if not self.moe:
            return swiglu(self.gate, self.up, self.down, x)
        logits = matvec(self.router, x)
        mx = max(logits)
        p = [math.exp(v - mx) for v in logits]
        tot = sum(p)
        p = [v / tot for v in p]
        top = sorted(range(len(p)), key=lambda e: -p[e])[:self.n_used]
        norm = sum(p[e] for e in top)
        y = [0.0] * self.d
        for e in top:
            ye = swiglu(self.gate_e[e], self.up_e[e], self.down_e[e], x)
            y = [a + p[e] / norm * b for a, b in zip(y, ye)]
        gs = sigmoid(sum(a * b for a, b in zip(self.sh_gate_inp, x)))
        ys = swiglu(self.gate_s, self.up_s, self.down_s, x)
        return [a + gs * b for a, b in zip(y, ys)]

    def step(self, h_normed, tok, pos):
        """The block at position pos: returns (its normed output, the logits)."""
        hd = self.hd
        e = rms_norm(self.embd[tok], self.enorm, self.eps)
        h = rms_norm(h_normed, self.hnorm, self.eps)
        x = matvec(self.eh, e + h)
        xn = rms_norm(x, self.attn_norm, self.eps)
        qg = matvec(self.wq, xn)  # per head: hd query values, then hd gate values
        k, v = matvec(self.wk, xn), matvec(self.wv, xn)
        self.keys[pos] = [self.rope(rms_norm(k[j * hd:(j + 1) * hd], self.k_norm, self.eps), pos)
                          for j in range(self.n_kv)]
        self.vals[pos] = [v[j * hd:(j + 1) * hd] for j in range(self.n_kv)]
        att = []
        group = self.n_head // self.n_kv
        for i in range(self.n_head):
            q = self.rope(rms_norm(qg[2 * i * hd:(2 * i + 1) * hd], self.q_norm, self.eps), pos)
            gate = qg[(2 * i + 1) * hd:(2 * i + 2) * hd]
            j = i // group
            ps = sorted(p for p in self.keys if p <= pos)
            sc = [sum(a * b for a, b in zip(q, self.keys[p][j])) / math.sqrt(hd) for p in ps]
            mx = max(sc)
            w = [math.exp(s - mx) for s in sc]
            tot = sum(w)
            o = [sum(w[t] / tot * self.vals[p][j][c] for t, p in enumerate(ps)) for c in range(hd)]
            att.extend(a * sigmoid(gv) for a, gv in zip(o, gate))
        x = [a + b for a, b in zip(x, matvec(self.wo, att))]
        x = [a + b for a, b in zip(x, self.ffn(rms_norm(x, self.post_norm, self.eps)))]
        o = rms_norm(x, self.shnorm, self.eps)
        return o, matvec(self.output, o)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("hidden")
    ap.add_argument("out")
    ap.add_argument("--ids", required=True, help="the prompt ids, space-separated")
    ap.add_argument("--next", type=int, required=True, help="the id after the prompt")
    ap.add_argument("--depth", type=int, default=3)
    a = ap.parse_args()
    g = read_gguf(a.model)
    arch = g[2]["general.architecture"]
    blk = Block(g, arch)
    ids = [int(v) for v in a.ids.split()]
    raw = open(a.hidden, "rb").read()
    d = blk.d
    if len(raw) != 4 * d * len(ids):
        sys.exit("%s: expected %d x %d floats" % (a.hidden, len(ids), d))
    hid = [list(struct.unpack_from("<%df" % d, raw, 4 * d * t)) for t in range(len(ids))]
    hn = [rms_norm(h, blk.out_norm, blk.eps) for h in hid]
    rows = []
    for p in range(len(ids) - 1):
        rows.append(blk.step(hn[p], ids[p + 1], p)[1])
    h, tok = hn[-1], a.next
    drafts = []
    for j in range(a.depth):
        h, lg = blk.step(h, tok, len(ids) - 1 + j)
        rows.append(lg)
        tok = max(range(len(lg)), key=lambda i: (lg[i], -i))
        drafts.append(tok)
    with open(a.out, "wb") as f:
        for r in rows:
            f.write(struct.pack("<%df" % len(r), *r))
    print("%s: %d rows of %d logits, chained drafts %s" % (a.out, len(rows), len(rows[0]), drafts))


if __name__ == "__main__":
    main()
