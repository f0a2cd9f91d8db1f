// Crash scenarios (oracle.h): the deterministic operation sequences the
// crash lab runs, their text form, and the std::map model each operation is
// checked against.
#include <algorithm>
#include <random>

#include "crash/check.h"
#include "crash/oracle.h"
#include "util/hex.h"

namespace nvindex::crash {

using detail::key_text;
using detail::kMax;

std::string op_text(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kInsert:
      return "insert " + key_text(op.key) + "=" + hex(op.value);
    case Op::Kind::kUpdate:
      return "update " + key_text(op.key) + "=" + hex(op.value);
    case Op::Kind::kRemove:
      return "remove " + key_text(op.key);
  }
  return "?";
}

Code apply_op(const Op& op, Model* m) {
  const auto it = m->find(op.key);
  switch (op.kind) {
    case Op::Kind::kInsert:
      if (it != m->end()) return Code::kAlreadyExists;
      (*m)[op.key] = op.value;
      return Code::kOk;
    case Op::Kind::kUpdate:
      if (it == m->end()) return Code::kNotFound;
      it->second = op.value;
      return Code::kOk;
    case Op::Kind::kRemove:
      if (it == m->end()) return Code::kNotFound;
      m->erase(it);
      return Code::kOk;
  }
  return Code::kInvalidArgument;
}

Scenario make_scenario(uint64_t seed, size_t n) {
  Scenario sc;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  const size_t u = std::max<size_t>(8, 2 * n / 3);
  std::vector<uint64_t> keys = {0, kMax};
  for (size_t i = 0; i < u; ++i) keys.push_back(1000 * i + 7);
  Model m;
  auto pick = [&](bool present) -> uint64_t {
    std::vector<uint64_t> c;
    for (uint64_t k : keys) {
      if (static_cast<bool>(m.count(k)) == present) c.push_back(k);
    }
    if (c.empty()) return keys[rng() % keys.size()];
    return c[rng() % c.size()];
  };
  auto value = [&]() -> Value { return rng() % 8 == 0 ? 0 : rng(); };
  const size_t grow = n * 55 / 100;
  for (size_t i = 0; i < n; ++i) {
    const unsigned r = static_cast<unsigned>(rng() % 100);
    Op op;
    if (i < grow) {
      op.kind = r < 80 ? Op::Kind::kInsert : r < 90 ? Op::Kind::kUpdate : Op::Kind::kRemove;
    } else {
      op.kind = r < 70 ? Op::Kind::kRemove : r < 80 ? Op::Kind::kInsert : Op::Kind::kUpdate;
    }
    const bool usual = rng() % 10 != 0;  // 10%: the failing case
    op.key = pick(op.kind == Op::Kind::kInsert ? !usual : usual);
    op.value = value();
    apply_op(op, &m);
    sc.ops.push_back(op);
  }
  std::sort(keys.begin(), keys.end());
  sc.universe = keys;
  return sc;
}

}  // namespace nvindex::crash
