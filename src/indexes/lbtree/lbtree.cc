// lbtree: placeholder until issue 4's implementation lands (NotSupported).
#include "indexes/lbtree/lbtree.h"

namespace nvindex {

Status make_lbtree(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*) {
  return Status::NotSupported("lbtree is not implemented yet");
}

}  // namespace nvindex
