// Files as every library reads and writes them: whole regular files read with a size limit,
// outputs written atomically (readers and crashes see the old file or the new one), logs appended
// durably. Errors name the path and the system's reason: InputError when the path is the user's to
// mend, Error otherwise.
//
//   std::string text = read_text_file("scenarios/quickstart.yaml");
//   write_file_atomically("results/summary.json", text);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace placelab {

// The most bytes read_text_file reads by default: far above any graph, machine or scenario file
// placelab writes (a 1-million-op graph is ~300 MB), far below what would exhaust memory.
inline constexpr int64_t kMaxTextFileBytes = int64_t{1} << 30;

// The whole of a regular file, bytes as they are, at most `max_bytes` of them. InputError naming
// the path and the reason when it cannot be read, is no regular file (a FIFO, a device: never
// waited on, never read without end) or holds more than `max_bytes`.
std::string read_text_file(const std::filesystem::path& path, int64_t max_bytes = kMaxTextFileBytes);

// Writes `text` to `path` atomically: a temporary file in the same folder is written, flushed to
// disk and renamed over `path`, so that readers and crashes see the old file or the new one,
// never a half-written one. On failure the temporary file is removed, `path` is left as it was,
// and Error names the path and the system's reason — InputError when the path is the user's to
// mend (a missing or unwritable folder, a directory's name).
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// Appends `text` to the regular file `path` (created when missing) and flushes it to disk before
// returning, for logs that a checkpoint then counts (a checkpoint that rewrote its whole curve
// each time was quadratic in the samples). Never follows a link and never writes to a device,
// FIFO or socket: InputError naming the path; Error for the system's failures.
void append_file_durably(const std::filesystem::path& path, std::string_view text);

}  // namespace placelab
