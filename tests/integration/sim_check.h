/*
 * sim_check.h - cmocka checks shared by the simulator's integration tests.
 *
 * A simproc is a running kvindex-sim (kvt_sim.h) plus the test's own
 * sockets to it: a SUB on every rank's live stream and a DEALER on every
 * replay socket. The helpers below fail the running cmocka test on any
 * deviation (status, framing, decoding), so a test reads as the sequence of
 * things it expects.
 *
 * simc_setup/simc_teardown own the ZeroMQ context and the event decoder of
 * the test program. Single-threaded, like the tests.
 */
#ifndef KVI_TESTS_SIM_CHECK_H
#define KVI_TESTS_SIM_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvitest.h"
#include "wire.h"

#define SIMC_MAX_RANKS 8
#define SIMC_BS        16  /* block size of every simulator started here */
#define SIMC_QUIET_MS  250 /* how long "nothing arrives" is watched */
#define SIMC_WAIT_MS   30000

typedef struct simproc {
	kvt_sim sim;
	kvt_zmq_link sub[SIMC_MAX_RANKS];
	kvt_zmq_link dealer[SIMC_MAX_RANKS];
} simproc;

void simc_setup(void);
void simc_teardown(void);
kvi_decoder *simc_decoder(void);
void *simc_zmq(void);

/* simc_start starts a simulator of pods x dp ranks with block size
 * SIMC_BS, automatic ports, debug logs and the extra flags
 * (NULL-terminated), and checks its layout file. */
void simc_start(simproc *s, int pods, int dp, const char *const *extra);

/* simc_connect connects a SUB and a DEALER to every rank (at most
 * SIMC_MAX_RANKS). */
void simc_connect(simproc *s);

/* simc_stop closes the sockets, stops the simulator with SIGTERM and
 * returns its exit status (under ASan a leak makes it non-zero).
 * Idempotent. */
int simc_stop(simproc *s);

/* simc_http sends a control request, releases body, checks the status and
 * returns the JSON reply (json_decref). */
json_t *simc_http(const simproc *s, const char *method, const char *path,
		  json_t *body, long expect);
/* simc_post posts body (released) and expects 200. */
void simc_post(const simproc *s, const char *path, json_t *body);
/* simc_recover GETs rank idx's /kv_recover with query ("" or "?...") and
 * checks the status. */
json_t *simc_recover(const simproc *s, int idx, const char *query, long expect);
/* simc_prefill runs tokens on a rank through POST /prefill. */
json_t *simc_prefill(const simproc *s, int pod, int rank,
		     const uint32_t *tokens, size_t n);

int simc_int(const json_t *o, const char *key);
uint64_t simc_u64(const json_t *v);
/* simc_tokens fills tok with n token ids derived from seed. */
void simc_tokens(uint32_t *tok, size_t n, uint32_t seed);

/* simc_expect_quiet checks that socket receives nothing for a while. */
void simc_expect_quiet(void *socket);
/* simc_recv_live receives one live message of rank idx, checks its framing
 * and topic, and returns its seq. */
uint64_t simc_recv_live(simproc *s, int idx, const char *topic, kvt_frames *f);
/* simc_decode_one decodes a live message holding one event of dp_rank. */
const kvi_event *simc_decode_one(const kvt_frames *f, int dp_rank,
				 kvi_batch *b);

/* simc_replay_request asks rank idx's replay socket for seqs >= start. */
void simc_replay_request(simproc *s, int idx, uint64_t start);
/* simc_recv_replay receives one replay reply, checks its shape (with or
 * without topic; the end marker never has one) and returns its seq. */
uint64_t simc_recv_replay(simproc *s, int idx, bool with_topic,
			  const char *topic, kvt_frames *f);
/* simc_expect_replay requests a replay from start and expects exactly
 * seqs[0..n) (with an empty topic) and the end marker. */
void simc_expect_replay(simproc *s, int idx, uint64_t start,
			const uint64_t *seqs, size_t n);

#endif /* KVI_TESTS_SIM_CHECK_H */
