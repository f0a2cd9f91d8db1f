// `nvindex bench`: the benchmark harness on the command line (DESIGN.md §5).
//
// Generates the workload ONCE, feeds the same operations to every index asked
// for (so the comparison is on identical operations), and prints a text
// report (PiBench-like) or JSON (schema nvindex.bench/1, see bench/report.h).
// Exit codes: 0 success, 1 a verification failure or an index error, 2 bad
// usage (unknown option or index, bad ratio, bad size, missing file).
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/driver.h"
#include "bench/report.h"
#include "bench/string_keys.h"
#include "bench/workload.h"
#include "nvindex/index.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/index_opts.h"
#include "util/quote.h"
#include "util/temp_files.h"

namespace nvindex::tools {
namespace {

/// Indexes benchmarked when --index is not given (those registered).
constexpr std::string_view kDefaultIndexes[] = {"btree",  "fastfair",   "lbtree",   "fptree",
                                                "wbtree", "p-masstree", "p-bwtree", "absl-btree"};
bool is_test_only(std::string_view name) { return is_test_only_index(name); }

bool is_registered(std::string_view name) { return find_index_entry(name) != nullptr; }

/// "ordered, thread-safe, bulk-load, async, placement selective" (what --list-indexes
/// prints).
std::string caps_summary(const Capabilities& c) {
  std::string s;
  auto add = [&](bool on, std::string_view what) {
    if (!on) return;
    if (!s.empty()) s += ", ";
    s += what;
  };
  add(c.ordered, "ordered");
  add(c.thread_safe, "thread-safe");
  add(c.string_keys, "string keys");
  add(c.bulk_load, "bulk-load");
  add(c.async, "async");
  add(true, "placement " + std::string(placement_name(c.placement)));
  return s;
}

/// Settings as parsed by CLI11, before validation.
struct BenchArgs {
  std::string indexes;
  bool list_indexes = false;
  bench::WorkloadSpec spec;
  std::string workload;
  std::string distribution = "uniform";
  double duration = 0;
  double latency_sample = 0.01;
  std::string pool;
  std::string pool_size = "0";
  std::string device;              ///< --device DIR ("" = util::temp_device_dir())
  std::string device_bytes = "0";  ///< --device-bytes
  std::string pm_mode = "emulated";
  std::string pm_latency;
  bool media_model = false;
  uint32_t media_cache_kib = pm::kDefaultCacheKiB;
  uint32_t node_size = 0;  ///< --node-size; 0 = not given (512, or an index's own default)
  std::vector<std::string> index_opts;
  std::string format = "text";
  std::string output;
  std::string json_output;
  bool keep_pool = false;
  bool quiet = false;
  bool no_pin = false;
  bool no_prefault = false;
  bool no_perf_counters = false;
  bool energy = false;
  std::string powercap_root = "/sys/class/powercap";
  bool bulk_load = false;
  double fill = 1.0;
  std::string insert_pattern = "random";
  unsigned recovery_threads = 0;
  uint32_t batch = 1;
  uint32_t in_flight = 1;
  uint64_t key_size = bench::kDefaultStringKeySize;
};

int fail_usage(const std::string& msg) {
  std::fprintf(stderr, "nvindex bench: %s\n", msg.c_str());
  return 2;
}

/// The pool file of one --index entry: --pool PATH itself, or PATH-<label,
/// file-safe> when several indexes run ("" without --pool: a temporary file).
std::string pool_path_for(const std::string& pool, size_t entries, const std::string& label) {
  if (pool.empty()) return pool;
  return entries > 1 ? pool + "-" + bench::file_safe(label) : pool;
}

/// Resolves each entry's index options: --index-opt k=v (global) goes to each
/// selected index that takes k, an entry's own options win; every option and
/// every node size an entry names is checked against its index's registry
/// entry, and a global --node-size must suit at least one selected index
/// with nodes (the others report the refusal in the results, as any run
/// error). InvalidArgument with the message to print as a usage error.
Status resolve_index_options(const std::map<std::string, std::string>& global_opts,
                             uint32_t node_size, std::vector<IndexSpec>* specs) {
  // Not given: the common size is IndexOptions' default, and an index that
  // does not take it but declares its own default runs at that
  // (run_node_size); given: it must suit at least one selected index.
  const bool node_size_given = node_size != 0;
  if (!node_size_given) node_size = IndexOptions{}.node_size;
  for (const auto& [k, v] : global_opts) {
    bool taken = false;
    std::string offered;
    for (const IndexSpec& is : *specs) {
      const IndexEntry& e = *find_index_entry(is.name);
      for (const OptionSpec& o : e.options) taken = taken || o.name == k;
      if (!e.options.empty()) {
        offered += (offered.empty() ? "" : "; ") + is.label + ": " + option_summary(e);
      }
    }
    if (!taken) {
      return Status::InvalidArgument(
          "--index-opt " + k + ": no selected index takes it (" +
          (offered.empty() ? std::string("none of them takes options") : "options: " + offered) +
          ")");
    }
  }
  std::string refusals;
  bool taken = false, any_nodes = false;
  for (const IndexSpec& is : *specs) {
    const IndexEntry& e = *find_index_entry(is.name);
    if (is.node_size != 0 || e.node_size_ok == nullptr) continue;
    if (!node_size_given && e.default_node_size != 0) continue;
    any_nodes = true;
    const Status st = check_node_size(e, node_size);
    taken = taken || st.ok();
    if (!st.ok()) refusals += (refusals.empty() ? "" : "; ") + st.message();
  }
  if (any_nodes && !taken) return Status::InvalidArgument("--node-size: " + refusals);
  for (IndexSpec& is : *specs) {
    const IndexEntry& e = *find_index_entry(is.name);
    if (is.node_size != 0) {
      if (Status st = check_node_size(e, is.node_size); !st.ok()) {
        return Status::InvalidArgument("--index " + is.label + ": " + st.message());
      }
    }
    std::map<std::string, std::string> mine;
    for (const OptionSpec& o : e.options) {
      if (auto it = global_opts.find(std::string(o.name)); it != global_opts.end()) {
        mine[it->first] = it->second;
      }
    }
    for (const auto& [k, v] : is.extra) mine[k] = v;  // the entry's own win
    if (Status st = check_index_options(e, mine); !st.ok()) {
      return Status::InvalidArgument("--index " + is.label + ": " + st.message());
    }
    is.extra = std::move(mine);
  }
  return Status::Ok();
}

/// --list-indexes: one line per registered index (name, kind, description,
/// capabilities, node sizes, options), tab-separated, on stdout.
void print_index_list() {
  for (const IndexEntry& e : registered_indexes()) {
    std::printf("%s\t%s\t%s\t%s\t%s\t%s\n", std::string(e.name).c_str(),
                is_test_only(e.name) ? "test-only"
                : e.caps.persistent  ? "persistent"
                                     : "volatile",
                std::string(e.description).c_str(), caps_summary(e.caps).c_str(),
                e.node_sizes.empty() ? "-" : std::string(e.node_sizes).c_str(),
                e.options.empty() ? "-" : option_summary(e).c_str());
  }
}

/// --key-size into a.spec (--key-type is parsed into a.spec.key_type by
/// add_key_type_option): --key-size needs --key-type string (its range,
/// 5..255, is checked when parsed; make_workload checks it again with
/// bench::check_string_key_size). InvalidArgument with the usage message.
Status resolve_key_type(BenchArgs& a, CLI::App* cmd) {
  const bool explicit_size = cmd->get_option("--key-size")->count() > 0;
  if (explicit_size && a.spec.key_type != KeyType::kString) {
    return Status::InvalidArgument("--key-size applies to --key-type string");
  }
  a.spec.key_size = static_cast<uint32_t>(a.key_size);
  return Status::Ok();
}

/// The --index entries in order, duplicates (same label) dropped; without
/// --index, the default indexes that are registered (with --key-type
/// string: every registered index that takes string keys, test-only ones
/// excepted). InvalidArgument with the message to print as a usage error
/// (an unknown index or a malformed entry, an index without string keys
/// named with --key-type string, or nothing to run).
Status select_indexes(const BenchArgs& a, CLI::App* cmd, std::vector<IndexSpec>* specs) {
  const bool strings = a.spec.key_type == KeyType::kString;
  if (cmd->get_option("--index")->count() == 0) {
    if (strings) {
      for (std::string_view n : bench::string_key_indexes()) {
        if (!is_test_only(n)) specs->push_back(IndexSpec{std::string(n), std::string(n), {}});
      }
    } else {
      for (std::string_view n : kDefaultIndexes) {
        if (is_registered(n)) specs->push_back(IndexSpec{std::string(n), std::string(n), {}});
      }
    }
  } else {
    if (Status st = parse_index_list(a.indexes, specs); !st.ok()) {
      return Status::InvalidArgument("--index: " + st.message());
    }
    for (const IndexSpec& is : *specs) {
      if (strings && !find_index_entry(is.name)->caps.string_keys) {
        return Status::InvalidArgument(
            "--key-type string: index '" + is.name +
            "' does not take string keys; indexes that do: " + bench::string_key_index_list());
      }
    }
  }
  if (specs->empty()) {
    return Status::InvalidArgument(strings
                                       ? "no registered index takes string keys"
                                       : "no index to run; registered: " + registered_index_list());
  }
  return Status::Ok();
}

/// Applies --workload to a.spec, with the explicit --skew, --scan-size,
/// --insert-pattern and --distribution on top of it, and checks --fill.
/// InvalidArgument with the usage message (ratios given with a preset, an
/// unknown preset, pattern or distribution, a fill factor outside (0, 1] or
/// without --bulk-load).
Status apply_workload_options(BenchArgs& a, CLI::App* cmd, bool explicit_ratio) {
  bench::WorkloadSpec& spec = a.spec;
  const double explicit_skew = spec.skew;
  const uint32_t explicit_scan_size = spec.scan_size;
  if (!a.workload.empty()) {
    if (explicit_ratio) {
      return Status::InvalidArgument("--workload " + a.workload +
                                     " sets the operation ratios; do not combine it with "
                                     "-r/-i/-u/-d/-s/--rmw-ratio");
    }
    if (Status st = bench::apply_preset(a.workload, &spec); !st.ok()) return st;
    // An explicit --skew / --scan-size applies on top of the preset.
    if (cmd->get_option("--skew")->count() > 0) spec.skew = explicit_skew;
    if (cmd->get_option("--scan-size")->count() > 0) spec.scan_size = explicit_scan_size;
  }
  // An explicit --insert-pattern applies on top of a preset (dense-insert
  // sets dense, every other preset random).
  if (a.workload.empty() || cmd->get_option("--insert-pattern")->count() > 0) {
    if (Status st = bench::parse_insert_pattern(a.insert_pattern, &spec.insert_pattern); !st.ok()) {
      return Status::InvalidArgument("--insert-pattern: " + st.message());
    }
  }
  if (cmd->get_option("--fill")->count() > 0 && !a.bulk_load) {
    return Status::InvalidArgument("--fill applies to a bulk load; add --bulk-load");
  }
  // An explicit --distribution / --skew applies on top of a preset.
  if (a.workload.empty() || cmd->get_option("--distribution")->count() > 0) {
    if (Status st = bench::parse_distribution(a.distribution, &spec.distribution); !st.ok()) {
      return st;
    }
  }
  return Status::Ok();
}

/// Refuses workload options that cannot apply (--trace-run with ratios or a
/// preset, --skew on a uniform or sequential distribution, --dense-gap
/// without dense inserts) and ratios that do not sum to 1 (unless traces
/// give the operations). InvalidArgument with the usage message.
Status check_workload_options(const BenchArgs& a, CLI::App* cmd, bool explicit_ratio) {
  const bench::WorkloadSpec& spec = a.spec;
  const bool trace = !spec.trace_load.empty() || !spec.trace_run.empty();
  if (!spec.trace_run.empty() && (explicit_ratio || !a.workload.empty())) {
    return Status::InvalidArgument(
        "--trace-run gives the operations; drop --workload and the ratio options");
  }
  if (cmd->get_option("--skew")->count() > 0 &&
      (spec.distribution == bench::Distribution::kUniform ||
       spec.distribution == bench::Distribution::kSequential)) {
    return Status::InvalidArgument(
        "--skew applies to --distribution zipfian, latest or selfsimilar, not " +
        std::string(bench::distribution_name(spec.distribution)));
  }
  if (cmd->get_option("--dense-gap")->count() > 0 &&
      spec.insert_pattern != bench::InsertPattern::kDense) {
    return Status::InvalidArgument(
        "--dense-gap applies to dense inserts (--insert-pattern dense or --workload "
        "dense-insert)");
  }
  if (trace) return Status::Ok();
  const double sum = spec.read_ratio + spec.insert_ratio + spec.update_ratio + spec.remove_ratio +
                     spec.scan_ratio + spec.rmw_ratio;
  if (std::fabs(sum - 1.0) <= 1e-9) return Status::Ok();
  return Status::InvalidArgument(
      "operation ratios must sum to 1 (read " + std::to_string(spec.read_ratio) + " + insert " +
      std::to_string(spec.insert_ratio) + " + update " + std::to_string(spec.update_ratio) +
      " + remove " + std::to_string(spec.remove_ratio) + " + scan " +
      std::to_string(spec.scan_ratio) + " + rmw " + std::to_string(spec.rmw_ratio) + " = " +
      std::to_string(sum) + ")");
}

/// The workload spec from the options (apply_workload_options, then
/// check_workload_options). InvalidArgument with the usage message.
Status resolve_workload_spec(BenchArgs& a, CLI::App* cmd) {
  const char* ratio_opts[] = {"--read-ratio",   "--insert-ratio", "--update-ratio",
                              "--remove-ratio", "--scan-ratio",   "--rmw-ratio"};
  bool explicit_ratio = false;
  for (const char* o : ratio_opts) explicit_ratio |= cmd->get_option(o)->count() > 0;
  if (Status st = apply_workload_options(a, cmd, explicit_ratio); !st.ok()) return st;
  return check_workload_options(a, cmd, explicit_ratio);
}

/// Checks the pool options against the selected indexes before any work: an
/// explicit --pool-size must fit the free space where the pool file goes
/// (it is allocated whole), --pool makes no sense with --pm-mode dram, and a
/// pool file that exists is refused (never overwritten). InvalidArgument
/// with the usage message.
Status check_pool_options(const BenchArgs& a, const std::vector<IndexSpec>& specs,
                          const bench::BenchOptions& opts) {
  bool any_persistent = false;
  for (const IndexSpec& is : specs) any_persistent |= needs_pool(find_index_entry(is.name)->caps);
  if (opts.pool_size > 0 && any_persistent && opts.pm.mode != pm::Mode::kDram) {
    // The pool file is allocated whole (posix_fallocate): it must fit where it goes.
    const std::string dir = a.pool.empty() ? util::temp_pool_dir() : parent_of(a.pool);
    if (const std::optional<uint64_t> free = util::free_bytes_in(dir)) {
      const uint64_t free_bytes = *free;
      if (opts.pool_size > free_bytes) {
        return Status::InvalidArgument("--pool-size " + a.pool_size + ": at most " +
                                       with_commas(free_bytes) + " bytes, the space free in " +
                                       dir);
      }
    }
  }
  if (!a.pool.empty() && opts.pm.mode == pm::Mode::kDram) {
    return Status::InvalidArgument(
        "--pool: --pm-mode dram keeps the index in anonymous memory, no pool file");
  }
  if (a.pool.empty()) return Status::Ok();
  // create never overwrites a file: an existing one is refused before any work.
  for (const IndexSpec& is : specs) {
    const std::string path = pool_path_for(a.pool, specs.size(), is.label);
    if (needs_pool(find_index_entry(is.name)->caps) && ::access(path.c_str(), F_OK) == 0) {
      return Status::InvalidArgument("--pool: " + path +
                                     " already exists (a pool is never overwritten)");
    }
  }
  return Status::Ok();
}

/// Checks --device for the block-device indexes of the run (and whenever it
/// is given): check_device_dir. InvalidArgument with the usage message.
Status check_device_options(const BenchArgs& a, const std::vector<IndexSpec>& specs,
                            CLI::App* cmd) {
  bool any_device = false;
  for (const IndexSpec& is : specs) any_device |= needs_device(find_index_entry(is.name)->caps);
  const bool given = cmd->get_option("--device")->count() > 0;
  if (!any_device && !given) return Status::Ok();
  const std::string dir = given ? a.device : util::temp_device_dir();
  if (Status st = check_device_dir(dir); !st.ok()) {
    return Status::InvalidArgument("--device: " + st.message());
  }
  return Status::Ok();
}

/// The driver options every index shares (run length, sampling, lookup
/// batch, pool, PM mode and latency, media model, node size, load method),
/// checked
/// (check_pool_options), and each entry's index options resolved
/// (resolve_index_options: --index-opt k=v goes to each selected index that
/// takes k; a k none takes, or a value an index refuses, is a usage error,
/// so a misspelt option never runs the default). InvalidArgument with the
/// usage message.
Status make_driver_options(const BenchArgs& a, CLI::App* cmd, std::vector<IndexSpec>* specs,
                           bench::BenchOptions* opts) {
  opts->duration_seconds = a.duration;
  opts->latency_sample = a.latency_sample;
  opts->keep_pool = a.keep_pool;
  opts->device_dir = a.device;
  opts->node_size = a.node_size != 0 ? a.node_size : IndexOptions{}.node_size;
  opts->pin_threads = !a.no_pin;
  opts->prefault = !a.no_prefault;
  opts->perf_counters = !a.no_perf_counters;
  opts->energy = a.energy;
  opts->powercap_root = a.powercap_root;
  opts->bulk_load = a.bulk_load;
  opts->fill_factor = a.fill;
  opts->recovery_threads = a.recovery_threads;
  opts->lookup_batch = a.batch;
  opts->in_flight = a.in_flight;
  if (Status st = bench::parse_byte_size(a.pool_size, &opts->pool_size); !st.ok()) {
    return Status::InvalidArgument("--pool-size: " + st.message());
  }
  if (Status st = pm::parse_mode(a.pm_mode, &opts->pm.mode); !st.ok()) {
    return Status::InvalidArgument("--pm-mode: " + st.message());
  }
  if (Status st = check_pool_options(a, *specs, *opts); !st.ok()) return st;
  if (Status st = bench::parse_byte_size(a.device_bytes, &opts->device_bytes); !st.ok()) {
    return Status::InvalidArgument("--device-bytes: " + st.message());
  }
  if (Status st = check_device_options(a, *specs, cmd); !st.ok()) return st;
  if (!a.pm_latency.empty()) {
    if (Status st = pm::parse_latency(a.pm_latency, &opts->pm); !st.ok()) {
      return Status::InvalidArgument("--pm-latency-ns: " + st.message());
    }
  }
  // media=N in --pm-latency-ns needs the media model: it charges time per
  // media write the model counts.
  opts->pm.media_model = a.media_model || opts->pm.media_write_latency_ns > 0;
  opts->pm.cache_kib = a.media_cache_kib;
  std::map<std::string, std::string> global_opts;
  if (Status st = parse_index_opts(a.index_opts, &global_opts); !st.ok()) return st;
  if (Status st = resolve_index_options(global_opts, a.node_size, specs); !st.ok()) return st;
  opts->index_extra = global_opts;
  // What the driver would refuse for an index whatever the workload
  // (--in-flight with a PM index or with --batch): refused here, before any
  // work, as a usage error.
  for (const IndexSpec& is : *specs) {
    if (Status st = bench::check_run_options(*opts, *find_index_entry(is.name)); !st.ok()) {
      const char* opt = a.in_flight > 1 ? "--in-flight: " : "";
      return Status::InvalidArgument(opt + st.message());
    }
  }
  return Status::Ok();
}

/// Runs the workload on each index in order (bench::run_benchmark, with the
/// entry's label, options, node size and pool file); an index that cannot
/// run is reported on stderr and in the report's errors, verification
/// failures on stderr and in its result.
bench::BenchReport run_indexes(const BenchArgs& a, const std::vector<IndexSpec>& specs,
                               const bench::BenchOptions& opts, const bench::Workload& workload) {
  bench::BenchReport report;
  report.machine = bench::collect_machine_info();
  report.spec = workload.spec;
  report.options = opts;
  for (const IndexSpec& is : specs) report.indexes.push_back(is.label);
  report.extra_options = {{"format", a.format},
                          {"output", a.output},
                          {"json_output", a.json_output},
                          {"quiet", a.quiet}};
  std::unique_ptr<bench::ProgressSink> progress;
  if (!a.quiet) progress = bench::make_stderr_progress();
  for (const IndexSpec& is : specs) {
    const std::string& name = is.label;
    bench::BenchOptions o = opts;
    o.label = is.label;
    // --index-opt ones it takes, overridden by the entry's own (checked above).
    o.index_extra = is.extra;
    if (is.node_size != 0) o.node_size = is.node_size;
    o.pool_path = pool_path_for(a.pool, specs.size(), is.label);
    bench::IndexResult result;
    Status st = bench::run_benchmark(o, workload, is.name, &result, progress.get());
    if (!st.ok()) {
      std::fprintf(stderr, "nvindex bench: %s: %s\n", name.c_str(), st.ToString().c_str());
      report.errors.emplace_back(name, st);
      continue;
    }
    if (result.failures > 0) {
      std::fprintf(stderr, "nvindex bench: %s: %llu verification failures\n", name.c_str(),
                   static_cast<unsigned long long>(result.failures));
    }
    report.results.push_back(std::move(result));
  }
  return report;
}

/// Prints the report (--format to stdout, or to --output with the text
/// report on stdout) and writes --json-output. Returns the exit code: 1 when
/// a file cannot be written or the report has failures, else 0.
int write_reports(const BenchArgs& a, const bench::BenchReport& report) {
  const std::string text = bench::report_text(report);
  const std::string json = bench::report_json(report).dump(2) + "\n";
  const std::string& chosen = a.format == "json" ? json : text;
  if (!a.output.empty()) {
    if (!write_file(a.output, chosen)) {
      std::fprintf(stderr, "nvindex bench: cannot write --output %s\n", a.output.c_str());
      return 1;
    }
    std::fputs(text.c_str(), stdout);
  } else {
    std::fputs(chosen.c_str(), stdout);
  }
  if (!a.json_output.empty() && !write_file(a.json_output, json)) {
    std::fprintf(stderr, "nvindex bench: cannot write --json-output %s\n", a.json_output.c_str());
    return 1;
  }
  return bench::report_has_failures(report) ? 1 : 0;
}

/// Runs the command; returns the exit code: 0, 1 (a verification failure,
/// an index error, a file not written), 2 (usage: every check before the
/// workload is generated, and a workload that cannot be built from its
/// options or files).
int run_bench(BenchArgs& a, CLI::App* cmd) {
  if (a.list_indexes) {
    print_index_list();
    return 0;
  }
  std::vector<IndexSpec> specs;
  bench::BenchOptions opts;
  Status st = resolve_key_type(a, cmd);
  if (st.ok()) st = select_indexes(a, cmd, &specs);
  if (st.ok()) st = resolve_workload_spec(a, cmd);
  if (st.ok()) st = make_driver_options(a, cmd, &specs, &opts);
  if (!st.ok()) return fail_usage(st.message());

  if (!a.quiet) std::fprintf(stderr, "generating workload...\n");
  bench::Workload workload;
  if (st = bench::make_workload(a.spec, &workload); !st.ok()) {
    std::fprintf(stderr, "nvindex bench: cannot build the workload: %s\n", st.ToString().c_str());
    // A bad option, a missing file or a malformed one (Corruption): all usage.
    return st.code() == Code::kInvalidArgument || st.code() == Code::kNotFound ||
                   st.code() == Code::kCorruption
               ? 2
               : 1;
  }
  return write_reports(a, run_indexes(a, specs, opts, workload));
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  BenchArgs& a = *args;
  std::string footer =
      "Registered indexes: " + registered_index_list() +
      ".\nTest-only indexes (names ending in -test) are never in the default list.";
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run a workload (YCSB preset, PiBench-style ratios, key file or trace) against one or "
      "more indexes; report throughput, latency percentiles, PM counters, memory and "
      "verification. Every operation's result is checked.");
  cmd->footer(footer);
  // A repeated option takes its last value, so scripts/bench's defaults can be
  // overridden by arguments passed after them.
  cmd->option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);

  add_index_list(cmd, "--index", &a.indexes,
                 "Comma-separated indexes to run, in order (default: "
                 "btree,fastfair,lbtree,fptree,wbtree,p-masstree,p-bwtree,absl-btree, "
                 "those registered). Each entry is name[:k=v[;k=v]]: options for that index "
                 "only (over --index-opt; node_size=N overrides --node-size), the whole entry "
                 "its label, e.g. --index 'wbtree,wbtree:inner=dram' or "
                 "'lbtree:node_size=256,lbtree:node_size=512'. pibench:PATH.so[:k=v[;k=v]] runs a "
                 "PiBench wrapper, named by its file name: 8-byte keys, every result checked, "
                 "PM counters, memory and structure n/a; options scan=yes|no, pool_size=BYTES, "
                 "value_bits=32..64, scan_keys=host|swapped (docs/pibench.md)")
      ->default_str("btree,fastfair,lbtree,fptree,wbtree,p-masstree,p-bwtree,absl-btree");
  add_switch(cmd, "--list-indexes", &a.list_indexes,
             "Print the registered indexes (name, kind, description) and exit");
  add_memory_count(cmd, "-n,--records", &a.spec.records, 64, true, "Keys loaded before the run");
  add_memory_count(cmd, "-p,--operations", &a.spec.operations, 32, false,
                   "Run operations, all threads together");
  add_real(cmd, "--duration", &a.duration, 0, 604800, false, "0..604,800 s (a week)",
           "Stop the run after this many seconds (0 = run every operation)");
  add_count(cmd, "-t,--threads", &a.spec.threads, 1, 1024, "Worker threads");
  const auto ratio = [&](const char* name, double* into, const char* help) {
    add_real(cmd, name, into, 0, 1, false, "0..1", help);
  };
  ratio("-r,--read-ratio", &a.spec.read_ratio, "Fraction of lookups");
  ratio("-i,--insert-ratio", &a.spec.insert_ratio, "Fraction of inserts (fresh keys)");
  ratio("-u,--update-ratio", &a.spec.update_ratio, "Fraction of updates");
  ratio("-d,--remove-ratio", &a.spec.remove_ratio, "Fraction of removes");
  ratio("-s,--scan-ratio", &a.spec.scan_ratio, "Fraction of range scans");
  ratio("--rmw-ratio", &a.spec.rmw_ratio, "Fraction of read-modify-writes (YCSB F)");
  add_count(cmd, "--scan-size", &a.spec.scan_size, 1, 1 << 24, "Pairs per scan");
  add_choice(cmd, "--distribution", &a.distribution,
             {"uniform", "zipfian", "selfsimilar", "latest", "sequential"},
             "Key choice (applies on top of --workload when given)");
  add_real(cmd, "--skew", &a.spec.skew, 0, 100, true, "(0, 100]",
           "Zipfian theta, or self-similar h");
  add_switch(cmd, "--sequential-keys", &a.spec.sequential_keys,
             "Key i is i+1 (default: FNV-1a hash of i, YCSB's hashed insert order)");
  ratio("--latency-sample", &a.latency_sample,
        "Fraction of run operations whose latency is measured (0.01 = 1%)");
  add_count(cmd, "--batch", &a.batch, 1, bench::kMaxLookupBatch,
            "Run phase: lookups issued in batches of N through multi_lookup (a run of "
            "consecutive reads is cut into batches of up to N keys; any other operation "
            "ends a batch); throughput = keys per second; latency per key = batch time / N "
            "(--latency-sample then picks index calls, a batch being one). 1 = one "
            "lookup() per read");
  add_count(cmd, "--in-flight", &a.in_flight, 1, bench::kMaxInFlight,
            "Run phase: operations each thread keeps in flight. N > 1: runs of lookups, "
            "inserts, updates and removes go to the index up to 16 N at a time "
            "(Index::execute); an async index (patree) runs up to N of them at once, in "
            "per-key order, any other one by one; latency = each operation's own. Indexes "
            "that make no PM writes only (block-device, volatile); not with --batch. 1 = one "
            "call per operation");
  add_seed(cmd, "--seed", &a.spec.seed, "Seed of every random choice");
  add_choice(
      cmd, "--workload", &a.workload,
      std::vector<std::string>(std::begin(bench::kPresetNames), std::end(bench::kPresetNames)),
      "Preset: sets the ratios and distribution (an error with explicit ratios). "
      "YCSB ycsb-a..ycsb-f; the LB+-tree paper's (sec. 4.2, uniform): insert = 100% "
      "inserts of fresh random keys, dense-insert = 100% inserts ascending in each "
      "thread's own region above the largest loaded key, search = 100% reads of "
      "loaded keys, delete = 100% removes of loaded keys (operations <= records). "
      "Combine with --bulk-load --fill F");
  add_switch(cmd, "--bulk-load", &a.bulk_load,
             "Load with one bulk_load() of the sorted keys (timed as the load phase; an "
             "index without a bottom-up bulk load gets inserts, and the report says so)");
  add_real(cmd, "--fill", &a.fill, 0, 1, true, "(0, 1]",
           "Bulk-load fill factor: fraction of each node's slots filled (needs --bulk-load)");
  add_choice(cmd, "--insert-pattern", &a.insert_pattern, {"random", "dense"},
             "Insert keys: random (fresh keys anywhere) | dense (each thread ascending in its "
             "own region above the largest loaded key); applies on top of --workload");
  add_count(cmd, "--dense-gap", &a.spec.dense_gap, 0, UINT64_MAX,
            "Dense inserts: minimum key distance between threads' regions (0 = the "
            "per-thread insert count)");
  add_count(cmd, "--recovery-threads", &a.recovery_threads, 0, 1024,
            "Threads for the recovery after a persistent run (IndexOptions::threads on "
            "reopen; 0 = --threads)");
  add_key_type_option(cmd, &a.spec.key_type,
                      "8-byte keys, or byte strings up to 255 bytes (indexes with string keys: "
                      "--list-indexes; default index list: those)");
  add_count(cmd, "--key-size", &a.key_size, bench::kMinStringKeySize, kMaxKeyBytes,
            "String keys: bytes of a generated key, \"user\" + the key's decimal "
            "zero-padded (24 holds every 64-bit key; smaller sizes need keys that "
            "fit, e.g. --sequential-keys)",
            std::to_string(bench::kMinStringKeySize) + ".." + std::to_string(kMaxKeyBytes) +
                " bytes (\"user\" and at least one digit)");
  add_path(cmd, "--keys-file", &a.spec.keys_file, ValueKind::kInputFile,
           "Load keys from this file, one key a line: a decimal key, or with --key-type "
           "string the line's bytes (e.g. a word list)");
  add_path(cmd, "--trace-load", &a.spec.trace_load, ValueKind::kInputFile,
           "index-microbench load trace (INSERT <key> lines; \"user...\" keys need "
           "--key-type string)");
  add_path(cmd, "--trace-run", &a.spec.trace_run, ValueKind::kInputFile,
           "index-microbench run trace (READ/UPDATE/INSERT <key>, SCAN <key> <n>)");
  add_path(cmd, "--pool", &a.pool, ValueKind::kNewFile,
           "Pool file for persistent indexes (must not exist; its directory must; with several "
           "indexes, PATH-<index>); default a temporary file in /dev/shm, removed afterwards");
  add_path(cmd, "--device", &a.device, ValueKind::kDirectory,
           "Block-device indexes (leveldb, rocksdb, patree): a directory on a real disk "
           "(not tmpfs: no O_DIRECT) in which each gets a fresh temporary directory for "
           "its store, removed afterwards unless --keep-pool; default $NVINDEX_DEVICE_DIR, "
           "else /var/tmp. Their reports add the disk's own I/O counters "
           "(/sys/block/<disk>/stat, device-wide): IOPS, bytes, mean outstanding I/Os");
  add_byte_size(cmd, "--device-bytes", &a.device_bytes, 1 << 20, uint64_t{1} << 50, true,
                "Block-device indexes: size of a new store, bytes with K/M/G/T suffixes (0 = "
                "the index's default; leveldb and rocksdb have no size limit and ignore it)");
  add_byte_size(cmd, "--pool-size", &a.pool_size, pm::kMinPoolSize, uint64_t{1} << 50, true,
                "Pool size, bytes, with K/M/G/T suffixes (0 = automatic: 64 MiB + 256 B per "
                "key)");
  add_choice(cmd, "--pm-mode", &a.pm_mode, {"dram", "emulated", "dax"}, "PM mode");
  add_text(cmd, "--pm-latency-ns", &a.pm_latency,
           "Injected latency, e.g. flush=300,fence=100,media=500: ns per flushed line, per "
           "fence, and per 256 B XPLine media write of the media model (media=N turns "
           "the media model on; reports call that time \"modelled\")",
           [](const std::string& text) {
             pm::PersistConfig c;
             return pm::parse_latency(text, &c);
           });
  add_switch(cmd, "--media-model", &a.media_model,
             "Count 256 B XPLine media writes and write amplification");
  add_count(cmd, "--media-cache-kib", &a.media_cache_kib, 0, 1 << 22,
            "Media model: the modelled CPU write-back cache, KiB (11-way LRU; stored lines "
            "reach the media when flushed dirty or evicted; 0 = no cache model: every "
            "flushed line reaches it)");
  add_count(cmd, "--node-size", &a.node_size, 64, 65536,
            "Node size in bytes for indexes that take one (each index's sizes: "
            "--list-indexes); default 512, and an index that does not take 512 runs at "
            "its own default (dash-eh: 16384, the paper's segment)");
  add_text(cmd, "--index-opt", &a.index_opts, "Index-specific knob name=value (repeatable)");
  add_choice(cmd, "--format", &a.format, {"text", "json"}, "Report format");
  add_path(cmd, "--output", &a.output, ValueKind::kOutputFile,
           "Write the report in --format to FILE (a text report still goes to stdout)");
  add_path(cmd, "--json-output", &a.json_output, ValueKind::kOutputFile,
           "Also write the JSON report to FILE");
  add_switch(cmd, "--keep-pool", &a.keep_pool,
             "Keep the pool file after the run (for nvindex verify/info), and a "
             "block-device index's directory");
  add_switch(cmd, "--no-pin", &a.no_pin, "Do not pin worker threads to CPUs");
  add_switch(cmd, "--no-prefault", &a.no_prefault,
             "Do not fault in a new pool file's pages before the load phase (by default "
             "they are, untimed, as libpmemobj's prefault.at_create and the authors' "
             "drivers do; without it the load pays each 4 KiB page's first touch)");
  add_switch(cmd, "--no-perf-counters", &a.no_perf_counters,
             "Do not count instructions, cycles and task-clock per phase with "
             "perf_event_open");
  add_switch(cmd, "--energy", &a.energy,
             "Package and DRAM energy of each phase (load, run) from RAPL "
             "(/sys/class/powercap), joules and joules per operation, or the reason there is "
             "none on this machine");
  // For tests: the powercap tree --energy reads. A missing directory is
  // meaningful here ("this machine has no RAPL"). Listed under its own
  // heading: CLI11 gives a hidden option no name in its error messages.
  add_text(cmd, "--powercap-root", &a.powercap_root,
           "Directory of the powercap interface --energy reads (default /sys/class/powercap)")
      ->group("For tests");
  add_switch(cmd, "-q,--quiet", &a.quiet, "No progress line on stderr");
  cmd->callback([args, cmd, exit_code] { *exit_code = run_bench(*args, cmd); });
}

}  // namespace nvindex::tools
