// Crash images (DESIGN.md §6, issue 3 §1): the pool images a power failure
// could leave at a crash point, built from what the PM layer's recorder
// (src/pm/crashsim.h) keeps: the durable bytes and, per dirty line, the stores
// not yet durable, in program order.
//
// ADR (caches volatile): an image is the durable bytes plus, for each line
// with pending stores, a prefix of them. When the product of (pending + 1)
// over the dirty lines is at most ImageOptions::budget, every combination is
// visited. Beyond it, in this order and with duplicates removed: none, all,
// each line alone at each of its prefixes, each pair of lines both full
// (these four families always, up to 8 x budget images); then rows of a
// strength-2 covering array over prefix choices, built greedily (AETG: Cohen
// et al., IEEE TSE 1997), until every pair of lines has taken every pair of
// prefixes in some image or the budget is reached (for up to 64 dirty lines:
// the bookkeeping is quadratic); then random choices seeded by
// ImageOptions::seed and the crash point number, until the budget.
//
// eADR (caches persistent): an image is a prefix of the global order of the
// stores made since the previous crash point: all of them when they are at
// most the budget, else `budget` prefixes evenly spaced, both ends included.
//
// Cost per image: O(64 B x dirty lines): the chosen prefixes are applied to
// the recorder's working copy of the pool and undone from the durable copy.
// Every choice is a pure function of (pending stores, budget, seed, crash
// point number), so a seed and a choice text replay an image.
//
// Thread-safety: as the recorder's (not thread-safe; one simulator per
// process).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nvindex/status.h"
#include "pm/crashsim.h"

namespace nvindex::crash {

/// Which images a crash point yields.
struct ImageOptions {
  uint32_t budget = 256;  ///< images per crash point before sampling (>= 1)
  uint64_t seed = 1;      ///< seeds the random choices beyond the budget
};

/// One image: the pool bytes a crash at a crash point could leave, and the
/// choice that made it: "line 0x1040: 2/3, line 0x2000: 0/1" (pool offset of
/// each dirty line: stores kept / pending), "no pending stores", or under
/// eADR "eadr: first 4 of 9 pending stores".
struct Image {
  /// Whole pool, pool->size() bytes; valid only during the visitor call (the
  /// buffer is reused for the next image).
  const std::vector<char>* bytes = nullptr;
  std::string choice;
};

/// Called with each image of a crash point; returns false to stop
/// enumerating images at this crash point (the next crash point starts
/// again).
using ImageVisitor = std::function<bool(const pm::crashsim::CrashPoint&, const Image&)>;

/// Hands `visitor` the images of one crash point (see the file comment; ADR
/// or eADR by state.profile), building each in *state.image and restoring it
/// afterwards. Returns the number of images visited. options.budget must be
/// >= 1 (set_image_visitor checks it).
uint64_t enumerate_images(const pm::crashsim::CrashPoint& point,
                          const pm::crashsim::PendingState& state, const ImageOptions& options,
                          const ImageVisitor& visitor);

/// Installs on `sim` a crash-point hook that hands every image of every
/// crash point to `visitor` (enumerate_images); a null visitor removes the
/// hook (crash points are then only counted). Replaces any hook set before.
/// Errors: InvalidArgument (sim null, options.budget 0).
Status set_image_visitor(pm::crashsim::Simulator* sim, const ImageOptions& options,
                         ImageVisitor visitor);

}  // namespace nvindex::crash
