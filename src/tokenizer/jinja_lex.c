/* jinja_lex.c - split a template into text and the tokens inside its tags.
 *
 * Whitespace rules are applied here, as Jinja2 does with transformers' settings:
 * newlines normalised to \n and one trailing newline dropped; `{%-` / `-%}` (and {{- -}},
 * {#- -#}) strip all whitespace on that side; trim_blocks drops the newline right after a
 * block or comment tag; lstrip_blocks drops spaces and tabs between a line start and a block
 * or comment tag; `{%+` / `+%}` turn those two off. {% raw %}...{% endraw %} is text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "unicode.h"

typedef struct {
    const char *s;
    size_t n, pos;
    int line;
    pl_arena *arena;
    jj_tokens *out;
    char err[160];
} lexer;

static bool push(lexer *lx, jj_token t) {
    jj_tokens *o = lx->out;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        jj_token *v = realloc(o->v, cap * sizeof *v);
        if (!v) {
            snprintf(lx->err, sizeof lx->err, "out of memory");
            return false;
        }
        o->v = v, o->cap = cap;
    }
    t.line = lx->line;
    o->v[o->n++] = t;
    return true;
}

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static bool push_text(lexer *lx, const char *s, size_t n) {
    if (!n) return true;
    char *t = pl_arena_strdup(lx->arena, s, n);
    if (!t) {
        snprintf(lx->err, sizeof lx->err, "out of memory");
        return false;
    }
    bool ok = push(lx, (jj_token){.kind = JT_TEXT, .text = t, .len = n});
    lx->line += count_lines(s, n);
    return ok;
}

/* Find the next tag opening at or after from: returns its position (n if none). */
static size_t next_tag(const lexer *lx, size_t from) {
    for (size_t i = from; i + 1 < lx->n; i++)
        if (lx->s[i] == '{' && (lx->s[i + 1] == '{' || lx->s[i + 1] == '%' || lx->s[i + 1] == '#'))
            return i;
    return lx->n;
}

/* Decode a Python string literal's body (escapes) into arena memory. */
static bool lex_string(lexer *lx, char quote) {
    size_t start = ++lx->pos, i = start;
    while (i < lx->n && lx->s[i] != quote) i += lx->s[i] == '\\' && i + 1 < lx->n ? 2 : 1;
    if (i >= lx->n) {
        snprintf(lx->err, sizeof lx->err, "line %d: unterminated string", lx->line);
        return false;
    }
    char *o = pl_arena_alloc(lx->arena, (i - start) + 1);
    if (!o) {
        snprintf(lx->err, sizeof lx->err, "out of memory");
        return false;
    }
    size_t k = 0;
    for (size_t p = start; p < i;) {
        char c = lx->s[p];
        if (c != '\\') {
            o[k++] = c;
            p++;
            continue;
        }
        char e = lx->s[p + 1];
        p += 2;
        int hex_digits = 0;
        switch (e) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '0': o[k++] = '\0'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case '\n': break; /* line continuation */
        case 'x': hex_digits = 2; break;
        case 'u': hex_digits = 4; break;
        case 'U': hex_digits = 8; break;
        default: o[k++] = '\\', o[k++] = e;
        }
        if (hex_digits) {
            uint32_t v = 0;
            int d = 0;
            for (; d < hex_digits && p < i; d++, p++) {
                char h = lx->s[p];
                int x = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (x < 0) break;
                v = v * 16 + (uint32_t)x;
            }
            if (d != hex_digits || v > 0x10FFFF) {
                snprintf(lx->err, sizeof lx->err, "line %d: bad escape in string", lx->line);
                return false;
            }
            /* an escape is at least 4 characters long, a code point at most 4 bytes */
            k += (size_t)pl_utf8_encode(v, o + k);
        }
    }
    o[k] = 0;
    lx->line += count_lines(lx->s + start, i - start);
    lx->pos = i + 1;
    return push(lx, (jj_token){.kind = JT_STRING, .text = o, .len = k});
}

static bool lex_number(lexer *lx) {
    size_t start = lx->pos, i = start;
    bool is_float = false;
    while (i < lx->n && ((lx->s[i] >= '0' && lx->s[i] <= '9') || lx->s[i] == '_')) i++;
    if (i + 1 < lx->n && lx->s[i] == '.' && lx->s[i + 1] >= '0' && lx->s[i + 1] <= '9') {
        is_float = true;
        i++;
        while (i < lx->n && lx->s[i] >= '0' && lx->s[i] <= '9') i++;
    }
    if (i < lx->n && (lx->s[i] == 'e' || lx->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < lx->n && (lx->s[j] == '+' || lx->s[j] == '-')) j++;
        if (j < lx->n && lx->s[j] >= '0' && lx->s[j] <= '9') {
            is_float = true;
            i = j;
            while (i < lx->n && lx->s[i] >= '0' && lx->s[i] <= '9') i++;
        }
    }
    char buf[64];
    size_t k = 0;
    for (size_t p = start; p < i && k < sizeof buf; p++)
        if (lx->s[p] != '_') buf[k++] = lx->s[p];
    /* no silent change of value: a literal past int64 (Python's ints have no bound) or too
     * long for the buffer is an error */
    if (k == sizeof buf) {
        snprintf(lx->err, sizeof lx->err, "line %d: number literal too long", lx->line);
        return false;
    }
    buf[k] = 0;
    jj_token t = {.kind = is_float ? JT_FLOAT : JT_INT};
    errno = 0;
    if (is_float)
        t.f = strtod(buf, NULL);
    else
        t.i = strtoll(buf, NULL, 10);
    if (!is_float && errno == ERANGE) {
        snprintf(lx->err, sizeof lx->err, "line %d: integer literal %.30s out of range", lx->line,
                 buf);
        return false;
    }
    lx->pos = i;
    return push(lx, t);
}

static const char *const k_ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                    "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                    "]",  "{",  "}",  ",",  ".",  ":",  "|"};

/* Tokens inside a tag up to its end marker ("}}" or "%}"); sets *strip_after for "-}}". */
static bool lex_tag(lexer *lx, char close, bool *strip_after, bool *keep_after) {
    int depth = 0;
    for (;;) {
        while (lx->pos < lx->n && is_ws(lx->s[lx->pos])) lx->line += lx->s[lx->pos++] == '\n';
        if (lx->pos >= lx->n) {
            snprintf(lx->err, sizeof lx->err, "line %d: unclosed tag", lx->line);
            return false;
        }
        const char *p = lx->s + lx->pos;
        size_t left = lx->n - lx->pos;
        if (depth == 0) {
            if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == close && p[2] == '}') {
                *strip_after = p[0] == '-';
                *keep_after = p[0] == '+';
                lx->pos += 3;
                return true;
            }
            if (left >= 2 && p[0] == close && p[1] == '}') {
                lx->pos += 2;
                return true;
            }
        }
        char c = p[0];
        if (c == '"' || c == '\'') {
            if (!lex_string(lx, c)) return false;
            continue;
        }
        if (c >= '0' && c <= '9') {
            if (!lex_number(lx)) return false;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t i = 1;
            while (i < left && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
                                (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
                i++;
            char *t = pl_arena_strdup(lx->arena, p, i);
            if (!t || !push(lx, (jj_token){.kind = JT_NAME, .text = t, .len = i})) return false;
            lx->pos += i;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof k_ops / sizeof k_ops[0]; k++) {
            size_t ol = strlen(k_ops[k]);
            if (left >= ol && memcmp(p, k_ops[k], ol) == 0) break;
        }
        if (k == sizeof k_ops / sizeof k_ops[0]) {
            snprintf(lx->err, sizeof lx->err, "line %d: unexpected character '%c'", lx->line,
                     c >= 32 && c < 127 ? c : '?');
            return false;
        }
        if (c == '(' || c == '[' || c == '{') depth++;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
        if (!push(lx, (jj_token){.kind = JT_OP, .text = k_ops[k], .len = strlen(k_ops[k])}))
            return false;
        lx->pos += strlen(k_ops[k]);
    }
}

/* If the block tag at pos is {% raw %}, return the position after it (else 0). */
static size_t raw_tag_end(const lexer *lx, size_t pos, const char *word) {
    size_t i = pos + 2;
    if (i < lx->n && (lx->s[i] == '-' || lx->s[i] == '+')) i++;
    while (i < lx->n && is_ws(lx->s[i])) i++;
    size_t wl = strlen(word);
    if (lx->n - i < wl || memcmp(lx->s + i, word, wl) != 0) return 0;
    i += wl;
    while (i < lx->n && is_ws(lx->s[i])) i++;
    if (i < lx->n && (lx->s[i] == '-' || lx->s[i] == '+')) i++;
    if (lx->n - i >= 2 && lx->s[i] == '%' && lx->s[i + 1] == '}') return i + 2;
    return 0;
}

static bool lex_all(lexer *lx) {
    bool strip_next = false, line_start = true;
    while (lx->pos < lx->n) {
        size_t tag = next_tag(lx, lx->pos);
        size_t ts = lx->pos, te = tag;
        if (strip_next)
            while (ts < te && is_ws(lx->s[ts])) lx->line += lx->s[ts++] == '\n';
        strip_next = false;
        char kind = tag < lx->n ? lx->s[tag + 1] : 0;
        char mod = tag + 2 < lx->n ? lx->s[tag + 2] : 0;
        if (kind && mod == '-') {
            while (te > ts && is_ws(lx->s[te - 1])) te--;
        } else if ((kind == '%' || kind == '#') && mod != '+') {
            /* lstrip_blocks: only spaces and tabs between the line start and the tag */
            size_t ls = te;
            while (ls > ts && (lx->s[ls - 1] == ' ' || lx->s[ls - 1] == '\t')) ls--;
            bool at_line_start = ls > ts ? lx->s[ls - 1] == '\n' : (line_start || ts == 0);
            if (at_line_start) te = ls;
        }
        if (!push_text(lx, lx->s + ts, te - ts)) return false;
        lx->line += count_lines(lx->s + te, tag - te);
        if (tag >= lx->n) break;
        lx->pos = tag + 2;
        if (mod == '-' || mod == '+') lx->pos++;
        bool strip_after = false, keep_after = false;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = lx->pos; i + 1 < lx->n && !e; i++)
                if (lx->s[i] == '#' && lx->s[i + 1] == '}') e = lx->s + i;
            if (!e) {
                snprintf(lx->err, sizeof lx->err, "line %d: unclosed comment", lx->line);
                return false;
            }
            size_t end = (size_t)(e - lx->s);
            strip_after = end > lx->pos && lx->s[end - 1] == '-';
            keep_after = end > lx->pos && lx->s[end - 1] == '+';
            lx->line += count_lines(lx->s + lx->pos, end - lx->pos);
            lx->pos = end + 2;
        } else if (kind == '%' && raw_tag_end(lx, tag, "raw")) {
            size_t body = raw_tag_end(lx, tag, "raw"), i = body, end = 0;
            for (; i + 1 < lx->n; i++)
                if (lx->s[i] == '{' && lx->s[i + 1] == '%' && (end = raw_tag_end(lx, i, "endraw")))
                    break;
            if (!end) {
                snprintf(lx->err, sizeof lx->err, "line %d: {%% raw %%} without endraw", lx->line);
                return false;
            }
            if (!push_text(lx, lx->s + body, i - body)) return false;
            lx->pos = end;
        } else {
            bool var = kind == '{';
            if (!push(lx, (jj_token){.kind = var ? JT_VAR_BEGIN : JT_BLOCK_BEGIN})) return false;
            if (!lex_tag(lx, var ? '}' : '%', &strip_after, &keep_after)) return false;
            if (!push(lx, (jj_token){.kind = var ? JT_VAR_END : JT_BLOCK_END})) return false;
            if (var) keep_after = true; /* trim_blocks is for blocks only */
        }
        line_start = false;
        if (strip_after) {
            strip_next = true;
        } else if (!keep_after && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
            lx->pos++; /* trim_blocks */
            lx->line++;
            line_start = true;
        }
    }
    return push(lx, (jj_token){.kind = JT_EOF});
}

pl_status jj_lex(const char *src, size_t len, pl_arena *arena, jj_tokens *out) {
    /* newlines normalised, one trailing newline dropped (keep_trailing_newline=False) */
    char *s = malloc(len + 1);
    if (!s) return pl_fail(PL_ERR_NOMEM, "template: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    lexer lx = {.s = s, .n = n, .line = 1, .arena = arena, .out = out};
    bool ok = lex_all(&lx);
    free(s);
    if (!ok) return pl_fail(PL_ERR_FORMAT, "template: %s", lx.err);
    return PL_OK;
}
