// Source lines of values in a JSON text, found by JSON pointer (RFC 6901). nlohmann::json 3.11
// keeps no source positions, so a reader that wants "file:line: /ops/3/flops = -1: ..." messages
// keeps the text and asks a JsonLocator for the line of the value it rejects. It is a small
// tokenizer that walks only the path to the value, so asking costs one pass over the text at most;
// readers ask only when they are about to report an error.
//
//   JsonLocator where(text);
//   int line = where.line_of("/ops/3/output_bytes");   // 1-based
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace placelab {

// Nesting the JSON readers accept: far beyond any graph, placement, machine or trace file.
inline constexpr std::size_t kMaxJsonDepth = 512;

class JsonLocator {
 public:
  // `text` is not copied: it must outlive the locator. It should be valid JSON (parse it first);
  // on malformed text the answers are best effort and never read out of bounds.
  explicit JsonLocator(std::string_view text) : text_(text) {}

  // 1-based line of the first character of the value at `pointer` ("" is the whole document,
  // "/ops/3/name" a member, "/a~1b" the key "a/b"). When the pointer leads nowhere (a missing
  // member, an index past the end, a scalar in the way) it is the line of the deepest value that
  // exists on the path, so a "missing field" message points at the object lacking it.
  int line_of(std::string_view pointer) const;

  // 1-based line and column of the byte at `offset` (clamped to the text).
  int line_of_byte(std::size_t offset) const;
  int column_of_byte(std::size_t offset) const;

  // The pointer of the last value (in document order) that starts at or before `offset`: the
  // value a parser stopped in, for errors that report only a byte position. "" for the document.
  std::string pointer_at_byte(std::size_t offset) const;

  // The first object member whose key repeats a key earlier in the same object (keys compared
  // after unescaping). nlohmann keeps only the last of them silently; readers reject the file.
  struct DuplicateKey {
    std::string pointer;  // of the repeated member, e.g. "/ops/2/flops"
    int line = 0;         // of its key
  };
  std::optional<DuplicateKey> find_duplicate_key() const;

  // The byte where a value nests deeper than `max_depth` containers, if one does. Readers reject
  // such text before anything recursive (nlohmann's dump, say, in an error message) touches it.
  std::optional<std::size_t> first_byte_deeper_than(std::size_t max_depth) const;

 private:
  std::string_view text_;
};

// The pointer token for an object key: "~" becomes "~0" and "/" becomes "~1" (RFC 6901).
std::string json_pointer_token(std::string_view key);

}  // namespace placelab
