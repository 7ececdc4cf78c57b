// Files as every library reads and writes them (core/files.h): whole regular files read with a
// limit, outputs written atomically, logs appended durably.
#include "placelab/core/files.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "temp_dir.h"

namespace placelab {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

using testing::slurp;

// A fresh directory for one test.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("placelab_files_test_") {}
};

// ---------------------------------------------------------------------------------------------
// Reads

// Files that are not files: a FIFO nobody writes to is refused at once (never waited on), a
// device is refused (never read without end), a file over the limit is refused on the bytes read.
TEST(ReadTextFile, RefusesFifosDevicesFoldersAndFilesOverTheLimit) {
  TempDir dir;
  const fs::path fifo = dir.path / "graph.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto message = [](const fs::path& path, int64_t limit = kMaxTextFileBytes) {
    try {
      read_text_file(path, limit);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  EXPECT_TRUE(contains(message(fifo), "graph.json: cannot read: it is a FIFO; placelab reads regular files")) << message(fifo);
  EXPECT_TRUE(contains(message("/dev/zero"), "/dev/zero: cannot read: it is a character device")) << message("/dev/zero");
  EXPECT_TRUE(contains(message(dir.path), "cannot read: it is a folder"));
  const fs::path big = dir.path / "big.json";
  std::ofstream(big) << std::string(3 << 20, ' ');
  EXPECT_TRUE(contains(message(big, 2 << 20), "big.json: larger than 2 MiB")) << message(big, 2 << 20);
  EXPECT_EQ(read_text_file(big).size(), std::size_t{3} << 20);
}

// ---------------------------------------------------------------------------------------------
// Atomic writes

// A device, FIFO or socket is never replaced by a regular file; a link is replaced itself, never
// written through.
TEST(WriteFileAtomically, RefusesTargetsThatAreNotRegularFilesAndReplacesLinksNotTheirTargets) {
  TempDir dir;
  const fs::path fifo = dir.path / "out.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(write_file_atomically(fifo, "x"), InputError);
  EXPECT_TRUE(fs::is_fifo(fifo));
  const fs::path elsewhere = dir.path / "elsewhere.txt";
  std::ofstream(elsewhere) << "keep";
  fs::create_symlink(elsewhere, dir.path / "link.json");
  write_file_atomically(dir.path / "link.json", "new");
  EXPECT_EQ(slurp(elsewhere), "keep");
  EXPECT_FALSE(fs::is_symlink(dir.path / "link.json"));
  EXPECT_EQ(slurp(dir.path / "link.json"), "new");
}

// Appends create or extend a regular file only: never through a link, never into a FIFO (which
// would block without a reader) or a device.
TEST(AppendFileDurably, AppendsToRegularFilesOnlyAndNeverThroughALink) {
  TempDir dir;
  const fs::path log = dir.path / "curve.jsonl";
  append_file_durably(log, "a\n");
  append_file_durably(log, "b\n");
  EXPECT_EQ(slurp(log), "a\nb\n");
  const fs::path fifo = dir.path / "fifo.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(append_file_durably(fifo, "x"), InputError);
  const fs::path elsewhere = dir.path / "elsewhere.txt";
  std::ofstream(elsewhere) << "keep";
  fs::create_symlink(elsewhere, dir.path / "link.jsonl");
  try {
    append_file_durably(dir.path / "link.jsonl", "x");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(elsewhere), "keep");
  EXPECT_THROW(append_file_durably(dir.path / "missing" / "x.jsonl", "x"), InputError);
}

TEST(WriteFileAtomically, WritesAndReplacesWithoutLeavingTemporaryFiles) {
  TempDir dir;
  fs::path target = dir.path / "out.json";
  write_file_atomically(target, "first");
  EXPECT_EQ(slurp(target), "first");
  write_file_atomically(target, std::string(100000, 'x'));
  EXPECT_EQ(slurp(target), std::string(100000, 'x'));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.json"}));
}

TEST(WriteFileAtomically, IntoAMissingDirectoryFailsAndCreatesNothing) {
  TempDir dir;
  try {
    write_file_atomically(dir.path / "no_such_dir" / "out.json", "x");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {  // the user's path to mend: exit status 2
    EXPECT_TRUE(contains(e.what(), "out.json: cannot create a temporary file in")) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file or directory")) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(WriteFileAtomically, AFolderWhereTheFileShouldGoIsAnInputError) {
  TempDir dir;
  // `-o results` where results/ is a folder: the user's path to mend (exit 2), not an internal
  // error, and nothing is written — no temporary file, the folder untouched.
  fs::create_directories(dir.path / "out.json");
  std::ofstream(dir.path / "out.json" / "keep") << "old";
  try {
    write_file_atomically(dir.path / "out.json", "new");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "out.json: it is a folder")) << e.what();
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.json"}));
  EXPECT_EQ(slurp(dir.path / "out.json" / "keep"), "old");
}

TEST(WriteFileAtomically, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  fs::path target = dir.path / "out.json";
  write_file_atomically(target, "old contents");
  // A file size limit makes write() fail part way (EFBIG) with the process running as any user.
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    write_file_atomically(target, std::string(100000, 'n'));
  } catch (const Error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(contains(error, "writing the temporary file: File too large")) << error;
  EXPECT_EQ(slurp(target), "old contents");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.json"}));
}

TEST(WriteFileAtomically, RejectsAPathWithoutAFileName) {
  TempDir dir;
  EXPECT_THROW(write_file_atomically(dir.path / "", "x"), Error);
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace placelab
