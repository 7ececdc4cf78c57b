// The BFC replay (allocator.h). Not a hot path: one replay per reported step, so ordered
// containers keep the best-fit search and the neighbour merges short and obviously right.
#include "placelab/sim/allocator.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "placelab/core/error.h"

namespace placelab {
namespace {

constexpr int64_t kMinAllocation = 256;                     // BFC's kMinAllocationSize
constexpr int64_t kMaxInternalFragmentation = 128LL << 20;  // BFC never pads a request by more

int64_t rounded(int64_t bytes) { return (bytes + kMinAllocation - 1) / kMinAllocation * kMinAllocation; }

// One region of chunks, keyed by offset; free chunks are also indexed by (size, offset), which is
// the order BFC's size-class bins search in (by class, then by size and address within a class).
class BfcRegion {
 public:
  explicit BfcRegion(int64_t size) {
    chunks_.emplace(0, Chunk{size, false});
    free_.emplace(size, 0);
  }

  // The offset of the chunk given out for `bytes`, or -1 when no free chunk fits.
  int64_t allocate(int64_t bytes) {
    const int64_t want = rounded(bytes);
    auto best = free_.lower_bound({want, -1});
    if (best == free_.end()) return -1;
    const auto [size, offset] = *best;
    free_.erase(best);
    Chunk& c = chunks_.at(offset);
    if (size >= 2 * want || size - want >= kMaxInternalFragmentation) {
      c.size = want;
      chunks_.emplace(offset + want, Chunk{size - want, false});
      free_.emplace(size - want, offset + want);
    }
    c.used = true;
    in_use_ += c.size;
    return offset;
  }

  void release(int64_t offset) {
    auto it = chunks_.find(offset);
    PLACELAB_CHECK(it != chunks_.end() && it->second.used) << "BFC replay: no chunk in use at " << offset;
    it->second.used = false;
    in_use_ -= it->second.size;
    if (auto next = std::next(it); next != chunks_.end() && !next->second.used) {
      free_.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      chunks_.erase(next);
    }
    if (it != chunks_.begin()) {
      if (auto prev = std::prev(it); !prev->second.used) {
        free_.erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        chunks_.erase(it);
        it = prev;
      }
    }
    free_.emplace(it->second.size, it->first);
  }

  int64_t in_use() const { return in_use_; }
  int64_t largest_free() const { return free_.empty() ? 0 : free_.rbegin()->first; }

 private:
  struct Chunk {
    int64_t size;
    bool used;
  };
  std::map<int64_t, Chunk> chunks_;
  std::set<std::pair<int64_t, int64_t>> free_;
  int64_t in_use_ = 0;
};

}  // namespace

BfcOutcome replay_bfc(const OpGraph& graph, const SimResult& result, DeviceId device, int64_t capacity_bytes) {
  if (result.memory_timeline.empty())
    throw Error("replay_bfc: the result has no memory timeline (simulate with SimOptions::record_timeline)");
  PLACELAB_CHECK(capacity_bytes >= 0) << "replay_bfc: capacity " << capacity_bytes;
  BfcRegion region(capacity_bytes / kMinAllocation * kMinAllocation);
  BfcOutcome out;
  auto fail = [&](double time, uint32_t buffer, int64_t bytes) {
    out.fits = false;
    out.failed_at_s = time;
    out.failed_buffer = buffer;
    out.failed_request_bytes = bytes;
    out.free_bytes = capacity_bytes / kMinAllocation * kMinAllocation - region.in_use();
    out.largest_free_chunk = region.largest_free();
  };

  // Persistent chunks: the ops that ran on `device`, in id order.
  std::vector<OpId> resident;
  for (const TimelineEvent& e : result.timeline)
    if (e.kind == TimelineEvent::Kind::kOp && e.device == device && graph.op(e.op).persistent_bytes > 0)
      resident.push_back(e.op);
  std::sort(resident.begin(), resident.end());
  for (OpId op : resident) {
    if (region.allocate(graph.op(op).persistent_bytes) < 0) {
      fail(0.0, MemorySample::kPersistent, graph.op(op).persistent_bytes);
      return out;
    }
  }
  out.peak_bytes = region.in_use();

  std::unordered_map<uint32_t, int64_t> live;  // buffer → chunk offset
  for (const MemorySample& s : result.memory_timeline) {
    if (s.device != device || s.buffer == MemorySample::kPersistent) continue;
    if (s.change > 0) {
      const int64_t offset = region.allocate(s.change);
      if (offset < 0) {
        fail(s.time_s, s.buffer, s.change);
        return out;
      }
      PLACELAB_CHECK(live.emplace(s.buffer, offset).second) << "BFC replay: buffer " << s.buffer << " allocated twice";
      out.peak_bytes = std::max(out.peak_bytes, region.in_use());
    } else if (s.change < 0) {
      auto it = live.find(s.buffer);
      PLACELAB_CHECK(it != live.end()) << "BFC replay: buffer " << s.buffer << " freed before it was allocated";
      region.release(it->second);
      live.erase(it);
    }
  }
  return out;
}

}  // namespace placelab
