/* Every C API function with NULL, empty and invalid arguments; NULL-safe frees;
 * drain's timeout_ms rules on an idle runtime; documented options the core does
 * not support; image operations. Usage: capi_args_test IMAGE_DIR */
#include "capi_test.h"

_Static_assert(Ok == 0 && Internal == 1 && NotFound == 2 && AlreadyExists == 3 && InvalidState == 4, "codes");
_Static_assert(InvalidArgument == 5 && Config == 6 && Storage == 7 && Image == 8 && Network == 9, "codes");
_Static_assert(Execution == 10 && Stopped == 11 && Engine == 12 && Unsupported == 13 && Database == 14, "codes");
_Static_assert(Portal == 15 && Rpc == 16 && RpcTransport == 17 && Metadata == 18, "codes");
_Static_assert(UnsupportedEngine == 19 && ResourceExhausted == 20 && SessionReaped == 21, "codes");
_Static_assert(BoxlitePortProtocolTcp == 0 && BoxlitePortProtocolUdp == 1, "protocols");

static void ignore_err(CBoxliteError *e, void *ud) {
  (void)e;
  (void)ud;
}
static void ignore_box(CBoxHandle *b, CBoxliteError *e, void *ud) {
  (void)b;
  (void)e;
  (void)ud;
}
static void ignore_goc(CBoxHandle *b, int c, CBoxliteError *e, void *ud) {
  (void)b;
  (void)c;
  (void)e;
  (void)ud;
}
static void ignore_info(CBoxInfo *i, CBoxliteError *e, void *ud) {
  (void)i;
  (void)e;
  (void)ud;
}
static void ignore_list(CBoxInfoList *l, CBoxliteError *e, void *ud) {
  (void)l;
  (void)e;
  (void)ud;
}

static Op pulled, listed;
static void on_rt_metrics(CRuntimeMetrics *m, CBoxliteError *e, void *ud) {
  (void)m;
  (void)e;
  (void)ud;
}
static void on_box_metrics(CBoxMetrics *m, CBoxliteError *e, void *ud) {
  (void)m;
  (void)e;
  (void)ud;
}
static void on_pull(CImagePullResult *r, CBoxliteError *e, void *ud) {
  CHECK(r == NULL);
  op_record((Op *)ud, e);
}
static void on_list(CImageInfoList *l, CBoxliteError *e, void *ud) {
  CHECK((l == NULL) == (e != NULL)); /* a list exactly when there is no error */
  op_record((Op *)ud, e);
}

static CBoxliteRuntime *g_rt;
static void *post_later(void *arg) {
  (void)arg;
  sleep_ms(200);
  CBoxliteError e = {0};
  CHECK(boxlite_get_info(g_rt, "no-such-box", ignore_info, NULL, &e) == Ok);
  return NULL;
}

static void check_frees(void) {
  boxlite_runtime_free(NULL);
  boxlite_box_free(NULL);
  boxlite_execution_free(NULL);
  boxlite_options_free(NULL);
  boxlite_advanced_options_free(NULL);
  boxlite_simple_free(NULL);
  boxlite_result_free(NULL);
  boxlite_error_free(NULL);
  boxlite_free_string(NULL);
  boxlite_free_box_info(NULL);
  boxlite_free_box_info_list(NULL);
  boxlite_free_image_pull_result(NULL);
  boxlite_free_image_info_list(NULL);
  boxlite_image_free(NULL);
  CBoxliteError zero = {0};
  boxlite_error_free(&zero);
  CHECK(zero.code == Ok && zero.message == NULL);
  /* Setters on NULL options are no-ops. */
  boxlite_options_set_cpus(NULL, 2);
  boxlite_options_set_memory(NULL, 512);
  boxlite_options_add_bind_mount(NULL, "/a", "/b", 1);
  boxlite_options_set_disk_size_gb(NULL, 1);
  boxlite_options_add_secret(NULL, "n", "v", "{{n}}", NULL, 0);
  boxlite_options_set_network_enabled(NULL);
  boxlite_options_set_network_disabled(NULL);
  boxlite_options_add_allow_net(NULL, "example.com");
  boxlite_options_set_name(NULL, "x");
  boxlite_options_set_rootfs_path(NULL, "/x");
  boxlite_options_set_workdir(NULL, "/");
  boxlite_options_set_user(NULL, "root");
  boxlite_options_add_env(NULL, "K", "V");
  boxlite_options_set_entrypoint(NULL, NULL, 0);
  boxlite_options_set_cmd(NULL, NULL, 0);
  boxlite_options_set_auto_remove(NULL, 0);
  boxlite_options_set_detach(NULL, 0);
  boxlite_options_set_advanced(NULL, NULL);
  boxlite_advanced_options_set_security_enabled(NULL, 0);
  CHECK(boxlite_box_id(NULL) == NULL);
  CHECK(boxlite_box_info(NULL) == NULL);
  CHECK(boxlite_execution_timed_out(NULL) == 0);
}

/* A create that must fail synchronously with `want`, its message naming `needle`. */
static void expect_create_fails(CBoxliteRuntime *rt, CBoxliteOptions *o, enum BoxliteErrorCode want,
                                const char *needle) {
  CBoxliteError e = {0};
  Op op = {0};
  enum BoxliteErrorCode rc = boxlite_create_box(rt, o, op_box, &op, &e);
  CHECK(rc == want);
  CHECK(e.message != NULL);
  if (!strstr(e.message, needle)) {
    fprintf(stderr, "message '%s' does not name '%s'\n", e.message, needle);
    exit(1);
  }
  check_no_function_name(e.message);
  printf("create refused as expected: %s\n", e.message);
  boxlite_error_free(&e);
  boxlite_options_free(o);
}

static CBoxliteOptions *opts(const char *image) {
  CBoxliteOptions *o = NULL;
  CBoxliteError e = {0};
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  return o;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  const char *image = argv[1];
  alarm(120);
  CBoxliteError e = {0};

  CHECK(boxlite_version() != NULL && boxlite_version()[0] != '\0');
  check_frees();

  /* boxlite_runtime_new */
  CBoxliteRuntime *rt = NULL;
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_new("", NULL, 0, &rt, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_new("relative/home", NULL, 0, &rt, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_new(NULL, NULL, -1, &rt, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 1, &rt, &e), InvalidArgument, &e);
  BoxliteImageRegistry reg = {.host = "http://127.0.0.1:5000", .transport = BoxliteRegistryTransportHttp};
  CHECK_RC(boxlite_runtime_new(NULL, &reg, 1, &rt, &e), Config, &e);
  CHECK(rt == NULL);
  reg.host = NULL;
  CHECK_RC(boxlite_runtime_new(NULL, &reg, 1, &rt, &e), Config, &e);
  reg.host = "127.0.0.1:5000";
  reg.username = "only-a-user";
  CHECK_RC(boxlite_runtime_new(NULL, &reg, 1, &rt, &e), Config, &e);
  reg.username = NULL;
  reg.transport = (enum BoxliteRegistryTransport)9;
  CHECK_RC(boxlite_runtime_new(NULL, &reg, 1, &rt, &e), InvalidArgument, &e);
  CHECK(rt == NULL);
  /* NULL home = $BOXLITE_HOME (the test's temporary home). */
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  CHECK(rt != NULL);
  g_rt = rt;

  /* drain on an idle runtime */
  double t = now_s();
  CHECK(boxlite_runtime_drain(rt, 0, &e) == 0);
  CHECK(now_s() - t < 0.05);
  t = now_s();
  CHECK(boxlite_runtime_drain(rt, 50, &e) == 0);
  double waited = now_s() - t;
  printf("drain(50) on an idle runtime returned after %.1f ms\n", waited * 1000);
  CHECK(waited >= 0.045 && waited < 0.5);
  CHECK(boxlite_runtime_drain(NULL, 0, &e) == -1);
  CHECK(e.code == InvalidArgument && e.message != NULL && strcmp(e.message, "runtime is NULL") == 0);
  boxlite_error_free(&e);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, post_later, NULL) == 0);
  t = now_s();
  int n = boxlite_runtime_drain(rt, -1, &e);
  waited = now_s() - t;
  pthread_join(th, NULL);
  printf("drain(-1) dispatched %d after %.1f ms\n", n, waited * 1000);
  CHECK(n >= 1 && waited >= 0.15);

  /* options */
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(NULL, &o, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_options_new("", &o, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_options_new(image, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_options_set_engine(NULL, "jail", &e), InvalidArgument, &e);
  o = opts(image);
  CHECK_RC(boxlite_options_set_engine(o, "bogus", &e), InvalidArgument, &e);
  CHECK_RC(boxlite_options_set_engine(o, "jail", &e), Ok, &e);
  CHECK(boxlite_options_add_port(NULL, 80, 80, BoxlitePortProtocolTcp, NULL) == InvalidArgument);
  CHECK(boxlite_options_add_port(o, 80, 0, BoxlitePortProtocolTcp, NULL) == InvalidArgument);
  CHECK(boxlite_options_add_port(o, 80, 80, (enum BoxlitePortProtocol)7, NULL) == InvalidArgument);
  CHECK(boxlite_options_add_port(o, 0, 80, BoxlitePortProtocolTcp, NULL) == Ok);
  boxlite_options_free(o); /* ports reach a box in capi_wired_test */
  o = opts(image);
  boxlite_options_add_bind_mount(o, "/tmp", "/etc", 1);
  expect_create_fails(rt, o, InvalidArgument, "cannot mount to system directory");
  o = opts(image);
  boxlite_options_add_bind_mount(o, NULL, "/data", 1);
  expect_create_fails(rt, o, InvalidArgument, "box options: volumes: a bind mount needs");
  o = opts(image);
  boxlite_options_set_disk_size_gb(o, 100000);
  expect_create_fails(rt, o, InvalidArgument, "disk_size_gb");
  o = opts(image);
  const char *hosts[] = {"api.example.com"};
  boxlite_options_add_secret(o, "API_KEY", "k", "{{API_KEY}}", hosts, 1);
  boxlite_options_free(o); /* secrets reach a box in capi_wired_test */
  o = opts(image);
  boxlite_options_add_secret(o, "", "k", NULL, NULL, 0);
  expect_create_fails(rt, o, InvalidArgument, "box options: secrets: a secret needs a non-empty name");
  o = opts(image);
  boxlite_options_add_allow_net(o, "");
  expect_create_fails(rt, o, InvalidArgument, "box options: allow_net: a host is empty");
  o = opts(image);
  boxlite_options_add_secret(o, "API_KEY", "k", "{{API_KEY}}", NULL, 2);
  expect_create_fails(rt, o, InvalidArgument, "box options: secrets: secret 'API_KEY': hosts is NULL");
  o = opts(image);
  boxlite_options_add_secret(o, "API_KEY", "", NULL, NULL, 0);
  expect_create_fails(rt, o, InvalidArgument, "secret 'API_KEY' has an empty value");
  o = opts(image);
  CAdvancedBoxOptions *adv = NULL;
  CHECK_RC(boxlite_advanced_options_new(NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_advanced_options_new(&adv, &e), Ok, &e);
  boxlite_advanced_options_set_security_enabled(adv, 0);
  boxlite_options_set_advanced(o, adv);
  boxlite_advanced_options_free(adv);
  expect_create_fails(rt, o, Unsupported, "box options: not supported yet: disabling the security sandbox");
  o = opts(image);
  boxlite_options_set_cpus(o, 0);
  expect_create_fails(rt, o, InvalidArgument, "cpus must be between 1 and 255, got 0");
  o = opts(image);
  boxlite_options_set_memory(o, 1);
  expect_create_fails(rt, o, InvalidArgument, "memory");
  o = opts(image);
  boxlite_options_add_env(o, "", "v");
  expect_create_fails(rt, o, InvalidArgument, "box options: env: a variable needs a non-empty key");
  o = opts(image);
  boxlite_options_set_cmd(o, NULL, 2);
  expect_create_fails(rt, o, InvalidArgument, "box options: cmd: args is NULL or argc is negative");
  o = opts(image);
  const char *bad_args[] = {"sh", NULL};
  boxlite_options_set_entrypoint(o, bad_args, 2);
  expect_create_fails(rt, o, InvalidArgument, "box options: entrypoint: args[1] is NULL");
  o = opts(image);
  boxlite_options_set_workdir(o, "relative");
  expect_create_fails(rt, o, InvalidArgument, "working_dir");
  o = opts(image);
  boxlite_options_set_detach(o, 1); /* with auto_remove on: the core refuses */
  expect_create_fails(rt, o, InvalidArgument, "detach");

  /* runtime-level NULL / empty arguments */
  Op op = {0};
  o = opts(image);
  CHECK_RC(boxlite_create_box(NULL, o, op_box, &op, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_create_box(rt, NULL, op_box, &op, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_create_box(rt, o, NULL, &op, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get_or_create_box(rt, o, ignore_goc, NULL, &e), InvalidArgument, &e); /* no name */
  CHECK_RC(boxlite_get_or_create_box(NULL, o, ignore_goc, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get(rt, NULL, ignore_box, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get(rt, "", ignore_box, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get(NULL, "x", ignore_box, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get(rt, "x", NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_remove(rt, NULL, 0, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_remove(rt, "", 1, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_remove(NULL, "x", 1, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_remove(rt, "x", 1, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get_info(rt, NULL, ignore_info, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get_info(rt, "", ignore_info, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get_info(NULL, "x", ignore_info, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_get_info(rt, "x", NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_list_info(NULL, ignore_list, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_list_info(rt, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_shutdown(NULL, 0, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_shutdown(rt, 0, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_shutdown(rt, -2, ignore_err, NULL, &e), InvalidArgument, &e);

  /* box-level NULL arguments */
  CHECK_RC(boxlite_start_box(NULL, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_stop_box(NULL, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_into(NULL, "/etc/hostname", "/tmp", ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_out(NULL, "/etc/hostname", "/tmp/x", ignore_err, NULL, &e), InvalidArgument, &e);
  BoxliteCommand cmd = {.command = "true"};
  CExecutionHandle *ex = NULL;
  CHECK_RC(boxlite_box_exec(NULL, &cmd, &ex, &e), InvalidArgument, &e);
  CHECK(ex == NULL);

  /* A box that is created but never booted, for the handle-level argument checks. */
  CHECK_RC(boxlite_create_box(rt, o, op_box, &op, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &op.done, 60);
  CHECK(op.code == Ok && op.box != NULL);
  CBoxHandle *box = op.box;
  CHECK_RC(boxlite_start_box(box, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_stop_box(box, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_into(box, NULL, "/tmp", ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_into(box, "/etc/hostname", "", ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_into(box, "/etc/hostname", "/tmp", NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_out(box, "", "/tmp/x", ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_copy_out(box, "/etc/hostname", NULL, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_exec(box, NULL, &ex, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_exec(box, &cmd, NULL, &e), InvalidArgument, &e);
  BoxliteCommand bad = {.command = NULL};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  bad.command = "";
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  bad = (BoxliteCommand){.command = "echo", .args = NULL, .argc = 2};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  const char *nullarg[] = {NULL};
  bad = (BoxliteCommand){.command = "echo", .args = nullarg, .argc = 1};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  bad = (BoxliteCommand){.command = "echo", .argc = -1};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  bad = (BoxliteCommand){.command = "echo", .timeout_secs = -1.0};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  const char *env_nullval[] = {"K", NULL};
  bad = (BoxliteCommand){.command = "echo", .env_pairs = env_nullval, .env_count = 2};
  CHECK_RC(boxlite_box_exec(box, &bad, &ex, &e), InvalidArgument, &e);
  CHECK(ex == NULL);
  CBoxInfo *info = boxlite_box_info(box);
  CHECK(info != NULL && strcmp(info->status, "configured") == 0 && !info->running);
  boxlite_free_box_info(info);
  boxlite_box_free(box); /* auto_remove: the unbooted box goes with its handle */

  /* execution-level NULL arguments */
  CHECK_RC(boxlite_execution_on_stdout(NULL, buf_cb, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_on_stderr(NULL, buf_cb, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_on_exit(NULL, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_stdin_write(NULL, (const uint8_t *)"x", 1, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_stdin_close(NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_wait(NULL, op_wait, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_kill(NULL, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_signal(NULL, 15, ignore_err, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_tty_resize(NULL, 24, 80, ignore_err, NULL, &e), InvalidArgument, &e);

  /* Simple API argument checks (no box is made) */
  CBoxliteSimple *simple = NULL;
  CHECK_RC(boxlite_simple_new(NULL, 0, 0, &simple, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_new("", 0, 0, &simple, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_new(image, -1, 0, &simple, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_new(image, 0, -1, &simple, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_new(image, 0, 0, NULL, &e), InvalidArgument, &e);
  CBoxliteExecResult *res = NULL;
  CHECK_RC(boxlite_simple_run(NULL, "true", NULL, 0, &res, &e), InvalidArgument, &e);
  CHECK(res == NULL);

  /* images: argument checks (pulls from a registry: capi_wired_test) */
  CBoxliteImageHandle *images = NULL;
  CHECK_RC(boxlite_runtime_images(NULL, &images, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_images(rt, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_images(rt, &images, &e), Ok, &e);
  CHECK_RC(boxlite_image_pull(images, NULL, on_pull, &pulled, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_pull(images, "", on_pull, &pulled, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_pull(NULL, "alpine", on_pull, &pulled, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_pull(images, "alpine", NULL, &pulled, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_list(NULL, on_list, &listed, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_list(images, NULL, &listed, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_image_pull(images, "bad reference!", on_pull, &pulled, &e), Ok, &e);
  CHECK_RC(boxlite_image_list(images, on_list, &listed, &e), Ok, &e);
  CHECK(!pulled.done && !listed.done); /* nothing fires before drain */
  pump_until(rt, &listed.done, 10);
  pump_until(rt, &pulled.done, 10);
  CHECK(pulled.code == InvalidArgument && strstr(pulled.msg, "bad reference!"));
  CHECK(listed.code == Ok);

  /* metrics: argument checks */
  CHECK_RC(boxlite_runtime_metrics(NULL, on_rt_metrics, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_runtime_metrics(rt, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_metrics(NULL, on_box_metrics, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_exec_streamed(NULL, NULL, NULL, NULL, NULL, NULL, &e), InvalidArgument, &e);
  boxlite_image_free(images);

  /* Unknown boxes: NotFound through the callbacks. */
  Op got = {0}, inf = {0}, rm = {0};
  CHECK_RC(boxlite_get(rt, "nosuch", op_box, &got, &e), Ok, &e);
  CHECK_RC(boxlite_remove(rt, "nosuch", 1, op_done, &rm, &e), Ok, &e);
  pump_until(rt, &rm.done, 10);
  pump_until(rt, &got.done, 10);
  CHECK(got.code == NotFound && got.box == NULL && strstr(got.msg, "nosuch"));
  CHECK(rm.code == NotFound);
  (void)inf;

  boxlite_runtime_free(rt);
  printf("capi_args_test: ok\n");
  return 0;
}
