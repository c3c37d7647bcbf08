/* The C API's snapshots, clone, export and import (docs/c-api.md):
 * boxlite_box_snapshot_create/list/get/remove/restore, boxlite_box_clone,
 * boxlite_box_export, boxlite_runtime_import_box and the free functions, with
 * their error paths. Jail boxes for the files; vm boxes that are never started for
 * the copy-on-write dependency errors (a vm snapshot or clone grows over a frozen
 * layer of the disk, which the jail's full copies never do).
 * Usage: capi_snapshot_test IMAGE_DIR (in a fresh BOXLITE_HOME: run-in-home.sh). */
#include <sys/stat.h>

#include "capi_test.h"

static CBoxliteRuntime *rt;

typedef struct {
  Op op;
  int has_info;
  CSnapshotInfo info; /* strings copied */
  int count;
  char names[8][64];
  char path[4096];
  int path_null;
} SnapOp;

static void copy_info(CSnapshotInfo *dst, const CSnapshotInfo *src) {
  *dst = *src;
  dst->id = strdup(src->id);
  dst->box_id = strdup(src->box_id);
  dst->name = strdup(src->name);
  CHECK(dst->id && dst->box_id && dst->name);
}

static void on_info(CSnapshotInfo *info, CBoxliteError *err, void *ud) {
  SnapOp *s = (SnapOp *)ud;
  if (info) {
    CHECK(err == NULL);
    s->has_info = 1;
    copy_info(&s->info, info);
  }
  op_record(&s->op, err);
}

static void on_list(CSnapshotInfoList *list, CBoxliteError *err, void *ud) {
  SnapOp *s = (SnapOp *)ud;
  if (list) {
    CHECK(err == NULL);
    s->count = list->count;
    for (int i = 0; i < list->count && i < 8; ++i) {
      snprintf(s->names[i], sizeof s->names[i], "%s", list->items[i].name);
      CHECK(list->items[i].id && list->items[i].box_id);
    }
  }
  op_record(&s->op, err);
}

static void on_export(const char *path, CBoxliteError *err, void *ud) {
  SnapOp *s = (SnapOp *)ud;
  s->path_null = path == NULL;
  if (path) snprintf(s->path, sizeof s->path, "%s", path);
  op_record(&s->op, err);
}

static void snap_free(SnapOp *s) {
  if (s->has_info) {
    free(s->info.id);
    free(s->info.box_id);
    free(s->info.name);
  }
  memset(s, 0, sizeof *s);
}

/* NULL when the engine cannot be set up here (Config: e.g. no guest kernel beside
 * the library, as in the sanitizer build), when allow_config. */
static CBoxHandle *create_or_config(const char *image, const char *name, const char *engine, int allow_config) {
  CBoxliteError e = {0};
  CBoxliteOptions *o = NULL;
  CHECK_RC(boxlite_options_new(image, &o, &e), Ok, &e);
  boxlite_options_set_name(o, name);
  boxlite_options_set_auto_remove(o, 0);
  if (engine) CHECK_RC(boxlite_options_set_engine(o, engine, &e), Ok, &e);
  Op op = {0};
  CHECK_RC(boxlite_create_box(rt, o, op_box, &op, &e), Ok, &e);
  boxlite_options_free(o);
  pump_until(rt, &op.done, 300);
  if (allow_config && op.code == Config) {
    printf("create %s: %s\n", name, op.msg);
    return NULL;
  }
  if (op.code != Ok) fprintf(stderr, "create %s: %s\n", name, op.msg);
  CHECK(op.code == Ok && op.box);
  return op.box;
}

static CBoxHandle *create(const char *image, const char *name, const char *engine) {
  return create_or_config(image, name, engine, 0);
}

/* Runs `sh -c script` and returns its stdout (caller frees); NULL with *rc set
 * when the exec itself is refused. */
static char *run_rc(CBoxliteRuntime *r, CBoxHandle *box, const char *script, enum BoxliteErrorCode *rc, char *msg,
                    size_t msg_len) {
  CBoxliteError e = {0};
  const char *args[] = {"-c", script};
  BoxliteCommand cmd = {.command = "sh", .args = args, .argc = 2};
  Buf out = {0}, err = {0};
  CExecutionHandle *ex = NULL;
  *rc = boxlite_box_exec_streamed(box, &cmd, buf_cb, buf_cb, &out, &ex, &e);
  if (*rc != Ok) {
    if (msg) snprintf(msg, msg_len, "%s", e.message ? e.message : "");
    boxlite_error_free(&e);
    return NULL;
  }
  Op w = {0};
  CHECK_RC(boxlite_execution_wait(ex, op_wait, &w, &e), Ok, &e);
  pump_until(r, &w.done, 120);
  CHECK(w.code == Ok);
  CHECK(w.exit_code == 0);
  boxlite_execution_free(ex);
  char *s = strdup(buf_str(&out));
  buf_free(&out);
  buf_free(&err);
  return s;
}

static char *run_on(CBoxliteRuntime *r, CBoxHandle *box, const char *script) {
  enum BoxliteErrorCode rc;
  char msg[512];
  char *s = run_rc(r, box, script, &rc, msg, sizeof msg);
  if (!s) fprintf(stderr, "exec '%s' refused (%d): %s\n", script, (int)rc, msg);
  CHECK(s != NULL);
  return s;
}

static void expect_out(CBoxliteRuntime *r, CBoxHandle *box, const char *script, const char *want) {
  char *s = run_on(r, box, script);
  if (strcmp(s, want) != 0) {
    fprintf(stderr, "'%s' printed '%s', want '%s'\n", script, s, want);
    exit(1);
  }
  free(s);
}

static void stop(CBoxHandle *box) {
  CBoxliteError e = {0};
  Op op = {0};
  CHECK_RC(boxlite_stop_box(box, op_done, &op, &e), Ok, &e);
  pump_until(rt, &op.done, 120);
  CHECK(op.code == Ok);
}

static void remove_box(CBoxliteRuntime *r, const char *id_or_name, int force, Op *op) {
  CBoxliteError e = {0};
  memset(op, 0, sizeof *op);
  CHECK_RC(boxlite_remove(r, id_or_name, force, op_done, op, &e), Ok, &e);
  pump_until(r, &op->done, 120);
}

static CBoxHandle *get_box(CBoxliteRuntime *r, const char *id) {
  CBoxliteError e = {0};
  Op op = {0};
  CHECK_RC(boxlite_get(r, id, op_box, &op, &e), Ok, &e);
  pump_until(r, &op.done, 60);
  CHECK(op.code == Ok && op.box);
  return op.box;
}

static void dummy_info(CSnapshotInfo *i, CBoxliteError *e, void *u) {
  (void)i;
  (void)e;
  (void)u;
}
static void dummy_list(CSnapshotInfoList *l, CBoxliteError *e, void *u) {
  (void)l;
  (void)e;
  (void)u;
}
static void dummy_done(CBoxliteError *e, void *u) {
  (void)e;
  (void)u;
}
static void dummy_box(CBoxHandle *b, CBoxliteError *e, void *u) {
  (void)b;
  (void)e;
  (void)u;
}
static void dummy_export(const char *p, CBoxliteError *e, void *u) {
  (void)p;
  (void)e;
  (void)u;
}

/* NULL and empty arguments: InvalidArgument at once, the message naming the
 * argument and nothing else (no function name); nothing queued. */
static void test_arguments(CBoxHandle *box) {
  CBoxliteError e = {0};
#define EXPECT_INVALID(expr, what)                                                 \
  do {                                                                             \
    CHECK((expr) == InvalidArgument);                                              \
    CHECK(e.code == InvalidArgument && e.message && strcmp(e.message, what) == 0); \
    boxlite_error_free(&e);                                                        \
  } while (0)
  EXPECT_INVALID(boxlite_box_snapshot_create(NULL, "a", dummy_info, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_create(box, NULL, dummy_info, NULL, &e), "name is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_create(box, "", dummy_info, NULL, &e), "name is empty");
  EXPECT_INVALID(boxlite_box_snapshot_create(box, "a", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_list(NULL, dummy_list, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_list(box, NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_get(NULL, "a", dummy_info, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_get(box, NULL, dummy_info, NULL, &e), "name is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_get(box, "", dummy_info, NULL, &e), "name is empty");
  EXPECT_INVALID(boxlite_box_snapshot_get(box, "a", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_remove(NULL, "a", dummy_done, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_remove(box, NULL, dummy_done, NULL, &e), "name is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_remove(box, "", dummy_done, NULL, &e), "name is empty");
  EXPECT_INVALID(boxlite_box_snapshot_remove(box, "a", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_restore(NULL, "a", dummy_done, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_restore(box, NULL, dummy_done, NULL, &e), "name is NULL");
  EXPECT_INVALID(boxlite_box_snapshot_restore(box, "", dummy_done, NULL, &e), "name is empty");
  EXPECT_INVALID(boxlite_box_snapshot_restore(box, "a", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_clone(NULL, "c", dummy_box, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_clone(box, "c", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_box_export(NULL, "/tmp", dummy_export, NULL, &e), "handle is NULL");
  EXPECT_INVALID(boxlite_box_export(box, NULL, dummy_export, NULL, &e), "dest_dir is NULL");
  EXPECT_INVALID(boxlite_box_export(box, "", dummy_export, NULL, &e), "dest_dir is empty");
  EXPECT_INVALID(boxlite_box_export(box, "/tmp", NULL, NULL, &e), "cb is NULL");
  EXPECT_INVALID(boxlite_runtime_import_box(NULL, "/x.boxlite", NULL, dummy_box, NULL, &e), "runtime is NULL");
  EXPECT_INVALID(boxlite_runtime_import_box(rt, NULL, NULL, dummy_box, NULL, &e), "archive_path is NULL");
  EXPECT_INVALID(boxlite_runtime_import_box(rt, "", NULL, dummy_box, NULL, &e), "archive_path is empty");
  EXPECT_INVALID(boxlite_runtime_import_box(rt, "/x.boxlite", NULL, NULL, NULL, &e), "cb is NULL");
  /* Without an out_error the code is still returned. */
  CHECK(boxlite_box_snapshot_create(NULL, "a", dummy_info, NULL, NULL) == InvalidArgument);
  boxlite_free_snapshot_info(NULL);
  boxlite_free_snapshot_info_list(NULL);
  /* The free functions take library-compatible (malloc'ed) structs. */
  CSnapshotInfo *one = calloc(1, sizeof *one);
  one->id = strdup("i");
  one->name = strdup("n");
  boxlite_free_snapshot_info(one);
  CSnapshotInfoList *list = calloc(1, sizeof *list);
  list->count = 1;
  list->items = calloc(1, sizeof(CSnapshotInfo));
  list->items[0].box_id = strdup("b");
  boxlite_free_snapshot_info_list(list);
  /* Nothing was queued by the refused calls. */
  CHECK(boxlite_runtime_drain(rt, 0, &e) == 0);
#undef EXPECT_INVALID
}

static void snapshot_op(enum BoxliteErrorCode (*fn)(CBoxHandle *, const char *, CSnapshotInfoCb, void *,
                                                    CBoxliteError *),
                        CBoxHandle *box, const char *name, SnapOp *s) {
  CBoxliteError e = {0};
  snap_free(s);
  CHECK_RC(fn(box, name, on_info, s, &e), Ok, &e);
  pump_until(rt, &s->op.done, 120);
}

static void done_op(enum BoxliteErrorCode (*fn)(CBoxHandle *, const char *, CBoxSnapshotDoneCb, void *,
                                                CBoxliteError *),
                    CBoxHandle *box, const char *name, Op *op) {
  CBoxliteError e = {0};
  memset(op, 0, sizeof *op);
  CHECK_RC(fn(box, name, op_done, op, &e), Ok, &e);
  pump_until(rt, &op->done, 120);
}

static void list_op(CBoxHandle *box, SnapOp *s) {
  CBoxliteError e = {0};
  snap_free(s);
  CHECK_RC(boxlite_box_snapshot_list(box, on_list, s, &e), Ok, &e);
  pump_until(rt, &s->op.done, 60);
  CHECK(s->op.code == Ok);
}

static char *box_id(CBoxHandle *b) {
  char *id = boxlite_box_id(b);
  CHECK(id != NULL);
  return id;
}

static void test_jail(const char *image, const char *home) {
  CBoxliteError e = {0};
  CBoxHandle *box = create(image, "snapsrc", NULL);
  char *id = box_id(box);
  test_arguments(box);

  expect_out(rt, box, "echo v1 > /data.txt; rm /bin/true; cat /data.txt", "v1\n");
  SnapOp s = {0};
  /* On the running box. */
  snapshot_op(boxlite_box_snapshot_create, box, "v1", &s);
  CHECK(s.op.code == Ok && s.has_info);
  CHECK(strcmp(s.info.name, "v1") == 0);
  CHECK(strcmp(s.info.box_id, id) == 0);
  CHECK(s.info.id[0] != '\0');
  CHECK(s.info.created_at > 1700000000);
  printf("snapshot v1: id=%s size_bytes=%llu container_disk_bytes=%llu\n", s.info.id,
         (unsigned long long)s.info.size_bytes, (unsigned long long)s.info.container_disk_bytes);
  snapshot_op(boxlite_box_snapshot_create, box, "v1", &s);
  CHECK(s.op.code == AlreadyExists && !s.has_info && strstr(s.op.msg, "already exists"));
  snapshot_op(boxlite_box_snapshot_create, box, "bad name", &s);
  CHECK(s.op.code == InvalidArgument && !s.has_info && strstr(s.op.msg, "invalid snapshot name"));

  list_op(box, &s);
  CHECK(s.count == 1 && strcmp(s.names[0], "v1") == 0);
  snapshot_op(boxlite_box_snapshot_get, box, "v1", &s);
  CHECK(s.op.code == Ok && s.has_info && strcmp(s.info.name, "v1") == 0 && strcmp(s.info.box_id, id) == 0);
  /* A missing name: no info and no error. */
  snapshot_op(boxlite_box_snapshot_get, box, "missing", &s);
  CHECK(s.op.code == Ok && !s.has_info);

  expect_out(rt, box, "echo v2 > /data.txt; echo x > /extra; cat /data.txt", "v2\n");
  Op op = {0};
  done_op(boxlite_box_snapshot_restore, box, "v1", &op);
  CHECK(op.code == InvalidState);
  CHECK(strstr(op.msg, "Cannot restore snapshot while box is running. Stop the box first."));
  stop(box);
  /* The handle stop() invalidated refuses execs but still restores. */
  enum BoxliteErrorCode rc;
  char msg[512] = "";
  CHECK(run_rc(rt, box, "true", &rc, msg, sizeof msg) == NULL);
  CHECK(rc == Stopped && strstr(msg, "Handle invalidated after stop()"));
  done_op(boxlite_box_snapshot_restore, box, "missing", &op);
  CHECK(op.code == NotFound);
  done_op(boxlite_box_snapshot_restore, box, "v1", &op);
  CHECK(op.code == Ok);
  CBoxHandle *fresh = get_box(rt, id);
  expect_out(rt, fresh, "cat /data.txt; ls /extra /bin/true 2>&1 | wc -l", "v1\n2\n");

  /* Clone of the running box: its files, created stopped, started by its first exec. */
  Op c = {0};
  CHECK_RC(boxlite_box_clone(fresh, "snapclone", op_box, &c, &e), Ok, &e);
  pump_until(rt, &c.done, 120);
  CHECK(c.code == Ok && c.box);
  CBoxHandle *clone = c.box;
  char *clone_id = box_id(clone);
  CHECK(strcmp(clone_id, id) != 0);
  CBoxInfo *ci = boxlite_box_info(clone);
  CHECK(ci && strcmp(ci->status, "configured") == 0 && !ci->running && strcmp(ci->name, "snapclone") == 0);
  boxlite_free_box_info(ci);
  expect_out(rt, clone, "cat /data.txt; echo mine > /data.txt; echo only > /mine", "v1\n");
  expect_out(rt, fresh, "cat /data.txt; ls /mine 2>/dev/null || echo absent", "v1\nabsent\n");
  expect_out(rt, clone, "cat /data.txt /mine", "mine\nonly\n");
  /* A taken name is refused; no name gives a generated one. */
  memset(&c, 0, sizeof c);
  CHECK_RC(boxlite_box_clone(fresh, "snapclone", op_box, &c, &e), Ok, &e);
  pump_until(rt, &c.done, 120);
  CHECK(c.code == AlreadyExists && c.box == NULL);
  memset(&c, 0, sizeof c);
  CHECK_RC(boxlite_box_clone(fresh, NULL, op_box, &c, &e), Ok, &e);
  pump_until(rt, &c.done, 120);
  CHECK(c.code == Ok && c.box);
  char *anon_id = box_id(c.box);
  boxlite_box_free(c.box);
  remove_box(rt, anon_id, 0, &op);
  CHECK(op.code == Ok);
  free(anon_id);

  /* Export (running box) and import into another home. */
  char out_dir[4096], missing[4096], home2[4096], junk[4096];
  snprintf(out_dir, sizeof out_dir, "%s/exports", home);
  snprintf(missing, sizeof missing, "%s/no-such-dir", home);
  snprintf(home2, sizeof home2, "%s/h2", home);
  snprintf(junk, sizeof junk, "%s/junk.boxlite", home);
  CHECK(mkdir(out_dir, 0700) == 0);
  CHECK(mkdir(home2, 0700) == 0);
  expect_out(rt, fresh,
             "mkdir -p /proj && echo hello > /proj/a && dd if=/dev/urandom of=/proj/bin bs=64k count=8 "
             "2>/dev/null && md5sum /proj/bin > /proj/sum && echo ok",
             "ok\n");
  char *sum = run_on(rt, fresh, "cat /proj/sum");
  SnapOp x = {0};
  CHECK_RC(boxlite_box_export(fresh, out_dir, on_export, &x, &e), Ok, &e);
  pump_until(rt, &x.op.done, 300);
  CHECK(x.op.code == Ok && !x.path_null);
  char want[4200];
  snprintf(want, sizeof want, "%s/snapsrc.boxlite", out_dir);
  CHECK(strcmp(x.path, want) == 0);
  struct stat st;
  CHECK(stat(x.path, &st) == 0 && st.st_size > 0);
  printf("export: %s (%lld bytes)\n", x.path, (long long)st.st_size);
  SnapOp bad = {0};
  CHECK_RC(boxlite_box_export(fresh, missing, on_export, &bad, &e), Ok, &e);
  pump_until(rt, &bad.op.done, 60);
  CHECK(bad.op.code == InvalidArgument && bad.path_null);

  CBoxliteRuntime *rt2 = NULL;
  CHECK_RC(boxlite_runtime_new(home2, NULL, 0, &rt2, &e), Ok, &e);
  Op im = {0};
  CHECK_RC(boxlite_runtime_import_box(rt2, x.path, "imported", op_box, &im, &e), Ok, &e);
  pump_until(rt2, &im.done, 300);
  if (im.code != Ok) fprintf(stderr, "import: %s\n", im.msg);
  CHECK(im.code == Ok && im.box);
  CBoxInfo *ii = boxlite_box_info(im.box);
  CHECK(ii && strcmp(ii->status, "configured") == 0 && strcmp(ii->name, "imported") == 0);
  boxlite_free_box_info(ii);
  char *sum2 = run_on(rt2, im.box, "md5sum /proj/bin; cat /proj/a /data.txt");
  char want2[512];
  snprintf(want2, sizeof want2, "%shello\nv1\n", sum);
  CHECK(strcmp(sum2, want2) == 0);
  free(sum2);
  /* Something that is not an export is refused. */
  FILE *f = fopen(junk, "w");
  CHECK(f && fputs("not a tar", f) >= 0 && fclose(f) == 0);
  Op im2 = {0};
  CHECK_RC(boxlite_runtime_import_box(rt2, junk, NULL, op_box, &im2, &e), Ok, &e);
  pump_until(rt2, &im2.done, 60);
  CHECK(im2.code != Ok && im2.box == NULL);
  printf("import of junk: %d %s\n", im2.code, im2.msg);
  char *imp_id = box_id(im.box);
  boxlite_box_free(im.box);
  Op rm2 = {0};
  remove_box(rt2, imp_id, 1, &rm2);
  CHECK(rm2.code == Ok);
  free(imp_id);
  boxlite_runtime_free(rt2);

  /* A jail snapshot is a full copy: removable (nothing grows over it). */
  stop(fresh);
  done_op(boxlite_box_snapshot_remove, fresh, "missing", &op);
  CHECK(op.code == NotFound);
  done_op(boxlite_box_snapshot_remove, fresh, "v1", &op);
  CHECK(op.code == Ok);
  list_op(fresh, &s);
  CHECK(s.count == 0);
  snap_free(&s);
  snap_free(&x);
  snap_free(&bad);

  boxlite_box_free(clone);
  remove_box(rt, clone_id, 1, &op);
  CHECK(op.code == Ok);
  boxlite_box_free(fresh);
  boxlite_box_free(box);
  remove_box(rt, id, 1, &op);
  CHECK(op.code == Ok);
  free(sum);
  free(clone_id);
  free(id);
}

/* vm boxes, never booted: their snapshots and clones are layers the disk (or the
 * clone's) grows over. */
static void test_vm_dependencies(const char *image) {
  CBoxliteError e = {0};
  CBoxHandle *box = create_or_config(image, "vmsnap", "vm", 1);
  if (!box) {
    printf("vm dependency checks skipped: the vm engine is not set up beside this library\n");
    return;
  }
  SnapOp s = {0};
  snapshot_op(boxlite_box_snapshot_create, box, "s1", &s);
  CHECK(s.op.code == Ok && s.has_info);
  CHECK(s.info.container_disk_bytes > (1ull << 30));
  Op op = {0};
  done_op(boxlite_box_snapshot_remove, box, "s1", &op);
  CHECK(op.code == InvalidState);
  CHECK(strstr(op.msg, "Cannot remove snapshot: current disk depends on this snapshot"));
  printf("vm snapshot remove: %s\n", op.msg);
  Op c = {0};
  CHECK_RC(boxlite_box_clone(box, "vmclone", op_box, &c, &e), Ok, &e);
  pump_until(rt, &c.done, 120);
  CHECK(c.code == Ok && c.box);
  char *clone_id = box_id(c.box);
  remove_box(rt, "vmsnap", 0, &op);
  CHECK(op.code == InvalidState);
  CHECK(strstr(op.msg, "have clone dependencies") && strstr(op.msg, clone_id));
  printf("vm source remove: %s\n", op.msg);
  boxlite_box_free(c.box);
  remove_box(rt, clone_id, 0, &op);
  CHECK(op.code == Ok);
  boxlite_box_free(box);
  remove_box(rt, "vmsnap", 0, &op);
  CHECK(op.code == Ok);
  snap_free(&s);
  free(clone_id);
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  alarm(550);
  const char *home = getenv("BOXLITE_HOME");
  CHECK(home && home[0]);
  CBoxliteError e = {0};
  CHECK_RC(boxlite_runtime_new(NULL, NULL, 0, &rt, &e), Ok, &e);
  test_jail(argv[1], home);
  test_vm_dependencies(argv[1]);
  /* After a shutdown the handle-less import is refused like create. */
  Op sd = {0};
  CHECK_RC(boxlite_runtime_shutdown(rt, 0, op_done, &sd, &e), Ok, &e);
  pump_until(rt, &sd.done, 60);
  CHECK_RC(boxlite_runtime_import_box(rt, "/x.boxlite", NULL, dummy_box, NULL, &e), Stopped, &e);
  boxlite_runtime_free(rt);
  printf("capi_snapshot_test: ok\n");
  return 0;
}
