/* plan_test.c - the room's plan (runtime/plan.h): proportional dealing by speed within
 * memory, idle members, forced ranges, and the refusals; expected ranges worked out by
 * hand from the rules in plan.h. */
#include "test.h"

#include "runtime/plan.h"

#define MB (UINT64_C(1) << 20)

static uint64_t lb[64], sb[64];

static pl_plan_model model(int L, uint64_t layer, uint64_t state, uint64_t ends) {
    for (int l = 0; l < L; l++) lb[l] = layer, sb[l] = state;
    return (pl_plan_model){.n_layer = L, .layer_bytes = lb, .state_bytes = sb, .ends_bytes = ends};
}

static pl_plan_member mem(const char *id, uint64_t bytes, double speed, bool host) {
    return (pl_plan_member){
        .id = id, .backend = "cpu", .mem_bytes = bytes, .speed = speed, .host = host};
}

/* Plan and compare with want[i] = {first, last}. */
static void expect(const char *what, const pl_plan_model *md, const pl_plan_member *m, int n,
                   const int (*want)[2]) {
    pl_plan_range r[8];
    pl_status s = pl_plan_make(md, m, n, r);
    CHECK(s == PL_OK, "%s: %s", what, pl_last_error());
    if (s) return;
    for (int i = 0; i < n; i++) {
        CHECK(r[i].first == want[i][0] && r[i].last == want[i][1],
              "%s: member %d got [%d, %d), want [%d, %d)", what, i, r[i].first, r[i].last,
              want[i][0], want[i][1]);
        CHECK(r[i].bytes <= m[i].mem_bytes, "%s: member %d needs %llu of %llu", what, i,
              (unsigned long long)r[i].bytes, (unsigned long long)m[i].mem_bytes);
    }
}

static void refused(const char *what, const pl_plan_model *md, const pl_plan_member *m, int n,
                    const char *want) {
    pl_plan_range r[8] = {{-7, -7, 7}};
    pl_status s = pl_plan_make(md, m, n, r);
    CHECK(s != PL_OK && strstr(pl_last_error(), want) && !strchr(pl_last_error(), '\n'),
          "%s: want an error with '%s', got '%s'", what, want, s ? pl_last_error() : "success");
    CHECK(r[0].first == -7, "%s: out written on failure", what);
}

static void test_dealing(void) {
    pl_plan_model md = model(12, 10 * MB, 2 * MB, 30 * MB);
    pl_plan_member one[1] = {mem("host", 1000 * MB, 5, true)};
    expect("one member", &md, one, 1, (const int[][2]){{0, 12}});
    /* equal speeds, plenty of memory: 4 layers each, in the order given */
    pl_plan_member three[3] = {mem("host", 1000 * MB, 1, true), mem("a", 1000 * MB, 1, false),
                               mem("b", 1000 * MB, 1, false)};
    expect("equal", &md, three, 3, (const int[][2]){{0, 4}, {4, 8}, {8, 12}});
    /* speeds 1:2:3 -> 2, 4, 6 layers; the fastest (b) first */
    three[1].speed = 2, three[2].speed = 3;
    expect("unequal", &md, three, 3, (const int[][2]){{10, 12}, {6, 10}, {0, 6}});
    /* b holds only 3 layers (36 MB for 3 x 12 MB): 9 left for 1:2 -> 3 and 6 */
    three[2].mem_bytes = 40 * MB;
    expect("memory-bound", &md, three, 3, (const int[][2]){{9, 12}, {3, 9}, {0, 3}});
    /* a member whose share rounds to 0 stays idle: speeds 100, 100, 1 -> 6, 6, 0.06 */
    pl_plan_member idle[3] = {mem("host", 1000 * MB, 100, true), mem("a", 1000 * MB, 100, false),
                              mem("slow", 1000 * MB, 1, false)};
    expect("idle", &md, idle, 3, (const int[][2]){{0, 6}, {6, 12}, {0, 0}});
    /* the host's memory holds only the ends: it deals nothing to itself */
    pl_plan_member ends[2] = {mem("host", 30 * MB, 10, true), mem("a", 1000 * MB, 1, false)};
    expect("host with the ends only", &md, ends, 2, (const int[][2]){{0, 0}, {0, 12}});
    /* largest remainder: 7 layers, speeds 1:1:1 -> 2.33 each: 3, 2, 2 (ties by order) */
    md.n_layer = 7;
    three[1].speed = three[2].speed = 1, three[2].mem_bytes = 1000 * MB;
    expect("remainders", &md, three, 3, (const int[][2]){{0, 3}, {3, 5}, {5, 7}});
    /* deterministic: the same input twice gives the same plan */
    pl_plan_range r1[8], r2[8];
    CHECK(!pl_plan_make(&md, three, 3, r1) && !pl_plan_make(&md, three, 3, r2) &&
              !memcmp(r1, r2, sizeof *r1 * 3),
          "same input, different plans");
    /* many members: 8 equal members for 12 layers: 2,2,2,2,1,1,1,1 */
    md.n_layer = 12;
    pl_plan_member many[8];
    for (int i = 0; i < 8; i++) many[i] = mem("m", 1000 * MB, 1, i == 0);
    expect("many", &md, many, 8,
           (const int[][2]){{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 9}, {9, 10}, {10, 11}, {11, 12}});
    /* memory used: the host's 4 layers + state + ends */
    CHECK(!pl_plan_make(&md, many, 8, r1), "%s", pl_last_error());
    CHECK(r1[0].bytes == 2 * 12 * MB + 30 * MB, "host bytes %llu", (unsigned long long)r1[0].bytes);
}

static void test_forced(void) {
    pl_plan_model md = model(6, 10 * MB, 0, 30 * MB);
    pl_plan_member m[3] = {mem("host", 1000 * MB, 1, true), mem("a", 1000 * MB, 9, false),
                           mem("b", 1000 * MB, 9, false)};
    m[1].forced = true, m[1].first = 0, m[1].last = 2;
    m[2].forced = true, m[2].first = 2, m[2].last = 6;
    expect("forced, host idle", &md, m, 3, (const int[][2]){{0, 0}, {0, 2}, {2, 6}});
    m[0].forced = true, m[0].first = 2, m[0].last = 3;
    m[2].first = 3;
    expect("forced with the host", &md, m, 3, (const int[][2]){{2, 3}, {0, 2}, {3, 6}});
    m[2].first = 2;
    refused("overlap", &md, m, 3, "both ask for layer 2");
    m[2].first = 4;
    refused("gap", &md, m, 3, "no member holds layers [3, 4)");
    m[2].first = 3, m[2].last = 5;
    refused("gap at the end", &md, m, 3, "no member holds layers [5, 6)");
    m[2].last = 7;
    refused("outside", &md, m, 3, "outside the model's [0, 6)");
    m[2].last = 6, m[2].mem_bytes = 25 * MB;
    refused("forced past memory", &md, m, 3, "need 31457280");
}

static void test_impossible(void) {
    pl_plan_model md = model(10, 10 * MB, 0, 30 * MB);
    pl_plan_member m[2] = {mem("host", 60 * MB, 1, true), mem("a", 50 * MB, 1, false)};
    refused("too small", &md, m, 2, "the room lends 115343360 bytes, the model needs 136314880");
    m[0].mem_bytes = 20 * MB, m[1].mem_bytes = 200 * MB;
    refused("host without room for the ends", &md, m, 2, "the embedding and head need");
    /* enough bytes in total, but not in whole layers: 35 + 35 + 65 of 10 MB layers */
    md.ends_bytes = 0;
    pl_plan_member f[3] = {mem("host", 35 * MB, 1, true), mem("a", 35 * MB, 1, false),
                           mem("b", 35 * MB, 1, false)};
    refused("fragmented", &md, f, 3, "holds 9 of the model's 10 layers");
    m[1].host = true;
    refused("two hosts", &md, m, 2, "2 members are the host");
    m[1].host = false, m[1].speed = NAN;
    refused("NaN speed", &md, m, 2, "not a positive number");
    m[1].speed = -1;
    refused("negative speed", &md, m, 2, "not a positive number");
    refused("no members", &md, m, 0, "at least one member");
    md.n_layer = 0;
    m[1].speed = 1;
    refused("no layers", &md, m, 2, "no layers");
}

static void test_format(void) {
    pl_plan_model md = model(4, 10 * MB, 0, 30 * MB);
    pl_plan_member m[3] = {mem("host", 50 * MB, 1, true), mem("w1", 100 * MB, 1, false),
                           mem("w2", 100 * MB, 0.001, false)};
    pl_plan_range r[3];
    CHECK(!pl_plan_make(&md, m, 3, r), "%s", pl_last_error());
    char *t = pl_plan_format(m, r, 3);
    CHECK(t && strstr(t, "device") && strstr(t, "backend") && strstr(t, "layers") &&
              strstr(t, "memory"),
          "table header: %s", t ? t : "");
    CHECK(t && strstr(t, "0-1") && strstr(t, "2-3") && strstr(t, "idle") &&
              strstr(t, "50.0 MiB of 50.0 MiB"),
          "table rows: %s", t ? t : "");
    free(t);
    /* ids come from the members: control bytes are not printed */
    m[1].id = "w1\033[2J";
    t = pl_plan_format(m, r, 3);
    CHECK(t && !strchr(t, '\033') && strstr(t, "w1?[2J"), "escape in the table: %s", t ? t : "");
    free(t);
}

static void run_tests(void) {
    test_dealing();
    test_forced();
    test_impossible();
    test_format();
}
