// --index-opt name=value, as every subcommand that creates an index reads it
// (bench, crashtest, verify): one parser, and the registry's check of the
// names and values an index declares (nvindex/index.h, OptionSpec); and
// --index lists (bench, tpcc): entries name[:k=v[;k=v]], one parser.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nvindex/index.h"
#include "nvindex/status.h"
#include "util/quote.h"

namespace nvindex::tools {

/// Parses `kvs` ("name=value" each; a later name wins) into *out.
/// InvalidArgument "--index-opt expects name=value, got '...'" for an entry
/// without '=' or with an empty name.
inline Status parse_index_opts(const std::vector<std::string>& kvs,
                               std::map<std::string, std::string>* out) {
  for (const std::string& kv : kvs) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--index-opt expects name=value, got " + quote_input(kv));
    }
    (*out)[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return Status::Ok();
}

/// The index as reports name it: `name`, then ":k=v;k=v" for its options
/// (bench's --index syntax), e.g. "fastfair:inner=dram".
inline std::string index_with_opts(std::string_view name,
                                   const std::map<std::string, std::string>& opts) {
  std::string s(name);
  char sep = ':';
  for (const auto& [k, v] : opts) {
    s += sep + k + "=" + v;
    sep = ';';
  }
  return s;
}

/// parse_index_opts, then check_index_options against the index `name`
/// (an unregistered name is left to the caller's own check).
inline Status parse_index_opts_for(std::string_view name, const std::vector<std::string>& kvs,
                                   std::map<std::string, std::string>* out) {
  if (Status s = parse_index_opts(kvs, out); !s.ok()) return s;
  const IndexEntry* e = find_index_entry(name);
  return e == nullptr ? Status::Ok() : check_index_options(*e, *out);
}

/// One --index entry: "name[:k=v[;k=v]]".
struct IndexSpec {
  std::string label;                         ///< the whole entry, shown in reports
  std::string name;                          ///< registry name
  std::map<std::string, std::string> extra;  ///< options for this index only
  uint32_t node_size = 0;                    ///< "node_size=N" (bytes); 0 = --node-size
};

/// "btree, fastfair, ... (test only)": the registered indexes, for messages.
std::string registered_index_list();

/// Parses one --index entry "name[:k=v[;k=v]]" into *out (node_size=N goes
/// to out->node_size: a byte count 1..2^32-1). InvalidArgument for an
/// unknown index (listing the registered ones), an option that is not k=v,
/// or a bad node_size. An entry "pibench:PATH.so[:k=v]" loads, probes and
/// registers a PiBench wrapper (pibench::register_pibench_plugin, whose
/// errors it returns) and names it by the library's file name. The options are not checked against
/// the index here (check_index_options does that with the run's other options).
Status parse_index_spec(const std::string& text, IndexSpec* out);

/// Parses a comma-separated --index list into *out, in order, entries with
/// the same label once. InvalidArgument for an empty list, an empty entry
/// ("fastfair,", ",", "a,,b": "empty entry in '...'") or a bad entry
/// (parse_index_spec).
Status parse_index_list(const std::string& text, std::vector<IndexSpec>* out);

/// check_node_size against the index `name` (Ok for an unregistered name:
/// the caller's own check reports that).
inline Status check_node_size_for(std::string_view name, uint32_t bytes) {
  const IndexEntry* e = find_index_entry(name);
  return e == nullptr ? Status::Ok() : check_node_size(*e, bytes);
}

}  // namespace nvindex::tools
