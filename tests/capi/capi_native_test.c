/* The Native API on a real box: lifecycle, exec (output order, exit codes, env,
 * workdir, user, timeout, stdin, TTY and resize, signals, kill), info, copy,
 * get/get_or_create/remove, freeing handles with work pending, drain rules,
 * shutdown. Usage: capi_native_test IMAGE_DIR (BOXLITE_ENGINE picks the engine) */
#include <sys/stat.h>

#include "capi_test.h"

static CBoxliteRuntime *rt;
static CBoxliteError e;

typedef struct {
  Buf out, err;
  Op wait;
  int exit_seen, exit_code, exit_before_wait;
} Run;

static void on_exit_cb(int code, void *ud) {
  Run *r = (Run *)ud;
  r->exit_seen++;
  r->exit_code = code;
  r->exit_before_wait = !r->wait.done;
}

/* Starts cmd with output and exit callbacks registered. */
static CExecutionHandle *start(CBoxHandle *box, const BoxliteCommand *cmd, Run *r) {
  memset(r, 0, sizeof *r);
  CExecutionHandle *ex = NULL;
  CHECK_RC(boxlite_box_exec(box, cmd, &ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_on_stdout(ex, buf_cb, &r->out, &e), Ok, &e);
  CHECK_RC(boxlite_execution_on_stderr(ex, buf_cb, &r->err, &e), Ok, &e);
  CHECK_RC(boxlite_execution_on_exit(ex, on_exit_cb, r, &e), Ok, &e);
  return ex;
}

static void finish(CExecutionHandle *ex, Run *r) {
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &r->wait, &e), Ok, &e);
  pump_until(rt, &r->wait.done, 60);
  boxlite_execution_free(ex);
}

/* Runs `sh -c script` to completion. */
static void sh(CBoxHandle *box, const char *script, Run *r) {
  const char *args[] = {"-c", script};
  BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
  finish(start(box, &cmd, r), r);
}

static void expect_out(CBoxHandle *box, const char *script, const char *want) {
  Run r;
  sh(box, script, &r);
  if (strcmp(buf_str(&r.out), want) != 0 || r.wait.exit_code != 0) {
    fprintf(stderr, "`%s`: got '%s' (exit %d, stderr '%s'), want '%s'\n", script, buf_str(&r.out), r.wait.exit_code,
            buf_str(&r.err), want);
    exit(1);
  }
  buf_free(&r.out);
  buf_free(&r.err);
}

static Op ran_in_callback;
static void reenter(CBoxInfo *info, CBoxliteError *err, void *ud) {
  (void)info;
  (void)err;
  CBoxliteError inner = {0};
  ((Op *)ud)->exit_code = boxlite_runtime_drain(rt, 0, &inner);
  ((Op *)ud)->code = inner.code;
  boxlite_error_free(&inner);
  ((Op *)ud)->thread = pthread_self();
  ((Op *)ud)->done = 1;
}

typedef struct {
  Op op;
  char id[64];
  int running, count, found;
} Info;
static const char *g_id;
static void on_info(CBoxInfo *info, CBoxliteError *err, void *ud) {
  Info *i = (Info *)ud;
  if (info) {
    snprintf(i->id, sizeof i->id, "%s", info->id);
    i->running = info->running;
    i->count = 1;
  }
  op_record(&i->op, err);
}
static void on_list(CBoxInfoList *list, CBoxliteError *err, void *ud) {
  Info *i = (Info *)ud;
  if (list) {
    i->count = list->count;
    for (int k = 0; k < list->count; ++k) i->found |= strcmp(list->items[k].id, g_id) == 0;
  }
  op_record(&i->op, err);
}

static int fired;
static void must_not_fire_err(CBoxliteError *err, void *ud) {
  (void)err;
  (void)ud;
  fired++;
}
static void must_not_fire_out(const uint8_t *d, size_t n, void *ud) {
  (void)d;
  (void)n;
  (void)ud;
  fired++;
}
static void must_not_fire_wait(int c, CBoxliteError *err, void *ud) {
  (void)c;
  (void)err;
  (void)ud;
  fired++;
}

static CBoxHandle *create(const char *image, const char *name) {
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  if (name) boxlite_options_set_name(o, name);
  Op op = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &op, &e), Ok, &e);
  boxlite_options_free(o); /* copied at submission: freeing it now is fine */
  pump_until(rt, &op.done, 120);
  if (op.code != Ok) {
    fprintf(stderr, "create failed: %d %s\n", op.code, op.msg);
    exit(1);
  }
  return op.box;
}

static void box_step(enum BoxliteErrorCode (*fn)(CBoxHandle *, CBoxStartBoxCb, void *, CBoxliteError *),
                     CBoxHandle *box, int want) {
  Op op = {0};
  CHECK_RC(fn(box, op_done, &op, &e), Ok, &e);
  pump_until(rt, &op.done, 120);
  if (op.code != want) {
    fprintf(stderr, "box step: got %d (%s), want %d\n", op.code, op.msg, want);
    exit(1);
  }
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  const char *image = argv[1];
  alarm(500);
  CHECK_RC(boxlite_runtime_new(getenv("BOXLITE_HOME"), NULL, 0, &rt, &e), Ok, &e);

  /* No callback before drain, even for an operation long finished; callbacks run
   * on the draining thread; drain from inside a callback is refused. */
  Op early = {0};
  CHECK_RC(boxlite_get_info(rt, "nosuch", reenter, &early, &e), Ok, &e);
  sleep_ms(300);
  CHECK(!early.done);
  pump_until(rt, &early.done, 10);
  CHECK(pthread_equal(early.thread, pthread_self()));
  CHECK(early.exit_code == -1 && early.code == InvalidState);
  (void)ran_in_callback;

  CBoxHandle *box = create(image, "native-box");
  char *id = boxlite_box_id(box);
  g_id = id;
  CBoxInfo *info = boxlite_box_info(box);
  CHECK(id && info && strcmp(id, info->id) == 0);
  CHECK(strcmp(info->status, "configured") == 0 && info->cpus == 1 && info->memory_mib == 1024);
  CHECK(info->name && strcmp(info->name, "native-box") == 0 && info->created_at > 1700000000);
  boxlite_free_box_info(info);

  box_step(boxlite_start_box, box, Ok);
  info = boxlite_box_info(box);
  CHECK(info && info->running && info->pid > 0 && strcmp(info->status, "running") == 0);
  boxlite_free_box_info(info);

  /* box_exec returns at once; kill ends the command; the wait after it gets -9. */
  const char *sleep_args[] = {"5"};
  BoxliteCommand sleep5 = {.command = "sleep", .args = sleep_args, .argc = 1};
  Run r;
  double t = now_s();
  CExecutionHandle *ex = start(box, &sleep5, &r);
  CHECK(now_s() - t < 2.0);
  Op killed = {0};
  CHECK_RC(boxlite_execution_kill(ex, op_done, &killed, &e), Ok, &e);
  pump_until(rt, &killed.done, 10);
  CHECK(killed.code == Ok && now_s() - t < 4.0);
  finish(ex, &r);
  CHECK(r.wait.exit_code == -9 && r.exit_code == -9);

  /* Output in order per stream, exit code 3 through wait and on_exit. */
  sh(box, "echo out; echo err 1>&2; exit 3", &r);
  CHECK(strcmp(buf_str(&r.out), "out\n") == 0 && strcmp(buf_str(&r.err), "err\n") == 0);
  CHECK(r.wait.code == Ok && r.wait.exit_code == 3);
  CHECK(r.exit_seen == 1 && r.exit_code == 3 && r.exit_before_wait);
  buf_free(&r.out);
  buf_free(&r.err);

  /* A second wait after the end fires with the same code. */
  const char *args3[] = {"-c", "exit 5"};
  BoxliteCommand c5 = {.command = "sh", .args = args3, .argc = 2};
  ex = start(box, &c5, &r);
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &r.wait, &e), Ok, &e);
  pump_until(rt, &r.wait.done, 30);
  Op again = {0};
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &again, &e), Ok, &e);
  pump_until(rt, &again.done, 5);
  CHECK(r.wait.exit_code == 5 && again.exit_code == 5);
  boxlite_execution_free(ex);

  /* Environment: pairs (an odd trailing entry ignored); NULL = the box's own. */
  const char *envp[] = {"A", "1", "B", "two words", "C"};
  const char *envargs[] = {"-c", "echo \"$A|$B|${C-unset}|$IMAGE_VAR\""};
  BoxliteCommand envcmd = {.command = "sh", .args = envargs, .argc = 2, .env_pairs = envp, .env_count = 5};
  finish(start(box, &envcmd, &r), &r);
  CHECK(strcmp(buf_str(&r.out), "1|two words|unset|from-image\n") == 0);
  buf_free(&r.out);
  expect_out(box, "echo ${IMAGE_VAR}", "from-image\n");

  /* workdir and user */
  const char *pwdargs[] = {"-c", "pwd; id -u; id -g"};
  BoxliteCommand pwdcmd = {.command = "sh", .args = pwdargs, .argc = 2, .workdir = "/tmp", .user = "1000:1001"};
  finish(start(box, &pwdcmd, &r), &r);
  CHECK(strcmp(buf_str(&r.out), "/tmp\n1000\n1001\n") == 0);
  buf_free(&r.out);

  /* timeout_secs > 0 stops a longer command. */
  const char *longargs[] = {"30"};
  BoxliteCommand timed = {.command = "sleep", .args = longargs, .argc = 1, .timeout_secs = 0.5};
  t = now_s();
  ex = start(box, &timed, &r);
  CHECK(boxlite_execution_timed_out(ex) == 0);
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &r.wait, &e), Ok, &e);
  pump_until(rt, &r.wait.done, 60);
  CHECK(boxlite_execution_timed_out(ex) == 1);
  boxlite_execution_free(ex);
  printf("a 0.5 s timeout ended `sleep 30` after %.2f s with exit code %d\n", now_s() - t, r.wait.exit_code);
  CHECK(now_s() - t < 10 && r.wait.exit_code != 0);

  /* stdin: write, close (twice), cat echoes; a write after close is refused. */
  BoxliteCommand cat = {.command = "cat"};
  ex = start(box, &cat, &r);
  CHECK_RC(boxlite_execution_stdin_write(ex, NULL, 3, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_stdin_write(ex, (const uint8_t *)"hi\n", 3, &e), Ok, &e);
  CHECK_RC(boxlite_execution_stdin_write(ex, (const uint8_t *)"", 0, &e), Ok, &e);
  CHECK_RC(boxlite_execution_stdin_close(ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_stdin_close(ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_stdin_write(ex, (const uint8_t *)"x", 1, &e), InvalidState, &e);
  finish(ex, &r);
  CHECK(strcmp(buf_str(&r.out), "hi\n") == 0 && r.wait.exit_code == 0);
  buf_free(&r.out);

  /* TTY: resize reaches the PTY; resize without a TTY or out of range is refused. */
  const char *ttyargs[] = {"-c", "read line; stty size"};
  BoxliteCommand ttycmd = {.command = "sh", .args = ttyargs, .argc = 2, .tty = 1};
  ex = start(box, &ttycmd, &r);
  Op resized = {0};
  CHECK_RC(boxlite_execution_tty_resize(ex, 0, 80, op_done, &resized, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_tty_resize(ex, 40, 70000, op_done, &resized, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_tty_resize(ex, 40, 120, op_done, &resized, &e), Ok, &e);
  pump_until(rt, &resized.done, 10);
  CHECK(resized.code == Ok);
  CHECK_RC(boxlite_execution_stdin_write(ex, (const uint8_t *)"go\n", 3, &e), Ok, &e);
  finish(ex, &r);
  CHECK(strstr(buf_str(&r.out), "40 120") != NULL);
  CHECK(r.err.len == 0); /* a PTY merges stderr into stdout */
  buf_free(&r.out);
  ex = start(box, &cat, &r);
  CHECK_RC(boxlite_execution_tty_resize(ex, 40, 120, op_done, &resized, &e), InvalidState, &e);

  /* Signals: invalid numbers refused; SIGINT reaches a trap. */
  CHECK_RC(boxlite_execution_signal(ex, 0, op_done, &resized, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_signal(ex, 1000, op_done, &resized, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_signal(ex, 15, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_on_stdout(ex, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_wait(ex, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_kill(ex, NULL, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_execution_stdin_close(ex, &e), Ok, &e);
  finish(ex, &r);
  const char *trapargs[] = {"-c", "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done"};
  BoxliteCommand trapcmd = {.command = "sh", .args = trapargs, .argc = 2};
  ex = start(box, &trapcmd, &r);
  while (!strstr(buf_str(&r.out), "ready")) CHECK(boxlite_runtime_drain(rt, 100, &e) >= 0);
  Op signalled = {0};
  CHECK_RC(boxlite_execution_signal(ex, 2, op_done, &signalled, &e), Ok, &e);
  finish(ex, &r);
  CHECK(signalled.done && signalled.code == Ok);
  CHECK(strstr(buf_str(&r.out), "got-int") != NULL && r.wait.exit_code == 7);
  buf_free(&r.out);

  /* A command that cannot start: Execution, with a message. */
  BoxliteCommand missing = {.command = "/no/such/program"};
  CExecutionHandle *none = NULL;
  enum BoxliteErrorCode rc = boxlite_box_exec(box, &missing, &none, &e);
  if (rc == Ok) { /* some engines report it at wait */
    finish(start(box, &missing, &r), &r);
    CHECK(r.wait.code != Ok || r.wait.exit_code != 0);
    boxlite_execution_free(none);
  } else {
    CHECK(e.message != NULL);
    printf("missing program: code %d: %s\n", e.code, e.message);
    boxlite_error_free(&e);
  }

  /* copy_into / copy_out */
  char host_dir[] = "/tmp/blcopy-XXXXXX";
  CHECK(mkdtemp(host_dir) != NULL);
  char src[256], dst[256];
  snprintf(src, sizeof src, "%s/in.txt", host_dir);
  snprintf(dst, sizeof dst, "%s/out.txt", host_dir);
  FILE *f = fopen(src, "w");
  CHECK(f != NULL);
  fputs("copied through the C API\n", f);
  fclose(f);
  Op cp = {0};
  CHECK_RC(boxlite_copy_into(box, src, "/tmp/in.txt", op_done, &cp, &e), Ok, &e);
  pump_until(rt, &cp.done, 30);
  CHECK(cp.code == Ok);
  expect_out(box, "cat /tmp/in.txt", "copied through the C API\n");
  memset(&cp, 0, sizeof cp);
  CHECK_RC(boxlite_copy_out(box, "/tmp/in.txt", dst, op_done, &cp, &e), Ok, &e);
  pump_until(rt, &cp.done, 30);
  CHECK(cp.code == Ok);
  char line[128] = {0};
  f = fopen(dst, "r");
  CHECK(f != NULL && fgets(line, sizeof line, f) != NULL);
  fclose(f);
  CHECK(strcmp(line, "copied through the C API\n") == 0);
  memset(&cp, 0, sizeof cp);
  CHECK_RC(boxlite_copy_out(box, "/no/such/file", dst, op_done, &cp, &e), Ok, &e);
  pump_until(rt, &cp.done, 30);
  CHECK(cp.code == NotFound && cp.msg[0] != '\0');
  remove(src);
  remove(dst);
  rmdir(host_dir);

  /* stop, then start the same handle again */
  box_step(boxlite_stop_box, box, Ok);
  info = boxlite_box_info(box);
  CHECK(info && strcmp(info->status, "stopped") == 0 && !info->running);
  boxlite_free_box_info(info);
  /* the handle that stopped the box is invalidated until start() (docs/storage.md) */
  BoxliteCommand after_stop = {.command = "true"};
  CExecutionHandle *refused = NULL;
  CHECK(boxlite_box_exec(box, &after_stop, &refused, &e) == Stopped && refused == NULL);
  CHECK(e.message && strcmp(e.message, "Handle invalidated after stop(). Use runtime.get() to get a new handle.") == 0);
  boxlite_error_free(&e);
  box_step(boxlite_start_box, box, Ok);
  expect_out(box, "echo back", "back\n");

  /* get by name and by id: handles of the same box */
  Op got = {0};
  CHECK_RC(boxlite_get(rt, "native-box", op_box, &got, &e), Ok, &e);
  pump_until(rt, &got.done, 30);
  CHECK(got.code == Ok && got.box != NULL);
  char *id2 = boxlite_box_id(got.box);
  CHECK(strcmp(id, id2) == 0);
  boxlite_free_string(id2);
  boxlite_box_free(got.box); /* the first handle keeps the box */
  expect_out(box, "echo still", "still\n");

  /* get_info / list_info: the infos are valid during the callback */
  Info gi = {0};
  CHECK_RC(boxlite_get_info(rt, "native-box", on_info, &gi, &e), Ok, &e);
  pump_until(rt, &gi.op.done, 30);
  CHECK(gi.op.code == Ok && strcmp(gi.id, id) == 0 && gi.running && gi.count == 1);
  memset(&gi, 0, sizeof gi);
  CHECK_RC(boxlite_list_info(rt, on_list, &gi, &e), Ok, &e);
  pump_until(rt, &gi.op.done, 30);
  CHECK(gi.op.code == Ok && gi.count >= 1 && gi.found);

  /* get_or_create: created, then found */
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  boxlite_options_set_name(o, "goc-box");
  Op g1 = {0}, g2 = {0};
  CHECK_RC(boxlite_get_or_create_box(rt, o, op_goc, &g1, &e), Ok, &e);
  pump_until(rt, &g1.done, 60);
  CHECK(g1.code == Ok && g1.created == 1);
  CHECK_RC(boxlite_get_or_create_box(rt, o, op_goc, &g2, &e), Ok, &e);
  pump_until(rt, &g2.done, 60);
  CHECK(g2.code == Ok && g2.created == 0);
  char *a = boxlite_box_id(g1.box), *b = boxlite_box_id(g2.box);
  CHECK(strcmp(a, b) == 0);
  boxlite_free_string(a);
  boxlite_free_string(b);
  boxlite_box_free(g2.box);
  boxlite_box_free(g1.box); /* the last handle of an auto_remove box removes it */
  boxlite_options_free(o);

  /* Freed handles: their pending callbacks never fire. */
  const char *lateargs[] = {"-c", "sleep 0.3; echo late"};
  BoxliteCommand late = {.command = "sh", .args = lateargs, .argc = 2};
  CHECK_RC(boxlite_box_exec(box, &late, &ex, &e), Ok, &e);
  CHECK_RC(boxlite_execution_on_stdout(ex, must_not_fire_out, NULL, &e), Ok, &e);
  CHECK_RC(boxlite_execution_wait(ex, must_not_fire_wait, NULL, &e), Ok, &e);
  boxlite_execution_free(ex);
  CBoxHandle *other = create(image, NULL);
  CHECK_RC(boxlite_start_box(other, must_not_fire_err, NULL, &e), Ok, &e);
  boxlite_box_free(other);
  t = now_s();
  while (now_s() - t < 2.0) CHECK(boxlite_runtime_drain(rt, 100, &e) >= 0);
  CHECK(fired == 0);

  /* remove: refused while running without force, done with force */
  Op rm = {0};
  CHECK_RC(boxlite_remove(rt, id, 0, op_done, &rm, &e), Ok, &e);
  pump_until(rt, &rm.done, 30);
  CHECK(rm.code == InvalidState && strstr(rm.msg, "running"));
  memset(&rm, 0, sizeof rm);
  CHECK_RC(boxlite_remove(rt, id, 1, op_done, &rm, &e), Ok, &e);
  pump_until(rt, &rm.done, 60);
  CHECK(rm.code == Ok);
  CHECK(boxlite_box_info(box) == NULL);
  boxlite_box_free(box);
  boxlite_free_string(id);

  /* Every box option that the core supports, observed in the box. */
  CHECK_RC(boxlite_options_new("not-a-registry-name", &o, &e), Ok, &e);
  boxlite_options_set_rootfs_path(o, image); /* beats the image reference */
  CHECK_RC(boxlite_options_set_engine(o, getenv("BOXLITE_ENGINE"), &e), Ok, &e);
  boxlite_options_set_name(o, "configured");
  boxlite_options_set_cpus(o, 2);
  boxlite_options_set_memory(o, 512);
  boxlite_options_set_workdir(o, "/tmp");
  boxlite_options_set_user(o, "1000:1000");
  boxlite_options_add_env(o, "OPT_VAR", "from-options");
  const char *ep[] = {"/bin/sh", "-c"};
  const char *cm[] = {"sleep 1"};
  boxlite_options_set_entrypoint(o, ep, 2);
  boxlite_options_set_cmd(o, cm, 1);
  boxlite_options_set_network_disabled(o);
  boxlite_options_set_auto_remove(o, 0);
  boxlite_options_set_detach(o, 0);
  CAdvancedBoxOptions *adv = NULL;
  CHECK_RC(boxlite_advanced_options_new(&adv, &e), Ok, &e);
  boxlite_advanced_options_set_security_enabled(adv, 1);
  boxlite_options_set_advanced(o, adv);
  boxlite_advanced_options_free(adv);
  Op made = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &made, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &made.done, 120);
  CHECK(made.code == Ok);
  info = boxlite_box_info(made.box);
  CHECK(info && info->cpus == 2 && info->memory_mib == 512 && strcmp(info->name, "configured") == 0);
  boxlite_free_box_info(info);
  expect_out(made.box, "echo \"$(pwd) $(id -u) $OPT_VAR\"", "/tmp 1000 from-options\n");
  boxlite_box_free(made.box); /* auto_remove off: the box stays (stopped) */
  Info kept = {0};
  CHECK_RC(boxlite_get_info(rt, "configured", on_info, &kept, &e), Ok, &e);
  pump_until(rt, &kept.op.done, 30);
  CHECK(kept.op.code == Ok && !kept.running);
  memset(&rm, 0, sizeof rm);
  CHECK_RC(boxlite_remove(rt, "configured", 0, op_done, &rm, &e), Ok, &e);
  pump_until(rt, &rm.done, 60);
  CHECK(rm.code == Ok);

  /* shutdown: later operations fail at once, before any drain */
  CBoxHandle *last = create(image, NULL);
  box_step(boxlite_start_box, last, Ok);
  Op down = {0};
  CHECK_RC(boxlite_runtime_shutdown(rt, 0, op_done, &down, &e), Ok, &e);
  CHECK_RC(boxlite_runtime_new(getenv("BOXLITE_HOME"), NULL, 0, NULL, &e), InvalidArgument, &e);
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  Op late_create = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &late_create, &e), Stopped, &e);
  CHECK_RC(boxlite_get(rt, "x", op_box, &late_create, &e), Stopped, &e);
  boxlite_options_free(o);
  pump_until(rt, &down.done, 60);
  CHECK(down.code == Ok);
  info = boxlite_box_info(last);
  CHECK(info && !info->running);
  boxlite_free_box_info(info);
  boxlite_box_free(last);

  boxlite_runtime_free(rt);
  printf("capi_native_test: ok\n");
  return 0;
}
