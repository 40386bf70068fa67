/* plan.c - deal a model's layers to the members of a room (see plan.h for the rules). */
#include "plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"

/* Text the room hears from a member (its id, its backend), for a message or the table:
 * bytes outside printable ASCII are shown as '?' (no terminal escapes), at most 48. */
static const char *printable(const char *in, char *buf, size_t cap) {
    size_t n = 0;
    for (; in[n] && n < 48 && n + 1 < cap; n++)
        buf[n] = in[n] >= 0x20 && in[n] < 0x7f ? in[n] : '?';
    buf[n] = 0;
    return buf;
}

static const char *member_name(const pl_plan_member *m, int i, char *buf, size_t cap) {
    if (m->id && *m->id) return printable(m->id, buf, cap);
    snprintf(buf, cap, "#%d", i);
    return buf;
}

static uint64_t layer_cost(const pl_plan_model *md, int l) {
    return md->layer_bytes[l] + (md->state_bytes ? md->state_bytes[l] : 0);
}

/* Bytes of layers [first, last) with their state, plus the ends for the host. */
static uint64_t range_bytes(const pl_plan_model *md, const pl_plan_member *m, int first, int last) {
    uint64_t b = m->host ? md->ends_bytes : 0;
    for (int l = first; l < last; l++) b += layer_cost(md, l);
    return b;
}

static pl_status check_input(const pl_plan_model *md, const pl_plan_member *mb, int n) {
    char nb[64];
    if (!md || !mb || n < 1) return pl_fail(PL_ERR_ARG, "plan: a room needs at least one member");
    if (n > PL_PLAN_MAX_MEMBERS)
        return pl_fail(PL_ERR_ARG, "plan: %d members, at most %d", n, PL_PLAN_MAX_MEMBERS);
    if (md->n_layer < 1 || !md->layer_bytes)
        return pl_fail(PL_ERR_ARG, "plan: the model has no layers");
    int hosts = 0;
    for (int i = 0; i < n; i++) {
        hosts += mb[i].host;
        if (!(mb[i].speed > 0) || !isfinite(mb[i].speed))
            return pl_fail(PL_ERR_ARG, "plan: member %s reports speed %g, not a positive number",
                           member_name(&mb[i], i, nb, sizeof nb), mb[i].speed);
    }
    if (hosts != 1)
        return pl_fail(PL_ERR_ARG, "plan: %d members are the host, need exactly 1", hosts);
    /* Sizes far past any memory would overflow the sums below. */
    for (int l = 0; l < md->n_layer; l++)
        if (md->layer_bytes[l] > (UINT64_C(1) << 50) ||
            (md->state_bytes && md->state_bytes[l] > (UINT64_C(1) << 50)))
            return pl_fail(PL_ERR_ARG, "plan: layer %d reports more than 1 PiB", l);
    if (md->ends_bytes > (UINT64_C(1) << 50))
        return pl_fail(PL_ERR_ARG, "plan: the embedding and head report more than 1 PiB");
    return PL_OK;
}

/* Forced ranges: they alone cover [0, n_layer), in order, each within its memory. */
static pl_status plan_forced(const pl_plan_model *md, const pl_plan_member *mb, int n,
                             pl_plan_range *out) {
    char nb[64], nb2[64];
    int order[PL_PLAN_MAX_MEMBERS], k = 0;
    for (int i = 0; i < n; i++) {
        out[i] = (pl_plan_range){0, 0, mb[i].host ? md->ends_bytes : 0};
        if (!mb[i].forced) continue;
        const char *nm = member_name(&mb[i], i, nb, sizeof nb);
        if (mb[i].first < 0 || mb[i].first >= mb[i].last || mb[i].last > md->n_layer)
            return pl_fail(PL_ERR_ARG,
                           "plan: member %s asks for layers [%d, %d), outside the "
                           "model's [0, %d) or empty",
                           nm, mb[i].first, mb[i].last, md->n_layer);
        int j = k++;
        while (j > 0 && mb[order[j - 1]].first > mb[i].first) order[j] = order[j - 1], j--;
        order[j] = i;
    }
    int pos = 0;
    for (int j = 0; j < k; j++) {
        const pl_plan_member *m = &mb[order[j]];
        if (m->first < pos)
            return pl_fail(PL_ERR_ARG, "plan: members %s and %s both ask for layer %d",
                           member_name(&mb[order[j - 1]], order[j - 1], nb2, sizeof nb2),
                           member_name(m, order[j], nb, sizeof nb), m->first);
        if (m->first > pos)
            return pl_fail(PL_ERR_ARG, "plan: no member holds layers [%d, %d)", pos, m->first);
        pos = m->last;
    }
    if (pos < md->n_layer)
        return pl_fail(PL_ERR_ARG, "plan: no member holds layers [%d, %d)", pos, md->n_layer);
    for (int j = 0; j < k; j++) {
        int i = order[j];
        uint64_t b = range_bytes(md, &mb[i], mb[i].first, mb[i].last);
        if (b > mb[i].mem_bytes)
            return pl_fail(PL_ERR_ARG,
                           "plan: member %s lends %llu bytes, its layers [%d, %d) "
                           "need %llu",
                           member_name(&mb[i], i, nb, sizeof nb),
                           (unsigned long long)mb[i].mem_bytes, mb[i].first, mb[i].last,
                           (unsigned long long)b);
        out[i] = (pl_plan_range){mb[i].first, mb[i].last, b};
    }
    return PL_OK;
}

pl_status pl_plan_make(const pl_plan_model *md, const pl_plan_member *mb, int n,
                       pl_plan_range *out) {
    pl_status s = check_input(md, mb, n);
    if (s) return s;
    pl_plan_range res[PL_PLAN_MAX_MEMBERS];
    bool any_forced = false;
    for (int i = 0; i < n; i++) any_forced |= mb[i].forced;
    if (any_forced) {
        if ((s = plan_forced(md, mb, n, res))) return s;
        memcpy(out, res, sizeof *out * (size_t)n);
        return PL_OK;
    }
    int L = md->n_layer;
    uint64_t cmax = 0, need = md->ends_bytes, lent = 0;
    for (int l = 0; l < L; l++) {
        uint64_t c = layer_cost(md, l);
        need += c;
        if (c > cmax) cmax = c;
    }
    /* Capacity of each member in layers, each counted at the largest layer's cost. */
    int cap[PL_PLAN_MAX_MEMBERS], total_cap = 0, host = 0;
    for (int i = 0; i < n; i++) {
        lent += mb[i].mem_bytes;
        uint64_t avail = mb[i].mem_bytes;
        if (mb[i].host) {
            host = i;
            avail = avail >= md->ends_bytes ? avail - md->ends_bytes : 0;
        }
        uint64_t c = cmax ? avail / cmax : (uint64_t)L;
        cap[i] = c > (uint64_t)L ? L : (int)c;
        total_cap += cap[i];
    }
    if (lent < need)
        return pl_fail(PL_ERR_ARG, "plan: the room lends %llu bytes, the model needs %llu",
                       (unsigned long long)lent, (unsigned long long)need);
    if (mb[host].mem_bytes < md->ends_bytes)
        return pl_fail(PL_ERR_ARG,
                       "plan: the host lends %llu bytes, the embedding and head "
                       "need %llu",
                       (unsigned long long)mb[host].mem_bytes, (unsigned long long)md->ends_bytes);
    if (total_cap < L)
        return pl_fail(PL_ERR_ARG,
                       "plan: the room's memory holds %d of the model's %d layers "
                       "(%llu bytes each at most)",
                       total_cap, L, (unsigned long long)cmax);
    /* Order by speed, fastest first; ties keep the order given. */
    int order[PL_PLAN_MAX_MEMBERS];
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && mb[order[j - 1]].speed < mb[i].speed) order[j] = order[j - 1], j--;
        order[j] = i;
    }
    /* Shares by speed; a member capped by its memory gets its capacity and the rest is
     * shared again among the others (at most n rounds: each caps one member or ends). */
    double share[PL_PLAN_MAX_MEMBERS];
    bool capped[PL_PLAN_MAX_MEMBERS] = {false};
    int left = L;
    for (int round = 0; round <= n; round++) {
        double sp = 0;
        for (int i = 0; i < n; i++)
            if (!capped[i]) sp += mb[i].speed;
        bool again = false;
        for (int i = 0; i < n; i++) {
            if (capped[i]) continue;
            share[i] = sp > 0 ? left * (mb[i].speed / sp) : 0;
            if (share[i] > cap[i]) {
                capped[i] = again = true;
                share[i] = cap[i];
                left -= cap[i];
            }
        }
        if (!again) break;
    }
    /* Largest remainder: floors, then one more layer to the largest fractions. */
    int count[PL_PLAN_MAX_MEMBERS], dealt = 0;
    for (int i = 0; i < n; i++) {
        count[i] = (int)floor(share[i] + 1e-9);
        if (count[i] > cap[i]) count[i] = cap[i];
        dealt += count[i];
    }
    while (dealt < L) {
        int best = -1;
        double bf = -1;
        for (int j = 0; j < n; j++) {
            int i = order[j];
            double f = share[i] - count[i];
            if (count[i] < cap[i] && f > bf) best = i, bf = f;
        }
        if (best < 0) break; /* cannot happen: total_cap >= L */
        count[best]++;
        dealt++;
    }
    int pos = 0;
    for (int j = 0; j < n; j++) {
        int i = order[j];
        res[i] = (pl_plan_range){pos, pos + count[i], range_bytes(md, &mb[i], pos, pos + count[i])};
        if (!count[i]) res[i].first = res[i].last = 0;
        pos += count[i];
    }
    if (pos != L) return pl_fail(PL_ERR, "plan: dealt %d of %d layers", pos, L);
    memcpy(out, res, sizeof *out * (size_t)n);
    return PL_OK;
}

static const char *mib(uint64_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.1f MiB", (double)b / (1 << 20));
    return buf;
}

char *pl_plan_format(const pl_plan_member *mb, const pl_plan_range *plan, int n) {
    pl_strbuf b = {0};
    char nb[64], be[64], used[32], lent[32];
    pl_sb_printf(&b, "%-24s %-8s %-12s %s\n", "device", "backend", "layers", "memory");
    for (int i = 0; i < n; i++) {
        char layers[40];
        if (plan[i].first < plan[i].last)
            snprintf(layers, sizeof layers, "%d-%d", plan[i].first, plan[i].last - 1);
        else
            snprintf(layers, sizeof layers, "%s", mb[i].host ? "ends only" : "idle");
        pl_sb_printf(&b, "%-24.64s %-8.16s %-12s %s of %s%s\n",
                     member_name(&mb[i], i, nb, sizeof nb),
                     printable(mb[i].backend ? mb[i].backend : "?", be, sizeof be), layers,
                     mib(plan[i].bytes, used, sizeof used), mib(mb[i].mem_bytes, lent, sizeof lent),
                     mb[i].host ? " (host)" : "");
    }
    return pl_sb_take(&b, NULL);
}
