// mooncake-rs: upstream Mooncake's memory_location.h, as far as the C++ Transfer Engine
// API uses it: the wildcard location of a registration ("*": let the engine decide).
// Upstream's NUMA/GPU location probing functions are not offered here; the engine
// resolves "*" itself when memory is registered.
#ifndef MOONCAKE_RS_MEMORY_LOCATION_H
#define MOONCAKE_RS_MEMORY_LOCATION_H

#include <string>

namespace mooncake {

/// The location that lets the engine find where the memory lives.
const static std::string kWildcardLocation = "*";

}  // namespace mooncake

#endif  // MOONCAKE_RS_MEMORY_LOCATION_H
