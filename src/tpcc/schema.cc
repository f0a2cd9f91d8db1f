// Names of the TPC-C tables and secondary indexes (schema.h).
#include "tpcc/schema.h"

namespace nvindex::tpcc {

const char* table_name(Table t) {
  switch (t) {
    case Table::kWarehouse:
      return "warehouse";
    case Table::kDistrict:
      return "district";
    case Table::kCustomer:
      return "customer";
    case Table::kCustomerLast:
      return "customer_last";
    case Table::kHistory:
      return "history";
    case Table::kNewOrder:
      return "new_order";
    case Table::kOrder:
      return "order";
    case Table::kOrderCustomer:
      return "order_customer";
    case Table::kOrderLine:
      return "order_line";
    case Table::kItem:
      return "item";
    case Table::kStock:
      return "stock";
  }
  return "unknown";
}

}  // namespace nvindex::tpcc
