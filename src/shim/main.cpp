// boxlite-shim: one process per box (shim_main.cpp). boxlite-guest is installed beside it.
#include "common/process.hpp"
#include "shim/shim_main.hpp"

int main(int argc, char** argv) { return boxlite::shim::shim_main(argc, argv, boxlite::own_executable_dir()); }
