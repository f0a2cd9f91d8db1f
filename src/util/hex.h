// hex(v): a 64-bit word as "0x..." (lowercase, no padding), the format of
// every pool offset and address in nvindex's error messages.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nvindex {

/// "0x" followed by v in lowercase hexadecimal, e.g. hex(4096) == "0x1000".
inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

}  // namespace nvindex
