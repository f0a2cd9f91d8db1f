// PMwCAS (pmwcas.h): descriptor pool, the three-step protocol, helping,
// recovery.
#include "pm/pmwcas.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "nvindex/pm/allocator.h"
#include "nvindex/pm/persist.h"

namespace nvindex::pm {

namespace {

constexpr uint32_t kBlockBytes = Allocator::kMaxBlock;  // 4096

uint64_t strip(uint64_t v) { return v & ~kPmwcasDirty; }

}  // namespace

Pmwcas::Pmwcas(Pool* pool) : pool_(pool), epoch_(&Pmwcas::reclaim, this) {}

Status Pmwcas::create(Pool* pool, uint32_t descriptors, uint64_t* directory,
                      std::unique_ptr<Pmwcas>* out) {
  const uint32_t blocks = (descriptors + kDescriptorsPerBlock - 1) / kDescriptorsPerBlock;
  if (descriptors == 0 || blocks > kMaxBlocks) {
    return Status::InvalidArgument("pmwcas: descriptors must be in 1.." +
                                   std::to_string(kMaxBlocks * kDescriptorsPerBlock) + ", got " +
                                   std::to_string(descriptors));
  }
  Allocator& alloc = pool->allocator();
  uint64_t dir = 0;
  if (Status st = alloc.allocate(kBlockBytes, &dir); !st.ok()) return st;
  auto* offs = pool->ptr<uint64_t>(dir);
  fill(offs, 0, kBlockBytes);
  std::unique_ptr<Pmwcas> p(new Pmwcas(pool));
  for (uint32_t b = 0; b < blocks; ++b) {
    uint64_t off = 0;
    if (Status st = alloc.allocate(kBlockBytes, &off); !st.ok()) return st;
    char* block = pool->ptr<char>(off);
    fill(block, 0, kBlockBytes);  // every status kPmwcasFree
    flush(block, kBlockBytes, {"pmwcas.create"});
    store(&offs[b], off);
    for (uint32_t i = 0; i < kDescriptorsPerBlock; ++i) {
      auto* d = reinterpret_cast<PmwcasDescriptor*>(block + i * kSlotBytes);
      p->all_.push_back(d);
      p->free_.push_back(d);
    }
  }
  // The blocks and the directory are durable before the caller publishes
  // the directory's offset: a crash before that leaves unreachable blocks
  // (freed by the next recovery), never a directory naming garbage.
  persist(offs, kBlockBytes, {"pmwcas.create"});
  p->directory_ = dir;
  *directory = dir;
  *out = std::move(p);
  return Status::Ok();
}

Status Pmwcas::open(Pool* pool, uint64_t directory, std::unique_ptr<Pmwcas>* out) {
  // A 4096 B block of the allocator: aligned, inside the pool, and the start
  // of a block of that class (not the middle of a chunk of smaller ones).
  auto is_block = [pool](uint64_t off) {
    return off != 0 && off % kBlockBytes == 0 && pool->contains(off, kBlockBytes) &&
           pool->allocator().block_size(off) >= kBlockBytes;
  };
  if (!is_block(directory)) {
    return Status::Corruption("pmwcas: the descriptor directory at offset " +
                              std::to_string(directory) + " is not a block of the pool");
  }
  std::unique_ptr<Pmwcas> p(new Pmwcas(pool));
  p->directory_ = directory;
  const auto* offs = pool->ptr<uint64_t>(directory);
  for (uint32_t b = 0; b < kMaxBlocks && offs[b] != 0; ++b) {
    if (!is_block(offs[b]) || offs[b] == directory) {
      return Status::Corruption("pmwcas: descriptor block " + std::to_string(b) + " at offset " +
                                std::to_string(offs[b]) + " is not a block of the pool");
    }
    // A block listed twice would hand out each of its descriptors twice.
    for (uint32_t e = 0; e < b; ++e) {
      if (offs[e] == offs[b]) {
        return Status::Corruption("pmwcas: descriptor block at offset " + std::to_string(offs[b]) +
                                  " is listed twice");
      }
    }
    char* block = pool->ptr<char>(offs[b]);
    for (uint32_t i = 0; i < kDescriptorsPerBlock; ++i) {
      auto* d = reinterpret_cast<PmwcasDescriptor*>(block + i * kSlotBytes);
      if (d->count > kPmwcasMaxWords) {
        return Status::Corruption("pmwcas: a descriptor of " + std::to_string(d->count) +
                                  " words (at most " + std::to_string(kPmwcasMaxWords) + ")");
      }
      p->all_.push_back(d);
      if (strip(d->status.load(std::memory_order_relaxed)) == kPmwcasFree) p->free_.push_back(d);
    }
  }
  if (p->all_.empty()) return Status::Corruption("pmwcas: an empty descriptor directory");
  *out = std::move(p);
  return Status::Ok();
}

Status Pmwcas::recover(RecoveryStats* stats) {
  RecoveryStats s;
  for (PmwcasDescriptor* d : all_) {
    const uint64_t status = strip(d->status.load(std::memory_order_relaxed));
    if (status == kPmwcasFree) continue;
    if (status > kPmwcasFailed) {
      return Status::Corruption("pmwcas: descriptor status " + std::to_string(status));
    }
    for (uint32_t i = 0; i < d->count; ++i) {
      const uint64_t a = d->words[i].address;
      if (a % 8 != 0 || !pool_->contains(a, 8)) {
        return Status::Corruption("pmwcas: a descriptor names target offset " + std::to_string(a));
      }
    }
    // Roll forward only what was durably decided "succeeded": every
    // installed pointer was durable before that decision (step 1), so every
    // word the operation owns still names it or already has its new value.
    const bool forward = status == kPmwcasSucceeded;
    const uint64_t mine = pool_->offset(d) | kPmwcasDescriptor;
    for (uint32_t i = 0; i < d->count; ++i) {
      PmwcasWord& w = d->words[i];
      auto* word = pool_->ptr<std::atomic<uint64_t>>(w.address);
      const uint64_t v = strip(word->load(std::memory_order_relaxed));
      const uint64_t entry = pool_->offset(&w) | kPmwcasRdcss;
      if (v == mine || v == entry) {
        store(word, forward && v == mine ? w.new_value : w.old_value);
        flush(word, sizeof(*word), {"pmwcas.recover.word"});
        ++s.words_written;
      }
    }
    fence({"pmwcas.recover.word"});
    // Freed only after its words are durable: a crash before this NAW runs
    // the same (idempotent) roll again.
    naw(&d->status, kPmwcasFree, {"pmwcas.recover.free"});
    ++(forward ? s.rolled_forward : s.rolled_back);
    free_.push_back(d);
  }
  if (stats != nullptr) *stats = s;
  return Status::Ok();
}

Status Pmwcas::mark_reachable(Allocator& alloc) const {
  if (Status st = alloc.mark_reachable(directory_); !st.ok()) return st;
  const auto* offs = pool_->ptr<uint64_t>(directory_);
  for (uint32_t b = 0; b < kMaxBlocks && offs[b] != 0; ++b) {
    if (Status st = alloc.mark_reachable(offs[b]); !st.ok()) return st;
  }
  return Status::Ok();
}

void Pmwcas::persist_clear(std::atomic<uint64_t>* word, uint64_t v) {
  flush(word, sizeof(*word), {"pmwcas.dirty"});
  fence({"pmwcas.dirty"});
  (void)cas_strong(word, &v, v & ~kPmwcasDirty);
}

void Pmwcas::complete_install(std::atomic<uint64_t>* word, uint64_t entry) {
  auto* w = pool_->ptr<PmwcasWord>(entry & ~kPmwcasFlags);
  auto* d = pool_->ptr<PmwcasDescriptor>(w->descriptor);
  const bool undecided = strip(d->status.load(std::memory_order_acquire)) == kPmwcasUndecided;
  const uint64_t to = undecided ? (w->descriptor | kPmwcasDescriptor | kPmwcasDirty) : w->old_value;
  (void)cas_strong(word, &entry, to);
}

uint64_t Pmwcas::install(PmwcasWord* w) {
  auto* word = pool_->ptr<std::atomic<uint64_t>>(w->address);
  const uint64_t entry = pool_->offset(w) | kPmwcasRdcss;
  for (;;) {
    uint64_t seen = w->old_value;
    if (cas_strong(word, &seen, entry)) {
      complete_install(word, entry);
      return w->old_value;
    }
    if (seen & kPmwcasRdcss) {
      complete_install(word, seen);  // another operation's install: finish it
      continue;
    }
    if ((seen & kPmwcasDirty) && !(seen & kPmwcasDescriptor)) {
      persist_clear(word, seen);  // a value not durable yet: flush it first
      continue;
    }
    return seen;
  }
}

bool Pmwcas::run(PmwcasDescriptor* d) {
  const uint64_t mine = pool_->offset(d) | kPmwcasDescriptor;
  const uint32_t n = d->count;
  if (strip(d->status.load(std::memory_order_acquire)) == kPmwcasUndecided) {
    uint64_t decision = kPmwcasSucceeded;
    for (uint32_t i = 0; i < n && decision == kPmwcasSucceeded; ++i) {
      PmwcasWord* w = &d->words[i];
      auto* word = pool_->ptr<std::atomic<uint64_t>>(w->address);
      for (;;) {
        const uint64_t v = install(w);
        if (v == w->old_value || strip(v) == mine) {
          // Installed (by us or a helper), or the decision came meanwhile:
          // make the pointer durable before the decision.
          const uint64_t now = word->load(std::memory_order_acquire);
          if (strip(now) == mine && (now & kPmwcasDirty)) persist_clear(word, now);
          break;
        }
        if (v & kPmwcasDescriptor) {
          // Another operation owns the word: help it, then try again.
          if (v & kPmwcasDirty) persist_clear(word, v);
          run(pool_->ptr<PmwcasDescriptor>(v & ~kPmwcasFlags));
          continue;
        }
        decision = kPmwcasFailed;  // the word holds neither old value nor us
        break;
      }
      if (strip(d->status.load(std::memory_order_acquire)) != kPmwcasUndecided) break;
    }
    uint64_t expected = kPmwcasUndecided;
    (void)cas_strong(&d->status, &expected, decision | kPmwcasDirty);
  }
  // The decision is durable before any word gets its final value.
  const uint64_t s = d->status.load(std::memory_order_acquire);
  if (s & kPmwcasDirty) {
    flush(&d->status, sizeof(d->status), {"pmwcas.decide"});
    fence({"pmwcas.decide"});
    uint64_t e = s;
    (void)cas_strong(&d->status, &e, s & ~kPmwcasDirty);
  }
  const bool succeeded = strip(s) == kPmwcasSucceeded;
  // Step 3: each word we still own gets its final value (dirty), all are
  // flushed, one fence, then the dirty bits are cleared.
  for (uint32_t i = 0; i < n; ++i) {
    PmwcasWord& w = d->words[i];
    auto* word = pool_->ptr<std::atomic<uint64_t>>(w.address);
    uint64_t v = word->load(std::memory_order_acquire);
    const uint64_t to = (succeeded ? w.new_value : w.old_value) | kPmwcasDirty;
    while (strip(v) == mine && !cas_strong(word, &v, to)) {
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    flush(pool_->ptr<void>(d->words[i].address), 8, {"pmwcas.complete"});
  }
  fence({"pmwcas.complete"});
  for (uint32_t i = 0; i < n; ++i) {
    PmwcasWord& w = d->words[i];
    auto* word = pool_->ptr<std::atomic<uint64_t>>(w.address);
    uint64_t dirty = (succeeded ? w.new_value : w.old_value) | kPmwcasDirty;
    (void)cas_strong(word, &dirty, dirty & ~kPmwcasDirty);
  }
  return succeeded;
}

uint64_t Pmwcas::read(std::atomic<uint64_t>* word) {
  for (;;) {
    uint64_t v = word->load(std::memory_order_acquire);
    if (v & kPmwcasRdcss) {
      complete_install(word, v);
      continue;
    }
    if (v & kPmwcasDirty) {
      persist_clear(word, v);
      v &= ~kPmwcasDirty;
    }
    if (v & kPmwcasDescriptor) {
      run(pool_->ptr<PmwcasDescriptor>(v & ~kPmwcasFlags));
      continue;
    }
    return v;
  }
}

Status Pmwcas::begin(std::unique_ptr<Op>* op) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard<std::mutex> g(free_mu_);
      if (!free_.empty()) {
        PmwcasDescriptor* d = free_.back();
        free_.pop_back();
        store(&d->count, uint32_t{0});  // not durable until execute()'s persist
        op->reset(new Op(this, d));
        return Status::Ok();
      }
    }
    // Short of descriptors: free what this thread retired and no guard
    // still sees (the callback takes free_mu_, so not under it).
    if (attempt == 0) epoch_.collect();
  }
  return Status::Busy("pmwcas: all " + std::to_string(all_.size()) +
                      " descriptors are in use or not yet reclaimed");
}

void Pmwcas::reclaim(void* ctx, uint64_t item) {
  auto* p = static_cast<Pmwcas*>(ctx);
  auto* d = p->pool_->ptr<PmwcasDescriptor>(item);
  // No fence: the next use persists the whole descriptor before it
  // installs anything, and recovery ignores a completed one either way.
  store(&d->status, uint64_t{kPmwcasFree});
  flush(&d->status, sizeof(d->status), {"pmwcas.reclaim"});
  std::lock_guard<std::mutex> g(p->free_mu_);
  p->free_.push_back(d);
}

Pmwcas::Op::~Op() {
  if (d_ == nullptr) return;
  std::lock_guard<std::mutex> g(p_->free_mu_);
  p_->free_.push_back(d_);
}

bool Pmwcas::Op::add(std::atomic<uint64_t>* word, uint64_t old_value, uint64_t new_value) {
  if (d_ == nullptr || d_->count == kPmwcasMaxWords || old_value > kPmwcasMaxValue ||
      new_value > kPmwcasMaxValue) {
    return false;
  }
  const uint64_t a = p_->pool_->offset(word);
  if (a % 8 != 0 || !p_->pool_->contains(a, 8)) return false;
  for (uint32_t i = 0; i < d_->count; ++i) {
    if (d_->words[i].address == a) return false;
  }
  const PmwcasWord w{a, old_value, new_value, p_->pool_->offset(d_)};
  copy(&d_->words[d_->count], &w, sizeof(w));
  store(&d_->count, d_->count + 1);
  return true;
}

bool Pmwcas::Op::execute() {
  PmwcasDescriptor* d = d_;
  d_ = nullptr;
  // Sorted by address: helping never waits in a cycle. Sorted in DRAM and
  // copied back: the descriptor is free (no word names it) until the NAW
  // below, so a crash in between leaves an entry list recovery ignores.
  // (An insertion sort of at most kPmwcasMaxWords entries.)
  const uint32_t n = std::min(d->count, kPmwcasMaxWords);
  PmwcasWord sorted[kPmwcasMaxWords];
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t j = i;
    for (; j > 0 && sorted[j - 1].address > d->words[i].address; --j) sorted[j] = sorted[j - 1];
    sorted[j] = d->words[i];
  }
  copy(d->words, sorted, n * sizeof(PmwcasWord));
  // Step 0: the entries are durable before the descriptor turns undecided,
  // and that before any word names it.
  flush(d, sizeof(*d), {"pmwcas.prepare"});
  fence({"pmwcas.prepare"});
  naw(&d->status, kPmwcasUndecided, {"pmwcas.prepare"});
  const bool ok = p_->run(d);
  p_->epoch_.retire(p_->pool_->offset(d));
  return ok;
}

}  // namespace nvindex::pm
