// PiBench wrappers as indexes of nvindex's harness: `nvindex bench --index
// pibench:PATH.so[:k=v[;k=v]]`. A wrapper is a shared library exporting
// PiBench's create_tree (pibench/tree_api.h; PiBench, Lersch et al., VLDB
// 2020); register_pibench_plugin() loads it as PiBench does (dlopen with
// RTLD_NOW, dlsym "create_tree"), probes it, and registers an IndexEntry
// (nvindex/index.h) named after the library's file name, so the harness
// runs it like any index: the same pre-generated operations, every result
// checked, latency, CPU time and context switches.
//
// What the harness cannot know of a wrapper, it does not pretend to:
// IndexInfo::caps.plugin is set, and the reports print "n/a: plugin" for
// the PM counters, the footprint and the structure (a wrapper's flushes do
// not go through nvindex's pm layer). verify() walks the whole index by
// scans from key 0 and checks that the keys come in ascending order, so the
// final key count is still checked; with scan=no it returns NotSupported.
// find_last_less_than() is not in the ABI: it returns nullopt, and TPC-C
// (which needs it) refuses plugins. The crash lab refuses them too: it needs
// every PM store of the index.
//
// Keys are 8-byte integers (tree_options_t::key_size 8, host byte order,
// PiBench's default); values 8 bytes.
//
// The probe: before a wrapper is registered, a child process (fork) makes a
// tree with num_threads 1 and a temporary pool path, and checks find of an
// absent key (false), insert + find (the value back), update + find, remove
// + find, and with scan=yes a scan of three keys (in order, with their
// values), then deletes the tree. A wrapper that crashes, hangs (10 s: then
// killed), returns nullptr or answers wrongly is refused with the cause, so
// a wrapper built against another tree_api (a fork whose vtable differs) is,
// as far as one thread and three keys can show, a usage error and not a
// crash of the harness. What the probe cannot see (a wrapper that fails only
// under load, or whose library constructors crash at dlopen, which runs them
// in this process) it cannot stop. The library's dynamic symbols are
// also read (ELF .dynsym): one that defines a method named bulk_load hints
// at the optiql or tls-cleanup forks, whose vtable puts bulk_load before
// find, and is named in the message when the probe fails.
#pragma once

#include <string>

#include "nvindex/status.h"

namespace nvindex::pibench {

/// The --index prefix of a PiBench wrapper: "pibench:".
inline constexpr std::string_view kPluginPrefix = "pibench:";

/// Most wrappers one process can register (each takes a factory slot).
inline constexpr size_t kMaxPlugins = 8;

/// True for an --index entry that names a PiBench wrapper.
inline bool is_plugin_spec(std::string_view text) { return text.starts_with(kPluginPrefix); }

/// Loads, probes and registers the wrapper `text` names,
/// "pibench:PATH.so[:k=v[;k=v]]" with options
///   scan=yes|no     the wrapper's scan works (yes: the index is ordered;
///                   no: scans are skipped and verify() is NotSupported)
///   pool_size=BYTES tree_options_t::pool_size (default 1G); pool_path is a
///                   path that names nothing yet in util::temp_pool_dir()
///                   (/dev/shm, else $TMPDIR, else /tmp), removed with what
///                   the wrapper made there when the index is destroyed or
///                   on SIGINT/SIGTERM/SIGHUP
///   value_bits=N    the wrapper holds only N (32..64) bits of a value
///                   (BzTree's keeps 61: PMwCAS owns the top 3): values go
///                   in shifted right by 64 - N bits and come back shifted
///                   left, so the bits the harness checks (a value's top 32,
///                   its key's hash) all round-trip; default 64
///   scan_keys=host|swapped  swapped: the wrapper's scan returns each key
///                   byte-swapped (a wrapper that stores keys big-endian so
///                   that bytes sort as numbers, e.g. Masstree's), and the
///                   harness swaps them back; default host
/// and sets *name to the registered name: the library's file name
/// ("libfoo.so"), with the options after a ':' when any were given. The
/// options begin at the first ':' after the path's last '/'. The same text
/// again returns the same name without loading anything; the same library
/// with other options is another index over the same loaded library (one
/// dlopen handle, so one copy of the wrapper's globals), which a wrapper
/// with global set-up may not expect: PiBench never makes two trees.
/// Errors (InvalidArgument, each naming the cause; IOError when fork or
/// waitpid fails): no PATH, a bad option,
/// a library dlopen refuses (dlerror's text), no create_tree symbol, a
/// probe failure (nullptr from create_tree, a wrong answer, a crash or hang
/// in the child), a name registered already by another path, more than
/// kMaxPlugins wrappers.
Status register_pibench_plugin(std::string_view text, std::string* name);

}  // namespace nvindex::pibench
