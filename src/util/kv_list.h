// Option lists as --index entries write them: "k=v[;k=v]". One splitter for
// nvindex's own index entries (tools/index_opts.cc) and a PiBench wrapper's
// options (pibench/import.cc); each checks the names and values itself.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nvindex::util {

/// Appends the (name, value) pairs of `text` ("k=v;k=v", split at ';', each
/// entry at its first '=') to *out, in order. False, with *bad the entry,
/// for an entry without '=' or with an empty name ("" among them: an empty
/// `text` or a stray ';' is such an entry); *out then holds the pairs before
/// it.
inline bool split_kv_list(std::string_view text,
                          std::vector<std::pair<std::string, std::string>>* out, std::string* bad) {
  for (size_t b = 0; b <= text.size();) {
    size_t e = text.find(';', b);
    if (e == std::string_view::npos) e = text.size();
    const std::string_view kv = text.substr(b, e - b);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      *bad = std::string(kv);
      return false;
    }
    out->emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    b = e + 1;
  }
  return true;
}

}  // namespace nvindex::util
