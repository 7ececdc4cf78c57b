// The `placelab` subcommands. Each add_*_command registers a CLI11 subcommand whose callback does
// the work; errors propagate as exceptions that main() maps to exit codes (InputError → 2).
#pragma once

#include <CLI/CLI.hpp>

namespace placelab::cli {

void add_machines_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_models_commands(CLI::App& app);   // models, export, inspect
void add_run_commands(CLI::App& app);      // run, report, sweep
void add_calibrate_commands(CLI::App& app);  // calibrate, verify

}  // namespace placelab::cli
