/* tok_hostile_test.c - vocabularies with a token renamed or missing, written as copies of
 * the fixtures' tokenizer metadata with one edit: a tokenizer must never emit an id outside
 * the vocabulary nor silently drop text. A byte without a token falls back to the unknown
 * token; without one either, encoding a text that needs it fails with one clear line.
 * The pooled command gets the same files: `tokenize --pieces` and `template --ids` must
 * exit non-zero with one line, and a token longer than any fixed buffer comes out whole. */
#include "tok_test_util.h"

typedef struct {
    int32_t rename;     /* token whose text becomes "<renamed>", -1 none */
    int32_t long_token; /* token whose text becomes 300 bytes, user-defined, -1 none */
    int32_t unk;        /* tokenizer.ggml.unknown_token_id to set; -2 keep, -1 out of range */
} vocab_edit;

#define LONG_LEN 300

/* The tokenizer.* keys of shared/src with the edit, as a GGUF in the test folder. */
static const char *write_vocab(const char *src, const char *name, vocab_edit e) {
    static char path[8][512];
    static int slot;
    char *p = path[slot++ & 7];
    snprintf(p, sizeof path[0], "%s/%s.gguf", test_tmpdir(), name);
    pl_gguf *s = NULL;
    CHECK(pl_gguf_open(test_shared(src), &s) == PL_OK, "%s", pl_last_error());
    if (!s) return p;
    pl_gguf *g = pl_gguf_new();
    static char long_text[LONG_LEN + 1];
    memset(long_text, 'q', LONG_LEN);
    uint32_t n_vocab = 0;
    for (int64_t i = 0; i < pl_gguf_kv_count(s); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(s, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (strncmp(key, "tokenizer.", 10) && strcmp(key, "general.architecture")) continue;
        const pl_gguf_value *v = &kv->value;
        if (!strcmp(key, "tokenizer.ggml.tokens")) {
            n_vocab = (uint32_t)v->arr.count;
            const char **strs = malloc(n_vocab * sizeof *strs);
            char **own = calloc(n_vocab, sizeof *own);
            for (uint32_t k = 0; k < n_vocab; k++) {
                own[k] = malloc(v->arr.items[k].str.len + 1);
                memcpy(own[k], v->arr.items[k].str.ptr, v->arr.items[k].str.len);
                own[k][v->arr.items[k].str.len] = 0;
                strs[k] = own[k];
            }
            if (e.rename >= 0) strs[e.rename] = "<renamed>";
            if (e.long_token >= 0) strs[e.long_token] = long_text;
            pl_gguf_set_str_arr(g, key, strs, n_vocab);
            for (uint32_t k = 0; k < n_vocab; k++) free(own[k]);
            free(own), free(strs);
        } else if (!strcmp(key, "tokenizer.ggml.token_type") && e.long_token >= 0) {
            size_t es = pl_gguf_type_size(v->arr.elem_type);
            uint8_t *d = malloc(v->arr.count * es);
            memcpy(d, v->arr.data, v->arr.count * es);
            int32_t ud = 4; /* user-defined: matched in text as a whole */
            memcpy(d + (size_t)e.long_token * es, &ud, es);
            pl_gguf_set_arr(g, key, v->arr.elem_type, d, v->arr.count);
            free(d);
        } else {
            pl_gguf_set_value(g, key, v);
        }
    }
    if (e.unk == -1)
        pl_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", n_vocab + 1000);
    else if (e.unk >= 0)
        pl_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t)e.unk);
    CHECK(pl_gguf_write_file(g, p) == PL_OK, "%s", pl_last_error());
    pl_gguf_free(g);
    pl_gguf_free(s);
    return p;
}

static pl_tokenizer *load(const char *path, pl_status *st) {
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    *st = pl_gguf_open(path, &g);
    if (*st == PL_OK) *st = pl_tok_load(g, &t);
    pl_gguf_free(g);
    return t;
}

/* The vocabulary loads; encoding text fails with a message containing want, or (want NULL)
 * gives ids of the vocabulary only and (round_trip) the text back whole. */
static void check_vocab(const char *path, const char *text, bool round_trip, const char *want) {
    pl_status st;
    pl_tokenizer *t = load(path, &st);
    CHECK(st == PL_OK, "%s: %s", path, pl_last_error());
    if (!t) return;
    int32_t *ids = NULL;
    int64_t n = 0;
    st = pl_tok_encode(t, text, strlen(text), true, true, &ids, &n);
    if (want) {
        CHECK(st != PL_OK && strstr(pl_last_error(), want) && !strchr(pl_last_error(), '\n'),
              "%s: want an error with '%s', got '%s'", path, want,
              st ? pl_last_error() : "success");
        free(ids);
        pl_tok_free(t);
        return;
    }
    CHECK(st == PL_OK, "%s", pl_last_error());
    bool in_range = true;
    for (int64_t i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < pl_tok_n_vocab(t);
    CHECK(in_range && n > 0, "%s: ids outside the vocabulary", path);
    if (in_range && round_trip) {
        char *back = NULL;
        CHECK(pl_tok_decode(t, ids, n, false, &back, NULL) == PL_OK, "%s", pl_last_error());
        CHECK(back && !strcmp(back, text), "%s: '%s' came back as '%s'", path, text,
              back ? back : "");
        free(back);
    }
    free(ids);
    pl_tok_free(t);
}

/* pooled ARGS -m path fails with one line containing want. */
static void check_command(const char *args, const char *path, const char *want) {
    char line[2048];
    snprintf(line, sizeof line, "%s -m '%s'", args, path);
    check_command_fails(line, want);
}

static void test_missing_bytes(void) {
    const char *qwen = "fixtures/hf/qwen3/qwen3-q8_0.gguf";
    /* byte-level BPE: token 220 is the space (U+0120); merges still name it */
    const char *p = write_vocab(qwen, "qwen-no-space", (vocab_edit){220, -1, -2});
    check_vocab(p, "hi there ", true, "byte 0x20");
    char msgs[600];
    snprintf(msgs, sizeof msgs, "%s/msgs.json", test_tmpdir());
    FILE *f = fopen(msgs, "w");
    if (f) fputs("[{\"role\":\"user\",\"content\":\"hi \"}]", f), fclose(f);
    check_command("tokenize --pieces 'hi '", p, "0x20");
    check_command("tokenize 'hi '", p, "0x20");
    char args[800];
    snprintf(args, sizeof args, "template --ids --messages '%s'", msgs);
    check_command(args, p, "0x20");
    /* with an unknown token the byte falls back to it: ids stay in the vocabulary */
    p = write_vocab(qwen, "qwen-no-space-unk", (vocab_edit){220, -1, 0});
    check_vocab(p, "hi there ", false, NULL);

    /* SentencePiece: <0xF0> gone and no unknown token: an emoji has no token of its own */
    const char *spm = "fixtures/vocab/ggml-vocab-llama-spm.gguf";
    pl_status st;
    pl_tokenizer *t = load(test_shared(spm), &st);
    int32_t *ids = NULL;
    int64_t n = 0;
    int32_t f0 = -1;
    if (t && pl_tok_encode(t, "\xf0\x9f\xa6\x99", 4, false, false, &ids, &n) == PL_OK)
        for (int64_t i = 0; i < n; i++) { /* the emoji is spelt with byte tokens */
            char b[8];
            if (pl_tok_piece(t, ids[i], false, b, sizeof b) == 1 && b[0] == '\xf0') f0 = ids[i];
        }
    CHECK(f0 > 0, "the llama-spm vocabulary should spell U+1F999 with byte tokens");
    free(ids);
    pl_tok_free(t);
    if (f0 > 0) {
        p = write_vocab(spm, "spm-no-f0", (vocab_edit){f0, -1, -1});
        check_vocab(p, "a \xf0\x9f\xa6\x99", true, "byte 0xF0");
        p = write_vocab(spm, "spm-no-f0-unk", (vocab_edit){f0, -1, -2});
        check_vocab(p, "a \xf0\x9f\xa6\x99", false, NULL);
    }

    /* WordPiece: a word it cannot cover needs [UNK] */
    p = write_vocab("fixtures/vocab/ggml-vocab-bert-bge.gguf", "bert-no-unk",
                    (vocab_edit){-1, -1, -1});
    check_vocab(p, "hello \xe2\x98\x83", false, "no unknown token");
    /* a text it can cover is fine */
    check_vocab(p, "hello world", false, NULL);
}

/* A token longer than the command's old 256-byte buffer is printed whole by --pieces. */
static void test_long_piece(void) {
    const char *p =
        write_vocab("fixtures/hf/qwen3/qwen3-q8_0.gguf", "qwen-long", (vocab_edit){-1, 1000, -2});
    char cmd[2048], out_path[600];
    snprintf(out_path, sizeof out_path, "%s/pieces.txt", test_tmpdir());
    char text[LONG_LEN + 1];
    memset(text, 'q', LONG_LEN);
    text[LONG_LEN] = 0;
    snprintf(cmd, sizeof cmd, "%s tokenize --no-bos --pieces -m '%s' '%s' >'%s' 2>&1",
             test_pooled_bin(), p, text, out_path);
    int st = system(cmd);
    char want[LONG_LEN + 32], got[4096] = {0};
    snprintf(want, sizeof want, "1000\t\"%s\"\n", text);
    FILE *f = fopen(out_path, "r");
    size_t got_n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    if (f) fclose(f);
    got[got_n] = 0;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strcmp(got, want), "--pieces gave: %.400s",
          got);

    pl_status s;
    pl_tokenizer *t = load(p, &s);
    CHECK(t != NULL, "%s", pl_last_error());
    if (!t) return;
    char *piece = NULL;
    size_t len = 0;
    CHECK(pl_tok_piece_str(t, 1000, true, &piece, &len) == PL_OK && len == LONG_LEN &&
              !memcmp(piece, text, LONG_LEN),
          "pl_tok_piece_str of the long token");
    free(piece);
    CHECK(pl_tok_piece_str(t, pl_tok_n_vocab(t), true, &piece, &len) != PL_OK && !piece,
          "an id past the vocabulary is an error");
    CHECK(pl_tok_piece_str(t, -1, true, &piece, &len) != PL_OK && !piece, "id -1 is an error");
    pl_tok_free(t);
}

static void run_tests(void) {
    test_missing_bytes();
    test_long_piece();
}
