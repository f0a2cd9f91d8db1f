// The configurations the crash-lab suites (crash_lab_test, crash_ablation_test,
// crash_torture_test) run: every registered persistent index that is not a
// test double, with integer keys, and again with string keys when it has
// them (caps.string_keys; the crash lab's string keys are crash/string_keys.h).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "crash/string_keys.h"
#include "nvindex/index.h"

namespace nvindex::crash {

/// One index and key type the crash-lab suites run, with the image budget
/// per crash point and the share of the suites' scenarios it runs.
struct CrashCase {
  std::string index;
  KeyType key_type = KeyType::kInteger;
  /// Images per crash point before sampling (ImageOptions::budget).
  uint32_t budget = 256;
  /// Multiplies crash_lab_test's scenario counts (its top-up to the bar of
  /// 10,000 images still applies).
  double scenario_share = 1.0;
  /// Operations of crash_ablation_test's scenario; 0: its default (40 per
  /// 128 B of the smallest node size).
  size_t ablation_ops = 0;
  /// Images per crash point of crash_ablation_test; 0: `budget`.
  uint32_t ablation_budget = 0;
  /// Why crash_ablation_test runs this case only in `make test-long`
  /// (NVINDEX_TEST_LONG=1); empty: it runs in `make test`.
  std::string ablation_long_only;
  /// crash_lab_test's bar of checked images in `make test` (a full-size
  /// run); below 10,000 the case also runs a third of its scenarios there.
  /// `make test-long` holds every case to 10,000 with all its scenarios.
  /// 5,000 for a default configuration with integer keys (the 16 such cases
  /// took 449 s of test time of `make test`'s 350 s release ctest on 2
  /// cores, 2026-11-24), 3,000 for string keys and option variants, which
  /// share their default's code and sites.
  uint64_t image_bar = 5000;
  /// Why crash_torture_test skips this case; empty: it runs it.
  std::string torture_skip;
  /// Why crash_lab_test runs this case only in `make test-long`
  /// (NVINDEX_TEST_LONG=1); empty: it runs in `make test`.
  std::string lab_long_only;
  /// Index options (IndexOptions::extra): empty for the default
  /// configuration; one non-default value of a declared option otherwise.
  std::map<std::string, std::string> index_opts;

  /// A GoogleTest parameter name: the index name with '-' as '_', plus
  /// "_<option>_<value>" per index option, plus "_string" for string keys
  /// ("p_masstree_string", "fastfair_inner_dram").
  std::string label() const {
    std::string n = index;
    for (const auto& [k, v] : index_opts) n += "_" + k + "_" + v;
    std::replace_if(
        n.begin(), n.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); },
        '_');
    return key_type == KeyType::kString ? n + "_string" : n;
  }
};

/// Prints a case by its label (test parameter values in failure messages).
inline void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.label(); }

/// Every persistent non-test index with integer keys, then those with
/// string keys again with string keys, in registration order.
///
/// Budget: the lab's default (256 images per crash point) except for
/// p-bwtree, which writes each delta record and base node whole (one 8-byte
/// store after another over 1 to 64 lines) before one fence and publishes it
/// by a later CAS. The (stores + 1)^lines prefix combinations of such a
/// record are one state to recovery (no word names it), and at 256 they made
/// about 80 images per crash point against fastfair's 4 (13,500 images, 50 s,
/// per 50-operation scenario). At 16 the lab still visits, at every crash
/// point, no line and all lines written, every line alone at each of its
/// prefixes and every pair of lines whole (crash/images.h), about 9 images
/// per crash point (12 with string keys); a third of the scenarios (a sixth
/// with string keys) then gives the bar of 10,000 images. Its ablation
/// self-test runs 20 operations (the first split comes with the first
/// consolidation, after 8 deltas on one leaf; 20 reach the root growth and
/// every site).
inline std::vector<CrashCase> persistent_crash_cases() {
  std::vector<CrashCase> cases;
  for (KeyType t : {KeyType::kInteger, KeyType::kString}) {
    for (const IndexEntry& e : registered_indexes()) {
      // Pools only: crash_lab_runs_on says why (kNoCrashLabOnDevices).
      if (!crash_lab_runs_on(e.caps) || is_test_only_index(e.name)) continue;
      if (t == KeyType::kString && !e.caps.string_keys) continue;
      CrashCase c;
      c.index = std::string(e.name);
      c.key_type = t;
      // String keys (18..250 bytes, crash/string_keys.h) dirty one to four
      // more lines per insert (the key record): about 1.6 times the images
      // of an integer scenario (wbtree: 37,000 against 22,700 with every
      // scenario). Half the scenarios keep a string case near its integer
      // case's time, above the bar (the test tops up to it). The ablation
      // self-test of a string instance repeats every site of the integer
      // instance's and adds the key record's; it runs in `make test-long`
      // (the four took 221 s of `make test`'s 430 s of crash tests on 2
      // cores; all passed on 2026-11-24), `make test` runs the integer ones.
      if (t == KeyType::kString) {
        c.scenario_share = 0.5;
        // In make test a third of that and a bar of 3,000 images, as the
        // option variants (the five string cases took 151 s of make test's
        // crash-lab time on 2 cores); make test-long runs them to 10,000.
        c.image_bar = 3000;
        c.ablation_long_only =
            "a string instance's ablation repeats its integer instance's sites plus the key "
            "record's";
      }
      if (c.index == "btree-wal" || c.index == "persistent-unsorted") {
        // The undo log writes a record of several lines (the saved ranges,
        // 8-byte stores in order) before one fence and makes it count by a
        // later NAW of its state word: as p-bwtree's records below, every
        // prefix combination of the record's lines is one state to
        // recovery (state 0: ignored). At 256 they made about 126 images
        // per crash point (11,800 per 20-operation scenario at 128 B, 21
        // s); 16 keeps the lab's cover of each line alone and every pair,
        // about 11 images per crash point, and a third of the scenarios
        // about 16,000 images (btree-wal: 49,000 in 86 s with all).
        c.budget = 16;
        c.scenario_share = 1.0 / 3;
        // Its ablation self-test: 24 operations reach every site (the root
        // splits and collapses at 128 B), and 8 images per crash point
        // still catch every site the lab catches at 16, in about half the
        // time.
        c.ablation_ops = 24;
        c.ablation_budget = 8;
      }
      if (t == KeyType::kInteger && c.index != "fastfair" && c.index != "p-masstree" &&
          c.index != "divided-skiplist") {
        // 20 to 48 s each of make test's ablation time on 2 cores (wbtree,
        // p-bwtree, btree-ls and lbtree 155 s; fptree, persistent-unsorted
        // and btree-wal 68 s more on 2026-11-24); the lab itself still runs
        // them in make test, and make test keeps three ablation self-tests
        // (fastfair, p-masstree, divided-skiplist) so that a broken
        // ablation harness still fails it.
        c.ablation_long_only = "its ablation self-test takes 20 to 48 s";
      }
      if (c.index == "btree-ls") {
        // As p-bwtree: a base record (and at creation each segment table)
        // is written whole, one 8-byte store after another over several
        // lines, before one fence, and its checksum makes every prefix
        // combination of those lines one state to recovery (a torn record
        // is ignored). 16 images per crash point keep the lab's cover of
        // each line alone and every pair; a third of the scenarios, then
        // the top-up, reach the bar.
        c.budget = 16;
        c.scenario_share = 1.0 / 3;
      }
      if (c.index == "bztree") {
        // Every PMwCAS writes its descriptor (4 lines) and then each target
        // word with fences in between, and each new node is written whole
        // before one fence: at the default budget a 40-operation scenario
        // at 256 B made about 113 images per crash point at 16 (116,500
        // images, 250 s, 2026-11-25), 30 at 4 (16,300 images, 33 s): the
        // lab's families that come whatever the budget (none, all, each line
        // alone at each prefix, each pair of lines whole: crash/images.h)
        // stay, the covering array and random rows go. One scenario per run
        // is then far above the bar (those figures from before PMwCAS's CAS
        // writes were followed). Its ablation self-test runs 20 operations (the first
        // split at 256 B comes at the 7th insert, merges soon after).
        // With PMwCAS's CAS writes followed (every target word is a pending
        // store), 4 took 94 s of make test for about 40,000 images; 2
        // keeps the families above and halves it.
        c.budget = 2;
        c.scenario_share = 1.0 / 12;
        c.ablation_ops = 20;
      }
      if (c.index == "dash-eh") {
        // A bucket's lock word and its overflow metadata (line 0) are never
        // flushed for their own sake (the paper's protocol: recovery resets
        // the locks and rebuilds the metadata), so every crash point has
        // many dirty lines whose prefix combinations are one state to
        // recovery: at 256 about 200 images per crash point (116,870 images,
        // 518 s on 2 shared cores, 0 failures, 2026-11-25). 16 keeps the
        // lab's cover of each line alone and every pair; a third of the
        // scenarios, then the top-up, reach the bar. Its scenarios stay
        // below a split (84 records per 1 KiB segment): the splits are
        // crash-tested by tests/crash_dash_test.cc. The ablation self-test:
        // 200 operations reach every non-split site (displacement and the
        // stash included; 160 reach neither).
        c.budget = 16;
        c.scenario_share = 1.0 / 3;
        c.ablation_ops = 200;
        c.ablation_budget = 8;
      }
      if (c.index == "p-bwtree") {
        c.budget = 16;
        c.scenario_share = t == KeyType::kString ? 1.0 / 6 : 1.0 / 3;
        c.ablation_ops = 20;
      }
      cases.push_back(c);
      // Each non-default value of each declared option (wbtree and
      // fastfair inner=dram), integer keys: the same lab on that
      // configuration. Their ablation self-tests run in `make test-long`
      // (the default configuration's covers the same sites, bar those only
      // the option reaches).
      if (t == KeyType::kString) continue;
      for (const OptionSpec& o : e.options) {
        for (size_t v = 1; v < o.values.size(); ++v) {
          CrashCase oc = c;
          oc.index_opts = {{std::string(o.name), std::string(o.values[v])}};
          oc.ablation_long_only = "an option's configuration repeats most of its default's sites";
          // In `make test` a third of the scenarios and a bar of 3,000
          // images (crash_lab_test; the three inner=dram variants' 10,000
          // took 174 s of test time on 2 cores); `make test-long` runs them
          // whole.
          oc.image_bar = 3000;
          if (c.index == "btree-ls" && o.name != "gc_at") {
            // 67 s of make test's crash-lab time on 2 cores for the four;
            // gc_at=0, the one variant whose scenarios reach the GC, stays.
            oc.lab_long_only =
                "btree-ls's logs, gc and prefetch variants run the default's record protocols "
                "(prefetch touches no PM); gc_at=0 stays in make test";
          }
          if (c.index == "btree-ls" && o.name == "gc" && o.values[v] == "off") {
            // Measured: OutOfSpace after 13 rounds in torture's 8 MiB pool.
            oc.torture_skip =
                "gc=off never reuses log space, so torture's millions of operations fill any "
                "pool; its crash-lab and conformance cases cover it, and gc=on's torture the "
                "protocols";
          }
          cases.push_back(oc);
        }
      }
    }
  }
  return cases;
}

/// The non-test indexes the crash lab runs on (crash_lab_runs_on) without
/// string keys (each must be refused for --key-type string), in
/// registration order.
inline std::vector<std::string> persistent_indexes_without_string_keys() {
  std::vector<std::string> names;
  for (const IndexEntry& e : registered_indexes()) {
    if (crash_lab_runs_on(e.caps) && !e.caps.string_keys && !is_test_only_index(e.name)) {
      names.emplace_back(e.name);
    }
  }
  return names;
}

}  // namespace nvindex::crash
