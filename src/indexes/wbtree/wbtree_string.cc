// wbtree: the string-key wB+-tree (WbTreeString = WbTreeT<std::string_view>)
// and its factory. The definitions are in wbtree_impl.h; a translation unit
// of its own, so that the integer instance (wbtree.cc) compiles as the
// untemplated tree did.
#include <string_view>

#include "indexes/wbtree/wbtree.h"
#include "indexes/wbtree/wbtree_impl.h"

namespace nvindex {
namespace wbtree {

template class WbTreeT<std::string_view>;

}  // namespace wbtree

Status make_wbtree_string(const IndexOptions& options,
                          std::unique_ptr<Index<std::string_view>>* out) {
  return wbtree::open_wbtree(options, out);
}

}  // namespace nvindex
