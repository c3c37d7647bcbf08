/* The C API additions of the SDK work (docs/c-api.md): boxlite_box_metrics_ex
 * (the stage timings in a versioned extension struct), the SecurityOptions setters
 * (rlimits and seccomp on the jail engine; a limit on a vm box is Unsupported), and
 * boxlite_box_exec_acked / boxlite_execution_ack_output (output credit returned by
 * the caller, so unread output pauses the command instead of piling up), and
 * boxlite_box_exec_acked_ex / boxlite_spawn_failure_exit_code (why a command could
 * not start, as a kind: 127/126/125).
 * Usage: capi_ext_test IMAGE_DIR (jail engine). */
#include <stddef.h>

#include "capi_test.h"

static CBoxliteRuntime *rt;

typedef struct {
  Op op;
  CBoxMetricsEx m;
} MetricsOp;

static void on_metrics_ex(const CBoxMetricsEx *m, CBoxliteError *err, void *ud) {
  MetricsOp *mo = (MetricsOp *)ud;
  if (m) mo->m = *m;
  op_record(&mo->op, err);
}

static CBoxHandle *create_with(const char *image, const CAdvancedBoxOptions *adv, const char *engine, Op *op) {
  CBoxliteError e = {0};
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  if (adv) boxlite_options_set_advanced(o, adv);
  if (engine) CHECK_RC(boxlite_options_set_engine(o, engine, &e), Ok, &e);
  CHECK_RC(boxlite_create_box(rt, o, op_box, op, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &op->done, 120);
  return op->box;
}

/* Runs `sh -c script` and returns its stdout (caller frees). */
static char *run(CBoxHandle *box, const char *script) {
  CBoxliteError e = {0};
  const char *args[] = {"-c", script};
  BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
  static Buf out, err;
  buf_free(&out);
  buf_free(&err);
  Op w = {0};
  CExecutionHandle *ex = NULL;
  CHECK_RC(boxlite_box_exec_streamed(box, &cmd, buf_cb, buf_cb, &out, &ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &w, &e), Ok, &e);
  pump_until(rt, &w.done, 60);
  CHECK(w.code == Ok);
  boxlite_execution_free(ex);
  char *s = strdup(buf_str(&out));
  buf_free(&out);
  return s;
}

static void test_metrics_ex(const char *image) {
  CBoxliteError e = {0};
  Op op = {0};
  CBoxHandle *box = create_with(image, NULL, NULL, &op);
  CHECK(op.code == Ok);
  CHECK_RC(boxlite_box_metrics_ex(NULL, on_metrics_ex, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_metrics_ex(box, NULL, NULL, &e), InvalidArgument, &e);
  /* Never started: no spawn or init stage yet. */
  MetricsOp before = {0};
  CHECK_RC(boxlite_box_metrics_ex(box, on_metrics_ex, &before, &e), Ok, &e);
  pump_until(rt, &before.op.done, 60);
  CHECK(before.op.code == Ok);
  CHECK(before.m.struct_size == sizeof(CBoxMetricsEx));
  CHECK(before.m.stage_box_spawn_ms == -1);
  Op start = {0};
  CHECK_RC(boxlite_start_box(box, op_done, &start, &e), Ok, &e);
  pump_until(rt, &start.done, 120);
  CHECK(start.code == Ok);
  free(run(box, "true"));
  MetricsOp after = {0};
  CHECK_RC(boxlite_box_metrics_ex(box, on_metrics_ex, &after, &e), Ok, &e);
  pump_until(rt, &after.op.done, 60);
  CHECK(after.op.code == Ok);
  CHECK(after.m.struct_size >= offsetof(CBoxMetricsEx, exec_errors_total) + sizeof(uint64_t));
  CHECK(after.m.stage_image_prepare_ms >= 0);
  CHECK(after.m.stage_filesystem_setup_ms >= 0);
  CHECK(after.m.stage_box_spawn_ms >= 0);
  CHECK(after.m.stage_container_init_ms >= 0);
  CHECK(after.m.stage_guest_rootfs_ms == -1); /* a jail has no disk image */
  CHECK(after.m.base.create_duration_ms > 0);
  CHECK(after.m.commands_executed_total >= 1);
  CHECK((uint64_t)after.m.base.commands_executed == after.m.commands_executed_total);
  printf("metrics_ex: image_prepare=%lld fs=%lld spawn=%lld init=%lld boot=%lld total=%lld\n",
         (long long)after.m.stage_image_prepare_ms, (long long)after.m.stage_filesystem_setup_ms,
         (long long)after.m.stage_box_spawn_ms, (long long)after.m.stage_container_init_ms,
         (long long)after.m.base.boot_duration_ms, (long long)after.m.base.create_duration_ms);
  Op stop = {0};
  CHECK_RC(boxlite_stop_box(box, op_done, &stop, &e), Ok, &e);
  pump_until(rt, &stop.done, 60);
  boxlite_box_free(box);
}

static void test_security(const char *image) {
  CBoxliteError e = {0};
  /* NULL-safety of the new setters. */
  boxlite_advanced_options_set_seccomp_enabled(NULL, 0);
  boxlite_advanced_options_set_max_open_files(NULL, 1);
  boxlite_advanced_options_set_max_file_size(NULL, 1);
  boxlite_advanced_options_set_max_processes(NULL, 1);
  boxlite_advanced_options_set_max_memory(NULL, 1);
  boxlite_advanced_options_set_max_cpu_time(NULL, 1);

  CAdvancedBoxOptions *adv = NULL;
  CHECK_RC(boxlite_advanced_options_new(&adv, &e), Ok, &e);
  boxlite_advanced_options_set_max_open_files(adv, 256);
  boxlite_advanced_options_set_max_file_size(adv, 1 << 20);
  boxlite_advanced_options_set_max_processes(adv, 100);
  boxlite_advanced_options_set_max_cpu_time(adv, 3600);

  /* The vm engine takes them too (its agent sets them: tests/python/test_vm_smoke.py
     boots one); created, never started, and removed with its handle. */
  Op vm = {0};
  CBoxHandle *vm_box = create_with(image, adv, "vm", &vm);
  CHECK(vm.code == Ok);
  boxlite_box_free(vm_box);

  Op op = {0};
  CBoxHandle *box = create_with(image, adv, NULL, &op);
  CHECK(op.code == Ok);
  char *s = run(box,
                "ulimit -n; ulimit -p 2>/dev/null || cat /proc/self/limits | grep -i 'max processes';"
                "grep Seccomp: /proc/self/status;"
                "dd if=/dev/zero of=/tmp/big bs=1024 count=2048 2>/dev/null; wc -c </tmp/big");
  printf("limited box:\n%s", s);
  CHECK(strncmp(s, "256\n", 4) == 0);
  CHECK(strstr(s, "100"));
  CHECK(strstr(s, "Seccomp:\t2"));
  CHECK(strstr(s, "1048576\n")); /* RLIMIT_FSIZE stopped the file at 1 MiB */
  free(s);
  boxlite_box_free(box);

  /* seccomp off: the filter is not loaded. */
  boxlite_advanced_options_free(adv);
  CHECK_RC(boxlite_advanced_options_new(&adv, &e), Ok, &e);
  boxlite_advanced_options_set_seccomp_enabled(adv, 0);
  Op op2 = {0};
  box = create_with(image, adv, NULL, &op2);
  CHECK(op2.code == Ok);
  s = run(box, "grep Seccomp: /proc/self/status");
  printf("seccomp off: %s", s);
  CHECK(strstr(s, "Seccomp:\t0"));
  free(s);
  boxlite_box_free(box);
  boxlite_advanced_options_free(adv);
}

typedef struct {
  size_t delivered;
} Count;
static void count_cb(const uint8_t *d, size_t n, void *ud) {
  (void)d;
  ((Count *)ud)->delivered += n;
}

static void test_acked(const char *image) {
  CBoxliteError e = {0};
  Op op = {0};
  CBoxHandle *box = create_with(image, NULL, NULL, &op);
  CHECK(op.code == Ok);
  const char *args[] = {"-c", "head -c 8388608 /dev/zero"};
  BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
  CExecutionHandle *ex = NULL;
  Count c = {0};
  CHECK_RC(boxlite_box_exec_acked(box, &cmd, NULL, count_cb, &c, &ex, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_ack_output(NULL, 1, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_exec_acked(box, &cmd, count_cb, count_cb, &c, &ex, &e), Ok, &e);
  Op w = {0};
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &w, &e), Ok, &e);
  /* Nothing acked: delivery stops at the 1 MiB window (plus at most one chunk). */
  double end = now_s() + 3;
  while (now_s() < end) CHECK(boxlite_runtime_drain(rt, 50, &e) >= 0);
  printf("acked: %zu bytes delivered without acks\n", c.delivered);
  CHECK(c.delivered > 0 && c.delivered <= (1u << 20) + (256u << 10));
  CHECK(!w.done);
  /* Acking what was consumed lets it run to the end. */
  size_t acked = 0;
  end = now_s() + 120;
  while (!w.done) {
    CHECK(now_s() < end);
    if (c.delivered > acked) {
      CHECK_RC(boxlite_execution_ack_output(ex, c.delivered - acked, &e), Ok, &e);
      acked = c.delivered;
    }
    CHECK(boxlite_runtime_drain(rt, 20, &e) >= 0);
  }
  CHECK(w.code == Ok && w.exit_code == 0);
  CHECK(c.delivered == 8388608);
  CHECK_RC(boxlite_execution_ack_output(ex, 1u << 30, &e), Ok, &e); /* clamped */
  boxlite_execution_free(ex);

  /* A paused command (never acked) can still be killed, and its wait fires. */
  Count c2 = {0};
  const char *args2[] = {"-c", "yes"};
  BoxliteCommand cmd2 = {.command = "sh", .args = args2, .argc = 2};
  CHECK_RC(boxlite_box_exec_acked(box, &cmd2, count_cb, count_cb, &c2, &ex, &e), Ok, &e);
  Op w2 = {0}, k = {0};
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &w2, &e), Ok, &e);
  end = now_s() + 2;
  while (now_s() < end) CHECK(boxlite_runtime_drain(rt, 50, &e) >= 0);
  CHECK(!w2.done);
  CHECK_RC(boxlite_execution_kill(ex, op_done, &k, &e), Ok, &e);
  pump_until(rt, &k.done, 60);
  pump_until(rt, &w2.done, 60);
  CHECK(w2.exit_code == -9);
  printf("acked: paused 'yes' killed after %zu bytes\n", c2.delivered);
  boxlite_execution_free(ex);
  boxlite_box_free(box);
}

/* Starts cmd with boxlite_box_exec_acked_ex and expects it to fail to start
 * because of `want`, with `exit_code` for it and a message holding `needle`. */
static void expect_spawn_failure(CBoxHandle *box, BoxliteCommand cmd, enum BoxliteSpawnFailure want, int exit_code,
                                 const char *needle) {
  CBoxliteError e = {0};
  CExecutionHandle *ex = NULL;
  Count c = {0};
  enum BoxliteSpawnFailure why = (enum BoxliteSpawnFailure)99;
  enum BoxliteErrorCode rc = boxlite_box_exec_acked_ex(box, &cmd, count_cb, count_cb, &c, &ex, &why, &e);
  printf("spawn failure %d (exit code %d): %s\n", (int)why, boxlite_spawn_failure_exit_code(why),
         e.message ? e.message : "(none)");
  CHECK(rc == Execution && e.code == Execution && ex == NULL);
  CHECK(why == want && boxlite_spawn_failure_exit_code(why) == exit_code);
  CHECK(e.message && strstr(e.message, needle) && !strstr(e.message, "boxlite_"));
  boxlite_error_free(&e);
}

/* boxlite_box_exec_acked_ex: why a command did not start, typed (docs/c-api.md). */
static void test_spawn_failure(const char *image) {
  CBoxliteError e = {0};
  Op op = {0};
  CBoxHandle *box = create_with(image, NULL, NULL, &op);
  CHECK(op.code == Ok);
  CHECK(boxlite_spawn_failure_exit_code(BoxliteSpawnFailureNone) == 0);
  CHECK(boxlite_spawn_failure_exit_code(BoxliteSpawnFailureSetup) == 125);
  CHECK(boxlite_spawn_failure_exit_code((enum BoxliteSpawnFailure)42) == 0);
  CHECK(boxlite_spawn_failure_exit_code((enum BoxliteSpawnFailure) - 1) == 0);
  expect_spawn_failure(box, (BoxliteCommand){.command = "nope"}, BoxliteSpawnFailureNotFound, 127,
                       "not found in $PATH");
  expect_spawn_failure(box, (BoxliteCommand){.command = "/etc/passwd"}, BoxliteSpawnFailureNotExecutable, 126,
                       "/etc/passwd");
  expect_spawn_failure(box, (BoxliteCommand){.command = "true", .workdir = "/no/such/dir"},
                       BoxliteSpawnFailureBadWorkingDir, 126, "/no/such/dir");
  expect_spawn_failure(box, (BoxliteCommand){.command = "true", .user = "nosuchuser"}, BoxliteSpawnFailureUnknownUser,
                       126, "nosuchuser");
  /* Any other failure leaves None, and so does a start; a NULL out pointer is fine. */
  CExecutionHandle *ex = NULL;
  Count c = {0};
  enum BoxliteSpawnFailure why = BoxliteSpawnFailureSetup;
  BoxliteCommand bad = {.command = ""};
  CHECK_RC(boxlite_box_exec_acked_ex(box, &bad, count_cb, count_cb, &c, &ex, &why, &e), InvalidArgument, &e);
  CHECK(why == BoxliteSpawnFailureNone);
  CHECK_RC(boxlite_box_exec_acked_ex(NULL, &bad, count_cb, count_cb, &c, &ex, &why, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_box_exec_acked_ex(box, &bad, count_cb, count_cb, &c, &ex, NULL, &e), InvalidArgument, &e);
  const char *args[] = {"-c", "echo hi"};
  BoxliteCommand ok = {.command = "sh", .args = args, .argc = 2};
  why = BoxliteSpawnFailureSetup;
  CHECK_RC(boxlite_box_exec_acked_ex(box, &ok, count_cb, count_cb, &c, &ex, &why, &e), Ok, &e);
  CHECK(why == BoxliteSpawnFailureNone && ex != NULL);
  Op w = {0};
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &w, &e), Ok, &e);
  while (!w.done) {
    CHECK(boxlite_runtime_drain(rt, 50, &e) >= 0);
    if (c.delivered) CHECK_RC(boxlite_execution_ack_output(ex, c.delivered, &e), Ok, &e);
  }
  CHECK(w.code == Ok && w.exit_code == 0 && c.delivered == 3);
  boxlite_execution_free(ex);
  /* The documented functions are unchanged: a spawn failure is still Execution. */
  BoxliteCommand nope = {.command = "nope"};
  CHECK_RC(boxlite_box_exec_acked(box, &nope, count_cb, count_cb, &c, &ex, &e), Execution, &e);
  CHECK_RC(boxlite_box_exec(box, &nope, &ex, &e), Execution, &e);
  boxlite_box_free(box);
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(500);
  CBoxliteError e = {0};
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  test_metrics_ex(argv[1]);
  test_security(argv[1]);
  test_acked(argv[1]);
  test_spawn_failure(argv[1]);
  boxlite_runtime_free(rt);
  printf("capi_ext_test: ok\n");
  return 0;
}
