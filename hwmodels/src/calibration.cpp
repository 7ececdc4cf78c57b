// Calibration data: least-squares fits (Eigen), the calibration YAML reader/writer and the
// calibrated machine file (docs/calibration.md).
#include "placelab/hwmodels/calibration.h"

#include "placelab/core/files.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include <Eigen/Dense>
#include <yaml-cpp/yaml.h>

#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "placelab/hwmodels/machine_io.h"

namespace placelab {
namespace {

// ---------------------------------------------------------------------------------------------
// Fitting

struct LinearSolution {
  FitSegment segment;
  double sse = std::numeric_limits<double>::infinity();  // Σ (fit/measured − 1)²
};

// Relative NNLS over samples[begin, end). Each row is divided by its measured time so the
// residuals are relative; columns are scaled to unit max so FLOPs (~1e9) and the constant term
// (~1) are conditioned alike. With three unknowns, NNLS is solved exactly by trying every subset
// of free coefficients (the others held at 0) and keeping the feasible one with the least error.
LinearSolution solve_relative_nnls(std::span<const FitSample> samples) {
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd x(n, 3);
  for (Eigen::Index i = 0; i < n; ++i) {
    const FitSample& s = samples[static_cast<std::size_t>(i)];
    PLACELAB_CHECK(s.time_s > 0 && std::isfinite(s.time_s)) << "fit sample time " << s.time_s;
    x(i, 0) = 1.0 / s.time_s;
    x(i, 1) = s.flops / s.time_s;
    x(i, 2) = s.bytes / s.time_s;
  }
  Eigen::Vector3d scale;
  for (int c = 0; c < 3; ++c) scale(c) = x.col(c).cwiseAbs().maxCoeff();
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);

  LinearSolution best;
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int> cols;
    for (int c = 0; c < 3; ++c)
      if ((mask >> c) & 1) cols.push_back(c);
    if (std::any_of(cols.begin(), cols.end(), [&](int c) { return !(scale(c) > 0); })) continue;
    Eigen::MatrixXd a(n, static_cast<Eigen::Index>(cols.size()));
    for (std::size_t j = 0; j < cols.size(); ++j)
      a.col(static_cast<Eigen::Index>(j)) = x.col(cols[j]) / scale(cols[j]);
    Eigen::VectorXd coef = a.colPivHouseholderQr().solve(ones);
    if (!coef.allFinite() || (coef.array() < 0).any()) continue;
    double sse = (a * coef - ones).squaredNorm();
    if (sse < best.sse) {
      Eigen::Vector3d full = Eigen::Vector3d::Zero();
      for (std::size_t j = 0; j < cols.size(); ++j)
        full(cols[j]) = coef(static_cast<Eigen::Index>(j)) / scale(cols[j]);
      best.sse = sse;
      best.segment.a_s = full(0);
      best.segment.s_per_flop = full(1);
      best.segment.s_per_byte = full(2);
    }
  }
  // A single non-negative column always gives a non-negative least-squares coefficient, so some
  // subset is feasible whenever any column is non-zero — and column 0 (1/time) never is.
  PLACELAB_CHECK(std::isfinite(best.sse)) << "no feasible NNLS subset for " << n << " samples";
  return best;
}

std::string format_double(double v) {
  std::ostringstream s;
  s << std::setprecision(10) << v;
  return s.str();
}

}  // namespace

double ClassFit::time_s(double flops, double bytes) const {
  PLACELAB_CHECK(!segments.empty()) << "ClassFit without segments";
  for (const FitSegment& s : segments)
    if (bytes <= s.upto_bytes) return s.time_s(flops, bytes);
  return segments.back().time_s(flops, bytes);
}

void FitOptions::validate() const {
  if (max_segments < 1 || max_segments > 16)
    throw InputError("FitOptions.max_segments = " + std::to_string(max_segments) + ": must be in 1..16");
  if (min_samples_per_segment < 1)
    throw InputError("FitOptions.min_samples_per_segment = " + std::to_string(min_samples_per_segment) +
                     ": must be >= 1");
  if (!(min_improvement > 0 && min_improvement <= 1))
    throw InputError("FitOptions.min_improvement = " + format_double(min_improvement) + ": must be in (0, 1]");
}

FitSegment fit_linear(std::span<const FitSample> samples) {
  if (samples.empty()) throw Error("fit_linear: no samples");
  for (const FitSample& s : samples)
    if (!(s.time_s > 0) || !std::isfinite(s.time_s) || s.flops < 0 || s.bytes < 0)
      throw Error("fit_linear: sample (flops " + format_double(s.flops) + ", bytes " + format_double(s.bytes) +
                  ", time " + format_double(s.time_s) + " s) must have time > 0 and non-negative sizes");
  return solve_relative_nnls(samples).segment;
}

ClassFit fit_class(std::span<const FitSample> samples_in, const FitOptions& options) {
  options.validate();
  if (samples_in.empty()) throw Error("fit_class: no samples");
  fit_linear(samples_in);  // validates every sample
  std::vector<FitSample> samples(samples_in.begin(), samples_in.end());
  std::stable_sort(samples.begin(), samples.end(),
                   [](const FitSample& a, const FitSample& b) { return a.bytes < b.bytes; });
  const std::size_t n = samples.size();
  const std::size_t min_seg = static_cast<std::size_t>(options.min_samples_per_segment);
  auto span_of = [&](std::size_t i, std::size_t j) { return std::span<const FitSample>(samples).subspan(i, j - i); };

  // cost[i][j]: error of one segment over samples [i, j); a segment may only end between two
  // distinct byte sizes, so that upto_bytes separates them.
  auto can_split_at = [&](std::size_t j) { return j == n || (j > 0 && samples[j - 1].bytes < samples[j].bytes); };
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> cost(n + 1, std::vector<double>(n + 1, kInf));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j <= n; ++j)
      if (j - i >= min_seg || (i == 0 && j == n)) cost[i][j] = solve_relative_nnls(span_of(i, j)).sse;

  // Dynamic programme over k segments: best[k][j] = least error of k segments covering [0, j).
  const std::size_t kmax = static_cast<std::size_t>(options.max_segments);
  std::vector<std::vector<double>> best(kmax + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<std::size_t>> from(kmax + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t k = 1; k <= kmax; ++k)
    for (std::size_t j = 1; j <= n; ++j) {
      if (!can_split_at(j)) continue;
      for (std::size_t i = 0; i < j; ++i) {
        if (!std::isfinite(best[k - 1][i]) || !std::isfinite(cost[i][j])) continue;
        double e = best[k - 1][i] + cost[i][j];
        if (e < best[k][j]) best[k][j] = e, from[k][j] = i;
      }
    }
  std::size_t chosen = 1;
  for (std::size_t k = 2; k <= kmax; ++k) {
    if (!std::isfinite(best[k][n]) || !(best[k][n] <= options.min_improvement * best[chosen][n])) break;
    chosen = k;
  }

  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t k = chosen, j = n; k > 0; --k) {
    std::size_t i = from[k][j];
    ranges.emplace_back(i, j);
    j = i;
  }
  std::reverse(ranges.begin(), ranges.end());
  ClassFit fit;
  fit.num_samples = static_cast<int>(n);
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    auto [i, j] = ranges[r];
    FitSegment seg = solve_relative_nnls(span_of(i, j)).segment;
    // The boundary sits at the geometric mean of the sizes either side, so a size between two
    // sweep points goes to the segment it is nearer to on a log scale.
    seg.upto_bytes = j == n ? kInf : std::sqrt(std::max(samples[j - 1].bytes, 1.0) * samples[j].bytes);
    fit.segments.push_back(seg);
  }
  double sq = 0;
  for (const FitSample& s : samples) {
    double rel = fit.time_s(s.flops, s.bytes) / s.time_s - 1;
    sq += rel * rel;
  }
  fit.rms_relative_error = std::sqrt(sq / static_cast<double>(n));
  return fit;
}

CopyFit fit_copy(std::span<const FitSample> samples) {
  std::vector<FitSample> copy(samples.begin(), samples.end());
  for (FitSample& s : copy) s.flops = 0;
  FitSegment seg = fit_linear(copy);
  if (!(seg.s_per_byte > 0))
    throw Error("fit_copy: the copy times do not grow with size; cannot fit a bandwidth (" +
                std::to_string(samples.size()) + " samples)");
  return CopyFit{.latency_s = seg.a_s, .bandwidth_Bps = 1.0 / seg.s_per_byte};
}

const DeviceCalibration* Calibration::find_device(std::string_view name) const {
  for (const DeviceCalibration& d : devices)
    if (d.device == name) return &d;
  return nullptr;
}

const CopyCalibration* Calibration::find_copy(std::string_view src, std::string_view dst) const {
  for (const CopyCalibration& c : copies)
    if (c.src == src && c.dst == dst) return &c;
  return nullptr;
}

std::string kernel_family(const KernelSignature& sig) {
  switch (sig.cls) {
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter:
      return std::string(kernel_class_name(sig.cls)) + "{r=" + std::to_string(sig.dim("r")) +
             ",s=" + std::to_string(sig.dim("s")) + ",stride=" + std::to_string(sig.dim("stride")) + "}";
    case KernelClass::kElementwise:
      return "elementwise{inputs=" + std::to_string(sig.dim("inputs")) + "}";
    default: return {};
  }
}

void refit_device(DeviceCalibration& d, const FitOptions& options) {
  std::map<KernelClass, std::vector<FitSample>> by_class;
  std::map<std::string, std::vector<FitSample>> by_family;
  for (const auto& [sig, t] : d.kernel_times_s) {
    if (sig.cls == KernelClass::kNoop || !(t > 0)) continue;
    const FitSample sample{kernel_flops(sig), kernel_bytes(sig), t};
    by_class[sig.cls].push_back(sample);
    if (std::string family = kernel_family(sig); !family.empty()) by_family[family].push_back(sample);
  }
  // Hash-map order is unspecified; sort so that the fit is deterministic.
  auto sorted = [](std::vector<FitSample>& samples) -> std::vector<FitSample>& {
    std::sort(samples.begin(), samples.end(), [](const FitSample& a, const FitSample& b) {
      return std::tie(a.bytes, a.flops, a.time_s) < std::tie(b.bytes, b.flops, b.time_s);
    });
    return samples;
  };
  d.fits.clear();
  for (auto& [cls, samples] : by_class) d.fits[cls] = fit_class(sorted(samples), options);
  d.family_fits.clear();
  for (auto& [family, samples] : by_family)
    if (static_cast<int>(samples.size()) >= kMinFamilySamples) d.family_fits[family] = fit_class(sorted(samples), options);
}

void Calibration::refit(const FitOptions& options) {
  options.validate();
  for (DeviceCalibration& d : devices) refit_device(d, options);
}

std::optional<double> fitted_time_s(const DeviceCalibration& d, const KernelSignature& sig) {
  if (!d.family_fits.empty())
    if (auto it = d.family_fits.find(kernel_family(sig)); it != d.family_fits.end())
      return it->second.time_s(kernel_flops(sig), kernel_bytes(sig));
  if (auto it = d.fits.find(sig.cls); it != d.fits.end()) return it->second.time_s(kernel_flops(sig), kernel_bytes(sig));
  return std::nullopt;
}

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

HoldOutReport hold_out_check(const Calibration& calibration, int every, const FitOptions& options) {
  PLACELAB_CHECK(every >= 2) << "hold_out_check: every = " << every;
  options.validate();
  HoldOutReport report;
  std::vector<double> all;
  for (const DeviceCalibration& d : calibration.devices) {
    std::map<KernelClass, std::vector<std::pair<KernelSignature, double>>> by_class;
    for (const auto& [sig, t] : d.kernel_times_s)
      if (sig.cls != KernelClass::kNoop && t > 0) by_class[sig.cls].emplace_back(sig, t);
    // The held-out signatures of every class leave the device's measurements together; the rest
    // is refitted exactly as a calibration is (class and family fits) and asked as the cost
    // model asks it.
    DeviceCalibration rest = d;
    std::map<KernelClass, std::vector<std::pair<KernelSignature, double>>> held_by_class;
    for (auto& [cls, items] : by_class) {
      if (static_cast<int>(items.size()) < every + options.min_samples_per_segment) continue;
      // By work, then by the signature's text: a deterministic order whatever the hash map's.
      auto key = [](const std::pair<KernelSignature, double>& x) {
        return std::tuple(kernel_flops(x.first), kernel_bytes(x.first), to_string(x.first));
      };
      std::sort(items.begin(), items.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
      for (std::size_t i = 1; i + 1 < items.size(); i += static_cast<std::size_t>(every)) {
        held_by_class[cls].push_back(items[i]);
        rest.kernel_times_s.erase(items[i].first);
      }
    }
    refit_device(rest, options);
    for (const auto& [cls, held] : held_by_class) {
      HoldOutClass c{.device = d.device, .cls = cls, .fitted = static_cast<int>(by_class[cls].size() - held.size()),
                     .held_out = static_cast<int>(held.size())};
      std::vector<double> errors;
      for (const auto& [sig, t] : held) {
        HoldOutPrediction p{d.device, sig, t, fitted_time_s(rest, sig).value_or(0.0)};
        errors.push_back(std::fabs(p.relative_error()));
        c.max_abs_error = std::max(c.max_abs_error, errors.back());
        report.predictions.push_back(std::move(p));
      }
      all.insert(all.end(), errors.begin(), errors.end());
      c.median_abs_error = median_of(std::move(errors));
      report.classes.push_back(c);
    }
  }
  report.median_abs_error = median_of(std::move(all));
  return report;
}

// ---------------------------------------------------------------------------------------------
// YAML reading

namespace {

class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field, const std::string& rule) const {
    std::string where = origin_;
    if (node.IsDefined() && node.Mark().line >= 0) where += ":" + std::to_string(node.Mark().line + 1);
    std::string value;
    if (node.IsDefined() && node.IsScalar()) value = " = " + node.Scalar();
    throw InputError(where + ": " + field + value + ": " + rule);
  }
  [[noreturn]] void fail_at(const YAML::Mark& mark, const std::string& field, const std::string& rule) const {
    std::string where = origin_;
    if (mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
    throw InputError(where + ": " + field + ": " + rule);
  }

  // The text of a mapping key. A list, a map or nothing as a key (`? [a, b]: 1`) is an InputError
  // here, not yaml-cpp's bad conversion.
  std::string key(const YAML::Node& key, const std::string& field) const {
    if (!key.IsScalar())
      fail_at(key.Mark(), field.empty() ? "(top level)" : field, "keys must be plain names, not a list, map or null");
    return key.Scalar();
  }

  // Rejects keys other than `allowed` (typos would otherwise be silently ignored) and a key given
  // twice (yaml-cpp keeps both; the second was read and the first ignored).
  void only_keys(const YAML::Node& map, const std::string& field, std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, field, "must be a mapping");
    std::vector<std::string> seen;
    for (const auto& kv : map) {
      std::string key = this->key(kv.first, field);
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail_at(kv.first.Mark(), field.empty() ? key : field + "." + key, "duplicate key");
      seen.push_back(key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        fail_at(kv.first.Mark(), field.empty() ? key : field + "." + key, unknown_key_rule(join_names(allowed)));
      }
    }
  }

  YAML::Node require(const YAML::Node& map, const std::string& parent, const char* key) const {
    YAML::Node v = map[key];
    if (!v.IsDefined() || v.IsNull()) fail_at(map.Mark(), join(parent, key), "missing required field");
    return v;
  }

  std::string string(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "must be a string");
    return node.Scalar();
  }

  double number(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "must be a number");
    const std::string& s = node.Scalar();
    if (s == ".inf" || s == "inf") return std::numeric_limits<double>::infinity();
    // Decimal only, as the writer writes it (strtod also read hex floats, "0x1p3", and spaces).
    const std::optional<double> v = parse_number<double>(s);
    if (!v || std::isnan(*v)) fail(node, field, "must be a number");
    return *v;
  }

  double positive(const YAML::Node& node, const std::string& field) const {
    double v = number(node, field);
    if (!(v > 0) || !std::isfinite(v)) fail(node, field, "must be > 0 and finite");
    return v;
  }
  double non_negative(const YAML::Node& node, const std::string& field) const {
    double v = number(node, field);
    if (!(v >= 0) || !std::isfinite(v)) fail(node, field, "must be >= 0 and finite");
    return v;
  }
  // Decimal digits only: "1.0", "1e0" and "0x10" are no core numbers.
  int integer(const YAML::Node& node, const std::string& field, int lo, int hi) const {
    const std::optional<int64_t> v = node.IsScalar() ? parse_number<int64_t>(node.Scalar()) : std::nullopt;
    if (!v || *v < lo || *v > hi)
      fail(node, field, "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<int>(*v);
  }

  static std::string join(const std::string& parent, const char* key) {
    return parent.empty() ? std::string(key) : parent + "." + key;
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

FitSegment read_segment(const Reader& r, const YAML::Node& node, const std::string& field, bool last) {
  r.only_keys(node, field, {"upto_bytes", "a_s", "s_per_flop", "s_per_byte"});
  FitSegment s;
  if (node["upto_bytes"]) {
    s.upto_bytes = r.positive(node["upto_bytes"], field + ".upto_bytes");
  } else if (!last) {
    r.fail_at(node.Mark(), field + ".upto_bytes", "missing (only the last segment may omit it)");
  }
  s.a_s = r.non_negative(r.require(node, field, "a_s"), field + ".a_s");
  s.s_per_flop = r.non_negative(r.require(node, field, "s_per_flop"), field + ".s_per_flop");
  s.s_per_byte = r.non_negative(r.require(node, field, "s_per_byte"), field + ".s_per_byte");
  return s;
}

ClassFit read_fit(const Reader& r, const YAML::Node& node, const std::string& field) {
  r.only_keys(node, field, {"samples", "rms_relative_error", "segments"});
  ClassFit fit;
  if (node["samples"]) fit.num_samples = r.integer(node["samples"], field + ".samples", 0, 1 << 30);
  if (node["rms_relative_error"])
    fit.rms_relative_error = r.non_negative(node["rms_relative_error"], field + ".rms_relative_error");
  YAML::Node segs = r.require(node, field, "segments");
  if (!segs.IsSequence() || segs.size() == 0) r.fail(segs, field + ".segments", "must be a non-empty list");
  for (std::size_t i = 0; i < segs.size(); ++i) {
    std::string f = field + ".segments[" + std::to_string(i) + "]";
    FitSegment s = read_segment(r, segs[i], f, i + 1 == segs.size());
    if (!fit.segments.empty() && !(s.upto_bytes > fit.segments.back().upto_bytes))
      r.fail(segs[i]["upto_bytes"], f + ".upto_bytes", "must be greater than the previous segment's");
    fit.segments.push_back(s);
  }
  fit.segments.back().upto_bytes = std::numeric_limits<double>::infinity();
  return fit;
}

DeviceCalibration read_device(const Reader& r, const YAML::Node& node, const std::string& field) {
  r.only_keys(node, field, {"device", "cores", "probe_s", "kernels", "fits", "family_fits"});
  DeviceCalibration d;
  d.device = r.string(r.require(node, field, "device"), field + ".device");
  if (d.device.empty()) r.fail(node["device"], field + ".device", "must not be empty");
  if (YAML::Node cores = node["cores"]) {
    if (!cores.IsSequence()) r.fail(cores, field + ".cores", "must be a list of core numbers");
    for (std::size_t i = 0; i < cores.size(); ++i)
      d.cores.push_back(r.integer(cores[i], field + ".cores[" + std::to_string(i) + "]", 0, 1 << 20));
  }
  if (YAML::Node probe = node["probe_s"]) d.probe_s = r.positive(probe, field + ".probe_s");
  if (YAML::Node kernels = node["kernels"]) {
    if (!kernels.IsMap()) r.fail(kernels, field + ".kernels", "must be a mapping of kernel signature to seconds");
    for (const auto& kv : kernels) {
      std::string key = r.key(kv.first, field + ".kernels");
      std::string f = field + ".kernels[\"" + key + "\"]";
      auto sig = parse_kernel_signature(key);
      if (!sig) r.fail_at(kv.first.Mark(), f, "not a kernel signature (e.g. gemm{m=64,n=64,k=64,batch=1})");
      double t = r.positive(kv.second, f);
      if (!d.kernel_times_s.emplace(*sig, t).second) r.fail_at(kv.first.Mark(), f, "duplicate signature");
    }
  }
  if (YAML::Node fits = node["fits"]) {
    if (!fits.IsMap()) r.fail(fits, field + ".fits", "must be a mapping of kernel class to fit");
    for (const auto& kv : fits) {
      std::string key = r.key(kv.first, field + ".fits");
      auto cls = kernel_class_from_name(key);
      if (!cls || *cls == KernelClass::kNoop)
        r.fail_at(kv.first.Mark(), field + ".fits." + key, "not a kernel class (gemm, conv2d, elementwise, …)");
      if (!d.fits.emplace(*cls, read_fit(r, kv.second, field + ".fits." + key)).second)
        r.fail_at(kv.first.Mark(), field + ".fits." + key, "duplicate kernel class");
    }
  }
  if (YAML::Node families = node["family_fits"]) {
    if (!families.IsMap()) r.fail(families, field + ".family_fits", "must be a mapping of shape family to fit");
    for (const auto& kv : families) {
      std::string key = r.key(kv.first, field + ".family_fits");
      // A family is what kernel_family writes: a key it never produces would never be looked up.
      const std::string f = field + ".family_fits[\"" + key + "\"]";
      static const std::regex kFamily(
          R"((conv2d|conv2d_backprop_input|conv2d_backprop_filter)\{r=[0-9]{1,6},s=[0-9]{1,6},stride=[0-9]{1,6}\}|elementwise\{inputs=[0-9]{1,6}\})");
      if (!std::regex_match(key, kFamily))
        r.fail_at(kv.first.Mark(), f, "not a shape family (e.g. conv2d{r=3,s=3,stride=1}, elementwise{inputs=2})");
      if (!d.family_fits.emplace(key, read_fit(r, kv.second, f)).second) r.fail_at(kv.first.Mark(), f, "duplicate family");
    }
  }
  return d;
}

CopyCalibration read_copy(const Reader& r, const YAML::Node& node, const std::string& field) {
  r.only_keys(node, field, {"src", "dst", "latency_s", "bandwidth_Bps", "samples"});
  CopyCalibration c;
  c.src = r.string(r.require(node, field, "src"), field + ".src");
  c.dst = r.string(r.require(node, field, "dst"), field + ".dst");
  if (c.src == c.dst) r.fail(node["dst"], field + ".dst", "must differ from src");
  c.fit.latency_s = r.non_negative(r.require(node, field, "latency_s"), field + ".latency_s");
  c.fit.bandwidth_Bps = r.positive(r.require(node, field, "bandwidth_Bps"), field + ".bandwidth_Bps");
  if (YAML::Node samples = node["samples"]) {
    if (!samples.IsSequence()) r.fail(samples, field + ".samples", "must be a list of [bytes, seconds]");
    for (std::size_t i = 0; i < samples.size(); ++i) {
      std::string f = field + ".samples[" + std::to_string(i) + "]";
      if (!samples[i].IsSequence() || samples[i].size() != 2) r.fail(samples[i], f, "must be [bytes, seconds]");
      c.samples.push_back({0, r.non_negative(samples[i][0], f + "[0]"), r.positive(samples[i][1], f + "[1]")});
    }
  }
  return c;
}

Calibration read_calibration_block(const Reader& r, const YAML::Node& node) {
  const std::string field = "calibration";
  r.only_keys(node, field, {"backend", "host", "created", "devices", "copies", "dispatch_s", "dispatch_s_by_type"});
  Calibration c;
  c.backend = r.string(r.require(node, field, "backend"), field + ".backend");
  if (node["host"]) c.host = r.string(node["host"], field + ".host");
  if (node["created"]) c.created = r.string(node["created"], field + ".created");
  YAML::Node devices = r.require(node, field, "devices");
  if (!devices.IsSequence()) r.fail(devices, field + ".devices", "must be a list");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    std::string f = field + ".devices[" + std::to_string(i) + "]";
    DeviceCalibration d = read_device(r, devices[i], f);
    if (c.find_device(d.device)) r.fail(devices[i]["device"], f + ".device", "duplicate device");
    c.devices.push_back(std::move(d));
  }
  if (YAML::Node copies = node["copies"]) {
    if (!copies.IsSequence()) r.fail(copies, field + ".copies", "must be a list");
    for (std::size_t i = 0; i < copies.size(); ++i) {
      std::string f = field + ".copies[" + std::to_string(i) + "]";
      CopyCalibration cc = read_copy(r, copies[i], f);
      if (c.find_copy(cc.src, cc.dst)) r.fail_at(copies[i].Mark(), f, "duplicate copy " + cc.src + " -> " + cc.dst);
      c.copies.push_back(std::move(cc));
    }
  }
  // Host costs: seconds, at most one second an op (no framework spends more issuing one).
  auto host_seconds = [&](const YAML::Node& v, const std::string& f) {
    const double t = r.positive(v, f);
    if (t > 1.0) r.fail(v, f, "must be <= 1 s: the host's cost of issuing one op");
    return t;
  };
  if (YAML::Node d = node["dispatch_s"]) c.dispatch_s = host_seconds(d, field + ".dispatch_s");
  if (YAML::Node by = node["dispatch_s_by_type"]) {
    if (!by.IsMap()) r.fail(by, field + ".dispatch_s_by_type", "must be a mapping of op type to seconds");
    for (const auto& kv : by) {
      const std::string key = r.key(kv.first, field + ".dispatch_s_by_type");
      c.dispatch_s_by_type[key] = host_seconds(kv.second, field + ".dispatch_s_by_type." + key);
    }
  }
  return c;
}

YAML::Node load_yaml(std::string_view text, std::string_view origin) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw InputError(std::string(origin) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

// The text of the top-level `machine:` block with its lines at their original line numbers (the
// rest blanked) and its indentation removed, so that parse_machine_yaml reports the file's lines.
std::string machine_block_text(std::string_view text, const YAML::Node& machine, const Reader& r) {
  if (!machine.IsMap() || machine.Style() == YAML::EmitterStyle::Flow)
    r.fail(machine, "machine", "must be a block mapping (one field per line)");
  const int first = machine.Mark().line;  // line of the block's first key
  const int indent = machine.Mark().column;
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string out;
  bool inside = false;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    std::string_view line = lines[static_cast<std::size_t>(i)];
    if (i == first) inside = true;
    std::size_t lead = line.find_first_not_of(' ');
    bool top_level = lead == 0 && !line.empty() && line[0] != '#';
    if (inside && i > first && top_level) inside = false;  // the next top-level key ends the block
    if (inside && i >= first) {
      std::size_t cut = std::min<std::size_t>(static_cast<std::size_t>(indent), lead == std::string_view::npos ? line.size() : lead);
      out += line.substr(cut);
    }
    out += '\n';
  }
  return out;
}

}  // namespace

Calibration parse_calibration_yaml(std::string_view text, std::string_view origin) {
  Reader r{origin};
  YAML::Node root = load_yaml(text, origin);
  if (!root.IsMap() || !root["calibration"]) r.fail_at(root.Mark(), "calibration", "missing top-level block");
  return read_calibration_block(r, root["calibration"]);
}

CalibratedMachine parse_calibrated_machine_yaml(std::string_view text, std::string_view origin) {
  Reader r{origin};
  YAML::Node root = load_yaml(text, origin);
  if (!root.IsMap()) r.fail_at(root.Mark(), "machine", "a calibrated machine file must have `machine:` and `calibration:` blocks");
  r.only_keys(root, "", {"machine", "calibration"});
  YAML::Node machine = root["machine"];
  if (!machine) r.fail_at(root.Mark(), "machine", "missing top-level block");
  if (!root["calibration"]) r.fail_at(root.Mark(), "calibration", "missing top-level block");
  CalibratedMachine out;
  out.machine = parse_machine_yaml(machine_block_text(text, machine, r), origin);
  out.calibration = read_calibration_block(r, root["calibration"]);
  YAML::Node devs = root["calibration"]["devices"];
  for (std::size_t i = 0; i < out.calibration.devices.size(); ++i)
    if (!out.machine.find_device(out.calibration.devices[i].device))
      r.fail(devs[i]["device"], "calibration.devices[" + std::to_string(i) + "].device", "not a device of the machine");
  YAML::Node copies = root["calibration"]["copies"];
  for (std::size_t i = 0; i < out.calibration.copies.size(); ++i) {
    const CopyCalibration& c = out.calibration.copies[i];
    std::string f = "calibration.copies[" + std::to_string(i) + "]";
    if (!out.machine.find_device(c.src)) r.fail(copies[i]["src"], f + ".src", "not a device of the machine");
    if (!out.machine.find_device(c.dst)) r.fail(copies[i]["dst"], f + ".dst", "not a device of the machine");
  }
  return out;
}

CalibratedMachine load_calibrated_machine(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path.string() + ": cannot open calibrated machine file");
  return parse_calibrated_machine_yaml(read_text_file(path), path.string());
}

// ---------------------------------------------------------------------------------------------
// YAML writing: by hand, so that the layout (one signature per line, flow-style segments) stays
// readable and diffable between calibrations.

namespace {

std::string yaml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  std::ostringstream s;
  s << std::setprecision(10) << v;
  return s.str();
}

void write_calibration(std::ostream& o, const Calibration& c) {
  o << "calibration:\n";
  o << "  backend: " << yaml_quoted(c.backend) << "\n";
  if (!c.host.empty()) o << "  host: " << yaml_quoted(c.host) << "\n";
  if (!c.created.empty()) o << "  created: " << yaml_quoted(c.created) << "\n";
  if (c.dispatch_s > 0) o << "  dispatch_s: " << num(c.dispatch_s) << "\n";
  if (!c.dispatch_s_by_type.empty()) {
    o << "  dispatch_s_by_type:\n";
    for (const auto& [type, t] : c.dispatch_s_by_type) o << "    " << yaml_quoted(type) << ": " << num(t) << "\n";
  }
  o << "  devices:" << (c.devices.empty() ? " []" : "") << "\n";
  for (const DeviceCalibration& d : c.devices) {
    o << "    - device: " << yaml_quoted(d.device) << "\n";
    if (!d.cores.empty()) {
      o << "      cores: [";
      for (std::size_t i = 0; i < d.cores.size(); ++i) o << (i ? ", " : "") << d.cores[i];
      o << "]\n";
    }
    if (d.probe_s > 0) o << "      probe_s: " << num(d.probe_s) << "\n";
    // Sorted by text so that files diff cleanly between runs.
    std::vector<std::pair<std::string, double>> kernels;
    for (const auto& [sig, t] : d.kernel_times_s) kernels.emplace_back(to_string(sig), t);
    std::sort(kernels.begin(), kernels.end());
    o << "      kernels:" << (kernels.empty() ? " {}" : "") << "\n";
    for (const auto& [key, t] : kernels) o << "        " << yaml_quoted(key) << ": " << num(t) << "\n";
    auto write_fit = [&](std::string_view key, const ClassFit& fit) {
      o << "        " << key << ":\n";
      o << "          samples: " << fit.num_samples << "\n";
      o << "          rms_relative_error: " << num(fit.rms_relative_error) << "\n";
      o << "          segments:\n";
      for (const FitSegment& s : fit.segments) {
        o << "            - {";
        if (std::isfinite(s.upto_bytes)) o << "upto_bytes: " << num(s.upto_bytes) << ", ";
        o << "a_s: " << num(s.a_s) << ", s_per_flop: " << num(s.s_per_flop) << ", s_per_byte: " << num(s.s_per_byte)
          << "}\n";
      }
    };
    o << "      fits:" << (d.fits.empty() ? " {}" : "") << "\n";
    for (const auto& [cls, fit] : d.fits) write_fit(kernel_class_name(cls), fit);
    if (!d.family_fits.empty()) {
      o << "      family_fits:\n";
      for (const auto& [family, fit] : d.family_fits) write_fit(yaml_quoted(family), fit);
    }
  }
  o << "  copies:" << (c.copies.empty() ? " []" : "") << "\n";
  for (const CopyCalibration& cc : c.copies) {
    o << "    - src: " << yaml_quoted(cc.src) << "\n";
    o << "      dst: " << yaml_quoted(cc.dst) << "\n";
    o << "      latency_s: " << num(cc.fit.latency_s) << "\n";
    o << "      bandwidth_Bps: " << num(cc.fit.bandwidth_Bps) << "\n";
    if (!cc.samples.empty()) {
      o << "      samples:  # [bytes, seconds]\n";
      for (const FitSample& s : cc.samples) o << "        - [" << num(s.bytes) << ", " << num(s.time_s) << "]\n";
    }
  }
}

}  // namespace

std::string calibration_yaml(const Calibration& calibration) {
  std::ostringstream o;
  write_calibration(o, calibration);
  return o.str();
}

std::string machine_yaml(const Machine& m, bool as_block) {
  std::ostringstream o;
  const std::string in = as_block ? "  " : "";
  if (as_block) o << "machine:\n";
  o << in << "name: " << yaml_quoted(m.name) << "\n";
  if (!m.description.empty()) o << in << "description: " << yaml_quoted(m.description) << "\n";
  o << in << "devices:\n";
  for (const Device& d : m.devices) {
    o << in << "  - name: " << yaml_quoted(d.name) << "\n";
    o << in << "    kind: " << device_kind_name(d.kind) << "\n";
    if (!d.model.empty()) o << in << "    model: " << yaml_quoted(d.model) << "\n";
    o << in << "    peak_flops: " << num(d.peak_flops_per_s) << "\n";
    o << in << "    memory_bandwidth_Bps: " << num(d.memory_bandwidth_Bps) << "\n";
    o << in << "    memory_bytes: " << d.memory_bytes << "\n";
    o << in << "    streams: " << d.streams << "\n";
    if (d.full_speed_ops != 1) o << in << "    full_speed_ops: " << d.full_speed_ops << "\n";
    o << in << "    launch_overhead_s: " << num(d.launch_overhead_s) << "\n";
    if (d.dispatch_s != kDefaultDispatchS) o << in << "    dispatch_s: " << num(d.dispatch_s) << "\n";
    if (!d.copy_engine) o << in << "    copy_engine: false\n";
    if (d.efficiency && d.efficiency->name != "custom") {
      o << in << "    efficiency: " << d.efficiency->name << "\n";
    } else if (d.efficiency) {
      // A spelled-out profile: every value, so that reading the file back gives the same profile.
      const EfficiencyProfile& p = *d.efficiency;
      o << in << "    efficiency:\n";
      o << in << "      winograd_speedup: " << num(p.winograd_speedup) << "\n";
      if (p.host_op_s) o << in << "      host_op_s: " << num(*p.host_op_s) << "\n";
      for (int c = 0; c < kNumKernelClasses; ++c) {
        const auto cls = static_cast<KernelClass>(c);
        if (cls == KernelClass::kNoop) continue;
        const EfficiencyCurve& e = p.curve(cls);
        o << in << "      " << kernel_class_name(cls) << ": {compute_max: " << num(e.compute_max)
          << ", compute_half_flops: " << num(e.compute_half_flops) << ", memory_max: " << num(e.memory_max)
          << ", memory_half_bytes: " << num(e.memory_half_bytes) << "}\n";
      }
    }
  }
  if (!m.switches.empty()) {
    o << in << "switches: [";
    for (std::size_t i = 0; i < m.switches.size(); ++i) o << (i ? ", " : "") << yaml_quoted(m.switches[i]);
    o << "]\n";
  }
  o << in << "links:" << (m.links.empty() ? " []" : "") << "\n";
  for (const Link& l : m.links) {
    o << in << "  - a: " << yaml_quoted(l.a) << "\n";
    o << in << "    b: " << yaml_quoted(l.b) << "\n";
    o << in << "    kind: " << link_kind_name(l.kind) << "\n";
    o << in << "    bandwidth_Bps: " << num(l.bandwidth_Bps) << "\n";
    o << in << "    latency_s: " << num(l.latency_s) << "\n";
    if (l.reverse_bandwidth_Bps) o << in << "    reverse_bandwidth_Bps: " << num(*l.reverse_bandwidth_Bps) << "\n";
    if (l.reverse_latency_s) o << in << "    reverse_latency_s: " << num(*l.reverse_latency_s) << "\n";
  }
  if (!m.route_figures.empty()) o << in << "route_figures:\n";
  for (const RouteFigure& f : m.route_figures) {
    auto names = [&](const std::vector<std::string>& list) {
      std::string out = "[";
      for (std::size_t i = 0; i < list.size(); ++i) out.append(i ? ", " : "").append(yaml_quoted(list[i]));
      return out.append("]");
    };
    o << in << "  - from: " << names(f.from) << "\n";
    o << in << "    to: " << names(f.to) << "\n";
    if (f.bandwidth_Bps) o << in << "    bandwidth_Bps: " << num(*f.bandwidth_Bps) << "\n";
    if (f.latency_s) o << in << "    latency_s: " << num(*f.latency_s) << "\n";
  }
  return o.str();
}

void write_calibrated_machine(const std::filesystem::path& path, const Machine& machine,
                              const Calibration& calibration) {
  std::string text = "# Calibrated machine (docs/calibration.md): the machine in the schema of docs/machines.md,\n"
                     "# then the measured kernel times, per-class fits and copy fits.\n";
  text += machine_yaml(machine, true);
  text += calibration_yaml(calibration);

  write_file_atomically(path, text);  // a crash never leaves a half-written file
}

}  // namespace placelab
