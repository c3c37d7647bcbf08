/*
 * boxlite.h: the C API of boxlite (C11; usable from C++ and any FFI).
 *
 * Two surfaces:
 *   - Simple API (boxlite_simple_*): synchronous and blocking; owns its runtime.
 *   - Native API (boxlite_*): asynchronous, post-and-drain. An asynchronous call
 *     returns at once; the work runs on a background thread, which posts an event
 *     to the runtime's queue when it is done. Callbacks run ONLY inside
 *     boxlite_runtime_drain, synchronously, on the thread that calls drain.
 *     If you never drain, no callback ever fires.
 *
 * Errors: every function that can fail returns enum BoxliteErrorCode (Ok = 0)
 * and, when given a CBoxliteError *out_error (zero-initialise it: = {0}), fills
 * its code and a heap message; free the message with boxlite_error_free. A NULL or
 * empty required argument is InvalidArgument with a message naming the parameter
 * ("runtime is NULL"). Messages say what was wrong on what (which box, which path,
 * which option) and never name a function. A non-zero
 * exit of a command is a result, never an API error. No C++ exception and no
 * abort ever crosses this interface.
 *
 * Ownership: everything the library returns from a synchronous call has a free
 * function, and every *_free accepts NULL. Pointers passed to a callback (errors,
 * infos, lists, results, output bytes) are valid only during the callback: copy
 * what you keep. The exception is the CBoxHandle* delivered by the create/get
 * callbacks: it is yours, free it with boxlite_box_free.
 *
 * Threads: CBoxliteRuntime is thread-safe. CBoxHandle, CExecutionHandle and
 * CBoxliteSimple are not: do not use one from two threads at once. Callbacks must
 * not block. See docs/c-api.md for the decisions taken where the reference is
 * silent (freeing a handle with work pending, drain from two threads, ...).
 */
#ifndef BOXLITE_H
#define BOXLITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* The 22 error codes, one per core error kind. */
typedef enum BoxliteErrorCode {
  Ok = 0,                 /* success */
  Internal = 1,           /* internal error */
  NotFound = 2,           /* resource not found */
  AlreadyExists = 3,      /* resource already exists */
  InvalidState = 4,       /* invalid state for the operation */
  InvalidArgument = 5,    /* invalid argument (e.g. NULL, empty string) */
  Config = 6,             /* configuration error */
  Storage = 7,            /* storage error */
  Image = 8,              /* image pull/resolve error */
  Network = 9,            /* network error */
  Execution = 10,         /* command execution error */
  Stopped = 11,           /* resource stopped */
  Engine = 12,            /* engine error */
  Unsupported = 13,       /* unsupported operation or option */
  Database = 14,          /* database error */
  Portal = 15,            /* host-to-guest RPC transport error */
  Rpc = 16,               /* RPC error */
  RpcTransport = 17,      /* RPC transport error */
  Metadata = 18,          /* metadata error */
  UnsupportedEngine = 19, /* unsupported engine (e.g. no virtualization) */
  ResourceExhausted = 20, /* a system resource limit was reached */
  SessionReaped = 21      /* exec session reaped after disconnect: start a new exec */
} BoxliteErrorCode;

/* An error: code and a heap message (NULL when none). Free with boxlite_error_free. */
typedef struct CBoxliteError {
  enum BoxliteErrorCode code;
  char *message;
} CBoxliteError;

/* ---------------------------------------------------------------- handles */

typedef struct CBoxliteRuntime CBoxliteRuntime;         /* a runtime and its event queue */
typedef struct CBoxliteOptions CBoxliteOptions;         /* box options (builder) */
typedef struct CAdvancedBoxOptions CAdvancedBoxOptions; /* advanced box options (builder) */
typedef struct CBoxHandle CBoxHandle;                   /* one box */
typedef struct CExecutionHandle CExecutionHandle;       /* one running command */
typedef struct CBoxliteSimple CBoxliteSimple;           /* Simple API: a runtime and one box */
typedef struct CBoxliteImageHandle CBoxliteImageHandle; /* the runtime's image operations */

/* ---------------------------------------------------------------- types */

/* Transport protocol of a port forward. */
typedef enum BoxlitePortProtocol { BoxlitePortProtocolTcp = 0, BoxlitePortProtocolUdp = 1 } BoxlitePortProtocol;

/* How to reach an image registry. */
typedef enum BoxliteRegistryTransport {
  BoxliteRegistryTransportHttps = 0,
  BoxliteRegistryTransportHttp = 1
} BoxliteRegistryTransport;

/* An image registry for boxlite_runtime_new (the fields of Python's ImageRegistry).
 * Strings may be NULL (unset). */
typedef struct BoxliteImageRegistry {
  const char *host;                        /* e.g. "ghcr.io" (required) */
  enum BoxliteRegistryTransport transport; /* default https */
  int skip_verify;                         /* non-zero: do not verify TLS */
  int search;                              /* non-zero: search unqualified names here */
  const char *username;
  const char *password;
  const char *bearer_token;
} BoxliteImageRegistry;

/* A command for boxlite_box_exec. */
typedef struct BoxliteCommand {
  const char *command;          /* required, non-NULL, non-empty */
  const char *const *args;      /* NULL = no arguments */
  int argc;                     /* number of args, read by count (no NULL terminator) */
  const char *const *env_pairs; /* flat [k0, v0, k1, v1, ...]; NULL = the box's environment */
  int env_count;                /* number of strings; an odd trailing one is ignored */
  const char *workdir;          /* NULL = the box's default */
  const char *user;             /* e.g. "nobody", "1000:1000"; NULL = the box's default */
  double timeout_secs;          /* 0.0 = no timeout */
  int tty;                      /* non-zero: a PTY (stdout and stderr merged) */
} BoxliteCommand;

/* Simple API buffered result. Free with boxlite_result_free. */
typedef struct CBoxliteExecResult {
  int exit_code;     /* the command's exit code; -N when signal N killed it */
  char *stdout_text; /* never NULL (may be "") */
  char *stderr_text; /* never NULL (may be "") */
} CBoxliteExecResult;

/* What a box is. Strings are heap memory owned by the struct. */
typedef struct CBoxInfo {
  char *id;
  char *name; /* NULL when the box has no name */
  char *image;
  char *status; /* "configured", "running", "stopped" (boxlite/lifecycle.hpp has every state) */
  int running;  /* non-zero when status is "running" */
  int pid;      /* the box's shim process, 0 when not running */
  int cpus;
  int memory_mib;
  int64_t created_at; /* Unix time, seconds */
} CBoxInfo;

typedef struct CBoxInfoList {
  CBoxInfo *items; /* count entries, newest first */
  int count;
} CBoxInfoList;

/* Metrics (fields as documented), delivered by boxlite_box_metrics and
 * boxlite_runtime_metrics. Counters wider than int saturate at INT_MAX. */
typedef struct CBoxMetrics {
  double cpu_percent;
  int64_t memory_bytes;
  int commands_executed;
  int exec_errors;
  int64_t bytes_sent;
  int64_t bytes_received;
  int64_t create_duration_ms;
  int64_t boot_duration_ms;
  int64_t network_bytes_sent;
  int64_t network_bytes_received;
  int network_tcp_connections;
  int network_tcp_errors;
} CBoxMetrics;

/* Addition (docs/c-api.md), a versioned extension of CBoxMetrics delivered by
 * boxlite_box_metrics_ex: CBoxMetrics unchanged in `base`, then the stage timings
 * of the box's creation and last start. struct_size is sizeof(CBoxMetricsEx) of
 * the library that filled it: read a field only when its offsetof() is below
 * struct_size (fields are only ever appended). A stage that did not happen (a box
 * never started; no disk image for a jail) is -1. */
typedef struct CBoxMetricsEx {
  size_t struct_size;
  CBoxMetrics base;
  int64_t stage_filesystem_setup_ms;
  int64_t stage_image_prepare_ms;
  int64_t stage_guest_rootfs_ms;
  int64_t stage_box_spawn_ms;
  int64_t stage_container_init_ms;
  /* base.commands_executed and base.exec_errors without saturation. */
  uint64_t commands_executed_total;
  uint64_t exec_errors_total;
} CBoxMetricsEx;

typedef struct CRuntimeMetrics {
  int boxes_created_total;
  int boxes_failed_total;
  int num_running_boxes;
  int total_commands_executed;
  int total_exec_errors;
} CRuntimeMetrics;

typedef struct CImagePullResult {
  char *reference;
  char *config_digest;
  int layer_count;
} CImagePullResult;

typedef struct CImageInfo {
  char *reference;
  char *repository;
  char *tag;
  char *id;
  int64_t cached_at;
  uint64_t size;
  int has_size; /* non-zero when size is meaningful */
} CImageInfo;

typedef struct CImageInfoList {
  CImageInfo *items;
  int count;
} CImageInfoList;

/* Addition (docs/c-api.md): a snapshot of a box's disk (box.snapshot). Strings
 * are heap memory owned by the struct. */
typedef struct CSnapshotInfo {
  char *id;
  char *box_id;
  char *name;
  int64_t created_at;            /* Unix time, seconds */
  uint64_t container_disk_bytes; /* the box disk's size when it was taken */
  uint64_t size_bytes;           /* the host bytes the snapshot itself takes */
} CSnapshotInfo;

typedef struct CSnapshotInfoList {
  CSnapshotInfo *items; /* count entries, oldest first (NULL when count is 0) */
  int count;
} CSnapshotInfoList;

/* ---------------------------------------------------------------- callbacks */
/* The last parameter is always the user_data given with the call. */

typedef void (*CBoxCreateBoxCb)(CBoxHandle *box, CBoxliteError *err, void *user_data);
typedef void (*CBoxGetBoxCb)(CBoxHandle *box, CBoxliteError *err, void *user_data);
/* boxlite_get_or_create_box: created is non-zero when a new box was made. */
typedef void (*CBoxGetOrCreateBoxCb)(CBoxHandle *box, int created, CBoxliteError *err, void *user_data);
typedef void (*CBoxStartBoxCb)(CBoxliteError *err, void *user_data);
typedef void (*CBoxStopBoxCb)(CBoxliteError *err, void *user_data);
typedef void (*CBoxRemoveBoxCb)(CBoxliteError *err, void *user_data);
typedef void (*CBoxCopyCb)(CBoxliteError *err, void *user_data);
typedef void (*CBoxImagePullCb)(CImagePullResult *result, CBoxliteError *err, void *user_data);
typedef void (*CBoxImageListCb)(CImageInfoList *list, CBoxliteError *err, void *user_data);
/* Raw output bytes, not NUL-terminated. */
typedef void (*CBoxStdoutCb)(const uint8_t *data, size_t len, void *user_data);
typedef void (*CBoxStderrCb)(const uint8_t *data, size_t len, void *user_data);
typedef void (*CBoxExitCb)(int exit_code, void *user_data);
typedef void (*CExecutionWaitCb)(int exit_code, CBoxliteError *err, void *user_data);
typedef void (*CExecutionKillCb)(CBoxliteError *err, void *user_data);
typedef void (*CExecutionSignalCb)(CBoxliteError *err, void *user_data);
typedef void (*CExecutionResizeCb)(CBoxliteError *err, void *user_data);
typedef void (*CBoxInfoCb)(CBoxInfo *info, CBoxliteError *err, void *user_data);
typedef void (*CBoxInfoListCb)(CBoxInfoList *list, CBoxliteError *err, void *user_data);
typedef void (*CBoxMetricsCb)(CBoxMetrics *metrics, CBoxliteError *err, void *user_data);
typedef void (*CBoxMetricsExCb)(const CBoxMetricsEx *metrics, CBoxliteError *err, void *user_data);
typedef void (*CRuntimeMetricsCb)(CRuntimeMetrics *metrics, CBoxliteError *err, void *user_data);
typedef void (*CRuntimeShutdownCb)(CBoxliteError *err, void *user_data);
/* Additions (docs/c-api.md): snapshots and export. boxlite_box_snapshot_get gives
 * info NULL and err NULL when the box has no snapshot of that name. */
typedef void (*CSnapshotInfoCb)(CSnapshotInfo *info, CBoxliteError *err, void *user_data);
typedef void (*CSnapshotInfoListCb)(CSnapshotInfoList *list, CBoxliteError *err, void *user_data);
typedef void (*CBoxSnapshotDoneCb)(CBoxliteError *err, void *user_data);
/* The path of the archive written (NULL on error). */
typedef void (*CBoxExportCb)(const char *path, CBoxliteError *err, void *user_data);

/* ---------------------------------------------------------------- runtime */

/* The library version, e.g. "0.1.0" (static storage). */
const char *boxlite_version(void);

/* Creates a runtime (synchronous). home_dir NULL = $BOXLITE_HOME or ~/.boxlite.
 * image_registries (count entries, copied) are tried in order for unqualified image
 * names that have search != 0; count 0 = the home's config.json, else docker.io.
 * A bad entry (no host, a URL as host, username without password) is Config. */
enum BoxliteErrorCode boxlite_runtime_new(const char *home_dir, const struct BoxliteImageRegistry *image_registries,
                                          int image_registries_count, CBoxliteRuntime **out_runtime,
                                          CBoxliteError *out_error);

/* Frees the runtime: undispatched callbacks are dropped (never called), commands
 * still running that were started through it are killed, and its background work
 * is waited for. Box handles you still hold stay valid for boxlite_box_id,
 * boxlite_box_info and boxlite_box_free only. Must not be called from a callback. */
void boxlite_runtime_free(CBoxliteRuntime *runtime);

/* Runs queued callbacks on the calling thread. timeout_ms: 0 = do not wait;
 * < 0 = wait until at least one event is there; > 0 = wait at most that long.
 * Returns the number of callbacks run, or -1 with out_error filled (a NULL runtime,
 * or drain called from inside one of this runtime's callbacks). Two threads may
 * drain at once: callbacks still run one at a time, in queue order. */
int boxlite_runtime_drain(CBoxliteRuntime *runtime, int timeout_ms, CBoxliteError *out_error);

/* Stops every box this runtime handed out, in parallel (async). timeout_secs:
 * 0 = 10 s, -1 = as long as it takes, > 0 = that many seconds per box. The runtime
 * is marked closed before this returns: later create, get_or_create, get, remove,
 * start and exec calls fail at once with Stopped (stop, info and list still work). */
enum BoxliteErrorCode boxlite_runtime_shutdown(CBoxliteRuntime *runtime, int timeout_secs, CRuntimeShutdownCb cb,
                                               void *user_data, CBoxliteError *out_error);

/* ---------------------------------------------------------------- boxes */

/* Creates a box from the options (async; the options are copied before this
 * returns, so they may be freed at once). The box is not booted until
 * boxlite_start_box or its first exec. Options the core does not support yet
 * fail here with Unsupported, naming the option. */
enum BoxliteErrorCode boxlite_create_box(CBoxliteRuntime *runtime, CBoxliteOptions *opts, CBoxCreateBoxCb cb,
                                         void *user_data, CBoxliteError *out_error);

/* The box named by boxlite_options_set_name if there is one (created = 0), else a
 * new one (created = 1). The options must carry a name. */
enum BoxliteErrorCode boxlite_get_or_create_box(CBoxliteRuntime *runtime, CBoxliteOptions *opts,
                                                CBoxGetOrCreateBoxCb cb, void *user_data, CBoxliteError *out_error);

enum BoxliteErrorCode boxlite_start_box(CBoxHandle *handle, CBoxStartBoxCb cb, void *user_data,
                                        CBoxliteError *out_error);

/* Stops the box (async). The handle stays valid: the box can be started again. */
enum BoxliteErrorCode boxlite_stop_box(CBoxHandle *handle, CBoxStopBoxCb cb, void *user_data, CBoxliteError *out_error);

/* A box by id, name or unique id prefix (async): NotFound when there is none. */
enum BoxliteErrorCode boxlite_get(CBoxliteRuntime *runtime, const char *id_or_name, CBoxGetBoxCb cb, void *user_data,
                                  CBoxliteError *out_error);

/* Removes a box (async). A running box needs force != 0 (InvalidState otherwise). */
enum BoxliteErrorCode boxlite_remove(CBoxliteRuntime *runtime, const char *id_or_name, int force, CBoxRemoveBoxCb cb,
                                     void *user_data, CBoxliteError *out_error);

/* Box information without booting anything (async). */
enum BoxliteErrorCode boxlite_get_info(CBoxliteRuntime *runtime, const char *id_or_name, CBoxInfoCb cb, void *user_data,
                                       CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_list_info(CBoxliteRuntime *runtime, CBoxInfoListCb cb, void *user_data,
                                        CBoxliteError *out_error);

/* The box's id (synchronous): a heap string, free with boxlite_free_string; NULL
 * for a NULL handle. */
char *boxlite_box_id(CBoxHandle *handle);

/* The box's information read synchronously from the handle (no queue); NULL for a
 * NULL handle or a box that was removed. Free with boxlite_free_box_info. */
CBoxInfo *boxlite_box_info(CBoxHandle *handle);

/* Releases the handle. Callbacks of operations still pending on it are dropped.
 * When it was the last reference to a box created with auto_remove (the default),
 * the box is stopped and removed, as the core does when a box's handle goes away;
 * set auto_remove to 0 (or detach) to keep it. */
void boxlite_box_free(CBoxHandle *handle);

/* Copies host_src into the box at guest_dst, or guest_src out to host_dst (async),
 * with docker cp semantics (overwrite on, include parent on, symlinks not followed).
 * Starts the box if needed. */
enum BoxliteErrorCode boxlite_copy_into(CBoxHandle *handle, const char *host_src, const char *guest_dst, CBoxCopyCb cb,
                                        void *user_data, CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_copy_out(CBoxHandle *handle, const char *guest_src, const char *host_dst, CBoxCopyCb cb,
                                       void *user_data, CBoxliteError *out_error);
/* Addition (docs/c-api.md): the same with the reference's copy parameters (each
 * 0 or non-zero; the functions above use 1, 0, 1): overwrite an existing
 * non-directory at the destination (else AlreadyExists), follow the source when it
 * is itself a symlink, and keep a directory's own name under an existing
 * destination directory (else its contents go into it). */
enum BoxliteErrorCode boxlite_copy_into_with(CBoxHandle *handle, const char *host_src, const char *guest_dst,
                                             int overwrite, int follow_symlinks, int include_parent, CBoxCopyCb cb,
                                             void *user_data, CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_copy_out_with(CBoxHandle *handle, const char *guest_src, const char *host_dst,
                                            int overwrite, int follow_symlinks, int include_parent, CBoxCopyCb cb,
                                            void *user_data, CBoxliteError *out_error);

/* Metrics of this run of the box (async; counters restart with each start). */
enum BoxliteErrorCode boxlite_box_metrics(CBoxHandle *handle, CBoxMetricsCb cb, void *user_data,
                                          CBoxliteError *out_error);
/* Addition (docs/c-api.md): boxlite_box_metrics with the stage timings
 * (CBoxMetricsEx; valid during the callback only). */
enum BoxliteErrorCode boxlite_box_metrics_ex(CBoxHandle *handle, CBoxMetricsExCb cb, void *user_data,
                                             CBoxliteError *out_error);
/* Counters of this runtime since it was made, and the boxes of its home running now (async). */
enum BoxliteErrorCode boxlite_runtime_metrics(CBoxliteRuntime *runtime, CRuntimeMetricsCb cb, void *user_data,
                                              CBoxliteError *out_error);

/* ---------------------------------------------------------------- snapshots, clone, export, import */
/* Additions (docs/c-api.md): the core's box.snapshot, clone_box, export and
 * import_box (docs/storage.md). All asynchronous; they work on a running or a
 * stopped box (restore: stopped only), and on a handle stop() invalidated. A NULL
 * or empty name/path is InvalidArgument. The jail engine's snapshots and clones
 * are full copies of the box's upper layer; the vm engine's are copy-on-write
 * layers of its disk, so some removals are refused while something grows over them. */

/* Takes a snapshot named `name` ([a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 128 characters;
 * InvalidArgument otherwise; AlreadyExists for a taken name). A running box is
 * quiesced and resumed. The callback gets its CSnapshotInfo. */
enum BoxliteErrorCode boxlite_box_snapshot_create(CBoxHandle *handle, const char *name, CSnapshotInfoCb cb,
                                                  void *user_data, CBoxliteError *out_error);
/* The box's snapshots, oldest first (an empty list when none). */
enum BoxliteErrorCode boxlite_box_snapshot_list(CBoxHandle *handle, CSnapshotInfoListCb cb, void *user_data,
                                                CBoxliteError *out_error);
/* The snapshot named `name`; info NULL and err NULL when there is none. */
enum BoxliteErrorCode boxlite_box_snapshot_get(CBoxHandle *handle, const char *name, CSnapshotInfoCb cb,
                                               void *user_data, CBoxliteError *out_error);
/* Removes the snapshot: NotFound when there is none; InvalidState "Cannot remove
 * snapshot: current disk depends on this snapshot..." when the box's disk (vm)
 * grows over it, or "... depends on this snapshot" for a later snapshot or a clone. */
enum BoxliteErrorCode boxlite_box_snapshot_remove(CBoxHandle *handle, const char *name, CBoxSnapshotDoneCb cb,
                                                  void *user_data, CBoxliteError *out_error);
/* Puts the box's disk back to the snapshot. InvalidState "Cannot restore snapshot
 * while box is running. Stop the box first." on a running box; NotFound when there
 * is no such snapshot. */
enum BoxliteErrorCode boxlite_box_snapshot_restore(CBoxHandle *handle, const char *name, CBoxSnapshotDoneCb cb,
                                                   void *user_data, CBoxliteError *out_error);
/* A new, independent box with the box's files (a running source is quiesced and
 * resumed), created stopped with auto_remove off: its first exec starts it. name
 * NULL or "" = a generated one. The callback's handle is yours (boxlite_box_free).
 * A vm source cannot then be removed without force while the clone exists
 * (InvalidState "... have clone dependencies on it..."). */
enum BoxliteErrorCode boxlite_box_clone(CBoxHandle *handle, const char *name, CBoxCreateBoxCb cb, void *user_data,
                                        CBoxliteError *out_error);
/* Writes <dest_dir>/<box name or id>.boxlite, a portable archive of the box (its
 * whole disk, or a jail's upper layer), and gives its path. dest_dir must exist
 * (InvalidArgument otherwise). */
enum BoxliteErrorCode boxlite_box_export(CBoxHandle *handle, const char *dest_dir, CBoxExportCb cb, void *user_data,
                                         CBoxliteError *out_error);
/* A new box (of the engine it was exported from, stopped, auto_remove off) from an
 * archive boxlite_box_export wrote, possibly in another home or on another machine.
 * name NULL or "" = a generated one. The callback's handle is yours. */
enum BoxliteErrorCode boxlite_runtime_import_box(CBoxliteRuntime *runtime, const char *archive_path, const char *name,
                                                 CBoxCreateBoxCb cb, void *user_data, CBoxliteError *out_error);

/* ---------------------------------------------------------------- executions */

/* Starts a command (synchronous: returns once it runs, without waiting for it to
 * exit; a box that is not running is started first). Its stdin stays open until
 * boxlite_execution_stdin_close or boxlite_execution_free. */
enum BoxliteErrorCode boxlite_box_exec(CBoxHandle *handle, const struct BoxliteCommand *cmd,
                                       CExecutionHandle **out_execution, CBoxliteError *out_error);

/* Addition (docs/c-api.md): boxlite_box_exec with the stdout and stderr callbacks
 * (both required, one user_data) registered before any output can be dispatched:
 * for callers that drain on another thread than the one that starts commands
 * (the Python package), where registering after boxlite_box_exec could lose the
 * first chunks. */
enum BoxliteErrorCode boxlite_box_exec_streamed(CBoxHandle *handle, const struct BoxliteCommand *cmd,
                                                CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr, void *user_data,
                                                CExecutionHandle **out_execution, CBoxliteError *out_error);

/* Addition (docs/c-api.md): boxlite_box_exec_streamed with output credit
 * returned by the caller. Each execution may have at most 1 MiB of output queued;
 * here a chunk keeps counting against that window after its callback returns,
 * until boxlite_execution_ack_output gives its bytes back. A caller that buffers
 * output for a reader acks what the reader consumed: a command whose output nobody
 * reads then pauses (its pipe fills, as with a shell pipe) instead of the caller's
 * buffer growing without bound. boxlite_execution_kill on a paused command drops
 * the output that does not fit, so the kill and the wait still complete. */
enum BoxliteErrorCode boxlite_box_exec_acked(CBoxHandle *handle, const struct BoxliteCommand *cmd,
                                             CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr, void *user_data,
                                             CExecutionHandle **out_execution, CBoxliteError *out_error);

/* Addition (docs/c-api.md): why a command could not start in the box. An exec that
 * fails this way is an Execution error; the kind says why, so a caller never reads
 * it from the message. The numbers are fixed. */
typedef enum BoxliteSpawnFailure {
  BoxliteSpawnFailureNone = 0,          /* the command started, or the call failed otherwise */
  BoxliteSpawnFailureNotFound = 1,      /* no such command (in $PATH, at the path, or its interpreter) */
  BoxliteSpawnFailureNotExecutable = 2, /* it exists but cannot be executed (mode, a directory) */
  BoxliteSpawnFailureBadWorkingDir = 3, /* the working directory is missing or not a directory */
  BoxliteSpawnFailureUnknownUser = 4,   /* the user or group does not exist in the box */
  BoxliteSpawnFailureSetup = 5          /* boxlite's own failure in the box before the exec (fork, pipe) */
} BoxliteSpawnFailure;

/* Addition (docs/c-api.md): boxlite_box_exec_acked that also says, in
 * *out_spawn_failure (may be NULL), why the command could not start: set to
 * BoxliteSpawnFailureNone on success and on any other failure, and to the reason
 * when the call fails with Execution because the command did not start. */
enum BoxliteErrorCode boxlite_box_exec_acked_ex(CBoxHandle *handle, const struct BoxliteCommand *cmd,
                                                CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr, void *user_data,
                                                CExecutionHandle **out_execution,
                                                enum BoxliteSpawnFailure *out_spawn_failure, CBoxliteError *out_error);
/* Addition (docs/c-api.md): the exit code a shell (and docker exec) gives a command
 * that failed to start this way: 127 for NotFound, 126 for NotExecutable,
 * BadWorkingDir and UnknownUser, 125 for Setup; 0 for None and for a value
 * outside the enum. */
int boxlite_spawn_failure_exit_code(enum BoxliteSpawnFailure failure);
/* Addition (docs/c-api.md): the main command's session, as an execution (the
 * reference's Python `box.attach()`): its output from the start (what the box kept
 * of it) and then live, its exit code from boxlite_execution_wait; credit as with
 * boxlite_box_exec_acked. A box not yet started is started; a main command that
 * already exited gives its kept output and exit code. NotFound for a box without
 * a main command. */
enum BoxliteErrorCode boxlite_box_attach_acked(CBoxHandle *handle, CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr,
                                               void *user_data, CExecutionHandle **out_execution,
                                               CBoxliteError *out_error);
/* Returns `bytes` of output credit (synchronous; any thread; more than is
 * outstanding is clamped). A no-op for an execution not started with
 * boxlite_box_exec_acked. */
enum BoxliteErrorCode boxlite_execution_ack_output(CExecutionHandle *execution, size_t bytes, CBoxliteError *out_error);

/* Output and exit callbacks (synchronous registration, one of each; a second
 * registration replaces the first). Chunks are delivered during drain, in the
 * order the command wrote each stream. Register before the first drain after
 * boxlite_box_exec: output dispatched while no callback is registered is dropped. */
enum BoxliteErrorCode boxlite_execution_on_stdout(CExecutionHandle *execution, CBoxStdoutCb cb, void *user_data,
                                                  CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_execution_on_stderr(CExecutionHandle *execution, CBoxStderrCb cb, void *user_data,
                                                  CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_execution_on_exit(CExecutionHandle *execution, CBoxExitCb cb, void *user_data,
                                                CBoxliteError *out_error);

/* Writes to the command's stdin (synchronous; blocks while the box's stdin window
 * is full). InvalidState once stdin is closed or the command has exited. */
enum BoxliteErrorCode boxlite_execution_stdin_write(CExecutionHandle *execution, const uint8_t *data, size_t len,
                                                    CBoxliteError *out_error);
/* Sends EOF (synchronous, idempotent). */
enum BoxliteErrorCode boxlite_execution_stdin_close(CExecutionHandle *execution, CBoxliteError *out_error);

/* The exit code arrives as the callback's int, after every output chunk (async).
 * May be called more than once; each callback fires once. */
enum BoxliteErrorCode boxlite_execution_wait(CExecutionHandle *execution, CExecutionWaitCb cb, void *user_data,
                                             CBoxliteError *out_error);
/* SIGKILL to the command's process group; the callback fires once it has exited. */
enum BoxliteErrorCode boxlite_execution_kill(CExecutionHandle *execution, CExecutionKillCb cb, void *user_data,
                                             CBoxliteError *out_error);
/* Any signal (e.g. 2 = SIGINT, 15 = SIGTERM); the callback fires once it is sent. */
enum BoxliteErrorCode boxlite_execution_signal(CExecutionHandle *execution, int sig, CExecutionSignalCb cb,
                                               void *user_data, CBoxliteError *out_error);
/* Resizes the PTY (needs cmd.tty != 0; rows and cols 1..65535). */
enum BoxliteErrorCode boxlite_execution_tty_resize(CExecutionHandle *execution, int rows, int cols,
                                                   CExecutionResizeCb cb, void *user_data, CBoxliteError *out_error);

/* Addition (docs/c-api.md): 1 when the command ended because of its timeout_secs,
 * 0 otherwise (also before it ended, and for a NULL handle). Synchronous. */
int boxlite_execution_timed_out(CExecutionHandle *execution);

/* Releases the handle: callbacks not yet dispatched for it are dropped; the command
 * keeps running (its stdin is closed, its output is discarded). */
void boxlite_execution_free(CExecutionHandle *execution);

/* ---------------------------------------------------------------- options */

/* image: a registry reference ("alpine:3.19", "host:5000/repo:tag"), an OCI image
 * layout directory, or oci:DIR[:TAG]. */
enum BoxliteErrorCode boxlite_options_new(const char *image, CBoxliteOptions **out_opts, CBoxliteError *out_error);
/* Setters are synchronous. A NULL opts is a no-op; an invalid value is reported by
 * boxlite_create_box (InvalidArgument, "box options: <option>: <what was wrong>"). */
void boxlite_options_set_cpus(CBoxliteOptions *opts, int cpus);         /* 1..255, default 1 */
void boxlite_options_set_memory(CBoxliteOptions *opts, int memory_mib); /* 64.., default 1024 */
/* The box's disk in GiB (vm engine: sparse; default 10). 0 = the default. The
 * jail engine refuses it at boxlite_create_box (Unsupported). */
void boxlite_options_set_disk_size_gb(CBoxliteOptions *opts, uint64_t disk_size_gb);
/* A volume: host_path shared at guest_path (absolute; not a system directory).
 * read_only: 1 = read-only, 0 = read-write. Bad paths fail boxlite_create_box with
 * InvalidArgument (docs/storage.md). */
void boxlite_options_add_bind_mount(CBoxliteOptions *opts, const char *host_path, const char *guest_path,
                                    int read_only);
/* host_port 0 = same as guest_port; host_ip NULL or "" = all interfaces. Bad
 * arguments: InvalidArgument. */
enum BoxliteErrorCode boxlite_options_add_port(CBoxliteOptions *opts, uint16_t host_port, uint16_t guest_port,
                                               enum BoxlitePortProtocol protocol, const char *host_ip);
/* A secret injected through its placeholder for these hosts only (hosts_count 0 =
 * any host; placeholder NULL or "" = "<BOXLITE_SECRET:name>"). The box sees
 * BOXLITE_SECRET_<NAME> holding the placeholder, never the value. */
void boxlite_options_add_secret(CBoxliteOptions *opts, const char *name, const char *value, const char *placeholder,
                                const char *const *hosts, int hosts_count);
/* Network mode "enabled" (the documented default) or "disabled" (no interface
 * but loopback). */
void boxlite_options_set_network_enabled(CBoxliteOptions *opts);
void boxlite_options_set_network_disabled(CBoxliteOptions *opts);
/* Addition (docs/c-api.md): adds a host to the egress allowlist (NetworkSpec's
 * allow_net; exact, or "*.example.com"). None added = allow all. */
void boxlite_options_add_allow_net(CBoxliteOptions *opts, const char *host);
/* Additions to the documented setters (docs/c-api.md). Strings are copied. */
void boxlite_options_set_name(CBoxliteOptions *opts, const char *name);
void boxlite_options_set_rootfs_path(CBoxliteOptions *opts, const char *path);
void boxlite_options_set_workdir(CBoxliteOptions *opts, const char *workdir);
void boxlite_options_set_user(CBoxliteOptions *opts, const char *user);
void boxlite_options_add_env(CBoxliteOptions *opts, const char *key, const char *value);
void boxlite_options_set_entrypoint(CBoxliteOptions *opts, const char *const *args, int argc);
void boxlite_options_set_cmd(CBoxliteOptions *opts, const char *const *args, int argc);
void boxlite_options_set_auto_remove(CBoxliteOptions *opts, int auto_remove); /* default 1 */
void boxlite_options_set_detach(CBoxliteOptions *opts, int detach);           /* default 0 */
/* engine: "vm" or "jail"; NULL = $BOXLITE_ENGINE, the home config, else "vm". */
enum BoxliteErrorCode boxlite_options_set_engine(CBoxliteOptions *opts, const char *engine, CBoxliteError *out_error);
/* Copies adv into opts; the caller keeps (and frees) adv. */
void boxlite_options_set_advanced(CBoxliteOptions *opts, const CAdvancedBoxOptions *adv);
void boxlite_options_free(CBoxliteOptions *opts);

enum BoxliteErrorCode boxlite_advanced_options_new(CAdvancedBoxOptions **out_opts, CBoxliteError *out_error);
/* enabled != 0: the full sandbox (default). 0 is not supported (create: Unsupported). */
void boxlite_advanced_options_set_security_enabled(CAdvancedBoxOptions *opts, int enabled);
/* Additions (docs/c-api.md): the SecurityOptions the core enforces. seccomp
 * enabled = 0 runs a jail box without its seccomp filter (default 1; the vm engine
 * has none to turn off). A limit (0 = none, the default) is an rlimit of the box's
 * processes on the jail engine (max_processes also caps its pids cgroup); a vm
 * box with a limit fails at boxlite_create_box with Unsupported naming it. */
void boxlite_advanced_options_set_seccomp_enabled(CAdvancedBoxOptions *opts, int enabled);
void boxlite_advanced_options_set_max_open_files(CAdvancedBoxOptions *opts, uint64_t n);    /* RLIMIT_NOFILE */
void boxlite_advanced_options_set_max_file_size(CAdvancedBoxOptions *opts, uint64_t bytes); /* RLIMIT_FSIZE */
void boxlite_advanced_options_set_max_processes(CAdvancedBoxOptions *opts, uint64_t n);     /* RLIMIT_NPROC */
void boxlite_advanced_options_set_max_memory(CAdvancedBoxOptions *opts, uint64_t bytes);    /* RLIMIT_AS */
void boxlite_advanced_options_set_max_cpu_time(CAdvancedBoxOptions *opts, uint64_t secs);   /* RLIMIT_CPU */
void boxlite_advanced_options_free(CAdvancedBoxOptions *opts);

/* ---------------------------------------------------------------- Simple API */

/* Creates a runtime (default home) and a started box. cpus/memory_mib 0 = the
 * defaults (1 vCPU, 1024 MiB). Blocking. */
enum BoxliteErrorCode boxlite_simple_new(const char *image, int cpus, int memory_mib, CBoxliteSimple **out_box,
                                         CBoxliteError *out_error);
/* Runs a command to completion and buffers its output (at most 16 MiB per stream).
 * A non-zero exit is Ok with exit_code set. Free the result with boxlite_result_free. */
enum BoxliteErrorCode boxlite_simple_run(CBoxliteSimple *box, const char *command, const char *const *args, int argc,
                                         CBoxliteExecResult **out_result, CBoxliteError *out_error);
/* Stops and removes the box, and frees the runtime. */
void boxlite_simple_free(CBoxliteSimple *box);
void boxlite_result_free(CBoxliteExecResult *result);

/* ---------------------------------------------------------------- images */

enum BoxliteErrorCode boxlite_runtime_images(CBoxliteRuntime *runtime, CBoxliteImageHandle **out_handle,
                                             CBoxliteError *out_error);
/* Pull (always asks the registry) and list the home's images (async).
 * CImagePullResult.config_digest is the image's manifest digest (its id). */
enum BoxliteErrorCode boxlite_image_pull(CBoxliteImageHandle *handle, const char *image_ref, CBoxImagePullCb cb,
                                         void *user_data, CBoxliteError *out_error);
enum BoxliteErrorCode boxlite_image_list(CBoxliteImageHandle *handle, CBoxImageListCb cb, void *user_data,
                                         CBoxliteError *out_error);
void boxlite_image_free(CBoxliteImageHandle *handle);

/* ---------------------------------------------------------------- freeing */

void boxlite_error_free(CBoxliteError *error); /* frees message, resets to {Ok, NULL} */
void boxlite_free_string(char *s);
void boxlite_free_box_info(CBoxInfo *info);
void boxlite_free_box_info_list(CBoxInfoList *list);
void boxlite_free_image_pull_result(CImagePullResult *result);
void boxlite_free_image_info_list(CImageInfoList *list);
/* Additions (docs/c-api.md), for CSnapshotInfo / CSnapshotInfoList a caller holds
 * in library-compatible form (malloc'ed strings, items and struct). */
void boxlite_free_snapshot_info(CSnapshotInfo *info);
void boxlite_free_snapshot_info_list(CSnapshotInfoList *list);

#ifdef __cplusplus
}
#endif

#endif /* BOXLITE_H */
