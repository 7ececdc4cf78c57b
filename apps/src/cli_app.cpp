// The `placelab` command line as an App: main() parses it, fuzz/cli_fuzz.cpp fuzzes its argument
// parsing (every subcommand's flags and validators) without running the commands.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "placelab/core/numbers.h"

namespace placelab::cli {
namespace {

// Every number flag of every command, read as a decimal number that is all of its text. CLI11
// reads integers with strtoll in base 0, so 01750 was octal 1000, 0x3E8 hex, and -1 for an
// unsigned flag wrapped to 2^64 - 1; and floats with strtold, so `--sweep-scale 0x1p-1` was 0.5
// and `inf`, `nan` passed where no range stopped them.
void require_decimal_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();  // "INT", or "INT in [1 - 1000]" after a Range
    if (type.starts_with("FLOAT")) {
      option->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const std::optional<double> v = placelab::parse_number<double>(text);
            return v && std::isfinite(*v) ? std::string() : std::string("must be a finite number in decimal digits");
          },
          "", "decimal"));
      continue;
    }
    const bool is_unsigned = type.starts_with("UINT");
    if (!is_unsigned && !type.starts_with("INT")) continue;
    option->check(CLI::Validator(
        [is_unsigned](std::string& text) -> std::string {
          const std::string_view digits = std::string_view(text).substr(text.starts_with('-') ? 1 : 0);
          const bool ok = (is_unsigned ? placelab::parse_number<uint64_t>(text).has_value()
                                       : placelab::parse_number<int64_t>(text).has_value()) &&
                          (digits == "0" || !digits.starts_with('0'));  // CLI11 would read 010 as octal
          return ok ? std::string()
                    : std::string("must be a whole number") + (is_unsigned ? " >= 0" : "") +
                          " in decimal digits, without leading zeros";
        },
        "", "decimal"));
  }
  for (CLI::App* sub : app.get_subcommands({})) require_decimal_numbers(*sub);
}

}  // namespace

void build_cli(CLI::App& app) {
  app.description(
      "placelab: find fast device placements for deep-learning training graphs.\n"
      "Simulate a training step on a described machine, calibrate the simulator on real hardware,\n"
      "and train placement learners against it.");
  app.require_subcommand(1);
  app.footer("Run `placelab <command> --help` for a command's options. Documentation: docs/cli.md");
  add_machines_command(app);
  add_simulate_command(app);
  add_models_commands(app);
  add_run_commands(app);
  add_learners_command(app);
  add_calibrate_commands(app);
  add_export_placement_command(app);
  require_decimal_numbers(app);
}

}  // namespace placelab::cli
