// SPDX-License-Identifier: MIT
// _stacks.cpp: call sites for PyTorch's front end (enable(stacks=...)).
//
// A site is the calling thread's Python frames, innermost first, and with
// stacks="all" the C++ frames above them: from the allocator's caller
// (c10, ATen, the op's bindings) down to the interpreter, unwound with
// torch's own unwinder, the one _record_memory_history(stacks="all")
// uses. Threads Python did not make (the autograd engine's) give their
// C++ frames alone.
//
// Every allocation pays for the walk and a hash of what it found: each
// Python frame's (code object, instruction) pair and each C++ return
// address. Only a stack seen for the first time is written out, as
// "MODULE+0xOFF SYMBOL" per C++ frame and "FILE:LINE NAME" per Python
// frame, and interned in the pool's site table (gpb_pool_site_intern).
// C++ frames are turned into functions and lines by the readers
// (addr2line), never here.
//
// A code object freed and another made at its address, at the same
// instruction, would share the old text: code lives as long as its
// module, nearly always the run.
#include <Python.h>  // first, as Python asks

#include "_stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <torch/csrc/profiler/unwind/unwind.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace gpbx {

constexpr int kMaxFrames = 64;  // GPB_SITE_DEPTH_MAX: the most a site keeps
constexpr int kAllFrames = 32;  // of each kind with stacks="all"

// One allocation's frames, before they are interned.
struct Stack {
  uint64_t key = 1469598103934665603ull;  // FNV-1a over the frames
  int ncpp = 0, npy = 0;
  void* pc[kAllFrames];
  PyCodeObject* code[kMaxFrames];
  int lasti[kMaxFrames];
  void mix(uint64_t v) { key = (key ^ v) * 1099511628211ull; }
};

StackSpec parse_stacks(const char* text) {
  StackSpec s;
  if (!text || !*text) return s;
  if (!strcmp(text, "all")) return StackSpec{kAllFrames, true};
  s.python = std::min(std::max(atoi(text), 0), kMaxFrames);
  return s;
}

namespace {

// The address range of the loaded module (program or library) holding
// an address.
struct Span {
  uintptr_t lo = 0, hi = 0;
  bool has(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a >= lo && a < hi;
  }
};

Span module_span(const void* addr) {
  struct Query {
    uintptr_t a;
    Span found;
  } q{reinterpret_cast<uintptr_t>(addr), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        Span s{UINTPTR_MAX, 0};
        for (int i = 0; i < info->dlpi_phnum; i++) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          s.lo = std::min<uintptr_t>(s.lo, info->dlpi_addr + ph.p_vaddr);
          s.hi = std::max<uintptr_t>(s.hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (q->a < s.lo || q->a >= s.hi) return 0;
        q->found = s;
        return 1;
      },
      &q);
  return q.found;
}

// The C++ frames from the allocator's caller to the first of the
// interpreter's (or the thread's start): torch's unwind() and this
// library's frames are passed over.
void cpp_frames(Stack& st) {
  static const Span self = module_span(reinterpret_cast<void*>(&module_span));
  static const Span interp = module_span(reinterpret_cast<void*>(&PyEval_EvalCode));
  std::vector<void*> pcs;
  try {
    pcs = torch::unwind::unwind();
  } catch (...) {  // no unwinder on this platform: Python frames only
    return;
  }
  size_t i = 0;
  while (i < pcs.size() && !self.has(pcs[i])) i++;
  while (i < pcs.size() && self.has(pcs[i])) i++;
  for (; i < pcs.size() && st.ncpp < kAllFrames; i++) {
    if (!pcs[i] || interp.has(pcs[i])) break;
    st.pc[st.ncpp++] = pcs[i];
    st.mix(reinterpret_cast<uintptr_t>(pcs[i]));
  }
}

// Up to depth Python frames of the calling thread; the GIL held. None
// before Python 3.11, whose frame API this needs.
void py_frames(Stack& st, int depth) {
#if PY_VERSION_HEX >= 0x030B0000
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f && st.npy < depth) {
    st.code[st.npy] = PyFrame_GetCode(f);
    st.lasti[st.npy] = PyFrame_GetLasti(f);
    st.mix(reinterpret_cast<uintptr_t>(st.code[st.npy]));
    st.mix(static_cast<uint32_t>(st.lasti[st.npy]));
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
    st.npy++;
  }
  Py_XDECREF(f);
#else
  (void)st;
  (void)depth;
#endif
}

// A C++ frame as the trace format writes it: the call (return address
// - 1) as an offset in its module, and the nearest exported symbol.
std::string cpp_text(void* pc) {
  char buf[48];
  std::string out;
  auto lib = torch::unwind::libraryFor(pc);
  if (lib) {
    out = lib->first;
    snprintf(buf, sizeof buf, "+0x%llx", (unsigned long long)(lib->second - 1));
  } else {
    snprintf(buf, sizeof buf, "0x%llx",
             (unsigned long long)(reinterpret_cast<uintptr_t>(pc) - 1));
  }
  out += buf;
  Dl_info info;
  if (dladdr(static_cast<char*>(pc) - 1, &info) && info.dli_sname)
    out += std::string(" ") + info.dli_sname;
  return out;
}

// The site's text, innermost frame first; the GIL held when it has
// Python frames.
std::string text_of(const Stack& st) {
  std::string t;
  for (int i = 0; i < st.ncpp; i++) t += (i ? ";" : "") + cpp_text(st.pc[i]);
#if PY_VERSION_HEX >= 0x030B0000
  for (int i = 0; i < st.npy; i++) {
    const char* file = PyUnicode_AsUTF8(st.code[i]->co_filename);
    const char* name = PyUnicode_AsUTF8(st.code[i]->co_qualname);
    if (!file || !name) PyErr_Clear();
    t += (t.empty() ? "" : ";") + std::string(file ? file : "?") + ":" +
         std::to_string(PyCode_Addr2Line(st.code[i], st.lasti[i])) + " " +
         (name ? name : "?");
  }
#endif
  return t;
}

}  // namespace

uint32_t Sites::intern(gpb_pool_t* pool, const Stack& st) {
  if (!st.ncpp && !st.npy) return 0;
  std::lock_guard<std::mutex> g(mu_);
  auto it = ids_.find(st.key);
  if (it != ids_.end()) return it->second;
  uint32_t site = 0;
  gpb_pool_site_intern(pool, st.key, text_of(st).c_str(), &site);
  ids_.emplace(st.key, site);
  return site;
}

// PyTorch's bindings release the GIL around an op, so it is taken again
// here, as PyTorch's own history does, but only on threads Python made:
// the others have no Python stack to give.
uint32_t Sites::here(gpb_pool_t* pool, const StackSpec& spec) {
  Stack st;
  if (spec.cpp) cpp_frames(st);
  if (!spec.python || !Py_IsInitialized() || !PyGILState_GetThisThreadState())
    return intern(pool, st);
  PyGILState_STATE gil = PyGILState_Ensure();
  py_frames(st, spec.python);
  uint32_t site = intern(pool, st);
  for (int i = 0; i < st.npy; i++) Py_DECREF(st.code[i]);
  PyGILState_Release(gil);
  return site;
}

}  // namespace gpbx
