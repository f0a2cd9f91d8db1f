// `nvindex crashtest`: the crash-consistency lab (issue 3 §2, §4, §7) from
// the command line. Runs crash scenarios on a persistent index under the
// crash simulator and checks every crash image with the oracle
// (src/crash/oracle.h); `--ablate all` runs the ablation self-test.
// Exit codes: 0 no failure (and, for --ablate all, every site caught or
// noted), 1 failures found (or an uncaught site without a note, or the run
// could not be made), 2 bad usage.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crash/oracle.h"
#include "nvindex/index.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/index_opts.h"

namespace nvindex::tools {
namespace {

namespace cs = pm::crashsim;
using nlohmann::json;

/// crashtest's node size when --node-size is not given, bytes.
constexpr uint32_t kCrashNodeSize = 256;

struct CrashArgs {
  std::string index;
  KeyType key_type = KeyType::kInteger;
  size_t ops = 30;
  uint64_t seed = 1;
  uint32_t budget = 256;
  std::string profile = "adr";
  std::string ablate;
  uint32_t node_size = 0;  ///< 0: not given (256, or the index's own default)
  size_t scenarios = 1;
  std::string output;
  unsigned jobs = 1;
  double timeout = 20;
  std::vector<std::string> index_opts;
  bool quiet = false;
};

json lint_json(const cs::LintReport& l) {
  return json{{"not_durable_at_return", l.not_durable_at_return},
              {"flush_without_fence", l.flush_without_fence},
              {"redundant_flush", l.redundant_flush},
              {"redundant_fence", l.redundant_fence}};
}

json failure_json(const crash::Failure& f) {
  return json{{"index", f.index},
              {"key_type", std::string(key_type_name(f.key_type))},
              {"node_size", f.node_size},
              {"seed", f.seed},
              {"ops", f.ops},
              {"op_number", f.op_number},
              {"op", f.op},
              {"live", f.live},
              {"crash_point", f.crash_point},
              {"at_fence", f.at_fence},
              {"site", f.site},
              {"fences", f.fences},
              {"choice", f.choice},
              {"ablation", f.ablation},
              {"what", f.what}};
}

json report_json(const crash::Report& r) {
  json sites = json::object();
  for (const auto& [k, v] : r.sites) sites[k] = {{"flushes", v.flushes}, {"fences", v.fences}};
  json ex = json::array();
  for (const auto& f : r.examples) ex.push_back(failure_json(f));
  json notes = json::object();
  for (const auto& [k, v] : r.ablation_notes) notes[k] = v;
  const crash::Options& o = r.options;
  return json{{"index", o.index},
              {"key_type", std::string(key_type_name(o.key_type))},
              {"node_size", o.node_size},
              {"seed", o.seed},
              {"ops_per_scenario", o.ops},
              {"scenarios", r.scenarios},
              {"operations", r.operations},
              {"budget", o.images.budget},
              {"profile", std::string(cs::profile_name(o.sim.profile))},
              {"crash_points", r.crash_points},
              {"fence_crash_points", r.fence_points},
              {"return_crash_points", r.boundary_points},
              {"images_checked", r.images},
              {"recovered_before_op", r.recovered_before},
              {"recovered_after_op", r.recovered_after},
              {"recovery_crash_samples", r.nested_samples},
              {"recovery_crash_points", r.nested_points},
              {"recovery_crash_images", r.nested_images},
              {"seconds", r.seconds},
              {"images_per_second", r.images_per_second()},
              {"failures", r.failures},
              {"failure_examples", ex},
              {"uninstrumented_writes", r.uninstrumented_writes},
              {"uninstrumented_examples", r.uninstrumented_examples},
              {"lint", lint_json(r.lint)},
              {"sites", sites},
              {"ablation_notes", notes}};
}

void print_counts(const char* what, const std::map<std::string, uint64_t>& m) {
  uint64_t total = 0;
  for (const auto& [k, v] : m) total += v;
  std::printf("  %-26s %llu\n", what, static_cast<unsigned long long>(total));
  for (const auto& [k, v] : m) {
    std::printf("    %-40s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  }
}

void print_report(const crash::Report& r) {
  const crash::Options& o = r.options;
  std::printf(
      "crashtest %s: %s keys, node size %u B, %llu scenarios x %zu ops, seed %llu, budget %u, "
      "profile %s\n",
      index_with_opts(o.index, o.index_opts).c_str(),
      std::string(key_type_name(o.key_type)).c_str(), o.node_size,
      static_cast<unsigned long long>(r.scenarios), o.ops, static_cast<unsigned long long>(o.seed),
      o.images.budget, std::string(cs::profile_name(o.sim.profile)).c_str());
  std::printf("crash points:          %llu (%llu before a fence, %llu at an operation's return)\n",
              static_cast<unsigned long long>(r.crash_points),
              static_cast<unsigned long long>(r.fence_points),
              static_cast<unsigned long long>(r.boundary_points));
  std::printf(
      "images checked:        %llu (recovered to the state before the op: %llu, "
      "after: %llu)\n",
      static_cast<unsigned long long>(r.images),
      static_cast<unsigned long long>(r.recovered_before),
      static_cast<unsigned long long>(r.recovered_after));
  std::printf("images/s:              %.1f (%.1f s)\n", r.images_per_second(), r.seconds);
  std::printf(
      "crash in recovery:     %llu images re-recovered, %llu recovery crash points, "
      "%llu images recovered again\n",
      static_cast<unsigned long long>(r.nested_samples),
      static_cast<unsigned long long>(r.nested_points),
      static_cast<unsigned long long>(r.nested_images));
  std::printf("failures:              %llu\n", static_cast<unsigned long long>(r.failures));
  for (size_t i = 0; i < r.examples.size(); ++i) {
    std::printf("  [%zu] %s\n", i + 1, r.examples[i].to_string().c_str());
  }
  std::printf("uninstrumented writes: %llu\n",
              static_cast<unsigned long long>(r.uninstrumented_writes));
  for (const std::string& e : r.uninstrumented_examples) std::printf("  %s\n", e.c_str());
  std::printf("lint (by site):\n");
  print_counts("not durable at return", r.lint.not_durable_at_return);
  print_counts("flush without fence", r.lint.flush_without_fence);
  print_counts("redundant flush", r.lint.redundant_flush);
  print_counts("redundant fence", r.lint.redundant_fence);
}

int run_crashtest(const CrashArgs& a) {
  crash::Options o;
  o.index = a.index;
  o.key_type = a.key_type;
  o.ops = a.ops;
  o.seed = a.seed;
  o.node_size = a.node_size;
  if (o.node_size == 0) {
    // Not given: 256 (splits within a few operations), or the index's own
    // default where it does not take 256 (run_node_size, as bench).
    const IndexEntry* e = find_index_entry(a.index);
    o.node_size = e != nullptr ? run_node_size(*e, kCrashNodeSize) : kCrashNodeSize;
  }
  o.scenarios = a.scenarios;
  o.jobs = a.jobs;
  o.child_timeout_s = a.timeout;
  o.quiet = a.quiet;
  o.images.budget = a.budget;
  if (Status s = cs::parse_profile(a.profile, &o.sim.profile); !s.ok()) {
    std::fprintf(stderr, "nvindex crashtest: --profile: %s\n", s.message().c_str());
    return 2;
  }
  if (Status s = check_node_size_for(o.index, o.node_size); !s.ok()) {
    std::fprintf(stderr, "nvindex crashtest: --node-size: %s\n", s.message().c_str());
    return 2;
  }
  if (Status s = parse_index_opts_for(o.index, a.index_opts, &o.index_opts); !s.ok()) {
    std::fprintf(stderr, "nvindex crashtest: %s\n", s.message().c_str());
    return 2;
  }
  json out;
  int rc = 0;
  if (a.ablate == "all") {
    crash::AblationReport ar;
    if (Status s = crash::run_ablation(o, &ar); !s.ok()) {
      std::fprintf(stderr, "nvindex crashtest: %s\n", s.ToString().c_str());
      return s.code() == Code::kInvalidArgument ? 2 : 1;
    }
    std::printf("== baseline (no ablation)\n");
    print_report(ar.baseline);
    std::printf("== ablation self-test: %zu cases, %.1f s\n", ar.cases.size(), ar.seconds);
    json cases = json::array();
    for (const crash::AblationCase& c : ar.cases) {
      const char* verdict = c.caught ? "caught" : c.note.empty() ? "NOT CAUGHT" : "not caught";
      std::printf("  %-44s %-11s (%llu images)%s%s\n", c.label().c_str(), verdict,
                  static_cast<unsigned long long>(c.images), c.caught ? ": " : "",
                  c.caught ? c.first.what.substr(0, 100).c_str() : "");
      if (!c.caught && !c.note.empty()) std::printf("      note: %s\n", c.note.c_str());
      cases.push_back({{"site", c.site},
                       {"kind", c.fence ? "fence" : "flush"},
                       {"caught", c.caught},
                       {"images", c.images},
                       {"note", c.note},
                       {"first_failure", c.caught ? failure_json(c.first) : json()}});
    }
    std::printf("uncaught without a note: %llu\n",
                static_cast<unsigned long long>(ar.uncaught_without_note));
    out = {{"schema", "nvindex.crashtest/1"},
           {"baseline", report_json(ar.baseline)},
           {"ablation", cases},
           {"uncaught_without_note", ar.uncaught_without_note},
           {"seconds", ar.seconds},
           {"ok", ar.ok()}};
    rc = ar.ok() ? 0 : 1;
  } else {
    if (!a.ablate.empty()) {
      // "SITE" drops the site's flushes and fences; "SITE/flush" or
      // "SITE/fence" only one kind (the self-test's case labels).
      std::string site = a.ablate;
      o.ablate_flush = true;
      o.ablate_fence = true;
      if (site.ends_with("/flush")) {
        site.resize(site.size() - 6);
        o.ablate_fence = false;
      } else if (site.ends_with("/fence")) {
        site.resize(site.size() - 6);
        o.ablate_flush = false;
      }
      o.ablate_site = site;
    }
    crash::Report r;
    if (Status s = crash::run_crash_test(o, &r); !s.ok()) {
      std::fprintf(stderr, "nvindex crashtest: %s\n", s.ToString().c_str());
      return s.code() == Code::kInvalidArgument ? 2 : 1;
    }
    if (!o.ablate_site.empty() && r.sites.count(o.ablate_site) == 0) {
      // A misspelt site would otherwise look like a clean ablation run.
      std::string known;
      for (const auto& [key, counts] : r.sites) known += (known.empty() ? "" : ", ") + key;
      std::fprintf(stderr,
                   "nvindex crashtest: --ablate %s: the run never reached site '%s' (nothing "
                   "was dropped); sites reached: %s\n",
                   a.ablate.c_str(), o.ablate_site.c_str(), known.c_str());
      return 2;
    }
    print_report(r);
    out = report_json(r);
    out["schema"] = "nvindex.crashtest/1";
    out["ablate"] = a.ablate;
    out["ok"] = r.ok();
    rc = r.ok() ? 0 : 1;
  }
  if (!a.output.empty() && !write_file(a.output, out.dump(2) + "\n")) {
    std::fprintf(stderr, "nvindex crashtest: cannot write %s\n", a.output.c_str());
    return 1;
  }
  return rc;
}

}  // namespace

void add_crashtest_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<CrashArgs>();
  CLI::App* cmd = app.add_subcommand(
      "crashtest",
      "Crash-consistency lab: run crash scenarios on a persistent index under the crash "
      "simulator, recover and check every crash image. Exit 0 no failure, 1 failures, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_index_name(cmd, "--index", &a->index, "Registered persistent index")->required();
  add_key_type_option(cmd, &a->key_type,
                      "integer keys, or the index's string instance with byte-string keys "
                      "(the key ids' string form, docs/crash-lab.md)");
  add_count(cmd, "--ops", &a->ops, 1, 100000, "Operations per scenario");
  add_seed(cmd, "--seed", &a->seed, "Seed of the first scenario (scenario s uses seed + s)");
  add_count(cmd, "--budget", &a->budget, 1, 1 << 20, "Images per crash point before sampling");
  add_choice(cmd, "--profile", &a->profile, {"adr", "eadr"}, "Persistence domain");
  add_text(cmd, "--ablate", &a->ablate,
           "all: the ablation self-test; SITE: drop that site's flushes and fences; SITE/flush or "
           "SITE/fence: only one kind. A site the run never reaches is a usage error (exit 2)");
  add_count(cmd, "--node-size", &a->node_size, 64, 65536,
            "Node size in bytes (default 256: splits within a few operations; an index that "
            "does not take 256 runs at its own default)");
  add_count(cmd, "--scenarios", &a->scenarios, 1, 100000, "Scenarios to run");
  add_path(cmd, "--output", &a->output, ValueKind::kOutputFile,
           "Also write the results as JSON to FILE");
  add_count(cmd, "--jobs", &a->jobs, 1, 16, "Image checks in flight at once");
  add_real(cmd, "--timeout", &a->timeout, 0, 3600, true, "(0, 3600] s",
           "Seconds before a recovery check counts as hung");
  add_text(cmd, "--index-opt", &a->index_opts, "Index-specific knob name=value (repeatable)");
  add_switch(cmd, "-q,--quiet", &a->quiet, "No progress lines on stderr");
  cmd->callback([a, exit_code] { *exit_code = run_crashtest(*a); });
}

}  // namespace nvindex::tools
