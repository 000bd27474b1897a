// The element-wise reduction of the collectives (collectives.h) and of the algorithms beneath
// them (recursive_doubling.h, butterfly.h, ring_all_reduce.h, p2p_gather_scatter.h), in a header
// of its own so that those algorithms need nothing from the facade that calls them.
#pragma once

#include <string>

namespace mpitron::comm {

/// The element-wise reduction of all_reduce / reduce_scatter. `avg` is the sum multiplied by
/// 1/size (kernels::scale on the result), which is exact when size is a power of two; avg of an
/// integer buffer throws std::invalid_argument on every rank before any message.
enum class ReduceOp { sum, avg, max, min };

/// "sum" / "avg" / "max" / "min".
std::string to_string(ReduceOp op);

}  // namespace mpitron::comm
