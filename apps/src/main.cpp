// The `placelab` command line. Exit status: 0 success, 2 bad input (a file, field or value; the
// message names it), 1 an internal error (a bug: please report it with the message), 130 a run
// stopped by Ctrl-C (resume it with --resume).
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "distributed.h"
#include "placelab/graph/error.h"
#include "placelab/graph/numbers.h"

namespace {

// Every integer flag of every command, read as a decimal integer that is all of its text: CLI11
// reads them with strtoll in base 0, so 01750 was octal 1000, 0x3E8 hex, and -1 for an unsigned
// flag wrapped to 2^64 - 1.
void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();  // "INT", or "INT in [1 - 1000]" after a Range
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
  for (CLI::App* sub : app.get_subcommands({})) require_decimal_integers(*sub);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "placelab: find fast device placements for deep-learning training graphs.\n"
      "Simulate a training step on a described machine, calibrate the simulator on real hardware,\n"
      "and train placement learners against it."};
  app.require_subcommand(1);
  app.footer("Run `placelab <command> --help` for a command's options. Documentation: docs/cli.md");
  placelab::cli::add_machines_command(app);
  placelab::cli::add_simulate_command(app);
  placelab::cli::add_models_commands(app);
  placelab::cli::add_run_commands(app);
  placelab::cli::add_learners_command(app);
  placelab::cli::add_calibrate_commands(app);
  placelab::cli::add_export_placement_command(app);
  require_decimal_integers(app);
  // Under mpirun, an error one rank met alone must end the whole job (end_mpi_after_error).
  const auto failed = [](int code) {
    placelab::cli::end_mpi_after_error(code);
    return code;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return failed(2);
  } catch (const placelab::cli::Stopped&) {
    placelab::cli::finalize_mpi();  // every rank was told to stop
    return placelab::cli::kStoppedExitStatus;
  } catch (const placelab::cli::QuietExit& e) {
    return failed(e.code);
  } catch (const placelab::InputError& e) {
    std::cerr << "placelab: error: " << e.what() << "\n";
    return failed(2);
  } catch (const std::exception& e) {
    std::cerr << "placelab: internal error: " << e.what() << "\n";
    return failed(1);
  }
  placelab::cli::finalize_mpi();
  return 0;
}
