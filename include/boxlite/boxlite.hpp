// The embeddable C++ API, all of it: a Runtime (runtime.hpp) creates Boxes
// (box.hpp), which run Executions (execution.hpp); options.hpp, images.hpp,
// snapshots.hpp and copy.hpp are what those take and give; errors are one
// boxlite::Error with an ErrorKind (error.hpp). The C API is include/boxlite.h.
#pragma once

#include "boxlite/box.hpp"
#include "boxlite/copy.hpp"
#include "boxlite/engine_kind.hpp"
#include "boxlite/error.hpp"
#include "boxlite/execution.hpp"
#include "boxlite/images.hpp"
#include "boxlite/lifecycle.hpp"
#include "boxlite/options.hpp"
#include "boxlite/runtime.hpp"
#include "boxlite/snapshots.hpp"
