// index-microbench trace reader and keys-file reader: see trace.h.
#include "bench/trace.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "nvindex/index.h"
#include "util/quote.h"

namespace nvindex::bench {

std::string_view trace_verb_name(TraceVerb verb) {
  switch (verb) {
    case TraceVerb::kInsert:
      return "INSERT";
    case TraceVerb::kRead:
      return "READ";
    case TraceVerb::kUpdate:
      return "UPDATE";
    case TraceVerb::kScan:
      return "SCAN";
  }
  return "?";
}

Status read_whole_file(const std::string& path, std::string* out) {
  out->clear();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(path + ": cannot open: " + std::strerror(err));
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    out->clear();
    return Status::IOError(path + ": read failed: " + std::strerror(err));
  }
  return Status::Ok();
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/// Splits `line` into at most 4 whitespace-separated fields; returns the
/// number of fields found (4 means "4 or more").
int split_fields(std::string_view line, std::string_view fields[4]) {
  int n = 0;
  size_t i = 0;
  while (i < line.size() && n < 4) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) break;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    fields[n++] = line.substr(i, j - i);
    i = j;
  }
  return n;
}

bool parse_u64(std::string_view s, uint64_t* v) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string where(const std::string& path, uint64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

/// Calls fn(line_number, line) for each line of `text` (1-based numbers).
template <class Fn>
Status for_each_line(std::string_view text, Fn fn) {
  uint64_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    if (Status s = fn(number, text.substr(pos, end - pos)); !s.ok()) return s;
    pos = end + 1;
  }
  return Status::Ok();
}

}  // namespace

Status read_trace(const std::string& path, bool load_file, std::vector<TraceOp>* out,
                  StringKeyInterner* strings) {
  out->clear();
  std::string text;
  if (Status s = read_whole_file(path, &text); !s.ok()) return s;
  Status s = for_each_line(text, [&](uint64_t number, std::string_view line) -> Status {
    std::string_view f[4];
    const int n = split_fields(line, f);
    if (n == 0) return Status::Ok();  // blank line
    TraceOp op{};
    if (f[0] == "INSERT") {
      op.verb = TraceVerb::kInsert;
    } else if (f[0] == "READ") {
      op.verb = TraceVerb::kRead;
    } else if (f[0] == "UPDATE") {
      op.verb = TraceVerb::kUpdate;
    } else if (f[0] == "SCAN") {
      op.verb = TraceVerb::kScan;
    } else {
      return Status::Corruption(where(path, number) +
                                "expected INSERT, READ, UPDATE or SCAN, got unknown verb " +
                                quote_input(f[0]));
    }
    if (load_file && op.verb != TraceVerb::kInsert) {
      return Status::Corruption(where(path, number) +
                                "expected INSERT <key> in a load file, got verb " +
                                quote_input(f[0]));
    }
    if (n < 2) {
      return Status::Corruption(where(path, number) + "expected a key after " + quote_input(f[0]));
    }
    if (strings != nullptr) {
      if (f[1].size() > kMaxKeyBytes) {
        return Status::Corruption(where(path, number) + "key of " + std::to_string(f[1].size()) +
                                  " bytes is longer than " + std::to_string(kMaxKeyBytes));
      }
      op.key = strings->intern(f[1]);
    } else if (!parse_u64(f[1], &op.key)) {
      const bool string_key = !f[1].empty() && (f[1][0] < '0' || f[1][0] > '9');
      return Status::Corruption(
          where(path, number) + "expected a decimal uint64 key, got " + quote_input(f[1]) +
          (string_key ? " (a string-key trace: pass --key-type string)" : ""));
    }
    const int want = op.verb == TraceVerb::kScan ? 3 : 2;
    if (op.verb == TraceVerb::kScan) {
      uint64_t count = 0;
      if (n < 3) {
        return Status::Corruption(where(path, number) + "expected SCAN <key> <count>, no count");
      }
      if (!parse_u64(f[2], &count) || count == 0 || count > UINT32_MAX) {
        return Status::Corruption(where(path, number) +
                                  "expected a scan count in [1, 4294967295], got " +
                                  quote_input(f[2]));
      }
      op.count = static_cast<uint32_t>(count);
    }
    if (n > want) {
      return Status::Corruption(where(path, number) + "expected end of line after " +
                                (want == 3 ? "SCAN <key> <count>" : "<verb> <key>") + ", got " +
                                quote_input(f[want]));
    }
    out->push_back(op);
    return Status::Ok();
  });
  if (!s.ok()) out->clear();
  return s;
}

namespace {

/// read_keys_file for string keys: each line's bytes (a trailing '\r'
/// dropped) are one key, interned.
Status read_string_keys(const std::string& path, std::string_view text, StringKeyInterner* strings,
                        std::vector<uint64_t>* out, uint64_t* dups) {
  return for_each_line(text, [&](uint64_t number, std::string_view line) -> Status {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return Status::Ok();
    if (line.size() > kMaxKeyBytes) {
      return Status::Corruption(where(path, number) + "key of " + std::to_string(line.size()) +
                                " bytes is longer than " + std::to_string(kMaxKeyBytes) +
                                " (string keys are at most " + std::to_string(kMaxKeyBytes) +
                                " bytes)");
    }
    bool fresh = false;
    const uint64_t id = strings->intern(line, &fresh);
    if (fresh) {
      out->push_back(id);
    } else {
      ++*dups;
    }
    return Status::Ok();
  });
}

}  // namespace

Status read_keys_file(const std::string& path, std::vector<uint64_t>* out, uint64_t* duplicates,
                      StringKeyInterner* strings) {
  out->clear();
  if (duplicates != nullptr) *duplicates = 0;
  std::string text;
  if (Status s = read_whole_file(path, &text); !s.ok()) return s;
  uint64_t dups = 0;
  if (strings != nullptr) {
    Status s = read_string_keys(path, text, strings, out, &dups);
    if (!s.ok()) {
      out->clear();
      return s;
    }
    if (duplicates != nullptr) *duplicates = dups;
    return Status::Ok();
  }
  std::unordered_set<uint64_t> seen;
  Status s = for_each_line(text, [&](uint64_t number, std::string_view line) -> Status {
    std::string_view f[4];
    const int n = split_fields(line, f);
    if (n == 0) return Status::Ok();
    uint64_t key = 0;
    if (n > 1 || !parse_u64(f[0], &key)) {
      size_t b = 0, e = line.size();
      while (b < e && is_space(line[b])) ++b;
      while (e > b && is_space(line[e - 1])) --e;
      return Status::Corruption(where(path, number) + "expected a decimal uint64 key, got " +
                                quote_input(line.substr(b, e - b)));
    }
    if (seen.insert(key).second) {
      out->push_back(key);
    } else {
      ++dups;
    }
    return Status::Ok();
  });
  if (!s.ok()) {
    out->clear();
    return s;
  }
  if (duplicates != nullptr) *duplicates = dups;
  return Status::Ok();
}

}  // namespace nvindex::bench
