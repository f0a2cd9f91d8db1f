#include "testing/test_indexes.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "nvindex/index.h"
#include "testing/batch_spy/batch_spy.h"
#include "testing/crash_bugs/crash_bugs.h"
#include "testing/kv_store/kv_store_index.h"
#include "testing/lying/lying.h"

namespace nvindex::test_indexes {

namespace {

constexpr Capabilities kBugList{
    .ordered = true, .persistent = true, .placement = Placement::kPmOnly};

constexpr IndexEntry kTestIndexes[] = {
    {"lying-test",
     kLyingDescription,
     Capabilities{.ordered = true, .thread_safe = true, .string_keys = true},
     0,
     "",
     nullptr,
     {},
     &make_lying_index,
     &make_lying_string_index},
    {"batch-spy-test", kBatchSpyDescription,
     Capabilities{.ordered = true, .thread_safe = true, .string_keys = true}, 0, "", nullptr,
     kBatchSpyOptions, &make_batch_spy_index, &make_batch_spy_string_index},
    {"bug-publish-before-persist-test", kBugPublishBeforePersistDescription, kBugList, 128,
     "a power of two in 128..1024 B", &bug_list_valid_node_size, kBugOptions,
     &make_bug_publish_before_persist},
    {"bug-split-two-naw-test", kBugSplitTwoNawDescription, kBugList, 128,
     "a power of two in 128..1024 B", &bug_list_valid_node_size, kBugOptions,
     &make_bug_split_two_naw},
    {"kv-store-test", kKvStoreTestDescription,
     Capabilities{
         .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kPmOnly},
     0, "", nullptr, kKvStoreTestOptions, &make_kv_store_test_index},
};

}  // namespace

void register_test_indexes() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const IndexEntry& e : kTestIndexes) {
      if (Status s = register_index(e); !s.ok()) {
        std::fprintf(stderr, "nvindex: cannot register %s\n", s.ToString().c_str());
        std::abort();  // a name clash between two registrations: a program bug
      }
    }
  });
}

}  // namespace nvindex::test_indexes
