// Chrome trace export. Devices are trace processes (pid = device id) with one thread per compute
// stream; the links form one more process (pid = number of devices) with one thread per link
// direction. A transfer appears on every link direction of its route, since it holds them all.
#include "placelab/sim/trace.h"

#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "placelab/core/error.h"

namespace placelab {
namespace {

constexpr double kMicrosecondsPerSecond = 1e6;

nlohmann::json metadata(const char* what, int pid, int tid, nlohmann::json args) {
  nlohmann::json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

void write_chrome_trace(const SimResult& result, const OpGraph& graph, const Machine& machine, std::ostream& out) {
  if (result.timeline.empty() && result.memory_timeline.empty())
    throw Error("write_chrome_trace: the result has no timeline (simulate with SimOptions::record_timeline)");
  PLACELAB_CHECK(result.devices.size() == machine.num_devices())
      << "result has " << result.devices.size() << " devices, machine " << machine.num_devices();
  const int links_pid = static_cast<int>(machine.num_devices());

  nlohmann::json events = nlohmann::json::array();
  for (std::size_t d = 0; d < machine.num_devices(); ++d) {
    const Device& dev = machine.devices[d];
    const int pid = static_cast<int>(d);
    events.push_back(metadata("process_name", pid, -1, {{"name", dev.name}}));
    events.push_back(metadata("process_sort_index", pid, -1, {{"sort_index", pid}}));
    for (int s = 0; s < dev.streams; ++s)
      events.push_back(metadata("thread_name", pid, s, {{"name", "stream " + std::to_string(s)}}));
  }
  events.push_back(metadata("process_name", links_pid, -1, {{"name", "links"}}));
  events.push_back(metadata("process_sort_index", links_pid, -1, {{"sort_index", links_pid}}));
  for (std::size_t dir = 0; dir < machine.num_link_directions(); ++dir)
    events.push_back(metadata("thread_name", links_pid, static_cast<int>(dir),
                              {{"name", machine.link_direction_name(static_cast<LinkDirection>(dir))}}));

  for (const TimelineEvent& e : result.timeline) {
    PLACELAB_CHECK(e.op < graph.num_ops()) << "timeline names op " << e.op << " of a " << graph.num_ops() << "-op graph";
    const Op& op = graph.op(e.op);
    const double ts = e.start_s * kMicrosecondsPerSecond;
    const double dur = (e.end_s - e.start_s) * kMicrosecondsPerSecond;
    if (e.kind == TimelineEvent::Kind::kOp) {
      events.push_back({{"ph", "X"}, {"cat", "op"}, {"name", op.name}, {"pid", e.device}, {"tid", e.stream},
                        {"ts", ts}, {"dur", dur},
                        {"args", {{"op", e.op}, {"type", op.type}, {"output_bytes", e.bytes}}}});
    } else {
      const std::string name = op.name + " -> " + machine.devices[e.device].name;
      for (LinkDirection hop : machine.route(e.src_device, e.device).hops)
        events.push_back({{"ph", "X"}, {"cat", "transfer"}, {"name", name}, {"pid", links_pid}, {"tid", hop},
                          {"ts", ts}, {"dur", dur},
                          {"args", {{"producer", e.op},
                                    {"from", machine.devices[e.src_device].name},
                                    {"to", machine.devices[e.device].name},
                                    {"bytes", e.bytes}}}});
    }
  }
  // Eager graphs: the host threads that issued the ops, one more process after the links.
  if (!result.host_timeline.empty()) {
    const int host_pid = links_pid + 1;
    events.push_back(metadata("process_name", host_pid, -1, {{"name", "host threads"}}));
    events.push_back(metadata("process_sort_index", host_pid, -1, {{"sort_index", host_pid}}));
    std::vector<bool> named(machine.num_devices() + 1, false);
    for (const HostEvent& e : result.host_timeline) {
      PLACELAB_CHECK(e.op < graph.num_ops() && e.thread <= machine.num_devices()) << "host event op " << e.op;
      if (!named[e.thread]) {
        named[e.thread] = true;
        const std::string name = e.thread == 0 ? "main" : "autograd " + machine.devices[e.thread - 1].name;
        events.push_back(metadata("thread_name", host_pid, static_cast<int>(e.thread), {{"name", name}}));
      }
      const Op& op = graph.op(e.op);
      events.push_back({{"ph", "X"}, {"cat", "issue"}, {"name", op.name}, {"pid", host_pid}, {"tid", e.thread},
                        {"ts", e.start_s * kMicrosecondsPerSecond}, {"dur", (e.end_s - e.start_s) * kMicrosecondsPerSecond},
                        {"args", {{"op", e.op}, {"type", op.type}}}});
    }
  }
  for (const MemorySample& m : result.memory_timeline)
    events.push_back({{"ph", "C"}, {"name", "memory bytes"}, {"pid", m.device},
                      {"ts", m.time_s * kMicrosecondsPerSecond}, {"args", {{"bytes", m.bytes}}}});

  nlohmann::json doc = {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
  out << doc.dump() << '\n';
}

}  // namespace placelab
