// fptree: placeholder until issue 4's implementation lands (NotSupported).
#include "indexes/fptree/fptree.h"

namespace nvindex {

Status make_fptree(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*) {
  return Status::NotSupported("fptree is not implemented yet");
}

}  // namespace nvindex
