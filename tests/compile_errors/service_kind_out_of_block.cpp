// Must not compile: a service's ninth kind would be the first kind of the next service's block.
#include "runtime/protocol.hpp"

namespace fiber::detail {
inline constexpr kind ninth = service_kind<service_block::pool, 8>();
}

int main() { return static_cast<int>(fiber::detail::ninth); }
