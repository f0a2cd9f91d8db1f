// Text and JSON benchmark reports. See report.h.
#include "bench/report.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <optional>
#include <thread>

#include "nvindex/pm/persist.h"

namespace nvindex::bench {
namespace {

/// The key size the reports show: 8 for integer keys, --key-size for string
/// keys (the bytes of a generated key; a keys file's or trace's own keys
/// keep their lengths).
uint32_t report_key_size(const WorkloadSpec& w) {
  return w.key_type == KeyType::kString ? w.key_size : 8;
}

using nlohmann::json;

constexpr OpType kAllTypes[] = {OpType::kRead,   OpType::kInsert, OpType::kUpdate,
                                OpType::kRemove, OpType::kScan,   OpType::kReadModifyWrite};

double per_op(uint64_t count, uint64_t ops) {
  return ops ? static_cast<double>(count) / static_cast<double>(ops) : 0.0;
}

json smo_time_json(const pm::CounterSnapshot& c) {
  const SmoTimeSummary m = smo_time_summary(c);
  json buckets = json::array();
  for (int b = 0; b < pm::kSmoTimeBuckets; ++b) {
    if (c.smo_time[b] != 0) buckets.push_back({pm::smo_time_bucket_floor(b), c.smo_time[b]});
  }
  return json{{"timed", m.timed},   {"mean_ns", m.mean_ns}, {"p50_ns", m.p50_ns},
              {"p90_ns", m.p90_ns}, {"p99_ns", m.p99_ns},   {"p99_9_ns", m.p99_9_ns},
              {"max_ns", m.max_ns}, {"total_ns", c.smo_ns}, {"buckets", buckets}};
}

/// What the reports say where a PiBench wrapper's figure cannot be known
/// (Capabilities::plugin): its PM writes, footprint and structure are its own.
constexpr std::string_view kPluginNa = "n/a: plugin";

/// The JSON of a figure a plugin does not have: {"available": false,
/// "reason": "n/a: plugin"}.
json plugin_na_json() { return json{{"available", false}, {"reason", kPluginNa}}; }

json pm_json(const pm::CounterSnapshot& c, uint64_t ops) {
  return json{{"flushes", c.flushes},
              {"lines_flushed", c.lines_flushed},
              {"fences", c.fences},
              {"naws", c.naws},
              {"media_writes", c.media_writes},
              {"lines_written_back", c.lines_written_back},
              {"smos", c.smos},
              {"smo_time", smo_time_json(c)},
              {"nt_bytes", c.nt_bytes},
              {"log_bytes", c.log_bytes},
              {"allocs", c.allocs},
              {"frees", c.frees},
              {"media_write_amplification", media_write_amplification(c)},
              {"per_op",
               {{"flushes", per_op(c.flushes, ops)},
                {"lines_flushed", per_op(c.lines_flushed, ops)},
                {"fences", per_op(c.fences, ops)},
                {"naws", per_op(c.naws, ops)},
                {"media_writes", per_op(c.media_writes, ops)},
                {"lines_written_back", per_op(c.lines_written_back, ops)},
                {"log_bytes", per_op(c.log_bytes, ops)}}}};
}

json split_json(const TypeCounts& c) {
  return json{{"operations", c.completed},
              {"flushes", c.flushes},
              {"lines_flushed", c.lines_flushed},
              {"fences", c.fences},
              {"per_op",
               {{"flushes", per_op(c.flushes, c.completed)},
                {"lines_flushed", per_op(c.lines_flushed, c.completed)},
                {"fences", per_op(c.fences, c.completed)}}}};
}

std::string reason_of(const EventCount& e) {
  return e.reason.empty() ? std::string("not measured") : e.reason;
}

json event_json(const EventCount& e, uint64_t ops) {
  if (!e.available) {
    return json{
        {"available", false}, {"count", nullptr}, {"per_op", nullptr}, {"reason", reason_of(e)}};
  }
  return json{{"available", true},
              {"count", e.value},
              {"per_op", ops ? json(per_op(e.value, ops)) : json()},
              {"reason", nullptr}};
}

/// A phase's "process" (see report.h).
json process_json(const ProcessUsage& p) {
  return {{"user_seconds", p.user_seconds},
          {"system_seconds", p.system_seconds},
          {"cores_used", p.cores_used},
          {"voluntary_switches", p.voluntary_switches},
          {"involuntary_switches", p.involuntary_switches}};
}

/// A phase's "disk" (see report.h): null for an index not on a device.
json disk_json(const IndexResult& r, const PhaseResult& p) {
  if (r.device_path.empty()) return json(nullptr);
  if (!p.disk) {
    return {{"available", false}, {"reason", r.disk_why.empty() ? "no reading" : r.disk_why}};
  }
  const DiskIo& d = *p.disk;
  return {{"available", true},
          {"disk", r.disk},
          {"reads", d.reads},
          {"writes", d.writes},
          {"read_bytes", d.read_bytes},
          {"write_bytes", d.write_bytes},
          {"iops", d.iops},
          {"mean_outstanding", d.mean_outstanding}};
}

std::string bytes_str(uint64_t b);

/// The line of a phase's index counters ("" when the index has none).
std::string index_counters_text(std::string_view phase, const PhaseResult& p) {
  if (p.index_counters.empty()) return "";
  std::string s = fmt::format("	{} index counters:", phase);
  for (const auto& [name, v] : p.index_counters) s += fmt::format(" {} {},", name, v);
  s.back() = '\n';
  return s;
}

/// A phase's "index_counters" (see report.h): name -> count, {} when none.
json index_counters_json(const PhaseResult& p) {
  json j = json::object();
  for (const auto& [name, v] : p.index_counters) j[name] = v;
  return j;
}

/// The text lines of a phase's process usage, (block-device index) disk
/// I/O and index counters.
std::string os_text(std::string_view phase, const IndexResult& r, const PhaseResult& p) {
  std::string s = fmt::format(
      "	{} CPU {:.3f} s user + {:.3f} s system = {:.2f} cores used; context switches "
      "{} voluntary, {} involuntary\n",
      phase, p.process.user_seconds, p.process.system_seconds, p.process.cores_used,
      p.process.voluntary_switches, p.process.involuntary_switches);
  if (r.device_path.empty()) return s + index_counters_text(phase, p);
  if (!p.disk) {
    return s +
           fmt::format("	{} disk: not available ({})\n", phase,
                       r.disk_why.empty() ? "no reading" : r.disk_why) +
           index_counters_text(phase, p);
  }
  const DiskIo& d = *p.disk;
  s += fmt::format(
      "	{} disk {}: {} reads ({}), {} writes ({}), {:.0f} IOPS, {:.2f} mean "
      "outstanding I/Os\n",
      phase, r.disk, d.reads, bytes_str(d.read_bytes), d.writes, bytes_str(d.write_bytes), d.iops,
      d.mean_outstanding);
  return s + index_counters_text(phase, p);
}

/// A phase's "energy" (see report.h): null without --energy; {"available":
/// false, "reason"} when the meter had no figure; else the joules, whole and
/// per operation ("dram_j" and "dram_j_per_op" null without a DRAM zone).
json energy_json(const IndexResult& r, const PhaseResult& p) {
  if (!r.energy_measured) return json(nullptr);
  if (!p.energy) {
    return json{{"available", false},
                {"reason", r.energy_why.empty() ? "no reading" : r.energy_why}};
  }
  const double n = p.operations ? static_cast<double>(p.operations) : 0.0;
  const json dram = r.energy_dram ? json(p.energy->dram) : json(nullptr);
  const json dram_per_op = r.energy_dram ? json(n > 0 ? p.energy->dram / n : 0.0) : json(nullptr);
  return json{{"available", true},
              {"package_j", p.energy->package},
              {"dram_j", dram},
              {"package_j_per_op", n > 0 ? p.energy->package / n : 0.0},
              {"dram_j_per_op", dram_per_op}};
}

/// The text line of a phase's energy, e.g. "\trun  12.300 J package, 1.200 J
/// DRAM; 1.230 uJ/op package, 0.120 uJ/op DRAM\n".
std::string energy_text(std::string_view phase, const IndexResult& r, const PhaseResult& p) {
  if (!p.energy) return fmt::format("\t{} no reading\n", phase);
  const double n = p.operations ? static_cast<double>(p.operations) : 1.0;
  std::string s = fmt::format("\t{} {:.3f} J package", phase, p.energy->package);
  s += r.energy_dram ? fmt::format(", {:.3f} J DRAM", p.energy->dram) : ", no DRAM zone";
  s += fmt::format("; {:.3f} uJ/op package", 1e6 * p.energy->package / n);
  if (r.energy_dram) s += fmt::format(", {:.3f} uJ/op DRAM", 1e6 * p.energy->dram / n);
  return s + "\n";
}

json cpu_json(const CpuCounters& c, uint64_t ops) {
  const std::optional<double> ipc = instructions_per_cycle(c);
  return json{{"instructions", event_json(c.instructions, ops)},
              {"cycles", event_json(c.cycles, ops)},
              {"task_clock_ns", event_json(c.task_clock, ops)},
              {"ipc", ipc ? json(*ipc) : json()}};
}

json info_json(const IndexInfo& i) {
  return json{
      {"name", i.name},
      {"description", i.description},
      {"ordered", i.caps.ordered},
      {"persistent", i.caps.persistent},
      {"thread_safe", i.caps.thread_safe},
      {"string_keys", i.caps.string_keys},
      {"plugin", i.caps.plugin},
      {"placement", i.caps.plugin ? json(kPluginNa) : json(placement_name(i.caps.placement))},
      {"node_size", i.node_size},
      {"dram_bytes", i.dram_bytes},
      {"pm_bytes", i.pm_bytes}};
}

std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.2f} K", v / 1e3);
  return fmt::format("{:.2f} ", v);
}

std::string bytes_str(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.2f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

void pm_text(std::string* s, std::string_view phase, const pm::CounterSnapshot& c, uint64_t ops,
             bool media) {
  *s += fmt::format(
      "\t{} PM: flushes {} ({:.2f}/op), lines flushed {} ({:.2f}/op), fences {} ({:.2f}/op), "
      "NAWs {} ({:.2f}/op)",
      phase, c.flushes, per_op(c.flushes, ops), c.lines_flushed, per_op(c.lines_flushed, ops),
      c.fences, per_op(c.fences, ops), c.naws, per_op(c.naws, ops));
  if (media) {
    *s += fmt::format(
        ", lines written back {} ({:.2f}/op), media writes {} ({:.2f}/op, write amplification "
        "{:.2f})",
        c.lines_written_back, per_op(c.lines_written_back, ops), c.media_writes,
        per_op(c.media_writes, ops), media_write_amplification(c));
  }
  *s += "\n";
}

}  // namespace

MachineInfo collect_machine_info() {
  MachineInfo m;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.hostname = host;
  m.cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        m.cpu_model = b == std::string::npos ? "" : line.substr(b);
      }
      break;
    }
  }
  m.cores = std::thread::hardware_concurrency();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) m.memory_bytes = static_cast<uint64_t>(pages) * page;
  m.flush_instruction = std::string(pm::flush_instruction_name(pm::flush_instruction()));
  struct utsname u;
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  m.date = date;
  return m;
}

json options_json(const BenchReport& r) {
  const WorkloadSpec& w = r.spec;
  const BenchOptions& o = r.options;
  json j{{"indexes", r.indexes},
         {"workload", w.name},
         {"records", w.records},
         {"operations", w.operations},
         {"threads", w.threads},
         {"read_ratio", w.read_ratio},
         {"insert_ratio", w.insert_ratio},
         {"update_ratio", w.update_ratio},
         {"remove_ratio", w.remove_ratio},
         {"scan_ratio", w.scan_ratio},
         {"rmw_ratio", w.rmw_ratio},
         {"scan_size", w.scan_size},
         {"scan_uniform", w.scan_uniform},
         {"distribution", distribution_name(w.distribution)},
         {"skew", w.skew},
         {"sequential_keys", w.sequential_keys},
         {"key_type", key_type_name(w.key_type)},
         {"key_size", report_key_size(w)},
         {"seed", w.seed},
         {"keys_file", w.keys_file},
         {"trace_load", w.trace_load},
         {"trace_run", w.trace_run},
         {"duration_seconds", o.duration_seconds},
         {"latency_sample", o.latency_sample},
         {"pool", o.pool_path},
         {"pool_size", o.pool_size},
         {"keep_pool", o.keep_pool},
         {"device_dir", o.device_dir},
         {"device_bytes", o.device_bytes},
         {"pm_mode", pm::mode_name(o.pm.mode)},
         {"flush_latency_ns", o.pm.flush_latency_ns},
         {"fence_latency_ns", o.pm.fence_latency_ns},
         {"media_model", o.pm.media_model},
         {"media_write_latency_ns", o.pm.media_write_latency_ns},
         {"media_time_modelled", o.pm.media_write_latency_ns > 0},
         {"media_cache_kib", o.pm.media_model ? o.pm.cache_kib : 0},
         {"node_size", o.node_size},
         {"pin_threads", o.pin_threads},
         {"prefault", o.prefault},
         {"index_options", o.index_extra},
         {"bulk_load", o.bulk_load},
         {"fill_factor", o.fill_factor},
         {"recovery_threads", o.recovery_threads},
         {"batch", o.lookup_batch},
         {"in_flight", o.in_flight},
         {"insert_pattern", insert_pattern_name(w.insert_pattern)},
         {"dense_gap", w.dense_gap},
         {"perf_counters", o.perf_counters}};
  // --energy: the shape of nvindex.tpcc/1's options.energy.
  if (!o.energy) {
    j["energy"] = nullptr;
  } else if (r.results.empty()) {
    j["energy"] = {{"available", false}, {"reason", "no index ran"}};
  } else if (const IndexResult& x = r.results.front(); x.energy_why.empty()) {
    j["energy"] = {{"available", true}, {"dram", x.energy_dram}};
  } else {
    j["energy"] = {{"available", false}, {"reason", x.energy_why}};
  }
  if (r.extra_options.is_object()) {
    for (auto it = r.extra_options.begin(); it != r.extra_options.end(); ++it) j[it.key()] = *it;
  }
  return j;
}

json result_json(const IndexResult& r) {
  json by_type = json::object();
  for (OpType t : kAllTypes) {
    const TypeCounts& c = r.by_type[static_cast<int>(t)];
    by_type[std::string(op_name(t))] = {
        {"completed", c.completed},
        {"succeeded", c.succeeded},
        {"throughput", r.run.seconds > 0 ? c.completed / r.run.seconds : 0.0},
        {"pm", r.info.caps.plugin ? plugin_na_json()
                                  : json{{"flushes", c.flushes},
                                         {"lines_flushed", c.lines_flushed},
                                         {"fences", c.fences},
                                         {"per_op",
                                          {{"flushes", per_op(c.flushes, c.completed)},
                                           {"lines_flushed", per_op(c.lines_flushed, c.completed)},
                                           {"fences", per_op(c.fences, c.completed)}}},
                                         {"smos", c.smos},
                                         {"with_smo", split_json(c.with_smo())},
                                         {"without_smo", split_json(c.without_smo())}}}};
  }
  const LatencySummary& l = r.latency;
  json j{
      {"index", r.index},
      {"index_name", r.index_name},
      {"index_options", r.index_options},
      {"info", info_json(r.info)},
      {"load",
       {{"method", load_method_name(r.load_method)},
        {"fill_factor", r.load_method == LoadMethod::kBulkLoad ? json(r.fill_factor) : json()},
        {"description", load_description(r)},
        {"operations", r.load.operations},
        {"seconds", r.load.seconds},
        {"throughput", r.load.throughput},
        {"pm", r.info.caps.plugin ? plugin_na_json() : pm_json(r.load.pm, r.load.operations)},
        {"cpu", cpu_json(r.load.cpu, r.load.operations)},
        {"energy", energy_json(r, r.load)},
        {"process", process_json(r.load.process)},
        {"disk", disk_json(r, r.load)},
        {"index_counters", index_counters_json(r.load)}}},
      {"run",
       {{"operations", r.run.operations},
        {"seconds", r.run.seconds},
        {"throughput", r.run.throughput},
        {"skipped", r.skipped},
        {"by_type", by_type},
        {"latency_ns",
         {{"samples", l.samples},
          {"min", l.min},
          {"p50", l.p50},
          {"p90", l.p90},
          {"p99", l.p99},
          {"p99_9", l.p99_9},
          {"p99_99", l.p99_99},
          {"p99_999", l.p99_999},
          {"max", l.max}}},
        {"pm", r.info.caps.plugin ? plugin_na_json() : pm_json(r.run.pm, r.run.operations)},
        {"cpu", cpu_json(r.run.cpu, r.run.operations)},
        {"energy", energy_json(r, r.run)},
        {"process", process_json(r.run.process)},
        {"disk", disk_json(r, r.run)},
        {"index_counters", index_counters_json(r.run)},
        {"timeline", r.timeline},
        {"timeline_last_seconds", r.timeline_last_fraction}}},
      {"verification",
       {{"checked", r.checked},
        {"failures", r.failures},
        {"examples", r.failure_examples},
        {"structure",
         {{"ok", r.structure.ok()},
          {"message", r.structure.ok() ? "" : r.structure.ToString()},
          {"keys", r.verify_report.keys},
          {"leaves", r.verify_report.leaves},
          {"inner_nodes", r.verify_report.inner_nodes},
          {"height", r.verify_report.height}}}}},
      {"memory", r.info.caps.plugin
                     ? plugin_na_json()
                     : json{{"dram_bytes", r.info.dram_bytes}, {"pm_bytes", r.info.pm_bytes}}},
      {"media_model", r.media_model},
      {"media_write_amplification", r.media_model ? media_write_amplification(r.run.pm) : 0.0},
      {"sync_seconds", r.sync_seconds},
      {"sync", r.sync.ok() ? "ok" : r.sync.ToString()},
  };
  if (!r.device_path.empty()) j["device"] = r.device_path;
  if (r.pool_pages.known) {
    j["pool_pages"] = pool_pages_json(r.pool_pages);
  }
  if (r.prefault_seconds >= 0) j["prefault_seconds"] = r.prefault_seconds;
  if (r.info.caps.plugin) {
    // Its keys were counted by scans (verify()); its nodes are its own.
    json& st = j["verification"]["structure"];
    for (const char* k : {"leaves", "inner_nodes", "height"}) st[k] = kPluginNa;
  }
  if (r.persistent) {
    j["recovery_seconds"] = r.recovery_seconds;
    j["recovery_threads"] = r.recovery_threads;
    j["rebuild_seconds"] = r.rebuild_seconds;
    j["recovery"] = r.recovery.ok() ? "ok" : r.recovery.ToString();
    j["pool"] = r.pool_path;
  }
  return j;
}

// "4 KiB pages; 0 B of 138.00 MiB resident on transparent huge pages
// (0%)" or "2 MiB pages; 138.00 MiB resident": how a pool's mapping was backed
// (pm::PageBacking).
std::string pool_pages_text(const pm::PageBacking& b) {
  const uint64_t p = b.page_bytes;
  std::string s = p >= (1ull << 30) && p % (1ull << 30) == 0   ? fmt::format("{} GiB", p >> 30)
                  : p >= (1ull << 20) && p % (1ull << 20) == 0 ? fmt::format("{} MiB", p >> 20)
                  : p >= 1024 && p % 1024 == 0                 ? fmt::format("{} KiB", p >> 10)
                                                               : fmt::format("{} B", p);
  s += " pages";
  if (b.page_bytes > 4096) return s + fmt::format("; {} resident", bytes_str(b.resident_bytes));
  return s + fmt::format("; {} of {} resident on transparent huge pages ({:.0f}%)",
                         bytes_str(b.huge_bytes), bytes_str(b.resident_bytes),
                         b.resident_bytes ? 100.0 * b.huge_bytes / b.resident_bytes : 0.0);
}

json pool_pages_json(const pm::PageBacking& b) {
  return {{"page_bytes", b.page_bytes},
          {"mapped_bytes", b.mapped_bytes},
          {"resident_bytes", b.resident_bytes},
          {"huge_bytes", b.huge_bytes}};
}

json machine_json(const MachineInfo& m) {
  return {{"hostname", m.hostname},
          {"cpu_model", m.cpu_model},
          {"cores", m.cores},
          {"memory_bytes", m.memory_bytes},
          {"flush_instruction", m.flush_instruction},
          {"kernel", m.kernel},
          {"date", m.date},
          {"version", m.version}};
}

json report_json(const BenchReport& r) {
  const MachineInfo& m = r.machine;
  json results = json::array();
  for (const IndexResult& x : r.results) results.push_back(result_json(x));
  json errors = json::array();
  for (const auto& [name, st] : r.errors)
    errors.push_back({{"index", name}, {"error", st.ToString()}});
  const WorkloadSpec& w = r.spec;
  std::string spec = fmt::format(
      "records={} operations={} threads={} read={} insert={} update={} remove={} scan={} rmw={} "
      "scan_size={}{} distribution={} skew={} sequential_keys={} seed={} insert_pattern={} "
      "key_type={} key_size={}",
      w.records, w.operations, w.threads, w.read_ratio, w.insert_ratio, w.update_ratio,
      w.remove_ratio, w.scan_ratio, w.rmw_ratio, w.scan_size, w.scan_uniform ? " (uniform)" : "",
      distribution_name(w.distribution), w.skew, w.sequential_keys, w.seed,
      insert_pattern_name(w.insert_pattern), key_type_name(w.key_type), report_key_size(w));
  if (!w.trace_load.empty() || !w.trace_run.empty()) {
    spec += " trace_load=" + w.trace_load + " trace_run=" + w.trace_run;
  }
  return json{{"schema", kBenchSchema},     {"machine", machine_json(m)},
              {"options", options_json(r)}, {"workload", {{"name", w.name}, {"spec", spec}}},
              {"results", results},         {"errors", errors}};
}

std::string comparison_table(const std::vector<IndexResult>& results) {
  if (results.empty()) return "";
  bool instructions = false;
  for (const IndexResult& r : results) instructions |= r.run.cpu.instructions.available;
  // The index column fits the longest label (a PiBench wrapper's file name
  // and options can be long), 22 characters at least.
  size_t w = 22;
  for (const IndexResult& r : results) w = std::max(w, r.index.size());
  std::string s =
      fmt::format("{:<{}} {:>14} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}", "index", w, "ops/s",
                  "ratio", "p50 ns", "p99 ns", "flush/op", "lines/op", "fence/op");
  if (instructions) s += fmt::format(" {:>10} {:>6}", "instr/op", "IPC");
  s += "\n";
  const double base = results.front().run.throughput;
  for (const IndexResult& r : results) {
    const uint64_t ops = r.run.operations;
    auto pm = [&](uint64_t n) {
      return r.info.caps.plugin ? std::string("n/a") : fmt::format("{:.2f}", per_op(n, ops));
    };
    s += fmt::format("{:<{}} {:>14.0f} {:>8.2f} {:>10} {:>10} {:>10} {:>10} {:>10}", r.index, w,
                     r.run.throughput, base > 0 ? r.run.throughput / base : 0.0, r.latency.p50,
                     r.latency.p99, pm(r.run.pm.flushes), pm(r.run.pm.lines_flushed),
                     pm(r.run.pm.fences));
    if (instructions) {
      const EventCount& i = r.run.cpu.instructions;
      const std::optional<double> ipc = instructions_per_cycle(r.run.cpu);
      s += fmt::format(" {:>10} {:>6}",
                       i.available && ops ? fmt::format("{:.1f}", per_op(i.value, ops)) : "n/a",
                       ipc ? fmt::format("{:.2f}", *ipc) : "n/a");
    }
    s += "\n";
  }
  if (!instructions) {
    s += "instructions/op: not available (" + reason_of(results.front().run.cpu.instructions) +
         ")\n";
  }
  return s;
}

std::optional<double> instructions_per_cycle(const CpuCounters& c) {
  if (!c.instructions.available || !c.cycles.available || c.cycles.value == 0) return std::nullopt;
  return static_cast<double>(c.instructions.value) / static_cast<double>(c.cycles.value);
}

std::string cpu_counters_text(std::string_view phase, const CpuCounters& c, uint64_t ops) {
  auto event = [&](std::string_view name, const EventCount& e, std::string_view unit) {
    if (!e.available) return fmt::format("{}: not available ({})", name, reason_of(e));
    return fmt::format("{}: {:.1f}{}/op ({})", name, per_op(e.value, ops), unit, e.value);
  };
  std::string s = fmt::format("\t{} {}; {}", phase, event("instructions", c.instructions, ""),
                              event("cycles", c.cycles, ""));
  if (const std::optional<double> ipc = instructions_per_cycle(c)) {
    s += fmt::format("; IPC {:.2f}", *ipc);
  }
  s += "; " + event("task-clock", c.task_clock, " ns") + "\n";
  return s;
}

std::string report_text(const BenchReport& r) {
  const WorkloadSpec& w = r.spec;
  const BenchOptions& o = r.options;
  const MachineInfo& m = r.machine;
  std::string s;
  s += fmt::format("nvindex {} bench ({}), {}\n", m.version, kBenchSchema, m.date);
  s += fmt::format("Machine: {} | {} | {} cores | {} | flush: {} | {}\n", m.hostname, m.cpu_model,
                   m.cores, bytes_str(m.memory_bytes), m.flush_instruction, m.kernel);
  s += "Benchmark Options:\n";
  s += fmt::format("\t# Indexes: {}\n", fmt::join(r.indexes, ", "));
  s += fmt::format("\t# Workload: {}\n", w.name);
  if (!w.trace_load.empty() || !w.trace_run.empty()) {
    s += fmt::format("\t# Traces: load {} | run {}\n", w.trace_load.empty() ? "-" : w.trace_load,
                     w.trace_run.empty() ? "-" : w.trace_run);
  }
  if (!w.keys_file.empty()) s += fmt::format("\t# Keys file: {}\n", w.keys_file);
  s += fmt::format("\t# Records: {}\n\t# Operations: {}\n\t# Threads: {}\n", w.records,
                   w.operations, w.threads);
  if (o.duration_seconds > 0) s += fmt::format("\t# Duration: {} s\n", o.duration_seconds);
  s += fmt::format("\t# Sampling: {:g}%\n", o.latency_sample * 100);
  if (o.lookup_batch > 1) s += fmt::format("\t# Lookup batch: {} (multi_lookup)\n", o.lookup_batch);
  if (o.in_flight > 1) {
    s += fmt::format("\t# Operations in flight per thread: {} (Index::execute)\n", o.in_flight);
  }
  s += fmt::format(
      "\t# Operations ratio:\n\t\tRead: {:g}\n\t\tInsert: {:g}\n\t\tUpdate: {:g}\n\t\tRemove: "
      "{:g}\n\t\tScan: {:g} (size {}{})\n\t\tRead-modify-write: {:g}\n",
      w.read_ratio, w.insert_ratio, w.update_ratio, w.remove_ratio, w.scan_ratio, w.scan_size,
      w.scan_uniform ? ", uniform 1..size" : "", w.rmw_ratio);
  if (w.key_type == KeyType::kString) {
    s += fmt::format("\t# Key type: string, {} bytes (\"{}\" + zero-padded decimal{})\n",
                     w.key_size, kStringKeyPrefix,
                     w.keys_file.empty() && w.trace_load.empty() && w.trace_run.empty()
                         ? ""
                         : "; the file's keys as they are");
  } else {
    s += "\t# Key type: integer, 8 bytes\n";
  }
  s += fmt::format("\t# Key distribution: {} (skew {:g}), {} keys, seed {}\n",
                   distribution_name(w.distribution), w.skew,
                   w.sequential_keys ? "sequential" : "hashed", w.seed);
  s += fmt::format("\t# Insert pattern: {}{}\n", insert_pattern_name(w.insert_pattern),
                   w.insert_pattern == InsertPattern::kDense && w.dense_gap
                       ? fmt::format(" (gap {})", w.dense_gap)
                       : "");
  s += o.bulk_load ? fmt::format("\t# Load: bulk load, fill factor {:.2f}\n", o.fill_factor)
                   : std::string("\t# Load: inserts\n");
  if (o.recovery_threads) s += fmt::format("\t# Recovery threads: {}\n", o.recovery_threads);
  s += fmt::format(
      "\t# PM: mode {}, flush latency {} ns, fence latency {} ns, media model {}{}, node size {} "
      "B\n",
      pm::mode_name(o.pm.mode), o.pm.flush_latency_ns, o.pm.fence_latency_ns,
      o.pm.media_model
          ? (o.pm.cache_kib > 0 ? fmt::format("on (modelled cache {} KiB)", o.pm.cache_kib)
                                : std::string("on (no cache model)"))
          : std::string("off"),
      o.pm.media_write_latency_ns > 0
          ? fmt::format(" (modelled media time: {} ns per 256 B media write)",
                        o.pm.media_write_latency_ns)
          : std::string(),
      o.node_size);
  s += fmt::format("\t# Pool: {}, size {}{}\n", o.pool_path.empty() ? "temporary" : o.pool_path,
                   o.pool_size ? bytes_str(o.pool_size) : "automatic", o.keep_pool ? ", kept" : "");

  for (const IndexResult& x : r.results) {
    s += fmt::format("\n== {} ({})\n", x.index, x.info.description);
    s += "Overview:\n";
    if (x.info.node_size != 0) s += fmt::format("\tNode size: {} B\n", x.info.node_size);
    s += fmt::format("\tLoad: {}\n", load_description(x));
    // Throughput that includes charged media time is a model's figure, and says so.
    const char* modelled = o.pm.media_write_latency_ns > 0 ? ", modelled media time" : "";
    s += fmt::format("\tLoad time: {:.3f} s\n\tLoad throughput: {}ops/s ({} ops{})\n",
                     x.load.seconds, si(x.load.throughput), x.load.operations, modelled);
    s += fmt::format("\tRun time: {:.3f} s\n\tRun throughput: {}ops/s ({} ops{}", x.run.seconds,
                     si(x.run.throughput), x.run.operations, modelled);
    if (x.skipped) s += fmt::format(", {} scans skipped: index is unordered", x.skipped);
    s += ")\n";
    const bool plugin = x.info.caps.plugin;
    s += plugin ? "\tPer operation type (completed / succeeded / ops/s; PM counters n/a: plugin):\n"
                : "\tPer operation type (completed / succeeded / ops/s; flushes, lines, fences "
                  "per op):\n";
    for (OpType t : kAllTypes) {
      const TypeCounts& c = x.by_type[static_cast<int>(t)];
      if (c.completed == 0) continue;
      s += fmt::format("\t\t{:<6} {:>12} / {:>12} / {}ops/s", op_name(t), c.completed, c.succeeded,
                       si(x.run.seconds > 0 ? c.completed / x.run.seconds : 0));
      s += plugin
               ? "\n"
               : fmt::format("; {:.2f}, {:.2f}, {:.2f}\n", per_op(c.flushes, c.completed),
                             per_op(c.lines_flushed, c.completed), per_op(c.fences, c.completed));
    }
    bool any_smo = false;
    for (const TypeCounts& c : x.by_type) any_smo |= c.smo_ops > 0;
    if (any_smo) {
      s += "\tSplit vs non-split cost (SMO = split or merge during the operation):\n";
      for (OpType t : kAllTypes) {
        const TypeCounts& c = x.by_type[static_cast<int>(t)];
        if (c.completed > 0 && (t == OpType::kInsert || t == OpType::kRemove || c.smo_ops > 0)) {
          s += smo_split_text(op_name(t), c);
        }
      }
    }
    for (const auto& [phase, snap] : {std::pair{"load", &x.load.pm}, std::pair{"run", &x.run.pm}}) {
      if (const std::string t = smo_time_text(*snap); !t.empty()) {
        s += fmt::format("\t{} ({}; cascades timed once)\n", t, phase);
      }
    }
    const LatencySummary& l = x.latency;
    s += fmt::format("Latencies (ns, {} samples):\n", l.samples);
    s += fmt::format(
        "\tmin: {}\n\t50%: {}\n\t90%: {}\n\t99%: {}\n\t99.9%: {}\n\t99.99%: {}\n\t99.999%: "
        "{}\n\tmax: {}\n",
        l.min, l.p50, l.p90, l.p99, l.p99_9, l.p99_99, l.p99_999, l.max);
    if (plugin) {
      s += fmt::format("PM counters: {} (a PiBench wrapper's flushes bypass nvindex's pm layer)\n",
                       kPluginNa);
    } else {
      s += "PM counters:\n";
      pm_text(&s, "load", x.load.pm, x.load.operations, x.media_model);
      pm_text(&s, "run ", x.run.pm, x.run.operations, x.media_model);
    }
    s += "CPU counters (worker threads, user space, harness loop included):\n";
    s += cpu_counters_text("load", x.load.cpu, x.load.operations);
    s += cpu_counters_text("run ", x.run.cpu, x.run.operations);
    if (x.energy_measured && !x.energy_why.empty()) {
      s += fmt::format("Energy: not available on this machine ({})\n", x.energy_why);
    } else if (x.energy_measured) {
      s += "Energy (RAPL, whole machine over the phase):\n";
      s += energy_text("load", x, x.load);
      s += energy_text("run ", x, x.run);
    }
    s += "Process (getrusage: the whole process, all threads";
    s += x.device_path.empty() ? "):\n" : "; disk: device-wide, every process):\n";
    s += os_text("load", x, x.load);
    s += os_text("run ", x, x.run);
    s += plugin ? fmt::format("Memory: {}\n", kPluginNa)
                : fmt::format("Memory: DRAM {}, PM {}\n", bytes_str(x.info.dram_bytes),
                              bytes_str(x.info.pm_bytes));
    if (x.pool_pages.known) {
      s += "Pool pages: " + pool_pages_text(x.pool_pages);
      s += x.prefault_seconds >= 0
               ? fmt::format("; prefaulted before the load in {:.3f} s\n", x.prefault_seconds)
               : "; not prefaulted\n";
    }
    if (!x.device_path.empty()) {
      s += fmt::format("Device: {}; sync after the run: {:.6f} s ({})\n", x.device_path,
                       x.sync_seconds, x.sync.ok() ? "ok" : x.sync.ToString());
    }
    if (x.persistent) {
      s += fmt::format("Recovery: {:.6f} s with {} thread{} (index rebuild {:.6f} s) ({})\n",
                       x.recovery_seconds, x.recovery_threads, x.recovery_threads == 1 ? "" : "s",
                       x.rebuild_seconds, x.recovery.ok() ? "ok" : x.recovery.ToString());
    }
    s += fmt::format("Verification: {} operations checked, {} failures{}\n", x.checked, x.failures,
                     x.failures ? " -- RESULTS ARE WRONG" : "");
    for (const std::string& e : x.failure_examples) s += "\t" + e + "\n";
    if (plugin) {
      s += x.structure.ok()
               ? fmt::format("\tstructure: {} ({} keys counted by scans, in order)\n", kPluginNa,
                             x.verify_report.keys)
               : fmt::format("\tstructure: {} ({})\n", kPluginNa, x.structure.ToString());
    } else if (x.structure.ok()) {
      s += fmt::format("\tstructure: ok ({} keys, {} leaves, {} inner nodes, height {})\n",
                       x.verify_report.keys, x.verify_report.leaves, x.verify_report.inner_nodes,
                       x.verify_report.height);
    } else {
      s += "\tstructure: " + x.structure.ToString() + "\n";
    }
  }
  for (const auto& [name, st] : r.errors) {
    s += fmt::format("\n== {}: could not run: {}\n", name, st.ToString());
  }
  if (r.results.size() > 1) {
    s += "\nComparison (run phase; ratio to " + r.results.front().index + "):\n";
    s += comparison_table(r.results);
  }
  return s;
}

std::string load_description(const IndexResult& r) {
  switch (r.load_method) {
    case LoadMethod::kInserts:
      return "inserts";
    case LoadMethod::kBulkLoad:
      return fmt::format("bulk load at fill {:.2f}", r.fill_factor);
    case LoadMethod::kBulkLoadByInserts:
      return "bulk load by inserts: fill factor not applied";
  }
  return "?";
}

SmoTimeSummary smo_time_summary(const pm::CounterSnapshot& c) {
  SmoTimeSummary m;
  m.timed = c.smos_timed();
  if (m.timed == 0) return m;
  m.mean_ns = static_cast<double>(c.smo_ns) / static_cast<double>(m.timed);
  const auto upper = [](int b) {
    return b + 1 < pm::kSmoTimeBuckets ? pm::smo_time_bucket_floor(b + 1)
                                       : pm::smo_time_bucket_floor(b);
  };
  const auto at = [&](double q) {
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(m.timed)));
    uint64_t seen = 0;
    for (int b = 0; b < pm::kSmoTimeBuckets; ++b) {
      seen += c.smo_time[b];
      if (seen >= rank && c.smo_time[b] != 0) return (pm::smo_time_bucket_floor(b) + upper(b)) / 2;
    }
    return uint64_t{0};
  };
  m.p50_ns = at(0.5);
  m.p90_ns = at(0.9);
  m.p99_ns = at(0.99);
  m.p99_9_ns = at(0.999);
  for (int b = pm::kSmoTimeBuckets - 1; b >= 0; --b) {
    if (c.smo_time[b] != 0) {
      m.max_ns = upper(b);
      break;
    }
  }
  return m;
}

std::string smo_time_text(const pm::CounterSnapshot& c) {
  const SmoTimeSummary m = smo_time_summary(c);
  if (m.timed == 0) return "";
  return fmt::format(
      "SMO time: {} timed, mean {} ns, 50% {} ns, 90% {} ns, 99% {} ns, 99.9% {} ns, max < {} ns",
      m.timed, static_cast<uint64_t>(m.mean_ns + 0.5), m.p50_ns, m.p90_ns, m.p99_ns, m.p99_9_ns,
      m.max_ns);
}

std::string smo_split_text(std::string_view op, const TypeCounts& c) {
  if (c.completed == 0) return "";
  const TypeCounts a = c.without_smo(), b = c.with_smo();
  std::string s;
  auto line = [&](std::string_view what, uint64_t all, uint64_t without, uint64_t with) {
    s += fmt::format(
        "\t\t{}: {:.2f} {}/op; without SMO: {:.2f} {}/op over {} ops; with SMO: {:.2f} {}/op "
        "over {} ops\n",
        op, per_op(all, c.completed), what, per_op(without, a.completed), what, a.completed,
        per_op(with, b.completed), what, b.completed);
  };
  line("lines", c.lines_flushed, a.lines_flushed, b.lines_flushed);
  line("flushes", c.flushes, a.flushes, b.flushes);
  line("fences", c.fences, a.fences, b.fences);
  s += fmt::format("\t\t{}: {} SMOs in {} of {} ops\n", op, c.smos, c.smo_ops, c.completed);
  return s;
}

bool report_has_failures(const BenchReport& r) {
  if (!r.errors.empty()) return true;
  for (const IndexResult& x : r.results) {
    // A plugin with scan=no cannot be walked: NotSupported, not a failure.
    const bool structure_failed =
        !x.structure.ok() && !(x.info.caps.plugin && x.structure.code() == Code::kNotSupported);
    if (x.failures > 0 || structure_failed || (x.persistent && !x.recovery.ok()) || !x.sync.ok()) {
      return true;
    }
  }
  return false;
}

}  // namespace nvindex::bench
