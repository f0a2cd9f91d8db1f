// A test hook of "btree", kept out of its header (btree.h): ways to damage a
// tree so that tests can check that verify() reports each kind of
// corruption. Only tests include this file.
#pragma once

#include <cstdint>

#include "nvindex/index.h"

namespace nvindex {

/// Test-only ways to damage a "btree" or an "unsorted-leaf", so that tests
/// can check that verify() reports each kind of corruption (never call
/// outside tests).
enum class BtreeDamage : uint8_t {
  kUnsortedLeaf,        ///< swap the first two keys of the leftmost leaf (unsorted-leaf:
                        ///< copy its slot 0 key over slot 1, a duplicate)
  kLeafChainCycle,      ///< point the second leaf's right link back at the first
  kFenceMismatch,       ///< raise the second leaf's low fence above its separator
  kKeyOutOfRange,       ///< overwrite the leftmost leaf's last key with UINT64_MAX
  kCountMismatch,       ///< add one to the live-key counter
  kBitmapPastCapacity,  ///< unsorted-leaf only: set the top bit of the leftmost leaf's last
                        ///< bitmap word, a slot past its capacity
};

/// Applies `damage` to `idx`, which must be a quiescent "btree" or
/// "unsorted-leaf" (integer keys) of height >= 2 whose first two leaves hold
/// >= 2 keys each (unsorted-leaf: in slots 0.., as inserts without removes
/// leave them). Errors: InvalidArgument when idx is neither, is too small,
/// or (kBitmapPastCapacity) is a btree.
Status btree_damage_for_test(Index<uint64_t>* idx, BtreeDamage damage);

}  // namespace nvindex
