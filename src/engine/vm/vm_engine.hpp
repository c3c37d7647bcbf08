// The vm engine behind engine::Engine: QEMU microvm, started by the shim.
#pragma once

#include <memory>

#include "engine/engine.hpp"

namespace boxlite::engine::vm {

std::unique_ptr<Engine> make_vm_engine(const ShimSpec& spec);

}  // namespace boxlite::engine::vm
