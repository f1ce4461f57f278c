# tools/relay.mk: remote viewing (issue 7) -- the wire protocol, the TCP
# reader behind gpb_attach_connect, gpubuddy-relay, its tests, fuzz target
# and benchmark (included from Makefile.am). See docs/PROTOCOL.md.

# The protocol codec goes into the library (for lib/remote.c) and, since
# its symbols are hidden there, is compiled again into the programs that
# use it directly.
libgpubuddy_la_SOURCES += lib/netproto.c lib/netproto.h
RELAY_NP = lib/netproto.c lib/netproto.h
RELAY_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools $(ZLIB_CFLAGS)
RELAY_LIBS = libgpubuddy.la $(ZLIB_LIBS) -lpthread

bin_PROGRAMS += tools/gpubuddy-relay
tools_gpubuddy_relay_SOURCES = tools/gpubuddy-relay.c $(RELAY_NP)
tools_gpubuddy_relay_CPPFLAGS = $(RELAY_CPPFLAGS)
tools_gpubuddy_relay_LDADD = $(RELAY_LIBS)

# test_relay_proto: the codec alone (round trips, every truncation and
# corruption of valid frames). test_relay: the relay core in a thread, fed
# by an in-process pool, and TCP readers (token, garbage, slow clients,
# reconnect, relay gone). test_relay_e2e: a writer process with a named
# pool, the gpubuddy-relay program and a reader, against a local attach.
RELAY_TESTS = tests/test_relay_proto tests/test_relay tests/test_relay_e2e
check_PROGRAMS += $(RELAY_TESTS)
TESTS += $(RELAY_TESTS)
tests_test_relay_proto_SOURCES = tests/test_relay_proto.c $(RELAY_NP)
tests_test_relay_proto_CPPFLAGS = $(RELAY_CPPFLAGS)
tests_test_relay_proto_LDADD = $(RELAY_LIBS)
tests_test_relay_SOURCES = tests/test_relay.c $(RELAY_NP)
tests_test_relay_CPPFLAGS = $(RELAY_CPPFLAGS)
tests_test_relay_LDADD = $(RELAY_LIBS)
tests_test_relay_e2e_SOURCES = tests/test_relay_e2e.c
tests_test_relay_e2e_LDADD = $(RELAY_LIBS)
EXTRA_tests_test_relay_e2e_DEPENDENCIES = tools/gpubuddy-relay$(EXEEXT)

# Fuzzing the reader's frame handling: tests/test_relay_fuzz.sh builds the
# target with clang from the sources and runs it for a bounded time (CI);
# --enable-fuzzers (CC=clang) builds it here, linked statically so the
# library's hidden entry point is reachable.
EXTRA_DIST += tests/fuzz/fuzz_frame.c tests/test_relay_fuzz.sh
if BUILD_FUZZERS
noinst_PROGRAMS += tests/fuzz/fuzz_frame
tests_fuzz_fuzz_frame_SOURCES = tests/fuzz/fuzz_frame.c
tests_fuzz_fuzz_frame_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_frame_LDFLAGS = -static -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_frame_LDADD = $(RELAY_LIBS)
endif

# Bytes per event and events per second through loopback, with and
# without zlib (numbers in docs/PROTOCOL.md). Not installed.
noinst_PROGRAMS += bench/relay_bench
bench_relay_bench_SOURCES = bench/relay_bench.c $(RELAY_NP)
bench_relay_bench_CPPFLAGS = $(RELAY_CPPFLAGS)
bench_relay_bench_LDADD = $(RELAY_LIBS)
