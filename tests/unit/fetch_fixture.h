/*
 * fetch_fixture.h - what the /kv_recover fetcher's tests
 * (test_recover_fetch.c, test_recover_limits.c) share: a small HTTP server
 * on an ephemeral loopback port, a thread per connection, that answers by
 * path, and the owner's side of a fetcher.
 *
 * The server's paths: /events (BODY_EVENTS chunked, 8 bytes at a time,
 * 2 ms apart), /dump (BODY_DUMP), /fail (a 500 with a body), /missing (a
 * long 404), /bad (a 200 cut inside the JSON), /slow... (BODY_EVENTS after
 * SLOW_MS, counting how many at once), /hang (accepts, never answers),
 * /stall (a head and a few body bytes, then nothing), /drip (BODY_DUMP 20
 * bytes at a time, 100 ms apart), /html, /html-empty, /jsonx, /charset and
 * /notype (BODY_DUMP, or nothing, under those Content-Types or none).
 * setup and teardown (cmocka, per test) make the pipe the fetcher's
 * notify writes to and forget the counts of the test before; srv_start
 * and srv_stop (per group) run the server. Helpers fail the running test
 * through cmocka.
 */
#ifndef KVI_TESTS_UNIT_FETCH_FIXTURE_H
#define KVI_TESTS_UNIT_FETCH_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "recover_fetch.h"

#define SRV_MAX_CONNS 64
#define SLOW_MS       300

#define BODY_EVENTS                                                            \
	"{\"Events\": {\"events\": ["                                          \
	"{\"worker_id\": 7, \"storage_tier\": \"Device\", \"event\": "         \
	"{\"event_id\": 42, \"dp_rank\": 1, \"data\": {\"stored\": "           \
	"{\"parent_hash\": 123, \"blocks\": [{\"block_hash\": 456, "           \
	"\"tokens_hash\": 789}]}}}}, "                                         \
	"{\"worker_id\": 7, \"event\": {\"event_id\": 43, \"data\": "          \
	"{\"removed\": {\"block_hashes\": [18446744073709551615]}}}}, "        \
	"{\"worker_id\": 7, \"event\": {\"event_id\": 44, \"data\": "          \
	"\"cleared\"}}], \"last_event_id\": 44}}"

#define BODY_DUMP                                                              \
	"{\"TreeDump\": {\"events\": [{\"event\": {\"event_id\": 0, "          \
	"\"data\": {\"stored\": {\"parent_hash\": null, \"blocks\": "          \
	"[{\"block_hash\": 1, \"tokens_hash\": 11}]}}}}, {\"event\": "         \
	"{\"event_id\": 1, \"data\": {\"stored\": {\"parent_hash\": 1, "       \
	"\"blocks\": [{\"block_hash\": 2, \"tokens_hash\": 22}]}}}}], "        \
	"\"last_event_id\": 9}}"

/* ---- the server ------------------------------------------------------ */

typedef struct srv {
	int lfd;
	int port;
	int stop[2]; /* readable once the server stops */
	pthread_t acceptor;
	pthread_mutex_t mu;
	/* under mu */
	pthread_t conns[SRV_MAX_CONNS];
	int n_conns;
	int open; /* connections open now */
	/* /slow requests being answered; counted from the request to just
	 * before the reply, so a connection still closing after its reply
	 * is not counted as in flight */
	int busy, max_busy;
	int chunks; /* chunks of /events written */
	char paths[SRV_MAX_CONNS][64];
	int n_paths;
} srv;

typedef struct conn {
	srv *s;
	int fd;
} conn;

extern srv server;
extern int wake[2]; /* notify writes, the test waits */

int srv_start(void **state);
int srv_stop(void **state);
/* srv_saw says whether the server was asked for path. */
bool srv_saw(const char *path);
/* loopback_socket returns a socket bound to an ephemeral loopback port. */
int loopback_socket(int *port);

int setup(void **state);
int teardown(void **state);
void on_notify(void *arg);
int64_t now_ms(void);
/* wait_result pops the next result, waiting up to ms for one. */
kvr_result *wait_result(kvr_fetcher *f, int ms);
/* start starts a fetcher that notifies wake; start_opts with o. */
kvr_fetcher *start(int max_concurrent, long timeout_ms);
kvr_fetcher *start_opts(kvr_fetch_opts o);
/* submit fetches path of the server as token; submit_max refuses an
 * answer storing more than max_blocks blocks. */
void submit(kvr_fetcher *f, uint64_t token, const char *path);
void submit_max(kvr_fetcher *f, uint64_t token, const char *path,
		uint64_t max_blocks);

#endif /* KVI_TESTS_UNIT_FETCH_FIXTURE_H */
