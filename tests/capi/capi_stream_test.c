/* The acceptance program: 8 concurrent execs stream output through drain, with no
 * lost or reordered bytes per stream. Each exec writes its own deterministic
 * sequence to stdout and stderr; two threads drain at once. One more exec writes
 * 8 MiB that nobody drains for a while (the window bounds the queue).
 * Usage: capi_stream_test IMAGE_DIR */
#include "capi_test.h"

#define EXECS 8
#define LINES 20000

static CBoxliteRuntime *rt;
static volatile int stop_second_drainer;

typedef struct {
  Buf out, err;
  Op wait;
} Stream;

static void *drainer(void *arg) {
  (void)arg;
  CBoxliteError e = {0};
  while (!stop_second_drainer) CHECK(boxlite_runtime_drain(rt, 20, &e) >= 0);
  return NULL;
}

static char *expected(int k, char stream) {
  size_t cap = (size_t)LINES * 32, len = 0;
  char *s = (char *)malloc(cap);
  CHECK(s != NULL);
  for (int i = 0; i < LINES; ++i) len += (size_t)snprintf(s + len, cap - len, "x%d-%c-%d\n", k, stream, i);
  return s;
}

static CBoxHandle *create(const char *image) {
  CBoxliteError e = {0};
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  Op op = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &op, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &op.done, 120);
  CHECK(op.code == Ok);
  return op.box;
}

static size_t big_len;
static void count_cb(const uint8_t *d, size_t n, void *ud) {
  (void)d;
  (void)ud;
  big_len += n;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(500);
  CBoxliteError e = {0};
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  CBoxHandle *box = create(argv[1]);

  static Stream s[EXECS];
  CExecutionHandle *ex[EXECS];
  char script[EXECS][256];
  for (int k = 0; k < EXECS; ++k) {
    snprintf(script[k], sizeof script[k],
             "i=0; while [ $i -lt %d ]; do echo x%d-o-$i; echo x%d-e-$i >&2; i=$((i+1)); done", LINES, k, k);
    const char *args[] = {"-c", script[k]};
    BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
    CHECK_RC(boxlite_box_exec(box, &cmd, &ex[k], &e), Ok, &e);
    CHECK_RC(boxlite_execution_on_stdout(ex[k], buf_cb, &s[k].out, &e), Ok, &e);
    CHECK_RC(boxlite_execution_on_stderr(ex[k], buf_cb, &s[k].err, &e), Ok, &e);
    CHECK_RC(boxlite_execution_wait(ex[k], op_wait, &s[k].wait, &e), Ok, &e);
  }
  pthread_t second;
  CHECK(pthread_create(&second, NULL, drainer, NULL) == 0);
  double t = now_s();
  for (int k = 0; k < EXECS; ++k) pump_until(rt, &s[k].wait.done, 300);
  stop_second_drainer = 1;
  pthread_join(second, NULL);
  printf("8 concurrent execs streamed in %.2f s\n", now_s() - t);
  for (int k = 0; k < EXECS; ++k) {
    char *want_out = expected(k, 'o'), *want_err = expected(k, 'e');
    if (strcmp(buf_str(&s[k].out), want_out) != 0 || strcmp(buf_str(&s[k].err), want_err) != 0) {
      fprintf(stderr, "exec %d: stdout %zu bytes (want %zu), stderr %zu bytes (want %zu): content differs\n", k,
              s[k].out.len, strlen(want_out), s[k].err.len, strlen(want_err));
      return 1;
    }
    CHECK(s[k].wait.code == Ok && s[k].wait.exit_code == 0);
    printf("exec %d: %zu + %zu bytes in %d + %d chunks, exact\n", k, s[k].out.len, s[k].err.len, s[k].out.chunks,
           s[k].err.chunks);
    free(want_out);
    free(want_err);
    buf_free(&s[k].out);
    buf_free(&s[k].err);
    boxlite_execution_free(ex[k]);
  }

  /* 8 MiB that nobody drains for a second: the command pauses on the window. */
  const char *args[] = {"-c", "head -c 8388608 /dev/zero"};
  BoxliteCommand big = {.command = "sh", .args = args, .argc = 2};
  CExecutionHandle *bx = NULL;
  Op bw = {0};
  CHECK_RC(boxlite_box_exec(box, &big, &bx, &e), Ok, &e);
  CHECK_RC(boxlite_execution_on_stdout(bx, count_cb, NULL, &e), Ok, &e);
  CHECK_RC(boxlite_execution_wait(bx, op_wait, &bw, &e), Ok, &e);
  sleep(1);
  pump_until(rt, &bw.done, 120);
  CHECK(big_len == 8388608 && bw.exit_code == 0);
  boxlite_execution_free(bx);

  boxlite_box_free(box);
  boxlite_runtime_free(rt);
  printf("capi_stream_test: ok\n");
  return 0;
}
