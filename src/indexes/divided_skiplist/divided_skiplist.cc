// divided-skiplist: placeholder until issue 4's implementation lands (NotSupported).
#include "indexes/divided_skiplist/divided_skiplist.h"

namespace nvindex {

Status make_divided_skiplist(const IndexOptions&, std::unique_ptr<Index<uint64_t>>*) {
  return Status::NotSupported("divided-skiplist is not implemented yet");
}

}  // namespace nvindex
