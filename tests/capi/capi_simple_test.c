/* The Simple API on a real box: defaults, buffered output, non-zero exits,
 * errors. Usage: capi_simple_test IMAGE_DIR */
#include "capi_test.h"

static CBoxliteRuntime *rt;
typedef struct {
  Op op;
  int cpus, memory_mib, count;
} Listed;
static void on_list(CBoxInfoList *list, CBoxliteError *err, void *ud) {
  Listed *l = (Listed *)ud;
  if (list) {
    l->count = list->count;
    if (list->count > 0) {
      l->cpus = list->items[0].cpus;
      l->memory_mib = list->items[0].memory_mib;
    }
  }
  op_record(&l->op, err);
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(300);
  CBoxliteError e = {0};
  CBoxliteSimple *box = NULL;
  CHECK_RC(boxlite_simple_new(argv[1], 0, 0, &box, &e), Ok, &e);
  CHECK(box != NULL);

  /* 0, 0 -> 1 vCPU / 1024 MiB, as recorded for the box */
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  Listed l = {0};
  CHECK_RC(boxlite_list_info(rt, on_list, &l, &e), Ok, &e);
  pump_until(rt, &l.op.done, 30);
  CHECK(l.op.code == Ok && l.count == 1 && l.cpus == 1 && l.memory_mib == 1024);
  boxlite_runtime_free(rt);

  CBoxliteExecResult *res = NULL;
  const char *echo_args[] = {"hello", "world"};
  CHECK_RC(boxlite_simple_run(box, "echo", echo_args, 2, &res, &e), Ok, &e);
  CHECK(res->exit_code == 0 && strcmp(res->stdout_text, "hello world\n") == 0 && strcmp(res->stderr_text, "") == 0);
  boxlite_result_free(res);

  /* A failing command is a result, not an API error. */
  const char *fail_args[] = {"-c", "echo bad >&2; exit 4"};
  CHECK_RC(boxlite_simple_run(box, "sh", fail_args, 2, &res, &e), Ok, &e);
  CHECK(res->exit_code == 4 && res->stdout_text != NULL && res->stdout_text[0] == '\0');
  CHECK(strcmp(res->stderr_text, "bad\n") == 0);
  boxlite_result_free(res);

  /* No args */
  CHECK_RC(boxlite_simple_run(box, "true", NULL, 0, &res, &e), Ok, &e);
  CHECK(res->exit_code == 0);
  boxlite_result_free(res);

  /* Errors */
  res = NULL;
  CHECK_RC(boxlite_simple_run(box, NULL, NULL, 0, &res, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_run(box, "", NULL, 0, &res, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_run(box, "echo", NULL, 1, &res, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_run(box, "echo", NULL, -1, &res, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_simple_run(box, "echo", echo_args, 2, NULL, &e), InvalidArgument, &e);
  CHECK(res == NULL);
  enum BoxliteErrorCode rc = boxlite_simple_run(box, "/no/such/program", NULL, 0, &res, &e);
  CHECK(rc != Ok && e.code == rc && e.message != NULL);
  printf("missing program: code %d: %s\n", e.code, e.message);
  boxlite_error_free(&e);

  /* A bad image fails with Image and a message. */
  CBoxliteSimple *bad = NULL;
  rc = boxlite_simple_new("/no/such/layout", 0, 0, &bad, &e);
  CHECK(rc == Image && bad == NULL && e.message != NULL);
  boxlite_error_free(&e);

  boxlite_simple_free(box); /* stops and removes the box (run-in-home.sh checks) */
  printf("capi_simple_test: ok\n");
  return 0;
}
