// PA-Tree as nvindex indexes (issue 14): the tree of nvme/tree.h behind the
// Index<uint64_t> interface, one registry name per way of running it:
//   patree            the polled-mode asynchronous engine (nvme/engine.h): one
//                     worker thread runs up to queue_depth operations at once
//   patree-dedicated  each calling thread does its own blocking I/O on its
//                     own io_uring (the paper's first synchronous baseline)
//   patree-shared     calling threads hand I/O to one polling daemon thread
//                     and block on a semaphore (the second baseline)
// (Wang et al., "PA-Tree: Polled-Mode Asynchronous B+ Tree for NVMe", ICDE
// 2020, §V-A.) Integer keys and 8-byte values; ordered, persistent, thread-
// safe; placement kBlockDevice: IndexOptions::device names a file (created
// at IndexOptions::device_bytes, default 1 GiB, when missing) or a block
// device, never a path on tmpfs.
//
// Options (IndexOptions::extra):
//   persistence=strong|weak  strong: every update written through before it
//                            completes; weak: a read-write buffer, durable at
//                            sync() (and at checkpoints when half the buffer
//                            is dirty)
//   buffer=64m|none|1m       node buffer size (none: unbuffered;
//                            weak needs one)
//   ring=auto|interrupt|sqpoll  io_uring mode (ring.h); auto = iopoll when
//                            the device polls (probed at open), else interrupt
//   dsync=off|on             strong: write nodes with RWF_DSYNC
//   probe=model|every|average  (patree) when the worker probes for completions
//   queue_depth=64|1|4|16|256  (patree) operations in flight at once
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "nvindex/index.h"

namespace nvindex {

inline constexpr char kPaTreeDescription[] =
    "PA-Tree: polled-mode asynchronous B+-tree on a block device, one worker running many "
    "operations as state machines over io_uring (Wang et al., ICDE 2020)";
inline constexpr char kPaTreeDedicatedDescription[] =
    "PA-Tree's B+-tree on a block device, synchronous baseline: each thread its own io_uring, "
    "blocking I/O (Wang et al., ICDE 2020, §V-A)";
inline constexpr char kPaTreeSharedDescription[] =
    "PA-Tree's B+-tree on a block device, synchronous baseline: threads hand I/O to one "
    "polling daemon and block on a semaphore (Wang et al., ICDE 2020, §V-A)";

/// patree's capabilities: an ordered, thread-safe store on a block device
/// whose execute() keeps a batch's operations in flight (the engine).
inline constexpr Capabilities kPaTreeCaps{.ordered = true,
                                          .persistent = true,
                                          .thread_safe = true,
                                          .placement = Placement::kBlockDevice,
                                          .async = true};
/// patree-dedicated's and patree-shared's: the same, execute() one by one.
inline constexpr Capabilities kPaTreeSyncCaps{
    .ordered = true, .persistent = true, .thread_safe = true, .placement = Placement::kBlockDevice};

/// The node sizes the registry lists (patree_node_size_ok).
inline constexpr char kPaTreeNodeSizes[] =
    "a power of two in 512..4096 B (512 B: the NVMe access unit, the paper's)";

inline constexpr std::string_view kPaTreePersistenceValues[] = {"strong", "weak"};
inline constexpr std::string_view kPaTreeBufferValues[] = {"64m", "none", "1m"};
inline constexpr std::string_view kPaTreeRingValues[] = {"auto", "interrupt", "sqpoll"};
inline constexpr std::string_view kPaTreeDsyncValues[] = {"off", "on"};
inline constexpr std::string_view kPaTreeProbeValues[] = {"model", "every", "average"};
inline constexpr std::string_view kPaTreeQueueDepthValues[] = {"64", "1", "4", "16", "256"};
/// The options of the PA-Tree entries (IndexEntry::options; values[0] is the
/// default); "patree" takes kPaTreeEngineOptions, these and two more.
inline constexpr OptionSpec kPaTreeOptions[] = {
    {"persistence", kPaTreePersistenceValues,
     "strong: updates written through before they complete; weak: read-write buffer, durable "
     "at sync()"},
    {"buffer", kPaTreeBufferValues, "node buffer in DRAM (none: every node visit is a read)", false,
     true},
    {"ring", kPaTreeRingValues,
     "io_uring mode: auto = iopoll when the device polls (probed at open), else interrupt; "
     "sqpoll: a kernel thread polls the submission queue",
     false, true},
    {"dsync", kPaTreeDsyncValues, "strong: each node write RWF_DSYNC (durable on power loss)",
     false, true}};
inline constexpr OptionSpec kPaTreeEngineOptions[] = {
    kPaTreeOptions[0],
    kPaTreeOptions[1],
    kPaTreeOptions[2],
    kPaTreeOptions[3],
    {"probe", kPaTreeProbeValues,
     "when the worker looks for completions: model (predicted from outstanding I/Os), every "
     "(each loop), average (after the mean latency)",
     false, true},
    {"queue_depth", kPaTreeQueueDepthValues, "operations the worker runs at once", false, true}};

/// True for a node size PA-Tree takes (a power of two in 512..4096 B).
bool patree_node_size_ok(uint32_t bytes);

/// Factories (registry.cc). Errors: InvalidArgument (no device, a bad
/// option or node size, weak without a buffer, a tmpfs path), Busy (the
/// device is open elsewhere), Corruption (not a PA-Tree store, a torn or
/// damaged superblock or node), IOError.
/// `nvindex patree-calibrate`: fits PA-Tree's latency model (nvme::calibrate,
/// Wang et al., ICDE 2020, §IV-A) for the disk that holds directory `dir`,
/// with I/Os of `node_size` bytes, on a temporary 64 MiB file in `dir`
/// (removed afterwards), and stores it where every later open of a PA-Tree
/// on that disk reads it (/var/tmp/nvindex-patree-model-v2-<major>-<minor>,
/// replacing the fit an open made). *report gets the mean latency per queue
/// depth, the fit and the file. Errors: InvalidArgument (node size, a
/// directory that cannot be used, tmpfs), IOError.
Status patree_calibrate(const std::string& dir, uint32_t node_size, std::string* report);

Status make_patree(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out);
Status make_patree_dedicated(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out);
Status make_patree_shared(const IndexOptions& o, std::unique_ptr<Index<uint64_t>>* out);

}  // namespace nvindex
