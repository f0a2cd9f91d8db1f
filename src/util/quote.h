// quote_input(s): user input inside an error message, in single quotes, with
// every byte that is not printable ASCII written as \xHH (and \ and ' as
// \\ and \'), cut at `max` bytes of input with "..." after it; so a binary
// or very long input gives a readable, one-line message.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace nvindex {

/// 's' escaped and quoted as above; at most `max` input bytes (default 40).
inline std::string quote_input(std::string_view s, size_t max = 40) {
  std::string q = "'";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == '\'') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      q += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      q += buf;
    }
  }
  if (s.size() > max) q += "...";
  q += "'";
  return q;
}

}  // namespace nvindex
