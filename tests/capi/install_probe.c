/* For install-test.sh: boots a box through an installed libboxlite and prints the
 * path of the shim that runs it ("shim: PATH"). Usage: install_probe IMAGE_DIR */
#include "capi_test.h"

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(120);
  CBoxliteError e = {0};
  CBoxliteRuntime *rt = NULL;
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(argv[1], &o, &e), Ok, &e);
  Op made = {0}, started = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &made, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &made.done, 60);
  CHECK(made.code == Ok);
  CHECK_RC(boxlite_start_box(made.box, op_done, &started, &e), Ok, &e);
  pump_until(rt, &started.done, 60);
  CHECK(started.code == Ok);
  CBoxInfo *info = boxlite_box_info(made.box);
  CHECK(info && info->pid > 0);
  char link[64], exe[4096] = {0};
  snprintf(link, sizeof link, "/proc/%d/exe", info->pid);
  CHECK(readlink(link, exe, sizeof exe - 1) > 0);
  printf("shim: %s\n", exe);
  boxlite_free_box_info(info);
  boxlite_box_free(made.box);
  boxlite_runtime_free(rt);
  return 0;
}
