// `nvindex patree-calibrate`: fits PA-Tree's latency model for a disk (the
// linear model of completion latency over outstanding reads and writes that
// the engine's probe=model uses; Wang et al., ICDE 2020, §IV-A) and stores
// it for every later open on that disk (src/nvme/patree_index.h). An open
// that finds no stored fit makes one itself (about a second); this command
// refits on demand, e.g. after the disk or its load changed. Exit codes: 0
// done, 1 an I/O error, 2 bad usage.
#include <cstdio>
#include <string>

#include "nvme/patree_index.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "util/temp_files.h"

namespace nvindex::tools {

void add_patree_calibrate_command(CLI::App& app, int* exit_code) {
  struct Args {
    std::string device;
    uint32_t node_size = 512;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "patree-calibrate",
      "Fit PA-Tree's latency model (completion latency over outstanding reads and writes, "
      "measured at queue depths 1..64) for the disk under --device, print it, and store it "
      "for every later PA-Tree open on that disk");
  CLI::Option* device =
      add_path(cmd, "--device", &a->device, ValueKind::kDirectory,
               "A directory on the disk to measure (a real disk, not tmpfs); a temporary "
               "64 MiB file is made there and removed. Default: $NVINDEX_DEVICE_DIR, else "
               "/var/tmp");
  add_count(cmd, "--node-size", &a->node_size, 512, 4096,
            "I/O size in bytes: a power of two in 512..4096")
      ->capture_default_str();
  cmd->callback([a, device, exit_code] {
    // patree_calibrate refuses a directory it cannot use (tmpfs, one it
    // cannot make its scratch directory in) with InvalidArgument: exit 2.
    const std::string dir = device->count() > 0 ? a->device : util::temp_device_dir();
    std::string report;
    const Status s = patree_calibrate(dir, a->node_size, &report);
    if (!s.ok()) {
      std::fprintf(stderr, "nvindex patree-calibrate: %s\n", s.ToString().c_str());
      *exit_code = s.code() == Code::kInvalidArgument ? 2 : 1;
      return;
    }
    std::fputs(report.c_str(), stdout);
    *exit_code = 0;
  });
}

}  // namespace nvindex::tools
