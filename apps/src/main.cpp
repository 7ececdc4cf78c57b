// The `placelab` command line. Exit status: 0 success, 2 bad input (a file, field or value; the
// message names it), 1 an internal error (a bug: please report it with the message), 130 a run
// stopped by Ctrl-C (resume it with --resume).
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "distributed.h"
#include "placelab/core/error.h"

int main(int argc, char** argv) {
  CLI::App app;
  placelab::cli::build_cli(app);
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
