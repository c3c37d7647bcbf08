/* The options and calls wired to the core after the first C API: registries in
 * boxlite_runtime_new, image pull/list, network disabled and allow_net, ports,
 * secrets, boxlite_box_metrics / boxlite_runtime_metrics, and
 * boxlite_box_exec_streamed. Usage: capi_wired_test REGISTRY_HOST (a local
 * http test registry holding test/busybox:latest). */
#include "capi_test.h"

static CBoxliteError e;

static CImagePullResult pulled_copy;
static Op pulled;
static void on_pull(CImagePullResult *r, CBoxliteError *err, void *ud) {
  if (r) {
    pulled_copy.reference = strdup(r->reference);
    pulled_copy.config_digest = strdup(r->config_digest);
    pulled_copy.layer_count = r->layer_count;
  }
  op_record((Op *)ud, err);
}
static Op listed;
static int listed_found;
static void on_list(CImageInfoList *l, CBoxliteError *err, void *ud) {
  for (int i = 0; l && i < l->count; ++i) {
    if (strstr(l->items[i].reference, "test/busybox") && strcmp(l->items[i].tag, "latest") == 0 &&
        l->items[i].has_size && l->items[i].size > 0 && l->items[i].cached_at > 0 &&
        strncmp(l->items[i].id, "sha256:", 7) == 0) {
      listed_found = 1;
    }
  }
  op_record((Op *)ud, err);
}

static CBoxMetrics box_m;
static Op box_mop;
static void on_box_metrics(CBoxMetrics *m, CBoxliteError *err, void *ud) {
  if (m) box_m = *m;
  op_record((Op *)ud, err);
}
static CRuntimeMetrics rt_m;
static Op rt_mop;
static void on_rt_metrics(CRuntimeMetrics *m, CBoxliteError *err, void *ud) {
  if (m) rt_m = *m;
  op_record((Op *)ud, err);
}

typedef struct {
  Buf out, err;
  Op wait;
} Run;

/* Runs `sh -c script` with callbacks registered by boxlite_box_exec_streamed. */
static void sh(CBoxliteRuntime *rt, CBoxHandle *box, const char *script, Run *r) {
  const char *args[] = {"-c", script};
  BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
  CExecutionHandle *ex = NULL;
  memset(r, 0, sizeof *r);
  CHECK_RC(boxlite_box_exec_streamed(box, &cmd, buf_cb, NULL, &r->out, &ex, &e), InvalidArgument, &e);
  CHECK(ex == NULL);
  /* one user_data for both streams: the out buffer; stderr is checked via its own run */
  CHECK_RC(boxlite_box_exec_streamed(box, &cmd, buf_cb, buf_cb, &r->out, &ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &r->wait, &e), Ok, &e);
  pump_until(rt, &r->wait.done, 120);
  boxlite_execution_free(ex);
}

static CBoxHandle *create(CBoxliteRuntime *rt, CBoxliteOptions *o) {
  Op op = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &op, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &op.done, 120);
  if (op.code != Ok) fprintf(stderr, "create: %s\n", op.msg);
  CHECK(op.code == Ok && op.box != NULL);
  return op.box;
}

static void stop_and_free(CBoxliteRuntime *rt, CBoxHandle *box) {
  Op op = {0};
  CHECK_RC(boxlite_stop_box(box, op_done, &op, &e), Ok, &e);
  pump_until(rt, &op.done, 60);
  CHECK(op.code == Ok);
  boxlite_box_free(box);
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(300);
  const char *host = argv[1];
  BoxliteImageRegistry reg = {.host = host, .transport = BoxliteRegistryTransportHttp, .search = 1};
  CBoxliteRuntime *rt = NULL;
  CHECK_RC(boxlite_runtime_new(NULL, &reg, 1, &rt, &e), Ok, &e);

  /* Pull by an unqualified name: found through the search registry. */
  CBoxliteImageHandle *images = NULL;
  CHECK_RC(boxlite_runtime_images(rt, &images, &e), Ok, &e);
  CHECK_RC(boxlite_image_pull(images, "test/busybox:latest", on_pull, &pulled, &e), Ok, &e);
  pump_until(rt, &pulled.done, 120);
  if (pulled.code != Ok) fprintf(stderr, "pull: %s\n", pulled.msg);
  CHECK(pulled.code == Ok);
  CHECK(strstr(pulled_copy.reference, host) && strstr(pulled_copy.reference, "test/busybox:latest"));
  CHECK(strncmp(pulled_copy.config_digest, "sha256:", 7) == 0 && pulled_copy.layer_count >= 1);
  CHECK_RC(boxlite_image_list(images, on_list, &listed, &e), Ok, &e);
  pump_until(rt, &listed.done, 30);
  CHECK(listed.code == Ok && listed_found);
  boxlite_image_free(images);
  printf("pulled %s (%d layers)\n", pulled_copy.reference, pulled_copy.layer_count);

  /* A box from the registry image: network disabled, a secret, a port. */
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new("test/busybox:latest", &o, &e), Ok, &e);
  CHECK_RC(boxlite_options_set_engine(o, getenv("BOXLITE_ENGINE"), &e), Ok, &e);
  boxlite_options_set_network_disabled(o);
  const char *hosts[] = {"api.example.com"};
  boxlite_options_add_secret(o, "api_key", "real-secret-value", NULL, hosts, 1);
  CBoxHandle *box = create(rt, o);
  Run r;
  sh(rt, box, "echo $BOXLITE_SECRET_API_KEY; env | grep -c real-secret-value; ls /sys/class/net", &r);
  printf("disabled box: %s", buf_str(&r.out));
  CHECK(strstr(buf_str(&r.out), "<BOXLITE_SECRET:api_key>\n0\n") != NULL);
  CHECK(strstr(buf_str(&r.out), "eth") == NULL);
  buf_free(&r.out);

  /* Box metrics count this run's commands. */
  CHECK_RC(boxlite_box_metrics(box, on_box_metrics, &box_mop, &e), Ok, &e);
  pump_until(rt, &box_mop.done, 30);
  CHECK(box_mop.code == Ok);
  printf("box metrics: commands_executed=%d exec_errors=%d memory_bytes=%lld create_ms=%lld boot_ms=%lld\n",
         box_m.commands_executed, box_m.exec_errors, (long long)box_m.memory_bytes, (long long)box_m.create_duration_ms,
         (long long)box_m.boot_duration_ms);
  CHECK(box_m.commands_executed >= 1 && box_m.create_duration_ms > 0);
  stop_and_free(rt, box);

  /* Network enabled with an allowlist and a published port. */
  CHECK_RC(boxlite_options_new("test/busybox:latest", &o, &e), Ok, &e);
  CHECK_RC(boxlite_options_set_engine(o, getenv("BOXLITE_ENGINE"), &e), Ok, &e);
  boxlite_options_set_network_enabled(o);
  boxlite_options_add_allow_net(o, "example.com");
  CHECK(boxlite_options_add_port(o, 0, 18089, BoxlitePortProtocolTcp, "127.0.0.1") == Ok);
  box = create(rt, o);
  sh(rt, box, "ls /sys/class/net", &r);
  printf("enabled box: %s", buf_str(&r.out));
  CHECK(strstr(buf_str(&r.out), "eth0") != NULL);
  buf_free(&r.out);

  CHECK_RC(boxlite_runtime_metrics(rt, on_rt_metrics, &rt_mop, &e), Ok, &e);
  pump_until(rt, &rt_mop.done, 30);
  CHECK(rt_mop.code == Ok);
  printf("runtime metrics: created=%d failed=%d running=%d commands=%d errors=%d\n", rt_m.boxes_created_total,
         rt_m.boxes_failed_total, rt_m.num_running_boxes, rt_m.total_commands_executed, rt_m.total_exec_errors);
  CHECK(rt_m.boxes_created_total == 2 && rt_m.num_running_boxes >= 1 && rt_m.total_commands_executed >= 2);
  stop_and_free(rt, box);

  free(pulled_copy.reference);
  free(pulled_copy.config_digest);
  boxlite_runtime_free(rt);
  printf("capi_wired_test: ok\n");
  return 0;
}
