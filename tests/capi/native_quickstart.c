/* native_quickstart.c
* Demonstrates the full post-and-drain model: create box -> exec -> stream output -> wait for exit code -> cleanup.
* See Section 2 for compilation. Can be copied and run directly.
*/
#include <stdio.h>
#include <stdlib.h>
#include "boxlite.h"
/* ---- Use user_data to pass state between callbacks and the main thread ---- */
typedef struct {
CBoxHandle *box; /* the create callback writes the result here */
int done; /* operation-complete flag; the main loop stops draining based on it */
int failed; /* whether the operation failed */
int code; /* exec exit code (filled in by the wait callback) */
} OpState;
/* box creation callback: CBoxCreateBoxCb = void(*)(CBoxHandle*, CBoxliteError*, void*) */
static void on_box_created(CBoxHandle *box, CBoxliteError *err, void *ud) {
OpState *st = (OpState *)ud;
if (err && err->code != Ok) {
fprintf(stderr, "create failed (code %d): %s\n",
err->code, err->message ? err->message : "unknown");
st->failed = 1;
} else {
st->box = box; /* box ownership is transferred to us; free it with boxlite_box_free at the end */
}
st->done = 1;
}
/* streaming stdout: CBoxStdoutCb = void(*)(const uint8_t*, size_t, void*) */
static void on_stdout(const uint8_t *data, size_t len, void *ud) {
(void)ud;
fwrite(data, 1, len, stdout);
}
/* streaming stderr: CBoxStderrCb = void(*)(const uint8_t*, size_t, void*) */
static void on_stderr(const uint8_t *data, size_t len, void *ud) {
(void)ud;
fwrite(data, 1, len, stderr);
}
/* exec wait completion: CExecutionWaitCb = void(*)(int exit_code, CBoxliteError*, void*) */
static void on_wait_done(int exit_code, CBoxliteError *err, void *ud) {
OpState *st = (OpState *)ud;
if (err && err->code != Ok) {
fprintf(stderr, "wait failed (code %d): %s\n",
err->code, err->message ? err->message : "unknown");
st->failed = 1;
}
st->code = exit_code; /* the exit code is returned via the callback's int parameter */
st->done = 1;
}
/* box stop/remove completion: CBoxStopBoxCb / CBoxRemoveBoxCb = void(*)(CBoxliteError*, void*) */
static void on_simple_done(CBoxliteError *err, void *ud) {
OpState *st = (OpState *)ud;
if (err && err->code != Ok) {
fprintf(stderr, "op failed (code %d): %s\n",
err->code, err->message ? err->message : "unknown");
st->failed = 1;
}
st->done = 1;
}
/* Event pump: drain repeatedly until st->done is set to 1 by some callback.
* timeout_ms < 0 means block until at least one event arrives. */
static void pump_until_done(CBoxliteRuntime *rt, OpState *st) {
CBoxliteError drain_err = {0};
while (!st->done) {
int n = boxlite_runtime_drain(rt, -1, &drain_err);
if (n < 0) {
fprintf(stderr, "drain error (code %d): %s\n",
drain_err.code, drain_err.message ? drain_err.message : "unknown");
boxlite_error_free(&drain_err);
st->failed = 1;
return;
}
}
}
int main(void) {
CBoxliteRuntime *runtime = NULL;
CBoxliteError error = {0};
/* 1) Create the runtime (synchronous). home_dir=NULL uses the default ~/.boxlite; no custom registry. */
if (boxlite_runtime_new(NULL, NULL, 0, &runtime, &error) != Ok) {
fprintf(stderr, "runtime_new failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
return 1;
}
/* 2) Build the box options (synchronous setters). */
CBoxliteOptions *opts = NULL;
if (boxlite_options_new("alpine:3.19", &opts, &error) != Ok) {
fprintf(stderr, "options_new failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
boxlite_runtime_free(runtime);
return 1;
}
boxlite_options_set_network_enabled(opts);
/* 3) Asynchronously create the box: submit -> drive drain -> callback sets done. */
OpState st = {0};
if (boxlite_create_box(runtime, opts, on_box_created, &st, &error) != Ok) {
fprintf(stderr, "create_box submit failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
boxlite_options_free(opts);
boxlite_runtime_free(runtime);
return 1;
}
pump_until_done(runtime, &st);
boxlite_options_free(opts); /* options have been copied into the box; can be freed immediately */
if (st.failed || st.box == NULL) {
boxlite_runtime_free(runtime);
return 1;
}
CBoxHandle *box = st.box;
/* 4) exec: boxlite_box_exec returns the ExecutionHandle *synchronously* (returns once the handle is obtained). */
const char *args[] = {"-c", "echo out; echo err 1>&2"};
BoxliteCommand cmd = {
.command = "/bin/sh",
.args = args,
.argc = 2,
.env_pairs = NULL,
.env_count = 0,
.workdir = NULL,
.user = NULL,
.timeout_secs = 0.0, /* 0.0 = no timeout */
.tty = 0,
};
CExecutionHandle *exec = NULL;
if (boxlite_box_exec(box, &cmd, &exec, &error) != Ok) {
fprintf(stderr, "box_exec failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
boxlite_box_free(box);
boxlite_runtime_free(runtime);
return 1;
}
/* 5) Register streaming output callbacks (register before wait so early output is not lost). */
boxlite_execution_on_stdout(exec, on_stdout, NULL, &error);
boxlite_execution_on_stderr(exec, on_stderr, NULL, &error);
/* 6) Asynchronously wait for the exit code: submit wait -> drive drain -> callback receives exit_code.
* drain also dispatches stdout/stderr chunks to the callbacks registered above. */
OpState wait_st = {0};
if (boxlite_execution_wait(exec, on_wait_done, &wait_st, &error) != Ok) {
fprintf(stderr, "wait submit failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
boxlite_execution_free(exec);
boxlite_box_free(box);
boxlite_runtime_free(runtime);
return 1;
}
pump_until_done(runtime, &wait_st);
printf("\nexit_code = %d\n", wait_st.code);
boxlite_execution_free(exec);
/* 7) Asynchronously remove the box (force=1: remove even if running). */
char *box_id = boxlite_box_id(box); /* must be freed with boxlite_free_string */
OpState rm_st = {0};
if (boxlite_remove(runtime, box_id, 1, on_simple_done, &rm_st, &error) == Ok) {
pump_until_done(runtime, &rm_st);
} else {
boxlite_error_free(&error);
}
boxlite_free_string(box_id);
/* 8) Cleanup. */
boxlite_box_free(box);
boxlite_runtime_free(runtime); /* free the runtime (NULL-safe) */
return 0;
}
