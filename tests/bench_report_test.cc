// Tests of the reports (src/bench/report.h) and the statistics
// (src/bench/stats.h): every fixed JSON field name with the right type, the
// text report's sections and comparison table, nearest-rank percentiles on
// known sample vectors, and the latency sampler's rate.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench/stats.h"

namespace nvindex::bench {
namespace {

using nlohmann::json;

IndexResult fake_result(const std::string& name, double throughput, bool persistent) {
  IndexResult r;
  r.index = name;
  r.info.name = name;
  r.info.description = "test index " + name;
  r.info.dram_bytes = 1 << 20;
  r.info.pm_bytes = persistent ? 2 << 20 : 0;
  r.persistent = persistent;
  r.load = PhaseResult{1000, 0.5, 2000, {}, {}, {}};
  r.run = PhaseResult{4000, 4000 / throughput, throughput, {}, {}, {}};
  r.run.pm.flushes = persistent ? 8000 : 0;
  r.run.pm.lines_flushed = persistent ? 8000 : 0;
  r.run.pm.fences = persistent ? 4000 : 0;
  r.by_type[static_cast<int>(OpType::kRead)] = {3000, 3000};
  r.by_type[static_cast<int>(OpType::kUpdate)] = {1000, 999};
  std::vector<uint64_t> lat(100);
  std::iota(lat.begin(), lat.end(), 100);
  r.latency = summarize_latencies(&lat);
  r.timeline = {3000, 1000};
  r.checked = 5001;
  r.failures = 0;
  return r;
}

BenchReport fake_report() {
  BenchReport rep;
  rep.machine = collect_machine_info();
  rep.spec.name = "ycsb-a";
  rep.spec.read_ratio = 0.5;
  rep.spec.update_ratio = 0.5;
  rep.indexes = {"alpha", "beta"};
  rep.results.push_back(fake_result("alpha", 1000, false));
  rep.results.push_back(fake_result("beta", 2500, true));
  return rep;
}

void expect_pm(const json& pm) {
  for (const char* k : {"flushes", "lines_flushed", "fences", "naws", "media_writes"}) {
    ASSERT_TRUE(pm.contains(k)) << k;
    EXPECT_TRUE(pm[k].is_number_unsigned()) << k;
  }
  ASSERT_TRUE(pm.contains("per_op"));
  for (const char* k : {"flushes", "lines_flushed", "fences"}) {
    ASSERT_TRUE(pm["per_op"].contains(k)) << k;
    EXPECT_TRUE(pm["per_op"][k].is_number()) << k;
  }
}

TEST(ReportJson, HasEveryFixedFieldWithTheRightType) {
  const json j = report_json(fake_report());
  EXPECT_EQ(j["schema"], "nvindex.bench/1");
  ASSERT_TRUE(j["machine"].is_object());
  for (const char* k :
       {"hostname", "cpu_model", "flush_instruction", "kernel", "date", "version"}) {
    EXPECT_TRUE(j["machine"][k].is_string()) << k;
  }
  EXPECT_TRUE(j["machine"]["cores"].is_number_unsigned());
  EXPECT_TRUE(j["machine"]["memory_bytes"].is_number_unsigned());
  const std::string date = j["machine"]["date"];
  EXPECT_EQ(date.size(), 20u) << date;  // 2024-05-01T12:00:00Z
  EXPECT_EQ(date.back(), 'Z');
  ASSERT_TRUE(j["options"].is_object());
  for (const char* k :
       {"records", "operations", "threads", "read_ratio", "insert_ratio", "update_ratio",
        "remove_ratio", "scan_ratio", "rmw_ratio", "scan_size", "distribution", "skew", "seed",
        "latency_sample", "pm_mode", "node_size", "pool_size", "media_model", "duration_seconds"}) {
    EXPECT_TRUE(j["options"].contains(k)) << k;
  }
  EXPECT_EQ(j["workload"]["name"], "ycsb-a");
  EXPECT_TRUE(j["workload"]["spec"].is_string());

  ASSERT_TRUE(j["results"].is_array());
  ASSERT_EQ(j["results"].size(), 2u);
  for (const json& r : j["results"]) {
    EXPECT_TRUE(r["index"].is_string());
    EXPECT_TRUE(r["info"].is_object());
    for (const char* phase : {"load", "run"}) {
      const json& p = r[phase];
      EXPECT_TRUE(p["operations"].is_number_unsigned()) << phase;
      EXPECT_TRUE(p["seconds"].is_number_float()) << phase;
      EXPECT_TRUE(p["throughput"].is_number_float()) << phase;
      expect_pm(p["pm"]);
    }
    const json& run = r["run"];
    ASSERT_TRUE(run["by_type"].is_object());
    for (const char* t : {"read", "insert", "update", "remove", "scan", "rmw"}) {
      ASSERT_TRUE(run["by_type"].contains(t)) << t;
      EXPECT_TRUE(run["by_type"][t]["completed"].is_number_unsigned()) << t;
      EXPECT_TRUE(run["by_type"][t]["succeeded"].is_number_unsigned()) << t;
      EXPECT_TRUE(run["by_type"][t]["throughput"].is_number()) << t;
      const json& pm = run["by_type"][t]["pm"];
      for (const char* k : {"flushes", "lines_flushed", "fences"}) {
        EXPECT_TRUE(pm[k].is_number_unsigned()) << t << " " << k;
        EXPECT_TRUE(pm["per_op"][k].is_number()) << t << " " << k;
      }
    }
    EXPECT_EQ(run["by_type"]["update"]["succeeded"], 999u);
    for (const char* k :
         {"samples", "min", "p50", "p90", "p99", "p99_9", "p99_99", "p99_999", "max"}) {
      EXPECT_TRUE(run["latency_ns"][k].is_number_unsigned()) << k;
    }
    EXPECT_EQ(run["latency_ns"]["samples"], 100u);
    EXPECT_EQ(run["latency_ns"]["p50"], 149u);
    EXPECT_TRUE(run["timeline"].is_array());
    EXPECT_TRUE(r["verification"]["checked"].is_number_unsigned());
    EXPECT_TRUE(r["verification"]["failures"].is_number_unsigned());
    EXPECT_TRUE(r["verification"]["examples"].is_array());
    EXPECT_TRUE(r["memory"]["dram_bytes"].is_number_unsigned());
    EXPECT_TRUE(r["memory"]["pm_bytes"].is_number_unsigned());
    EXPECT_TRUE(r["media_write_amplification"].is_number());
  }
  EXPECT_FALSE(j["results"][0].contains("recovery_seconds"));  // volatile
  EXPECT_TRUE(j["results"][1]["recovery_seconds"].is_number());
  EXPECT_DOUBLE_EQ(j["results"][1]["run"]["pm"]["per_op"]["flushes"].get<double>(), 2.0);
  EXPECT_TRUE(j["errors"].is_array());
  // Round trip through text: what a script would parse.
  EXPECT_EQ(json::parse(j.dump()), j);
}

TEST(ReportText, HasSectionsAndComparisonTable) {
  BenchReport rep = fake_report();
  const std::string t = report_text(rep);
  for (const char* s :
       {"Benchmark Options", "Records", "Overview", "Load throughput", "Run throughput",
        "Latencies", "99.999%", "PM counters", "Memory", "Verification", "Recovery", "Comparison",
        "ratio", "flush/op", "lines/op", "fence/op", "== alpha", "== beta"}) {
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
  }
  const std::string table = comparison_table(rep.results);
  // Header, one row per index, and the line saying why instructions were
  // not counted (the fake results have no CPU counters); beta is 2.5 times
  // alpha.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);
  EXPECT_NE(table.find("instructions/op: not available (not measured)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("2.50"), std::string::npos) << table;
  EXPECT_NE(table.find("1.00"), std::string::npos) << table;
  EXPECT_NE(t.find(table), std::string::npos);

  // One index: no comparison table.
  rep.results.pop_back();
  EXPECT_EQ(report_text(rep).find("Comparison"), std::string::npos);
}

/// A result with bulk-load and SMO data: 100 inserts, 10 of them with a
/// split (2 SMOs in one), 1.5 lines per non-split insert, 6 per split one.
IndexResult smo_result(LoadMethod method) {
  IndexResult r = fake_result("gamma", 2000, true);
  r.index = "gamma:inner=dram";
  r.index_name = "gamma";
  r.index_options = {{"inner", "dram"}};
  r.load_method = method;
  r.fill_factor = 0.7;
  r.recovery_threads = 2;
  r.rebuild_seconds = 0.25;
  r.load.pm.smos = 40;
  TypeCounts& c = r.by_type[static_cast<int>(OpType::kInsert)];
  c.completed = c.succeeded = 100;
  c.lines_flushed = 90 * 3 / 2 + 10 * 6;  // 195
  c.flushes = c.lines_flushed;
  c.fences = 90 * 2 + 10 * 5;
  c.smo_ops = 10;
  c.smos = 11;
  c.smo_lines_flushed = c.smo_flushes = 60;
  c.smo_fences = 50;
  return r;
}

TEST(ReportJson, BulkLoadSmoSplitRecoveryThreadsAndLabelFields) {
  BenchReport rep = fake_report();
  rep.options.bulk_load = true;
  rep.options.fill_factor = 0.7;
  rep.options.recovery_threads = 2;
  rep.spec.insert_pattern = InsertPattern::kDense;
  rep.results = {smo_result(LoadMethod::kBulkLoad), smo_result(LoadMethod::kBulkLoadByInserts),
                 fake_result("alpha", 1000, false)};
  const json j = report_json(rep);
  EXPECT_EQ(j["options"]["bulk_load"], true);
  EXPECT_DOUBLE_EQ(j["options"]["fill_factor"].get<double>(), 0.7);
  EXPECT_EQ(j["options"]["recovery_threads"], 2);
  EXPECT_EQ(j["options"]["insert_pattern"], "dense");
  EXPECT_TRUE(j["options"]["dense_gap"].is_number_unsigned());

  const json& a = j["results"][0];
  EXPECT_EQ(a["index"], "gamma:inner=dram");
  EXPECT_EQ(a["index_name"], "gamma");
  EXPECT_EQ(a["index_options"]["inner"], "dram");
  EXPECT_EQ(a["load"]["method"], "bulk_load");
  EXPECT_DOUBLE_EQ(a["load"]["fill_factor"].get<double>(), 0.7);
  EXPECT_EQ(a["load"]["description"], "bulk load at fill 0.70");
  EXPECT_EQ(a["load"]["pm"]["smos"], 40);
  EXPECT_EQ(a["recovery_threads"], 2);
  EXPECT_DOUBLE_EQ(a["rebuild_seconds"].get<double>(), 0.25);
  const json& ins = a["run"]["by_type"]["insert"]["pm"];
  EXPECT_EQ(ins["smos"], 11);
  EXPECT_EQ(ins["with_smo"]["operations"], 10);
  EXPECT_EQ(ins["with_smo"]["lines_flushed"], 60);
  EXPECT_DOUBLE_EQ(ins["with_smo"]["per_op"]["lines_flushed"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(ins["with_smo"]["per_op"]["fences"].get<double>(), 5.0);
  EXPECT_EQ(ins["without_smo"]["operations"], 90);
  EXPECT_EQ(ins["without_smo"]["lines_flushed"], 135);
  EXPECT_DOUBLE_EQ(ins["without_smo"]["per_op"]["lines_flushed"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(ins["without_smo"]["per_op"]["flushes"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(ins["per_op"]["lines_flushed"].get<double>(), 1.95);
  // Every op type has the split, zero when nothing happened.
  EXPECT_EQ(a["run"]["by_type"]["read"]["pm"]["with_smo"]["operations"], 0);

  const json& b = j["results"][1];
  EXPECT_EQ(b["load"]["method"], "bulk_load_by_inserts");
  EXPECT_TRUE(b["load"]["fill_factor"].is_null()) << "not applied";
  EXPECT_EQ(b["load"]["description"], "bulk load by inserts: fill factor not applied");
  EXPECT_EQ(j["results"][2]["load"]["method"], "inserts");
}

TEST(ReportText, SaysHowTheLoadWentAndSplitsInsertCost) {
  BenchReport rep = fake_report();
  rep.options.bulk_load = true;
  rep.options.fill_factor = 0.7;
  rep.results = {smo_result(LoadMethod::kBulkLoad), smo_result(LoadMethod::kBulkLoadByInserts)};
  const std::string t = report_text(rep);
  for (const char* s :
       {"# Load: bulk load, fill factor 0.70", "Load: bulk load at fill 0.70",
        "Load: bulk load by inserts: fill factor not applied", "Insert pattern: random",
        "insert: 1.95 lines/op; without SMO: 1.50 lines/op over 90 ops; with SMO: 6.00 lines/op "
        "over 10 ops",
        "insert: 11 SMOs in 10 of 100 ops", "with 2 threads (index rebuild 0.250000 s)",
        "== gamma:inner=dram"}) {
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
  }
  EXPECT_EQ(smo_split_text("insert", TypeCounts{}), "");
  // No SMO anywhere (a volatile index): no split section.
  rep.results = {fake_result("alpha", 1000, false)};
  EXPECT_EQ(report_text(rep).find("without SMO"), std::string::npos);
}

/// CPU counters of a machine with hardware counters: 4000 run operations,
/// 1500 instructions and 500 cycles each (IPC 3), 250 ns of task-clock each.
CpuCounters counted_cpu(uint64_t ops) {
  CpuCounters c = cpu_counters_all_available();
  c.instructions.value = 1500 * ops;
  c.cycles.value = 500 * ops;
  c.task_clock.value = 250 * ops;
  return c;
}

/// CPU counters of a VM without a PMU: only the software task-clock.
CpuCounters vm_cpu(uint64_t ops) {
  CpuCounters c;
  c.instructions.reason = "no instructions counter on this CPU or VM (ENOENT)";
  c.cycles.reason = "no cycles counter on this CPU or VM (ENOENT)";
  c.task_clock = {true, "", 300 * ops};
  return c;
}

TEST(ReportCpu, CountedInstructionsAndCyclesPerOperation) {
  BenchReport rep = fake_report();
  for (IndexResult& r : rep.results) {
    r.load.cpu = counted_cpu(r.load.operations);
    r.run.cpu = counted_cpu(r.run.operations);
  }
  rep.results[1].run.cpu.instructions.value = 2000 * 4000;  // beta: 2000/op, IPC 4
  const json j = report_json(rep);
  EXPECT_EQ(j["options"]["perf_counters"], true);
  const json& run = j["results"][0]["run"]["cpu"];
  EXPECT_EQ(run["instructions"]["available"], true);
  EXPECT_EQ(run["instructions"]["count"], 1500u * 4000);
  EXPECT_DOUBLE_EQ(run["instructions"]["per_op"].get<double>(), 1500.0);
  EXPECT_TRUE(run["instructions"]["reason"].is_null());
  EXPECT_DOUBLE_EQ(run["cycles"]["per_op"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(run["task_clock_ns"]["per_op"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(run["ipc"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["results"][0]["load"]["cpu"]["instructions"]["per_op"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(j["results"][1]["run"]["cpu"]["ipc"].get<double>(), 4.0);

  const std::string t = report_text(rep);
  for (const char* s : {"CPU counters", "load instructions: 1500.0/op (1500000)",
                        "run  instructions: 1500.0/op (6000000); cycles: 500.0/op (2000000); "
                        "IPC 3.00; task-clock: 250.0 ns/op (1000000)"}) {
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
  }
  const std::string table = comparison_table(rep.results);
  EXPECT_NE(table.find("instr/op"), std::string::npos) << table;
  EXPECT_NE(table.find("IPC"), std::string::npos) << table;
  EXPECT_NE(table.find("1500.0"), std::string::npos) << table;
  EXPECT_NE(table.find("2000.0"), std::string::npos) << table;
  EXPECT_NE(table.find("4.00"), std::string::npos) << table;
  EXPECT_EQ(table.find("not available"), std::string::npos) << table;

  // One index without the counters: n/a in its row, the column stays.
  rep.results[1].run.cpu = vm_cpu(4000);
  const std::string mixed = comparison_table(rep.results);
  EXPECT_NE(mixed.find("instr/op"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("n/a"), std::string::npos) << mixed;
}

TEST(ReportCpu, NotAvailableCarriesTheReasonAndNoNumber) {
  BenchReport rep = fake_report();
  for (IndexResult& r : rep.results) {
    r.load.cpu = vm_cpu(r.load.operations);
    r.run.cpu = vm_cpu(r.run.operations);
  }
  const json j = report_json(rep);
  for (const char* phase : {"load", "run"}) {
    const json& cpu = j["results"][0][phase]["cpu"];
    for (const char* e : {"instructions", "cycles"}) {
      EXPECT_EQ(cpu[e]["available"], false) << phase << " " << e;
      EXPECT_TRUE(cpu[e]["count"].is_null()) << phase << " " << e;
      EXPECT_TRUE(cpu[e]["per_op"].is_null()) << phase << " " << e;
      EXPECT_NE(cpu[e]["reason"].get<std::string>().find("(ENOENT)"), std::string::npos);
    }
    EXPECT_TRUE(cpu["ipc"].is_null()) << phase;
    EXPECT_EQ(cpu["task_clock_ns"]["available"], true) << phase;
    EXPECT_DOUBLE_EQ(cpu["task_clock_ns"]["per_op"].get<double>(), 300.0) << phase;
  }
  const std::string t = report_text(rep);
  for (const char* s :
       {"run  instructions: not available (no instructions counter on this CPU or VM (ENOENT)); "
        "cycles: not available (no cycles counter on this CPU or VM (ENOENT)); task-clock: 300.0 "
        "ns/op (1200000)"}) {
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
  }
  EXPECT_EQ(t.find("IPC"), std::string::npos) << "no IPC without cycles";
  const std::string table = comparison_table(rep.results);
  EXPECT_EQ(table.find("instr/op"), std::string::npos) << "no column without counts\n" << table;
  EXPECT_NE(
      table.find(
          "instructions/op: not available (no instructions counter on this CPU or VM (ENOENT))"),
      std::string::npos)
      << table;

  // Turned off: said so; a result that never measured: "not measured".
  rep.options.perf_counters = false;
  EXPECT_EQ(report_json(rep)["options"]["perf_counters"], false);
  EXPECT_EQ(result_json(fake_result("delta", 10, false))["run"]["cpu"]["instructions"]["reason"],
            "not measured");
}

TEST(ReportEnergy, FiguresPerPhaseAndPerOperation) {
  BenchReport rep = fake_report();
  rep.options.energy = true;
  for (IndexResult& r : rep.results) {
    r.energy_measured = true;
    r.energy_dram = true;
    r.load.energy = Joules{2.0, 0.5};  // 1000 load ops
    r.run.energy = Joules{8.0, 1.0};   // 4000 run ops
  }
  rep.results[1].energy_dram = false;  // a CPU without a DRAM zone
  rep.results[1].run.energy = Joules{8.0, 0.0};
  const json j = report_json(rep);
  EXPECT_EQ(j["options"]["energy"], (json{{"available", true}, {"dram", true}}));
  const json& load = j["results"][0]["load"]["energy"];
  EXPECT_EQ(load["available"], true);
  EXPECT_DOUBLE_EQ(load["package_j"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(load["dram_j"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(load["package_j_per_op"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(load["dram_j_per_op"].get<double>(), 0.0005);
  const json& run = j["results"][0]["run"]["energy"];
  EXPECT_DOUBLE_EQ(run["package_j_per_op"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(run["dram_j_per_op"].get<double>(), 0.00025);
  const json& no_dram = j["results"][1]["run"]["energy"];
  EXPECT_DOUBLE_EQ(no_dram["package_j"].get<double>(), 8.0);
  EXPECT_TRUE(no_dram["dram_j"].is_null());
  EXPECT_TRUE(no_dram["dram_j_per_op"].is_null());

  const std::string t = report_text(rep);
  for (const char* s : {"Energy (RAPL, whole machine over the phase):",
                        "\tload 2.000 J package, 0.500 J DRAM; 2000.000 uJ/op package, 500.000 "
                        "uJ/op DRAM\n",
                        "\trun  8.000 J package, 1.000 J DRAM; 2000.000 uJ/op package, 250.000 "
                        "uJ/op DRAM\n",
                        "\trun  8.000 J package, no DRAM zone; 2000.000 uJ/op package\n"}) {
    EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
  }
  EXPECT_EQ(t.find("Energy: not available"), std::string::npos) << t;
}

TEST(ReportEnergy, NotAvailableIsOneLineWithTheReasonAndNoNumber) {
  BenchReport rep = fake_report();
  // Without --energy: null, and no energy line.
  json j = report_json(rep);
  EXPECT_TRUE(j["options"]["energy"].is_null());
  EXPECT_TRUE(j["results"][0]["run"]["energy"].is_null());
  EXPECT_EQ(report_text(rep).find("Energy"), std::string::npos);

  const std::string why = "no /sys/class/powercap: the machine exposes no RAPL counters";
  rep.options.energy = true;
  for (IndexResult& r : rep.results) {
    r.energy_measured = true;
    r.energy_why = why;
  }
  j = report_json(rep);
  EXPECT_EQ(j["options"]["energy"], (json{{"available", false}, {"reason", why}}));
  for (const char* phase : {"load", "run"}) {
    EXPECT_EQ(j["results"][0][phase]["energy"], (json{{"available", false}, {"reason", why}}))
        << phase;
  }
  const std::string t = report_text(rep);
  const std::string line = "Energy: not available on this machine (" + why + ")\n";
  const size_t at = t.find(line);
  ASSERT_NE(at, std::string::npos) << t;
  EXPECT_NE(t.find(line, at + 1), std::string::npos) << "one line per index\n" << t;
  EXPECT_EQ(t.find(" J package"), std::string::npos) << t;

  // --energy with no index that ran: still says why.
  rep.results.clear();
  EXPECT_EQ(report_json(rep)["options"]["energy"]["available"], false);
}

TEST(ReportFailures, FailuresErrorsAndBadStructureCount) {
  BenchReport rep = fake_report();
  EXPECT_FALSE(report_has_failures(rep));
  rep.results[0].failures = 3;
  rep.results[0].failure_examples = {"run thread 0 op 1: read key 5: expected found"};
  EXPECT_TRUE(report_has_failures(rep));
  EXPECT_NE(report_text(rep).find("expected found"), std::string::npos);
  rep.results[0].failures = 0;
  rep.results[1].recovery = Status::Corruption("bad");
  EXPECT_TRUE(report_has_failures(rep));
  rep.results[1].recovery = Status::Ok();
  rep.errors.emplace_back("gamma", Status::OutOfSpace("pool full"));
  EXPECT_TRUE(report_has_failures(rep));
  EXPECT_EQ(report_json(rep)["errors"][0]["index"], "gamma");
}

TEST(ReportKeyType, IntegerAndStringKeysInTextAndJson) {
  BenchReport rep = fake_report();
  json j = report_json(rep);
  EXPECT_EQ(j["options"]["key_type"], "integer");
  EXPECT_EQ(j["options"]["key_size"], 8);
  EXPECT_NE(report_text(rep).find("Key type: integer, 8 bytes"), std::string::npos);
  rep.spec.key_type = KeyType::kString;
  rep.spec.key_size = 32;
  j = report_json(rep);
  EXPECT_EQ(j["schema"], "nvindex.bench/1");
  EXPECT_EQ(j["options"]["key_type"], "string");
  EXPECT_EQ(j["options"]["key_size"], 32);
  std::string t = report_text(rep);
  EXPECT_NE(t.find("Key type: string, 32 bytes (\"user\" + zero-padded decimal)"),
            std::string::npos)
      << t;
  rep.spec.keys_file = "/usr/share/dict/words";
  t = report_text(rep);
  EXPECT_NE(t.find("the file's keys as they are"), std::string::npos) << t;
}

TEST(ReportSmoTime, PercentilesAreBucketMidpointsAndTheJsonHasTheBuckets) {
  IndexResult r = fake_result("alpha", 1000, true);
  // 90 SMOs of about 1 us, 9 of about 10 us, 1 of about 100 us.
  r.run.pm.smo_time[pm::smo_time_bucket(1000)] = 90;
  r.run.pm.smo_time[pm::smo_time_bucket(10000)] = 9;
  r.run.pm.smo_time[pm::smo_time_bucket(100000)] = 1;
  r.run.pm.smo_ns = 90 * 1000 + 9 * 10000 + 100000;
  const SmoTimeSummary m = smo_time_summary(r.run.pm);
  EXPECT_EQ(m.timed, 100u);
  EXPECT_DOUBLE_EQ(m.mean_ns, 2800.0);
  const auto mid = [](uint64_t ns) {
    const int b = pm::smo_time_bucket(ns);
    return (pm::smo_time_bucket_floor(b) + pm::smo_time_bucket_floor(b + 1)) / 2;
  };
  EXPECT_EQ(m.p50_ns, mid(1000));
  EXPECT_EQ(m.p90_ns, mid(1000));
  EXPECT_EQ(m.p99_ns, mid(10000));
  EXPECT_EQ(m.p99_9_ns, mid(100000));
  EXPECT_EQ(m.max_ns, pm::smo_time_bucket_floor(pm::smo_time_bucket(100000) + 1));
  EXPECT_EQ(smo_time_summary(pm::CounterSnapshot{}).timed, 0u);
  EXPECT_EQ(smo_time_text(pm::CounterSnapshot{}), "");

  BenchReport rep = fake_report();
  rep.results[1] = r;
  const json j = report_json(rep);
  const json& t = j["results"][1]["run"]["pm"]["smo_time"];
  EXPECT_EQ(t["timed"].get<uint64_t>(), 100u);
  EXPECT_EQ(t["p99_ns"].get<uint64_t>(), m.p99_ns);
  ASSERT_EQ(t["buckets"].size(), 3u);
  EXPECT_EQ(t["buckets"][0][0].get<uint64_t>(),
            pm::smo_time_bucket_floor(pm::smo_time_bucket(1000)));
  EXPECT_EQ(t["buckets"][0][1].get<uint64_t>(), 90u);
  const std::string text = report_text(rep);
  EXPECT_NE(text.find("SMO time: 100 timed, mean 2800 ns"), std::string::npos) << text;
}

TEST(Stats, NearestRankPercentilesOfOneToHundred) {
  std::vector<uint64_t> v(100);
  std::iota(v.begin(), v.end(), 1);
  std::reverse(v.begin(), v.end());  // summarize sorts
  const LatencySummary s = summarize_latencies(&v);
  EXPECT_EQ(s.samples, 100u);
  EXPECT_EQ(s.min, 1u);
  EXPECT_EQ(s.p50, 50u);
  EXPECT_EQ(s.p90, 90u);
  EXPECT_EQ(s.p99, 99u);
  EXPECT_EQ(s.p99_9, 100u);
  EXPECT_EQ(s.p99_99, 100u);
  EXPECT_EQ(s.p99_999, 100u);
  EXPECT_EQ(s.max, 100u);
}

TEST(Stats, NearestRankEdgeCases) {
  std::vector<uint64_t> v(1000);
  std::iota(v.begin(), v.end(), 1);
  EXPECT_EQ(nearest_rank(v, 99.9), 999u);  // ceil(0.999 * 1000) = 999, not 1000
  EXPECT_EQ(nearest_rank(v, 0), 1u);
  EXPECT_EQ(nearest_rank(v, 100), 1000u);
  EXPECT_EQ(nearest_rank(std::vector<uint64_t>{}, 50), 0u);
  EXPECT_EQ(nearest_rank(std::vector<uint64_t>{7}, 99.999), 7u);
  std::vector<uint64_t> empty;
  EXPECT_EQ(summarize_latencies(&empty).samples, 0u);
}

TEST(Stats, SamplerRate) {
  LatencySampler all(1.0, 1), none(0.0, 1), some(0.01, 42);
  uint64_t a = 0, n = 0, s = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    a += all.should_sample(i);
    n += none.should_sample(i);
    s += some.should_sample(i);
  }
  EXPECT_EQ(a, 100000u);
  EXPECT_EQ(n, 0u);
  EXPECT_GT(s, 800u);  // mean 1000; the gap is uniform in [1, 199]
  EXPECT_LT(s, 1200u);
}

}  // namespace
}  // namespace nvindex::bench
