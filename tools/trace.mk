# tools/trace.mk: trace files (lib/trace.c), gpubuddy-replay, the PyTorch
# importer, and their tests and fuzz target (included from Makefile.am).

bin_PROGRAMS += tools/gpubuddy-replay
tools_gpubuddy_replay_SOURCES = tools/gpubuddy-replay.c tools/replay-util.c \
	tools/replay.h
tools_gpubuddy_replay_LDADD = libgpubuddy.la -lm

bin_SCRIPTS += tools/gpubuddy-import-torch
EXTRA_DIST += tools/gpubuddy-import-torch docs/TRACE_FORMAT.md

# Tests: the reader/writer and the pool's own recording (C), malformed
# input for every parser (C), the replay tool end to end and the importer
# (shell, using the fixtures under tests/data).
check_PROGRAMS += tests/test_trace tests/test_trace_bad
tests_test_trace_LDADD = libgpubuddy.la -lpthread
tests_test_trace_bad_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_test_trace_bad_LDADD = libgpubuddy.la $(ZLIB_LIBS)
TESTS += tests/test_trace tests/test_trace_bad tests/test_trace_replay.sh \
	tests/test_import_torch.sh
EXTRA_DIST += tests/test_trace_replay.sh tests/test_import_torch.sh \
	tests/data/rmm_small.csv tests/data/torch_snapshot.pickle \
	tests/data/torch_snapshot.expected tests/data/gen_torch_snapshot.py \
	tests/data/torch_snapshot_old.pickle tests/data/torch_snapshot_old.expected \
	tests/data/churn_small.trace.gz \
	tests/fuzz/fuzz_trace.c tests/run-fuzzers.sh
# libFuzzer target for the native and RMM parsers. lib/trace.c (and the
# byte layer and error helper it uses) is compiled in directly so that the parser itself
# carries the fuzzer's coverage and the sanitizers.
if BUILD_FUZZERS
noinst_PROGRAMS += tests/fuzz/fuzz_trace
tests_fuzz_fuzz_trace_SOURCES = tests/fuzz/fuzz_trace.c lib/trace.c lib/zio.c lib/error.c
tests_fuzz_fuzz_trace_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS) $(LIBDEFLATE_CFLAGS)
tests_fuzz_fuzz_trace_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_trace_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_trace_LDADD = $(ZLIB_LIBS) $(LIBDEFLATE_LIBS)
endif
