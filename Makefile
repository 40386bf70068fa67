# pooled - build with `make`, test with `make test` (see README).
#
# Sources are found by wildcard, so adding a file needs no edit here:
#   src/**/*.c           -> $(BUILD)/libpooled.a and libpooled.so (libc, libm, pthreads,
#                           dlopen only; -fPIC, only the pooled_* API of include/pooled.h
#                           exported; `make install PREFIX=/usr/local DESTDIR=`)
#   room/*.c             -> $(BUILD)/libpooled_room.a  (the room's link layer: NNG, libsodium)
#   serve/*.c            -> $(BUILD)/libpooled_serve.a (`pooled serve`'s HTTP: libmicrohttpd)
#   cmd/pooled/*.c       -> $(BUILD)/pooled
#   tests/**/*_test.c    -> $(BUILD)/tests/<name>  (one program each, run by tests/run.sh)
#   tests/fuzz/*_fuzz.c  -> $(BUILD)/fuzz/<name>   (clang libFuzzer, `make fuzz`)
#   src/**/*.c + some tests -> build/wasm*/tests/<name>.wasm (clang wasm32-wasi, `make wasm-test`)
# SAN=1 builds everything with ASan+UBSan (into build/san unless BUILD is given).

SHELL   := /bin/bash
CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build/san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT     ?= -O1
else
BUILD   ?= build
SANFLAGS =
OPT     ?= -O2
endif

CFLAGS  ?= $(OPT) -g
# -ffp-contract=off: the CPU kernels' bits rely on a * b + c never being fused (GCC's
# -std=c11 already means it; clang, and arm64 where FMA always exists, need it said)
CFLAGS  += -std=c11 -Wall -Wextra -D_GNU_SOURCE -pthread -ffp-contract=off $(SANFLAGS)
LDLIBS  += -lm -ldl -pthread

LIB_SRC  := $(shell find src -name '*.c' | sort)
ROOM_SRC := $(wildcard room/*.c)
ROOM_LIBS := -lnng -lsodium
SERVE_SRC := $(wildcard serve/*.c)
SERVE_LIBS := -lmicrohttpd
CMD_SRC  := $(wildcard cmd/pooled/*.c)
TEST_SRC := $(shell find tests -name '*_test.c' | sort)
FUZZ_SRC := $(wildcard tests/fuzz/*_fuzz.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
ROOM_OBJ := $(ROOM_SRC:%.c=$(BUILD)/obj/%.o)
SERVE_OBJ := $(SERVE_SRC:%.c=$(BUILD)/obj/%.o)
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(foreach t,$(TEST_SRC),$(BUILD)/tests/$(basename $(notdir $(t))))
FUZZ_BIN := $(foreach t,$(FUZZ_SRC),$(BUILD)/fuzz/$(basename $(notdir $(t))))

.PHONY: all test gpu-test check fuzz fuzz-run clean format install
all: $(BUILD)/pooled $(BUILD)/libpooled.so

# The library's objects serve the static and the shared library: position independent,
# and only what include/pooled.h marks POOLED_API is visible outside the .so.
LIB_XFLAGS := -fPIC -fvisibility=hidden
$(LIB_OBJ): XFLAGS := $(LIB_XFLAGS)
# rebuilt when those flags change (objects from before them would not link into a .so)
$(LIB_OBJ): $(BUILD)/obj/lib-flags
$(BUILD)/obj/lib-flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS) $(LIB_XFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LIB_XFLAGS)' >$@
FORCE:

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(XFLAGS) -MMD -MP -Isrc -Iinclude -c $< -o $@

$(BUILD)/libpooled.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library, versioned from include/pooled.h: libpooled.so.MAJOR.MINOR.PATCH with
# the soname libpooled.so.MAJOR, and the two links.
VERSION_PART = $(shell sed -n 's/^\#define POOLED_VERSION_$(1) \([0-9]*\)$$/\1/p' include/pooled.h)
SO_MAJOR := $(call VERSION_PART,MAJOR)
SO_VERSION := $(SO_MAJOR).$(call VERSION_PART,MINOR).$(call VERSION_PART,PATCH)
$(BUILD)/libpooled.so.$(SO_VERSION): $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libpooled.so.$(SO_MAJOR) -o $@ $^ $(LDLIBS)
$(BUILD)/libpooled.so: $(BUILD)/libpooled.so.$(SO_VERSION)
	ln -sf libpooled.so.$(SO_VERSION) $(BUILD)/libpooled.so.$(SO_MAJOR)
	ln -sf libpooled.so.$(SO_VERSION) $@

# make install [PREFIX=/usr/local] [DESTDIR=]: the libraries, the header, pooled.pc.
PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR = $(DESTDIR)$(PREFIX)/lib
install: $(BUILD)/libpooled.a $(BUILD)/libpooled.so
	install -d $(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 644 $(BUILD)/libpooled.a $(LIBDIR)/
	install -m 755 $(BUILD)/libpooled.so.$(SO_VERSION) $(LIBDIR)/
	ln -sf libpooled.so.$(SO_VERSION) $(LIBDIR)/libpooled.so.$(SO_MAJOR)
	ln -sf libpooled.so.$(SO_MAJOR) $(LIBDIR)/libpooled.so
	install -m 644 include/pooled.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SO_VERSION)|' tools/pooled.pc.in \
	    >$(LIBDIR)/pkgconfig/pooled.pc

# The room's link layer lives outside the library: it needs NNG and libsodium.
$(BUILD)/libpooled_room.a: $(ROOM_OBJ)
	@rm -f $@
	ar rcs $@ $^

# `pooled serve`'s server and API shapes, also outside the library (libmicrohttpd).
$(BUILD)/libpooled_serve.a: $(SERVE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/pooled: $(CMD_OBJ) $(BUILD)/libpooled_serve.a $(BUILD)/libpooled_room.a $(BUILD)/libpooled.a
	$(CC) $(CFLAGS) -o $@ $^ $(SERVE_LIBS) $(ROOM_LIBS) $(LDLIBS)

# Each test is its own program; tests/test.h supplies main(). Tests under tests/room/ also
# link the room's library, tests under tests/serve/ the server's.
test_libs = $(if $(findstring tests/room/,$(1)),$(BUILD)/libpooled_room.a)$(if $(findstring tests/serve/,$(1)),$(BUILD)/libpooled_serve.a)
test_ext = $(if $(findstring tests/room/,$(1)),$$(ROOM_LIBS))$(if $(findstring tests/serve/,$(1)),$$(SERVE_LIBS))
define test_rule
$(BUILD)/tests/$(basename $(notdir $(1))): $(1) $(call test_libs,$(1)) $(BUILD)/libpooled.a tests/test.h
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -Isrc -Iinclude -I. -Itests -o $$@ $(1) $(call test_libs,$(1)) $(BUILD)/libpooled.a $(call test_ext,$(1)) $$(LDLIBS)
endef
$(foreach t,$(TEST_SRC),$(eval $(call test_rule,$(t))))

test: $(BUILD)/pooled $(BUILD)/libpooled.so $(TEST_BIN)
	POOLED_BUILD=$(BUILD) tests/run.sh

# The tests that compile GPU kernels (programs, then tests/e2e scripts): `make gpu-test` runs
# only them. On lavapipe each kernel is compiled by LLVM inside the test's own process, and
# under ASan, whose allocator then serves LLVM's, that takes about five times as long
# (gpu_gemm_test with an empty shader cache on 2 cores: 6 min 15 s under SAN=1, 73 s
# plain). `make check` therefore runs these plainly first: a real run, counted, that must
# pass, and that leaves every kernel in Mesa's shader cache (~/.cache/mesa_shader_cache_db),
# so the sanitizer run of every test afterwards finds them compiled.
GPU_TESTS := gpu_model_test gpu_kernels_test backend_ops_test gpu_gemm_test gpu_gemv_cols_test \
             gpu_ops_test gpu_dispatch_test gpu_attn_test spec_test gpu_chain_test gpu_device_test \
             gpu_submit_test backend_opts_test backend_slots_test bad_model_test mtp_test \
             rewind_test wire_test
GPU_E2E   := gpu_run_test option_errors_test nonfinite_test bench_streams_test bench_test \
             gpu_probe_leak_test run_test
empty :=
space := $(empty) $(empty)
gpu-test: $(BUILD)/pooled $(BUILD)/libpooled.so $(GPU_TESTS:%=$(BUILD)/tests/%)
	POOLED_BUILD=$(BUILD) tests/run.sh '^($(subst $(space),|,$(strip $(GPU_TESTS) $(GPU_E2E))))$$'

# libFuzzer targets: always clang, always with ASan+UBSan, separate from the main build.
# The library is compiled once with fuzzer instrumentation (-fsanitize=fuzzer-no-link)
# and each target links against it.
FUZZ_CC    ?= clang
FUZZ_FLAGS := -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -Isrc -Iinclude -I.
FUZZ_OBJ   := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_ROOM_OBJ := $(ROOM_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_SERVE_OBJ := $(SERVE_SRC:%.c=build/fuzz/obj/%.o)
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
build/fuzz/libpooled.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/libpooled_room.a: $(FUZZ_ROOM_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/libpooled_serve.a: $(FUZZ_SERVE_OBJ)
	@rm -f $@
	ar rcs $@ $^
# The command's option parsers (cmd/pooled without main) for the option fuzzer.
FUZZ_CMD_OBJ := $(filter-out %/main.o,$(CMD_SRC:%.c=build/fuzz/obj/%.o))
build/fuzz/libcmd.a: $(FUZZ_CMD_OBJ)
	@rm -f $@
	ar rcs $@ $^
define fuzz_rule
build/fuzz/$(basename $(notdir $(1))): $(1) build/fuzz/libcmd.a build/fuzz/libpooled_serve.a build/fuzz/libpooled_room.a build/fuzz/libpooled.a
	$$(FUZZ_CC) $$(FUZZ_FLAGS) -Icmd/pooled -fsanitize=fuzzer -o $$@ $(1) build/fuzz/libcmd.a build/fuzz/libpooled_serve.a build/fuzz/libpooled_room.a build/fuzz/libpooled.a $(SERVE_LIBS) $(ROOM_LIBS) -lm -ldl -pthread
endef
$(foreach t,$(FUZZ_SRC),$(eval $(call fuzz_rule,$(t))))
fuzz: $(foreach t,$(FUZZ_SRC),build/fuzz/$(basename $(notdir $(t))))

# Run every fuzzer for FUZZ_SECONDS (default 60) each, from its seed corpus.
FUZZ_SECONDS ?= 60
fuzz-run: fuzz
	tests/fuzz/run.sh $(FUZZ_SECONDS)

# What CI runs: the GPU tests in the plain build (gpu-test, above: it fills the shader cache),
# all tests under ASan+UBSan, the wasm32 tests (wasm-test, below), the arm64 kernel tests,
# then the fuzzers.
# CI calls a plain `make check`, so each step builds on every core itself (-j$(nproc)): the
# SAN build takes half the time on CI's 2 cores, and so does the fuzzers' (their runs and
# the tests already go as many at once as there are cores).
# The test summary is printed again last, so the final line is the test count.
check:
	@mkdir -p build
	$(MAKE) -j$$(nproc) gpu-test 2>&1 | tee build/check-gpu.log; test $${PIPESTATUS[0]} -eq 0
	$(MAKE) -j$$(nproc) SAN=1 test 2>&1 | tee build/check-tests.log; test $${PIPESTATUS[0]} -eq 0
	$(MAKE) -j$$(nproc) wasm-test
	$(MAKE) -j$$(nproc) cross-arm64
	$(MAKE) -j$$(nproc) fuzz-run FUZZ_SECONDS=30
	@grep -E "^[0-9]+ passed, [0-9]+ failed" build/check-tests.log | tail -n 1

# The generated Unicode tables (tools/gen_unicode.py) keep the generator's layout.
format:
	clang-format -i $(filter-out src/tokenizer/unicode_data.c,$(LIB_SRC)) $(ROOM_SRC) $(SERVE_SRC) $(CMD_SRC) $(shell find src room serve cmd tests include -name '*.h') examples/*.c $(TEST_SRC) $(FUZZ_SRC)

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(ROOM_OBJ:.o=.d) $(SERVE_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d) $(FUZZ_ROOM_OBJ:.o=.d) $(FUZZ_SERVE_OBJ:.o=.d)

# Developer tools (not part of `make` or the tests): the GEMV and GEMM kernel labs, and the
# CPU thread pool's (pool_lab).
.PHONY: lab
lab: $(BUILD)/gemv_lab $(BUILD)/gemm_lab $(BUILD)/pool_lab
$(BUILD)/pool_lab: tools/pool_lab.c $(BUILD)/libpooled.a
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(BUILD)/libpooled.a $(LDLIBS)
$(BUILD)/gemv_lab: tools/gemv_lab.c tools/lab_util.h $(BUILD)/libpooled.a
	$(CC) $(CFLAGS) -Isrc -Itools -o $@ $< $(BUILD)/libpooled.a $(LDLIBS)
$(BUILD)/gemm_lab: tools/gemm_lab.c tools/lab_util.h $(BUILD)/libpooled.a
	$(CC) $(CFLAGS) -Isrc -Itools -o $@ $< $(BUILD)/libpooled.a $(LDLIBS)

# ---- wasm32 (the browser build's library; issue 15): `make wasm-test` compiles the library
# and the pure-CPU tests with clang for wasm32-wasi (Debian's wasi-libc; tools/setup.sh)
# twice, and runs each test module under node's WASI (tests/wasi_run.mjs): build/wasm/ is
# portable (all of src/, -Werror: the library stays warning-free for wasm32), build/wasm-simd/
# has src/cpu/ and its tests compiled with -msimd128 (the simd128 kernels, chosen when
# compiling: wasm has no run-time CPU detection) and shares the rest of the portable objects,
# which holds CI's time down (a simd128 module may hold functions without simd).
WASM_CC    ?= clang
WASM_FLAGS := --target=wasm32-wasi -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc -Iinclude
# the tests need no file outside their temporary folder, and no process or thread of their own
WASM_TESTS := cpu_qdot_test cpu_qdot_more_test cpu_kdot_test cpu_attention_test cpu_moe_test cpu_ssm_test \
    pool_test f16_test quant_roundtrip_test quant_finite_test json_test sha256_test status_test \
    sampler_test file_map_test backend_opts_test
# the simd build runs the tests of src/cpu/, the only code compiled differently there
WASM_SIMD_TESTS := $(filter cpu_% pool_test,$(WASM_TESTS))
WASM_OBJ := $(LIB_SRC:%.c=build/wasm/obj/%.o)
WASM_SIMD_OBJ := $(patsubst build/wasm/obj/src/cpu/%,build/wasm-simd/obj/src/cpu/%,$(WASM_OBJ))
.PHONY: wasm wasm-test
build/wasm/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) -MMD -MP -c $< -o $@
build/wasm-simd/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) -msimd128 -MMD -MP -c $< -o $@
.SECONDARY: $(WASM_OBJ) $(WASM_SIMD_OBJ)
# wasm_test DIR EXTRA_FLAGS OBJECTS NAME: one test module, the objects linked in (wasm-ld
# drops what the test does not reach)
define wasm_test
$(1)/tests/$(4).wasm: $(filter %/$(4).c,$(TEST_SRC)) $(3)
	@mkdir -p $$(dir $$@)
	$$(WASM_CC) $$(WASM_FLAGS) $(2) -I. -Itests -MMD -MP -MF $(1)/tests/$(4).d \
	    -Wl,-z,stack-size=8388608 -o $$@ $$< $(3) -lm
endef
$(foreach t,$(WASM_TESTS),$(eval $(call wasm_test,build/wasm,,$(WASM_OBJ),$(t))))
$(foreach t,$(WASM_SIMD_TESTS),$(eval $(call wasm_test,build/wasm-simd,-msimd128,$(WASM_SIMD_OBJ),$(t))))
WASM_BIN := $(WASM_TESTS:%=build/wasm/tests/%.wasm) $(WASM_SIMD_TESTS:%=build/wasm-simd/tests/%.wasm)
-include $(WASM_OBJ:.o=.d) $(WASM_SIMD_OBJ:.o=.d) $(WASM_BIN:.wasm=.d)
wasm: $(WASM_BIN)
# each module run under node; the summary line counts the modules that passed
wasm-test: wasm
	@tmp=$$(mktemp -d /tmp/pooled-wasm.XXXXXX); pass=0; fail=0; \
	for t in $(WASM_BIN); do \
	    out=$$(POOLED_TEST_TMP=$$tmp node --no-warnings tests/wasi_run.mjs $$t 2>&1); rc=$$?; \
	    res=$$(printf '%s\n' "$$out" | grep '^RESULT ' | tail -n 1); \
	    if [ $$rc = 0 ] && [ -n "$$res" ] && [ "$${res##* }" = 0 ]; then pass=$$((pass + 1)); \
	    else fail=$$((fail + 1)); printf '%s\n' "$$out" | tail -n 20; fi; \
	    printf '%-40s %s (exit %d)\n' "$$t" "$${res:-no RESULT line}" $$rc; \
	done; rm -rf "$$tmp"; echo "wasm: $$pass passed, $$fail failed"; [ $$fail = 0 ]
# --- arm64 (issue 15): `make cross-arm64` cross-builds the pure-CPU kernel tests with
# aarch64-linux-gnu-gcc into $(ARM64_BUILD) and runs them under qemu-aarch64 twice
# (tests/qemu_run.sh): -cpu max (the ARMv8.2 dot product: the SDOT kernels) and -cpu
# cortex-a57 (ARMv8.0: the plain NEON ones). Only the library sources those tests link are
# compiled (ARM64_LIB: the CPU backend, the seam, the quant formats, status, and file_map
# for the memory probe the CPU backend's weight copy asks), at -O2
# without sanitizers, to keep CI's added time small; the programs link glibc dynamically
# and qemu finds the arm64 one under /usr/aarch64-linux-gnu (-L). The kernels' bits depend
# on no FMA contraction: -ffp-contract=off, as in CFLAGS.
ARM64_CC    ?= aarch64-linux-gnu-gcc
ARM64_BUILD ?= build/arm64
ARM64_QEMU  ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
ARM64_CFLAGS := -O2 -std=c11 -Wall -Wextra -D_GNU_SOURCE -pthread -ffp-contract=off
ARM64_TESTS := cpu_qdot_test cpu_qdot_more_test cpu_kdot_test cpu_attention_test cpu_moe_test cpu_ssm_test pool_test
ARM64_LIB   := $(wildcard src/cpu/*.c src/format/quant_*.c) src/format/f16.c \
               src/backend/backend.c src/base/status.c src/base/file_map.c
ARM64_OBJ   := $(ARM64_LIB:%.c=$(ARM64_BUILD)/obj/%.o)
ARM64_BIN   := $(ARM64_TESTS:%=$(ARM64_BUILD)/tests/%)
$(ARM64_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARM64_CC) $(ARM64_CFLAGS) -MMD -MP -Isrc -Iinclude -c $< -o $@
$(ARM64_BUILD)/libpooled.a: $(ARM64_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(ARM64_BUILD)/tests/%: tests/cpu/%.c $(ARM64_BUILD)/libpooled.a tests/test.h
	@mkdir -p $(dir $@)
	$(ARM64_CC) $(ARM64_CFLAGS) -Isrc -Iinclude -I. -Itests -o $@ $< $(ARM64_BUILD)/libpooled.a -lm -ldl -pthread
# POOLED_NO_CROSS=1 (tools/device_check.sh: the H200 machine reaches no registry and the
# cross tools are too big to carry) says so and runs nothing; nothing is counted as passed.
.PHONY: cross-arm64
ifeq ($(POOLED_NO_CROSS),)
cross-arm64: $(ARM64_BIN)
	tests/qemu_run.sh "$(ARM64_QEMU)" $(ARM64_BUILD) max:2 cortex-a57:1
else
cross-arm64:
	@echo "cross-arm64: NOT RUN (POOLED_NO_CROSS is set): the arm64 kernels are untested here"
endif
-include $(ARM64_OBJ:.o=.d)
