// The `placelab` command line's argument parsing (apps/src/cli_app.cpp, built into this target with
// every command's source): the input is the argv after the program name, its words separated by
// NUL bytes (the one byte no argv word holds; a last NUL ends the last word), at most 64 words.
// The app is built as main() builds it and parsed as main() parses it, so every subcommand's
// flags, CLI11's own checks and our validators (decimal integers, ranges, member lists) run; a
// callback on the top-level app then stops the parse before any command's callback would run, so
// no command does its work, reads its files or writes any. CLI::ParseError (help included: it is
// not printed) and InputError are the expected outcomes of bad words; anything else escaping, a
// crash, an ASan or UBSan report or a leak is a finding, and so is a parse that succeeds without
// choosing exactly one subcommand (the app requires one).
// A seed: printf '%s\0' simulate --model cifar10_cnn > fuzz/seeds/cli/simulate
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "fuzz_util.h"

namespace {

constexpr std::size_t kMaxWords = 64;

struct Parsed {};  // thrown where the first command callback would have run

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  const std::string_view text = fuzz::as_text(data, size);
  std::vector<std::string> words{"placelab"};
  for (std::size_t begin = 0; begin < text.size() && words.size() <= kMaxWords;) {
    const std::size_t end = std::min(text.find('\0', begin), text.size());
    words.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  // A fresh app each input, as each run of `placelab` has: the flags' variables start unset.
  CLI::App app;
  cli::build_cli(app);
  // The top-level app's parse-complete callback runs after every flag was converted and
  // validated, the requirements checked and the leftover words refused, and before the chosen
  // subcommand's callback (CLI11's App::run_callback). The commands' callbacks stay in place: they
  // own the variables their flags write.
  std::size_t chosen = 0;
  app.parse_complete_callback([&] {
    chosen = app.get_subcommands().size();
    throw Parsed{};
  });
  fuzz::expect_input_error_or_success([&] {
    try {
      app.parse(static_cast<int>(words.size()), argv.data());
      fuzz::finding("the parse returned without reaching the top-level callback");
    } catch (const Parsed&) {
      if (chosen != 1) fuzz::finding("a parse succeeded choosing " + std::to_string(chosen) + " subcommands");
    } catch (const CLI::ParseError&) {
      // a bad flag or value, --help: main() prints it and exits 0 (help) or 2
    }
  });
  return 0;
}
