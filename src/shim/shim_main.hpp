// The shim's program (shim_main.cpp), for the boxlite-shim executable (main.cpp).
#pragma once

#include <string>

namespace boxlite::shim {

// argv as boxlite-shim gets it; guest_dir holds boxlite-guest (the jail's zygote).
int shim_main(int argc, char** argv, const std::string& guest_dir);

}  // namespace boxlite::shim
