// crash_bugs: two DELIBERATELY BROKEN persistent indexes that prove the crash
// lab works (issue 3, "Done when": both must be caught by `nvindex crashtest`
// and by tests/crash_lab_test.cc). They are test-only (names end in -test) and
// must never be benchmarked or used to store data.
//
// Both are the same tiny structure, a persistent sorted list of nodes (a
// B-link leaf chain without inner nodes), with one crash-consistency bug each:
//   bug-publish-before-persist-test  a split links the new node (NAW of the
//                                    old node's next pointer) BEFORE the new
//                                    node's contents are persisted;
//   bug-split-two-naw-test           a split changes the old node's next
//                                    pointer and its bitmap with two separate
//                                    NAWs and there is no recovery for the
//                                    state between them (readers do not
//                                    ignore the moved entries, recovery does
//                                    not drop them).
// The index-specific knob IndexOptions::extra["bug"] = "none" turns the bug
// off ("on", the default, keeps it) (the control: the same index then passes the crash test, which
// shows that what the lab catches is the bug and nothing else). See crash_bugs.cc for the layout
// and the (correct and broken) protocols.
#pragma once

#include <memory>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kBugPublishBeforePersistDescription[] =
    "deliberately broken persistent list: links a new node before persisting it (crash-lab "
    "proof, never benchmark it)";
inline constexpr char kBugSplitTwoNawDescription[] =
    "deliberately broken persistent list: splits with two separate NAWs and no recovery "
    "(crash-lab proof, never benchmark it)";

/// Node sizes of both bug indexes: a power of two in 128..1024 bytes.
inline bool bug_list_valid_node_size(uint32_t s) {
  return s >= 128 && s <= 1024 && (s & (s - 1)) == 0;
}

/// The values of the option "bug" (the default first).
inline constexpr std::string_view kBugValues[] = {"on", "none"};
/// The options of both bug indexes (registry entries).
inline constexpr OptionSpec kBugOptions[] = {
    {"bug", kBugValues, "on: the deliberate crash bug; none: the correct protocol (the control)"}};

/// Factory for "bug-publish-before-persist-test". options.pool is required
/// (InvalidArgument otherwise), with layout equal to the index name;
/// options.node_size 128..1024 bytes, a power of two (InvalidArgument
/// otherwise). extra["bug"] = "none" disables the bug ("on", the default,
/// keeps it; make_index() refuses other values, kBugOptions). A pool with a root is recovered
/// (Corruption on a damaged list).
Status make_bug_publish_before_persist(const IndexOptions& options,
                                       std::unique_ptr<Index<uint64_t>>* out);

/// Factory for "bug-split-two-naw-test": as make_bug_publish_before_persist,
/// with the split bug described above.
Status make_bug_split_two_naw(const IndexOptions& options, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
