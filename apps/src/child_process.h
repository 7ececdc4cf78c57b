// Running another program from the command line: the plot script (`placelab report`) and
// `python3 -m placelab.torch measure` (`verify --backend torch`). Arguments go to the program as
// they are, never through a shell, so any folder or model name works.
#pragma once

#include <string>
#include <vector>

namespace placelab::cli {

// The interpreter placelab runs Python with: $PLACELAB_PYTHON, else /usr/bin/python3 (Debian's, which
// has python3-torch and matplotlib), else python3 on the PATH.
std::string python_interpreter();

// Runs args[0] (looked up on the PATH) with `args`, in this process's environment with each
// "NAME=value" of `set` in place of that variable. The child's stdout goes to our stderr (a --json
// answer on stdout stays clean), or, when `quiet`, both its outputs to /dev/null. Its exit status,
// or -1 when it could not start or did not exit.
int run_child(std::vector<std::string> args, const std::vector<std::string>& set, bool quiet = false);

}  // namespace placelab::cli
