/*
 * kvt_sim.h - running the engine simulator (kvindex-sim) from a test.
 *
 * kvt_sim_start runs the simulator in a new temporary directory with a
 * layout file, a log file and an ephemeral control port, waits for the
 * layout file (written once every socket is bound) and reads it: the
 * control URL and, per rank, its live, replay and recover ports. The same
 * file is a valid static discovery file for the coordinator. Flags for the
 * layout and the load are the caller's (tools/sim/README.md).
 *
 * Ranks are indexed pod * dp + rank. A kvt_sim is used by one thread.
 */
#ifndef KVI_TESTS_KVT_SIM_H
#define KVI_TESTS_KVT_SIM_H

#include <jansson.h>

#include "error.h"
#include "kvt_http.h"
#include "kvt_proc.h"

#define KVT_SIM_MAX_RANKS 4096

typedef struct kvt_sim {
	char *dir;         /* temporary directory, removed by stop */
	char *layout_path; /* dir/layout.json */
	char *log_path;    /* dir/sim.log: the simulator's log and output */
	kvt_proc *proc;
	char control[128]; /* "http://127.0.0.1:port" */
	char ip[64];       /* where the ranks listen (--ip: 127.0.0.1) */
	json_t *layout;    /* the parsed layout file */
	int pods;
	int dp;
	int n; /* pods * dp */
	/* per rank; 0 when the endpoint is off */
	int zmq_port[KVT_SIM_MAX_RANKS];
	int replay_port[KVT_SIM_MAX_RANKS];
	int recover_port[KVT_SIM_MAX_RANKS];
} kvt_sim;

/* kvt_sim_start starts bin with the NULL-terminated extra flags and waits
 * up to timeout_ms for its layout file. Returns KVI_ETIMEDOUT (no layout:
 * read s->log_path), KVI_EPROTO (unreadable layout), KVI_ERANGE (more than
 * KVT_SIM_MAX_RANKS ranks) or KVI_EIO. On error the simulator is stopped
 * again but the directory is kept for its log until kvt_sim_stop. */
kvi_err kvt_sim_start(const char *bin, const char *const *extra, int timeout_ms,
		      kvt_sim *s);

/* kvt_sim_stop sends SIGTERM, waits up to 10 s (then SIGKILL), removes the
 * directory and writes the exit status into *status (may be NULL).
 * Idempotent. */
void kvt_sim_stop(kvt_sim *s, int *status);

/* kvt_sim_call sends a control request: method "GET" or "POST", path such
 * as "/status", body (borrowed; NULL for GET). Errors as kvt_http_get. */
kvi_err kvt_sim_call(const kvt_sim *s, const char *method, const char *path,
		     const json_t *body, kvt_http_resp *out);

/* kvt_sim_post posts an empty body to path ("/pause", "/resume") and
 * returns the status (0 when no answer came). */
long kvt_sim_post(const kvt_sim *s, const char *path);

/* kvt_sim_metrics_port returns pod's /metrics port from the layout file,
 * 0 when the simulator runs without --metrics-port. */
int kvt_sim_metrics_port(const kvt_sim *s, int pod);

#endif /* KVI_TESTS_KVT_SIM_H */
