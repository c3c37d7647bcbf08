// The jail engine behind engine::Engine (jail.hpp has the mechanics).
#pragma once

#include <memory>

#include "engine/engine.hpp"

namespace boxlite::engine::jail {

std::unique_ptr<Engine> make_jail_engine(const ShimSpec& spec, Zygote zygote);

}  // namespace boxlite::engine::jail
