// Reading a trace's events into Collected (trace_import_internal.h): PyTorch profiler (Kineto)
// traces of every schema and TensorFlow timelines, apart from what the import makes of them.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "placelab/core/json_locator.h"
#include "placelab/core/numbers.h"
#include "trace_import_internal.h"

namespace placelab::trace_detail {
namespace {

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

// An integer argument (an id, a device, a byte count): arg_number when it lies within ±2^50, else
// nullopt, as if absent — a trace's 1e96 converted to int64_t would be undefined behaviour, and
// 2^50 bytes (1 PiB) is already the graph format's limit.
std::optional<int64_t> arg_integer(const json& args, std::initializer_list<const char*> keys) {
  const std::optional<double> d = arg_number(args, keys);
  if (!d || !(std::fabs(*d) <= 1125899906842624.0)) return std::nullopt;
  return static_cast<int64_t>(*d);
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

// "" for a time before 1970 or from year 10000 on (a trace's clock, not a date; and converting
// 1e300 seconds to time_t would be undefined).
std::string iso_utc(double epoch_s) {
  if (!(epoch_s >= 0 && epoch_s < 253402300800.0)) return {};
  std::time_t t = static_cast<std::time_t>(epoch_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Kineto

// An event's `cat` as a KinetoCat (the header says which names each schema wrote).
KinetoCat kineto_category(std::string_view cat) {
  std::string c(cat);
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "kernel") return KinetoCat::kKernel;
  if (c == "gpu_memcpy" || c == "memcpy") return KinetoCat::kMemcpy;
  if (c == "gpu_memset" || c == "memset") return KinetoCat::kMemset;
  if (c == "cuda_runtime" || c == "runtime" || c == "cuda_driver") return KinetoCat::kRuntime;
  if (c == "cpu_op" || c == "operator") return KinetoCat::kHostOp;
  if (c == "user_annotation") return KinetoCat::kAnnotation;
  // python_function events nest around ops on the host threads; the attribution is by aten op, so
  // they are left out rather than taken for ops.
  static const std::set<std::string, std::less<>> ignored = {
      "gpu_user_annotation", "user", "trace", "python_function", "cpu_instant_event", "overhead", "cuda_sync",
      "ac2g", "fwdbwd", "async", "external_correlation", "cuda_profiler_range", "glow_runtime", "net"};
  return ignored.count(c) ? KinetoCat::kIgnored : KinetoCat::kUnknown;
}

namespace {

bool is_evaluate_function(std::string_view name) { return starts_with(name, "autograd::engine::evaluate_function"); }
// An autograd function's own event: "ConvolutionBackward0", "torch::autograd::AccumulateGrad" is not.
bool is_backward_node(std::string_view name) {
  return !starts_with(name, "aten::") && !is_evaluate_function(name) && name.find("Backward") != std::string_view::npos;
}
// Optimizer.step#SGD.step, Optimizer.zero_grad#SGD.zero_grad (torch.optim's record_function), and
// the "## optimizer ##" style markers of training loops.
bool is_optimizer_scope(std::string_view name) { return contains_ci(name, "optimizer"); }

// A cpu_op or user_annotation on a host thread, with the innermost event around it.
struct HostEvent {
  double ts = 0, end = 0;
  const json* ev = nullptr;
  std::string_view name;
  bool annotation = false;  // user_annotation rather than cpu_op
  int parent = -1;          // innermost enclosing event on the same thread
};

// One host thread's events, nested by time: what finds the op around a kernel's launch.
struct Thread {
  std::vector<HostEvent> events;  // sorted by (ts, longer first); parents resolved
  bool autograd = false;          // runs autograd::engine::evaluate_function scopes
  void finalize() {
    std::sort(events.begin(), events.end(), [](const HostEvent& a, const HostEvent& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    std::vector<int> stack;
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      while (!stack.empty() && events[stack.back()].end < events[i].ts) stack.pop_back();
      events[i].parent = stack.empty() ? -1 : stack.back();
      stack.push_back(i);
      autograd |= is_evaluate_function(events[i].name);
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

// The runtime call (cudaLaunchKernel …) a GPU event's correlation id names: its thread and time.
struct Launch {
  std::string thread;
  double ts = 0;
  const json* args = nullptr;
};

// "Input Dims" (PyTorch ≥ 1.10) or "Input dims" (the 1.8 / 1.9 Operator events).
const json* input_dims_arg(const json& args) {
  for (const char* key : {"Input Dims", "Input dims"}) {
    auto it = args.find(key);
    if (it != args.end() && it->is_array()) return &*it;
  }
  return nullptr;
}

std::vector<std::vector<int64_t>> input_dims_of(const json& dims_arg) {
  std::vector<std::vector<int64_t>> dims;
  for (const json& d : dims_arg) {
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

// The op a launch belongs to, walking out from host event `inner` of thread `t`: the outermost
// aten:: op (the one the user wrote; below aten::cross_entropy_loss, the one it calls), else the innermost cpu_op, else the innermost annotation;
// with the phase and the autograd function around it.
struct Attribution {
  int event = -1;
  int root = -1;  // the outermost cpu_op (not annotation) around the launch
  Phase phase = Phase::kForward;
  std::string_view autograd_node;
};
Attribution attribute(const Thread& t, int inner) {
  Attribution a;
  int first_op = -1, first_annotation = -1, below_outermost = -1;
  bool backward = false, update = false;
  for (int i = inner; i >= 0; i = t.events[i].parent) {
    const HostEvent& h = t.events[i];
    if (!h.annotation && starts_with(h.name, "aten::")) {
      below_outermost = a.event;
      a.event = i;  // keeps the outermost
    }
    if (!h.annotation && first_op < 0) first_op = i;
    if (!h.annotation) a.root = i;
    if (h.annotation && first_annotation < 0) first_annotation = i;
    if (is_backward_node(h.name) && a.autograd_node.empty()) a.autograd_node = h.name;
    backward |= is_evaluate_function(h.name) || is_backward_node(h.name);
    update |= is_optimizer_scope(h.name);
  }
  // A composite loss is two ops the graph keeps apart (LogSoftmax, NllLoss): the op below it.
  if (a.event >= 0 && below_outermost >= 0 && t.events[a.event].name == "aten::cross_entropy_loss") a.event = below_outermost;
  if (a.event < 0) a.event = first_op >= 0 ? first_op : first_annotation;
  a.phase = backward ? Phase::kBackward : update ? Phase::kUpdate : t.autograd ? Phase::kBackward : Phase::kForward;
  return a;
}

// The instance record of a host event: op, phase, and what its shapes give.
InstanceRec instance_of(const HostEvent& h, const Attribution& a) {
  InstanceRec in;
  in.op = std::string(h.name);
  in.autograd_node = std::string(a.autograd_node);
  in.phase = a.phase;
  in.ts = h.ts;
  const json& args = args_of(*h.ev);
  const json* dims_arg = args.is_object() ? input_dims_arg(args) : nullptr;
  if (!dims_arg) return in;  // unsigned_reason stays kNoShapes
  const auto dims = input_dims_of(*dims_arg);
  const auto concrete = concrete_inputs_of(args);
  if (in.op == "aten::convolution_backward") {
    in.output_mask = concrete_bools(concrete, 10);
    in.conv_backward = conv_backward_signatures(dims, concrete);
    in.unsigned_reason = concrete_ints(concrete, 4) ? TraceDropReason::kNoMapping : TraceDropReason::kStrideNotRecorded;
    return in;
  }
  in.signature = torch_signature(in.op, dims, concrete, in.unsigned_reason);
  return in;
}

// One pass over a Kineto trace's events, sorted into what collect_kineto attributes.
struct KinetoScan {
  std::unordered_map<std::string, Thread> threads;
  std::unordered_map<int64_t, Launch> launches;  // correlation → runtime call
  std::unordered_map<std::string, std::vector<double>> call_marks;  // thread → cudaEventRecord times
  struct Step {
    double ts, end;
  };
  std::vector<Step> steps;
  struct GpuEvent {
    const json* ev;
    bool kernel;
  };
  std::vector<GpuEvent> gpu;
  std::map<std::string, int64_t> categories;  // of "X" events, for messages
  double first_ts = std::numeric_limits<double>::infinity();
};

KinetoScan scan_kineto(const json& events, Collected& c, std::string_view step_marker) {
  KinetoScan s;
  for (const json& e : events) {
    if (!e.is_object()) continue;
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || *ph != "X") continue;
    const std::string cat = arg_string(e, "cat");
    ++s.categories[cat];
    const std::string_view name = e.contains("name") && e["name"].is_string() ? std::string_view(e["name"].get_ref<const std::string&>()) : std::string_view{};
    const double ts = number_of(e.value("ts", json())).value_or(0.0);
    const double dur = number_of(e.value("dur", json())).value_or(0.0);
    const json& args = args_of(e);
    switch (kineto_category(cat)) {
      case KinetoCat::kKernel:
        s.gpu.push_back({&e, true});
        s.first_ts = std::min(s.first_ts, ts);
        break;
      case KinetoCat::kMemcpy: s.gpu.push_back({&e, false}); break;
      case KinetoCat::kMemset: ++c.memsets; break;
      case KinetoCat::kRuntime:
        if (name == "cudaEventRecord") s.call_marks[id_text(e, "pid") + "/" + id_text(e, "tid")].push_back(ts);
        if (auto corr = arg_integer(args, {"correlation"}))
          s.launches[*corr] = {id_text(e, "pid") + "/" + id_text(e, "tid"), ts, &args};
        break;
      case KinetoCat::kHostOp:
      case KinetoCat::kAnnotation:
        if (name.find(step_marker) != std::string_view::npos) {
          s.steps.push_back({ts, ts + dur});
          break;
        }
        s.threads[id_text(e, "pid") + "/" + id_text(e, "tid")].events.push_back(
            {ts, ts + dur, &e, name, kineto_category(cat) == KinetoCat::kAnnotation, -1});
        break;
      case KinetoCat::kIgnored:
      case KinetoCat::kUnknown: break;
    }
  }
  for (auto& [_, t] : s.threads) t.finalize();
  for (auto& [_, marks] : s.call_marks) std::sort(marks.begin(), marks.end());
  std::sort(s.steps.begin(), s.steps.end(), [](const KinetoScan::Step& a, const KinetoScan::Step& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
  });
  // Benchmark harnesses nest markers of one name (an iteration around its forward pass): a step is
  // an innermost marker, one that contains no other.
  std::vector<KinetoScan::Step> innermost;
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    const bool holds_next = i + 1 < s.steps.size() && s.steps[i + 1].ts <= s.steps[i].end &&
                            s.steps[i + 1].end <= s.steps[i].end;
    if (!holds_next) innermost.push_back(s.steps[i]);
  }
  s.steps = std::move(innermost);
  return s;
}

}  // namespace

// Every complete event's times are physical: `ts` finite, `dur` finite, >= 0 and at most a day
// (8.64e10 µs), and no longer than the trace's events span plus a second. A kernel of 10^15 µs,
// or a negative one, would otherwise become a calibration that predicts 10^11-s steps. The line of
// the first offending event is named.
void check_event_times(const json& events, std::string_view text, std::string_view origin, std::string_view pointer) {
  constexpr double kMaxDurationUs = 86400e6;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const json& e : events)
    if (e.is_object())
      if (auto ts = number_of(e.value("ts", json())); ts && std::isfinite(*ts)) {
        first = std::min(first, *ts);
        last = std::max(last, *ts);
      }
  const double bound = std::isfinite(first) ? std::min(kMaxDurationUs, last - first + 1e6) : kMaxDurationUs;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || arg_string(e, "ph") != "X") continue;
    const auto at = [&] { return JsonLocator(text).line_of(std::string(pointer) + "/" + std::to_string(i)); };
    const std::optional<double> ts = number_of(e.value("ts", json()));
    if (ts && !std::isfinite(*ts)) fail(origin, at(), "ts = " + format_6g(*ts) + ": must be a finite time (µs)");
    const std::optional<double> dur = number_of(e.value("dur", json()));
    if (!dur) continue;
    if (!std::isfinite(*dur) || *dur < 0 || *dur > bound)
      fail(origin, at(),
           "dur = " + format_6g(*dur) + " µs: must be >= 0 and at most " + format_6g(bound) +
               " µs (the trace's events span " + format_6g(std::isfinite(first) ? last - first : 0.0) +
               " µs, plus a second)");
  }
}

namespace {

CopyRec copy_of(const json& e, const Launch* launch) {
  const json& args = args_of(e);
  CopyRec r;
  auto kind = memcpy_kind(arg_string(e, "name"));
  if (!kind) kind = memcpy_kind(arg_string(args, "kind"));
  r.kind = kind.value_or("unknown");
  r.device = arg_integer(args, {"device"}).value_or(0);
  r.dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
  if (auto b = arg_integer(args, {"bytes"})) r.bytes = static_cast<double>(*b);
  else if (launch)
    if (auto lb = arg_integer(*launch->args, {"size", "bytes", "count"})) r.bytes = static_cast<double>(*lb);
  if (r.kind == "PtoP") {
    // 1.8-era Kineto wrote "fromDevice" / "toDevice" for Memcpy2 activities.
    if (auto dst = arg_integer(args, {"dstDevice", "dst device", "toDevice"})) r.peer = *dst;
    if (auto src = arg_integer(args, {"srcDevice", "src device", "fromDevice"})) r.device = *src;
  }
  return r;
}

}  // namespace

Collected collect_kineto(const json& root, const json& events, std::string_view origin, std::string_view step_marker) {
  Collected c;
  c.format = TraceFormat::kKineto;
  if (root.is_object()) {
    auto dp = root.find("deviceProperties");
    if (dp != root.end() && dp->is_array() && !dp->empty() && (*dp)[0].is_object())
      c.gpu_name = arg_string((*dp)[0], "name");
    c.host = arg_string(root, "host_name");
  }
  KinetoScan s = scan_kineto(events, c, step_marker);
  c.steps = static_cast<int>(s.steps.size());
  if (!std::isfinite(s.first_ts))
    fail(origin, 1,
         "no GPU kernel events (event categories seen: " + counts_text(s.categories) +
             "); expected category \"kernel\" (PyTorch >= 1.9) or \"Kernel\" (1.8) — profile with "
             "activities=[ProfilerActivity.CUDA]");
  if (root.is_object() && root.contains("baseTimeNanoseconds")) {
    if (auto base = number_of(root["baseTimeNanoseconds"])) c.created = iso_utc(*base * 1e-9 + s.first_ts * 1e-6);
  } else if (s.first_ts > 1e15) {  // epoch microseconds (after 2001): a wall-clock time
    c.created = iso_utc(s.first_ts * 1e-6);
  }

  // Host events by "External id", for kernels whose launch has no enclosing op on its thread: the
  // 1.8-era Kernel and Runtime events carry the op's id as "external id".
  std::unordered_map<int64_t, std::pair<const Thread*, int>> by_external;
  for (const auto& [_, t] : s.threads)
    for (int i = 0; i < static_cast<int>(t.events.size()); ++i)
      if (auto id = arg_integer(args_of(*t.events[i].ev), {"External id"}))
        by_external.emplace(*id, std::make_pair(&t, i));

  std::unordered_map<const json*, int64_t> instance_ids;  // host event → index into c.instances
  std::unordered_map<const json*, int64_t> root_ids;      // outermost host op → index into root_s
  std::vector<double> root_s;                             // its duration, seconds
  auto step_of = [&](double t) {
    auto it = std::upper_bound(s.steps.begin(), s.steps.end(), t, [](double v, const KinetoScan::Step& st) { return v < st.ts; });
    if (it == s.steps.begin()) return -1;
    --it;
    return t <= it->end ? static_cast<int>(it - s.steps.begin()) : -1;
  };

  for (const KinetoScan::GpuEvent& g : s.gpu) {
    const json& e = *g.ev;
    const json& args = args_of(e);
    const Launch* launch = nullptr;
    if (auto corr = arg_integer(args, {"correlation"})) {
      auto it = s.launches.find(*corr);
      if (it != s.launches.end()) launch = &it->second;
    }
    if (!g.kernel) {
      c.copies.push_back(copy_of(e, launch));
      continue;
    }
    KernelRec k;
    k.device = arg_integer(args, {"device"}).value_or(0);
    k.dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
    k.start_us = number_of(e.value("ts", json())).value_or(0.0);
    k.name = arg_string(e, "name");
    const Thread* thread = nullptr;
    int inner = -1;
    if (launch) {
      k.launch_ts = launch->ts;
      k.step = step_of(launch->ts);
      if (auto m = s.call_marks.find(launch->thread); m != s.call_marks.end())
        k.call_segment = std::upper_bound(m->second.begin(), m->second.end(), launch->ts) - m->second.begin();
      if (auto th = s.threads.find(launch->thread); th != s.threads.end()) {
        thread = &th->second;
        inner = thread->innermost(launch->ts);
      }
    }
    if (inner < 0) {
      std::optional<int64_t> ext = launch ? arg_integer(*launch->args, {"external id", "External id"}) : std::nullopt;
      if (!ext) ext = arg_integer(args, {"external id", "External id"});
      if (ext)
        if (auto it = by_external.find(*ext); it != by_external.end()) {
          thread = it->second.first;
          inner = it->second.second;
          if (!launch) {
            k.launch_ts = thread->events[inner].ts;
            k.step = step_of(k.launch_ts);
          }
        }
    }
    if (inner >= 0) {
      const Attribution a = attribute(*thread, inner);
      if (a.event >= 0) {
        const HostEvent& h = thread->events[a.event];
        auto [it, inserted] = instance_ids.emplace(h.ev, static_cast<int64_t>(c.instances.size()));
        if (inserted) {
          c.instances.push_back(instance_of(h, a));
          if (a.root >= 0) {
            const HostEvent& root_event = thread->events[a.root];
            auto [r, new_root] = root_ids.emplace(root_event.ev, static_cast<int64_t>(root_s.size()));
            if (new_root) root_s.push_back((root_event.end - root_event.ts) * 1e-6);
            c.instances.back().host_root = r->second;
          }
        }
        k.instance = it->second;
      }
    }
    c.kernels.push_back(std::move(k));
  }
  // Each root's host time, split evenly among the op instances under it.
  std::vector<int> per_root(root_s.size(), 0);
  for (const InstanceRec& in : c.instances)
    if (in.host_root >= 0) ++per_root[static_cast<std::size_t>(in.host_root)];
  for (InstanceRec& in : c.instances)
    if (in.host_root >= 0)
      in.host_s = root_s[static_cast<std::size_t>(in.host_root)] / per_root[static_cast<std::size_t>(in.host_root)];
  return c;
}

// ---------------------------------------------------------------------------------------------
// TensorFlow timeline

namespace {

// A TensorFlow timeline process (one row): the device it is and what kind of events it holds.
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

}  // namespace

Collected collect_tensorflow(const json& events, const TraceImportOptions& options, std::string_view origin) {
  Collected c;
  c.format = TraceFormat::kTensorFlow;
  std::unordered_map<std::string, TfProcess> procs;
  for (const json& e : events)
    if (e.is_object() && arg_string(e, "ph") == "M" && arg_string(e, "name") == "process_name" && e.contains("args"))
      procs[id_text(e, "pid")] = classify_tf_process(arg_string(e["args"], "name"));

  // Kernel source per GPU: "stream:all" when present (the per-stream rows repeat its events),
  // else the per-stream rows, else the device's compute row (no GPU tracer: op schedule times).
  std::map<int64_t, int> best_kind;  // GPU device → chosen process kind rank
  auto rank = [](TfProcess::Kind k) {
    return k == TfProcess::kStreamAll ? 3 : k == TfProcess::kStream ? 2 : k == TfProcess::kDeviceCompute ? 1 : 0;
  };
  std::set<std::string> pids_with_events;
  std::map<std::string, int64_t> categories;
  for (const json& e : events)
    if (e.is_object() && arg_string(e, "ph") == "X") {
      pids_with_events.insert(id_text(e, "pid"));
      ++categories[arg_string(e, "cat")];
    }
  for (const auto& [pid, p] : procs)
    if (p.gpu && rank(p.kind) > 0 && pids_with_events.count(pid))
      best_kind[p.device] = std::max(best_kind[p.device], rank(p.kind));
  for (const auto& [pid, p] : procs)
    if (p.gpu && c.gpu_name.empty() && p.kind != TfProcess::kOther) c.gpu_name = "GPU:" + std::to_string(p.device);

  static const std::regex bytes_re(R"((\d+)\s*bytes)");
  std::unordered_map<std::string, int64_t> instance_ids;
  for (const json& e : events) {
    if (!e.is_object() || arg_string(e, "ph") != "X") continue;
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
      if (auto b = arg_integer(args, {"bytes"})) r.bytes = static_cast<double>(*b);
      else
        for (const std::string& text : {name, arg_string(args, "name"), arg_string(args, "label")}) {
          std::smatch m;
          if (std::regex_search(text, m, bytes_re)) {
            // strtod, not stod: 400 digits are HUGE_VAL here, not std::out_of_range.
            if (const double v = std::strtod(m[1].str().c_str(), nullptr); v <= 1125899906842624.0) r.bytes = v;
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
    k.name = name;
    k.launch_ts = number_of(e.value("ts", json())).value_or(0.0);
    k.step = 0;
    const std::string node = arg_string(args, "name").empty() ? name : arg_string(args, "name");
    std::string key = k.host ? std::string("cpu/") : "gpu" + std::to_string(k.device) + "/";
    key += node;
    auto [it, inserted] = instance_ids.emplace(key, static_cast<int64_t>(c.instances.size()));
    if (inserted) {
      InstanceRec in;
      in.op = op;
      in.ts = k.launch_ts;
      in.unsigned_reason = options.graph ? TraceDropReason::kNoMapping : TraceDropReason::kNoShapes;
      if (options.graph)
        if (auto id = options.graph->find(node)) {
          const Op& gop = options.graph->op(*id);
          in.phase = gop.phase;
          if (gop.kernel.cls != KernelClass::kNoop) in.signature = gop.kernel;
        }
      c.instances.push_back(std::move(in));
    }
    k.instance = it->second;
    c.kernels.push_back(std::move(k));
  }
  if (c.kernels.empty())
    fail(origin, 1,
         "no op events on a device compute row (event categories seen: " + counts_text(categories) +
             "); expected a TensorFlow timeline whose process names are devices (\"/device:GPU:0/stream:all Compute\")");
  c.steps = 1;
  return c;
}

}  // namespace placelab::trace_detail
