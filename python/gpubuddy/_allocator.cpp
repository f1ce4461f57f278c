// SPDX-License-Identifier: MIT
// _allocator.cpp: gpubuddy as PyTorch's CUDA allocator, a subclass of
// c10::cuda::CUDACachingAllocator::CUDAAllocator, so that every
// torch.cuda memory call (memory_stats, memory_summary, the peaks,
// _record_memory_history and _snapshot, CUDA graphs and their private
// pools, torch.compile's graph trees, record_stream, CUDA IPC) is served
// from gpubuddy's pools and numbers. It is a translator: PyTorch's calls
// in, gpubuddy's public C API out. Each device's memory comes from
// gpb_device_pool, the pool CuPy's front end shares.
//
// What is kept here, because gpubuddy has no notion of it:
//   - one record per live allocation (its stream, the streams
//     record_stream added, its private pool, the Python stack that
//     _record_memory_history asked for), in a map per device;
//   - private pools (CUDA graphs, torch.cuda.MemPool): blocks taken from
//     the device pool that stay reserved for the pool until it is
//     released; a block freed into it waits there for the pool's next
//     request of its stream and at most its size (no split);
//   - the history ring of TraceEntry for snapshots, and the offsets that
//     reset_accumulated_memory_stats subtracts.
// Bytes, counts and peaks come from gpb_pool_stats; the peaks are reset
// with gpb_pool_reset_peaks.
//
// With enable(stacks=...) each allocation's call site is its stack
// (_stacks.cpp), so gpubuddy-view, traces and OOM explanations name the
// user's code rather than this file.
//
// Built against the user's torch at first use (gpubuddy._cppext), linked
// to libgpubuddy; gpubuddy.torch calls gpbx_install() through ctypes.
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/ApproximateClock.h>
#include <cuda_runtime_api.h>
#include <gpubuddy.h>

#include "_stacks.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
namespace cda = c10::CachingDeviceAllocator;
using c10::MempoolId_t;
using cda::TraceEntry;

constexpr int kMaxDevices = 64;
constexpr MempoolId_t kDevicePool{0, 0};
// torch 2.11's IPC handle: version, 'c' (a cudaMalloc'd range), then the
// cudaIpcMemHandle_t of the range, so a process with PyTorch's own
// allocator can open what this one shares.
constexpr char kIpcVersion = 2;
constexpr char kIpcMalloc = 'c';

// One live allocation, as PyTorch sees it.
struct Alloc {
  size_t size;                        // bytes asked for
  cudaStream_t stream;                // where it was allocated
  MempoolId_t pool;                   // kDevicePool, or a private pool
  std::vector<cudaStream_t> uses;     // other streams (record_stream)
  std::shared_ptr<c10::GatheredContext> ctx;  // stack, when recorded
};

// A private pool: a CUDA graph's, or a torch.cuda.MemPool's.
struct Private {
  int uses = 0;                       // captures and MemPools holding it
  // Blocks waiting for the pool's next request: usable bytes -> block.
  std::multimap<size_t, std::pair<void*, cudaStream_t>> idle;
  std::unordered_map<void*, size_t> blocks;  // every block it holds
  std::shared_ptr<cca::CUDAAllocator> source;  // MemPool(allocator=...)
};

struct Capture {
  MempoolId_t id;
  std::function<bool(cudaStream_t)> filter;
};

// A live block's state at a checkpoint of a private pool (graph trees).
struct CheckpointState : cca::AllocatorState {
  MempoolId_t id;
  std::unordered_map<void*, size_t> blocks;   // block -> usable bytes
  std::unordered_map<void*, Alloc> live;      // the live ones then
};

struct Device {
  std::mutex mu;
  gpb_pool_t* pool = nullptr;
  uintptr_t lo = 0, hi = 0;           // the pool's address range
  std::unordered_map<void*, Alloc> live;
  std::map<MempoolId_t, Private> priv;
  std::vector<Capture> captures;
  std::vector<std::pair<void*, Alloc>> deferred;  // freed while capturing
  // What gpb_stats_t lacks: bytes allocated and freed in all, the most
  // live allocations, retries and OOMs; each since the last reset.
  int64_t bytes_in = 0, bytes_out = 0, count_peak = 0;
  uint64_t allocs0 = 0, frees0 = 0;   // gpubuddy's counts at that reset
  int64_t retries = 0, ooms = 0;
  uint64_t reserved_peak = 0;         // the most held at any stats read
  size_t cap = 0;                     // set_per_process_memory_fraction
  double fraction = 1.0;
  gpbx::Sites sites;                  // enable(stacks=...)'s call sites
  std::vector<TraceEntry> ring;       // history, oldest at `next` once full
  size_t next = 0;
};

// _record_memory_history's settings, read under `hist_mu`.
struct History {
  std::mutex mu;
  std::atomic<bool> on{false};        // read without the lock on each call
  std::atomic<bool> tracked{false};   // a trace tracker is attached
  cda::CreateContextFn recorder = nullptr;
  cda::RecordContext when = cda::RecordContext::NEVER;
  size_t max_entries = 0;
  std::unordered_set<int> skip;       // TraceEntry actions not recorded
  std::string compile_context, user_metadata;
};

// Switches this thread to relaxed capture mode while a graph is being
// captured, so gpubuddy's CUDA calls (an event, a mapping) do not
// invalidate the capture, as PyTorch's allocator does for cudaMalloc.
struct RelaxCapture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  bool on;
  explicit RelaxCapture(bool capturing) : on(capturing) {
    if (on) cudaThreadExchangeStreamCaptureMode(&mode);
  }
  ~RelaxCapture() {
    if (on) cudaThreadExchangeStreamCaptureMode(&mode);
  }
};

std::string gpb_error(int rc) {
  return std::string(gpb_strerror(rc)) + ": " + gpb_last_error_detail();
}

void stat_set(c10::CachingAllocator::Stat& s, int64_t cur, int64_t peak,
              int64_t allocated, int64_t freed) {
  s.current = cur;
  s.peak = peak;
  s.allocated = allocated;
  s.freed = freed;
}

void deleter(void* ptr);

class Allocator final : public cca::CUDAAllocator {
 public:
  // ------------------------------------------------------------ allocate
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex dev = c10::cuda::current_device();
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(dev).stream();
    void* p = malloc(dev, n, s);
    return {p, p, &deleter, c10::Device(c10::DeviceType::CUDA, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &deleter; }
  void* raw_alloc(size_t n) override {
    c10::DeviceIndex dev = c10::cuda::current_device();
    return malloc(dev, n, c10::cuda::getCurrentCUDAStream(dev).stream());
  }
  void* raw_alloc_with_stream(size_t n, cudaStream_t s) override {
    return malloc(c10::cuda::current_device(), n, s);
  }
  void raw_delete(void* p) override { free(p); }
  void copy_data(void* dst, const void* src, size_t n) const override {
    C10_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
  }

  void* malloc(int dev, size_t n, cudaStream_t s);
  void free(void* p);

  // -------------------------------------------------------------- set-up
  void init(int count) override {
    count_ = std::min(count, kMaxDevices);
    ready_ = true;
  }
  bool initialized() override { return ready_; }
  void enable(bool on) override { enabled_ = on; }
  bool isEnabled() const override { return enabled_; }
  std::string name() override { return "gpubuddy"; }
  double getMemoryFraction(c10::DeviceIndex dev) override {
    return device(dev).fraction;
  }
  void setMemoryFraction(double fraction, c10::DeviceIndex dev) override;
  std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(
      c10::DeviceIndex) override {
    return {};
  }

  // --------------------------------------------------------------- stats
  cda::DeviceStats getDeviceStats(c10::DeviceIndex dev) override;
  void resetAccumulatedStats(c10::DeviceIndex dev) override;
  void resetPeakStats(c10::DeviceIndex dev) override;
  void cacheInfo(c10::DeviceIndex dev, size_t* largest) override;
  void emptyCache(MempoolId_t id) override;

  // ------------------------------------------------------------- streams
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream s) override;
  void* getBaseAllocation(void* p, size_t* size) override;
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex to) override;
  cudaError_t memcpyAsync(void* dst, int dst_dev, const void* src, int src_dev,
                          size_t n, cudaStream_t s, bool p2p) override {
    if (p2p || dst_dev == src_dev)
      return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
    return cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, n, s);
  }

  // ------------------------------------------------------ private pools
  void beginAllocateToPool(c10::DeviceIndex dev, MempoolId_t id,
                           std::function<bool(cudaStream_t)> filter) override;
  void endAllocateToPool(c10::DeviceIndex dev, MempoolId_t id) override;
  void releasePool(c10::DeviceIndex dev, MempoolId_t id) override;
  void createOrIncrefPool(c10::DeviceIndex dev, MempoolId_t id,
                          std::shared_ptr<cca::CUDAAllocator> a) override;
  int getPoolUseCount(c10::DeviceIndex dev, MempoolId_t id) override;
  void setUseOnOOM(c10::DeviceIndex, MempoolId_t, bool) override {}
  void setNoSplit(c10::DeviceIndex, MempoolId_t) override {}
  bool checkPoolLiveAllocations(
      c10::DeviceIndex dev, MempoolId_t id,
      const std::unordered_set<void*>& expected) override;
  std::shared_ptr<cca::AllocatorState> getCheckpointState(
      c10::DeviceIndex dev, MempoolId_t id) override;
  cca::CheckpointDelta setCheckpointPoolState(
      c10::DeviceIndex dev, std::shared_ptr<cca::AllocatorState> st) override;

  // ------------------------------------------------------------- history
  cca::SnapshotInfo snapshot(MempoolId_t id, bool traces) override;
  bool isHistoryEnabled() override { return hist_.on; }
  void recordHistory(bool on, cda::CreateContextFn recorder, size_t max,
                     cda::RecordContext when, bool clear,
                     const std::vector<std::string>& skip) override;
  void pushCompileContext(std::string& md) override {
    std::lock_guard<std::mutex> g(hist_.mu);
    hist_.compile_context = md;
  }
  void popCompileContext() override {
    std::lock_guard<std::mutex> g(hist_.mu);
    hist_.compile_context.clear();
  }
  void setUserMetadata(const std::string& md) override {
    std::lock_guard<std::mutex> g(hist_.mu);
    hist_.user_metadata = md;
  }
  std::string getUserMetadata() override {
    std::lock_guard<std::mutex> g(hist_.mu);
    return hist_.user_metadata;
  }
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver o) override {
    std::lock_guard<std::mutex> g(hist_.mu);
    oom_observers_.push_back(std::move(o));
  }
  void attachAllocatorTraceTracker(cda::AllocatorTraceTracker t) override {
    std::lock_guard<std::mutex> g(hist_.mu);
    trackers_.push_back(std::move(t));
    hist_.tracked = true;
  }

  // ----------------------------------------------------------------- IPC
  cca::ShareableHandle shareIpcHandle(void* p) override;
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override;

 private:
  Device& device(int dev);
  Device* owner(void* p);
  Device* existing(int dev);
  void* take(Device& d, size_t n, cudaStream_t s, MempoolId_t id,
             uint32_t site);
  void* take_private(Device& d, Private& pp, size_t n, cudaStream_t s);
  void* take_device(Device& d, size_t n, cudaStream_t s, uint32_t site = 0);
  void give_back(Device& d, void* p, const Alloc& a);
  void free_private(Device& d, void* p, const Alloc& a);
  void release_idle(Device& d, MempoolId_t id);
  void flush_deferred(Device& d);
  bool reclaim(Device& d);
  [[noreturn]] void oom(Device& d, std::unique_lock<std::mutex>& lk, int dev,
                        size_t n, cudaStream_t s);
  MempoolId_t pool_for(Device& d, cudaStream_t s);
  void note(Device& d, TraceEntry::Action act, int dev, void* p, size_t n,
            cudaStream_t s, MempoolId_t id,
            std::shared_ptr<c10::GatheredContext> ctx);
  std::shared_ptr<c10::GatheredContext> context(bool for_alloc);
  void snapshot_device(int dev, Device& d, cca::SnapshotInfo& out);

  Device dev_[kMaxDevices];
  std::mutex make_mu_;
  History hist_;
  std::vector<cca::OutOfMemoryObserver> oom_observers_;
  std::vector<cda::AllocatorTraceTracker> trackers_;
  std::mutex ipc_mu_;
  std::unordered_map<std::string, std::weak_ptr<void>> ipc_open_;
  c10::ApproximateClockToUnixTimeConverter clock_;
  int count_ = 0;
  gpbx::StackSpec stacks_;  // what a call site holds (enable(stacks=...))
  bool ready_ = false, enabled_ = true;

 public:
  void set_stacks(const char* spec) { stacks_ = gpbx::parse_stacks(spec); }
};

Allocator* the_allocator = nullptr;

void deleter(void* ptr) { the_allocator->free(ptr); }

// The device's state, its pool made at the first call.
Device& Allocator::device(int dev) {
  TORCH_CHECK(dev >= 0 && dev < kMaxDevices, "gpubuddy: device ", dev,
              " is out of range");
  Device& d = dev_[dev];
  if (__atomic_load_n(&d.pool, __ATOMIC_ACQUIRE)) return d;
  std::lock_guard<std::mutex> g(make_mu_);
  if (d.pool) return d;
  gpb_pool_t* pool = nullptr;
  int rc = gpb_device_pool(dev, &pool);
  TORCH_CHECK(rc == 0, "gpubuddy: no pool for device ", dev, ": ",
              gpb_error(rc));
  gpb_pool_info_t in;
  TORCH_CHECK(gpb_pool_info(pool, &in) == 0, "gpubuddy: ", gpb_error(-1));
  d.lo = reinterpret_cast<uintptr_t>(in.base);
  d.hi = d.lo + in.pool_size;
  __atomic_store_n(&d.pool, pool, __ATOMIC_RELEASE);
  return d;
}

// The device whose pool or private pools hold p; nullptr when none.
Device* Allocator::owner(void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < kMaxDevices; i++) {
    Device& d = dev_[i];
    if (__atomic_load_n(&d.pool, __ATOMIC_ACQUIRE) && a >= d.lo && a < d.hi)
      return &d;
  }
  for (int i = 0; i < kMaxDevices; i++) {  // a MemPool's own allocator's
    Device& d = dev_[i];
    if (!__atomic_load_n(&d.pool, __ATOMIC_ACQUIRE)) continue;
    std::lock_guard<std::mutex> g(d.mu);
    if (d.live.count(p)) return &d;
  }
  return nullptr;
}

// The device's state when its pool exists; nullptr before its first
// allocation (stats then read zero, as with PyTorch's own allocator).
Device* Allocator::existing(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  return __atomic_load_n(&dev_[dev].pool, __ATOMIC_ACQUIRE) ? &dev_[dev]
                                                            : nullptr;
}

// ------------------------------------------------------------ allocation

// The private pool a request on stream s goes to, while a capture or a
// use_mem_pool scope on this device claims s; else the device pool.
MempoolId_t Allocator::pool_for(Device& d, cudaStream_t s) {
  for (auto it = d.captures.rbegin(); it != d.captures.rend(); ++it)
    if (it->filter(s)) return it->id;
  return kDevicePool;
}

// A block of the device pool, within set_per_process_memory_fraction.
void* Allocator::take_device(Device& d, size_t n, cudaStream_t s,
                              uint32_t site) {
  if (d.cap) {
    gpb_stats_t st;
    if (gpb_pool_stats(d.pool, &st) == 0 && st.block_bytes + n > d.cap)
      return nullptr;
  }
  void* p = nullptr;
  return gpb_alloc_site(d.pool, n, 0, GPB_TAG_TORCH, s, site, &p) == 0 ? p
                                                                      : nullptr;
}

// A block of a private pool: one it keeps for stream s, at most twice the
// size (it is not split), or a new one. The new one is taken with no
// stream: it is used by the graph's own stream, whose captured work
// starts after torch.cuda.graph's synchronize, and naming that stream
// would make the pool record events into the capture.
void* Allocator::take_private(Device& d, Private& pp, size_t n,
                              cudaStream_t s) {
  for (auto it = pp.idle.lower_bound(n);
       it != pp.idle.end() && it->first <= 2 * n; ++it) {
    if (it->second.second != s) continue;
    void* p = it->second.first;
    pp.idle.erase(it);
    return p;
  }
  void* p = pp.source ? pp.source->raw_alloc_with_stream(n, s)
                      : take_device(d, n, nullptr);
  if (!p) return nullptr;
  size_t usable = n;
  if (!pp.source) gpb_usable_size(d.pool, p, &usable);
  pp.blocks[p] = usable;
  return p;
}

void* Allocator::take(Device& d, size_t n, cudaStream_t s, MempoolId_t id,
                      uint32_t site) {
  if (id == kDevicePool) return take_device(d, n, s, site);
  return take_private(d, d.priv[id], n, s);
}

// Before an OOM: the frees still waiting for their streams, and the
// blocks of released private pools. True when anything came back.
bool Allocator::reclaim(Device& d) {
  gpb_stats_t before, after;
  if (gpb_pool_stats(d.pool, &before)) return false;
  gpb_pool_drain(d.pool);
  std::vector<MempoolId_t> idle;
  for (auto& [id, pp] : d.priv)
    if (pp.uses == 0 && !pp.idle.empty()) idle.push_back(id);
  for (auto& id : idle) release_idle(d, id);
  return gpb_pool_stats(d.pool, &after) == 0 &&
         after.block_bytes < before.block_bytes;
}

void* Allocator::malloc(int dev, size_t n, cudaStream_t s) {
  if (n == 0) return nullptr;
  auto ctx = context(true);
  Device& d = device(dev);
  uint32_t site = stacks_.on() ? d.sites.here(d.pool, stacks_) : 0;
  std::unique_lock<std::mutex> lk(d.mu);
  RelaxCapture relax(!d.captures.empty());
  if (!d.deferred.empty() && d.captures.empty()) flush_deferred(d);
  MempoolId_t id = pool_for(d, s);
  void* p = take(d, n, s, id, site);
  if (!p && reclaim(d)) {
    d.retries++;
    p = take(d, n, s, id, site);
  }
  if (!p) oom(d, lk, dev, n, s);
  d.live.emplace(p, Alloc{n, s, id, {}, ctx});
  d.bytes_in += static_cast<int64_t>(n);
  d.count_peak = std::max<int64_t>(d.count_peak, d.live.size());
  note(d, TraceEntry::ALLOC, dev, p, n, s, id, std::move(ctx));
  return p;
}

// Raises torch.cuda.OutOfMemoryError with gpubuddy's explanation, after
// the OOM observers (torch.cuda.memory._record_memory_history's dump).
void Allocator::oom(Device& d, std::unique_lock<std::mutex>& lk, int dev,
                    size_t n, cudaStream_t s) {
  d.ooms++;
  size_t fr = 0, total = 0;
  cudaMemGetInfo(&fr, &total);
  cudaGetLastError();
  note(d, TraceEntry::OOM, dev, reinterpret_cast<void*>(fr), n, s,
       kDevicePool, nullptr);
  gpb_stats_t st{};
  gpb_pool_stats(d.pool, &st);
  char why[768];
  gpb_torch_explain(dev, n, why, sizeof why);
  lk.unlock();
  std::vector<cca::OutOfMemoryObserver> obs;
  {
    std::lock_guard<std::mutex> g(hist_.mu);
    obs = oom_observers_;
  }
  for (auto& o : obs) o(dev, st.block_bytes, total, fr);
  TORCH_CHECK_WITH(OutOfMemoryError, false, why);
}

// ----------------------------------------------------------------- frees

// A device-pool block back to gpubuddy, stream-ordered on the stream it
// was allocated on. Streams record_stream named first make that stream
// wait for their work, so the block's next user waits for it too.
void Allocator::give_back(Device& d, void* p, const Alloc& a) {
  for (cudaStream_t u : a.uses) {
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
      continue;
    cudaEventRecord(ev, u);
    cudaStreamWaitEvent(a.stream, ev, 0);
    cudaEventDestroy(ev);
  }
  int rc = gpb_free_async(d.pool, p, a.stream);
  if (rc)  // a deleter cannot throw: say it, since it means a bug
    fprintf(stderr, "gpubuddy: free(%p): %s\n", p, gpb_error(rc).c_str());
}

// A private pool's block waits for the pool's next request, or goes back
// to the device pool once the pool is released.
void Allocator::free_private(Device& d, void* p, const Alloc& a) {
  auto it = d.priv.find(a.pool);
  if (it == d.priv.end()) return give_back(d, p, a);
  Private& pp = it->second;
  pp.idle.emplace(pp.blocks[p], std::make_pair(p, a.stream));
  if (pp.uses == 0 && d.captures.empty()) release_idle(d, a.pool);
}

static bool stream_capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
    cudaGetLastError();
    return true;  // the legacy stream during a capture: wait for its end
  }
  return st != cudaStreamCaptureStatusNone;
}

void Allocator::free(void* p) {
  if (!p) return;
  Device* dp = owner(p);
  if (!dp) {
    fprintf(stderr, "gpubuddy: free(%p): not allocated by gpubuddy\n", p);
    return;
  }
  Device& d = *dp;
  int dev = static_cast<int>(dp - dev_);
  auto ctx = context(false);
  std::lock_guard<std::mutex> lk(d.mu);
  RelaxCapture relax(!d.captures.empty());
  auto it = d.live.find(p);
  if (it == d.live.end()) {
    fprintf(stderr, "gpubuddy: free(%p): not live (freed twice?)\n", p);
    return;
  }
  Alloc a = std::move(it->second);
  d.live.erase(it);
  d.bytes_out += static_cast<int64_t>(a.size);
  note(d, TraceEntry::FREE_REQUESTED, dev, p, a.size, a.stream, a.pool, ctx);
  note(d, TraceEntry::FREE_COMPLETED, dev, p, a.size, a.stream, a.pool,
       std::move(ctx));
  if (a.pool != kDevicePool)
    free_private(d, p, a);
  else if (!d.captures.empty() && stream_capturing(a.stream))
    d.deferred.emplace_back(p, std::move(a));  // an event would be captured
  else
    give_back(d, p, a);
}

void Allocator::flush_deferred(Device& d) {
  for (auto& [p, a] : d.deferred) give_back(d, p, a);
  d.deferred.clear();
}

// A released private pool's idle blocks back to the device pool, once the
// device has finished the graphs that used them (as cudaFree would wait).
void Allocator::release_idle(Device& d, MempoolId_t id) {
  auto it = d.priv.find(id);
  if (it == d.priv.end()) return;
  Private& pp = it->second;
  if (!pp.idle.empty()) cudaDeviceSynchronize();
  for (auto& [size, blk] : pp.idle) {
    (void)size;
    if (pp.source)
      pp.source->raw_delete(blk.first);
    else
      gpb_free(d.pool, blk.first);
    pp.blocks.erase(blk.first);
  }
  pp.idle.clear();
  if (pp.uses == 0 && pp.blocks.empty()) d.priv.erase(it);
}

void Allocator::recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream s) {
  Device* dp = owner(ptr.get());
  if (!dp) return;  // not ours (a received IPC tensor, say)
  std::lock_guard<std::mutex> lk(dp->mu);
  auto it = dp->live.find(ptr.get());
  if (it == dp->live.end() || it->second.stream == s.stream()) return;
  auto& uses = it->second.uses;
  if (std::find(uses.begin(), uses.end(), s.stream()) == uses.end())
    uses.push_back(s.stream());
}

void* Allocator::getBaseAllocation(void* p, size_t* size) {
  Device* dp = owner(p);
  if (dp && size) {
    std::lock_guard<std::mutex> lk(dp->mu);
    auto it = dp->live.find(p);
    if (it != dp->live.end()) *size = it->second.size;
  }
  return p;
}

void Allocator::enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex to) {
  c10::cuda::CUDAGuard g(dev);
  cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled)
    cudaGetLastError();
  else
    C10_CUDA_CHECK(err);
}

// ----------------------------------------------------------------- stats

// PyTorch's counters from gpubuddy's: one pool, so every block is in the
// "large pool" and the small pool's rows stay 0. reserved_bytes is what
// the pool holds (a VMM pool's mapped memory, else its whole range), and
// inactive_split_bytes the part of it no allocation uses.
cda::DeviceStats Allocator::getDeviceStats(c10::DeviceIndex dev) {
  cda::DeviceStats out;
  Device* dp = existing(dev);
  if (!dp) return out;
  Device& d = *dp;
  std::lock_guard<std::mutex> lk(d.mu);
  gpb_stats_t st{};
  uint64_t held = 0, limit = 0;
  gpb_pool_stats(d.pool, &st);
  gpb_pool_memory(d.pool, &held, &limit);
  d.reserved_peak = std::max(d.reserved_peak, held);
  auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  int64_t live = i64(st.live_allocs), idle = i64(held) - i64(st.block_bytes);
  for (int k : {0, 2}) {  // StatType::AGGREGATE, StatType::LARGE_POOL
    stat_set(out.allocation[k], live, std::max(d.count_peak, live),
             i64(st.allocs - d.allocs0), i64(st.frees - d.frees0));
    stat_set(out.active[k], live, std::max(d.count_peak, live),
             i64(st.allocs - d.allocs0), i64(st.frees - d.frees0));
    stat_set(out.allocated_bytes[k], i64(st.block_bytes), i64(st.block_peak),
             d.bytes_in, d.bytes_out);
    stat_set(out.active_bytes[k], i64(st.block_bytes), i64(st.block_peak),
             d.bytes_in, d.bytes_out);
    stat_set(out.requested_bytes[k], i64(st.requested_bytes),
             i64(st.requested_peak), d.bytes_in, d.bytes_out);
    stat_set(out.reserved_bytes[k], i64(held), i64(d.reserved_peak),
             i64(d.reserved_peak), 0);
    stat_set(out.segment[k], 1, 1, 1, 0);
    stat_set(out.inactive_split_bytes[k], std::max<int64_t>(idle, 0),
             std::max<int64_t>(idle, 0), 0, 0);
  }
  out.num_alloc_retries = d.retries;
  out.num_ooms = d.ooms;
  out.num_device_alloc = 1;
  return out;
}

void Allocator::resetAccumulatedStats(c10::DeviceIndex dev) {
  Device* dp = existing(dev);
  if (!dp) return;
  std::lock_guard<std::mutex> lk(dp->mu);
  gpb_stats_t st{};
  gpb_pool_stats(dp->pool, &st);
  dp->allocs0 = st.allocs;
  dp->frees0 = st.frees;
  dp->bytes_in = dp->bytes_out = 0;
  dp->retries = dp->ooms = 0;
}

void Allocator::resetPeakStats(c10::DeviceIndex dev) {
  Device* dp = existing(dev);
  if (!dp) return;
  std::lock_guard<std::mutex> lk(dp->mu);
  gpb_pool_reset_peaks(dp->pool);
  uint64_t held = 0;
  gpb_pool_memory(dp->pool, &held, nullptr);
  dp->reserved_peak = held;
  dp->count_peak = static_cast<int64_t>(dp->live.size());
}

// cuDNN sizes its workspace from this: the largest block a request gets.
void Allocator::cacheInfo(c10::DeviceIndex dev, size_t* largest) {
  Device& d = device(dev);
  gpb_stats_t st{};
  gpb_pool_stats(d.pool, &st);
  *largest = st.largest_free;
}

// A plain pool holds its range for good; a VMM pool gives back the memory
// mapped under no live block (gpb_pool_trim). Either way the frees still
// waiting for their streams complete, and released private pools' blocks
// return to the device pool.
void Allocator::emptyCache(MempoolId_t id) {
  for (int i = 0; i < kMaxDevices; i++) {
    Device* dp = existing(i);
    if (!dp) continue;
    std::lock_guard<std::mutex> lk(dp->mu);
    if (!dp->captures.empty()) continue;
    flush_deferred(*dp);
    std::vector<MempoolId_t> ids;
    for (auto& [pid, pp] : dp->priv)
      if (pp.uses == 0 && (id == kDevicePool || pid == id)) ids.push_back(pid);
    for (auto& pid : ids) release_idle(*dp, pid);
    gpb_pool_drain(dp->pool);
    gpb_pool_trim(dp->pool);
  }
}

// Like PyTorch's: a cap on the bytes allocated, fraction x the device's
// memory, checked at each device-pool request.
void Allocator::setMemoryFraction(double fraction, c10::DeviceIndex dev) {
  TORCH_CHECK(fraction > 0 && fraction <= 1, "gpubuddy: invalid fraction ",
              fraction, ": expected (0, 1]");
  Device& d = device(dev);
  c10::cuda::CUDAGuard g(dev);
  size_t fr = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&fr, &total));
  std::lock_guard<std::mutex> lk(d.mu);
  d.fraction = fraction;
  d.cap = fraction >= 1 ? 0 : static_cast<size_t>(fraction * total);
}

// --------------------------------------------------------- private pools

void Allocator::createOrIncrefPool(c10::DeviceIndex dev, MempoolId_t id,
                                   std::shared_ptr<cca::CUDAAllocator> a) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  Private& pp = d.priv[id];
  pp.uses++;
  if (a && a.get() != this && !pp.source) pp.source = std::move(a);
}

void Allocator::beginAllocateToPool(c10::DeviceIndex dev, MempoolId_t id,
                                    std::function<bool(cudaStream_t)> f) {
  createOrIncrefPool(dev, id, nullptr);
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  for (auto& c : d.captures)
    TORCH_CHECK(c.id != id, "gpubuddy: already allocating to pool (",
                id.first, ", ", id.second, ")");
  d.captures.push_back({id, std::move(f)});
}

void Allocator::endAllocateToPool(c10::DeviceIndex dev, MempoolId_t id) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  auto& c = d.captures;
  c.erase(std::remove_if(c.begin(), c.end(),
                         [&](const Capture& x) { return x.id == id; }),
          c.end());
}

void Allocator::releasePool(c10::DeviceIndex dev, MempoolId_t id) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  auto it = d.priv.find(id);
  if (it == d.priv.end() || --it->second.uses > 0) return;
  if (d.captures.empty()) release_idle(d, id);
}

int Allocator::getPoolUseCount(c10::DeviceIndex dev, MempoolId_t id) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  auto it = d.priv.find(id);
  return it == d.priv.end() ? 0 : it->second.uses;
}

bool Allocator::checkPoolLiveAllocations(
    c10::DeviceIndex dev, MempoolId_t id,
    const std::unordered_set<void*>& expected) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  auto it = d.priv.find(id);
  if (it == d.priv.end()) return expected.empty();
  size_t live = 0;
  for (auto& [p, size] : it->second.blocks) {
    (void)size;
    if (!d.live.count(p)) continue;
    if (!expected.count(p)) return false;
    live++;
  }
  return live == expected.size();
}

std::shared_ptr<cca::AllocatorState> Allocator::getCheckpointState(
    c10::DeviceIndex dev, MempoolId_t id) {
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  auto st = std::make_shared<CheckpointState>();
  st->id = id;
  auto it = d.priv.find(id);
  if (it == d.priv.end()) return st;
  st->blocks = it->second.blocks;
  for (auto& [p, size] : st->blocks) {
    (void)size;
    auto l = d.live.find(p);
    if (l != d.live.end()) st->live.emplace(p, l->second);
  }
  return st;
}

// Makes the pool's live blocks those of the checkpoint: blocks live now
// but not then are freed into the pool (ptrs_freed), blocks live then but
// idle now are taken again (dataptrs_allocd). The pool never splits or
// merges its blocks, so each block of the checkpoint is still its own.
cca::CheckpointDelta Allocator::setCheckpointPoolState(
    c10::DeviceIndex dev, std::shared_ptr<cca::AllocatorState> as) {
  auto st = std::dynamic_pointer_cast<CheckpointState>(as);
  TORCH_CHECK(st, "gpubuddy: a checkpoint of another allocator");
  Device& d = device(dev);
  std::lock_guard<std::mutex> lk(d.mu);
  Private& pp = d.priv[st->id];
  cca::CheckpointDelta delta;
  for (auto& [p, size] : pp.blocks) {
    auto l = d.live.find(p);
    if (l == d.live.end() || st->live.count(p)) continue;
    pp.idle.emplace(size, std::make_pair(p, l->second.stream));
    d.live.erase(l);
    delta.ptrs_freed.push_back(p);
  }
  for (auto& [p, a] : st->live) {
    TORCH_CHECK(pp.blocks.count(p), "gpubuddy: the checkpoint's block ", p,
                " has left its pool");
    if (d.live.count(p)) continue;
    for (auto it = pp.idle.begin(); it != pp.idle.end(); ++it)
      if (it->second.first == p) {
        pp.idle.erase(it);
        break;
      }
    d.live.emplace(p, a);
    delta.dataptrs_allocd.emplace_back(
        p, p, &deleter, c10::Device(c10::DeviceType::CUDA, dev));
  }
  return delta;
}

// --------------------------------------------------------------- history

std::shared_ptr<c10::GatheredContext> Allocator::context(bool for_alloc) {
  if (!hist_.on.load(std::memory_order_relaxed)) return nullptr;
  cda::CreateContextFn rec;
  cda::RecordContext when;
  {
    std::lock_guard<std::mutex> g(hist_.mu);
    rec = hist_.recorder;
    when = hist_.when;
  }
  bool want = for_alloc ? when >= cda::RecordContext::STATE
                        : when == cda::RecordContext::ALL;
  return rec && want ? rec() : nullptr;
}

// One event to the trace trackers and the device's history ring. The
// caller holds d.mu (d.mu, then hist_.mu: the one lock order).
void Allocator::note(Device& d, TraceEntry::Action act, int dev, void* p,
                     size_t n, cudaStream_t s, MempoolId_t id,
                     std::shared_ptr<c10::GatheredContext> ctx) {
  if (!hist_.on.load(std::memory_order_relaxed) &&
      !hist_.tracked.load(std::memory_order_relaxed))
    return;
  std::lock_guard<std::mutex> g(hist_.mu);
  if (hist_.skip.count(static_cast<int>(act))) return;
  TraceEntry e(act, static_cast<c10::DeviceIndex>(dev),
               reinterpret_cast<size_t>(p), n, s, id,
               c10::getApproximateTime(), std::move(ctx),
               hist_.compile_context, hist_.user_metadata);
  for (auto& t : trackers_) t(e);
  size_t max = hist_.on ? hist_.max_entries : 0;
  if (max == 0) return;
  if (d.ring.size() < max) {
    d.ring.push_back(std::move(e));
  } else {
    d.ring[d.next] = std::move(e);
    d.next = (d.next + 1) % d.ring.size();
  }
}

void Allocator::recordHistory(bool on, cda::CreateContextFn recorder,
                              size_t max, cda::RecordContext when, bool clear,
                              const std::vector<std::string>& skip) {
  for (int i = 0; i < kMaxDevices; i++) {
    Device* dp = existing(i);
    if (!dp) continue;
    std::lock_guard<std::mutex> lk(dp->mu);
    // Off also forgets the history, as PyTorch's allocator does.
    if (clear || !on || dp->ring.size() > max) {
      dp->ring.clear();
      dp->next = 0;
    }
  }
  std::lock_guard<std::mutex> g(hist_.mu);
  hist_.recorder = on ? recorder : nullptr;
  hist_.when = on ? when : cda::RecordContext::NEVER;
  if (on) hist_.max_entries = max;
  hist_.skip.clear();
  for (auto& a : skip)
    hist_.skip.insert(static_cast<int>(cda::parseTraceEntryAction(a)));
  hist_.on = on;
}

// -------------------------------------------------------------- snapshot

// A run of the pool's blocks: one allocation's, or free ones.
struct Piece {
  uint64_t off, size, requested;
  bool used;
};

static int collect(const gpb_block_info_t* b, void* user) {
  auto& v = *static_cast<std::vector<Piece>*>(user);
  bool used = b->used != 0;
  if (!v.empty() && v.back().used == used &&
      (!used || b->alloc_offset == v.back().off))
    v.back().size += b->size;  // the same allocation, or free space
  else
    v.push_back({b->offset, b->size, used ? b->requested : 0, used});
  return 0;
}

// The pool as PyTorch's segments: a plain pool is one segment; a VMM
// pool's are the runs of 2 MiB granules under blocks, cut where a free
// run spans a whole granule (its memory is not held for the run).
void Allocator::snapshot_device(int dev, Device& d, cca::SnapshotInfo& out) {
  std::vector<Piece> pieces;
  gpb_pool_visit(d.pool, collect, &pieces);
  gpb_pool_info_t in;
  uint64_t held = 0, limit = 0;
  gpb_pool_info(d.pool, &in);
  gpb_pool_memory(d.pool, &held, &limit);
  bool vmm = limit != in.pool_size;
  const uint64_t g = vmm ? uint64_t{2} << 20 : 0;
  std::unordered_set<void*> idle;
  for (auto& [id, pp] : d.priv)
    for (auto& [size, blk] : pp.idle) idle.insert(blk.first);
  size_t first = out.segments.size();
  std::vector<char> keep;  // per segment: holds a block of the pool's
  cca::SegmentInfo* seg = nullptr;
  auto add = [&](uint64_t off, uint64_t size, const Piece* used) {
    if (!seg) {
      out.segments.emplace_back();
      keep.push_back(!vmm);  // a plain pool's one range is always held
      seg = &out.segments.back();
      seg->device = static_cast<c10::DeviceIndex>(dev);
      seg->address = d.lo + off;
      seg->is_large = true;
      seg->is_expandable = vmm;
    }
    cda::BlockInfo b;
    b.size = size;
    seg->total_size += size;
    if (used) {
      void* p = reinterpret_cast<void*>(d.lo + off);
      auto l = d.live.find(p);
      b.allocated = b.active = !idle.count(p);  // a private pool's idle one
      if (l != d.live.end()) {
        b.requested_size = l->second.size;
        b.context_when_allocated = l->second.ctx;
      } else if (b.allocated) {
        b.requested_size = used->requested;  // CuPy's, or a pending free
      }
      seg->requested_size += b.requested_size;
      if (b.allocated) {
        seg->allocated_size += size;
        seg->active_size += size;
      }
      keep.back() = 1;
    }
    seg->blocks.push_back(std::move(b));
  };
  for (auto& pc : pieces) {
    uint64_t a = pc.off, b = pc.off + pc.size;
    uint64_t g0 = g ? (a + g - 1) / g * g : 0, g1 = g ? b / g * g : 0;
    if (pc.used || !g || g1 <= g0) {
      add(pc.off, pc.size, pc.used ? &pc : nullptr);
      continue;
    }
    if (seg && g0 > a) add(a, g0 - a, nullptr);
    seg = nullptr;
    if (b > g1) add(g1, b - g1, nullptr);
  }
  // Drop the runs that hold no block (a VMM pool's free tail).
  size_t w = first;
  for (size_t i = first; i < out.segments.size(); i++) {
    if (!keep[i - first]) continue;
    if (w != i) out.segments[w] = std::move(out.segments[i]);
    w++;
  }
  out.segments.resize(w);
}

cca::SnapshotInfo Allocator::snapshot(MempoolId_t id, bool traces) {
  (void)id;  // one pool per device: every snapshot shows all of it
  cca::SnapshotInfo out;
  auto to_unix = clock_.makeConverter();
  for (int i = 0; i < kMaxDevices; i++) {
    Device* dp = existing(i);
    if (!dp) continue;
    std::lock_guard<std::mutex> lk(dp->mu);
    snapshot_device(i, *dp, out);
    if (!traces) continue;
    out.device_traces.resize(i + 1);
    auto& t = out.device_traces[i];
    for (size_t k = 0; k < dp->ring.size(); k++)
      t.push_back(dp->ring[(dp->next + k) % dp->ring.size()]);
    for (auto& e : t) e.time_.t_ = to_unix(e.time_.approx_t_) / 1000;
  }
  if (traces) out.device_traces.resize(std::max(out.device_traces.size(),
                                                size_t(count_)));
  out.config_metadata.expandable_segments = false;
  out.config_metadata.last_allocator_settings = "gpubuddy";
  return out;
}

// ------------------------------------------------------------------- IPC

// A plain pool is one cudaMalloc'd range: its IPC handle, and the
// tensor's offset in it, in the form PyTorch's own allocator writes, so
// the receiver may run either allocator. A VMM pool's pages have no such
// handle.
cca::ShareableHandle Allocator::shareIpcHandle(void* p) {
  Device* dp = owner(p);
  TORCH_CHECK(dp, "gpubuddy: cannot share ", p, ": not allocated by gpubuddy");
  gpb_pool_info_t in;
  uint64_t held = 0, limit = 0;
  gpb_pool_info(dp->pool, &in);
  gpb_pool_memory(dp->pool, &held, &limit);
  TORCH_CHECK(limit == in.pool_size,
              "gpubuddy: a CUDA tensor can be shared with another process "
              "(CUDA IPC) only from a plain pool, and this one maps memory "
              "on demand (VMM): use gpubuddy.torch.enable(vmm=False) in "
              "programs that send CUDA tensors between processes");
  cudaIpcMemHandle_t h;
  C10_CUDA_CHECK(cudaIpcGetMemHandle(&h, in.base));
  std::string s{kIpcVersion, kIpcMalloc};
  s.append(reinterpret_cast<const char*>(&h), sizeof h);
  return {static_cast<char*>(p) - static_cast<char*>(in.base), s};
}

std::shared_ptr<void> Allocator::getIpcDevPtr(std::string handle) {
  TORCH_CHECK(handle.size() == 2 + sizeof(cudaIpcMemHandle_t) &&
                  handle[0] <= kIpcVersion && handle[1] == kIpcMalloc,
              "gpubuddy: cannot open this CUDA IPC handle: only a cudaMalloc'd "
              "range's can be opened (the sender used expandable segments?)");
  std::lock_guard<std::mutex> g(ipc_mu_);
  auto& w = ipc_open_[handle];
  if (auto sp = w.lock()) return sp;
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data() + 2, sizeof h);
  void* ptr = nullptr;
  C10_CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
  int dev = c10::cuda::current_device();
  std::shared_ptr<void> sp(ptr, [dev](void* q) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev));
    cudaIpcCloseMemHandle(q);
  });
  w = sp;
  return sp;
}

} // namespace

// ------------------------------------------------------------- install

// Makes gpubuddy PyTorch's CUDA allocator; called once, through ctypes,
// before the first CUDA allocation. 0, or -1 with the reason in err.
extern "C" __attribute__((visibility("default"))) int gpbx_install(
    char* err, size_t len) {
  try {
    cca::CUDAAllocator* cur = cca::allocator.load();
    if (the_allocator && cur == the_allocator) return 0;
    if (cur && cur->initialized()) {
      snprintf(err, len, "PyTorch's CUDA allocator (%s) is already in use",
               cur->name().c_str());
      return -1;
    }
    // Never deleted: tensors freed at exit still call it.
    the_allocator = new Allocator();
    the_allocator->set_stacks(getenv("GPB_TORCH_STACKS"));
    cca::allocator.store(the_allocator);
    c10::SetAllocator(c10::DeviceType::CUDA, the_allocator);
    return 0;
  } catch (const std::exception& e) {
    snprintf(err, len, "%s", e.what());
    return -1;
  }
}
