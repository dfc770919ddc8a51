/*
 * discovery_file.h - the static discovery file: a parser, and a watcher
 * that re-reads the file when it changes
 * (docs/design.md#discovery-and-registration, source 2).
 *
 * The file is JSON:
 *
 *   {"pods": [{"name": "ns/pod", "ip": "10.0.0.5", "zmq_port": 5557,
 *              "recover_port": 8100?, "replay_port": 6557?, "dp_size": 2?,
 *              "model": "m", "block_size": 16}, ...]}
 *
 * (the engine simulator writes exactly this, plus a top-level "control"
 * key). Other keys, at the top level or in a pod, are ignored; a null
 * optional field is an absent one; duplicate keys in an object make the
 * document invalid rather than silently keeping one of them.
 *
 * Parser. kvc_dfile_parse() takes bytes and returns values, no I/O. A
 * document that is not JSON or has no "pods" array is an error and yields
 * nothing. Otherwise each pod is checked on its own: a pod with a missing,
 * mistyped or out-of-range field (kvc_pod_check() rules: dp_size 1..65536,
 * ports plus ranks below 65536, ...) is reported with its index in "pods"
 * and a reason, and skipped; so is a pod whose name an earlier valid pod
 * already has, or whose instance id (kvc_instance_id(name)) collides with
 * an earlier valid pod's. The other pods are kept, in file order, with source
 * KVC_SOURCE_FILE and dp_size defaulting to the caller's (the
 * coordinator's --watch-dp-size).
 *
 * Watcher. A thread of its own polls the file every interval_ms. It does
 * not need the coordinator's event loop and its cost is one stat(2) a
 * tick. It re-reads the file when stat's (device, inode, size, mtime,
 * ctime) changed - so an in-place write, a replacement by rename(2) and a
 * chmod are all seen - and, since mtime ticks coarsely, also while the
 * last change is less than two seconds old. Content whose hash equals the
 * last content read is not parsed again. A file that is missing,
 * unreadable, larger than KVC_DFILE_MAX_BYTES or not a valid document
 * leaves the last good set in place and is logged once per change; bad
 * pods are logged each time a new version of the file is read. Each good
 * new version is handed to the callback as the full set of pods (the
 * caller diffs it against what it has).
 *
 * Threading: the callback runs on the watcher thread, never two at once;
 * the pods it is given are valid only during the call. It must not call
 * kvc_dfile_watch_free(). kvc_dfile_watch_free() waits for a running
 * callback to return, and none runs after it returns.
 */
#ifndef KVI_COORDINATOR_DISCOVERY_FILE_H
#define KVI_COORDINATOR_DISCOVERY_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pod.h"

/* The largest discovery file the watcher reads. */
#define KVC_DFILE_MAX_BYTES ((size_t)16 << 20)

/* Why one pod of the file was skipped. */
typedef struct kvc_dfile_error {
	size_t index;                /* its position in "pods" */
	kvi_err code;                /* KVI_EINVAL, KVI_ERANGE, KVI_EEXIST */
	char name[KVC_NAME_MAX + 1]; /* its name, "" when it has none */
	char msg[200];               /* which field and value were wrong */
} kvc_dfile_error;

/* A parsed file. Owned by the caller; freed with kvc_dfile_fini(). */
typedef struct kvc_dfile {
	kvc_pod *pods; /* the valid pods, in file order */
	size_t n_pods;
	kvc_dfile_error *errors; /* the skipped pods, by index */
	size_t n_errors;
} kvc_dfile;

/* kvc_dfile_parse parses a discovery file of len bytes into *out, with
 * default_dp_size for pods that give none. Returns KVI_EPROTO (err says
 * where and why) when data is not JSON, not an object or has no "pods"
 * array; *out is written only on success, which includes a file some or
 * all of whose pods are invalid (out->errors). */
kvi_err kvc_dfile_parse(const void *data, size_t len, uint32_t default_dp_size,
			kvc_dfile *out, char *err, size_t errlen);

/* kvc_dfile_fini frees what f holds; a zeroed f is fine. */
void kvc_dfile_fini(kvc_dfile *f);

/* The watcher's callback: the full set of valid pods of a new version of
 * the file (possibly empty). */
typedef void (*kvc_dfile_cb)(void *arg, const kvc_pod *pods, size_t n);

typedef struct kvc_dfile_watch kvc_dfile_watch;

typedef struct kvc_dfile_stats {
	uint64_t reads;    /* times the file's content was read */
	uint64_t loads;    /* versions handed to the callback */
	uint64_t failures; /* versions unread or invalid: last set kept */
	uint64_t bad_pods; /* pods skipped in the last version loaded */
	bool missing;      /* the file does not exist now */
} kvc_dfile_stats;

/* kvc_dfile_watch_open starts a thread that watches path every
 * interval_ms and calls cb(arg, ...) with each new valid version; the
 * first check runs at once. Returns KVI_EINVAL for an empty path, a NULL
 * cb or a zero interval, KVI_EIO if the thread cannot start. */
kvi_err kvc_dfile_watch_open(const char *path, uint32_t default_dp_size,
			     uint32_t interval_ms, kvc_dfile_cb cb, void *arg,
			     kvc_dfile_watch **out);

/* kvc_dfile_watch_free stops the thread and frees w; NULL is allowed. */
void kvc_dfile_watch_free(kvc_dfile_watch *w);

/* kvc_dfile_watch_stats copies the watcher's figures; any thread. */
void kvc_dfile_watch_stats(kvc_dfile_watch *w, kvc_dfile_stats *out);

#endif /* KVI_COORDINATOR_DISCOVERY_FILE_H */
