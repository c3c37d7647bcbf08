// The box's network inside the guest (phase 2): eth0's address and default route
// in a VM (images have no `ip` tool), loopback, /etc/resolv.conf and /etc/hosts.
#pragma once

#include "boxlite.pb.h"

namespace boxlite::guest {

// vm: also brings up lo (a jail's init did) and configures eth0 when asked.
void configure_network(const proto::BoxConfig& cfg, bool vm);

}  // namespace boxlite::guest
