/* origin.c - the Host and Origin checks of origin.h. */
#include "origin.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* name without its ":port" (and the brackets of an IPv6 literal) into out. */
static void bare_host(const char *name, char *out, size_t cap) {
    const char *end = NULL;
    if (name[0] == '[') { /* [::1]:8080 */
        name++;
        end = strchr(name, ']');
    } else if (strchr(name, ':') == strrchr(name, ':')) { /* one colon at most: host:port */
        end = strchr(name, ':');
    }
    size_t n = end ? (size_t)(end - name) : strlen(name);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), name);
}

bool srv_is_loopback(const char *name) {
    char h[256];
    bare_host(name, h, sizeof h);
    if (!strcasecmp(h, "localhost") || !strcmp(h, "::1")) return true;
    if (strncmp(h, "127.", 4)) return false;
    for (const char *p = h + 4; *p; p++) /* 127.x.y.z: digits and dots only */
        if ((*p < '0' || *p > '9') && *p != '.') return false;
    return true;
}

/* Whether origin is one of the comma-separated origins of list ("*": any). */
static bool listed(const char *list, const char *origin) {
    size_t n = strlen(origin);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        size_t len = (size_t)(t - p);
        if ((len == 1 && *p == '*') || (len == n && len && !strncasecmp(p, origin, n))) return true;
        p = e;
    }
    return false;
}

/* At most 100 bytes of a header for an error line, control bytes as '?'. */
static const char *shown(const char *v, char *buf, size_t cap) {
    size_t n = 0;
    for (; v[n] && n < 100 && n + 1 < cap; n++)
        buf[n] = (unsigned char)v[n] < 0x20 || v[n] == 0x7f ? '?' : v[n];
    buf[n] = 0;
    return buf;
}

srv_origin srv_origin_check(const char *listen_host, const char *allow, const char *host,
                            const char *origin, char *err, size_t cap) {
    char buf[128];
    if (host && srv_is_loopback(listen_host) && !srv_is_loopback(host)) {
        snprintf(err, cap,
                 "the Host header '%s' is not this server's: it listens on loopback only "
                 "(a web page's DNS name pointed here?)",
                 shown(host, buf, sizeof buf));
        return SRV_ORIGIN_REFUSED;
    }
    if (!origin) return SRV_ORIGIN_SAME;
    if (host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host))
        return SRV_ORIGIN_SAME;
    if (allow && listed(allow, origin)) return SRV_ORIGIN_ALLOWED;
    snprintf(err, cap,
             "requests from web pages of other origins are refused (Origin: %s); the "
             "server allows one with --allow-origin",
             shown(origin, buf, sizeof buf));
    return SRV_ORIGIN_REFUSED;
}
