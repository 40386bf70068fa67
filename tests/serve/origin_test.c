/* origin_test.c - serve/origin.c: loopback names; a loopback server refuses a Host that names
 * another machine (DNS rebinding), any server refuses a web page of another origin unless
 * it is allowed (listed, or "*"), and takes its own chat page and clients without Origin. */
#include "test.h"

#include "serve/origin.h"

static srv_origin check(const char *listen, const char *allow, const char *host,
                        const char *origin) {
    char err[400] = "";
    srv_origin v = srv_origin_check(listen, allow, host, origin, err, sizeof err);
    CHECK((v == SRV_ORIGIN_REFUSED) == (err[0] != 0) && !strchr(err, '\n'), "'%s'", err);
    return v;
}

static void run_tests(void) {
    const char *yes[] = {"localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:80", "127.1.2.3",
                         "::1",       "[::1]",          "[::1]:8080"};
    const char *no[] = {"evil.example",
                        "evil.example:8080",
                        "127.0.0.1.evil.example",
                        "10.0.0.1",
                        "[::2]:8080",
                        "localhost.evil.example",
                        "0.0.0.0",
                        ""};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK(srv_is_loopback(yes[i]), "%s: not loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!srv_is_loopback(no[i]), "%s: loopback", no[i]);

    /* programs: no Origin; the chat page: its own origin */
    CHECK(check("127.0.0.1", NULL, "127.0.0.1:8080", NULL) == SRV_ORIGIN_SAME, "no Origin");
    CHECK(check("127.0.0.1", NULL, NULL, NULL) == SRV_ORIGIN_SAME, "HTTP/1.0, no Host");
    CHECK(check("127.0.0.1", NULL, "127.0.0.1:8080", "http://127.0.0.1:8080") == SRV_ORIGIN_SAME,
          "own page");
    CHECK(check("localhost", NULL, "localhost:8080", "http://LOCALHOST:8080") == SRV_ORIGIN_SAME,
          "own page, name in capitals");
    /* a rebinding page: its name resolves here, its Host says so */
    CHECK(check("127.0.0.1", NULL, "evil.example:8080", NULL) == SRV_ORIGIN_REFUSED,
          "rebinding, no Origin");
    CHECK(check("127.0.0.1", NULL, "evil.example:8080", "http://evil.example:8080") ==
              SRV_ORIGIN_REFUSED,
          "rebinding page as its own origin");
    /* a server for the network takes any Host */
    CHECK(check("0.0.0.0", NULL, "my-box.lan:8080", NULL) == SRV_ORIGIN_SAME, "network Host");
    CHECK(check("0.0.0.0", NULL, "my-box.lan:8080", "http://my-box.lan:8080") == SRV_ORIGIN_SAME,
          "network, own page");
    /* another site's page */
    CHECK(check("127.0.0.1", NULL, "127.0.0.1:8080", "http://evil.example") == SRV_ORIGIN_REFUSED,
          "foreign page");
    CHECK(check("127.0.0.1", NULL, "127.0.0.1:8080", "null") == SRV_ORIGIN_REFUSED,
          "sandboxed page");
    CHECK(check("127.0.0.1", NULL, "127.0.0.1:8080", "https://127.0.0.1:8080") ==
              SRV_ORIGIN_REFUSED,
          "another scheme");
    CHECK(check("0.0.0.0", NULL, "my-box.lan:8080", "http://evil.example") == SRV_ORIGIN_REFUSED,
          "foreign page, network server");
    /* allowed ones */
    const char *allow = "http://localhost:3000, https://app.example";
    CHECK(check("127.0.0.1", allow, "127.0.0.1:8080", "http://localhost:3000") ==
              SRV_ORIGIN_ALLOWED,
          "listed first");
    CHECK(check("127.0.0.1", allow, "127.0.0.1:8080", "https://APP.example") == SRV_ORIGIN_ALLOWED,
          "listed second, other case");
    CHECK(check("127.0.0.1", allow, "127.0.0.1:8080", "http://localhost:30") == SRV_ORIGIN_REFUSED,
          "a prefix of a listed one");
    CHECK(check("127.0.0.1", allow, "127.0.0.1:8080", "https://app.example.evil") ==
              SRV_ORIGIN_REFUSED,
          "a listed one as prefix");
    CHECK(check("127.0.0.1", "*", "127.0.0.1:8080", "http://anything.example") ==
              SRV_ORIGIN_ALLOWED,
          "*");
    /* an allowed origin does not open a loopback server to other Host names */
    CHECK(check("127.0.0.1", "*", "evil.example", "http://evil.example") == SRV_ORIGIN_REFUSED,
          "* and a rebinding Host");
}
