#include "placelab/core/json_locator.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace placelab {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A read position in the text. Every step checks bounds, so malformed text only stops the walk.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {
    // nlohmann skips a UTF-8 byte order mark; so do we, to agree on where the document starts.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  }

  std::size_t pos() const { return pos_; }
  void set_pos(std::size_t pos) { pos_ = pos; }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < text_.size() && is_ws(text_[pos_])) ++pos_;
  }
  // Skips white space, then consumes `c` if it is next.
  bool consume(char c) {
    skip_ws();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  // Reads the string token at the cursor (which must be at its opening quote) and returns its
  // unescaped contents; the cursor ends after the closing quote.
  std::optional<std::string> read_string() {
    if (peek() != '"') return std::nullopt;
    ++pos_;
    std::string out;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return std::nullopt;
      char e = text_[pos_++];
      switch (e) {
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          auto cp = read_hex4();
          if (!cp) return std::nullopt;
          uint32_t code = *cp;
          // A high surrogate followed by an escaped low surrogate is one code point.
          if (code >= 0xD800 && code <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
            std::size_t save = pos_;
            pos_ += 2;
            auto low = read_hex4();
            if (low && *low >= 0xDC00 && *low <= 0xDFFF)
              code = 0x10000 + ((code - 0xD800) << 10) + (*low - 0xDC00);
            else
              pos_ = save;
          }
          append_utf8(out, code);
          break;
        }
        default: out += e; break;  // \" \\ \/
      }
    }
    return std::nullopt;
  }

  // Skips one value of any kind; false when the text ends or breaks first.
  bool skip_value() {
    skip_ws();
    char c = peek();
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      int depth = 0;
      while (pos_ < text_.size()) {
        c = text_[pos_];
        if (c == '"') {
          if (!skip_string()) return false;
          continue;
        }
        ++pos_;
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return true;
      }
      return false;
    }
    std::size_t start = pos_;
    while (pos_ < text_.size() && !is_ws(text_[pos_]) && text_[pos_] != ',' && text_[pos_] != ']' &&
           text_[pos_] != '}')
      ++pos_;
    return pos_ > start;
  }

 private:
  bool skip_string() {
    ++pos_;  // opening quote
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return true;
      if (c == '\\') ++pos_;
    }
    return false;
  }

  std::optional<uint32_t> read_hex4() {
    if (pos_ + 4 > text_.size()) return std::nullopt;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else return std::nullopt;
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    auto byte = [&](uint32_t b) { out += static_cast<char>(static_cast<unsigned char>(b)); };
    if (cp < 0x80) {
      byte(cp);
    } else if (cp < 0x800) {
      byte(0xC0 | (cp >> 6));
      byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      byte(0xE0 | (cp >> 12));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    } else {
      byte(0xF0 | (cp >> 18));
      byte(0x80 | ((cp >> 12) & 0x3F));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// Splits a JSON pointer into unescaped reference tokens; "" has none.
std::vector<std::string> pointer_tokens(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty() || pointer.front() != '/') return tokens;
  std::string current;
  for (std::size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(std::move(current));
      current.clear();
    } else if (pointer[i] == '~' && i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      current += pointer[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      current += pointer[i];
    }
  }
  return tokens;
}

// An array index token: digits without a leading zero (RFC 6901), or nullopt.
std::optional<std::size_t> array_index(std::string_view token) {
  if (token.empty() || (token.size() > 1 && token[0] == '0') || token.size() > 15) return std::nullopt;
  std::size_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  return v;
}

}  // namespace

std::string json_pointer_token(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

int JsonLocator::line_of_byte(std::size_t offset) const {
  offset = std::min(offset, text_.size());
  return 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

int JsonLocator::column_of_byte(std::size_t offset) const {
  offset = std::min(offset, text_.size());
  std::size_t line_start = 0;
  if (offset > 0) {
    std::size_t newline = text_.rfind('\n', offset - 1);
    if (newline != std::string_view::npos) line_start = newline + 1;
  }
  return 1 + static_cast<int>(offset - line_start);
}

int JsonLocator::line_of(std::string_view pointer) const {
  Cursor cur(text_);
  cur.skip_ws();
  std::size_t value_pos = cur.pos();
  for (const std::string& token : pointer_tokens(pointer)) {
    cur.set_pos(value_pos);
    bool found = false;
    if (cur.peek() == '{') {
      cur.set_pos(cur.pos() + 1);
      while (true) {
        cur.skip_ws();
        auto key = cur.read_string();
        if (!key || !cur.consume(':')) break;
        cur.skip_ws();
        if (*key == token) {
          found = true;
          value_pos = cur.pos();
          break;
        }
        if (!cur.skip_value() || !cur.consume(',')) break;
      }
    } else if (cur.peek() == '[') {
      auto index = array_index(token);
      cur.set_pos(cur.pos() + 1);
      cur.skip_ws();
      for (std::size_t i = 0; index && cur.peek() != ']'; ++i) {
        cur.skip_ws();
        if (i == *index) {
          found = true;
          value_pos = cur.pos();
          break;
        }
        if (!cur.skip_value() || !cur.consume(',')) break;
      }
    }
    if (!found) break;
  }
  return line_of_byte(value_pos);
}

namespace {

// Walks every value of `text` in document order and calls visit(path, pos) at the first byte of
// each, `path` holding the pointer tokens that lead to it, until visit returns false. With
// `check_keys` it stops at the first key that repeats within its object and returns it. The walk
// is iterative (no recursion), so deeply nested input cannot overflow the stack; malformed text
// ends it early.
template <typename Visit>
std::optional<JsonLocator::DuplicateKey> walk(std::string_view text, const JsonLocator& where, bool check_keys,
                                              Visit&& visit) {
  struct Frame {
    bool object = false;
    std::size_t index = 0;
    std::unordered_set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::vector<std::string> path;
  Cursor cur(text);

  std::optional<JsonLocator::DuplicateKey> dup;
  // Reads `"key":` of the object on top of `frames`; false at a repeated key or malformed text.
  auto read_member_key = [&]() -> bool {
    cur.skip_ws();
    std::size_t key_pos = cur.pos();
    auto key = cur.read_string();
    if (!key || !cur.consume(':')) return false;
    std::string token = json_pointer_token(*key);
    if (check_keys && !frames.back().keys.insert(*key).second) {
      std::string pointer;
      for (const std::string& t : path) pointer += "/" + t;
      dup = JsonLocator::DuplicateKey{pointer + "/" + token, where.line_of_byte(key_pos)};
      return false;
    }
    path.push_back(std::move(token));
    return true;
  };

  bool want_value = true;
  while (true) {
    cur.skip_ws();
    if (want_value) {
      if (!visit(static_cast<const std::vector<std::string>&>(path), cur.pos())) return std::nullopt;
      char c = cur.peek();
      if (c == '{' || c == '[') {
        cur.set_pos(cur.pos() + 1);
        frames.push_back({c == '{', 0, {}});
        cur.skip_ws();
        if (cur.peek() == (c == '{' ? '}' : ']')) {  // empty container
          cur.set_pos(cur.pos() + 1);
          frames.pop_back();
          want_value = false;
        } else if (c == '{') {
          if (!read_member_key()) return dup;
        } else {
          path.push_back("0");
        }
        continue;
      }
      if (!cur.skip_value()) return std::nullopt;
      want_value = false;
      continue;
    }
    if (frames.empty()) return std::nullopt;  // the document is complete
    path.pop_back();                          // the member or element just read
    Frame& top = frames.back();
    char c = cur.peek();
    if (c == ',') {
      cur.set_pos(cur.pos() + 1);
      if (top.object) {
        if (!read_member_key()) return dup;
      } else {
        path.push_back(std::to_string(++top.index));
      }
      want_value = true;
    } else if (c == (top.object ? '}' : ']')) {
      cur.set_pos(cur.pos() + 1);
      frames.pop_back();
    } else {
      return std::nullopt;
    }
  }
}

}  // namespace

std::optional<JsonLocator::DuplicateKey> JsonLocator::find_duplicate_key() const {
  return walk(text_, *this, true, [](const std::vector<std::string>&, std::size_t) { return true; });
}

std::optional<std::size_t> JsonLocator::first_byte_deeper_than(std::size_t max_depth) const {
  std::optional<std::size_t> at;
  walk(text_, *this, false, [&](const std::vector<std::string>& path, std::size_t pos) {
    if (path.size() <= max_depth) return true;
    at = pos;
    return false;
  });
  return at;
}

std::string JsonLocator::pointer_at_byte(std::size_t offset) const {
  std::string pointer;
  walk(text_, *this, false, [&](const std::vector<std::string>& path, std::size_t pos) {
    if (pos > offset) return false;
    pointer.clear();
    for (const std::string& t : path) pointer += "/" + t;
    return true;
  });
  return pointer;
}

}  // namespace placelab
