// Process and compose (process.h): memcached's replies for each command
// (doc/protocol.txt, memcached 1.6 proto_text.c / proto_parser.c), over
// kv::Store.
#include "server/process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "nvindex/pm/counters.h"

namespace nvindex::server {

namespace {

void append_number(std::string* out, uint64_t v) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof(b), v);
  out->append(b, static_cast<size_t>(r.ptr - b));
}

void append_signed(std::string* out, int64_t v) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof(b), v);
  out->append(b, static_cast<size_t>(r.ptr - b));
}

/// "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n" (doc/protocol.txt).
void append_value(std::string* out, std::string_view key, std::string_view value,
                  const kv::ItemInfo& info, bool with_cas) {
  out->append("VALUE ");
  out->append(key);
  out->push_back(' ');
  append_number(out, info.flags);
  out->push_back(' ');
  append_number(out, value.size());
  if (with_cas) {
    out->push_back(' ');
    append_number(out, info.cas);
  }
  out->append("\r\n");
  out->append(value);
  out->append("\r\n");
}

/// The reply to a failed write that memcached's replies have no word for.
void append_write_error(ServerState& st, const Status& s, std::string* out) {
  if (s.code() == Code::kOutOfSpace) {
    st.store_no_memory.fetch_add(1, std::memory_order_relaxed);
    out->append("SERVER_ERROR out of memory storing object\r\n");
  } else if (s.code() == Code::kInvalidArgument &&
             s.message().find("too large") != std::string::npos) {
    st.store_too_large.fetch_add(1, std::memory_order_relaxed);
    out->append("SERVER_ERROR object too large for cache\r\n");
  } else {
    std::string m = s.ToString();
    for (char& c : m) {
      if (c == '\r' || c == '\n') c = ' ';
    }
    out->append("SERVER_ERROR ").append(m).append("\r\n");
  }
}

/// The remaining time to live of an item, s, or -1 when it never expires.
int64_t ttl_of(const kv::ItemInfo& info, int64_t now) {
  if (info.expiry == 0) return -1;
  return info.expiry > now ? info.expiry - now : 0;
}

void stat(std::string* out, std::string_view name, std::string_view value) {
  out->append("STAT ").append(name).append(" ").append(value).append("\r\n");
}
void stat(std::string* out, std::string_view name, uint64_t value) {
  out->append("STAT ").append(name).append(" ");
  append_number(out, value);
  out->append("\r\n");
}

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

void general_stats(ServerState& st, int64_t now, std::string* out) {
  const kv::Stats s = st.store->stats();
  const kv::StoreInfo info = st.store->info();
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  char buf[64];
  stat(out, "pid", static_cast<uint64_t>(::getpid()));
  stat(out, "uptime", static_cast<uint64_t>(now > st.started ? now - st.started : 0));
  stat(out, "time", static_cast<uint64_t>(now));
  stat(out, "version", kProtocolVersion);
  stat(out, "pointer_size", static_cast<uint64_t>(8 * sizeof(void*)));
  std::snprintf(buf, sizeof(buf), "%.6f", seconds_of(ru.ru_utime));
  stat(out, "rusage_user", buf);
  std::snprintf(buf, sizeof(buf), "%.6f", seconds_of(ru.ru_stime));
  stat(out, "rusage_system", buf);
  stat(out, "max_connections", st.max_connections);
  stat(out, "curr_connections", st.curr_connections.load());
  stat(out, "total_connections", st.total_connections.load());
  stat(out, "rejected_connections", st.rejected_connections.load());
  stat(out, "cmd_get", st.cmd_get.load());
  stat(out, "cmd_set", s.cmd_set);
  stat(out, "cmd_flush", st.cmd_flush.load());
  stat(out, "cmd_touch", s.cmd_touch);
  stat(out, "cmd_meta", st.cmd_meta.load());
  stat(out, "get_hits", s.get_hits);
  stat(out, "get_misses", s.get_misses);
  stat(out, "get_expired", s.get_expired);
  stat(out, "get_flushed", s.get_flushed);
  stat(out, "delete_misses", s.delete_misses);
  stat(out, "delete_hits", s.delete_hits);
  stat(out, "incr_misses", s.incr_misses);
  stat(out, "incr_hits", s.incr_hits);
  stat(out, "decr_misses", s.decr_misses);
  stat(out, "decr_hits", s.decr_hits);
  stat(out, "cas_misses", s.cas_misses);
  stat(out, "cas_hits", s.cas_hits);
  stat(out, "cas_badval", s.cas_badval);
  stat(out, "touch_hits", s.touch_hits);
  stat(out, "touch_misses", s.touch_misses);
  stat(out, "store_too_large", st.store_too_large.load());
  stat(out, "store_no_memory", st.store_no_memory.load());
  stat(out, "bytes_read", st.bytes_read.load());
  stat(out, "bytes_written", st.bytes_written.load());
  stat(out, "limit_maxbytes", st.pool_bytes);
  stat(out, "threads", st.threads);
  stat(out, "bytes", s.bytes);
  stat(out, "curr_items", s.curr_items);
  stat(out, "total_items", s.total_items);
  stat(out, "evictions", uint64_t{0});  // a store: nothing is evicted
  stat(out, "reclaimed", s.reclaimed);
  // nvindex's own.
  stat(out, "index", info.index);
  stat(out, "last_shutdown_clean", info.created ? "new" : info.clean_shutdown ? "yes" : "no");
  std::snprintf(buf, sizeof(buf), "%.6f", info.index_recovery_seconds + info.item_recovery_seconds);
  stat(out, "recovery_seconds", buf);
  stat(out, "items_at_open", info.items_at_open);
  stat(out, "item_arena_bytes", s.item_arena_bytes);
  stat(out, "index_arena_bytes", s.index_arena_bytes);
  stat(out, "unassigned_bytes", s.unassigned_bytes);
  // The pool's page backing (kv::Store::pool_pages, read from smaps now):
  // the page size and how many resident bytes are on pages over 4 KiB.
  if (const pm::PageBacking pages = st.store->pool_pages(); pages.known) {
    stat(out, "pool_page_bytes", pages.page_bytes);
    stat(out, "pool_resident_bytes", pages.resident_bytes);
    stat(out, "pool_huge_bytes", pages.huge_bytes);
  }
  // The PM layer's counters since the process started (include/nvindex/pm/
  // counters.h, summed over threads): flush instructions, distinct 64 B
  // lines flushed (PM line writes), fences and 8-byte NVM atomic writes, so a
  // client can take a phase's cost per operation from two stats replies.
  const pm::CounterSnapshot pmc = pm::snapshot();
  stat(out, "pm_flushes", pmc.flushes);
  stat(out, "pm_lines_flushed", pmc.lines_flushed);
  stat(out, "pm_fences", pmc.fences);
  stat(out, "pm_naws", pmc.naws);
  out->append("END\r\n");
}

// ------------------------------------------------------------ meta commands

/// A meta command's flag tokens, checked: each is one letter of `allowed`
/// (then its argument), none twice. Returns the error line, or empty.
std::string_view check_meta_flags(const Request& req, std::string_view allowed) {
  bool seen[128] = {};
  for (std::string_view t : req.args) {
    const unsigned char f = static_cast<unsigned char>(t[0]);
    if (f >= 128 || allowed.find(static_cast<char>(f)) == std::string_view::npos) {
      return "CLIENT_ERROR invalid flag\r\n";
    }
    if (seen[f]) return "CLIENT_ERROR duplicate flag\r\n";
    seen[f] = true;
  }
  return {};
}

/// The argument of flag `f`, if given.
bool meta_arg(const Request& req, char f, std::string_view* arg) {
  for (std::string_view t : req.args) {
    if (t[0] == f) {
      *arg = t.substr(1);
      return true;
    }
  }
  return false;
}
bool has_flag(const Request& req, char f) {
  std::string_view a;
  return meta_arg(req, f, &a);
}

/// The O and k return flags, in request order (what EN, NF, NS echo).
void echo_opaque_key(const Request& req, std::string* out) {
  for (std::string_view t : req.args) {
    if (t[0] == 'O') out->append(" ").append(t);
    if (t[0] == 'k') out->append(" k").append(req.key);
  }
}

constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format\r\n";

void meta_get(const Request& req, ServerState& st, int64_t now, std::string* out) {
  if (std::string_view e = check_meta_flags(req, "cfkOqstTv"); !e.empty()) {
    out->append(e);
    return;
  }
  st.cmd_get.fetch_add(1, std::memory_order_relaxed);
  std::string_view targ;
  std::string value;
  kv::ItemInfo info;
  Status s;
  if (meta_arg(req, 'T', &targ)) {
    int64_t ttl = 0;
    if (!parse_i32(targ, &ttl)) {
      out->append(kBadToken);
      return;
    }
    s = st.store->get_and_touch(req.key, kv::expiry_from_memcached(ttl, now), &value, &info);
  } else {
    s = st.store->get(req.key, &value, &info);
  }
  if (!s.ok()) {
    if (has_flag(req, 'q')) return;
    out->append("EN");
    echo_opaque_key(req, out);
    out->append("\r\n");
    return;
  }
  const bool v = has_flag(req, 'v');
  if (v) {
    out->append("VA ");
    append_number(out, value.size());
  } else {
    out->append("HD");
  }
  for (std::string_view t : req.args) {
    switch (t[0]) {
      case 'c':
        out->append(" c");
        append_number(out, info.cas);
        break;
      case 'f':
        out->append(" f");
        append_number(out, info.flags);
        break;
      case 'k':
        out->append(" k").append(req.key);
        break;
      case 'O':
        out->append(" ").append(t);
        break;
      case 's':
        out->append(" s");
        append_number(out, value.size());
        break;
      case 't':
        out->append(" t");
        append_signed(out, ttl_of(info, now));
        break;
      default:
        break;
    }
  }
  out->append("\r\n");
  if (v) out->append(value).append("\r\n");
}

void meta_set(const Request& req, ServerState& st, int64_t now, std::string* out) {
  if (std::string_view e = check_meta_flags(req, "cCFkMOqT"); !e.empty()) {
    out->append(e);
    return;
  }
  uint64_t flags = 0, cas = 0;
  int64_t ttl = 0;
  std::string_view a;
  if ((meta_arg(req, 'F', &a) && (!parse_u64(a, &flags) || flags > UINT32_MAX)) ||
      (meta_arg(req, 'T', &a) && !parse_i32(a, &ttl)) ||
      (meta_arg(req, 'C', &a) && !parse_u64(a, &cas))) {
    out->append(kBadToken);
    return;
  }
  char mode = 'S';
  if (meta_arg(req, 'M', &a)) {
    mode = a.empty() ? '?' : a[0];
    if (mode != 'E' && mode != 'A' && mode != 'P' && mode != 'R' && mode != 'S') {
      out->append("CLIENT_ERROR invalid mode for ms M token\r\n");
      return;
    }
  }
  const bool with_cas = has_flag(req, 'C');
  if (with_cas && mode != 'S' && mode != 'R') {
    // A compare on add, append or prepend: not offered (docs/kv.md).
    out->append("CLIENT_ERROR invalid flag\r\n");
    return;
  }
  const int64_t expiry = kv::expiry_from_memcached(ttl, now);
  const uint32_t f = static_cast<uint32_t>(flags);
  uint64_t new_cas = 0;
  Status s;
  if (with_cas) {
    s = st.store->cas(req.key, req.data, f, expiry, cas, &new_cas);
  } else {
    switch (mode) {
      case 'E':
        s = st.store->add(req.key, req.data, f, expiry, &new_cas);
        break;
      case 'A':
        s = st.store->append(req.key, req.data, &new_cas);
        break;
      case 'P':
        s = st.store->prepend(req.key, req.data, &new_cas);
        break;
      case 'R':
        s = st.store->replace(req.key, req.data, f, expiry, &new_cas);
        break;
      default:
        s = st.store->set(req.key, req.data, f, expiry, &new_cas);
    }
  }
  std::string_view code;
  if (s.ok()) {
    if (has_flag(req, 'q')) return;
    code = "HD";
  } else if (s.code() == Code::kAlreadyExists) {
    code = with_cas ? "EX" : "NS";
  } else if (s.code() == Code::kNotFound) {
    code = with_cas ? "NF" : "NS";
  } else {
    append_write_error(st, s, out);
    return;
  }
  out->append(code);
  for (std::string_view t : req.args) {
    if (t[0] == 'O') out->append(" ").append(t);
    if (t[0] == 'k') out->append(" k").append(req.key);
    if (t[0] == 'c') {
      out->append(" c");
      append_number(out, s.ok() ? new_cas : 0);
    }
  }
  out->append("\r\n");
}

void meta_delete(const Request& req, ServerState& st, std::string* out) {
  if (std::string_view e = check_meta_flags(req, "kOq"); !e.empty()) {
    out->append(e);
    return;
  }
  const Status s = st.store->remove(req.key);
  if (s.ok() && has_flag(req, 'q')) return;
  out->append(s.ok() ? "HD" : "NF");
  echo_opaque_key(req, out);
  out->append("\r\n");
}

void meta_arithmetic(const Request& req, ServerState& st, int64_t now, std::string* out) {
  constexpr std::string_view kInvalid = "CLIENT_ERROR invalid or duplicate flag\r\n";
  if (!check_meta_flags(req, "DJkMNOqtv").empty()) {
    out->append(kInvalid);
    return;
  }
  uint64_t delta = 1, initial = 0;
  int64_t ttl = 0;
  std::string_view a;
  if (meta_arg(req, 'D', &a) && !parse_u64(a, &delta)) {
    out->append("CLIENT_ERROR invalid numeric delta value\r\n");
    return;
  }
  if (meta_arg(req, 'J', &a) && !parse_u64(a, &initial)) {
    out->append("CLIENT_ERROR invalid numeric initial value\r\n");
    return;
  }
  const bool vivify = meta_arg(req, 'N', &a);
  if (vivify && !parse_i32(a, &ttl)) {
    out->append(kInvalid);
    return;
  }
  bool up = true;
  if (meta_arg(req, 'M', &a)) {
    const char m = a.empty() ? '?' : a[0];
    if (m == 'I' || m == '+') {
      up = true;
    } else if (m == 'D' || m == '-') {
      up = false;
    } else {
      out->append("CLIENT_ERROR invalid mode for ma M token\r\n");
      return;
    }
  }
  uint64_t result = 0;
  Status s = up ? st.store->incr(req.key, delta, &result) : st.store->decr(req.key, delta, &result);
  if (s.code() == Code::kNotFound && vivify) {
    // memcached: a miss with N creates the item at J, the delta not applied.
    s = st.store->add(req.key, std::to_string(initial), 0, kv::expiry_from_memcached(ttl, now));
    result = initial;
  }
  if (s.code() == Code::kNotFound) {
    out->append("NF");
    echo_opaque_key(req, out);
    out->append("\r\n");
    return;
  }
  if (s.code() == Code::kInvalidArgument) {
    out->append("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    return;
  }
  if (!s.ok()) {
    append_write_error(st, s, out);
    return;
  }
  if (has_flag(req, 'q')) return;
  const std::string number = std::to_string(result);
  const bool v = has_flag(req, 'v');
  if (v) {
    out->append("VA ");
    append_number(out, number.size());
  } else {
    out->append("HD");
  }
  for (std::string_view t : req.args) {
    if (t[0] == 'O') out->append(" ").append(t);
    if (t[0] == 'k') out->append(" k").append(req.key);
    if (t[0] == 't') {
      kv::ItemInfo info;
      const int64_t left = st.store->get(req.key, nullptr, &info).ok() ? ttl_of(info, now) : -1;
      out->append(" t");
      append_signed(out, left);
    }
  }
  out->append("\r\n");
  if (v) out->append(number).append("\r\n");
}

void meta_debug(const Request& req, ServerState& st, int64_t now, std::string* out) {
  std::string value;
  kv::ItemInfo info;
  if (!st.store->get(req.key, &value, &info).ok()) {
    out->append("EN\r\n");
    return;
  }
  out->append("ME ").append(req.key).append(" exp=");
  append_signed(out, ttl_of(info, now));
  out->append(" la=0 cas=");
  append_number(out, info.cas);
  out->append(" fetch=no cls=0 size=");
  append_number(out, 32 + req.key.size() + value.size());
  out->append("\r\n");
}

}  // namespace

After process(const Request& req, ServerState& st, int64_t now, std::string* out) {
  kv::Store& store = *st.store;
  std::string reply;  // the reply, dropped under noreply
  std::string* o = req.noreply ? &reply : out;
  switch (req.cmd) {
    case Command::kGet:
    case Command::kGets:
    case Command::kGat:
    case Command::kGats: {
      const bool with_cas = req.cmd == Command::kGets || req.cmd == Command::kGats;
      const bool touch = req.cmd == Command::kGat || req.cmd == Command::kGats;
      const int64_t expiry = touch ? kv::expiry_from_memcached(req.exptime, now) : 0;
      st.cmd_get.fetch_add(req.keys.size(), std::memory_order_relaxed);
      std::string value;
      kv::ItemInfo info;
      for (std::string_view k : req.keys) {
        const Status s =
            touch ? store.get_and_touch(k, expiry, &value, &info) : store.get(k, &value, &info);
        if (s.ok()) append_value(o, k, value, info, with_cas);
      }
      o->append("END\r\n");
      break;
    }
    case Command::kSet:
    case Command::kAdd:
    case Command::kReplace:
    case Command::kAppend:
    case Command::kPrepend:
    case Command::kCas: {
      const int64_t expiry = kv::expiry_from_memcached(req.exptime, now);
      Status s;
      switch (req.cmd) {
        case Command::kSet:
          s = store.set(req.key, req.data, req.flags, expiry);
          break;
        case Command::kAdd:
          s = store.add(req.key, req.data, req.flags, expiry);
          break;
        case Command::kReplace:
          s = store.replace(req.key, req.data, req.flags, expiry);
          break;
        case Command::kAppend:
          s = store.append(req.key, req.data);
          break;
        case Command::kPrepend:
          s = store.prepend(req.key, req.data);
          break;
        default:
          s = store.cas(req.key, req.data, req.flags, expiry, req.cas);
      }
      if (s.ok()) {
        o->append("STORED\r\n");
      } else if (s.code() == Code::kAlreadyExists) {
        o->append(req.cmd == Command::kCas ? "EXISTS\r\n" : "NOT_STORED\r\n");
      } else if (s.code() == Code::kNotFound) {
        o->append(req.cmd == Command::kCas ? "NOT_FOUND\r\n" : "NOT_STORED\r\n");
      } else {
        append_write_error(st, s, o);
      }
      break;
    }
    case Command::kDelete: {
      const Status s = store.remove(req.key);
      o->append(s.ok() ? "DELETED\r\n" : "NOT_FOUND\r\n");
      break;
    }
    case Command::kIncr:
    case Command::kDecr: {
      uint64_t result = 0;
      const Status s = req.cmd == Command::kIncr ? store.incr(req.key, req.delta, &result)
                                                 : store.decr(req.key, req.delta, &result);
      if (s.ok()) {
        append_number(o, result);
        o->append("\r\n");
      } else if (s.code() == Code::kNotFound) {
        o->append("NOT_FOUND\r\n");
      } else if (s.code() == Code::kInvalidArgument) {
        o->append("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
      } else {
        append_write_error(st, s, o);
      }
      break;
    }
    case Command::kTouch: {
      const Status s = store.touch(req.key, kv::expiry_from_memcached(req.exptime, now));
      o->append(s.ok() ? "TOUCHED\r\n" : "NOT_FOUND\r\n");
      break;
    }
    case Command::kFlushAll: {
      st.cmd_flush.fetch_add(1, std::memory_order_relaxed);
      // The delay reads as an exptime does: relative up to 30 days, then an
      // absolute Unix time; 0 or below: now.
      int64_t delay = 0;
      if (req.delay > 0) delay = kv::expiry_from_memcached(req.delay, now) - now;
      const Status s = store.flush_all(delay > 0 ? delay : 0);
      if (s.ok()) {
        o->append("OK\r\n");
      } else {
        append_write_error(st, s, o);
      }
      break;
    }
    case Command::kVersion:
      out->append("VERSION ").append(kProtocolVersion).append("\r\n");
      break;
    case Command::kVerbosity:
      st.verbosity.store(req.verbosity, std::memory_order_relaxed);
      o->append("OK\r\n");
      break;
    case Command::kQuit:
      return After::kClose;
    case Command::kStats:
      if (req.args.empty()) {
        general_stats(st, now, out);
      } else if (req.args.size() == 1 && req.args[0] == "settings") {
        stat(out, "maxconns", st.max_connections);
        stat(out, "num_threads", st.threads);
        stat(out, "item_size_max", st.max_value_bytes);
        stat(out, "evictions", "off");
        stat(out, "index", store.index_name());
        out->append("END\r\n");
      } else {
        out->append("ERROR\r\n");
      }
      break;
    case Command::kMetaNoop:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      out->append("MN\r\n");
      break;
    case Command::kMetaGet:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      meta_get(req, st, now, out);
      break;
    case Command::kMetaSet:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      meta_set(req, st, now, out);
      break;
    case Command::kMetaDelete:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      meta_delete(req, st, out);
      break;
    case Command::kMetaArithmetic:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      meta_arithmetic(req, st, now, out);
      break;
    case Command::kMetaDebug:
      st.cmd_meta.fetch_add(1, std::memory_order_relaxed);
      meta_debug(req, st, now, out);
      break;
    case Command::kRget: {
      if (!store.info().ordered) {
        out->append("SERVER_ERROR range reads need an ordered index\r\n");
        break;
      }
      const kv::Bound lo{req.keys[0], req.lo_open, false};
      const kv::Bound hi{req.keys[1], req.hi_open, false};
      const Status s = store.range(
          lo, hi, req.max, [out](std::string_view k, std::string_view v, const kv::ItemInfo& info) {
            append_value(out, k, v, info, false);
            return true;
          });
      if (s.ok()) {
        out->append("END\r\n");
      } else {
        append_write_error(st, s, out);
      }
      break;
    }
  }
  return After::kContinue;
}

After Session::feed(std::string_view bytes, int64_t now, std::string* out) {
  state_.bytes_read.fetch_add(bytes.size(), std::memory_order_relaxed);
  if (swallow_ > 0) {
    const size_t drop = std::min(swallow_, bytes.size());
    swallow_ -= drop;
    bytes.remove_prefix(drop);
  }
  in_.append(bytes);
  After after = After::kContinue;
  Request req;
  while (start_ < in_.size() && after == After::kContinue) {
    const std::string_view rest(in_.data() + start_, in_.size() - start_);
    const ParseResult r = parse(rest, state_.max_value_bytes, &req);
    if (r.status == ParseStatus::kNeedMore) break;
    if (r.status == ParseStatus::kError) {
      out->append(r.reply);
      start_ += r.consumed;
      // A refused data block: drop what is here of it, the rest as it comes.
      const size_t here = std::min(r.swallow, in_.size() - start_);
      start_ += here;
      swallow_ = r.swallow - here;
      if (r.close) after = After::kClose;
      continue;
    }
    after = process(req, state_, now, out);
    start_ += r.consumed;
  }
  // Keep only the unparsed tail (the views of `req` are dead by now).
  if (start_ == in_.size()) {
    in_.clear();
    start_ = 0;
  } else if (start_ > 4096 && start_ > in_.size() / 2) {
    in_.erase(0, start_);
    start_ = 0;
  }
  return after;
}

}  // namespace nvindex::server
