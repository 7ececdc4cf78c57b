// `placelab machines [NAME] [--yaml]`: the presets, or one machine in detail.
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "format.h"
#include "placelab/hwmodels/machine_io.h"

namespace placelab::cli {
namespace {

// "2 x cpu Intel Xeon E5-2698 v4 (...), 8 x gpu Tesla V100 SXM2 16 GB": devices by kind, each kind
// named by the part its models share (presets append ", socket 1", ", board 0" per device).
std::string device_summary(const Machine& m) {
  std::string out;
  for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kGpu}) {
    int count = 0;
    std::string common;
    for (const Device& d : m.devices) {
      if (d.kind != kind) continue;
      if (count++ == 0) {
        common = d.model;
      } else {
        std::size_t n = 0;
        while (n < common.size() && n < d.model.size() && common[n] == d.model[n]) ++n;
        common.resize(n);
      }
    }
    if (count == 0) continue;
    // Cut back to the last complete item ("..., PCIe switch " → "...").
    if (auto comma = common.rfind(", "); comma != std::string::npos && count > 1) common.resize(comma);
    while (!common.empty() && (common.back() == ' ' || common.back() == ',')) common.pop_back();
    out += fmt::format("{}{} x {} {}", out.empty() ? "" : ", ", count, device_kind_name(kind), common.empty() ? "?" : common);
  }
  return out;
}

void print_machine(const Machine& m) {
  fmt::print("{}: {}\n\n", m.name, m.description);
  fmt::print("{:<10} {:<4} {:>8} {:>10} {:>11} {:>7} {:>9}  {}\n", "device", "kind", "TFLOP/s", "mem BW",
             "memory", "streams", "launch", "model");
  for (const Device& d : m.devices)
    fmt::print("{:<10} {:<4} {:>8.2f} {:>10} {:>11} {:>7} {:>9}  {}\n", d.name, device_kind_name(d.kind),
               d.peak_flops / 1e12, format_rate(d.memory_bandwidth_Bps), format_bytes(d.memory_bytes), d.streams,
               format_seconds(d.launch_overhead_s), d.model);
  if (!m.switches.empty()) {
    std::string sw;
    for (const auto& s : m.switches) sw += (sw.empty() ? "" : ", ") + s;
    fmt::print("\nswitches: {}\n", sw);
  }
  fmt::print("\n{:<7} {:<28} {:>11} {:>9}\n", "link", "endpoints", "bandwidth", "latency");
  for (const Link& l : m.links) {
    std::string bw = format_rate(l.bandwidth_Bps);
    if (l.reverse_bandwidth_Bps && *l.reverse_bandwidth_Bps != l.bandwidth_Bps)
      bw += " / " + format_rate(*l.reverse_bandwidth_Bps);
    fmt::print("{:<7} {:<28} {:>11} {:>9}\n", link_kind_name(l.kind), l.a + " <-> " + l.b, bw,
               format_seconds(l.latency_s));
  }
  fmt::print("\nroutes (bottleneck bandwidth, latency):\n");
  for (DeviceId s = 0; s < m.num_devices(); ++s)
    for (DeviceId t = 0; t < m.num_devices(); ++t) {
      if (s == t) continue;
      const Route& r = m.route(s, t);
      fmt::print("  {:>8} -> {:<8} {:>10} {:>9}  {} hop{}\n", m.devices[s].name, m.devices[t].name,
                 format_rate(r.bandwidth_Bps), format_seconds(r.latency_s), r.hops.size(),
                 r.hops.size() == 1 ? "" : "s");
    }
}

}  // namespace

void add_machines_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("machines", "List the machine presets, or show one machine in detail");
  auto name = std::make_shared<std::string>();
  auto yaml = std::make_shared<bool>(false);
  cmd->add_option("machine", *name, "A preset name or a machine YAML file to show in detail");
  cmd->add_flag("--yaml", *yaml, "Print the machine's YAML (a preset's source, with its sources cited)");
  cmd->footer("Examples:\n  placelab machines\n  placelab machines k80x4\n  placelab machines dgx1 --yaml");
  cmd->callback([name, yaml] {
    if (name->empty()) {
      if (*yaml) throw InputError("--yaml needs a machine name");
      fmt::print("{:<8} {:>7}  {}\n", "preset", "devices", "description");
      for (const std::string& p : preset_names()) {
        Machine m = load_machine(p);
        fmt::print("{:<8} {:>7}  {}\n{:<17} {}\n", p, m.num_devices(), m.description, "", device_summary(m));
      }
      fmt::print("\nShow one with `placelab machines <name>`; use one with `--machine <name>` or `--machine file.yaml`.\n");
      return;
    }
    if (*yaml) {
      std::vector<std::string> names = preset_names();
      if (std::find(names.begin(), names.end(), *name) != names.end()) {
        std::cout << preset_yaml(*name);
        return;
      }
    }
    print_machine(load_machine(*name));
  });
}

}  // namespace placelab::cli
