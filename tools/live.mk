# tools/live.mk: live publishing (lib/publish.c), gpubuddy-stat, the live
# tests and the publishing-overhead benchmark (included from Makefile.am).

bin_PROGRAMS += tools/gpubuddy-stat
tools_gpubuddy_stat_SOURCES = tools/gpubuddy-stat.c
tools_gpubuddy_stat_LDADD = libgpubuddy.la -lm

# Publishing overhead: alloc+free with publishing off, on, and on with a
# reader attached. Not installed; run it by hand (see docs/LIVE.md).
noinst_PROGRAMS += bench/publish_overhead
bench_publish_overhead_SOURCES = bench/publish_overhead.c
bench_publish_overhead_LDADD = libgpubuddy.la -lpthread -lm

# test_live runs twice: with the default ring, and with a 64-slot ring
# (GPB_PUBLISH_RING) so the reader falls behind and resyncs.
LIVE_TESTS = tests/test_live tests/test_live_lag tests/test_live_garbled \
	tests/test_live_kill tests/test_live_threads tests/test_live_idle \
	tests/test_live_tick
check_PROGRAMS += $(LIVE_TESTS)
TESTS += $(LIVE_TESTS)
tests_test_live_SOURCES = tests/test_live.c
tests_test_live_LDADD = libgpubuddy.la
tests_test_live_lag_SOURCES = tests/test_live.c
tests_test_live_lag_CPPFLAGS = $(AM_CPPFLAGS) -DLIVE_LAG=1
tests_test_live_lag_LDADD = libgpubuddy.la
tests_test_live_garbled_SOURCES = tests/test_live_garbled.c
tests_test_live_garbled_LDADD = libgpubuddy.la
tests_test_live_kill_SOURCES = tests/test_live_kill.c
tests_test_live_kill_LDADD = libgpubuddy.la
tests_test_live_threads_SOURCES = tests/test_live_threads.c
tests_test_live_threads_LDADD = libgpubuddy.la -lpthread
tests_test_live_idle_SOURCES = tests/test_live_idle.c
tests_test_live_idle_LDADD = libgpubuddy.la
tests_test_live_tick_SOURCES = tests/test_live_tick.c
tests_test_live_tick_LDADD = libgpubuddy.la
