#include "placelab/profiler/gpu_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "placelab/core/error.h"

namespace placelab {
namespace {

namespace fs = std::filesystem;
constexpr const char* kModule = "libplacelab_gpu.so";

fs::path executable_dir() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  return fs::path(std::string(buf.data(), static_cast<std::size_t>(n))).parent_path();
}

// Loads the module once; throws InputError (every later call again) when it cannot.
const detail::GpuBackendTable& table() {
  static std::once_flag once;
  static const detail::GpuBackendTable* loaded = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const std::string path = gpu_backend_path();
    if (path.empty()) {
      failure = std::string("the GPU backend module ") + kModule + " was not found next to this executable, in " +
                "../lib/placelab/ beside it, nor at $PLACELAB_GPU_BACKEND (build placelab with the CUDA toolkit present)";
      return;
    }
    // RTLD_LOCAL: the CUDA libraries' symbols stay inside the module.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      failure = "cannot load the GPU backend " + path + ": " + (why ? why : "unknown dlopen error");
      return;
    }
    using Entry = const detail::GpuBackendTable* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "placelab_gpu_backend_v1"));
    const detail::GpuBackendTable* t = entry ? entry() : nullptr;
    if (!t || t->version != detail::kGpuBackendVersion) {
      failure = "the GPU backend " + path + " is not one this placelab can use (another version?)";
      return;
    }
    loaded = t;
  });
  if (!loaded) throw InputError(failure);
  return *loaded;
}

void rethrow(const detail::GpuBackendError& e) {
  if (e.kind == detail::GpuBackendError::kInput) throw InputError(e.message);
  if (e.kind != detail::GpuBackendError::kNone) throw Error(e.message);
}

}  // namespace

std::string no_gpu_message(int status, std::string_view status_name, std::string_view description, int count) {
  // cudaErrorInsufficientDriver (35) and cudaErrorNoDevice (100): the two answers of a machine
  // without a usable NVIDIA GPU (cuda_runtime_api.h); anything else is said as CUDA says it.
  std::string what;
  if (status == 35)
    what = "no NVIDIA driver is loaded, or it is older than this CUDA runtime";
  else if (status == 100)
    what = "the driver sees no CUDA-capable device";
  else if (status == 0)
    what = "the driver reports " + std::to_string(count) + " CUDA devices";
  else
    what = "the CUDA runtime failed";
  std::string looked = "looked for CUDA devices with cudaGetDeviceCount";
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) looked += " (CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\")";
  std::string m = "no GPU found: " + looked + ": " + what;
  if (status != 0) m += " (" + std::string(status_name) + ", " + std::to_string(status) + ": " + std::string(description) + ")";
  return m;
}

std::string gpu_backend_path() {
  if (const char* env = std::getenv("PLACELAB_GPU_BACKEND"); env && *env) return fs::exists(env) ? env : "";
  const fs::path dir = executable_dir();
  if (dir.empty()) return {};
  for (const fs::path& p : {dir / kModule, dir / ".." / "lib" / "placelab" / kModule})
    if (std::error_code ec; fs::exists(p, ec)) return p.string();
  return {};
}

CalibrationResult calibrate_gpu(const GpuCalibrationOptions& options) {
  const detail::GpuBackendTable& t = table();
  CalibrationResult out;
  detail::GpuBackendError error;
  t.calibrate(options, out, error);
  rethrow(error);
  return out;
}

ExecutionResult run_on_gpu(const OpGraph& graph, const Machine& machine, std::span<const DeviceId> placement,
                           const CudaExecutorOptions& options) {
  const detail::GpuBackendTable& t = table();
  ExecutionResult out;
  detail::GpuBackendError error;
  t.run(graph, machine, placement, options, out, error);
  rethrow(error);
  return out;
}

}  // namespace placelab
