// Byte sizes as users write them ("4096", "512M", "4G"): one parser for the
// command line's options and the PiBench plugin's environment.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "nvindex/status.h"

namespace nvindex::util {

/// Parses a byte size "4096", "512K", "512M", "4G", "1T" (binary multiples,
/// optional trailing 'B' or 'iB', case-insensitive) into *out bytes.
/// InvalidArgument "bad size '...' (expected e.g. 4096, 512M, 4G)" on
/// anything else or on overflow.
inline Status parse_byte_size(std::string_view text, uint64_t* out) {
  auto bad = [&] {
    return Status::InvalidArgument("bad size '" + std::string(text) +
                                   "' (expected e.g. 4096, 512M, 4G)");
  };
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad();
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return bad();
  std::string suffix;
  for (; i < text.size(); ++i) suffix += static_cast<char>(std::toupper(text[i]));
  unsigned shift = 0;
  if (!suffix.empty()) {
    const char unit = suffix[0];
    std::string rest = suffix.substr(1);
    if (unit == 'B' && rest.empty()) {
      shift = 0;
    } else {
      switch (unit) {
        case 'K':
          shift = 10;
          break;
        case 'M':
          shift = 20;
          break;
        case 'G':
          shift = 30;
          break;
        case 'T':
          shift = 40;
          break;
        default:
          return bad();
      }
      if (!(rest.empty() || rest == "B" || rest == "IB")) return bad();
    }
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return bad();
  *out = v << shift;
  return Status::Ok();
}

}  // namespace nvindex::util
