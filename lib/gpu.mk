# lib/gpu.mk: build rules (included from Makefile.am).
# The GPU side of the library (stream-ordered frees in lib/stream.c, listed
# in Makefile.am; NVTX registration; the PyTorch allocator entry points),
# its tests and the GPU check script.
libgpubuddy_la_SOURCES += lib/gpu.h lib/nvtx.c lib/torch.c

EXTRA_DIST += scripts/gpu-check.sh docs/GPU.md \
	samples/torch/train.py samples/torch/record_traces.py \
	samples/torch/README.md \
	tests/test_stream.c tests/test_multipool.c tests/test_nvtx_oob.c \
	tests/test_gpu_fake.c tests/fake_cudart.c tests/fake_cudart.h

# The stream and PyTorch logic against a fake CUDA runtime: the test
# program defines the cuda* functions the library calls, and the dynamic
# linker binds the library to them. Runs on machines without a GPU.
if HAVE_CUDA
check_PROGRAMS += tests/test_gpu_fake
TESTS += tests/test_gpu_fake
tests_test_gpu_fake_SOURCES = tests/test_gpu_fake.c tests/fake_cudart.c tests/fake_cudart.h
tests_test_gpu_fake_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests $(CUDA_CPPFLAGS)
tests_test_gpu_fake_LDFLAGS = -export-dynamic
tests_test_gpu_fake_LDADD = $(TEST_LIBS)
endif

# Real GPU tests: kernels from tests/gpu_kernels.cu; exit 77 without a GPU.
if HAVE_NVCC
check_PROGRAMS += tests/test_stream tests/test_multipool tests/test_nvtx_oob
TESTS += tests/test_stream tests/test_multipool tests/test_nvtx_oob
tests_test_stream_SOURCES = tests/test_stream.c
tests_test_stream_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_stream_LDADD = tests/gpu_kernels.$(OBJEXT) $(TEST_LIBS) $(CUDA_KERNEL_LIBS)
EXTRA_tests_test_stream_DEPENDENCIES = tests/gpu_kernels.$(OBJEXT)
tests_test_multipool_SOURCES = tests/test_multipool.c
tests_test_multipool_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_multipool_LDADD = tests/gpu_kernels.$(OBJEXT) $(TEST_LIBS) $(CUDA_KERNEL_LIBS)
EXTRA_tests_test_multipool_DEPENDENCIES = tests/gpu_kernels.$(OBJEXT)
tests_test_nvtx_oob_SOURCES = tests/test_nvtx_oob.c
tests_test_nvtx_oob_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_nvtx_oob_LDADD = tests/gpu_kernels.$(OBJEXT) $(TEST_LIBS) $(CUDA_KERNEL_LIBS)
EXTRA_tests_test_nvtx_oob_DEPENDENCIES = tests/gpu_kernels.$(OBJEXT)
endif
