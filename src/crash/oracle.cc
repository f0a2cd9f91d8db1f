// The crash-lab oracle's scenario runner and runs: see oracle.h for what is
// checked and why. The parts live beside it: scenario.cc (the operations and
// the model), check.{h,cc} (what a child does with an image), runner.{h,cc}
// (the children and their verdicts), report.cc (failure text, ablation
// notes), images.{h,cc} (the images of a crash point).
//
// Process structure. The parent runs the scenario under the simulator; at
// every crash point the visitor forks one child per image (the child sees the
// image bytes as they were at fork time, copy-on-write, so the parent may go
// on at once; up to Options::jobs children run at a time). A child reports
// one line on a pipe: "B" or "A" (recovered to the model before / after the
// operation), or "F <what>"; a child that dies without a verdict (a crash in
// recovery) or outlives its deadline (killed: a hang) is a failure too.
// Sampled images are kept as line diffs against the pool as created and are
// re-recovered under a nested simulator after the scenario (when no
// simulator is attached in the parent, so the child can attach its own).
#include "crash/oracle.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "crash/check.h"
#include "crash/images.h"
#include "crash/runner.h"
#include "crash/string_keys.h"
#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"
#include "nvindex/pm/pool.h"

namespace nvindex::crash {

namespace cs = pm::crashsim;
using detail::CheckContext;
using detail::kMax;
using detail::Runner;
using detail::Sample;

namespace {

using Clock = std::chrono::steady_clock;

template <class M>
void add_counts(M* into, const M& from) {
  for (const auto& [k, v] : from) (*into)[k] += v;
}

/// One scenario (oracle.h: "A scenario"), phase by phase: pool setup, the
/// image checks, index creation, the operations, the live index's check, the
/// simulator's counts, and the crash-during-recovery samples. Scenario s
/// uses seed Options::seed + s, pool and image files
/// <dir>/nvx-crashtest-<pid>-*, and reports into the run's Report through
/// the run's Runner. Not copyable: the image visitor and the children's
/// contexts point into it.
class ScenarioRun {
 public:
  ScenarioRun(const Options& o, size_t scenario, Report* rep, Runner* runner,
              uint64_t* file_counter)
      : o_(o),
        scenario_(scenario),
        rep_(rep),
        runner_(runner),
        file_counter_(file_counter),
        seed_(o.seed + scenario),
        sc_(make_scenario(seed_, o.ops)),
        prefix_(o.dir + "/nvx-crashtest-" + std::to_string(::getpid()) + "-") {}
  ScenarioRun(const ScenarioRun&) = delete;
  ScenarioRun& operator=(const ScenarioRun&) = delete;

  /// Runs the scenario. Failures found go to the report; errors (the run
  /// could not be made) are returned: Pool::create, Simulator::attach,
  /// set_image_visitor, index creation, and IOError when a child for a
  /// crash-during-recovery check cannot be started.
  Status run() {
    Status s = open_pool();
    if (s.ok()) s = install_checks();
    if (s.ok()) s = create_index();
    if (!s.ok()) return s;
    run_ops();
    sim_->set_crash_points(false);
    runner_->drain();
    if (!runner_->stop) check_live();  // the live index must hold the model too
    collect_counts();
    idx_.reset();
    sim_.reset();  // before the pool (crashsim.h)
    pool_.reset();
    ++rep_->scenarios;
    if (o_.stop_at_first_failure && !rep_->ok()) runner_->stop = true;
    return check_recovery_crashes();
  }

 private:
  /// Pool setup: a fresh Options::pool_bytes crash-sim pool file (its name
  /// unlinked at once: the mapping is all that is needed), the simulator
  /// attached with the ablation if any, and the pool's bytes as created
  /// (base_, against which sampled images are kept as line diffs). Errors
  /// of Pool::create and Simulator::attach.
  Status open_pool() {
    const std::string pool_path = prefix_ + "s" + std::to_string(scenario_) + ".pool";
    ::unlink(pool_path.c_str());
    pm::PersistConfig cfg = pm::current_config();
    cfg.mode = pm::Mode::kCrashSim;
    pm::configure(cfg);
    Status s = pm::Pool::create(pool_path, o_.pool_bytes, pool_layout(o_.index, o_.key_type),
                                pm::Mode::kCrashSim, &pool_);
    if (!s.ok()) return s;
    ::unlink(pool_path.c_str());  // the mapping stays; nothing else needs the name
    s = cs::Simulator::attach(pool_.get(), o_.sim, &sim_);
    if (!s.ok()) return s;
    if (!o_.ablate_site.empty()) sim_->ablate(o_.ablate_site, o_.ablate_flush, o_.ablate_fence);
    base_.assign(pool_->base(), pool_->base() + pool_->size());
    return Status::Ok();
  }

  /// The failure template every report of this scenario starts from, the
  /// children's check context, and the image visitor (check_image) with the
  /// image budget and the scenario's seed. Errors of set_image_visitor.
  Status install_checks() {
    const std::string ablation =
        o_.ablate_site.empty()
            ? ""
            : o_.ablate_site + (o_.ablate_flush && o_.ablate_fence ? "/flush+fence"
                                : o_.ablate_fence                  ? "/fence"
                                                                   : "/flush");
    ctx_.options = &o_;
    ctx_.universe = &sc_.universe;
    ctx_.before = &before_;
    ctx_.after = &after_;
    tmpl_.index = o_.index;
    tmpl_.key_type = o_.key_type;
    tmpl_.node_size = o_.node_size;
    tmpl_.seed = seed_;
    tmpl_.ops = o_.ops;
    tmpl_.ablation = ablation;
    ImageOptions io = o_.images;
    io.seed = seed_;
    return set_image_visitor(sim_.get(), io, [this](const cs::CrashPoint& cp, const Image& img) {
      return check_image(cp, img);
    });
  }

  /// "create" before the first operation, else the text of the one in flight.
  std::string op_label() const {
    return op_number_ < 0 ? std::string("create")
                          : op_text(sc_.ops[static_cast<size_t>(op_number_)]);
  }

  /// The image visitor: counts the crash point, keeps every nested_every-th
  /// image (at most nested_max) for the crash-during-recovery check, and
  /// forks a child that checks the image (child_check_image). Returns false
  /// to stop this crash point's images (the run stops, or the child could
  /// not be started: a failure).
  bool check_image(const cs::CrashPoint& cp, const Image& img) {
    if (runner_->stop) return false;
    if (cp.number != last_point_) {
      last_point_ = cp.number;
      point_images_ = 0;
      ++(cp.at_fence ? rep_->fence_points : rep_->boundary_points);
    }
    if (o_.max_images_per_point != 0 && point_images_ >= o_.max_images_per_point) return false;
    ++point_images_;
    ctx_.allow_before = cp.at_fence && in_op_;
    Failure f = tmpl_;
    f.op_number = op_number_;
    f.op = op_label();
    f.crash_point = cp.number;
    f.at_fence = cp.at_fence;
    f.site = cp.site;
    f.fences = cp.fences;
    f.choice = img.choice;
    const size_t size = img.bytes->size();
    if (o_.nested_every > 0 && image_count_++ % o_.nested_every == 0 &&
        samples_.size() < o_.nested_max) {
      samples_.push_back({detail::diff_lines(base_.data(), img.bytes->data(), size), f});
    }
    const std::string path = prefix_ + std::to_string((*file_counter_)++) + ".img";
    const char* bytes = img.bytes->data();
    Status st = runner_->spawn(f, Runner::Kind::kImage, {path}, [&](int fd) {
      detail::child_check_image(ctx_, bytes, size, path, fd);
    });
    if (!st.ok()) {
      f.what = "cannot run the check: " + st.ToString();
      runner_->fail(f);
      return false;
    }
    return !runner_->stop;
  }

  /// Index creation, with crash points on: a crash here must recover to an
  /// empty index. Then the "create" crash point, the index's capabilities
  /// and ablation notes, and the PM overhead beyond its nodes. Errors of
  /// make_index (after the children in flight have ended).
  Status create_index() {
    sim_->set_crash_points(true);
    Status s = detail::make_scenario_index(o_, pool_.get(), &idx_);
    if (!s.ok()) {
      sim_->set_crash_points(false);
      runner_->drain();
      return s;
    }
    const IndexInfo info = idx_->info();
    sim_->operation_boundary("create");
    ctx_.ordered = info.caps.ordered;
    ctx_.placement = info.caps.placement;
    if (rep_->ablation_notes.empty()) rep_->ablation_notes = idx_->ablation_notes();
    measure_overhead(info);
    return Status::Ok();
  }

  /// The allocator's bytes in use right after creation beyond the blocks
  /// verify() accounts for (detail::structure_bytes; e.g. fastfair's 64 B
  /// root object), in bytes: the constant of the leak check (oracle.h, check
  /// 4). Unknown when verify() fails or accounts for no block.
  void measure_overhead(const IndexInfo& info) {
    VerifyReport r;
    if (!idx_->verify(&r).ok()) return;
    const uint64_t structure = detail::structure_bytes(r, info);
    const uint64_t in_use = pool_->allocator().bytes_in_use();
    ctx_.overhead_known = structure > 0 && in_use >= structure;
    ctx_.overhead = ctx_.overhead_known ? in_use - structure : 0;
  }

  /// Runs `op` on the live index.
  Status run_live_op(const Op& op) {
    switch (op.kind) {
      case Op::Kind::kInsert:
        return idx_->insert(op.key, op.value);
      case Op::Kind::kUpdate:
        return idx_->update(op.key, op.value);
      case Op::Kind::kRemove:
        return idx_->remove(op.key);
    }
    return Status();
  }

  /// The operations, each between the model before and after it (the
  /// visitor's valid outcomes), its status checked against the model's, and
  /// followed by its return crash point; stops early when the run stops.
  void run_ops() {
    for (size_t k = 0; k < sc_.ops.size() && !runner_->stop; ++k) {
      const Op& op = sc_.ops[k];
      before_ = model_;
      after_ = model_;
      const Code want = apply_op(op, &after_);
      op_number_ = static_cast<int64_t>(k);
      in_op_ = true;
      const Status got = run_live_op(op);
      in_op_ = false;
      ++rep_->operations;
      if (got.code() != want) {
        Failure f = tmpl_;
        f.op_number = op_number_;
        f.op = op_text(op);
        f.live = true;
        f.what = "the live index returned " + got.ToString() + ", expected " +
                 std::string(CodeName(want));
        runner_->fail(f);
      }
      model_ = after_;
      sim_->operation_boundary("op " + std::to_string(k) + ": " + op_text(op));
    }
  }

  /// The live index after the scenario (no crash involved): verify() and
  /// its content must equal the model; a failure otherwise.
  void check_live() {
    VerifyReport r;
    Status v = idx_->verify(&r);
    Model live;
    std::string err = v.ok() ? detail::read_content(*idx_, ctx_.ordered, sc_.universe, &live)
                             : "verify(): " + v.ToString();
    if (err.empty() && live != model_) err = detail::model_diff(live, model_);
    if (err.empty()) return;
    Failure f = tmpl_;
    f.op_number = static_cast<int64_t>(sc_.ops.size()) - 1;
    f.op = "(end of scenario)";
    f.live = true;
    f.what = "live index after the scenario: " + err;
    runner_->fail(f);
  }

  /// Adds the simulator's counts to the report: crash points,
  /// uninstrumented writes (first 8 examples), lint and sites.
  void collect_counts() {
    const cs::Stats& st = sim_->stats();
    rep_->crash_points += st.crash_points;
    rep_->uninstrumented_writes += st.uninstrumented_writes;
    for (const std::string& e : st.uninstrumented_examples) {
      if (rep_->uninstrumented_examples.size() < 8) rep_->uninstrumented_examples.push_back(e);
    }
    add_counts(&rep_->lint.not_durable_at_return, sim_->lint().not_durable_at_return);
    add_counts(&rep_->lint.flush_without_fence, sim_->lint().flush_without_fence);
    add_counts(&rep_->lint.redundant_flush, sim_->lint().redundant_flush);
    add_counts(&rep_->lint.redundant_fence, sim_->lint().redundant_fence);
    for (const auto& [k, v] : sim_->sites()) {
      rep_->sites[k].flushes += v.flushes;
      rep_->sites[k].fences += v.fences;
    }
  }

  /// Check 6 of oracle.h on the sampled images, one child each
  /// (child_nested), after the simulator is detached in this process so
  /// that each child can attach its own. IOError when a child cannot be
  /// started.
  Status check_recovery_crashes() {
    for (const Sample& sample : samples_) {
      if (runner_->stop) break;
      const std::string p1 = prefix_ + std::to_string((*file_counter_)++) + ".nst";
      const std::string p2 = prefix_ + std::to_string((*file_counter_)++) + ".nst";
      const bool ordered = ctx_.ordered;
      Status s = runner_->spawn(sample.ctx, Runner::Kind::kNested, {p1, p2}, [&](int fd) {
        detail::child_nested(o_, sc_.universe, ordered, base_, sample, p1, p2, fd);
      });
      if (!s.ok()) return s;
    }
    runner_->drain();
    return Status::Ok();
  }

  const Options& o_;
  const size_t scenario_;
  Report* const rep_;
  Runner* const runner_;
  uint64_t* const file_counter_;  ///< numbers image files across scenarios
  const uint64_t seed_;
  const Scenario sc_;
  const std::string prefix_;  ///< <dir>/nvx-crashtest-<pid>-
  // Destroyed in reverse: the index, then the simulator, then the pool.
  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<cs::Simulator> sim_;
  std::vector<char> base_;  ///< the pool as created
  Model model_;             ///< after the operations done so far
  Model before_, after_;    ///< around the operation in flight
  int64_t op_number_ = -1;  ///< the operation in flight or just returned; -1 = creation
  bool in_op_ = false;      ///< a fence crash point now may show before or after
  CheckContext ctx_;
  Failure tmpl_;
  std::vector<Sample> samples_;  ///< images for the crash-during-recovery check
  uint64_t image_count_ = 0;
  uint64_t last_point_ = kMax;
  uint32_t point_images_ = 0;  ///< images checked at crash point last_point_
  std::unique_ptr<Index<uint64_t>> idx_;
};

}  // namespace

// ------------------------------------------------------------ runs

Status run_crash_test(const Options& o, Report* rep) {
  *rep = Report{};
  rep->options = o;
  if (Status s = check_keyed_index("crashtest", o.index, o.key_type, true); !s.ok()) return s;
  if (o.ops == 0 || o.scenarios == 0) {
    return Status::InvalidArgument("crashtest: ops and scenarios must be >= 1");
  }
  if (o.images.budget == 0) return Status::InvalidArgument("crashtest: budget must be >= 1");
  if (o.jobs == 0 || o.jobs > 16) return Status::InvalidArgument("crashtest: jobs must be 1..16");
  const pm::PersistConfig saved = pm::current_config();
  const auto t0 = Clock::now();
  Status s;
  {
    Runner runner(o, rep);
    uint64_t counter = 0;
    for (size_t i = 0; i < o.scenarios && s.ok() && !runner.stop; ++i) {
      s = ScenarioRun(o, i, rep, &runner, &counter).run();
      if (!o.quiet) {
        std::fprintf(stderr, "crashtest %s: scenario %zu/%zu: %llu images, %llu failures, %.1f s\n",
                     o.index.c_str(), i + 1, o.scenarios,
                     static_cast<unsigned long long>(rep->images),
                     static_cast<unsigned long long>(rep->failures),
                     std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
  }
  pm::configure(saved);
  rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

Status run_ablation(const Options& o, AblationReport* rep) {
  *rep = AblationReport{};
  const auto t0 = Clock::now();
  Options base = o;
  base.ablate_site.clear();
  Status s = run_crash_test(base, &rep->baseline);
  if (!s.ok()) return s;
  if (!rep->baseline.ok()) {
    rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return Status::Ok();  // a failing baseline makes every case meaningless
  }
  const auto& notes = rep->baseline.ablation_notes;
  for (const auto& [site, counts] : rep->baseline.sites) {
    for (bool fence : {false, true}) {
      if ((fence ? counts.fences : counts.flushes) == 0) continue;
      Options a = o;
      a.ablate_site = site;
      a.ablate_flush = !fence;
      a.ablate_fence = fence;
      a.stop_at_first_failure = true;
      a.max_examples = 1;
      a.nested_every = 0;  // the main checks decide; the baseline covers recovery crashes
      Report r;
      s = run_crash_test(a, &r);
      if (!s.ok()) return s;
      AblationCase c;
      c.site = site;
      c.fence = fence;
      c.caught = !r.ok();
      c.images = r.images;
      c.note = find_note(notes, site, fence);
      if (!r.examples.empty()) c.first = r.examples.front();
      if (c.caught && r.examples.empty()) {
        c.first.what = std::to_string(r.uninstrumented_writes) + " uninstrumented writes";
      }
      if (!c.caught && c.note.empty()) ++rep->uncaught_without_note;
      if (!o.quiet) {
        std::fprintf(stderr, "ablation %s: %s (%llu images)\n", c.label().c_str(),
                     c.caught ? "caught" : (c.note.empty() ? "NOT caught" : "not caught (noted)"),
                     static_cast<unsigned long long>(c.images));
      }
      rep->cases.push_back(std::move(c));
    }
  }
  rep->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::Ok();
}

}  // namespace nvindex::crash
