// The COMM checks of `mpitron validate`: every collective, the pipeline ring's point-to-point
// transfers and the TP mappings on rank-valued data whose results are known in closed form.
#pragma once

#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// "COMM: <tp|pp|dp|world> ..." (one check per communicator: all-reduce sum/avg/max,
/// all-gather, reduce-scatter, broadcast, and on pp the send/recv ring), the same again with
/// every message cut to kChunkedMessageElements elements, and "COMM: TP mappings ...". Rank w
/// (world rank) contributes values computed from w; the expected results come from the pure
/// group layout (comm::GroupLayout), so a wrong split key order fails too. All values are small
/// integers, exact in float32 (avg over a non-power-of-two group is within one rounding).
std::vector<LocalCheck> check_communication(const ValidateContext& ctx);

/// The lowered message limit of the chunked COMM run: every transfer of the checks is longer
/// and not a multiple of it, so each is cut into several messages with a partial last one.
inline constexpr std::size_t kChunkedMessageElements = 3;

}  // namespace mpitron::app
