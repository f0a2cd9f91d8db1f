// Range checks for the numeric options of every subcommand: a bad number is
// a usage error (exit 2) whose message names the option and its limit in
// words a person reads ("1..1024", "at most 393,216,000 ..."), never an
// abort later (a wrapped "-1", a vector of 10^11 entries).
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nvindex/index.h"
#include "util/quote.h"

namespace nvindex::tools {

/// A CLI11 check: the value is a number in [lo, hi], or in (lo, hi] when
/// `lo_open`, with nothing after it (no "nan", no "inf"). With `integer`
/// (the options CLI11 stores in an unsigned integer) only decimal digits,
/// without a sign or a leading zero, are taken: CLI11 would read "-1" as
/// 2^64 - 1, "010" as octal 8 and "0x10" as 16, none of them what the check
/// saw. Otherwise a decimal or exponent form ("0.001", "1e-3"); a leading
/// '-' is refused when lo >= 0. `range` is how the message names the range
/// ("1..1024", "(0, 1]", "0..604800 s").
inline CLI::Validator in_range(long double lo, long double hi, std::string range,
                               bool lo_open = false, bool integer = false) {
  return CLI::Validator(
      [lo, hi, range, lo_open, integer](std::string& s) -> std::string {
        const char* b = s.c_str();
        char* end = nullptr;
        errno = 0;
        const long double v = std::strtold(b, &end);
        bool number = end != b && *end == '\0' && std::isfinite(v) && errno == 0;
        if (integer) {
          number = number && s.find_first_not_of("0123456789") == std::string::npos &&
                   (s.size() == 1 || s[0] != '0');
        }
        const size_t first = s.find_first_not_of(" \t");
        const bool signed_below = lo >= 0 && first != std::string::npos && s[first] == '-';
        if (!number || signed_below || v > hi || v < lo || (lo_open && v == lo)) {
          return "must be " + range + ", got " + quote_input(s);
        }
        return std::string();
      },
      range);
}

/// Adds `--key-type integer|string` to `cmd` (every subcommand that takes
/// it), parsed by parse_key_type into *t; another value is a usage error
/// with parse_key_type's message ("key type 'x' invalid (valid: integer,
/// string)"). `what` completes the help text.
inline CLI::Option* add_key_type_option(CLI::App* cmd, KeyType* t, const std::string& what) {
  return cmd
      ->add_option_function<std::string>(
          "--key-type",
          [t](const std::string& text) {
            if (!parse_key_type(text, t).ok()) *t = KeyType::kInteger;  // refused by the check
          },
          "integer|string: " + what)
      ->check(CLI::Validator(
          [](std::string& text) {
            KeyType k;
            const Status s = parse_key_type(text, &k);
            return s.ok() ? std::string() : s.message();
          },
          "integer|string"))
      ->default_str("integer");
}

/// An unsigned integer option with no limit of its own (a seed).
inline CLI::Validator no_sign() {
  return in_range(0, static_cast<long double>(UINT64_MAX), "a whole number >= 0", false, true);
}

/// An unsigned integer option in lo..hi ("1..1024").
inline CLI::Validator count_in(uint64_t lo, uint64_t hi, std::string range) {
  return in_range(static_cast<long double>(lo), static_cast<long double>(hi), std::move(range),
                  false, true);
}

/// This machine's memory, bytes (sysconf; 1 GiB when unknown).
inline uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : (uint64_t{1} << 30);
}

/// "1,234,567".
inline std::string with_commas(uint64_t v) {
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

/// A count that costs `bytes_each` of memory: 0 (or 1 when `positive`) up to
/// physical memory / bytes_each, the message saying why
/// ("1..393,216,000 (64 B of memory each on this machine)").
inline CLI::Validator fits_memory(uint64_t bytes_each, bool positive) {
  const uint64_t most = physical_memory_bytes() / bytes_each;
  return count_in(positive ? 1 : 0, most,
                  std::string(positive ? "1" : "0") + ".." + with_commas(most) + " (" +
                      std::to_string(bytes_each) + " B of memory each on this machine)");
}

}  // namespace nvindex::tools
