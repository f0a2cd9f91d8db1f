// wbtree: placeholder until issue 4's implementation lands (NotSupported).
#include "indexes/wbtree/wbtree.h"

namespace nvindex {

Status make_wbtree(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*) {
  return Status::NotSupported("wbtree is not implemented yet");
}

}  // namespace nvindex
