// --index entries and lists (index_opts.h).
#include "tools/index_opts.h"

#include <set>

#include "pibench/import.h"
#include "util/kv_list.h"

namespace nvindex::tools {

std::string registered_index_list() {
  std::string s;
  for (const IndexEntry& e : registered_indexes()) {
    s += s.empty() ? "" : ", ";
    s += e.name;
    if (is_test_only_index(e.name)) s += " (test only)";
  }
  return s;
}

Status parse_index_spec(const std::string& text, IndexSpec* out) {
  out->label = text;
  out->extra.clear();
  out->node_size = 0;
  if (pibench::is_plugin_spec(text)) {
    // A PiBench wrapper: loaded, probed and registered under its file name;
    // its options are its own (pibench/import.h), none left for the index.
    if (Status st = pibench::register_pibench_plugin(text, &out->name); !st.ok()) return st;
    out->label = out->name;
    return Status::Ok();
  }
  const size_t colon = text.find(':');
  out->name = text.substr(0, colon);
  if (find_index_entry(out->name) == nullptr) {
    return Status::InvalidArgument("unknown index " + quote_input(out->name) +
                                   "; registered indexes: " + registered_index_list());
  }
  if (colon == std::string::npos) return Status::Ok();
  std::vector<std::pair<std::string, std::string>> kvs;
  std::string bad;
  if (!util::split_kv_list(std::string_view(text).substr(colon + 1), &kvs, &bad)) {
    return Status::InvalidArgument(quote_input(text) + ": expected name:k=v[;k=v], got option " +
                                   quote_input(bad));
  }
  for (auto& [k, v] : kvs) out->extra[k] = std::move(v);  // a later one wins
  // node_size is IndexOptions::node_size, not an extra knob.
  if (auto it = out->extra.find("node_size"); it != out->extra.end()) {
    const std::string& v = it->second;
    uint64_t n = 0;
    bool ok = !v.empty() && v.size() <= 10 && v[0] != '0';
    for (char c : v) ok = ok && c >= '0' && c <= '9';
    if (ok) n = std::stoull(v);
    if (!ok || n == 0 || n > UINT32_MAX) {
      return Status::InvalidArgument(quote_input(text) + ": node_size must be a byte count, got " +
                                     quote_input(v));
    }
    out->node_size = static_cast<uint32_t>(n);
    out->extra.erase(it);
  }
  return Status::Ok();
}

Status parse_index_list(const std::string& text, std::vector<IndexSpec>* out) {
  out->clear();
  if (text.empty()) {
    return Status::InvalidArgument(
        "empty list (a comma-separated list of indexes, e.g. "
        "btree,fastfair)");
  }
  std::set<std::string> seen;
  size_t b = 0;
  while (b <= text.size()) {
    size_t e = text.find(',', b);
    if (e == std::string::npos) e = text.size();
    if (e == b) {
      return Status::InvalidArgument("empty entry in " + quote_input(text) +
                                     " (a comma-separated list of indexes, e.g. btree,fastfair)");
    }
    IndexSpec is;
    if (Status st = parse_index_spec(text.substr(b, e - b), &is); !st.ok()) return st;
    if (seen.insert(is.label).second) out->push_back(std::move(is));
    b = e + 1;
  }
  return Status::Ok();
}

}  // namespace nvindex::tools
