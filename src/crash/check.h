// The crash lab's image checks (oracle.h, checks 1-6), private to the crash
// lab: what a forked child does with one crash image (write it to a file,
// recover it, check structure, content, PM accounting and further work) and
// with a sampled image under a nested simulator (crash during recovery), plus
// the content and line-diff helpers the scenario runner (oracle.cc) shares
// with them. Each child reports on a pipe in the verdict-line protocol of
// runner.h.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crash/oracle.h"
#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "nvindex/status.h"

namespace nvindex::crash::detail {

/// The largest key, printed as "UINT64_MAX".
constexpr uint64_t kMax = UINT64_MAX;

/// "UINT64_MAX" for kMax, else the decimal key.
std::string key_text(uint64_t k);

/// Bytes the allocator hands out for a node of `node_size` bytes: its size
/// class (the next power of two, at least 64), e.g. 1024 for a 768 B leaf.
uint64_t block_bytes(uint32_t node_size);

/// Bytes of the PM blocks verify()'s report `r` accounts for, for an index
/// with capabilities and node size `info`: r.pm_bytes when the index counts
/// them, else its nodes (leaves, plus inner nodes unless placement is
/// selective) times block_bytes(node size).
uint64_t structure_bytes(const VerifyReport& r, const IndexInfo& info);

/// An image stored as the 64 B lines (pool offset, bytes) where it differs
/// from a base image.
using LineDiff = std::vector<std::pair<uint64_t, std::array<char, 64>>>;

/// The lines of `image` that differ from `base` (both `size` bytes).
LineDiff diff_lines(const char* base, const char* image, size_t size);

/// Reads the index's content into *out: a full scan (ordered indexes:
/// strictly ascending, no duplicates) and a lookup of every key in `keys`,
/// which must agree with the scan. Returns "" or what was wrong.
std::string read_content(Index<uint64_t>& idx, bool ordered, const std::vector<uint64_t>& keys,
                         Model* out);

/// First `limit` differences between got and want, e.g. "key 7007: got
/// absent, want 0x1f; key 9: got 0x2, want absent", then the total when
/// there are more.
std::string model_diff(const Model& got, const Model& want, size_t limit = 4);

/// The scenario's index on `pool`: created when the pool has no root,
/// recovered otherwise (make_index decides), with the scenario's node size
/// and index-specific options. Errors as make_index.
Status make_scenario_index(const Options& o, pm::Pool* pool, std::unique_ptr<Index<uint64_t>>* idx);

/// What the child needs to check one image (inherited through fork).
struct CheckContext {
  const Options* options = nullptr;
  const std::vector<uint64_t>* universe = nullptr;  ///< every key the scenario uses
  const Model* before = nullptr;                    ///< the model before the op in flight
  const Model* after = nullptr;                     ///< ...and after it
  bool allow_before = false;  ///< a crash inside the op: `before` is a valid outcome too
  bool ordered = true;        ///< the index is ordered (full scans are checked)
  Placement placement = Placement::kPmOnly;
  bool overhead_known = false;  ///< `overhead` was measured (the accounting check runs)
  uint64_t overhead = 0;        ///< bytes in use beyond the nodes, right after creation
};

/// Child side of an image check (oracle.h, checks 1-5): leaves the parent's
/// simulator, writes the `size` image bytes to `path`, recovers it in
/// emulated mode and checks it; writes one verdict line to `fd` ("A", "B" or
/// "F <what>") and removes the file.
void child_check_image(const CheckContext& c, const char* bytes, size_t size,
                       const std::string& path, int fd);

/// A sampled image, kept for the crash-during-recovery check.
struct Sample {
  LineDiff diff;  ///< vs the pool as created
  Failure ctx;    ///< where it was taken (the failure to report)
};

/// Child side of the crash-during-recovery check (oracle.h, check 6): the
/// sample (`base` + its diff) is written to `path` and recovered under a
/// nested simulator; up to Options::nested_per_point images at each crash
/// point of that recovery (Options::nested_total in all) are each written to
/// `path2`, recovered again in emulated mode, and must pass verify() and
/// reach the content of the uninterrupted recovery. Writes "F nested: ...",
/// "F crash during recovery (...)" lines for what failed and "N <points>
/// <images>" at the end to `fd`.
void child_nested(const Options& o, const std::vector<uint64_t>& universe, bool ordered,
                  const std::vector<char>& base, const Sample& sample, const std::string& path,
                  const std::string& path2, int fd);

}  // namespace nvindex::crash::detail
