// The memcached ASCII request parser (protocol.h). The replies and where a
// refused data block is swallowed follow memcached 1.6 (proto_text.c,
// proto_parser.c; facts in docs/kv.md "The protocol"), with the departures
// docs/kv.md lists: keys with a NUL or a CR and flags above 32 bits are
// refused, a long line gets an error before the close, and `delete`
// takes memcached 1.6.18's argument rules (memccapable's).
#include "server/protocol.h"

#include <charconv>
#include <cstring>

namespace nvindex::server {

namespace {

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format\r\n";
constexpr std::string_view kError = "ERROR\r\n";
constexpr std::string_view kTooLarge = "SERVER_ERROR object too large for cache\r\n";
constexpr std::string_view kBadChunk = "CLIENT_ERROR bad data chunk\r\n";
constexpr std::string_view kLineTooLong = "CLIENT_ERROR line too long\r\n";
constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta argument\r\n";
constexpr std::string_view kBadExptime = "CLIENT_ERROR invalid exptime argument\r\n";
constexpr std::string_view kDeleteUsage =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
constexpr std::string_view kMetaTooLong = "CLIENT_ERROR options flags are too long\r\n";

/// Splits `line` at runs of spaces into at most `max` tokens (the rest is
/// ignored, as memcached does past its token limit).
size_t tokenize(std::string_view line, std::string_view* out, size_t max) {
  size_t n = 0, i = 0;
  while (i < line.size() && n < max) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    out[n++] = line.substr(start, i - start);
  }
  return n;
}

/// A storage command's data block length: 0..INT_MAX-2 (memcached).
bool parse_bytes(std::string_view t, uint64_t* out) {
  uint64_t v = 0;
  if (!parse_u64(t, &v) || v > 2147483645ull) return false;
  *out = v;
  return true;
}

struct Name {
  std::string_view word;
  Command cmd;
};
constexpr Name kNames[] = {
    {"get", Command::kGet},           {"gets", Command::kGets},
    {"gat", Command::kGat},           {"gats", Command::kGats},
    {"set", Command::kSet},           {"add", Command::kAdd},
    {"replace", Command::kReplace},   {"append", Command::kAppend},
    {"prepend", Command::kPrepend},   {"cas", Command::kCas},
    {"delete", Command::kDelete},     {"incr", Command::kIncr},
    {"decr", Command::kDecr},         {"touch", Command::kTouch},
    {"stats", Command::kStats},       {"flush_all", Command::kFlushAll},
    {"version", Command::kVersion},   {"verbosity", Command::kVerbosity},
    {"quit", Command::kQuit},         {"mg", Command::kMetaGet},
    {"ms", Command::kMetaSet},        {"md", Command::kMetaDelete},
    {"ma", Command::kMetaArithmetic}, {"mn", Command::kMetaNoop},
    {"me", Command::kMetaDebug},      {"rget", Command::kRget},
};

bool lookup(std::string_view word, Command* cmd) {
  for (const Name& n : kNames) {
    if (n.word == word) {
      *cmd = n.cmd;
      return true;
    }
  }
  return false;
}

ParseResult error(size_t consumed, std::string_view reply, size_t swallow = 0, bool close = false) {
  ParseResult r;
  r.status = ParseStatus::kError;
  r.consumed = consumed;
  r.reply = reply;
  r.swallow = swallow;
  r.close = close;
  return r;
}

bool is_storage(Command c) {
  return c == Command::kSet || c == Command::kAdd || c == Command::kReplace ||
         c == Command::kAppend || c == Command::kPrepend || c == Command::kCas;
}

}  // namespace

bool parse_u64(std::string_view t, uint64_t* out) {
  if (t.empty() || t.size() > 20) return false;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
  }
  uint64_t v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return false;
  *out = v;
  return true;
}

bool parse_i32(std::string_view t, int64_t* out) {
  if (t.empty() || t.size() > 11) return false;
  const size_t i = t[0] == '-' ? 1 : 0;
  if (i == t.size()) return false;
  for (size_t j = i; j < t.size(); ++j) {
    if (t[j] < '0' || t[j] > '9') return false;
  }
  int32_t v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return false;
  *out = v;
  return true;
}

bool valid_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  // memcached takes any byte but the space that separates tokens (stock
  // clients rely on it: memcaslap's keys start with eight 0x10 bytes); a
  // NUL or a CR inside a key is refused, as memcached 1.6.18 cut a key at
  // a NUL and a CR can only be a damaged line end.
  for (char c : key) {
    if (c == '\0' || c == '\r') return false;
  }
  return true;
}

ParseResult parse(std::string_view in, size_t max_value_bytes, Request* req) {
  *req = Request{};
  // Past the line limit memcached closes the connection, but lets get and
  // gets lines (many keys) grow. Here a whole line past it is refused too,
  // so that the outcome does not depend on how the bytes arrived.
  const bool get_line = in.starts_with("get ") || in.starts_with("gets ");
  const size_t limit = get_line ? kMaxGetLineBytes : kMaxLineBytes;
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos || nl > limit) {
    if (in.size() > limit) return error(in.size(), kLineTooLong, 0, /*close=*/true);
    return ParseResult{};
  }
  const size_t line_bytes = nl + 1;
  std::string_view line = in.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  std::string_view tok[kMaxTokens];
  const size_t n = tokenize(line, tok, kMaxTokens);
  if (n == 0) return error(line_bytes, kBadFormat);
  if (!lookup(tok[0], &req->cmd)) return error(line_bytes, kError);
  const bool noreply = tok[n - 1] == "noreply";
  const Command c = req->cmd;

  // ---- the get family: any number of keys, taken from the raw line.
  if (c == Command::kGet || c == Command::kGets || c == Command::kGat || c == Command::kGats) {
    std::string_view rest = line.substr(tok[0].data() + tok[0].size() - line.data());
    if (c == Command::kGat || c == Command::kGats) {
      if (n < 3) return error(line_bytes, kBadFormat);
      if (!parse_i32(tok[1], &req->exptime)) return error(line_bytes, kBadExptime);
      rest = line.substr(tok[1].data() + tok[1].size() - line.data());
    }
    size_t i = 0;
    while (i < rest.size()) {
      while (i < rest.size() && rest[i] == ' ') ++i;
      if (i == rest.size()) break;
      const size_t start = i;
      while (i < rest.size() && rest[i] != ' ') ++i;
      req->keys.push_back(rest.substr(start, i - start));
    }
    if (req->keys.empty()) return error(line_bytes, kBadFormat);
    for (std::string_view k : req->keys) {
      if (!valid_key(k)) return error(line_bytes, kBadFormat);
    }
    ParseResult r;
    r.status = ParseStatus::kOk;
    r.consumed = line_bytes;
    return r;
  }

  // ---- storage commands: a data block follows the line.
  if (is_storage(c)) {
    const size_t want = c == Command::kCas ? 6 : 5;
    if (n < 5) return error(line_bytes, kBadFormat);
    uint64_t bytes = 0;
    if (!parse_bytes(tok[4], &bytes)) return error(line_bytes, kBadFormat);  // nothing swallowed
    const size_t block = bytes + 2;
    req->noreply = n > want && noreply;
    // Every later refusal swallows the data block (memcached 1.6).
    uint64_t flags = 0;
    if (n < want || !valid_key(tok[1]) || !parse_u64(tok[2], &flags) || flags > UINT32_MAX ||
        !parse_i32(tok[3], &req->exptime) ||
        (c == Command::kCas && !parse_u64(tok[5], &req->cas))) {
      return error(line_bytes, req->noreply ? std::string_view() : kBadFormat, block);
    }
    if (bytes > max_value_bytes) {
      return error(line_bytes, req->noreply ? std::string_view() : kTooLarge, block);
    }
    if (in.size() < line_bytes + block) return ParseResult{};
    const std::string_view data = in.substr(line_bytes, bytes);
    if (in.substr(line_bytes + bytes, 2) != "\r\n") {
      return error(line_bytes + block, req->noreply ? std::string_view() : kBadChunk);
    }
    req->key = tok[1];
    req->flags = static_cast<uint32_t>(flags);
    req->data = data;
    ParseResult r;
    r.status = ParseStatus::kOk;
    r.consumed = line_bytes + block;
    return r;
  }

  ParseResult ok;
  ok.status = ParseStatus::kOk;
  ok.consumed = line_bytes;
  switch (c) {
    case Command::kDelete: {
      // memcached 1.6.18 (what memccapable holds a server to): `delete k`,
      // `delete k 0`, `delete k noreply`, `delete k 0 noreply`.
      if (n < 2) return error(line_bytes, kBadFormat);
      if (n > 4) return error(line_bytes, kError);
      req->noreply = n > 2 && noreply;
      const size_t extra = n - 2 - (req->noreply ? 1 : 0);
      if (extra > 1 || (extra == 1 && tok[2] != "0")) {
        return error(line_bytes, req->noreply ? std::string_view() : kDeleteUsage);
      }
      if (!valid_key(tok[1]))
        return error(line_bytes, req->noreply ? std::string_view() : kBadFormat);
      req->key = tok[1];
      return ok;
    }
    case Command::kIncr:
    case Command::kDecr:
      if (n < 3) return error(line_bytes, kBadFormat);
      req->noreply = n > 3 && noreply;
      if (!valid_key(tok[1]))
        return error(line_bytes, req->noreply ? std::string_view() : kBadFormat);
      if (!parse_u64(tok[2], &req->delta)) {
        return error(line_bytes, req->noreply ? std::string_view() : kBadDelta);
      }
      req->key = tok[1];
      return ok;
    case Command::kTouch:
      if (n < 3) return error(line_bytes, kBadFormat);
      req->noreply = n > 3 && noreply;
      if (!valid_key(tok[1]))
        return error(line_bytes, req->noreply ? std::string_view() : kBadFormat);
      if (!parse_i32(tok[2], &req->exptime)) {
        return error(line_bytes, req->noreply ? std::string_view() : kBadExptime);
      }
      req->key = tok[1];
      return ok;
    case Command::kFlushAll:
      req->noreply = noreply;
      if (n > (req->noreply ? 2u : 1u) && !parse_i32(tok[1], &req->delay)) {
        return error(line_bytes, req->noreply ? std::string_view() : kBadExptime);
      }
      return ok;
    case Command::kVerbosity: {
      req->noreply = noreply;
      uint64_t level = 0;
      if (n < (req->noreply ? 3u : 2u) || !parse_u64(tok[1], &level)) {
        return error(line_bytes, req->noreply ? std::string_view() : kBadFormat);
      }
      req->verbosity = static_cast<uint32_t>(level > 2 ? 2 : level);
      return ok;
    }
    case Command::kStats:
      for (size_t i = 1; i < n; ++i) req->args.push_back(tok[i]);
      return ok;
    case Command::kVersion:
    case Command::kQuit:
      return ok;  // extra tokens ignored, noreply too (memcached 1.6)
    case Command::kMetaNoop:
      return ok;
    case Command::kMetaGet:
    case Command::kMetaDelete:
    case Command::kMetaArithmetic:
    case Command::kMetaDebug:
    case Command::kMetaSet: {
      if (n < 2) return error(line_bytes, kBadFormat);
      std::string_view all[kMaxMetaTokens + 1];
      const size_t m = tokenize(line, all, kMaxMetaTokens + 1);
      uint64_t bytes = 0;
      const bool set = c == Command::kMetaSet;
      if (set && (m < 3 || !parse_bytes(all[2], &bytes))) return error(line_bytes, kBadFormat);
      const size_t block = set ? bytes + 2 : 0;
      if (m > kMaxMetaTokens) return error(line_bytes, kMetaTooLong, block);
      if (!valid_key(all[1])) return error(line_bytes, kBadFormat, block);
      req->key = all[1];
      for (size_t i = set ? 3 : 2; i < m; ++i) req->args.push_back(all[i]);
      if (!set) return ok;
      if (bytes > max_value_bytes) return error(line_bytes, kTooLarge, block);
      if (in.size() < line_bytes + block) return ParseResult{};
      if (in.substr(line_bytes + bytes, 2) != "\r\n") return error(line_bytes + block, kBadChunk);
      req->data = in.substr(line_bytes, bytes);
      ok.consumed = line_bytes + block;
      return ok;
    }
    case Command::kRget: {
      // MemcacheDB: rget <start> <end> <left-open 0|1> <right-open 0|1> <max>
      if (n != 6) return error(line_bytes, kBadFormat);
      if (tok[1].size() > kMaxKeyBytes || tok[2].size() > kMaxKeyBytes ||
          (tok[3] != "0" && tok[3] != "1") || (tok[4] != "0" && tok[4] != "1") ||
          !parse_u64(tok[5], &req->max) || req->max == 0) {
        return error(line_bytes, kBadFormat);
      }
      req->keys = {tok[1], tok[2]};
      req->lo_open = tok[3] == "1";
      req->hi_open = tok[4] == "1";
      return ok;
    }
    default:
      return error(line_bytes, kError);
  }
}

}  // namespace nvindex::server
