// Pulling through boxlite-pull: the same pull (pull.hpp), run in a helper process.
// The programs that start a box (the `boxlite` CLI, libboxlite) never link the HTTP
// client: libcurl cannot be linked statically from Debian (its GSS-API has no static
// archive), and a static CLI starts ~1.5 ms sooner (docs/registry.md). The helper is
// this build's own program; the request goes over a socket (credentials included,
// never argv or the environment), the answer comes back as JSON lines: the
// manifest's layers, progress, then the result or the error with its code.
#pragma once

#include <string>

#include "registry/pull.hpp"

namespace boxlite::registry {

// pull(store at images_dir, text, opts) in `helper` (boxlite-pull's path). The
// callbacks run on this thread. Errors: those of pull(), with the same codes and
// messages; Internal if the helper cannot start or dies without an answer.
PullResult pull_in_helper(const std::string& helper, const std::string& images_dir, const std::string& text,
                          const PullOptions& opts);

}  // namespace boxlite::registry
