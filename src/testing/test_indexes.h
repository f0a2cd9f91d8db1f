// The test doubles: indexes that exist only to prove that the harness and the
// crash lab catch what they must ("-test" names, is_test_only_index). They
// live outside the production library (nvindex_indexes) in nvindex_testing,
// and are in the registry only once register_test_indexes() has run: the
// nvindex command line and the tests that use them call it.
//   lying-test                        drops every 10th insert, returns wrong
//                                     values (src/testing/lying/)
//   batch-spy-test                    logs multi_lookup batch sizes; lie=values
//                                     falsifies its results (src/testing/batch_spy/)
//   bug-publish-before-persist-test   crash bugs on purpose, with the
//   bug-split-two-naw-test            option bug=none as the control
//                                     (src/testing/crash_bugs/)
//   kv-store-test                     the KV store as an integer-key index,
//                                     for the crash lab and torture
//                                     (src/testing/kv_store/)
#pragma once

namespace nvindex::test_indexes {

/// Adds the test doubles to the registry (register_index). Idempotent and
/// thread-safe; call it before other threads use the registry (at start-up).
void register_test_indexes();

}  // namespace nvindex::test_indexes
