// The one parser of command-line values (cli.h).
#include "tools/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "bench/driver.h"
#include "pibench/import.h"
#include "tools/index_opts.h"
#include "util/file_kind.h"
#include "util/quote.h"
#include "util/temp_files.h"

namespace nvindex::tools {
namespace {

/// The facts of every option declared here. Options are made once, at
/// start-up, on the main thread (main.cc), and never destroyed before exit.
std::map<const CLI::Option*, OptionFacts>& facts_table() {
  static std::map<const CLI::Option*, OptionFacts> t;
  return t;
}

/// Records the facts of `opt` and returns it.
CLI::Option* record(CLI::Option* opt, ValueKind kind, long double lo = 0, long double hi = 0,
                    bool lo_open = false, bool zero_ok = false,
                    std::vector<std::string> choices = {}) {
  OptionFacts& f = facts_table()[opt];
  f.kind = kind;
  f.lo = lo;
  f.hi = hi;
  f.lo_open = lo_open;
  f.zero_ok = zero_ok;
  f.choices = std::move(choices);
  return opt;
}

/// The checks of kCount, kSeed and kReal: `s` is a number in [lo, hi] ((lo,
/// hi] when lo_open) with nothing after it; with `integer`, decimal digits
/// only, without a sign or a leading zero. "" when it is, else the message.
std::string number_error(const std::string& s, long double lo, long double hi, bool lo_open,
                         bool integer, const std::string& range) {
  const char* b = s.c_str();
  char* end = nullptr;
  errno = 0;
  const long double v = std::strtold(b, &end);
  bool number = !s.empty() && end != b && *end == '\0' && std::isfinite(v) && errno == 0;
  if (integer) {
    number = number && s.find_first_not_of("0123456789") == std::string::npos &&
             (s.size() == 1 || s[0] != '0');
  }
  const size_t first = s.find_first_not_of(" \t");
  const bool signed_below = lo >= 0 && first != std::string::npos && s[first] == '-';
  if (!number || signed_below || v > hi || v < lo || (lo_open && v == lo)) {
    return "must be " + range + ", got " + quote_input(s);
  }
  return std::string();
}

}  // namespace

std::string parent_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

namespace {

/// Ok when the directory that would hold `path` exists and is a directory.
Status check_parent(const std::string& path) {
  const std::string dir = parent_of(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::InvalidArgument(path + ": its directory " + dir + " does not exist");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + ": " + dir + " is " + file_kind(st.st_mode) +
                                   ", not a directory");
  }
  return Status::Ok();
}

std::string status_message(const Status& s) { return s.ok() ? std::string() : s.message(); }

}  // namespace

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kFlag:
      return "flag";
    case ValueKind::kCount:
      return "count";
    case ValueKind::kReal:
      return "real";
    case ValueKind::kSeed:
      return "seed";
    case ValueKind::kByteSize:
      return "byte-size";
    case ValueKind::kChoice:
      return "choice";
    case ValueKind::kIndexList:
      return "index-list";
    case ValueKind::kIndexName:
      return "index-name";
    case ValueKind::kText:
      return "text";
    case ValueKind::kInputFile:
      return "input-file";
    case ValueKind::kNewFile:
      return "new-file";
    case ValueKind::kOutputFile:
      return "output-file";
    case ValueKind::kDirectory:
      return "directory";
    case ValueKind::kNewDirectory:
      return "new-directory";
  }
  return "?";
}

const OptionFacts* facts_of(const CLI::Option* opt) {
  auto it = facts_table().find(opt);
  return it == facts_table().end() ? nullptr : &it->second;
}

std::string with_commas(uint64_t v) {
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : (uint64_t{1} << 30);
}

template <class T>
CLI::Option* add_count(CLI::App* cmd, const std::string& name, T* into, uint64_t lo, uint64_t hi,
                       const std::string& help, std::string range) {
  if (range.empty()) range = with_commas(lo) + ".." + with_commas(hi);
  const long double l = static_cast<long double>(lo), h = static_cast<long double>(hi);
  CLI::Option* opt =
      cmd->add_option(name, *into, help)
          ->check(CLI::Validator(
              [l, h, range](std::string& s) { return number_error(s, l, h, false, true, range); },
              range));
  return record(opt, ValueKind::kCount, l, h);
}

template <class T>
CLI::Option* add_memory_count(CLI::App* cmd, const std::string& name, T* into, uint64_t bytes_each,
                              bool positive, const std::string& help) {
  const uint64_t most = physical_memory_bytes() / bytes_each;
  return add_count(cmd, name, into, positive ? 1 : 0, most, help,
                   std::string(positive ? "1" : "0") + ".." + with_commas(most) + " (" +
                       std::to_string(bytes_each) + " B of memory each on this machine)");
}

CLI::Option* add_real(CLI::App* cmd, const std::string& name, double* into, long double lo,
                      long double hi, bool lo_open, const std::string& range,
                      const std::string& help) {
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [lo, hi, lo_open, range](std::string& s) {
                               return number_error(s, lo, hi, lo_open, false, range);
                             },
                             range));
  return record(opt, ValueKind::kReal, lo, hi, lo_open);
}

CLI::Option* add_seed(CLI::App* cmd, const std::string& name, uint64_t* into,
                      const std::string& help) {
  const std::string range = "a whole number 0.." + with_commas(UINT64_MAX);
  const long double hi = static_cast<long double>(UINT64_MAX);
  CLI::Option* opt =
      cmd->add_option(name, *into, help)
          ->check(CLI::Validator(
              [hi, range](std::string& s) { return number_error(s, 0, hi, false, true, range); },
              "seed"));
  return record(opt, ValueKind::kSeed, 0, hi);
}

CLI::Option* add_byte_size(CLI::App* cmd, const std::string& name, std::string* into, uint64_t lo,
                           uint64_t hi, bool zero_ok, const std::string& help) {
  auto human = [](uint64_t b) {
    const char* units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (u < 4 && b != 0 && b % 1024 == 0) {
      b /= 1024;
      ++u;
    }
    return with_commas(b) + units[u];
  };
  const std::string range = std::string(zero_ok ? "0 or " : "") + human(lo) + ".." + human(hi) +
                            " bytes (K/M/G/T suffixes)";
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [lo, hi, zero_ok, range](std::string& s) -> std::string {
                               uint64_t v = 0;
                               if (!bench::parse_byte_size(s, &v).ok() ||
                                   !((zero_ok && v == 0) || (v >= lo && v <= hi))) {
                                 return "must be " + range + ", got " + quote_input(s);
                               }
                               return std::string();
                             },
                             "SIZE"));
  return record(opt, ValueKind::kByteSize, static_cast<long double>(lo),
                static_cast<long double>(hi), false, zero_ok);
}

CLI::Option* add_choice(CLI::App* cmd, const std::string& name, std::string* into,
                        std::vector<std::string> choices, const std::string& help) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [choices, list](std::string& s) -> std::string {
                               for (const std::string& c : choices) {
                                 if (s == c) return std::string();
                               }
                               return "must be one of " + list + ", got " + quote_input(s);
                             },
                             "{" + list + "}"));
  return record(opt, ValueKind::kChoice, 0, 0, false, false, std::move(choices));
}

template <class T>
CLI::Option* add_text(CLI::App* cmd, const std::string& name, T* into, const std::string& help,
                      std::function<Status(const std::string&)> check) {
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [check](std::string& s) -> std::string {
                               if (s.empty()) return "must not be empty";
                               return check ? status_message(check(s)) : std::string();
                             },
                             ""));
  return record(opt, ValueKind::kText);
}

CLI::Option* add_index_list(CLI::App* cmd, const std::string& name, std::string* into,
                            const std::string& help) {
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [](std::string& s) {
                               std::vector<IndexSpec> specs;
                               return status_message(parse_index_list(s, &specs));
                             },
                             "LIST"));
  return record(opt, ValueKind::kIndexList);
}

CLI::Option* add_index_name(CLI::App* cmd, const std::string& name, std::string* into,
                            const std::string& help) {
  CLI::Option* opt = cmd->add_option(name, *into, help)
                         ->check(CLI::Validator(
                             [](std::string& s) -> std::string {
                               if (pibench::is_plugin_spec(s)) {
                                 return "takes nvindex's own indexes, not a PiBench wrapper (" +
                                        quote_input(s) +
                                        "): a wrapper's PM writes, structure and pool are its "
                                        "own, so only nvindex bench runs it";
                               }
                               if (s.find_first_of(",:") != std::string::npos) {
                                 return "takes one index name, got " + quote_input(s) +
                                        " (index options go to --index-opt)";
                               }
                               IndexSpec is;  // a bare name: only the registry check
                               return status_message(parse_index_spec(s, &is));
                             },
                             "INDEX"));
  return record(opt, ValueKind::kIndexName);
}

Status check_path(ValueKind kind, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("'': empty path");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  switch (kind) {
    case ValueKind::kInputFile:
      if (!exists) {
        if (Status s = check_parent(path); !s.ok()) return s;
        return Status::InvalidArgument(path + " does not exist");
      }
      if (!S_ISREG(st.st_mode)) {
        return Status::InvalidArgument(path + " is " + file_kind(st.st_mode) +
                                       ", not a regular file");
      }
      return Status::Ok();
    case ValueKind::kNewFile:
      if (exists) {
        return Status::InvalidArgument(path + " already exists (" + file_kind(st.st_mode) +
                                       "; never overwritten)");
      }
      return check_parent(path);
    case ValueKind::kOutputFile:
      if (exists && !S_ISREG(st.st_mode)) {
        return Status::InvalidArgument(path + " is " + file_kind(st.st_mode) +
                                       ", not a regular file to write");
      }
      return exists ? Status::Ok() : check_parent(path);
    case ValueKind::kDirectory:
      if (!exists) {
        if (Status s = check_parent(path); !s.ok()) return s;
        return Status::InvalidArgument(path + " does not exist");
      }
      if (!S_ISDIR(st.st_mode)) {
        return Status::InvalidArgument(path + " is " + file_kind(st.st_mode) + ", not a directory");
      }
      return Status::Ok();
    case ValueKind::kNewDirectory:
      if (exists && !S_ISDIR(st.st_mode)) {
        return Status::InvalidArgument(path + " is " + file_kind(st.st_mode) + ", not a directory");
      }
      return exists ? Status::Ok() : check_parent(path);
    default:
      return Status::InvalidArgument(path + ": not a path option");
  }
}

Status check_device_dir(const std::string& dir) {
  if (Status s = check_path(ValueKind::kDirectory, dir); !s.ok()) return s;
  if (util::on_tmpfs(dir)) {
    return Status::InvalidArgument(dir +
                                   " is on tmpfs: memory, not a disk, and no O_DIRECT; give a "
                                   "directory on a real disk (e.g. /var/tmp)");
  }
  std::string probe = dir + "/.nvindex-probe-XXXXXX";
  if (::mkdtemp(probe.data()) == nullptr) {
    return Status::InvalidArgument("cannot make a directory in " + dir + ": " +
                                   std::strerror(errno) +
                                   " (a writable directory on a real "
                                   "disk is needed)");
  }
  ::rmdir(probe.c_str());
  return Status::Ok();
}

CLI::Option* add_path(CLI::App* cmd, const std::string& name, std::string* into, ValueKind kind,
                      const std::string& help) {
  CLI::Option* opt =
      cmd->add_option(name, *into, help)
          ->check(CLI::Validator(
              [kind](std::string& s) { return status_message(check_path(kind, s)); },
              kind == ValueKind::kDirectory || kind == ValueKind::kNewDirectory ? "DIR" : "FILE"));
  return record(opt, kind);
}

CLI::Option* add_switch(CLI::App* cmd, const std::string& name, bool* into,
                        const std::string& help) {
  CLI::Option* opt = cmd->add_flag(name, *into, help)->disable_flag_override();
  return record(opt, ValueKind::kFlag);
}

CLI::Option* add_key_type_option(CLI::App* cmd, KeyType* t, const std::string& what) {
  CLI::Option* opt = cmd->add_option_function<std::string>(
                            "--key-type",
                            [t](const std::string& text) {
                              if (!parse_key_type(text, t).ok())
                                *t = KeyType::kInteger;  // refused by the check
                            },
                            "integer|string: " + what)
                         ->check(CLI::Validator(
                             [](std::string& text) {
                               KeyType k;
                               return status_message(parse_key_type(text, &k));
                             },
                             "integer|string"))
                         ->default_str("integer");
  return record(opt, ValueKind::kChoice, 0, 0, false, false, {"integer", "string"});
}

void print_option_table(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    for (const CLI::Option* o : sub->get_options()) {
      if (o->get_name() == "--help" || o->get_name() == "-h") continue;
      std::string name = o->get_name(false, true);
      // Its long name: "--records" of "-n,--records" (the last, if several).
      for (const std::string& l : o->get_lnames()) name = "--" + l;
      const OptionFacts* f = facts_of(o);
      std::string choices;
      if (f != nullptr) {
        for (const std::string& c : f->choices) choices += (choices.empty() ? "" : "|") + c;
      }
      std::printf("%s\t%s\t%s\t%.21Lg\t%.21Lg\t%d\t%d\t%s\n", sub->get_name().c_str(), name.c_str(),
                  f ? kind_name(f->kind) : "unchecked", f ? f->lo : 0.0L, f ? f->hi : 0.0L,
                  f && f->lo_open ? 1 : 0, f && f->zero_ok ? 1 : 0,
                  choices.empty() ? "-" : choices.c_str());
    }
  }
}

template CLI::Option* add_count<uint32_t>(CLI::App*, const std::string&, uint32_t*, uint64_t,
                                          uint64_t, const std::string&, std::string);
template CLI::Option* add_count<uint64_t>(CLI::App*, const std::string&, uint64_t*, uint64_t,
                                          uint64_t, const std::string&, std::string);
template CLI::Option* add_memory_count<uint64_t>(CLI::App*, const std::string&, uint64_t*, uint64_t,
                                                 bool, const std::string&);
template CLI::Option* add_text<std::string>(CLI::App*, const std::string&, std::string*,
                                            const std::string&,
                                            std::function<Status(const std::string&)>);
template CLI::Option* add_text<std::vector<std::string>>(CLI::App*, const std::string&,
                                                         std::vector<std::string>*,
                                                         const std::string&,
                                                         std::function<Status(const std::string&)>);

std::string kv_store_indexes(bool persistent) {
  std::string names;
  for (const IndexEntry& e : registered_indexes()) {
    if (!e.caps.ordered || !e.caps.string_keys || e.caps.persistent != persistent ||
        is_test_only_index(e.name)) {
      continue;
    }
    if (!names.empty()) names += ", ";
    names += e.name;
  }
  return names;
}

}  // namespace nvindex::tools
