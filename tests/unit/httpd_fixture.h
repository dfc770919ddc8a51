/*
 * httpd_fixture.h - what the HTTP server's tests (test_httpd.c,
 * test_httpd_threads.c, test_httpd_limits.c) share.
 *
 * The client is libcurl over loopback: do_fetch runs one request to
 * completion into a fetch (status, body, and the few response headers the
 * tests look at); easy_new and easy_done are its halves, for tests that
 * drive several requests at once through a multi handle. The server,
 * server_new, is a kvi_httpd on an ephemeral loopback port with the routes
 * every test uses: /hello, /echo (POST), /count, /q, /later (a reply 100 ms
 * later from another thread), /hold (no reply: the request is kept in hold
 * for the test to answer), /badmsg and two prefix routes under /admin/.
 * Helpers fail the running test through cmocka; handlers, which run on the
 * server's loops, never assert.
 */
#ifndef KVI_TESTS_UNIT_HTTPD_FIXTURE_H
#define KVI_TESTS_UNIT_HTTPD_FIXTURE_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpd.h"

/* ---- client ---- */

typedef struct fetch {
	CURLcode rc;
	long status;
	char *body;
	size_t len;
	char ctype[128];
	char allow[128];
	char xreply[64];
	char connection[32];
} fetch;

/* now_s returns a monotonic clock in seconds. */
double now_s(void);

void sleep_ms(int ms);

/* easy_new makes a request into f, to be run by the caller; timeout_ms
 * bounds the whole of it. body (len bytes) and hdrs may be NULL. */
CURL *easy_new(const char *method, uint16_t port, const char *path,
	       const void *body, size_t len, struct curl_slist *hdrs,
	       long timeout_ms, fetch *f);

/* easy_done sets f's status and frees c. */
void easy_done(CURL *c, fetch *f);

/* do_fetch runs one request to completion into f. */
void do_fetch(const char *method, uint16_t port, const char *path,
	      const void *body, size_t len, struct curl_slist *hdrs,
	      long timeout_ms, fetch *f);

void fetch_fini(fetch *f);

/* json_field returns the string member key of the JSON object in body, in
 * buf, or "" when absent or not a string. */
const char *json_field(const char *body, const char *key, char *buf,
		       size_t size);

/* json_int returns the integer member key of the JSON object in body, or
 * -1 when absent or not an integer. */
long long json_int(const char *body, const char *key);

/* ---- raw sockets, for what a well-behaved client would not send ---- */

/* connect_raw opens a connection to port, or returns -1 when this process
 * is out of descriptors. */
int connect_raw(uint16_t port);

/* raw_exchange sends req as it is on a new connection and reads what comes
 * back until the server closes it (or 3 s pass) into out. */
size_t raw_exchange(uint16_t port, const char *req, char *out, size_t cap);

/* count_of returns how many times needle occurs in hay. */
int count_of(const char *hay, const char *needle);

/* assert_framed checks that the reply in out carries a body of exactly
 * its Content-Length: a client reading it would otherwise fail. */
void assert_framed(const char *out);

/* ---- server ---- */

/* The requests /hold kept, in arrival order, and how many requests /count
 * served; server_new empties it. */
typedef struct holder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvi_http_req *reqs[16];
	int n;
	int calls; /* handler invocations, for the 413 test */
} holder;

extern holder hold;

/* holder_wait waits until n requests are held; false after 5 s. */
bool holder_wait(int n);

/* h_hello answers 200 "hello" (text/plain). */
void h_hello(void *arg, kvi_http_req *req);

/* reply_later answers req with status and {"from": "worker"} from a new
 * thread, after delay_ms. */
void reply_later(kvi_http_req *req, int delay_ms, int status);

/* server_new starts a server with every route above (cfg may be NULL) on
 * threads loops and an ephemeral loopback port. */
kvi_httpd *server_new(const kvi_httpd_config *cfg, int threads);

#endif /* KVI_TESTS_UNIT_HTTPD_FIXTURE_H */
