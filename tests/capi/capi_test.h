/* Helpers shared by the C API test programs (C11). */
#ifndef BOXLITE_CAPI_TEST_H
#define BOXLITE_CAPI_TEST_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boxlite.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* Messages never name our functions (docs/c-api.md, "Error messages"). */
static inline void check_no_function_name(const char *message) {
  if (message && strstr(message, "boxlite_")) {
    fprintf(stderr, "message names a function: %s\n", message);
    exit(1);
  }
}

/* expr must return `want`; a failure must come with a message, which is printed
 * and names no function. */
#define CHECK_RC(expr, want, errp)                                                                              \
  do {                                                                                                          \
    enum BoxliteErrorCode rc_ = (expr);                                                                         \
    if (rc_ != (want)) {                                                                                        \
      fprintf(stderr, "%s:%d: %s returned %d, want %d: %s\n", __FILE__, __LINE__, #expr, (int)rc_, (int)(want), \
              (errp)->message ? (errp)->message : "(no message)");                                              \
      exit(1);                                                                                                  \
    }                                                                                                           \
    if (rc_ != Ok) {                                                                                            \
      CHECK((errp)->code == rc_);                                                                               \
      CHECK((errp)->message != NULL && (errp)->message[0] != '\0');                                             \
      check_no_function_name((errp)->message);                                                                  \
      boxlite_error_free(errp);                                                                                 \
      CHECK((errp)->message == NULL);                                                                           \
    }                                                                                                           \
  } while (0)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The state of one asynchronous operation, filled by its callback. */
typedef struct {
  int done;
  int code; /* BoxliteErrorCode delivered (Ok when err was NULL) */
  char msg[1024];
  CBoxHandle *box;
  int created;
  int exit_code;
  pthread_t thread;
} Op;

static inline void op_record(Op *op, CBoxliteError *err) {
  op->code = err ? (int)err->code : Ok;
  if (err && err->code != Ok) {
    snprintf(op->msg, sizeof op->msg, "%s", err->message ? err->message : "");
    check_no_function_name(err->message);
  }
  op->thread = pthread_self();
  op->done = 1;
}
static inline void op_done(CBoxliteError *err, void *ud) { op_record((Op *)ud, err); }
static inline void op_box(CBoxHandle *box, CBoxliteError *err, void *ud) {
  ((Op *)ud)->box = box;
  op_record((Op *)ud, err);
}
static inline void op_goc(CBoxHandle *box, int created, CBoxliteError *err, void *ud) {
  ((Op *)ud)->box = box;
  ((Op *)ud)->created = created;
  op_record((Op *)ud, err);
}
static inline void op_wait(int exit_code, CBoxliteError *err, void *ud) {
  ((Op *)ud)->exit_code = exit_code;
  op_record((Op *)ud, err);
}

/* Drains until *done; fails the test on a drain error or after `limit_s`. */
static inline void pump_until(CBoxliteRuntime *rt, const int *done, double limit_s) {
  CBoxliteError e = {0};
  double end = now_s() + limit_s;
  while (!*done) {
    int n = boxlite_runtime_drain(rt, 100, &e);
    if (n < 0) {
      fprintf(stderr, "drain failed (code %d): %s\n", e.code, e.message ? e.message : "?");
      exit(1);
    }
    if (now_s() > end) {
      fprintf(stderr, "timed out after %.0f s waiting for a callback\n", limit_s);
      exit(1);
    }
  }
}

/* Growing byte buffer for streamed output. */
typedef struct {
  char *data;
  size_t len, cap;
  int chunks;
} Buf;

static inline void buf_append(Buf *b, const uint8_t *data, size_t len) {
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len + 1) cap *= 2;
    b->data = (char *)realloc(b->data, cap);
    CHECK(b->data != NULL);
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  b->chunks++;
}
static inline void buf_cb(const uint8_t *data, size_t len, void *ud) { buf_append((Buf *)ud, data, len); }
static inline void buf_free(Buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}
static inline const char *buf_str(const Buf *b) { return b->data ? b->data : ""; }

#endif
