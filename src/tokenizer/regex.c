/* regex.c - compile a pattern (regex.h) into a small program and run it by backtracking.
 *
 * The pattern is parsed into a tree (nodes in one array), then emitted as instructions:
 * CHAR/CLASS/ANY consume a code point, SPLIT tries its first branch and remembers the
 * second, JMP, LOOK runs a sub-program at the current position (lookahead), BOS/EOS
 * assert the ends, MATCH ends. Counted repeats are emitted by copying the sub-tree. */
#include "regex.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unicode.h"

/* ---- classes ---- */

typedef struct {
    uint8_t cats;    /* bit (1 << PL_UC_x) for each category class in the set */
    uint8_t letters; /* bit (1 << PL_UC_LU..LO) for each kind of letter in the set */
    uint8_t spaces;  /* bit 0: \s, bit 1: \S */
    bool neg;
    uint32_t first, n_ranges; /* into the range pool (lo, hi pairs) */
} rx_class;

enum { OP_CHAR, OP_CLASS, OP_ANY, OP_SPLIT, OP_JMP, OP_LOOK, OP_NLOOK, OP_BOS, OP_EOS, OP_MATCH };

typedef struct {
    uint8_t op;
    uint32_t x, y; /* CHAR: x = code point; CLASS: x = class; SPLIT: x preferred, y other;
                      JMP: x; (N)LOOK: x = sub-program, y = continuation */
} rx_inst;

struct pl_regex {
    rx_inst *code;
    uint32_t n_code;
    rx_class *classes;
    uint32_t n_classes;
    uint32_t *ranges;
    uint32_t n_ranges;
};

/* ---- parse tree ---- */

enum { N_EMPTY, N_CHAR, N_CLASS, N_ANY, N_CAT, N_ALT, N_REPEAT, N_LOOK, N_NLOOK, N_BOS, N_EOS };

typedef struct {
    uint8_t type;
    bool greedy;
    uint32_t val;    /* CHAR: code point; CLASS: class index */
    int min, max;    /* REPEAT; max -1 = unbounded */
    int child, next; /* first child, next sibling (-1 = none) */
} rx_node;

typedef struct {
    const char *p, *end;
    rx_node *nodes;
    int n_nodes, cap_nodes;
    rx_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *ranges;
    uint32_t n_ranges, cap_ranges;
    int depth;
    bool icase;
    const char *err;
} rx_parser;

#define RX_MAX_DEPTH  64
#define RX_MAX_REPEAT 1000

static int new_node(rx_parser *ps, int type) {
    if (ps->n_nodes == ps->cap_nodes) {
        int cap = ps->cap_nodes ? ps->cap_nodes * 2 : 64;
        rx_node *v = realloc(ps->nodes, (size_t)cap * sizeof *v);
        if (!v) {
            ps->err = "out of memory";
            return -1;
        }
        ps->nodes = v, ps->cap_nodes = cap;
    }
    rx_node *n = &ps->nodes[ps->n_nodes];
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)type;
    n->child = n->next = -1;
    n->greedy = true;
    return ps->n_nodes++;
}

static bool add_range(rx_parser *ps, uint32_t lo, uint32_t hi) {
    if (ps->n_ranges + 2 > ps->cap_ranges) {
        uint32_t cap = ps->cap_ranges ? ps->cap_ranges * 2 : 64;
        uint32_t *v = realloc(ps->ranges, cap * sizeof *v);
        if (!v) return false;
        ps->ranges = v, ps->cap_ranges = cap;
    }
    ps->ranges[ps->n_ranges++] = lo;
    ps->ranges[ps->n_ranges++] = hi;
    return true;
}

/* A range, plus its other-case twin for ASCII letters inside (?i:...). */
static bool add_range_cased(rx_parser *ps, uint32_t lo, uint32_t hi) {
    if (!add_range(ps, lo, hi)) return false;
    if (!ps->icase) return true;
    for (uint32_t c = lo; c <= hi && c < 128; c++) {
        if (c >= 'a' && c <= 'z' && !add_range(ps, c - 32, c - 32)) return false;
        if (c >= 'A' && c <= 'Z' && !add_range(ps, c + 32, c + 32)) return false;
    }
    return true;
}

static int new_class(rx_parser *ps) {
    if (ps->n_classes == ps->cap_classes) {
        uint32_t cap = ps->cap_classes ? ps->cap_classes * 2 : 16;
        rx_class *v = realloc(ps->classes, cap * sizeof *v);
        if (!v) {
            ps->err = "out of memory";
            return -1;
        }
        ps->classes = v, ps->cap_classes = cap;
    }
    rx_class *c = &ps->classes[ps->n_classes];
    memset(c, 0, sizeof *c);
    c->first = ps->n_ranges;
    return (int)ps->n_classes++;
}

static uint32_t next_cp(rx_parser *ps) {
    uint32_t cp;
    ps->p += pl_utf8_decode(ps->p, (size_t)(ps->end - ps->p), &cp);
    return cp;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Escape kinds: a single code point, or a set to merge into a class. */
typedef struct {
    bool is_set;
    uint32_t cp;
    uint8_t cats, letters, spaces;
    bool neg;              /* \P{..}, \S, \D, \W as a set */
    uint32_t lo[3], hi[3]; /* explicit ranges of \d \w */
    int n_ranges;
} rx_escape;

static bool parse_escape(rx_parser *ps, rx_escape *e) {
    memset(e, 0, sizeof *e);
    if (ps->p >= ps->end) {
        ps->err = "trailing backslash";
        return false;
    }
    char c = *ps->p++;
    switch (c) {
    case 'n': e->cp = '\n'; return true;
    case 'r': e->cp = '\r'; return true;
    case 't': e->cp = '\t'; return true;
    case 'f': e->cp = '\f'; return true;
    case 'v': e->cp = '\v'; return true;
    case '0': e->cp = 0; return true;
    case 's':
    case 'S': e->is_set = true, e->spaces = c == 's' ? 1 : 2; return true;
    case 'd':
    case 'D':
        e->is_set = true, e->neg = c == 'D', e->lo[0] = '0', e->hi[0] = '9', e->n_ranges = 1;
        return true;
    case 'w':
    case 'W':
        e->is_set = true, e->neg = c == 'W', e->n_ranges = 3;
        e->lo[0] = '0', e->hi[0] = '9', e->lo[1] = 'A', e->hi[1] = 'Z', e->lo[2] = 'a',
        e->hi[2] = 'z';
        return true; /* '_' is added by the caller below */
    case 'p':
    case 'P': {
        if (ps->end - ps->p < 3 || ps->p[0] != '{') break;
        const char *close = memchr(ps->p, '}', (size_t)(ps->end - ps->p));
        if (!close || close - ps->p < 2) break;
        static const char letters[] = "?LNPMSZC"; /* index = PL_UC_x */
        const char *l = strchr(letters + 1, ps->p[1]);
        if (!l) {
            ps->err = "unknown \\p category";
            return false;
        }
        int cat = (int)(l - letters);
        e->is_set = true, e->neg = c == 'P';
        if (close - ps->p == 3 && cat == PL_UC_LETTER) { /* \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} */
            const char *kinds = "?ulmto", *k = strchr(kinds + 1, ps->p[2]);
            static const int kind_of[] = {0, PL_UC_LU, PL_UC_LL, PL_UC_LM, PL_UC_LT, PL_UC_LO};
            if (!k) {
                ps->err = "unknown \\p category";
                return false;
            }
            e->letters = (uint8_t)(1u << kind_of[k - kinds]);
        } else if (close - ps->p == 2) {
            e->cats = (uint8_t)(1u << cat);
            if (cat == PL_UC_OTHER) e->cats |= 1u << PL_UC_UNASSIGNED;
        } else {
            ps->err = "unknown \\p category";
            return false;
        }
        ps->p = close + 1;
        return true;
    }
    case 'x':
        if (ps->end - ps->p >= 2 && hexval(ps->p[0]) >= 0 && hexval(ps->p[1]) >= 0) {
            e->cp = (uint32_t)(hexval(ps->p[0]) * 16 + hexval(ps->p[1]));
            ps->p += 2;
            return true;
        }
        break;
    case 'u':
        if (ps->end - ps->p >= 4) {
            uint32_t v = 0;
            int i = 0;
            for (; i < 4 && hexval(ps->p[i]) >= 0; i++) v = v * 16 + (uint32_t)hexval(ps->p[i]);
            if (i == 4) {
                e->cp = v;
                ps->p += 4;
                return true;
            }
        }
        break;
    default:
        if ((unsigned char)c < 128 && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
            !(c >= '0' && c <= '9')) {
            e->cp = (uint32_t)c;
            return true;
        }
    }
    ps->err = "unsupported escape";
    return false;
}

/* Merge a set escape into class k (negated sets must be the class's only content). */
static bool class_add_set(rx_parser *ps, int k, const rx_escape *e, bool *lone_neg) {
    rx_class *cl = &ps->classes[k];
    if (e->neg) *lone_neg = true;
    cl->cats |= e->cats;
    cl->letters |= e->letters;
    cl->spaces |= e->spaces;
    for (int i = 0; i < e->n_ranges; i++)
        if (!add_range(ps, e->lo[i], e->hi[i])) return false;
    if (e->n_ranges == 3 && !add_range(ps, '_', '_')) return false;
    return true;
}

static int parse_class(rx_parser *ps) {
    int k = new_class(ps);
    if (k < 0) return -1;
    bool neg = false, lone_neg = false;
    int items = 0;
    if (ps->p < ps->end && *ps->p == '^') neg = true, ps->p++;
    while (ps->p < ps->end && (*ps->p != ']' || items == 0)) {
        uint32_t lo;
        if (*ps->p == '\\') {
            ps->p++;
            rx_escape e;
            if (!parse_escape(ps, &e)) return -1;
            if (e.is_set) {
                if (!class_add_set(ps, k, &e, &lone_neg)) goto nomem;
                items++;
                continue;
            }
            lo = e.cp;
        } else {
            lo = next_cp(ps);
        }
        uint32_t hi = lo;
        if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
            ps->p++;
            if (*ps->p == '\\') {
                ps->p++;
                rx_escape e;
                if (!parse_escape(ps, &e)) return -1;
                if (e.is_set) {
                    ps->err = "set in a range";
                    return -1;
                }
                hi = e.cp;
            } else {
                hi = next_cp(ps);
            }
            if (hi < lo) {
                ps->err = "reversed range";
                return -1;
            }
        }
        if (!add_range_cased(ps, lo, hi)) goto nomem;
        items++;
    }
    if (ps->p >= ps->end) {
        ps->err = "unterminated class";
        return -1;
    }
    ps->p++; /* ']' */
    if (lone_neg && items != 1) {
        ps->err = "negated set mixed into a class";
        return -1;
    }
    rx_class *cl = &ps->classes[k];
    cl->neg = neg != lone_neg;
    cl->n_ranges = (ps->n_ranges - cl->first) / 2;
    return k;
nomem:
    ps->err = "out of memory";
    return -1;
}

static int parse_alt(rx_parser *ps);

/* A node for one code point c (a two-case class inside (?i:...)). */
static int char_node(rx_parser *ps, uint32_t c) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!ps->icase || !letter) {
        int n = new_node(ps, N_CHAR);
        if (n >= 0) ps->nodes[n].val = c;
        return n;
    }
    int k = new_class(ps);
    if (k < 0) return -1;
    if (!add_range_cased(ps, c, c)) {
        ps->err = "out of memory";
        return -1;
    }
    ps->classes[k].n_ranges = (ps->n_ranges - ps->classes[k].first) / 2;
    int n = new_node(ps, N_CLASS);
    if (n >= 0) ps->nodes[n].val = (uint32_t)k;
    return n;
}

static int parse_atom(rx_parser *ps) {
    char c = *ps->p;
    if (c == '(') {
        ps->p++;
        int type = -1;
        bool icase = ps->icase;
        if (ps->end - ps->p >= 2 && ps->p[0] == '?') {
            if (ps->p[1] == ':')
                type = N_CAT;
            else if (ps->p[1] == '=')
                type = N_LOOK;
            else if (ps->p[1] == '!')
                type = N_NLOOK;
            else if (ps->p[1] == 'i' && ps->end - ps->p >= 3 && ps->p[2] == ':')
                type = N_CAT, ps->icase = true, ps->p++;
            else {
                ps->err = "unsupported group";
                return -1;
            }
            ps->p += 2;
        }
        if (++ps->depth > RX_MAX_DEPTH) {
            ps->err = "pattern nested too deep";
            return -1;
        }
        int inner = parse_alt(ps);
        ps->depth--;
        ps->icase = icase;
        if (inner < 0) return -1;
        if (ps->p >= ps->end || *ps->p != ')') {
            ps->err = "missing )";
            return -1;
        }
        ps->p++;
        if (type == N_LOOK || type == N_NLOOK) {
            int n = new_node(ps, type);
            if (n >= 0) ps->nodes[n].child = inner;
            return n;
        }
        return inner;
    }
    if (c == '[') {
        ps->p++;
        int k = parse_class(ps);
        if (k < 0) return -1;
        int n = new_node(ps, N_CLASS);
        if (n >= 0) ps->nodes[n].val = (uint32_t)k;
        return n;
    }
    if (c == '.') return ps->p++, new_node(ps, N_ANY);
    if (c == '^') return ps->p++, new_node(ps, N_BOS);
    if (c == '$') return ps->p++, new_node(ps, N_EOS);
    if (c == '\\') {
        ps->p++;
        rx_escape e;
        if (!parse_escape(ps, &e)) return -1;
        if (!e.is_set) return char_node(ps, e.cp);
        int k = new_class(ps);
        if (k < 0) return -1;
        bool lone = false;
        if (!class_add_set(ps, k, &e, &lone)) {
            ps->err = "out of memory";
            return -1;
        }
        ps->classes[k].neg = lone;
        ps->classes[k].n_ranges = (ps->n_ranges - ps->classes[k].first) / 2;
        int n = new_node(ps, N_CLASS);
        if (n >= 0) ps->nodes[n].val = (uint32_t)k;
        return n;
    }
    if (c == ')' || c == '|' || c == '*' || c == '+' || c == '?' || c == '{') {
        ps->err = "unexpected character";
        return -1;
    }
    return char_node(ps, next_cp(ps));
}

static bool parse_int(rx_parser *ps, int *v) {
    int x = 0, digits = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && digits < 6)
        x = x * 10 + (*ps->p++ - '0'), digits++;
    *v = x;
    return digits > 0;
}

static int parse_seq(rx_parser *ps) {
    int cat = new_node(ps, N_CAT), last = -1;
    if (cat < 0) return -1;
    while (ps->p < ps->end && *ps->p != '|' && *ps->p != ')') {
        int atom = parse_atom(ps);
        if (atom < 0) return -1;
        while (ps->p < ps->end && strchr("*+?{", *ps->p)) {
            int min = 0, max = -1;
            char q = *ps->p++;
            if (q == '+')
                min = 1;
            else if (q == '?')
                max = 1;
            else if (q == '{') {
                if (!parse_int(ps, &min)) {
                    ps->err = "bad {n,m}";
                    return -1;
                }
                max = min;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    max = -1;
                    if (ps->p < ps->end && *ps->p != '}' && !parse_int(ps, &max)) {
                        ps->err = "bad {n,m}";
                        return -1;
                    }
                }
                if (ps->p >= ps->end || *ps->p != '}' || (max >= 0 && max < min) ||
                    min > RX_MAX_REPEAT || max > RX_MAX_REPEAT) {
                    ps->err = "bad {n,m}";
                    return -1;
                }
                ps->p++;
            }
            int rep = new_node(ps, N_REPEAT);
            if (rep < 0) return -1;
            rx_node *r = &ps->nodes[rep];
            r->min = min, r->max = max, r->child = atom;
            if (ps->p < ps->end && *ps->p == '?') r->greedy = false, ps->p++;
            atom = rep;
        }
        if (last < 0)
            ps->nodes[cat].child = atom;
        else
            ps->nodes[last].next = atom;
        last = atom;
    }
    return cat;
}

static int parse_alt(rx_parser *ps) {
    int first = parse_seq(ps);
    if (first < 0 || ps->p >= ps->end || *ps->p != '|') return first;
    int alt = new_node(ps, N_ALT);
    if (alt < 0) return -1;
    ps->nodes[alt].child = first;
    int last = first;
    while (ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        int s = parse_seq(ps);
        if (s < 0) return -1;
        ps->nodes[last].next = s;
        last = s;
    }
    return alt;
}

/* ---- code generation ---- */

typedef struct {
    rx_inst *code;
    uint32_t n, cap;
    const rx_node *nodes;
    bool oom;
} rx_emitter;

#define RX_MAX_CODE (1u << 20)

static uint32_t emit(rx_emitter *em, int op, uint32_t x, uint32_t y) {
    if (em->n == em->cap) {
        uint32_t cap = em->cap ? em->cap * 2 : 64;
        rx_inst *v = cap > RX_MAX_CODE ? NULL : realloc(em->code, cap * sizeof *v);
        if (!v) {
            em->oom = true;
            return 0;
        }
        em->code = v, em->cap = cap;
    }
    em->code[em->n] = (rx_inst){(uint8_t)op, x, y};
    return em->n++;
}

static void gen(rx_emitter *em, int ni);

static void gen_repeat(rx_emitter *em, const rx_node *nd) {
    for (int i = 0; i < nd->min && !em->oom; i++) gen(em, nd->child);
    if (nd->max < 0) { /* L: SPLIT body, out; body; JMP L */
        uint32_t split = emit(em, OP_SPLIT, 0, 0);
        gen(em, nd->child);
        emit(em, OP_JMP, split, 0);
        if (em->oom) return;
        uint32_t body = split + 1, out = em->n;
        em->code[split].x = nd->greedy ? body : out;
        em->code[split].y = nd->greedy ? out : body;
        return;
    }
    /* (max - min) nested optional copies: SPLIT body, out; body; ... */
    uint32_t splits[RX_MAX_REPEAT];
    int k = 0;
    for (int i = nd->min; i < nd->max && !em->oom; i++) {
        splits[k++] = emit(em, OP_SPLIT, 0, 0);
        gen(em, nd->child);
    }
    if (em->oom) return;
    for (int i = 0; i < k; i++) {
        uint32_t body = splits[i] + 1, out = em->n;
        em->code[splits[i]].x = nd->greedy ? body : out;
        em->code[splits[i]].y = nd->greedy ? out : body;
    }
}

static void gen(rx_emitter *em, int ni) {
    if (em->oom) return;
    const rx_node *nd = &em->nodes[ni];
    switch (nd->type) {
    case N_EMPTY: break;
    case N_CHAR: emit(em, OP_CHAR, nd->val, 0); break;
    case N_CLASS: emit(em, OP_CLASS, nd->val, 0); break;
    case N_ANY: emit(em, OP_ANY, 0, 0); break;
    case N_BOS: emit(em, OP_BOS, 0, 0); break;
    case N_EOS: emit(em, OP_EOS, 0, 0); break;
    case N_CAT:
        for (int c = nd->child; c >= 0; c = em->nodes[c].next) gen(em, c);
        break;
    case N_ALT: {
        /* SPLIT a, next; a; JMP end; next: SPLIT b, next2; b; JMP end; ...; last */
        uint32_t jumps[256];
        int nj = 0;
        for (int c = nd->child; c >= 0 && !em->oom; c = em->nodes[c].next) {
            if (em->nodes[c].next < 0) {
                gen(em, c);
                break;
            }
            uint32_t split = emit(em, OP_SPLIT, 0, 0);
            gen(em, c);
            if (nj == 256) {
                em->oom = true;
                return;
            }
            jumps[nj++] = emit(em, OP_JMP, 0, 0);
            if (em->oom) return;
            em->code[split].x = split + 1;
            em->code[split].y = em->n;
        }
        for (int i = 0; i < nj && !em->oom; i++) em->code[jumps[i]].x = em->n;
        break;
    }
    case N_REPEAT: gen_repeat(em, nd); break;
    case N_LOOK:
    case N_NLOOK: {
        uint32_t look = emit(em, nd->type == N_LOOK ? OP_LOOK : OP_NLOOK, 0, 0);
        gen(em, nd->child);
        emit(em, OP_MATCH, 0, 0);
        if (em->oom) return;
        em->code[look].x = look + 1;
        em->code[look].y = em->n;
        break;
    }
    }
}

pl_status pl_regex_compile(const char *pattern, pl_regex **out) {
    *out = NULL;
    rx_parser ps = {.p = pattern, .end = pattern + strlen(pattern)};
    rx_emitter em = {0};
    int root = parse_alt(&ps);
    if (root >= 0 && ps.p < ps.end) ps.err = "unbalanced )", root = -1;
    if (root >= 0) {
        em.nodes = ps.nodes;
        gen(&em, root);
        emit(&em, OP_MATCH, 0, 0);
        if (em.oom) ps.err = "pattern too large";
    }
    pl_regex *re = NULL;
    if (!ps.err) re = calloc(1, sizeof *re);
    if (ps.err || !re) {
        pl_status st =
            pl_fail(PL_ERR_ARG, "regex '%.60s': %s", pattern, ps.err ? ps.err : "out of memory");
        free(ps.nodes), free(ps.classes), free(ps.ranges), free(em.code);
        return st;
    }
    free(ps.nodes);
    re->code = em.code, re->n_code = em.n;
    re->classes = ps.classes, re->n_classes = ps.n_classes;
    re->ranges = ps.ranges, re->n_ranges = ps.n_ranges;
    *out = re;
    return PL_OK;
}

void pl_regex_free(pl_regex *re) {
    if (!re) return;
    free(re->code), free(re->classes), free(re->ranges), free(re);
}

void pl_regex_scratch_free(pl_regex_scratch *s) {
    free(s->stack);
    memset(s, 0, sizeof *s);
}

/* ---- matching ---- */

static bool class_match(const pl_regex *re, const rx_class *cl, uint32_t cp) {
    uint8_t f = pl_uni_flags(cp);
    int kind = f >> PL_UC_LETTER_SHIFT;
    bool in = (cl->cats >> (f & PL_UC_CAT_MASK)) & 1;
    if (!in && kind) in = (cl->letters >> kind) & 1;
    if (!in && cl->spaces) {
        bool sp = (f & PL_UC_SPACE) != 0;
        in = ((cl->spaces & 1) && sp) || ((cl->spaces & 2) && !sp);
    }
    for (uint32_t i = 0; !in && i < cl->n_ranges; i++) {
        const uint32_t *r = re->ranges + cl->first + 2 * i;
        in = cp >= r[0] && cp <= r[1];
    }
    return in != cl->neg;
}

static bool push(pl_regex_scratch *s, uint32_t pc, size_t pos) {
    if (s->sp + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        uint32_t *v = realloc(s->stack, cap * sizeof *v);
        if (!v) return false;
        s->stack = v, s->cap = cap;
    }
    s->stack[s->sp++] = pc;
    s->stack[s->sp++] = (uint32_t)pos;
    return true;
}

/* Run the program from pc at pos; end position of the first match in priority order, or -1. */
static long run(const pl_regex *re, pl_regex_scratch *s, const uint32_t *text, size_t n,
                uint32_t pc0, size_t pos0, int depth) {
    size_t base = s->sp;
    if (depth > 4 || !push(s, pc0, pos0)) return -1;
    while (s->sp > base) {
        size_t pos = s->stack[--s->sp];
        uint32_t pc = s->stack[--s->sp];
        for (;;) {
            if (--s->budget < 0) {
                s->sp = base;
                return -1;
            }
            const rx_inst *in = &re->code[pc];
            switch (in->op) {
            case OP_CHAR:
                if (pos < n && text[pos] == in->x) {
                    pc++, pos++;
                    continue;
                }
                goto fail;
            case OP_CLASS:
                if (pos < n && class_match(re, &re->classes[in->x], text[pos])) {
                    pc++, pos++;
                    continue;
                }
                goto fail;
            case OP_ANY:
                if (pos < n && text[pos] != '\n') {
                    pc++, pos++;
                    continue;
                }
                goto fail;
            case OP_SPLIT:
                if (!push(s, in->y, pos)) {
                    s->sp = base;
                    return -1;
                }
                pc = in->x;
                continue;
            case OP_JMP: pc = in->x; continue;
            case OP_LOOK:
            case OP_NLOOK: {
                bool hit = run(re, s, text, n, in->x, pos, depth + 1) >= 0;
                if (hit != (in->op == OP_LOOK)) goto fail;
                pc = in->y;
                continue;
            }
            case OP_BOS:
                if (pos != 0) goto fail;
                pc++;
                continue;
            case OP_EOS:
                if (pos != n) goto fail;
                pc++;
                continue;
            case OP_MATCH: s->sp = base; return (long)pos;
            }
        }
    fail:;
    }
    return -1;
}

long pl_regex_match_at(const pl_regex *re, pl_regex_scratch *s, const uint32_t *text, size_t n,
                       size_t pos) {
    if (pos > n || n > UINT32_MAX) return -1;
    long end = run(re, s, text, n, 0, pos, 0);
    return end < 0 ? -1 : end - (long)pos;
}
