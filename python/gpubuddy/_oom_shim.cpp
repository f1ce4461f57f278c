// SPDX-License-Identifier: MIT
// _oom_shim.cpp: gpubuddy's PyTorch entry points that raise
// torch.cuda.OutOfMemoryError. A NULL from a pluggable allocator is not
// checked by every caller (cuDNN reported BAD_PARAM, tensors a "lazy
// allocation" error), and only the C++ exception lets PyTorch's own
// fallbacks (cuDNN's smaller workspaces) and user code catch the
// exhaustion. Built against the user's torch at first use by
// gpubuddy.torch (torch.utils.cpp_extension), linked to libgpubuddy.
#include <c10/util/Exception.h>

#include <cstddef>

extern "C" {
void *gpb_torch_malloc(std::ptrdiff_t size, int device, void *stream);
void gpb_torch_free(void *ptr, std::ptrdiff_t size, int device, void *stream);
int gpb_torch_explain(int device, std::size_t size, char *buf, std::size_t len);

void *gpbx_malloc(std::ptrdiff_t size, int device, void *stream) {
  void *p = gpb_torch_malloc(size, device, stream);
  if (p == nullptr && size > 0) {
    char why[512];
    gpb_torch_explain(device, static_cast<std::size_t>(size), why, sizeof why);
    TORCH_CHECK_WITH(OutOfMemoryError, false, why);
  }
  return p;
}

void gpbx_free(void *ptr, std::ptrdiff_t size, int device, void *stream) {
  gpb_torch_free(ptr, size, device, stream);
}
}
