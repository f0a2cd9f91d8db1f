// Crash-lab reports (oracle.h): a failure's replayable text form, and the
// ablation notes that excuse a dropped flush or fence the oracle cannot
// catch (the index's own, then the PM layer's).
#include "crash/oracle.h"

namespace nvindex::crash {

std::string Failure::to_string() const {
  std::string s = "index " + index + ", node size " + std::to_string(node_size) + " B, seed " +
                  std::to_string(seed) + ", " + std::to_string(ops) + " ops";
  if (!ablation.empty()) s += ", ablated " + ablation;
  s += "\n  operation " + std::to_string(op_number) + " (" + op + ")";
  if (live) {
    s += ", live index (no crash)";
  } else {
    s += "\n  crash point " + std::to_string(crash_point) + " " +
         (at_fence ? "before fence at " : "at return of ") + site + " (" + std::to_string(fences) +
         " fences so far)";
    s += "\n  image: " + (choice.empty() ? std::string("(durable bytes only)") : choice);
  }
  s += "\n  saw: " + what;
  s += "\n  replay: nvindex crashtest --index " + index + " --node-size " +
       std::to_string(node_size) + " --seed " + std::to_string(seed) + " --ops " +
       std::to_string(ops) + " --scenarios 1";
  if (key_type == KeyType::kString) s += " --key-type string";
  if (!ablation.empty()) s += " --ablate " + ablation.substr(0, ablation.rfind('/'));
  return s;
}

std::string find_note(const std::vector<std::pair<std::string, std::string>>& notes,
                      const std::string& site, bool fence) {
  const std::string exact = site + (fence ? "/fence" : "/flush");
  for (const auto& [k, v] : notes) {
    if (k == exact) return v;
  }
  for (const auto& [k, v] : notes) {
    if (k == site) return v;
  }
  // The PM layer's own sites ("pool.*", "allocator.*") are exercised by
  // every index's runs too. Their fences are redundant under the publish
  // protocol every index follows: the flushed line (a chunk's class byte, the
  // pool's root offset) becomes durable at the same thread's next fence, and
  // the index issues one (persisting the new block) before it publishes
  // anything that depends on it; a crash before that fence leaves a chunk no
  // reachable block uses, or a pool with no root, i.e. an empty index.
  // One is not redundant, and says so: the fence between an extent's first
  // chunk table entry and its further ones (allocator.h).
  if (fence && site == "allocator.extent_first") {
    return "PM layer: orders an extent's first chunk entry before its further ones; without it "
           "a crash can leave further entries durable alone, which attach() clears, or which "
           "lengthen the extent of its arena just before them (space held by that extent, no "
           "block lost or owned twice)";
  }
  if (fence && (site.starts_with("allocator.") || site.starts_with("pool."))) {
    return "PM layer: redundant under persist-before-publish (the flushed line is committed by "
           "the same thread's next fence, which precedes any publication depending on it)";
  }
  return "";
}

}  // namespace nvindex::crash
