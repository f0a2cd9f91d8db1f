// btree: the volatile B+-tree baseline (DESIGN.md §1), with optimistic
// version-lock concurrency. See btree.cc for the node layout and the protocol.
#pragma once

#include <memory>
#include <string_view>

#include "nvindex/index.h"

namespace nvindex {

/// One-line description of "btree" for the registry and IndexInfo.
inline constexpr char kBtreeDescription[] =
    "volatile B+-tree, sorted nodes, linear search, optimistic lock coupling with B-link "
    "right links and fence keys (Ni et al. 2020 §3.1; Cha et al. OLFIT, VLDB'01)";

/// One-line description of "unsorted-leaf" for the registry and IndexInfo.
inline constexpr char kUnsortedLeafDescription[] =
    "volatile B+-tree, sorted inner nodes, unsorted leaves with a validity bitmap, linear "
    "search, optimistic lock coupling (Ni et al. 2020 §3.2); btree's code with another leaf "
    "layout";

/// One-line descriptions of "btree-wal" and "persistent-unsorted".
inline constexpr char kBtreeWalDescription[] =
    "btree in PM made crash-consistent by an undo write-ahead log: every insert, remove and SMO "
    "is one logged transaction, updates one NAW (Ni et al. 2020 §3.1, the double-write "
    "baseline)";
inline constexpr char kPersistentUnsortedDescription[] =
    "unsorted-leaf in PM: a pair persisted into a free slot and published by one NAW of its "
    "bitmap word, removes and updates one NAW; SMOs through btree-wal's undo log (Ni et al. "
    "2020 §3.3)";

/// The values of btree's and unsorted-leaf's option "flush" (the default first).
inline constexpr std::string_view kBtreeFlushValues[] = {"off", "none", "group"};
/// btree's and unsorted-leaf's options (registry entries).
inline constexpr OptionSpec kBtreeOptions[] = {
    {"flush", kBtreeFlushValues,
     "off (the DRAM tree), none (the same tree with its nodes modelled as PM: node stores "
     "followed by the PM counters and the media model, no flush) or group (as none, plus Ni et "
     "al. 2020 §6.2 group flushing: each update's modified lines flushed in address order); "
     "none and group make no crash-consistency claim; integer keys",
     true}};

/// What btree:flush=none and btree:flush=group add to the entry's description in IndexInfo.
inline constexpr char kBtreeFlushNoneInfo[] =
    "; flush=none: its nodes modelled as PM (every node store goes through the PM layer, nothing "
    "is flushed, so modified lines reach the media when the modelled cache evicts them); not "
    "persistent, no crash-consistency claim (Ni et al. 2020 §6.2 baseline)";
inline constexpr char kBtreeGroupFlushInfo[] =
    "; flush=group: its nodes modelled as PM, with group flushing (after each node update and "
    "node initialisation, one clwb per modified line in address order, no fence); not "
    "persistent, no crash-consistency claim (Ni et al. 2020 §6.2)";

/// Smallest and largest node size "btree" accepts, bytes (IndexOptions::node_size).
inline constexpr uint32_t kBtreeMinNodeSize = 128;
inline constexpr uint32_t kBtreeMaxNodeSize = 4096;
/// Node sizes "btree" takes: a multiple of 64 in kBtreeMinNodeSize..kBtreeMaxNodeSize.
inline bool btree_valid_node_size(uint32_t s) {
  return s >= kBtreeMinNodeSize && s <= kBtreeMaxNodeSize && s % 64 == 0;
}

/// Factory for "btree": a volatile (Placement::kDram), ordered, thread-safe
/// B+-tree over uint64_t keys and 8-byte values (every value, 0 included, is
/// valid). Uses IndexOptions::node_size (bytes per node: 128..4096, a multiple
/// of 64; default 512); a 512 B leaf holds 29 pairs, a 512 B inner node 29
/// separators and 30 children (see the layout table in btree_impl.h).
/// Ignores the pool and the fill factor. options.extra["flush"] (group
/// flushing, Ni et al. 2020 §6.2; docs/indexes/btree.md): "off" (default:
/// the DRAM tree), "none" (the same tree whose node stores go through the PM
/// layer, so that the PM counters and the media model's modelled cache see
/// them; nodes on the heap, as PM is emulated on DRAM; nothing flushed) or
/// "group" (as none, plus one flush per modified line, in address order,
/// after each node update and node initialisation; no fence). none and group
/// are not persistent and claim no crash consistency (IndexInfo says so);
/// make_index() refuses any other value (kBtreeOptions).
/// Errors: InvalidArgument when node_size is outside [128, 4096] or not a
/// multiple of 64.
Status make_btree(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "unsorted-leaf": btree (same inner nodes, concurrency and node
/// sizes) with unsorted leaves, Ni et al. 2020 §3.2: a leaf's pairs sit in
/// any slots, named by a validity bitmap (ceil(C / 64) words after the
/// header), so an insert writes one pair and one bitmap word instead of
/// shifting; a lookup scans the leaf's valid slots; a scan sorts each leaf's
/// pairs in DRAM. A 512 B leaf holds 29 pairs (128 B: 5; 4 KiB: 251); inner
/// nodes as btree's. uint64_t keys only. options.extra["flush"] as
/// make_btree's (flush=group flushes an insert's key, value and bitmap-word
/// lines as one group; a remove's bitmap word's line). Errors as make_btree.
Status make_unsorted_leaf(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "btree-wal": btree's sorted nodes (same layout, concurrency
/// and node sizes; version locks in a DRAM table) in the pool
/// IndexOptions::pool (layout "btree-wal"), crash-consistent by an undo
/// write-ahead log (src/indexes/common/undo_log.h): an insert or remove is
/// one transaction (the old bytes of the shifted slots and the count word
/// logged and persisted, the node changed in place and persisted, the
/// record cleared: 4 fences), an SMO one transaction over every node it
/// changes, an update one NAW of the value. A node of a size that is not a
/// power of two takes the next power of two of pool (768 B -> 1 KiB). On a
/// pool with a root: recovers (rolls back the transactions a crash cut
/// short, then checks and walks the tree); the stored node size wins.
/// uint64_t keys only. Errors: InvalidArgument (node size, no pool, a pool
/// of another layout), Corruption (a damaged pool), OutOfSpace (the pool is
/// full: the operation that needed a node changes nothing).
Status make_btree_wal(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// The values of persistent-unsorted's one option, "inner" (the default first).
inline constexpr std::string_view kPersistentUnsortedInnerValues[] = {"pm", "dram"};
/// persistent-unsorted's options (registry entry).
inline constexpr OptionSpec kPersistentUnsortedOptions[] = {
    {"inner", kPersistentUnsortedInnerValues,
     "where inner nodes live: pm (every node in the pool) or dram (selective persistence, Ni et "
     "al. 2020 §5: inner nodes rebuilt from the leaf chain at every open, placement selective)"}};

/// Factory for "persistent-unsorted": unsorted-leaf in the pool (layout
/// "persistent-unsorted"): an insert writes the pair into a free slot,
/// persists it and sets its bitmap bit with one NAW (2 fences); a remove
/// clears the bit with one NAW; an update is one NAW of the value; SMOs are
/// transactions of btree-wal's undo log. options.extra["inner"]: "pm"
/// (default: every node in the pool) or "dram" (selective persistence: only
/// the leaves, their chain and the log are in the pool; the inner nodes are
/// DRAM nodes of the same layout, never logged or flushed, rebuilt bottom-up
/// from the leaf chain at every open, three quarters full; info().placement
/// kSelective and recovery_seconds the open's time). A recovered tree keeps
/// the placement it was created with, whatever the option says. Node sizes,
/// recovery and errors as make_btree_wal.
Status make_persistent_unsorted(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "btree" with byte-string keys (0..kMaxKeyBytes bytes; a
/// longer one is InvalidArgument in insert, update and remove). Each key
/// lives in a heap key record (1 length byte + the bytes); a key slot is 16
/// bytes: the record's pointer and an inline prefix word (first 7 bytes and
/// min(length, 8)) that settles most comparisons without dereferencing it.
/// A 512 B leaf holds 19 pairs, a 512 B inner node 18 separators (see
/// btree.cc). Removed keys' records are kept until the tree is destroyed
/// (optimistic readers may hold them); info().dram_bytes counts them. Node
/// sizes and errors as make_btree; flush=none|group is InvalidArgument
/// (integer keys only).
Status make_btree_string(const IndexOptions& options,
                         std::unique_ptr<Index<std::string_view>>* out);

}  // namespace nvindex
