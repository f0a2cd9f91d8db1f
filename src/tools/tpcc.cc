// `nvindex tpcc`: in-memory TPC-C (TPC-C 5.11) over an index design: every
// table and secondary index is one Index<uint64_t> of the design (src/tpcc/).
// For each index asked for, in turn: a database is made, loaded (clause
// 4.3.3.1; timed), run (the five transactions, C clients, no think times),
// and checked (clause 3.3.2's twelve consistency conditions). With --rows pm
// the rows live in a pool beside the indexes' (src/tpcc/rows.h), and
// --check-only reopens such a database kept with --pool (after a clean exit
// or a crash: recovery first) and only checks it. Text report for people,
// JSON (schema nvindex.tpcc/1) for tools. Exit codes: 0 success, 1 an index
// error or a violated consistency condition, 2 bad usage.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/energy.h"
#include "bench/report.h"
#include "nvindex/index.h"
#include "nvindex/pm/counters.h"
#include "nvindex/pm/persist.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/index_opts.h"
#include "tpcc/check.h"
#include "tpcc/db.h"
#include "tpcc/driver.h"
#include "tpcc/load.h"
#include "util/quote.h"

namespace nvindex::tools {
namespace {

using nlohmann::json;

/// The JSON schema name of `nvindex tpcc`'s report.
constexpr char kTpccSchema[] = "nvindex.tpcc/1";

struct TpccArgs {
  std::string indexes = "btree";  ///< --index: an index list (parse_index_list)
  std::vector<IndexSpec> specs;   ///< --index parsed (by the callback, once)
  uint32_t warehouses = 1;
  uint64_t transactions = 100000;
  double duration = 0;
  unsigned clients = 1;
  uint64_t seed = 1;
  std::string pm_mode = "emulated";
  std::string pool;
  uint32_t node_size = 0;  ///< 0: not given (512, or an index's own default)
  std::vector<std::string> index_opts;
  std::string format = "text";
  std::string output;
  bool quiet = false;
  bool energy = false;
  std::string rows = "dram";  ///< dram | pm
  bool check_only = false;
  bool transactions_given = false;  ///< -n on the command line
};

/// The transaction cap of a --duration run without -n for a persistent
/// index: its pools are sized for this many (table_pool_size), so the run
/// ends at the cap or the duration, whichever comes first.
constexpr uint64_t kDurationCap = 500000;

/// One index's outcome.
struct TpccResult {
  std::string index;
  Status error;  ///< not Ok: the index could not run to the end
  tpcc::LoadStats load;
  tpcc::RunStats run;
  pm::CounterSnapshot load_pm, run_pm;
  tpcc::CheckReport check;
  Status check_status;
  size_t row_bytes = 0;
  pm::PageBacking pool_pages;    ///< the pools' page backing after the run (known: any pool)
  std::string rows_in = "dram";  ///< where rows live: dram | pm
  uint64_t cap = 0;              ///< the run's transaction limit (0: none)
  std::optional<bench::Joules> run_energy;     ///< with --energy, when the machine has RAPL
  std::optional<tpcc::RowsRecovery> recovery;  ///< --check-only: what reopening did
  uint32_t warehouses = 0;                     ///< --check-only: the database's
};

/// The --index entries as the JSON report lists them (their labels).
std::vector<std::string> index_labels(const TpccArgs& a) {
  std::vector<std::string> out;
  for (const IndexSpec& is : a.specs) out.push_back(is.label);
  return out;
}

json check_json(const TpccResult& r) {
  json violations = json::array();
  for (const tpcc::Violation& v : r.check.violations) {
    violations.push_back(
        {{"condition", v.condition}, {"w", v.w}, {"d", v.d}, {"id", v.id}, {"what", v.what}});
  }
  return {{"ok", r.check_status.ok()},
          {"seconds", r.check.seconds},
          {"rows_read", r.check.rows_read},
          {"total_violations", r.check.total_violations},
          {"violations", violations}};
}

json ops_json(const tpcc::OpCounts& o) {
  return {{"inserts", o.inserts},
          {"lookups", o.lookups},
          {"scans", o.scans},
          {"find_last_less_than", o.find_last_less_than},
          {"removes", o.removes}};
}

json pm_json(const pm::CounterSnapshot& s, uint64_t per) {
  const double n = per == 0 ? 1 : static_cast<double>(per);
  return {{"flushes", s.flushes},
          {"lines_flushed", s.lines_flushed},
          {"fences", s.fences},
          {"flushes_per_tx", static_cast<double>(s.flushes) / n},
          {"fences_per_tx", static_cast<double>(s.fences) / n}};
}

json result_json(const TpccResult& r) {
  json j = {{"index", r.index}};
  if (!r.error.ok()) {
    j["error"] = r.error.ToString();
    return j;
  }
  if (r.recovery) {
    j["warehouses"] = r.warehouses;
    j["rows_in"] = r.rows_in;
    j["row_bytes"] = r.row_bytes;
    j["recovery"] = {{"clean_shutdown", r.recovery->clean_shutdown},
                     {"undone_transactions", r.recovery->undone_transactions},
                     {"undone_entries", r.recovery->undone_entries},
                     {"free_blocks", r.recovery->free_blocks}};
    j["check"] = check_json(r);
    return j;
  }
  json load_rows = json::object();
  uint64_t keys = 0;
  for (int t = 0; t < tpcc::kTables; ++t) {
    load_rows[tpcc::table_name(static_cast<tpcc::Table>(t))] = r.load.rows[t];
    keys += r.load.rows[t];
  }
  j["load"] = {{"seconds", r.load.seconds}, {"keys", keys}, {"keys_per_table", load_rows}};
  const uint64_t tx = r.run.transactions();
  json committed = json::object(), aborts = json::object();
  for (int t = 0; t < tpcc::kTxTypes; ++t) {
    committed[tpcc::tx_name(static_cast<tpcc::TxType>(t))] = r.run.committed[t];
    aborts[tpcc::tx_name(static_cast<tpcc::TxType>(t))] = r.run.aborts[t];
  }
  json ops = json::object();
  tpcc::OpCounts total;
  for (int t = 0; t < tpcc::kTables; ++t) {
    ops[tpcc::table_name(static_cast<tpcc::Table>(t))] = ops_json(r.run.ops[t]);
    total += r.run.ops[t];
  }
  j["run"] = {{"seconds", r.run.seconds},
              {"transactions", tx},
              {"tx_per_s", r.run.seconds > 0 ? static_cast<double>(tx) / r.run.seconds : 0.0},
              {"transaction_cap", r.cap},
              {"committed", committed},
              {"rolled_back", r.run.rolled_back},
              {"aborts", aborts},
              {"skipped_deliveries", r.run.skipped_deliveries},
              {"ops_per_table", ops},
              {"ops", ops_json(total)},
              {"pm", pm_json(r.run_pm, tx)}};
  j["load"]["pm"] = pm_json(r.load_pm, 0);
  if (r.run_energy) {
    j["run"]["energy"] = {
        {"package_j", r.run_energy->package},
        {"dram_j", r.run_energy->dram},
        {"package_j_per_tx", tx ? r.run_energy->package / static_cast<double>(tx) : 0.0},
        {"dram_j_per_tx", tx ? r.run_energy->dram / static_cast<double>(tx) : 0.0}};
  }
  j["row_bytes"] = r.row_bytes;
  j["rows_in"] = r.rows_in;
  if (r.pool_pages.known) j["pool_pages"] = bench::pool_pages_json(r.pool_pages);
  j["check"] = check_json(r);
  return j;
}

/// The consistency lines of one result.
void print_check(std::FILE* f, const TpccResult& r) {
  if (r.check_status.ok()) {
    std::fprintf(f,
                 "  consistency: the 12 conditions of clause 3.3.2 hold (%s rows read, %.2f s)\n",
                 with_commas(r.check.rows_read).c_str(), r.check.seconds);
    return;
  }
  std::fprintf(f, "  consistency: FAILED, %s violation(s):\n",
               with_commas(r.check.total_violations).c_str());
  for (const tpcc::Violation& v : r.check.violations) {
    std::fprintf(f, "    condition %d: %s\n", v.condition, v.what.c_str());
  }
}

/// Where rows live, for the report: "DRAM" or "PM (rows pool)".
const char* rows_place_text(const std::string& rows_in) {
  return rows_in == "pm" ? "PM (rows pool)" : "DRAM";
}

void print_text(std::FILE* f, const TpccArgs& a, const std::vector<TpccResult>& results,
                const bench::EnergyMeter* meter) {
  if (a.check_only) {
    std::fprintf(f, "nvindex tpcc --check-only: %s, PM %s\n", a.pool.c_str(), a.pm_mode.c_str());
  } else {
    std::fprintf(
        f, "nvindex tpcc: %u warehouse(s), %u client(s), %s, seed %llu, PM %s, rows in %s\n",
        a.warehouses, a.clients,
        a.duration > 0 ? (std::to_string(a.duration) + " s").c_str()
                       : (with_commas(a.transactions) + " transactions").c_str(),
        static_cast<unsigned long long>(a.seed), a.pm_mode.c_str(), rows_place_text(a.rows));
  }
  for (const TpccResult& r : results) {
    std::fprintf(f, "\n%s\n", r.index.c_str());
    if (!r.error.ok()) {
      std::fprintf(f, "  error: %s\n", r.error.ToString().c_str());
      continue;
    }
    if (r.recovery) {
      std::fprintf(f,
                   "  database: %u warehouse(s); rows %.1f MiB in %s\n"
                   "  reopened after a %s; %u transaction(s) rolled back (%s undo entries); "
                   "%s free row blocks\n",
                   r.warehouses, static_cast<double>(r.row_bytes) / (1 << 20),
                   rows_place_text(r.rows_in),
                   r.recovery->clean_shutdown
                       ? "clean close"
                       : "crash (not closed cleanly; entry counts not checked against a close "
                         "record, the 12 conditions are)",
                   r.recovery->undone_transactions, with_commas(r.recovery->undone_entries).c_str(),
                   with_commas(r.recovery->free_blocks).c_str());
      print_check(f, r);
      continue;
    }
    uint64_t keys = 0;
    for (uint64_t k : r.load.rows) keys += k;
    std::fprintf(f, "  load: %s keys in %.2f s (%s keys/s); rows %.1f MiB in %s\n",
                 with_commas(keys).c_str(), r.load.seconds,
                 with_commas(static_cast<uint64_t>(keys / std::max(r.load.seconds, 1e-9))).c_str(),
                 static_cast<double>(r.row_bytes) / (1 << 20), rows_place_text(r.rows_in));
    if (r.pool_pages.known) {
      std::fprintf(f, "  pool pages: %s\n", bench::pool_pages_text(r.pool_pages).c_str());
    }
    const uint64_t tx = r.run.transactions();
    const double tps = r.run.seconds > 0 ? static_cast<double>(tx) / r.run.seconds : 0;
    std::fprintf(f, "  run: %s transactions in %.2f s: %s tx/s%s\n", with_commas(tx).c_str(),
                 r.run.seconds, with_commas(static_cast<uint64_t>(tps)).c_str(),
                 a.duration > 0 && r.cap != 0 && tx >= r.cap
                     ? (" (stopped at the cap of " + with_commas(r.cap) +
                        " transactions the pools were sized for; give -n)")
                           .c_str()
                     : "");
    std::fprintf(f, "  %-13s %10s %8s %10s\n", "transaction", "ended", "share", "aborts");
    for (int t = 0; t < tpcc::kTxTypes; ++t) {
      const uint64_t c = r.run.committed[t] +
                         (t == static_cast<int>(tpcc::TxType::kNewOrder) ? r.run.rolled_back : 0);
      std::fprintf(f, "  %-13s %10s %7.1f%% %10s\n", tpcc::tx_name(static_cast<tpcc::TxType>(t)),
                   with_commas(c).c_str(),
                   tx ? 100.0 * static_cast<double>(c) / static_cast<double>(tx) : 0.0,
                   with_commas(r.run.aborts[t]).c_str());
    }
    std::fprintf(f,
                 "  new_order rolled back (unused item, clause 2.4.2.3): %s; delivery districts "
                 "skipped: %s\n",
                 with_commas(r.run.rolled_back).c_str(),
                 with_commas(r.run.skipped_deliveries).c_str());
    std::fprintf(f, "  index calls per transaction:  %8s %8s %8s %8s %8s\n", "inserts", "lookups",
                 "scans", "fllt", "removes");
    const double n = tx ? static_cast<double>(tx) : 1;
    tpcc::OpCounts total;
    for (int t = 0; t < tpcc::kTables; ++t) {
      const tpcc::OpCounts& o = r.run.ops[t];
      total += o;
      std::fprintf(f, "    %-26s %8.3f %8.3f %8.3f %8.3f %8.3f\n",
                   tpcc::table_name(static_cast<tpcc::Table>(t)),
                   static_cast<double>(o.inserts) / n, static_cast<double>(o.lookups) / n,
                   static_cast<double>(o.scans) / n, static_cast<double>(o.find_last_less_than) / n,
                   static_cast<double>(o.removes) / n);
    }
    std::fprintf(f, "    %-26s %8.3f %8.3f %8.3f %8.3f %8.3f\n", "all tables",
                 static_cast<double>(total.inserts) / n, static_cast<double>(total.lookups) / n,
                 static_cast<double>(total.scans) / n,
                 static_cast<double>(total.find_last_less_than) / n,
                 static_cast<double>(total.removes) / n);
    std::fprintf(f, "  PM per transaction: %.2f flushes, %.2f fences\n",
                 static_cast<double>(r.run_pm.flushes) / n,
                 static_cast<double>(r.run_pm.fences) / n);
    if (meter != nullptr && !meter->available()) {
      std::fprintf(f, "  energy: not available on this machine (%s)\n", meter->why().c_str());
    } else if (meter != nullptr && r.run_energy) {
      const std::string dram = meter->has_dram()
                                   ? ", " + std::to_string(r.run_energy->dram) + " J DRAM"
                                   : std::string(" (no DRAM zone)");
      std::fprintf(f, "  energy (run): %.1f J package%s, %.3f mJ per transaction\n",
                   r.run_energy->package, dram.c_str(), 1e3 * r.run_energy->package / n);
    }
    print_check(f, r);
  }
}

/// Prints the report (text or JSON, to --output or stdout); returns the
/// exit code: 1 when the output cannot be written (the path was checked
/// before the run: this is an I/O error) or when `failed`, else 0.
int write_report(const TpccArgs& a, const std::vector<TpccResult>& results,
                 const tpcc::NurandConstants& load_c, const tpcc::NurandConstants& run_c,
                 const bench::EnergyMeter* meter, bool failed) {
  std::string text;
  if (a.format == "json") {
    const bench::MachineInfo m = bench::collect_machine_info();
    json j = {
        {"schema", kTpccSchema},
        {"machine", bench::machine_json(m)},
        {"options",
         {{"indexes", index_labels(a)},
          {"warehouses", a.warehouses},
          {"transactions", a.transactions},
          {"duration_s", a.duration},
          {"clients", a.clients},
          {"seed", a.seed},
          {"pm_mode", a.pm_mode},
          {"node_size", a.node_size != 0 ? a.node_size : IndexOptions{}.node_size},
          {"rows", a.rows},
          {"check_only", a.check_only},
          {"pool", a.pool},
          {"energy", !a.energy || meter == nullptr ? json(nullptr)
                     : meter->available() ? json{{"available", true}, {"dram", meter->has_dram()}}
                                          : json{{"available", false}, {"reason", meter->why()}}},
          {"nurand_load",
           {{"c_last", load_c.c_last}, {"c_id", load_c.c_id}, {"ol_i_id", load_c.ol_i_id}}},
          {"nurand_run",
           {{"c_last", run_c.c_last}, {"c_id", run_c.c_id}, {"ol_i_id", run_c.ol_i_id}}}}},
        {"results", json::array()}};
    for (const TpccResult& r : results) j["results"].push_back(result_json(r));
    text = j.dump(2) + "\n";
  }
  if (a.format != "json") {
    char* buf = nullptr;
    size_t len = 0;
    std::FILE* m = ::open_memstream(&buf, &len);
    if (m == nullptr) {
      std::fprintf(stderr, "nvindex tpcc: out of memory for the report\n");
      return 1;
    }
    print_text(m, a, results, meter);
    std::fclose(m);
    text.assign(buf, len);
    std::free(buf);
  }
  if (a.output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else if (!write_file(a.output, text)) {
    std::fprintf(stderr, "nvindex tpcc: cannot write %s\n", quote_input(a.output).c_str());
    return 1;
  }
  return failed ? 1 : 0;
}

int run_tpcc(const TpccArgs& a) {
  pm::Mode mode{};
  if (Status st = pm::parse_mode(a.pm_mode, &mode); !st.ok()) {
    std::fprintf(stderr, "nvindex tpcc: %s\n", st.ToString().c_str());
    return 2;
  }
  if (a.transactions == 0 && !(a.duration > 0)) {
    std::fprintf(stderr, "nvindex tpcc: --transactions must be at least 1 (or give --duration)\n");
    return 2;
  }
  const tpcc::RowPlace rows = a.rows == "pm" ? tpcc::RowPlace::kPm : tpcc::RowPlace::kDram;
  if (rows == tpcc::RowPlace::kPm && mode != pm::Mode::kEmulated && mode != pm::Mode::kDax) {
    std::fprintf(stderr, "nvindex tpcc: --rows pm needs pool files: --pm-mode emulated or dax\n");
    return 2;
  }
  if (rows == tpcc::RowPlace::kPm && a.clients > tpcc::kMaxPmClients) {
    std::fprintf(stderr, "nvindex tpcc: --rows pm serves at most %u clients\n",
                 tpcc::kMaxPmClients);
    return 2;
  }
  // The plan: each --index entry with its options (--index-opt, then the
  // entry's own) and node size (the entry's node_size=N, else --node-size,
  // else 512 or the index's own default: run_node_size, as bench).
  struct Planned {
    std::string name;
    std::map<std::string, std::string> opts;
    uint32_t node_size = 0;
  };
  std::vector<Planned> plan;
  for (const IndexSpec& is : a.specs) {
    const std::string& name = is.name;
    std::map<std::string, std::string> o;
    if (Status st = parse_index_opts(a.index_opts, &o); !st.ok()) {
      std::fprintf(stderr, "nvindex tpcc: %s\n", st.ToString().c_str());
      return 2;
    }
    for (const auto& [k, v] : is.extra) o[k] = v;  // the entry's own win
    // Registered (parse_index_list checked it), but not a test double.
    const IndexEntry* e = find_index_entry(name);
    if (is_test_only_index(name)) {
      std::fprintf(stderr, "nvindex tpcc: unknown index %s\n", quote_input(name).c_str());
      return 2;
    }
    if (Status st = check_index_options(*e, o); !st.ok()) {
      std::fprintf(stderr, "nvindex tpcc: --index %s: %s\n", is.label.c_str(),
                   st.message().c_str());
      return 2;
    }
    if (e->caps.plugin) {
      std::fprintf(stderr,
                   "nvindex tpcc: --index %s: a PiBench wrapper cannot hold TPC-C's tables: "
                   "their transactions need find_last_less_than, which PiBench's tree_api "
                   "lacks (find, insert, update, remove, scan); run it in nvindex bench\n",
                   is.label.c_str());
      return 2;
    }
    if (!e->caps.ordered) {
      std::fprintf(stderr,
                   "nvindex tpcc: %s is not ordered; TPC-C needs scan and find_last_less_than\n",
                   name.c_str());
      return 2;
    }
    if (a.clients > 1 && !e->caps.thread_safe) {
      std::fprintf(stderr, "nvindex tpcc: %s is not thread-safe; run it with --clients 1\n",
                   name.c_str());
      return 2;
    }
    const uint32_t node_size = is.node_size != 0  ? is.node_size
                               : a.node_size != 0 ? a.node_size
                                                  : run_node_size(*e, IndexOptions{}.node_size);
    if (Status st = check_node_size(*e, node_size); !st.ok()) {
      std::fprintf(stderr, "nvindex tpcc: --node-size: %s\n", st.message().c_str());
      return 2;
    }
    if (needs_device(e->caps)) {
      std::fprintf(stderr,
                   "nvindex tpcc: %s is a block-device index: TPC-C keeps its tables in DRAM or "
                   "in pools\n",
                   name.c_str());
      return 2;
    }
    if (rows == tpcc::RowPlace::kPm && !e->caps.persistent) {
      std::fprintf(stderr,
                   "nvindex tpcc: --rows pm needs a persistent index; %s is volatile (its keys "
                   "would not survive a restart)\n",
                   name.c_str());
      return 2;
    }
    plan.push_back(Planned{name, o, node_size});
  }
  // Each index gets its own directory under --pool when there are several.
  // --pool itself is made when missing, never its parents (its directory
  // was checked to exist when parsed: the rule of bench --pool).
  if (!a.pool.empty()) {
    std::error_code ec;
    std::filesystem::create_directory(a.pool, ec);
    for (const Planned& p : plan) {
      if (ec) break;
      if (plan.size() > 1) std::filesystem::create_directory(a.pool + "/" + p.name, ec);
    }
    if (ec) {
      std::fprintf(stderr, "nvindex tpcc: --pool: cannot create a directory in %s: %s\n",
                   quote_input(a.pool).c_str(), ec.message().c_str());
      return 2;
    }
  }
  tpcc::NurandConstants load_c, run_c;
  tpcc::draw_constants(a.seed, &load_c, &run_c);
  std::vector<TpccResult> results;
  bool failed = false;
  std::optional<bench::EnergyMeter> meter;
  if (a.energy) meter.emplace();
  for (const Planned& p : plan) {
    const std::string& name = p.name;
    TpccResult r;
    r.index = index_with_opts(name, p.opts);
    tpcc::DbOptions dbo;
    dbo.index = name;
    dbo.index_opts = p.opts;
    dbo.node_size = p.node_size;
    dbo.warehouses = a.warehouses;
    dbo.clients = a.clients;
    dbo.pm_mode = mode;
    dbo.pool_dir = a.pool.empty() || plan.size() == 1 ? a.pool : a.pool + "/" + name;
    dbo.keep_pools = !a.pool.empty();
    dbo.rows = rows;
    r.rows_in = a.rows;
    // A timed run of a persistent index stops at the cap its pools are
    // sized for (-n, or kDurationCap); a volatile index has none then.
    const bool persistent = find_index_entry(name)->caps.persistent;
    r.cap =
        a.duration > 0 && !a.transactions_given ? (persistent ? kDurationCap : 0) : a.transactions;
    dbo.expected_transactions = r.cap;
    std::unique_ptr<tpcc::Database> db;
    r.error = tpcc::Database::create(dbo, &db);
    if (r.error.ok()) {
      if (!a.quiet)
        std::fprintf(stderr, "tpcc %s: loading %u warehouse(s)\n", r.index.c_str(), a.warehouses);
      const pm::CounterSnapshot p0 = pm::snapshot();
      r.error = tpcc::load(*db, a.seed, load_c, a.clients, &r.load);
      const pm::CounterSnapshot p1 = pm::snapshot();
      r.load_pm = p1 - p0;
    }
    if (r.error.ok()) {
      tpcc::RunOptions ro;
      ro.transactions = r.cap;
      ro.seconds = a.duration;
      ro.clients = a.clients;
      ro.seed = a.seed;
      ro.constants = run_c;
      if (!a.quiet) {
        ro.progress = [&r, &a](uint64_t done) {
          if (a.duration == 0) {
            std::fprintf(stderr, "tpcc %s: %s / %s transactions\n", r.index.c_str(),
                         with_commas(done).c_str(), with_commas(a.transactions).c_str());
          } else {
            std::fprintf(stderr, "tpcc %s: %s transactions\n", r.index.c_str(),
                         with_commas(done).c_str());
          }
        };
      }
      if (!a.quiet) {
        std::fprintf(stderr, "tpcc %s: loaded in %.2f s; running %s\n", r.index.c_str(),
                     r.load.seconds,
                     a.duration > 0 ? (std::to_string(a.duration) + " s").c_str()
                                    : (with_commas(r.cap) + " transactions").c_str());
      }
      const pm::CounterSnapshot p0 = pm::snapshot();
      const bench::EnergySample e0 =
          meter && meter->available() ? meter->sample() : bench::EnergySample{};
      r.error = tpcc::run(*db, ro, &r.run);
      r.run_pm = pm::snapshot() - p0;
      if (meter && meter->available()) r.run_energy = meter->between(e0, meter->sample());
    }
    if (r.error.ok()) {
      if (!a.quiet) std::fprintf(stderr, "tpcc %s: checking consistency\n", r.index.c_str());
      r.check_status = tpcc::check_consistency(*db, &r.check);
      r.row_bytes = db->row_bytes();
      r.pool_pages = db->pool_pages();
      failed = failed || !r.check_status.ok();
    }
    failed = failed || !r.error.ok();
    results.push_back(std::move(r));
  }
  return write_report(a, results, load_c, run_c, meter ? &*meter : nullptr, failed);
}

/// --check-only: reopens the database in --pool (recovery first) and checks
/// it.
int check_only(const TpccArgs& a) {
  pm::Mode mode{};
  if (Status st = pm::parse_mode(a.pm_mode, &mode); !st.ok()) {
    std::fprintf(stderr, "nvindex tpcc: %s\n", st.ToString().c_str());
    return 2;
  }
  if (a.pool.empty()) {
    std::fprintf(stderr,
                 "nvindex tpcc: --check-only needs --pool DIR (a database made with --rows pm)\n");
    return 2;
  }
  if (Status st = check_path(ValueKind::kDirectory, a.pool); !st.ok()) {
    std::fprintf(stderr, "nvindex tpcc: --pool: %s (--check-only opens a database kept there)\n",
                 st.message().c_str());
    return 2;
  }
  TpccResult r;
  std::unique_ptr<tpcc::Database> db;
  tpcc::RowsRecovery rec;
  if (!a.quiet) std::fprintf(stderr, "tpcc: opening %s\n", a.pool.c_str());
  r.error = tpcc::Database::open(a.pool, mode, 1, &db, &rec);
  if (r.error.ok()) {
    r.index = index_with_opts(db->options().index, db->options().index_opts);
    r.recovery = rec;
    r.warehouses = db->warehouses();
    r.rows_in = "pm";
    if (!a.quiet) std::fprintf(stderr, "tpcc %s: checking consistency\n", r.index.c_str());
    r.check_status = tpcc::check_consistency(*db, &r.check);
    r.row_bytes = db->row_bytes();
  } else {
    r.index = a.pool;
  }
  const bool failed = !r.error.ok() || !r.check_status.ok();
  std::vector<TpccResult> results;
  results.push_back(std::move(r));
  return write_report(a, results, {}, {}, nullptr, failed);
}

}  // namespace

void add_tpcc_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TpccArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tpcc",
      "In-memory TPC-C (5.11) over an index design: every table is an index; load, run the five\n"
      "transactions with C clients (strict 2PL, NO_WAIT), then check the 12 consistency\n"
      "conditions of clause 3.3.2. Exit 1 if an index fails or a condition is violated.");
  add_index_list(cmd, "--index", &a->indexes,
                 "Ordered indexes to run, in turn: comma-separated entries name[:k=v[;k=v]] "
                 "(options for that index only, over --index-opt; node_size=N overrides "
                 "--node-size); default btree");
  add_count(cmd, "-w,--warehouses", &a->warehouses, 1, tpcc::kMaxWarehouses,
            "Warehouses W (about 500,000 keys each)");
  add_memory_count(cmd, "-n,--transactions", &a->transactions, 1024, true,
                   "Transactions, all clients together (default 100,000)");
  add_real(cmd, "--duration", &a->duration, 0, 604800, true, "(0, 604,800] s (a week)",
           "Run for S seconds; with -n, at most that many transactions; without, a "
           "persistent index stops at 500,000 (its pools are sized for them)");
  add_count(cmd, "-c,--clients", &a->clients, 1, 256,
            "Clients (threads); client k's home warehouse is k mod W + 1");
  add_seed(cmd, "--seed", &a->seed, "Seed of every random choice");
  add_choice(cmd, "--pm-mode", &a->pm_mode, {"dram", "emulated", "dax"},
             "PM mode of a persistent index's pools");
  add_path(cmd, "--pool", &a->pool, ValueKind::kNewDirectory,
           "Directory for a persistent index's pools, one per table, kept; made when missing "
           "(its parent must exist); with --check-only, the database to check (default: a "
           "temporary one, removed)");
  add_count(cmd, "--node-size", &a->node_size, 64, 65536,
            "Node size in bytes (default 512, or an index's own default where it does not "
            "take 512; the index's range applies)");
  add_text(cmd, "--index-opt", &a->index_opts, "Index-specific knob name=value (repeatable)");
  add_choice(cmd, "--format", &a->format, {"text", "json"}, "Report format");
  add_path(cmd, "--output", &a->output, ValueKind::kOutputFile,
           "Write the report to FILE instead of stdout");
  add_switch(cmd, "-q,--quiet", &a->quiet, "No progress on stderr");
  add_switch(cmd, "--energy", &a->energy,
             "Package and DRAM energy of each run from RAPL (/sys/class/powercap), or the reason "
             "there is none on this machine");
  add_choice(cmd, "--rows", &a->rows, {"dram", "pm"},
             "Where rows live: dram (default), or pm: a rows pool beside the indexes' "
             "(<pool>/rows.pool), every transaction atomic across a crash (undo log); needs "
             "a persistent index");
  add_switch(cmd, "--check-only", &a->check_only,
             "Reopen the database kept in --pool DIR (made with --rows pm; recovered first if "
             "it crashed) and check the 12 conditions; no load, no run");
  cmd->callback([a, cmd, exit_code] {
    // Cannot fail: the --index validator parsed the same text.
    if (Status st = parse_index_list(a->indexes, &a->specs); !st.ok()) {
      std::fprintf(stderr, "nvindex tpcc: --index: %s\n", st.message().c_str());
      *exit_code = 2;
      return;
    }
    a->transactions_given = cmd->count("--transactions") > 0;
    if (a->duration > 0 && !a->transactions_given) a->transactions = 0;
    *exit_code = a->check_only ? check_only(*a) : run_tpcc(*a);
  });
}

}  // namespace nvindex::tools
