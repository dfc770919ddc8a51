/*
 * shard_check.h - cmocka checks for tests that drive a real kvindex-shard.
 *
 * A shardproc is a running kvindex-shard with its own temporary data
 * directory, an nng address of its own (a loopback address no other
 * process binds, with the port the shard bound at its first start, kept
 * across restarts: kvt_env.h), a metrics port the shard picks itself at
 * each start (port 0; the harness reads the one it bound from its log),
 * and an nng client the test drives it with (the shard's real
 * interface). With
 * KVI_TEST_SHARD_IPC set in the environment the shard listens on nng's
 * ipc:// transport (a socket in its directory) instead of TCP. The comparisons
 * here hold a shard to the engine simulator's ground truth: for a rank, the
 * shard's dump of that listener (external hash, sequence hash, tiers) must
 * equal the simulator's /truth exactly, watermark included.
 *
 * Helpers fail the running test on any transport error. Single-threaded.
 */
#ifndef KVI_TESTS_SHARD_CHECK_H
#define KVI_TESTS_SHARD_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "kvindex.pb-c.h"
#include "kvitest.h"
#include "rpc.h"

#define SHC_WAIT_MS 20000

typedef struct shardproc {
	char *dir; /* temporary directory: data/, shard.log */
	char *data_dir;
	char *log_path;
	char url[96];     /* nng address, tcp://127.x.y.z:port or ipc:// */
	bool url_port0;   /* tcp://host:0 until the first start bound one */
	char metrics[64]; /* 127.0.0.1:port, as bound at the last start */
	const char *const *extra;
	int nofile; /* > 0: run under this open-file limit (prlimit) */
	kvt_proc *proc;
	kvp_client *client;
	int starts;
} shardproc;

/* shc_start starts a shard in a new temporary directory with the extra
 * flags (NULL-terminated, kept by pointer) and waits until it answers. */
void shc_start(shardproc *s, const char *const *extra);

/* shc_start_limited is shc_start under an open-file limit of nofile
 * (soft and hard: the shard cannot raise it). */
void shc_start_limited(shardproc *s, const char *const *extra, int nofile);

/* shc_start_on is shc_start with the store in dir/data (a filesystem of
 * the test's choosing; dir is left alone at cleanup). */
void shc_start_on(shardproc *s, const char *const *extra, const char *dir);

/* shc_start_host is shc_start with the nng address on host (an IPv4
 * address: 127.0.0.1 for a test that names the shard "localhost"). */
void shc_start_host(shardproc *s, const char *const *extra, const char *host);

/* shc_restart starts the shard again on the same directory and nng
 * address (metrics on a new port). */
void shc_restart(shardproc *s);

/* shc_run_to_exit starts the shard again on its directory with the extra
 * flags, expecting it to exit (a start it must refuse), and returns its
 * exit status (128 + the signal for one that killed it); fails the test
 * when it is still running after timeout_ms. */
int shc_run_to_exit(shardproc *s, const char *const *extra, int timeout_ms);

/* shc_kill9 kills the shard with SIGKILL and reaps it. */
void shc_kill9(shardproc *s);

/* shc_stop stops it with SIGTERM and returns the exit status (non-zero
 * under ASan when it leaked). */
int shc_stop(shardproc *s);

/* shc_cleanup stops the shard if needed and removes its directory. */
void shc_cleanup(shardproc *s);

/* shc_call sends req and returns the response (free with
 * kvindex__response__free_unpacked); fails the test when none came. */
Kvindex__Response *shc_call(shardproc *s, Kvindex__Request *req);

/* shc_key writes rank idx's listener key, "sim/pod-P#r". */
void shc_key(const kvt_sim *sim, int idx, char *buf, size_t len);

/* shc_assign assigns rank idx of sim to the shard, with its replay and
 * recover endpoints when given, and checks the answer is code. */
void shc_assign(shardproc *s, const kvt_sim *sim, int idx, bool replay,
		bool recover, unsigned code);

/* shc_assign_from is shc_assign as a planned move: the listener's state
 * comes from the shard at from (its nng address; NULL: none). */
void shc_assign_from(shardproc *s, const kvt_sim *sim, int idx, bool replay,
		     bool recover, const char *from, unsigned code);

/* shc_assign_recover assigns rank idx of sim without its replay socket
 * and with recover_url (NULL: none) for its /kv_recover endpoint instead
 * of the rank's, expecting success. */
void shc_assign_recover(shardproc *s, const kvt_sim *sim, int idx,
			const char *recover_url);

/* shc_matches_truth compares the shard's listener for rank idx with the
 * simulator's truth; on a difference it writes it to why. */
bool shc_matches_truth(shardproc *s, const kvt_sim *sim, int idx, char *why,
		       size_t len);

/* How a listener differs from its rank's truth: (block, tier) pairs the
 * engine holds and the shard lacks (lost), the shard holds and the engine
 * does not (phantom; a block under a wrong sequence hash counts as both),
 * the block counts of each, and whether the watermarks agree. */
typedef struct shc_diff {
	size_t lost, phantom;
	size_t truth, entries;
	bool watermark_equal;
} shc_diff;

/* shc_diff_truth compares the shard's listener for rank idx with the
 * truth; false when either side could not be read. */
bool shc_diff_truth(shardproc *s, const kvt_sim *sim, int idx, shc_diff *out);

/* shc_wait_truth waits until every rank in idx[0..n) matches the truth,
 * failing the test with the last difference after timeout_ms. */
void shc_wait_truth(shardproc *s, const kvt_sim *sim, const int *idx, int n,
		    int timeout_ms);

/* shc_status_call asks for key's status (NULL: every listener's), with
 * since_digest when has_since; the response is the caller's to free. */
Kvindex__Response *shc_status_call(shardproc *s, const char *key,
				   bool has_since, uint64_t since);

/* shc_status returns the listener's status (NULL when not owned), owned by
 * *resp which the caller frees. */
Kvindex__ListenerStatus *shc_status(shardproc *s, const char *key,
				    Kvindex__Response **resp);

/* shc_metric reads one sample (name with labels, as printed) from the
 * shard's /metrics; -1 when absent. */
double shc_metric(shardproc *s, const char *sample);

/* shc_wait_metric waits until the sample reads want (figures are published
 * with each group commit, a few milliseconds behind) and returns it, or the
 * last value read after timeout_ms. */
double shc_wait_metric(shardproc *s, const char *sample, double want,
		       int timeout_ms);

#endif /* KVI_TESTS_SHARD_CHECK_H */
