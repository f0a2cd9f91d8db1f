// Reader for index-microbench traces (DESIGN.md §5), the format RECIPE
// (Lee et al., SOSP'19) and others generate with the real YCSB client
// (github.com/wangziqi2016/index-microbench, workload_spec + gen_workload.py):
//
//   load file:  one "INSERT <key>" line per key to load
//   run file:   "READ <key>", "UPDATE <key>", "INSERT <key>" and
//               "SCAN <key> <count>" lines, in the order YCSB issued them
//
// Fields are separated by spaces or tabs; a trailing '\r' (CRLF files) and
// blank lines are ignored. Integer-key traces (decimal uint64 keys, the
// "randint" files) are read as numbers; string-key traces ("user..." keys,
// the "string" files) with a StringKeyInterner (--key-type string), the key
// field's bytes as they are; read as numbers, a string-key trace is refused
// with a Corruption that says to pass --key-type string. A YCSB F read-modify-write appears in a
// trace as a READ followed by an UPDATE of the same key, and is replayed as
// those two operations.
//
// Thread-safety: read_trace is reentrant; it touches only its arguments.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/string_keys.h"
#include "nvindex/status.h"

namespace nvindex::bench {

/// The verbs of the index-microbench format.
enum class TraceVerb : uint8_t { kInsert, kRead, kUpdate, kScan };
/// "INSERT", "READ", "UPDATE", "SCAN".
std::string_view trace_verb_name(TraceVerb verb);

/// One trace line, 16 bytes. count is the SCAN's pair count (>= 1), else 0.
struct TraceOp {
  uint64_t key;
  uint32_t count;
  TraceVerb verb;
};
static_assert(sizeof(TraceOp) == 16);

/// Reads the trace file `path` into *out (cleared first), one TraceOp per
/// non-blank line, in file order. With load_file = true every line must be
/// "INSERT <key>" (a load phase only inserts).
/// Errors: NotFound "<path>: no such file" when the file is missing;
/// IOError for any other failure to open or read (message names the path
/// and the OS error); Corruption "<path>:<line>: expected ..." for a
/// malformed line: an unknown verb, a verb other than INSERT in a load file,
/// a missing, non-decimal or out-of-range key, a SCAN without a count in
/// [1, 2^32-1], or extra fields. *out is left empty on error.
/// With `strings` (string keys), the key field is a byte string of at most
/// kMaxKeyBytes (255) bytes (longer: Corruption naming the line), and
/// TraceOp::key is its provisional id in *strings (StringKeyInterner).
/// Cost: one pass, O(file bytes); the file is read whole into memory.
Status read_trace(const std::string& path, bool load_file, std::vector<TraceOp>* out,
                  StringKeyInterner* strings = nullptr);

/// Reads a keys file: one decimal uint64 key per line, in load order; blank
/// lines and surrounding spaces/tabs/'\r' are ignored. A key that already
/// appeared earlier in the file is skipped (the first occurrence keeps its
/// place) and counted in *duplicates (may be null).
/// Errors: NotFound (missing file, names the path), IOError (other open/read
/// failures), Corruption "<path>:<line>: expected a decimal uint64 key, got
/// '<text>'" for a malformed or out-of-range line. *out is left empty on
/// error.
/// With `strings` (string keys): each line's bytes are one key, as they are
/// (only the '\n' and a trailing '\r' are not part of it; empty lines are
/// skipped), *out gets the provisional ids in *strings; a line longer than
/// kMaxKeyBytes (255) bytes is Corruption "<path>:<line>: key of N bytes is
/// longer than 255 ...".
Status read_keys_file(const std::string& path, std::vector<uint64_t>* out, uint64_t* duplicates,
                      StringKeyInterner* strings = nullptr);

/// Reads the whole file `path` into *out. NotFound for a missing file,
/// IOError for other failures; messages name the path.
Status read_whole_file(const std::string& path, std::string* out);

}  // namespace nvindex::bench
