// From Collected events (trace_import_internal.h) to a calibration and an ImportReport: op instances
// as measured units, graph-guided signatures for traces without shapes, copy fits and host costs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "placelab/core/error.h"
#include "measure_util.h"
#include "trace_import_internal.h"

namespace placelab::trace_detail {
namespace {

using detail::median;

// ---------------------------------------------------------------------------------------------
// Graph-guided signatures for Kineto traces without shapes.

// Which part of an op instance's kernels a unit is: all of them, or one gradient of a convolution
// backward.
enum class Part : uint8_t { kWhole, kInputGrad, kFilterGrad };

// (torch op or autograd function, phase) → the graph op type whose signature its instances take.
// Graphs in "PyTorch form" use these types, in the order torchvision executes the ops.
struct TorchToGraph {
  std::string_view torch_op;
  Phase phase;
  std::string_view graph_type;
  Part part = Part::kWhole;
};
constexpr TorchToGraph kTorchToGraph[] = {
    {"aten::conv2d", Phase::kForward, "Conv2D"},
    {"aten::convolution", Phase::kForward, "Conv2D"},
    {"aten::_convolution", Phase::kForward, "Conv2D"},
    {"aten::convolution_backward", Phase::kBackward, "Conv2DBackpropInput", Part::kInputGrad},
    {"aten::convolution_backward", Phase::kBackward, "Conv2DBackpropFilter", Part::kFilterGrad},
    {"aten::batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::cudnn_batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::native_batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::cudnn_batch_norm_backward", Phase::kBackward, "FusedBatchNormGrad"},
    {"aten::native_batch_norm_backward", Phase::kBackward, "FusedBatchNormGrad"},
    {"aten::relu", Phase::kForward, "Relu"},
    {"aten::relu_", Phase::kForward, "Relu"},
    {"aten::threshold_backward", Phase::kBackward, "ReluGrad"},
    {"aten::max_pool2d", Phase::kForward, "MaxPool"},
    {"aten::max_pool2d_with_indices", Phase::kForward, "MaxPool"},
    {"aten::max_pool2d_with_indices_backward", Phase::kBackward, "MaxPoolGrad"},
    {"aten::adaptive_avg_pool2d", Phase::kForward, "AvgPool"},
    {"aten::avg_pool2d", Phase::kForward, "AvgPool"},
    {"aten::avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    {"aten::_adaptive_avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    {"aten::adaptive_avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    // adaptive_avg_pool2d to 1×1 runs aten::mean; its backward is MeanBackward1's kernels.
    {"MeanBackward1", Phase::kBackward, "AvgPoolGrad"},
    {"aten::linear", Phase::kForward, "MatMul"},
    {"aten::addmm", Phase::kForward, "MatMul"},
    {"aten::mm", Phase::kBackward, "MatMul"},
    {"aten::add", Phase::kForward, "Add"},
    {"aten::add_", Phase::kForward, "Add"},
    // Autograd sums the gradients of a tensor read twice (a residual block's input) with add_.
    {"aten::add", Phase::kBackward, "AddN"},
    {"aten::add_", Phase::kBackward, "AddN"},
    {"aten::log_softmax", Phase::kForward, "LogSoftmax"},
    {"aten::_log_softmax_backward_data", Phase::kBackward, "LogSoftmaxGrad"},
    {"aten::nll_loss", Phase::kForward, "NllLoss"},
    {"aten::nll_loss_nd", Phase::kForward, "NllLoss"},
    {"aten::nll_loss_backward", Phase::kBackward, "NllLossGrad"},
    {"aten::dropout", Phase::kForward, "Dropout"},
    {"aten::native_dropout", Phase::kForward, "Dropout"},
};

const TorchToGraph* graph_rule(const InstanceRec& in, Part part) {
  for (std::string_view name : {std::string_view(in.op), std::string_view(in.autograd_node)}) {
    if (name.empty()) continue;
    for (const TorchToGraph& r : kTorchToGraph)
      if (r.torch_op == name && r.phase == in.phase && r.part == part) return &r;
  }
  return nullptr;
}

// The kernels of an instance, or of one gradient of a convolution backward, as one measurement.
struct Unit {
  int64_t instance = -1;
  Part part = Part::kWhole;
  std::string device;
  int step = -1;
  double total_s = 0;
  std::optional<KernelSignature> signature;
  std::optional<TraceDropReason> dropped;  // set when `signature` is absent
  std::string graph_type, detail;
};

// The kernels of one op instance, in launch order, with its device and step.
struct InstanceKernels {
  std::string device;
  int step = -1;
  std::vector<const KernelRec*> kernels;  // in launch order
};

// Splits an aten::convolution_backward's kernels. PyTorch's cuDNN path computes grad_input, then
// grad_weight (cudnn_convolution_backward in aten/src/ATen/native/cudnn/ConvShared.cpp), in two
// cuDNN calls. Each call opens with runtime calls of its own (cudaEventRecord among them, in the
// real V100 trace before every convolution call), so when the instance's kernels fall into two or
// more call segments, the last segment is the weight gradient and the earlier ones the input
// gradient (a bias gradient, when there is one, runs first and counts with it). Within one
// segment: every kernel from the first "wgrad"-named one on is the weight gradient (an instance
// whose only kernels are wgrad ones is the first layer's, whose input needs no gradient); failing
// that, a recorded output_mask asking for one gradient decides; otherwise the instance is one
// unsplittable unit.
void split_conv_backward(const InstanceRec& in, const InstanceKernels& ik, Unit base, std::vector<Unit>& units) {
  const auto& ks = ik.kernels;
  auto sum = [](auto b, auto e) {
    double t = 0;
    for (auto it = b; it != e; ++it) t += (*it)->dur_s;
    return t;
  };
  const bool want_input = !in.output_mask || in.output_mask->empty() || in.output_mask->front();
  const bool want_filter = !in.output_mask || in.output_mask->size() < 2 || (*in.output_mask)[1];
  std::vector<std::pair<Part, double>> parts;
  const auto last_call = std::find_if(ks.begin(), ks.end(), [&](const KernelRec* k) {
    return !ks.empty() && k->call_segment == ks.back()->call_segment;
  });
  const auto w = std::find_if(ks.begin(), ks.end(), [](const KernelRec* k) { return contains_ci(k->name, "wgrad"); });
  if (last_call != ks.begin() && want_input && want_filter) {
    parts.push_back({Part::kInputGrad, sum(ks.begin(), last_call)});
    parts.push_back({Part::kFilterGrad, sum(last_call, ks.end())});
  } else if (w != ks.end() && want_filter && (w != ks.begin() || !in.output_mask || !want_input)) {
    if (w != ks.begin()) parts.push_back({Part::kInputGrad, sum(ks.begin(), w)});
    parts.push_back({Part::kFilterGrad, sum(w, ks.end())});
  } else if (in.output_mask && want_input != want_filter) {
    parts.push_back({want_input ? Part::kInputGrad : Part::kFilterGrad, sum(ks.begin(), ks.end())});
  } else {
    base.total_s = sum(ks.begin(), ks.end());
    base.dropped = TraceDropReason::kUnsplittableBackward;
    units.push_back(std::move(base));
    return;
  }
  for (const auto& [part, total] : parts) {
    Unit u = base;
    u.part = part;
    u.total_s = total;
    if (in.conv_backward) u.signature = part == Part::kInputGrad ? in.conv_backward->input_grad : in.conv_backward->filter_grad;
    if (!u.signature) u.dropped = in.unsigned_reason;
    units.push_back(std::move(u));
  }
}

std::vector<Unit> make_units(const Collected& c, const std::map<int64_t, InstanceKernels>& by_instance) {
  std::vector<Unit> units;
  for (const auto& [id, ik] : by_instance) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(id)];
    Unit base;
    base.instance = id;
    base.device = ik.device;
    base.step = ik.step;
    if (c.format == TraceFormat::kKineto && in.op == "aten::convolution_backward") {
      split_conv_backward(in, ik, std::move(base), units);
      continue;
    }
    for (const KernelRec* k : ik.kernels) base.total_s += k->dur_s;
    base.signature = in.signature;
    if (!base.signature) base.dropped = in.unsigned_reason;
    units.push_back(std::move(base));
  }
  return units;
}

// "53" when every step agrees, else the counts per step "53/53/52".
std::string per_step_counts(const std::vector<std::size_t>& counts) {
  if (counts.empty()) return "0";
  std::string out;
  const bool same = std::all_of(counts.begin(), counts.end(), [&](std::size_t n) { return n == counts.front(); });
  for (std::size_t i = 0; i < counts.size() && (i == 0 || !same); ++i) {
    if (i) out += '/';
    out += std::to_string(counts[i]);
  }
  return out;
}

// Gives units without a signature the signature of the graph op at the same position: per step,
// the i-th unit of (graph type, phase) in host order ↔ the i-th graph op of that type and phase in
// op-id order, for the types whose counts agree in every step that launched kernels.
void match_graph(const Collected& c, const OpGraph& graph, const std::vector<double>& step_kernel_s, std::vector<Unit>& units) {
  std::map<std::pair<std::string, Phase>, std::vector<OpId>> graph_ops;
  for (OpId id = 0; id < graph.num_ops(); ++id) graph_ops[{graph.op(id).type, graph.op(id).phase}].push_back(id);

  const std::size_t num_steps = static_cast<std::size_t>(std::max(c.steps, 1));
  std::map<std::pair<std::string, Phase>, std::vector<std::vector<Unit*>>> groups;
  for (Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (u.dropped == TraceDropReason::kUnsplittableBackward) continue;
    const TorchToGraph* rule = graph_rule(in, u.part);
    if (!rule) {
      if (!u.signature && u.dropped == TraceDropReason::kNoShapes) u.dropped = TraceDropReason::kNoMapping;
      continue;
    }
    u.graph_type = std::string(rule->graph_type);
    const int step = c.steps == 0 ? 0 : u.step;
    if (step < 0) {
      if (!u.signature) u.dropped = TraceDropReason::kOutsideSteps;
      continue;
    }
    auto& by_step = groups[{u.graph_type, rule->phase}];
    by_step.resize(num_steps);
    by_step[static_cast<std::size_t>(step)].push_back(&u);
  }
  for (auto& [key, by_step] : groups) {
    const std::vector<OpId>& ops = graph_ops[key];
    std::vector<std::size_t> counts;
    for (std::size_t s = 0; s < by_step.size(); ++s)
      if (c.steps == 0 || step_kernel_s[s] > 0) counts.push_back(by_step[s].size());
    const bool agree = !ops.empty() && !counts.empty() &&
                       std::all_of(counts.begin(), counts.end(), [&](std::size_t n) { return n == ops.size(); });
    for (auto& step_units : by_step) {
      std::stable_sort(step_units.begin(), step_units.end(), [&](const Unit* a, const Unit* b) {
        const double ta = c.instances[static_cast<std::size_t>(a->instance)].ts;
        const double tb = c.instances[static_cast<std::size_t>(b->instance)].ts;
        return ta != tb ? ta < tb : a->part < b->part;
      });
      for (std::size_t i = 0; i < step_units.size(); ++i) {
        Unit& u = *step_units[i];
        if (u.signature) continue;  // shapes win
        if (!agree) {
          u.dropped = TraceDropReason::kCountMismatch;
          u.detail = "trace " + per_step_counts(counts);
          u.detail += " per step, graph ";
          u.detail += std::to_string(ops.size());
          continue;
        }
        const KernelSignature& sig = graph.op(ops[i]).kernel;
        if (sig.cls == KernelClass::kNoop) continue;  // stays dropped (no mapping)
        u.signature = sig;
        u.dropped.reset();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// From collected events to a calibration and a report.

void summarise_usage(const Collected& c, const std::vector<Unit>& units, int busy_steps, ImportReport& rep) {
  using Key = std::tuple<std::string, Phase, std::string, std::string, int, std::string>;
  std::map<Key, TraceOpUsage> rows;
  const double per_step = 1.0 / std::max(busy_steps, 1);
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    const std::string cls = u.signature ? std::string(kernel_class_name(u.signature->cls)) : std::string();
    std::string graph_type = u.dropped && *u.dropped != TraceDropReason::kCountMismatch ? std::string() : u.graph_type;
    const int reason = u.dropped ? static_cast<int>(*u.dropped) : -1;
    TraceOpUsage& row = rows[{in.op, in.phase, graph_type, cls, reason, u.detail}];
    row.op = in.op;
    row.phase = in.phase;
    row.graph_type = graph_type;
    row.kernel_class = cls;
    row.dropped = u.dropped;
    row.detail = u.detail;
    ++row.instances;
    row.kernel_s_per_step += u.total_s * per_step;
    (u.signature ? rep.used_kernel_s_per_step : rep.dropped_kernel_s_per_step) += u.total_s * per_step;
  }
  for (auto& [_, row] : rows) rep.usage.push_back(std::move(row));
  std::stable_sort(rep.usage.begin(), rep.usage.end(), [](const TraceOpUsage& a, const TraceOpUsage& b) {
    if (a.dropped.has_value() != b.dropped.has_value()) return !a.dropped.has_value();
    return a.kernel_s_per_step > b.kernel_s_per_step;
  });
}

// Copies: per (device, kind) for the report; HtoD / DtoH / PtoP become device-pair copy fits,
// DtoD becomes the copy kernel class of its device (a copy inside one device's memory).
using SignatureTimes = std::map<std::string, std::unordered_map<KernelSignature, std::vector<double>, KernelSignatureHash>>;
void summarise_copies(const Collected& c, const TraceImportOptions& options, ImportReport& rep, Calibration& cal,
                      SignatureTimes& times) {
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
}

// ImportReport::launch_gap_s: per GPU, the median idle time before an op instance's first kernel
// (its start minus the end of the kernel the device ran before it), over the instances launched
// in steps. The simulator charges that per op as the device's launch overhead. The median
// ignores the rare long stalls a profiled run has (a harness's clear-cache pass, the profiler
// flushing), which a mean over the step's idle time would spread over every op.
template <typename DeviceName>
void measure_launch_gaps(const Collected& c, const DeviceName& device_name, ImportReport& rep) {
  std::map<std::string, std::vector<const KernelRec*>> by_device;
  for (const KernelRec& k : c.kernels)
    if (!k.host) by_device[device_name(k)].push_back(&k);
  for (auto& [device, ks] : by_device) {
    std::stable_sort(ks.begin(), ks.end(), [](const KernelRec* a, const KernelRec* b) { return a->start_us < b->start_us; });
    std::vector<double> gaps;
    double previous_end = -std::numeric_limits<double>::infinity();
    int64_t previous_instance = -2;
    for (const KernelRec* k : ks) {
      const bool first_of_instance = k->instance != previous_instance || k->instance < 0;
      // Only a kernel that was launched before the one before it ended waited for the GPU alone;
      // a gap after a later launch is the host's (its issue cost, which the eager model charges
      // the host, docs/simulator.md), not the device's.
      const bool queued = k->launch_ts <= previous_end;
      if (first_of_instance && queued && k->step >= 0 && std::isfinite(previous_end))
        gaps.push_back(std::max(0.0, k->start_us - previous_end) * 1e-6);
      previous_end = std::max(previous_end, k->start_us + k->dur_s * 1e6);
      previous_instance = k->instance;
    }
    if (gaps.empty()) continue;
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    rep.launch_gap_s[device] = gaps[gaps.size() / 2];
  }
}

// Host costs (docs/calibration.md, "Host costs"): each unit's share of its instance's host time
// (a convolution backward's two units halve it), in steps; the median per graph op type (the type
// the graph match gave it, else kTorchToGraph's) and over all of them.
void measure_host_costs(const Collected& c, const std::vector<Unit>& units, ImportReport& rep, Calibration& cal) {
  std::map<int64_t, int> units_of;
  for (const Unit& u : units) ++units_of[u.instance];
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_type;
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (in.host_s <= 0 || (c.steps > 0 && u.step < 0)) continue;
    const double t = in.host_s / units_of[u.instance];
    all.push_back(t);
    std::string type = u.graph_type;
    if (type.empty())
      if (const TorchToGraph* rule = graph_rule(in, u.part)) type = std::string(rule->graph_type);
    if (!type.empty()) by_type[type].push_back(t);
  }
  rep.host_ops = static_cast<int64_t>(all.size());
  if (all.empty()) return;
  double total = 0;
  for (double t : all) total += t;
  std::set<int> steps;
  for (const Unit& u : units) steps.insert(u.step);
  rep.host_s_per_step = total / static_cast<double>(std::max<std::size_t>(steps.size(), 1));
  cal.dispatch_s = std::min(median(all), 1.0);
  for (auto& [type, v] : by_type) cal.dispatch_s_by_type[type] = std::min(median(v), 1.0);
}

}  // namespace

// The calibration and the report of a trace's collected events: import_trace_text's last step.
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

  // Kernel totals and the kernels of each op instance.
  rep.step_kernel_s.assign(static_cast<std::size_t>(std::max(c.steps, 0)), 0.0);
  double in_steps = 0;
  std::map<int64_t, InstanceKernels> by_instance;
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
    InstanceKernels& ik = by_instance[k.instance];
    if (ik.kernels.empty()) {
      ik.device = device_name(k);
      ik.step = k.step;
    }
    ik.kernels.push_back(&k);
  }
  for (auto& [_, ik] : by_instance)
    std::stable_sort(ik.kernels.begin(), ik.kernels.end(),
                     [](const KernelRec* a, const KernelRec* b) { return a->launch_ts < b->launch_ts; });
  // Steps that launched nothing (the profiler's closing step marker) would dilute the mean.
  int busy_steps = 0;
  for (double s : rep.step_kernel_s) busy_steps += s > 0;
  rep.kernel_time_per_step_s = busy_steps > 0 ? in_steps / busy_steps : rep.total_kernel_s;

  if (c.format == TraceFormat::kKineto) measure_launch_gaps(c, device_name, rep);
  std::vector<Unit> units = make_units(c, by_instance);
  if (c.format == TraceFormat::kKineto && options.graph) match_graph(c, *options.graph, rep.step_kernel_s, units);
  summarise_usage(c, units, busy_steps, rep);

  SignatureTimes times;
  std::map<std::string, TraceOpSummary> by_op;
  std::set<std::string> without;
  std::set<int64_t> signed_instances;
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (u.signature && u.total_s > 0) {
      times[u.device][*u.signature].push_back(u.total_s);
      signed_instances.insert(u.instance);
    } else {
      without.insert(in.op);
    }
  }
  for (const auto& [id, ik] : by_instance) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(id)];
    TraceOpSummary& s = by_op[in.op];
    s.op = in.op;
    ++s.calls;
    s.kernels += static_cast<int64_t>(ik.kernels.size());
    for (const KernelRec* k : ik.kernels) s.total_s += k->dur_s;
    s.with_signature += signed_instances.count(id) ? 1 : 0;
  }
  for (auto& [_, s] : by_op) rep.ops.push_back(s);
  std::sort(rep.ops.begin(), rep.ops.end(), [](const TraceOpSummary& a, const TraceOpSummary& b) {
    return a.total_s != b.total_s ? a.total_s > b.total_s : a.op < b.op;
  });
  rep.ops_without_signature.assign(without.begin(), without.end());

  measure_host_costs(c, units, rep, cal);
  summarise_copies(c, options, rep, cal, times);
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

}  // namespace placelab::trace_detail
