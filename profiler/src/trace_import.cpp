#include "placelab/profiler/trace_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "placelab/graph/error.h"
#include "placelab/graph/json_locator.h"
#include "placelab/graph/numbers.h"
#include "measure_util.h"

namespace placelab {
namespace {

using detail::median;

using json = nlohmann::json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// An event's "args" object (a shared empty object when absent), by reference: callers keep
// pointers to it while the document lives.
const json& args_of(const json& e) {
  static const json kEmpty = json::object();
  auto it = e.find("args");
  return it != e.end() ? *it : kEmpty;
}

// A number that Kineto writes either as a JSON number or as a decimal string ("size": "2560").
std::optional<double> number_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return d;
  }
  return std::nullopt;
}

std::optional<double> arg_number(const json& args, std::initializer_list<const char*> keys) {
  if (!args.is_object()) return std::nullopt;
  for (const char* k : keys) {
    auto it = args.find(k);
    if (it != args.end())
      if (auto d = number_of(*it)) return d;
  }
  return std::nullopt;
}

std::string arg_string(const json& args, const char* key) {
  if (!args.is_object()) return {};
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// pid/tid are numbers in Kineto host events but strings for its synthetic rows ("Spans").
std::string id_text(const json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return std::to_string(it->get<double>());
  return {};
}

std::string iso_utc(double epoch_s) {
  std::time_t t = static_cast<std::time_t>(epoch_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// "[1, 2]" or "2" → the integers in it; one too large for int64_t is left out.
std::vector<int64_t> ints_in(std::string_view text) {
  std::vector<int64_t> out;
  std::string cur;
  const auto flush = [&] {
    if (!cur.empty() && cur != "-")
      if (auto v = parse_number<int64_t>(cur)) out.push_back(*v);
    cur.clear();
  };
  for (char c : text) {
    if ((c >= '0' && c <= '9') || (c == '-' && cur.empty())) cur += c;
    else flush();
  }
  flush();
  return out;
}

// A concrete int-list input (stride, padding): its first value, `fallback` when not recorded.
int64_t concrete_first(std::span<const std::string> concrete, std::size_t index, int64_t fallback) {
  if (index >= concrete.size()) return fallback;
  std::vector<int64_t> v = ints_in(concrete[index]);
  return v.empty() ? fallback : v.front();
}

const std::set<std::string, std::less<>>& elementwise_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "aten::add",       "aten::add_",          "aten::sub",           "aten::sub_",        "aten::mul",
      "aten::mul_",      "aten::div",           "aten::div_",          "aten::relu",        "aten::relu_",
      "aten::sigmoid",   "aten::sigmoid_",      "aten::tanh",          "aten::tanh_",       "aten::gelu",
      "aten::silu",      "aten::silu_",         "aten::threshold_backward", "aten::clamp_min", "aten::clamp_min_",
      "aten::copy_",     "aten::fill_",         "aten::zero_",         "aten::neg",         "aten::exp",
      "aten::sqrt",      "aten::rsqrt",         "aten::pow",           "aten::addcmul_",    "aten::addcdiv_",
      "aten::where",     "aten::dropout",       "aten::native_dropout", "aten::gelu_backward",
      "aten::sigmoid_backward", "aten::tanh_backward", "aten::mse_loss_backward", "aten::clone",
      "aten::contiguous",
  };
  return ops;
}

struct CopyKindEntry {
  const char* token;
  const char* kind;
};
constexpr CopyKindEntry kCopyKinds[] = {{"HtoD", "HtoD"}, {"DtoH", "DtoH"}, {"DtoD", "DtoD"}, {"PtoP", "PtoP"},
                                        {"HtoH", "HtoH"}, {"HostToDevice", "HtoD"}, {"DeviceToHost", "DtoH"},
                                        {"DeviceToDevice", "DtoD"}, {"PeerToPeer", "PtoP"}};

// ---------------------------------------------------------------------------------------------
// Collected events, format independent.

struct KernelRec {
  int64_t device = 0;
  double dur_s = 0;
  std::string op;                           // attributed op type; "" when unattributed
  int64_t instance = -1;                    // op instance id (same id = same op execution)
  std::optional<KernelSignature> signature;  // of the instance
  int step = -1;                            // index into steps; -1 outside any step
  bool host = false;                        // TF CPU op (not a GPU kernel)
};

struct CopyRec {
  std::string kind;
  int64_t device = -1;      // the GPU that ran it; -1 none
  int64_t peer = -1;        // PtoP: the other GPU when recorded
  bool peer_is_dst = true;  // PtoP: `device` is the source and `peer` the destination
  double bytes = -1;        // -1 unknown
  double dur_s = 0;
};

struct Collected {
  TraceFormat format = TraceFormat::kAuto;
  std::string gpu_name;
  std::string host;
  std::string created;
  int steps = 0;
  int64_t memsets = 0;
  std::vector<KernelRec> kernels;
  std::vector<CopyRec> copies;
};

[[noreturn]] void fail(std::string_view origin, int line, const std::string& what) {
  throw InputError(std::string(origin) + ":" + std::to_string(line) + ": " + what);
}

// ---------------------------------------------------------------------------------------------
// Kineto

struct HostEvent {
  double ts = 0, end = 0;
  const json* ev = nullptr;
  std::string_view name;
  bool annotation = false;  // user_annotation rather than cpu_op
  int parent = -1;          // innermost enclosing event on the same thread
};

struct Thread {
  std::vector<HostEvent> events;  // sorted by (ts, longer first); parents resolved
  void finalize() {
    std::sort(events.begin(), events.end(), [](const HostEvent& a, const HostEvent& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    std::vector<int> stack;
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      while (!stack.empty() && events[stack.back()].end < events[i].ts) stack.pop_back();
      events[i].parent = stack.empty() ? -1 : stack.back();
      stack.push_back(i);
    }
  }
  // Innermost event that contains time t, or -1.
  int innermost(double t) const {
    auto it = std::upper_bound(events.begin(), events.end(), t, [](double v, const HostEvent& e) { return v < e.ts; });
    int i = static_cast<int>(it - events.begin()) - 1;
    while (i >= 0 && events[i].end < t) i = events[i].parent;
    return i;
  }
};

struct Launch {
  std::string thread;
  double ts = 0;
  const json* args = nullptr;
};

std::vector<std::vector<int64_t>> input_dims_of(const json& args) {
  std::vector<std::vector<int64_t>> dims;
  auto it = args.find("Input Dims");
  if (it == args.end() || !it->is_array()) return dims;
  for (const json& d : *it) {
    std::vector<int64_t> v;
    if (d.is_array())
      for (const json& x : d)
        if (x.is_number_integer()) v.push_back(x.get<int64_t>());
    dims.push_back(std::move(v));
  }
  return dims;
}

std::vector<std::string> concrete_inputs_of(const json& args) {
  std::vector<std::string> out;
  auto it = args.find("Concrete Inputs");
  if (it == args.end() || !it->is_array()) return out;
  for (const json& c : *it) out.push_back(c.is_string() ? c.get<std::string>() : c.dump());
  return out;
}

Collected collect_kineto(const json& root, const json& events) {
  Collected c;
  c.format = TraceFormat::kKineto;
  if (root.is_object()) {
    auto dp = root.find("deviceProperties");
    if (dp != root.end() && dp->is_array() && !dp->empty() && (*dp)[0].is_object())
      c.gpu_name = arg_string((*dp)[0], "name");
    c.host = arg_string(root, "host_name");
  }

  std::unordered_map<std::string, Thread> threads;
  std::unordered_map<int64_t, Launch> launches;  // correlation → runtime call
  struct Step {
    double ts, end;
    int64_t number;
  };
  std::vector<Step> steps;
  struct GpuEvent {
    const json* ev;
    bool kernel;
  };
  std::vector<GpuEvent> gpu;
  double first_ts = std::numeric_limits<double>::infinity();

  for (const json& e : events) {
    if (!e.is_object()) continue;
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || *ph != "X") continue;
    const std::string cat = arg_string(e, "cat");
    const std::string_view name = e.contains("name") && e["name"].is_string() ? std::string_view(e["name"].get_ref<const std::string&>()) : std::string_view{};
    const double ts = number_of(e.value("ts", json())).value_or(0.0);
    const double dur = number_of(e.value("dur", json())).value_or(0.0);
    const json& args = args_of(e);
    if (cat == "kernel") {
      gpu.push_back({&e, true});
      first_ts = std::min(first_ts, ts);
    } else if (cat == "gpu_memcpy") {
      gpu.push_back({&e, false});
    } else if (cat == "gpu_memset") {
      ++c.memsets;
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      if (auto corr = arg_number(args, {"correlation"}))
        launches[static_cast<int64_t>(*corr)] = {id_text(e, "pid") + "/" + id_text(e, "tid"), ts, &args};
    } else if (cat == "cpu_op" || cat == "user_annotation") {
      if (starts_with(name, "ProfilerStep#")) {
        steps.push_back({ts, ts + dur, ints_in(name.substr(13)).empty() ? 0 : ints_in(name.substr(13)).front()});
        continue;
      }
      threads[id_text(e, "pid") + "/" + id_text(e, "tid")].events.push_back(
          {ts, ts + dur, &e, name, cat == "user_annotation", -1});
    }
  }
  for (auto& [_, t] : threads) t.finalize();
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.ts < b.ts; });
  c.steps = static_cast<int>(steps.size());

  if (std::isfinite(first_ts)) {
    if (root.is_object() && root.contains("baseTimeNanoseconds")) {
      if (auto base = number_of(root["baseTimeNanoseconds"])) c.created = iso_utc(*base * 1e-9 + first_ts * 1e-6);
    } else if (first_ts > 1e15) {  // epoch microseconds (after 2001): a wall-clock time
      c.created = iso_utc(first_ts * 1e-6);
    }
  }

  // Op instances: the host event a kernel is attributed to, identified by its address.
  std::unordered_map<const json*, int64_t> instance_ids;
  auto step_of = [&](double t) {
    auto it = std::upper_bound(steps.begin(), steps.end(), t, [](double v, const Step& s) { return v < s.ts; });
    if (it == steps.begin()) return -1;
    --it;
    return t <= it->end ? static_cast<int>(it - steps.begin()) : -1;
  };

  for (const GpuEvent& g : gpu) {
    const json& e = *g.ev;
    const json& args = args_of(e);
    const double dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
    const int64_t device = static_cast<int64_t>(arg_number(args, {"device"}).value_or(0.0));
    const auto corr = arg_number(args, {"correlation"});
    const Launch* launch = nullptr;
    if (corr) {
      auto it = launches.find(static_cast<int64_t>(*corr));
      if (it != launches.end()) launch = &it->second;
    }
    if (!g.kernel) {
      CopyRec r;
      const std::string name = arg_string(e, "name");
      auto kind = memcpy_kind(name);
      if (!kind) kind = memcpy_kind(arg_string(args, "kind"));
      r.kind = kind.value_or("unknown");
      r.device = device;
      r.dur_s = dur_s;
      if (auto b = arg_number(args, {"bytes"})) r.bytes = *b;
      else if (launch)
        if (auto lb = arg_number(*launch->args, {"size", "bytes", "count"})) r.bytes = *lb;
      if (r.kind == "PtoP") {
        if (auto dst = arg_number(args, {"dstDevice", "dst device", "toDevice"})) r.peer = static_cast<int64_t>(*dst);
        if (auto src = arg_number(args, {"srcDevice", "src device", "fromDevice"})) {
          r.device = static_cast<int64_t>(*src);
        }
      }
      c.copies.push_back(r);
      continue;
    }
    KernelRec k;
    k.device = device;
    k.dur_s = dur_s;
    if (launch) {
      k.step = step_of(launch->ts);
      auto th = threads.find(launch->thread);
      if (th != threads.end()) {
        const Thread& t = th->second;
        const int inner = t.innermost(launch->ts);
        int chosen = -1, first_op = -1, first_annotation = -1;
        for (int i = inner; i >= 0; i = t.events[i].parent) {
          const HostEvent& h = t.events[i];
          if (!h.annotation && starts_with(h.name, "aten::")) chosen = i;  // keeps the outermost
          if (!h.annotation && first_op < 0) first_op = i;
          if (h.annotation && first_annotation < 0) first_annotation = i;
        }
        if (chosen < 0) chosen = first_op >= 0 ? first_op : first_annotation;
        if (chosen >= 0) {
          const HostEvent& h = t.events[chosen];
          k.op = std::string(h.name);
          auto [it, inserted] = instance_ids.emplace(h.ev, static_cast<int64_t>(instance_ids.size()));
          k.instance = it->second;
          const json& hargs = args_of(*h.ev);
          if (hargs.is_object() && hargs.contains("Input Dims")) {
            auto dims = input_dims_of(hargs);
            auto concrete = concrete_inputs_of(hargs);
            k.signature = signature_for_torch_op(k.op, dims, concrete);
          }
        }
      }
    }
    c.kernels.push_back(std::move(k));
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// TensorFlow timeline

struct TfProcess {
  enum Kind { kOther, kDeviceCompute, kStreamAll, kStream, kMemcpy } kind = kOther;
  bool gpu = false;
  int64_t device = 0;
  std::string name;
};

TfProcess classify_tf_process(const std::string& name) {
  TfProcess p;
  p.name = name;
  static const std::regex dev_re(R"((?:device:|/)(GPU|CPU|gpu|cpu):(\d+))");
  std::smatch m;
  if (!std::regex_search(name, m, dev_re)) return p;
  const auto device = parse_number<int64_t>(m[2].str());
  if (!device) return p;  // a device number beyond int64_t: not a device this importer knows
  p.gpu = m[1] == "GPU" || m[1] == "gpu";
  p.device = *device;
  if (name.find("Tensors") != std::string::npos || name.find("Allocators") != std::string::npos) return p;
  if (name.find("memcpy") != std::string::npos) p.kind = TfProcess::kMemcpy;
  else if (name.find("stream:all") != std::string::npos) p.kind = TfProcess::kStreamAll;
  else if (name.find("stream:") != std::string::npos) p.kind = TfProcess::kStream;
  else if (name.find("Compute") != std::string::npos) p.kind = TfProcess::kDeviceCompute;
  return p;
}

Collected collect_tensorflow(const json& events, const TraceImportOptions& options) {
  Collected c;
  c.format = TraceFormat::kTensorFlow;
  std::unordered_map<std::string, TfProcess> procs;
  for (const json& e : events)
    if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args"))
      procs[id_text(e, "pid")] = classify_tf_process(arg_string(e["args"], "name"));

  // Kernel source per GPU: "stream:all" when present (the per-stream rows repeat its events),
  // else the per-stream rows, else the device's compute row (no GPU tracer: op schedule times).
  std::map<int64_t, int> best_kind;  // GPU device → chosen process kind rank
  auto rank = [](TfProcess::Kind k) {
    return k == TfProcess::kStreamAll ? 3 : k == TfProcess::kStream ? 2 : k == TfProcess::kDeviceCompute ? 1 : 0;
  };
  std::set<std::string> pids_with_events;
  for (const json& e : events)
    if (e.is_object() && e.value("ph", "") == "X") pids_with_events.insert(id_text(e, "pid"));
  for (const auto& [pid, p] : procs)
    if (p.gpu && rank(p.kind) > 0 && pids_with_events.count(pid))
      best_kind[p.device] = std::max(best_kind[p.device], rank(p.kind));
  for (const auto& [pid, p] : procs)
    if (p.gpu && c.gpu_name.empty() && p.kind != TfProcess::kOther) c.gpu_name = "GPU:" + std::to_string(p.device);

  static const std::regex bytes_re(R"((\d+)\s*bytes)");
  std::unordered_map<std::string, int64_t> instance_ids;
  for (const json& e : events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    auto pit = procs.find(id_text(e, "pid"));
    if (pit == procs.end()) continue;
    const TfProcess& p = pit->second;
    const json& args = args_of(e);
    const std::string name = arg_string(e, "name");
    const std::string op = arg_string(args, "op").empty() ? name : arg_string(args, "op");
    const double dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
    auto kind = memcpy_kind(op);
    if (!kind) kind = memcpy_kind(name);
    if (p.kind == TfProcess::kMemcpy || kind) {
      CopyRec r;
      r.kind = kind.value_or("unknown");
      r.device = p.gpu ? p.device : -1;
      r.dur_s = dur_s;
      if (auto b = arg_number(args, {"bytes"})) r.bytes = *b;
      else
        for (const std::string& text : {name, arg_string(args, "name"), arg_string(args, "label")}) {
          std::smatch m;
          if (std::regex_search(text, m, bytes_re)) {
            r.bytes = std::stod(m[1]);
            break;
          }
        }
      c.copies.push_back(r);
      continue;
    }
    KernelRec k;
    if (p.gpu) {
      if (rank(p.kind) == 0 || rank(p.kind) != best_kind[p.device]) continue;
      k.device = p.device;
    } else if (p.kind == TfProcess::kDeviceCompute) {
      k.host = true;
    } else {
      continue;
    }
    k.dur_s = dur_s;
    k.op = op;
    k.step = 0;
    const std::string node = arg_string(args, "name").empty() ? name : arg_string(args, "name");
    auto [it, inserted] = instance_ids.emplace((k.host ? "cpu/" : "gpu" + std::to_string(k.device) + "/") + node,
                                               static_cast<int64_t>(instance_ids.size()));
    k.instance = it->second;
    if (options.graph)
      if (auto id = options.graph->find(node)) {
        const KernelSignature& sig = options.graph->op(*id).kernel;
        if (sig.cls != KernelClass::kNoop) k.signature = sig;
      }
    c.kernels.push_back(std::move(k));
  }
  c.steps = c.kernels.empty() ? 0 : 1;
  return c;
}

// ---------------------------------------------------------------------------------------------
// From collected events to a calibration and a report.

TraceImport build(const Collected& c, std::string_view origin, const TraceImportOptions& options) {
  TraceImport out;
  ImportReport& rep = out.report;
  Calibration& cal = out.calibration;
  rep.origin = std::string(origin);
  rep.format = c.format;
  rep.gpu_name = c.gpu_name;
  rep.steps = c.steps;
  rep.memsets = c.memsets;
  cal.backend = "trace";
  cal.host = c.host;
  cal.created = c.created;

  std::set<int64_t> ids;
  for (const KernelRec& k : c.kernels)
    if (!k.host) ids.insert(k.device);
  for (const CopyRec& r : c.copies) {
    if (r.device >= 0) ids.insert(r.device);
    if (r.peer >= 0) ids.insert(r.peer);
  }
  int64_t index = 0;
  for (int64_t id : ids) rep.devices[id] = options.gpu_prefix + std::to_string(options.renumber_devices ? index++ : id);
  auto device_name = [&](const KernelRec& k) { return k.host ? options.host_device : rep.devices.at(k.device); };

  // Kernel totals and per-op-instance times.
  rep.step_kernel_s.assign(static_cast<std::size_t>(std::max(c.steps, 0)), 0.0);
  double in_steps = 0;
  struct Instance {
    std::string device, op;
    std::optional<KernelSignature> sig;
    double total_s = 0;
    int64_t kernels = 0;
  };
  std::map<int64_t, Instance> instances;
  std::map<std::string, TraceOpSummary> by_op;
  for (const KernelRec& k : c.kernels) {
    if (!k.host) {
      ++rep.kernels;
      rep.total_kernel_s += k.dur_s;
      if (k.step >= 0 && k.step < c.steps) {
        rep.step_kernel_s[static_cast<std::size_t>(k.step)] += k.dur_s;
        in_steps += k.dur_s;
      }
    }
    if (k.instance < 0) {
      if (!k.host) ++rep.unattributed_kernels;
      continue;
    }
    Instance& in = instances[k.instance];
    if (in.kernels == 0) {
      in.device = device_name(k);
      in.op = k.op;
      in.sig = k.signature;
    }
    in.total_s += k.dur_s;
    ++in.kernels;
  }
  // Steps that launched nothing (the profiler's closing step marker) would dilute the mean.
  int busy_steps = 0;
  for (double s : rep.step_kernel_s) busy_steps += s > 0;
  rep.kernel_time_per_step_s = busy_steps > 0 ? in_steps / busy_steps : rep.total_kernel_s;

  std::map<std::string, std::unordered_map<KernelSignature, std::vector<double>, KernelSignatureHash>> times;
  std::set<std::string> without;
  for (const auto& [_, in] : instances) {
    TraceOpSummary& s = by_op[in.op];
    s.op = in.op;
    ++s.calls;
    s.kernels += in.kernels;
    s.total_s += in.total_s;
    if (in.sig && in.total_s > 0) {
      ++s.with_signature;
      times[in.device][*in.sig].push_back(in.total_s);
    } else {
      without.insert(in.op);
    }
  }
  for (auto& [_, s] : by_op) rep.ops.push_back(s);
  std::sort(rep.ops.begin(), rep.ops.end(), [](const TraceOpSummary& a, const TraceOpSummary& b) {
    return a.total_s != b.total_s ? a.total_s > b.total_s : a.op < b.op;
  });
  rep.ops_without_signature.assign(without.begin(), without.end());

  // Copies: per (device, kind) for the report; HtoD / DtoH / PtoP become device-pair copy fits,
  // DtoD becomes the copy kernel class of its device (a copy inside one device's memory).
  std::map<std::pair<std::string, std::string>, std::vector<const CopyRec*>> groups;
  for (const CopyRec& r : c.copies)
    groups[{r.device >= 0 ? rep.devices.at(r.device) : std::string{}, r.kind}].push_back(&r);
  auto fit_or_aggregate = [](const std::vector<FitSample>& samples, double bytes, double seconds, bool& fitted) {
    fitted = false;
    if (samples.size() >= 2) {
      try {
        CopyFit f = fit_copy(samples);
        fitted = true;
        return f;
      } catch (const Error&) {
        // Times that do not grow with size: fall through to the aggregate bandwidth.
      }
    }
    return CopyFit{.latency_s = 0, .bandwidth_Bps = seconds > 0 && bytes > 0 ? bytes / seconds : 0};
  };
  std::map<std::pair<std::string, std::string>, std::vector<FitSample>> pair_samples;
  for (const auto& [key, recs] : groups) {
    TraceCopyKind k;
    k.device = key.first;
    k.kind = key.second;
    std::vector<FitSample> samples;
    for (const CopyRec* r : recs) {
      ++k.count;
      k.total_s += r->dur_s;
      if (r->bytes >= 0) {
        k.bytes += static_cast<int64_t>(r->bytes);
        if (r->bytes > 0 && r->dur_s > 0) samples.push_back({0, r->bytes, r->dur_s});
      }
      if (r->bytes <= 0 || r->dur_s <= 0 || r->device < 0) continue;
      const std::string dev = rep.devices.at(r->device);
      if (r->kind == "HtoD") pair_samples[{options.host_device, dev}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "DtoH") pair_samples[{dev, options.host_device}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "PtoP" && r->peer >= 0 && r->peer != r->device)
        pair_samples[{dev, rep.devices.at(r->peer)}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "DtoD")
        times[dev][KernelSignature::copy(static_cast<int64_t>(r->bytes))].push_back(r->dur_s);
    }
    double timed_bytes = 0, timed_s = 0;
    for (const FitSample& s : samples) timed_bytes += s.bytes, timed_s += s.time_s;
    k.fit = fit_or_aggregate(samples, timed_bytes, timed_s, k.fitted);
    rep.copies.push_back(k);
  }
  for (const auto& [key, samples] : pair_samples) {
    double b = 0, s = 0;
    for (const FitSample& x : samples) b += x.bytes, s += x.time_s;
    bool fitted = false;
    CopyCalibration cc{.src = key.first, .dst = key.second, .fit = fit_or_aggregate(samples, b, s, fitted), .samples = samples};
    if (cc.fit.bandwidth_Bps > 0) cal.copies.push_back(std::move(cc));
  }

  for (auto& [dev, sigs] : times) {
    DeviceCalibration d;
    d.device = dev;
    for (auto& [sig, v] : sigs) d.kernel_times_s[sig] = median(v);
    rep.signatures += static_cast<int64_t>(d.kernel_times_s.size());
    cal.devices.push_back(std::move(d));
  }
  cal.refit(options.fit);
  return out;
}

std::string format_seconds(double s) {
  std::ostringstream o;
  o.precision(4);
  if (s >= 1) o << s << " s";
  else if (s >= 1e-3) o << s * 1e3 << " ms";
  else o << s * 1e6 << " us";
  return o.str();
}

}  // namespace

std::string_view trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kKineto: return "kineto";
    case TraceFormat::kTensorFlow: return "tensorflow";
  }
  return "?";
}

void TraceImportOptions::validate() const {
  if (gpu_prefix.empty()) throw InputError("TraceImportOptions.gpu_prefix = \"\": must not be empty");
  if (host_device.empty()) throw InputError("TraceImportOptions.host_device = \"\": must not be empty");
  if (starts_with(host_device, gpu_prefix))
    throw InputError("TraceImportOptions.host_device = \"" + host_device + "\": must not start with gpu_prefix \"" +
                     gpu_prefix + "\" (it would clash with a GPU's name)");
  fit.validate();
}

std::optional<std::string> memcpy_kind(std::string_view name) {
  for (const CopyKindEntry& e : kCopyKinds)
    if (name.find(e.token) != std::string_view::npos) return std::string(e.kind);
  return std::nullopt;
}

std::optional<KernelSignature> signature_for_torch_op(std::string_view op, std::span<const std::vector<int64_t>> dims,
                                                      std::span<const std::string> concrete) {
  auto rank = [&](std::size_t i) { return i < dims.size() ? dims[i].size() : std::size_t{0}; };
  auto positive = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  for (const auto& d : dims)
    if (!positive(d)) return std::nullopt;  // empty tensors launch nothing worth a signature

  if (op == "aten::mm" && rank(0) == 2 && rank(1) == 2 && dims[0][1] == dims[1][0])
    return KernelSignature::gemm(dims[0][0], dims[1][1], dims[0][1]);
  if (op == "aten::addmm" && rank(1) == 2 && rank(2) == 2 && dims[1][1] == dims[2][0])
    return KernelSignature::gemm(dims[1][0], dims[2][1], dims[1][1]);
  if (op == "aten::bmm" && rank(0) == 3 && rank(1) == 3 && dims[0][0] == dims[1][0] && dims[0][2] == dims[1][1])
    return KernelSignature::gemm(dims[0][1], dims[1][2], dims[0][2], dims[0][0]);
  if (op == "aten::baddbmm" && rank(1) == 3 && rank(2) == 3 && dims[1][0] == dims[2][0] && dims[1][2] == dims[2][1])
    return KernelSignature::gemm(dims[1][1], dims[2][2], dims[1][2], dims[1][0]);
  if (op == "aten::matmul" && rank(0) >= 2 && rank(1) == 2 && dims[0].back() == dims[1][0]) {
    // Leading dimensions of the left operand fold into the rows (one GEMM).
    const int64_t k = dims[0].back();
    return KernelSignature::gemm(product(dims[0]) / k, dims[1][1], k);
  }
  if (op == "aten::matmul" && rank(0) == 3 && rank(1) == 3 && dims[0][0] == dims[1][0] && dims[0][2] == dims[1][1])
    return KernelSignature::gemm(dims[0][1], dims[1][2], dims[0][2], dims[0][0]);
  if (op == "aten::linear" && rank(0) >= 1 && rank(1) == 2 && dims[0].back() == dims[1][1]) {
    const int64_t k = dims[0].back();
    return KernelSignature::gemm(product(dims[0]) / k, dims[1][0], k);
  }
  if ((op == "aten::conv2d" || op == "aten::convolution" || op == "aten::_convolution" ||
       op == "aten::cudnn_convolution") &&
      rank(0) == 4 && rank(1) == 4 && dims[0][1] == dims[1][1]) {
    // conv2d(input, weight, bias, stride, padding, dilation, groups); the others share the first
    // five positions. dims[0][1] == dims[1][1] means groups == 1 (a grouped conv has C/groups).
    const int64_t stride = concrete_first(concrete, 3, 1);
    const int64_t pad = concrete_first(concrete, 4, 0);
    if (stride < 1 || pad < 0) return std::nullopt;
    return KernelSignature::conv2d(KernelClass::kConv2D, dims[0][0], dims[0][1], dims[0][2], dims[0][3], dims[1][0],
                                   dims[1][2], dims[1][3], stride, pad);
  }
  if ((op == "aten::softmax" || op == "aten::_softmax" || op == "aten::log_softmax" || op == "aten::_log_softmax") &&
      rank(0) >= 1) {
    const int64_t cols = dims[0].back();
    return KernelSignature::softmax(product(dims[0]) / cols, cols);
  }
  if (op == "aten::embedding" && rank(0) == 2 && rank(1) >= 1)
    return KernelSignature::embedding(dims[0][0], dims[0][1], product(dims[1]));
  if (elementwise_ops().count(op)) {
    int64_t elements = 0, inputs = 0;
    for (const auto& d : dims)
      if (!d.empty()) {
        elements = std::max(elements, product(d));
        ++inputs;
      }
    if (elements == 0) return std::nullopt;
    // copy_ and fill_ read at most one tensor; a fill reads none but still writes every element.
    return KernelSignature::elementwise(elements, std::max<int64_t>(1, op == "aten::copy_" ? 1 : inputs));
  }
  return std::nullopt;
}

std::string read_maybe_gzip(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open: " + std::strerror(errno));
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;

  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header; concatenated members are handled by the reset below.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error("zlib: inflateInit2 failed");
  std::string out;
  std::vector<char> buf(1 << 20);
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK) {
      std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      throw InputError(path.string() + ": corrupt gzip data: " + msg);
    }
    if (zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw InputError(path.string() + ": corrupt gzip data: truncated stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

TraceImport import_trace_text(std::string_view text, std::string_view origin, const TraceImportOptions& options) {
  options.validate();
  json root;
  if (auto byte = JsonLocator(text).first_byte_deeper_than(kMaxJsonDepth))
    fail(origin, JsonLocator(text).line_of_byte(*byte), "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    JsonLocator where(text);
    // nlohmann reports the byte after the offending one; the line of the last byte it read.
    const std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    const auto colon = what.find("syntax error");
    fail(origin, where.line_of_byte(byte), "invalid JSON: " + (colon != std::string::npos ? what.substr(colon) : what));
  } catch (const json::exception& e) {
    // A number beyond double's range ("number overflow parsing '1e400'"): nlohmann gives no
    // position, so the line is that of the first occurrence of the quoted text.
    std::string what = e.what();
    int line = 1;
    const auto open = what.find('\''), close = what.rfind('\'');
    if (open != std::string::npos && close > open)
      if (const auto at = text.find(what.substr(open + 1, close - open - 1)); at != std::string_view::npos)
        line = JsonLocator(text).line_of_byte(at);
    const auto message = what.find("] ");
    fail(origin, line, "invalid JSON: " + (message != std::string::npos ? what.substr(message + 2) : what));
  }
  const json* events = nullptr;
  if (root.is_array()) events = &root;
  else if (root.is_object() && root.contains("traceEvents")) events = &root["traceEvents"];
  if (!events) fail(origin, 1, "traceEvents: missing (not a Chrome trace)");
  if (!events->is_array()) {
    JsonLocator where(text);
    fail(origin, where.line_of("/traceEvents"), "traceEvents: must be an array");
  }

  TraceFormat format = options.format;
  if (format == TraceFormat::kAuto) {
    static const std::set<std::string, std::less<>> kineto_cats = {"kernel", "cpu_op", "cuda_runtime", "gpu_memcpy",
                                                                    "user_annotation", "cuda_driver"};
    bool kineto = false, tf = false;
    for (const json& e : *events) {
      if (!e.is_object()) continue;
      if (kineto_cats.count(arg_string(e, "cat"))) {
        kineto = true;
        break;
      }
      if (e.value("ph", "") == "M" && e.contains("args") && arg_string(e["args"], "name").find("/device:") != std::string::npos)
        tf = true;
      if (e.contains("args") && e["args"].is_object() && e["args"].contains("op")) tf = true;
    }
    if (kineto) format = TraceFormat::kKineto;
    else if (tf) format = TraceFormat::kTensorFlow;
    else fail(origin, 1, "traceEvents: neither PyTorch profiler (Kineto) nor TensorFlow timeline events found");
  }
  Collected c = format == TraceFormat::kKineto ? collect_kineto(root, *events) : collect_tensorflow(*events, options);
  return build(c, origin, options);
}

TraceImport import_trace(const std::filesystem::path& path, const TraceImportOptions& options) {
  const std::string text = read_maybe_gzip(path);
  return import_trace_text(text, path.string(), options);
}

std::string ImportReport::brief() const {
  std::ostringstream o;
  o << origin << ": " << trace_format_name(format) << " trace";
  if (!gpu_name.empty()) o << ", GPU " << gpu_name;
  o << "\n  kernels: " << kernels << " (" << format_seconds(total_kernel_s) << ")";
  if (unattributed_kernels) o << ", " << unattributed_kernels << " not attributed to an op";
  o << "\n  steps: " << steps << ", kernel time per step " << format_seconds(kernel_time_per_step_s) << "\n";
  for (const TraceCopyKind& k : copies) {
    o << "  copies " << k.kind << (k.device.empty() ? "" : " on " + k.device) << ": " << k.count << ", " << k.bytes
      << " bytes";
    if (k.fit.bandwidth_Bps > 0)
      o << ", " << (k.fitted ? "fit " : "aggregate ") << k.fit.bandwidth_Bps / 1e9 << " GB/s + "
        << format_seconds(k.fit.latency_s);
    o << "\n";
  }
  if (memsets) o << "  memsets: " << memsets << "\n";
  o << "  signatures measured: " << signatures << "; op types without signature: " << ops_without_signature.size()
    << "\n";
  return o.str();
}

}  // namespace placelab
