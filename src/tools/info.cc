// `nvindex info`: prints a pool file's header (pm::Pool::read_header), which
// reads and validates it without changing the file.
// Only a regular file is read, opened without blocking (Pool::read_header),
// so a FIFO or a device is refused at once instead of hanging.
// Exit codes: 0 a valid header, 1 not a pool / corrupt / bad checksum, 2 bad
// usage (a missing file, a directory, FIFO or device, an unreadable file).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "nvindex/pm/pool.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace nvindex::tools {
namespace {

struct InfoArgs {
  std::string pool;
  std::string format = "text";
};

int run_info(const InfoArgs& a) {
  pm::PoolHeaderInfo h;
  if (Status st = pm::Pool::read_header(a.pool, &h); !st.ok()) {
    std::fprintf(stderr, "nvindex info: %s: %s\n", a.pool.c_str(), st.ToString().c_str());
    return st.code() == Code::kCorruption ? 1 : 2;
  }
  if (a.format == "json") {
    nlohmann::json j{{"pool", a.pool},         {"layout", h.layout},
                     {"version", h.version},   {"size", h.size},
                     {"root_offset", h.root},  {"clean_shutdown", h.clean_shutdown},
                     {"checksum", h.checksum}, {"checksum_ok", h.checksum_ok}};
    j["close_bytes"] = h.close_bytes != 0 ? nlohmann::json(h.close_bytes) : nlohmann::json(nullptr);
    j["close_keys"] = h.close_keys ? nlohmann::json(*h.close_keys) : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("pool:            %s\n", a.pool.c_str());
    std::printf("layout:          %s\n", h.layout.c_str());
    std::printf("format version:  %u\n", h.version);
    std::printf("size:            %llu bytes (%.1f MiB)\n", static_cast<unsigned long long>(h.size),
                h.size / 1048576.0);
    std::printf("root offset:     0x%llx%s\n", static_cast<unsigned long long>(h.root),
                h.root == 0 ? " (no root yet)" : "");
    std::printf("clean shutdown:  %s\n", h.clean_shutdown ? "yes" : "no (open, or crashed)");
    if (h.close_bytes != 0) {
      std::printf("close record:    %llu bytes in blocks, %s keys\n",
                  static_cast<unsigned long long>(h.close_bytes),
                  h.close_keys ? std::to_string(*h.close_keys).c_str() : "unrecorded");
    } else {
      std::printf("close record:    none (no clean close since the last recovery)\n");
    }
    std::printf("checksum:        0x%016llx (%s)\n", static_cast<unsigned long long>(h.checksum),
                h.checksum_ok ? "ok" : "BAD");
  }
  return h.checksum_ok ? 0 : 1;
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "info",
      "Print a pool file's header (layout, version, size, root offset, clean shutdown, checksum) "
      "without changing the file. Exit 0 valid, 1 not a pool or corrupt, 2 usage.");
  cmd->option_defaults()->always_capture_default();
  add_path(cmd, "--pool", &args->pool, ValueKind::kInputFile, "Pool file (a regular file)")
      ->required();
  add_choice(cmd, "--format", &args->format, {"text", "json"}, "Output format");
  cmd->callback([args, exit_code] { *exit_code = run_info(*args); });
}

}  // namespace nvindex::tools
