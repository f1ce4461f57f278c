// SPDX-License-Identifier: MIT
// _stacks.h: an allocation's call site for PyTorch's front end, as
// enable(stacks=...) asks for it (_stacks.cpp says how it is taken).
#pragma once
#include <gpubuddy.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace gpbx {

// What a call site holds: up to `python` Python frames, and with `cpp`
// the C++ frames between the allocator and the interpreter.
struct StackSpec {
  int python = 0;
  bool cpp = false;
  bool on() const { return python > 0 || cpp; }
};

// GPB_TORCH_STACKS: "N" (N Python frames, 1 to 64) or "all" (32 Python
// frames and up to 32 C++ ones); anything else is off.
StackSpec parse_stacks(const char* text);

struct Stack;  // one allocation's frames (_stacks.cpp)

// One pool's call sites, keyed by the frames they were taken from.
class Sites {
 public:
  // The calling thread's site in pool: 0 when it has no frames to give
  // or the pool keeps no more sites.
  uint32_t here(gpb_pool_t* pool, const StackSpec& spec);

 private:
  uint32_t intern(gpb_pool_t* pool, const Stack& st);
  std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> ids_;
};

}  // namespace gpbx
