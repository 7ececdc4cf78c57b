// The parts of a sweep that do not start processes: which seeds it runs, when a scenario counts as
// finished, and the summary table. In the core library, so the Python module's in-process sweep
// writes the same tables as `placelab sweep`.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "scenario.h"
#include "sweep.h"

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<uint64_t> sweep_seeds(const Scenario& s, std::optional<int> seeds) {
  if (!seeds) return s.seeds;
  // CLI11 checks the flag's range; placelab.run and placelab.sweep pass theirs straight here.
  if (*seeds < 1 || *seeds > kMaxSeeds)
    throw InputError("--seeds " + std::to_string(*seeds) + ": must be in [1, " + std::to_string(kMaxSeeds) + "]");
  std::vector<uint64_t> want;
  for (int i = 1; i <= *seeds; ++i) want.push_back(static_cast<uint64_t>(i));
  return want;
}

bool scenario_finished(const Scenario& s, const std::vector<uint64_t>& seeds) {
  const fs::path summary = s.output / "summary.json";
  if (!fs::exists(summary)) return false;
  json j;
  try {
    j = json::parse(read_text_file(summary), nullptr, false);  // a FIFO or device in its place: not finished
  } catch (const InputError&) {
    return false;
  }
  // Finished with these seeds by this scenario as it is now (an edited one runs again, with
  // --resume keeping each run whose own fingerprint still matches).
  return !j.is_discarded() && j.is_object() && j.contains("fingerprint") && j["fingerprint"].is_string() &&
         j["fingerprint"].get<std::string>() == summary_fingerprint(scenario_fingerprint(s), s, seeds);
}

namespace {

std::string cell(const json& res) {
  if (!res.contains("mean_s")) return res.value("oom", false) ? "OOM" : "n/a";
  std::string c = fmt::format("{:.4f}", res["mean_s"].get<double>());
  if (res["runs"].size() > 1) c += fmt::format(" ± {:.4f}", res["std_s"].get<double>());
  return c;
}

// Whether a summary.json has every field the tables read, of the right type: one edited by hand,
// damaged or written by another version is left out of the tables with a warning, not a crash.
bool tabulable(const json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_string() || !j.contains("machine") ||
      !j["machine"].is_string() || !j.contains("results") || !j["results"].is_array())
    return false;
  for (const json& r : j["results"]) {
    if (!r.is_object() || !r.contains("name") || !r["name"].is_string() || !r.contains("runs") || !r["runs"].is_array())
      return false;
    for (const char* key : {"mean_s", "std_s"})
      if (r.contains(key) && !r[key].is_number()) return false;
    if (r.contains("mean_s") && !r.contains("std_s")) return false;
    if (r.contains("oom") && !r["oom"].is_boolean()) return false;
  }
  return true;
}

}  // namespace

void write_sweep_tables(const fs::path& dir, const std::string& name, const std::vector<Scenario>& scenarios) {
  std::vector<std::string> columns;
  std::vector<std::pair<std::string, json>> summaries;
  for (const Scenario& s : scenarios) {
    if (!fs::exists(s.output / "summary.json")) continue;  // a failed or stopped run: the sweep said so
    json j = json::value_t::discarded;
    try {
      j = json::parse(read_text_file(s.output / "summary.json"), nullptr, false);
    } catch (const InputError&) {
      // not a regular file: left out with the warning below
    }
    if (j.is_discarded() || !tabulable(j)) {
      std::cerr << "warning: " << (s.output / "summary.json").string()
                << ": not a run summary placelab can read; left out of the tables\n";
      continue;
    }
    for (const json& r : j["results"]) {
      // The name as a string (tabulable checked it is one): Clang's C++20 finds no std::string == json.
      const std::string& column = r["name"].get_ref<const std::string&>();
      if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
    }
    summaries.emplace_back(s.name, j);
  }
  std::ostringstream md, csv;
  md << "# Sweep " << name << "\n\nSeconds per step (simulated), mean ± std over seeds.\n\n| scenario | model | machine |";
  csv << "scenario,model,machine";
  for (const auto& c : columns) md << " " << c << " |", csv << "," << c << "_mean_s," << c << "_std_s";
  md << "\n|---|---|---|";
  for (std::size_t i = 0; i < columns.size(); ++i) md << "---|";
  md << "\n";
  csv << "\n";
  for (const auto& [sname, j] : summaries) {
    md << "| " << sname << " | `" << j["model"].get<std::string>() << "` | " << j["machine"].get<std::string>() << " |";
    csv << sname << ",\"" << j["model"].get<std::string>() << "\"," << j["machine"].get<std::string>();
    for (const auto& c : columns) {
      const json* res = nullptr;
      for (const json& r : j["results"])
        if (r["name"] == c) res = &r;
      md << " " << (res ? cell(*res) : "") << " |";
      csv << "," << (res && res->contains("mean_s") ? fmt::format("{:.9g}", (*res)["mean_s"].get<double>()) : "") << ","
          << (res && res->contains("std_s") ? fmt::format("{:.9g}", (*res)["std_s"].get<double>()) : "");
    }
    md << "\n";
    csv << "\n";
  }
  write_file_atomically(dir / "summary.md", md.str());
  write_file_atomically(dir / "summary.csv", csv.str());
  std::cout << "\n" << md.str() << "\nwritten: " << (dir / "summary.md").string() << ", " << (dir / "summary.csv").string()
            << "\n";
}

}  // namespace placelab::cli
