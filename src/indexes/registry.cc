// The index registry: one line per index design (DESIGN.md §4, "adding an
// index = one folder + one registration line"). Each index folder exposes one
// factory function, declared here.
#include <iterator>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "indexes/absl_btree/absl_btree.h"
#include "indexes/btree/btree.h"
#include "indexes/btree_ls/btree_ls.h"
#include "indexes/bztree/bztree.h"
#include "indexes/dash/dash.h"
#include "indexes/divided_skiplist/divided_skiplist.h"
#include "indexes/fastfair/fastfair.h"
#include "indexes/fptree/fptree.h"
#include "indexes/lbtree/lbtree.h"
#include "indexes/leveldb/leveldb.h"
#include "indexes/p_bwtree/p_bwtree.h"
#include "indexes/p_masstree/p_masstree.h"
#include "indexes/rocksdb/rocksdb.h"
#include "indexes/wbtree/wbtree.h"
#include "nvindex/index.h"
#include "nvindex/pm/pool.h"
#include "nvme/patree_index.h"

namespace nvindex {

// Factories, one per index folder (src/indexes/<name>/), declared in the
// folder's header included above.

namespace {

constexpr Capabilities kVolatileStrings{.ordered = true, .thread_safe = true, .string_keys = true};
constexpr Capabilities kPmOnlyStrings{.ordered = true,
                                      .persistent = true,
                                      .thread_safe = true,
                                      .string_keys = true,
                                      .placement = Placement::kPmOnly};
/// The block-device yardsticks (leveldb, rocksdb): no nodes, integer keys.
constexpr Capabilities kBlockDevice{
    .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kBlockDevice};
constexpr Capabilities kSelectiveStrings{.ordered = true,
                                         .persistent = true,
                                         .thread_safe = true,
                                         .string_keys = true,
                                         .bulk_load = true,
                                         .placement = Placement::kSelective};

bool fptree_node_size_ok(uint32_t s) {
  fptree::Layout l;
  return fptree::Layout::of(s, &l);
}
bool lbtree_node_size_ok(uint32_t s) { return lbtree::valid_leaf_size(s); }
bool btree_ls_node_size_ok(uint32_t s) { return s == 256 || s == 512 || s == 1024; }
bool dash_node_size_ok(uint32_t s) { return dash::valid_node_size(s); }

constexpr IndexEntry kIndexes[] = {
    // {name, description, caps (threads > 1, default options), min_node_size (0: no nodes),
    //  node sizes, node_size_ok, options, factory, string-key factory (absent: none)}
    {"absl-btree",
     kAbslBtreeDescription,
     kVolatileStrings,
     0,
     "",
     nullptr,
     {},
     &make_absl_btree,
     &make_absl_btree_string},
    {"fastfair", kFastFairDescription, kPmOnlyStrings, 128, "a power of two in 128..4096 B",
     &fastfair::valid_node_size, kFastFairOptions, &make_fastfair, &make_fastfair_string},
    {"btree", kBtreeDescription, kVolatileStrings, 128, "a multiple of 64 in 128..4096 B",
     &btree_valid_node_size, kBtreeOptions, &make_btree, &make_btree_string},
    {"unsorted-leaf", kUnsortedLeafDescription,
     Capabilities{.ordered = true, .thread_safe = true, .placement = Placement::kDram}, 128,
     "a multiple of 64 in 128..4096 B", &btree_valid_node_size, kBtreeOptions, &make_unsorted_leaf},
    {"btree-wal",
     kBtreeWalDescription,
     Capabilities{
         .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kPmOnly},
     128,
     "a multiple of 64 in 128..4096 B",
     &btree_valid_node_size,
     {},
     &make_btree_wal},
    {"persistent-unsorted", kPersistentUnsortedDescription,
     Capabilities{
         .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kPmOnly},
     128, "a multiple of 64 in 128..4096 B", &btree_valid_node_size, kPersistentUnsortedOptions,
     &make_persistent_unsorted},
    {"lbtree",
     kLbTreeDescription,
     kSelectiveStrings,
     256,
     "256, 512, 768 or 1024 B (the leaf)",
     &lbtree_node_size_ok,
     {},
     &make_lbtree,
     &make_lbtree_string},
    {"fptree",
     kFpTreeDescription,
     kSelectiveStrings,
     256,
     "256, 512, 768 or 1024 B (the leaf)",
     &fptree_node_size_ok,
     {},
     &make_fptree,
     &make_fptree_string},
    {"btree-ls", kBtreeLsDescription,
     Capabilities{.ordered = true,
                  .persistent = true,
                  .thread_safe = true,
                  .placement = Placement::kSelective},
     256, "256, 512 or 1024 B (entries per leaf and deltas per chain: node size / 16)",
     &btree_ls_node_size_ok, kBtreeLsOptions, &make_btree_ls},
    {"wbtree", kWbTreeDescription,
     Capabilities{.ordered = true,
                  .persistent = true,
                  .thread_safe = true,
                  .string_keys = true,
                  .bulk_load = true,
                  .placement = Placement::kPmOnly},
     128, "128, 256, 512 or 1024 B", &wbtree::valid_node_size, kWbTreeOptions, &make_wbtree,
     &make_wbtree_string},
    {"divided-skiplist",
     kDividedSkiplistDescription,
     Capabilities{.ordered = true,
                  .persistent = true,
                  .thread_safe = true,
                  .placement = Placement::kSelective},
     0,
     "",
     nullptr,
     {},
     &make_divided_skiplist},
    {"p-masstree",
     kPMasstreeDescription,
     Capabilities{.ordered = true,
                  .persistent = true,
                  .thread_safe = true,
                  .string_keys = true,
                  .placement = Placement::kPmOnly},
     0,
     "",
     nullptr,
     {},
     &make_p_masstree,
     &make_p_masstree_string},
    {"p-bwtree",
     kPBwTreeDescription,
     Capabilities{.ordered = true,
                  .persistent = true,
                  .thread_safe = true,
                  .string_keys = true,
                  .placement = Placement::kPmOnly},
     128,
     "a power of two in 128..4096 B (the base node)",
     &p_bwtree::valid_node_size,
     {},
     &make_p_bwtree,
     &make_p_bwtree_string},
    {"bztree",
     kBzTreeDescription,
     Capabilities{
         .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kPmOnly},
     256,
     "a power of two in 256..4096 B (the paper's node: 4096 B)",
     &bztree::valid_node_size,
     {},
     &make_bztree},
    {"dash-eh",
     kDashDescription,
     Capabilities{.ordered = false,
                  .persistent = true,
                  .thread_safe = true,
                  .placement = Placement::kPmOnly},
     1024,
     "a power of two in 1024..16384 B (the normal buckets of a segment, 256 B each; 16384, "
     "64 buckets, is the paper's)",
     &dash_node_size_ok,
     {},
     &make_dash,
     nullptr,
     16384},
    {"leveldb", kLevelDbDescription, kBlockDevice, 0, "", nullptr, kLevelDbOptions, &make_leveldb},
    {"rocksdb", kRocksDbDescription, kBlockDevice, 0, "", nullptr, kRocksDbOptions, &make_rocksdb},
    {"patree", kPaTreeDescription, kPaTreeCaps, 512, kPaTreeNodeSizes, &patree_node_size_ok,
     kPaTreeEngineOptions, &make_patree, nullptr, 512},
    {"patree-dedicated", kPaTreeDedicatedDescription, kPaTreeSyncCaps, 512, kPaTreeNodeSizes,
     &patree_node_size_ok, kPaTreeOptions, &make_patree_dedicated, nullptr, 512},
    {"patree-shared", kPaTreeSharedDescription, kPaTreeSyncCaps, 512, kPaTreeNodeSizes,
     &patree_node_size_ok, kPaTreeOptions, &make_patree_shared, nullptr, 512},
};

}  // namespace

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::kDram:
      return "dram";
    case Placement::kPmOnly:
      return "pm-only";
    case Placement::kSelective:
      return "selective";
    case Placement::kBlockDevice:
      return "block-device";
  }
  return "?";
}

std::string option_summary(const IndexEntry& entry) {
  std::string s;
  for (const OptionSpec& o : entry.options) {
    if (!s.empty()) s += ' ';
    s += o.name;
    s += '=';
    for (size_t i = 0; i < o.values.size(); ++i) {
      if (i > 0) s += '|';
      s += o.values[i];
    }
  }
  return s;
}

Status check_node_size(const IndexEntry& entry, uint32_t bytes) {
  if (entry.node_size_ok == nullptr || entry.node_size_ok(bytes)) return Status::Ok();
  return Status::InvalidArgument(std::string(entry.name) + ": node size " + std::to_string(bytes) +
                                 " B invalid (valid: " + std::string(entry.node_sizes) + ")");
}

Status check_index_options(const IndexEntry& entry,
                           const std::map<std::string, std::string>& extra) {
  const std::string idx(entry.name);
  for (const auto& [key, value] : extra) {
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& o : entry.options) {
      if (o.name == key) spec = &o;
    }
    if (spec == nullptr) {
      return Status::InvalidArgument(idx + ": unknown option '" + key + "' " +
                                     (entry.options.empty()
                                          ? "(it takes no options)"
                                          : "(options: " + option_summary(entry) + ")"));
    }
    bool ok = false;
    std::string valid;
    for (std::string_view v : spec->values) {
      ok = ok || v == value;
      if (!valid.empty()) valid += ", ";
      valid += v;
    }
    if (!ok) {
      return Status::InvalidArgument(idx + ": option " + key + "='" + value +
                                     "' invalid (valid: " + valid + ")");
    }
  }
  return Status::Ok();
}

namespace {

/// The registry: kIndexes, then what register_index() added.
std::vector<IndexEntry>& entries() {
  static std::vector<IndexEntry> all(std::begin(kIndexes), std::end(kIndexes));
  return all;
}

}  // namespace

Status register_index(const IndexEntry& entry) {
  if (entry.name.empty() || entry.make == nullptr) {
    return Status::InvalidArgument("register_index: an entry needs a name and a factory");
  }
  if (entry.caps.string_keys != (entry.make_string != nullptr)) {
    return Status::InvalidArgument("register_index: '" + std::string(entry.name) +
                                   "': caps.string_keys must say whether make_string is set");
  }
  if (find_index_entry(entry.name) != nullptr) {
    return Status::InvalidArgument("register_index: '" + std::string(entry.name) +
                                   "' is registered already");
  }
  entries().push_back(entry);
  return Status::Ok();
}

std::span<const IndexEntry> registered_indexes() { return entries(); }

const IndexEntry* find_index_entry(std::string_view name) {
  for (const IndexEntry& e : entries()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

uint32_t smallest_node_size(std::string_view name) {
  const IndexEntry* e = find_index_entry(name);
  return e != nullptr && e->min_node_size > 128 ? e->min_node_size : 128;
}

std::string_view key_type_name(KeyType t) { return t == KeyType::kString ? "string" : "integer"; }

Status parse_key_type(std::string_view text, KeyType* out) {
  if (text == "integer" || text == "int") {
    *out = KeyType::kInteger;
  } else if (text == "string") {
    *out = KeyType::kString;
  } else {
    return Status::InvalidArgument("key type '" + std::string(text) +
                                   "' invalid (valid: integer, string)");
  }
  return Status::Ok();
}

Status key_too_long(std::string_view index, std::string_view key) {
  return Status::InvalidArgument(std::string(index) + ": key of " + std::to_string(key.size()) +
                                 " bytes is longer than " + std::to_string(kMaxKeyBytes));
}

namespace {
constexpr std::string_view kStringLayoutSuffix = ":string";
}  // namespace

std::string pool_layout(std::string_view index, KeyType t) {
  std::string s(index);
  if (t == KeyType::kString) s += kStringLayoutSuffix;
  return s;
}

std::pair<std::string_view, KeyType> parse_pool_layout(std::string_view layout) {
  if (layout.ends_with(kStringLayoutSuffix)) {
    return {layout.substr(0, layout.size() - kStringLayoutSuffix.size()), KeyType::kString};
  }
  return {layout, KeyType::kInteger};
}

namespace {

/// The factory of `e` for keys of type K (nullptr: none).
template <class K>
auto factory_of(const IndexEntry& e) {
  if constexpr (std::is_same_v<K, std::string_view>) {
    return e.make_string;
  } else {
    return e.make;
  }
}

/// make_index<K>: finds the entry, checks what every index shares (options,
/// fill factor, threads, node size of a new index), calls its factory for K.
template <class K>
Status make_index_of(std::string_view name, const IndexOptions& options,
                     std::unique_ptr<Index<K>>* out) {
  constexpr bool kString = std::is_same_v<K, std::string_view>;
  std::string known;
  for (const IndexEntry& e : entries()) {
    const auto make = factory_of<K>(e);
    if (e.name == name && make == nullptr) {
      std::string with;
      for (const IndexEntry& o : entries()) {
        if (o.make_string == nullptr || is_test_only_index(o.name)) continue;
        if (!with.empty()) with += ", ";
        with += o.name;
      }
      return Status::InvalidArgument("index '" + std::string(name) +
                                     "' has no string keys (indexes with string keys: " + with +
                                     ")");
    }
    if (e.name == name) {
      if (Status s = check_index_options(e, options.extra); !s.ok()) return s;
      if (!(options.fill_factor > 0 && options.fill_factor <= 1)) {
        return Status::InvalidArgument(std::string(name) + ": fill_factor " +
                                       std::to_string(options.fill_factor) + " outside (0, 1]");
      }
      if (options.threads == 0) {
        return Status::InvalidArgument(std::string(name) + ": threads must be >= 1");
      }
      // A new index takes the node size given; a recovered one keeps the
      // size stored in its pool.
      const bool creates =
          !e.caps.persistent || options.pool == nullptr || options.pool->root() == 0;
      if (creates) {
        if (Status s = check_node_size(e, options.node_size); !s.ok()) return s;
      }
      Status s = make(options, out);
      // An index that failed to open (recover) a pool that holds one leaves
      // the pool "not clean", whatever its recovery got to (pool.h).
      if (!s.ok() && options.pool != nullptr && options.pool->root() != 0) {
        options.pool->keep_unclean();
      }
      return s;
    }
    if (make == nullptr) continue;
    if (!known.empty()) known += ", ";
    known += e.name;
  }
  return Status::InvalidArgument("unknown index '" + std::string(name) + "'" +
                                 (kString ? " for string keys" : "") + " (known: " + known + ")");
}

}  // namespace

template <>
Status make_index<uint64_t>(std::string_view name, const IndexOptions& options,
                            std::unique_ptr<Index<uint64_t>>* out) {
  return make_index_of<uint64_t>(name, options, out);
}

template <>
Status make_index<std::string_view>(std::string_view name, const IndexOptions& options,
                                    std::unique_ptr<Index<std::string_view>>* out) {
  return make_index_of<std::string_view>(name, options, out);
}

}  // namespace nvindex
