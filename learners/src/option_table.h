// Binds an Options struct's fields to the keys users write, so that one table gives both the
// registry's OptionInfo list (each default rendered from a default-constructed struct, so the
// listed default cannot drift from the code's) and the struct built from a user's OptionValues,
// checked by the struct's own validate(). Private to learners/.
//
//   const OptionTable<PpoOptions> table("ppo", {
//       {"samples_per_update", &PpoOptions::samples_per_update, ">= 1", "K: a PPO update every K samples"},
//       {"learning_rate", &PpoOptions::learning_rate, "> 0", "SGA step size"}});
//   PpoOptions o = table.build(values);   // InputError naming key, value and rule
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "placelab/learners/registry.h"

namespace placelab::detail {


template <typename O>
class OptionTable {
 public:
  using Member = std::variant<int O::*, int64_t O::*, double O::*, bool O::*, std::string O::*>;
  struct Field {
    Field(std::string key_, Member member_, std::string rule_, std::string help_, std::vector<std::string> choices_ = {})
        : key(std::move(key_)), member(member_), rule(std::move(rule_)), help(std::move(help_)), choices(std::move(choices_)) {}
    std::string key;
    Member member;
    std::string rule;                  // empty for bool and choice fields: derived
    std::string help;
    std::vector<std::string> choices;  // std::string fields: the allowed values
  };

  // `owner` prefixes messages ("post.ce_every = 5: ..."), as the struct's validate() does.
  OptionTable(std::string owner, std::vector<Field> fields) : owner_(std::move(owner)), fields_(std::move(fields)) {}

  std::vector<OptionInfo> infos() const {
    static const O defaults{};  // static: GCC 12 warns that a local one "may be used uninitialized"
    std::vector<OptionInfo> out;
    for (const Field& f : fields_) {
      OptionInfo info{f.key, OptionKind::kInt, "", f.rule, f.help, f.choices};
      std::visit(
          [&](auto member) {
            using T = std::remove_cvref_t<decltype(defaults.*member)>;
            const T& value = defaults.*member;
            if constexpr (std::is_same_v<T, bool>) {
              info.kind = OptionKind::kBool;
              info.default_value = value ? "true" : "false";
            } else if constexpr (std::is_same_v<T, double>) {
              info.kind = OptionKind::kReal;
              info.default_value = format_exact(value);
            } else if constexpr (std::is_same_v<T, std::string>) {
              info.kind = OptionKind::kChoice;
              info.default_value = value;
            } else {
              info.kind = OptionKind::kInt;
              info.default_value = std::to_string(value);
            }
          },
          f.member);
      if (info.rule.empty()) info.rule = expectation(f);
      out.push_back(std::move(info));
    }
    return out;
  }

  // The struct with `values` applied over the defaults, after its validate(). Throws InputError
  // for an unknown key (listing the keys), a value of the wrong kind, or what validate() throws.
  O build(const OptionValues& values) const {
    O options{};
    for (const auto& [key, value] : values) {
      const Field* f = find(key);
      if (!f) {
        std::vector<std::string> keys;
        for (const Field& x : fields_) keys.push_back(x.key);
        throw InputError(owner_ + "." + key + ": " + unknown_key_rule(join_names(keys)));
      }
      std::visit([&](auto member) { assign(options.*member, value, *f); }, f->member);
    }
    options.validate();
    return options;
  }

 private:
  const Field* find(const std::string& key) const {
    for (const Field& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }

  // What a value of the field's kind looks like, for messages.
  static std::string expectation(const Field& f) {
    return std::visit(
        [&](auto member) -> std::string {
          using T = std::remove_cvref_t<decltype(std::declval<O&>().*member)>;
          if constexpr (std::is_same_v<T, bool>) return "true or false";
          else if constexpr (std::is_same_v<T, double>) return "a number";
          else if constexpr (std::is_same_v<T, std::string>) return "one of " + join_names(f.choices);
          else return "an integer";
        },
        f.member);
  }

  [[noreturn]] void reject(const Field& f, const OptionValue& value, const std::string& what) const {
    throw InputError(owner_ + "." + f.key + " = " + option_value_text(value) + ": must be " + what);
  }

  void assign(int& out, const OptionValue& value, const Field& f) const {
    const auto* v = std::get_if<int64_t>(&value);
    if (!v) reject(f, value, "an integer");
    if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max())
      reject(f, value, "a 32-bit integer");
    out = static_cast<int>(*v);
  }
  void assign(int64_t& out, const OptionValue& value, const Field& f) const {
    const auto* v = std::get_if<int64_t>(&value);
    if (!v) reject(f, value, "an integer");
    out = *v;
  }
  void assign(double& out, const OptionValue& value, const Field& f) const {
    // An integer is a fine real: YAML's `learning_rate: 1` reads as one.
    if (const auto* i = std::get_if<int64_t>(&value)) out = static_cast<double>(*i);
    else if (const auto* d = std::get_if<double>(&value)) out = *d;
    else reject(f, value, "a number");
  }
  void assign(bool& out, const OptionValue& value, const Field& f) const {
    const auto* v = std::get_if<bool>(&value);
    if (!v) reject(f, value, "true or false");
    out = *v;
  }
  void assign(std::string& out, const OptionValue& value, const Field& f) const {
    const auto* v = std::get_if<std::string>(&value);
    bool allowed = v != nullptr;
    if (v && !f.choices.empty()) {
      allowed = false;
      for (const auto& c : f.choices) allowed = allowed || c == *v;
    }
    if (!allowed) reject(f, value, expectation(f));
    out = *v;
  }

  std::string owner_;
  std::vector<Field> fields_;
};

}  // namespace placelab::detail
