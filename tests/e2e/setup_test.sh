# setup_test.sh - tools/setup.sh derives the bookworm-backports entry from the Debian archive
# the machine's apt sources already name (deb822 or one-line format, keeping the keyring and
# options), and fails with one line when there is none: it never writes a mirror of its own.
. tests/e2e/lib.sh
a=$TMP/apt-deb822; mkdir -p "$a/sources.list.d"
cat >"$a/sources.list.d/debian.sources" <<'X'
Types: deb
URIs: http://mirror-a.invalid/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://mirror-a.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
X
out=$(APT_ETC=$a bash tools/setup.sh --backports-entry)
check "deb822: the archive's URI" grep -qx "URIs: http://mirror-a.invalid/debian" <<<"$out"
check "deb822: the backports suite" grep -qx "Suites: bookworm-backports" <<<"$out"
check "deb822: the same keyring" grep -qx "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" <<<"$out"
b=$TMP/apt-list; mkdir -p "$b/sources.list.d"
printf '%s\n' "# comment" "deb http://mirror-b.invalid/debian-security bookworm-security main" \
    "deb [arch=amd64 signed-by=/k.gpg] http://mirror-b.invalid/debian bookworm main contrib" >"$b/sources.list"
out=$(APT_ETC=$b bash tools/setup.sh --backports-entry)
check "one-line: options and URI kept" [ "$out" = "list:deb [arch=amd64 signed-by=/k.gpg] http://mirror-b.invalid/debian bookworm-backports main" ]
c=$TMP/apt-none; mkdir -p "$c/sources.list.d"
APT_ETC=$c bash tools/setup.sh --backports-entry >"$TMP/out" 2>&1
check "no bookworm archive: non-zero" [ $? -ne 0 ]
check "no bookworm archive: nothing printed" [ ! -s "$TMP/out" ]
finish
