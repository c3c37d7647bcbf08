// Box options built through the C setters.
#pragma once

#include "boxlite.h"
#include "state.hpp"

namespace boxlite::capi {

// The core options, once every setter's value is known to be valid and every
// requested feature supported. Throws InvalidArgument (a bad value, naming the
// option) or Unsupported (naming the option the core does not support yet).
BoxOptions checked_options(const CBoxliteOptions& o);

}  // namespace boxlite::capi
