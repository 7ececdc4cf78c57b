// The `placelab` subcommands. Each add_*_command registers a CLI11 subcommand whose callback does
// the work; errors propagate as exceptions that main() maps to exit codes (InputError → 2).
#pragma once

#include <CLI/CLI.hpp>

namespace placelab::cli {

// Thrown by `run` when Ctrl-C (SIGINT or SIGTERM) stopped it: the checkpoints are written, there is
// no summary, and main() exits with kStoppedExitStatus (128 + SIGINT, as a shell reports it), so
// scripts and `sweep` can tell a stopped run from a finished one.
struct Stopped {};
inline constexpr int kStoppedExitStatus = 130;

// The whole command line: the description, every subcommand below, and the rule that every integer
// flag is written in decimal digits (apps/src/cli_app.cpp). Parsing runs the chosen command.
void build_cli(CLI::App& app);

void add_machines_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_models_commands(CLI::App& app);   // models, export, inspect
void add_run_commands(CLI::App& app);      // run, report, sweep
void add_learners_command(CLI::App& app);  // the learner and baseline registry
void add_calibrate_commands(CLI::App& app);  // calibrate, verify
void add_export_placement_command(CLI::App& app);

}  // namespace placelab::cli
