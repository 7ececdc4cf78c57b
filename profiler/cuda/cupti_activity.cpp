#include "cupti_activity.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "placelab/profiler/gpu_check.h"

namespace placelab::gpu {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned activity buffers

std::mutex g_mutex;
std::vector<ActivityRecord> g_records;  // guarded by g_mutex
std::atomic<uint64_t> g_dropped{0};
std::atomic<bool> g_active{false};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// Reads the fields shared by every version of a record type. CUPTI appends fields to newer record
// versions and keeps the leading ones in place, so the oldest layout that has the needed fields
// (Kernel4, Memcpy, MemcpyPtoP — present in CUDA 10 to 13) reads records of any newer version.
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::vector<ActivityRecord> got;
  CUpti_Activity* record = nullptr;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    ActivityRecord r;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel4*>(record);
        r.kind = ActivityRecord::Kind::kKernel;
        r.correlation_id = k->correlationId;
        r.start_ns = k->start;
        r.end_ns = k->end;
        r.device = k->deviceId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy*>(record);
        r.kind = ActivityRecord::Kind::kMemcpy;
        r.correlation_id = m->correlationId;
        r.start_ns = m->start;
        r.end_ns = m->end;
        r.device = m->deviceId;
        r.bytes = m->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP*>(record);
        r.kind = ActivityRecord::Kind::kPeerCopy;
        r.correlation_id = m->correlationId;
        r.start_ns = m->start;
        r.end_ns = m->end;
        r.device = m->deviceId;
        r.src_device = m->srcDeviceId;
        r.dst_device = m->dstDeviceId;
        r.bytes = m->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        r.kind = ActivityRecord::Kind::kExternalCorrelation;
        r.correlation_id = e->correlationId;
        r.external_id = e->externalId;
        break;
      }
      default: continue;
    }
    got.push_back(r);
  }
  size_t dropped = 0;
  // A callback must not throw; a failing query just reports nothing dropped.
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.insert(g_records.end(), got.begin(), got.end());
}

// CUPTI emits an external correlation record only ahead of an API activity record, so the runtime
// and driver API kinds are on too (their records are skipped): cuBLAS and cuDNN launch through
// either API.
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

}  // namespace

ActivityCollector::ActivityCollector() {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true)) throw Error("a CUPTI ActivityCollector is already active");
  try {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_records.clear();
    }
    g_dropped = 0;
    PLACELAB_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    for (CUpti_ActivityKind k : kKinds) PLACELAB_CUPTI_CHECK(cuptiActivityEnable(k));
  } catch (...) {
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    g_active = false;
    throw;
  }
}

ActivityCollector::~ActivityCollector() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  g_active = false;
}

void ActivityCollector::push(uint64_t external_id) {
  PLACELAB_CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, external_id));
}

void ActivityCollector::pop() {
  uint64_t id = 0;
  PLACELAB_CUPTI_CHECK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id));
}

std::vector<ActivityRecord> ActivityCollector::take() {
  PLACELAB_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<ActivityRecord> out;
  out.swap(g_records);
  return out;
}

uint64_t ActivityCollector::dropped() const { return g_dropped.load(); }

}  // namespace placelab::gpu
