/*
 * test_httpd_threads.c - the HTTP server over real loopback sockets, with
 * libcurl as the client, where threads meet: concurrency over two loops
 * with replies from a worker thread, clients that leave before their
 * reply, and stopping with requests in flight - replies racing the stop,
 * a drain that waits for them and one that gives up. The client and the
 * server's routes are in httpd_fixture.h.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "httpd_fixture.h"

/* A worker that answers queued requests: half of the concurrent test's
 * replies cross threads. */
typedef struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kvi_http_req *q[256];
	int n;
	bool quit;
} worker;

static worker work = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *
worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&work.mu);
	for (;;) {
		while (work.n == 0 && !work.quit) {
			pthread_cond_wait(&work.cv, &work.mu);
		}
		if (work.n == 0 && work.quit) {
			break;
		}
		kvi_http_req *req = work.q[--work.n];
		pthread_mutex_unlock(&work.mu);
		const char *id = kvi_http_req_query(req, "id");
		kvi_http_reply_json(
		    req, 200, json_pack("{s:s,s:s}", "id", id, "by", "worker"));
		pthread_mutex_lock(&work.mu);
	}
	pthread_mutex_unlock(&work.mu);
	return NULL;
}

typedef struct loop_seen {
	pthread_mutex_t mu;
	pthread_t threads[4];
	int counts[4];
	int n;
} loop_seen;

static loop_seen seen = {PTHREAD_MUTEX_INITIALIZER};

static void
h_mixed(void *arg, kvi_http_req *req)
{
	(void)arg;
	pthread_mutex_lock(&seen.mu);
	int i = 0;
	while (i < seen.n && !pthread_equal(seen.threads[i], pthread_self())) {
		i++;
	}
	if (i == seen.n && seen.n < 4) {
		seen.threads[seen.n++] = pthread_self();
	}
	if (i < 4) {
		seen.counts[i]++;
	}
	pthread_mutex_unlock(&seen.mu);
	const char *id = kvi_http_req_query(req, "id");
	if (id != NULL && atoi(id) % 2 == 0) {
		kvi_http_reply_json(
		    req, 200, json_pack("{s:s,s:s}", "id", id, "by", "loop"));
		return;
	}
	pthread_mutex_lock(&work.mu);
	work.q[work.n++] = req;
	pthread_cond_signal(&work.cv);
	pthread_mutex_unlock(&work.mu);
}

#define CONCURRENT 200

static void
test_two_loops_concurrent(void **state)
{
	(void)state;
	kvi_httpd *h = kvi_httpd_alloc(NULL);
	assert_int_equal(kvi_httpd_route(h, "GET", "/mixed", h_mixed, NULL),
			 KVI_OK);
	assert_int_equal(kvi_httpd_start(h, "127.0.0.1:0", 2, NULL, 0), KVI_OK);
	pthread_t wt;
	work.quit = false;
	assert_int_equal(pthread_create(&wt, NULL, worker_main, NULL), 0);

	CURLM *m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)CONCURRENT);
	static fetch f[CONCURRENT];
	CURL *e[CONCURRENT];
	for (int i = 0; i < CONCURRENT; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/mixed?id=%d", i);
		e[i] = easy_new("GET", kvi_httpd_port(h), path, NULL, 0, NULL,
				10000, &f[i]);
		curl_multi_add_handle(m, e[i]);
	}
	int running = 1;
	while (running > 0) {
		curl_multi_perform(m, &running);
		curl_multi_poll(m, NULL, 0, 50, NULL);
	}
	int ok = 0;
	for (int i = 0; i < CONCURRENT; i++) {
		curl_multi_remove_handle(m, e[i]);
		easy_done(e[i], &f[i]);
		char id[16], want[16], by[16];
		snprintf(want, sizeof(want), "%d", i);
		json_field(f[i].body, "id", id, sizeof(id));
		json_field(f[i].body, "by", by, sizeof(by));
		if (f[i].status == 200 && strcmp(id, want) == 0 &&
		    strcmp(by, i % 2 ? "worker" : "loop") == 0) {
			ok++;
		}
		fetch_fini(&f[i]);
	}
	curl_multi_cleanup(m);
	assert_int_equal(ok, CONCURRENT);
	pthread_mutex_lock(&seen.mu);
	int total = 0;
	for (int i = 0; i < seen.n; i++) {
		total += seen.counts[i];
	}
	print_message("requests per loop thread: %d / %d\n", seen.counts[0],
		      seen.n > 1 ? seen.counts[1] : 0);
	assert_int_equal(total, CONCURRENT);
	assert_true(seen.n <= 2);
	pthread_mutex_unlock(&seen.mu);

	pthread_mutex_lock(&work.mu);
	work.quit = true;
	pthread_cond_signal(&work.cv);
	pthread_mutex_unlock(&work.mu);
	pthread_join(wt, NULL);
	kvi_httpd_free(h);
}

static void
test_client_gone_before_reply(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	fetch f;
	/* the client gives up after 200 ms and closes its connection */
	do_fetch("GET", kvi_httpd_port(h), "/hold", NULL, 0, NULL, 200, &f);
	assert_int_equal(f.rc, CURLE_OPERATION_TIMEDOUT);
	fetch_fini(&f);
	assert_true(holder_wait(1));
	kvi_http_req *req = hold.reqs[0];
	/* the request is still readable, then answered into the void */
	assert_string_equal(kvi_http_req_path(req), "/hold");
	kvi_http_reply_error(req, 500, "too late for %s", "you");
	sleep_ms(50);

	/* the same with the reply made on another thread, twice over */
	do_fetch("GET", kvi_httpd_port(h), "/hold", NULL, 0, NULL, 200, &f);
	assert_int_equal(f.rc, CURLE_OPERATION_TIMEDOUT);
	fetch_fini(&f);
	assert_true(holder_wait(2));
	reply_later(hold.reqs[1], 10, 200);
	sleep_ms(100);

	/* the server is unharmed */
	do_fetch("GET", kvi_httpd_port(h), "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	fetch_fini(&f);
	kvi_httpd_free(h);
}

/* The client side of the stop tests: n requests to /hold at once. */
typedef struct volley {
	uint16_t port;
	int n;
	fetch f[8];
	double took;
} volley;

static void *
volley_main(void *arg)
{
	volley *v = arg;
	CURLM *m = curl_multi_init();
	CURL *e[8];
	double t0 = now_s();
	for (int i = 0; i < v->n; i++) {
		e[i] = easy_new("GET", v->port, "/hold", NULL, 0, NULL, 10000,
				&v->f[i]);
		curl_multi_add_handle(m, e[i]);
	}
	int running = 1;
	while (running > 0) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg == CURLMSG_DONE) {
				fetch *f;
				curl_easy_getinfo(msg->easy_handle,
						  CURLINFO_PRIVATE, &f);
				f->rc = msg->data.result;
			}
		}
		curl_multi_poll(m, NULL, 0, 20, NULL);
	}
	v->took = now_s() - t0;
	for (int i = 0; i < v->n; i++) {
		curl_multi_remove_handle(m, e[i]);
		easy_done(e[i], &v->f[i]);
	}
	curl_multi_cleanup(m);
	return NULL;
}

static void *
reply_main(void *arg)
{
	kvi_http_reply(arg, 200, "text/plain", "orphan", 6);
	return NULL;
}

static void
test_stop_in_flight(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 2);
	volley v = {.port = kvi_httpd_port(h), .n = 5};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(5));

	double t0 = now_s();
	kvi_httpd_stop(h);
	assert_true(now_s() - t0 < 1.0);
	pthread_join(ct, NULL);
	/* every client saw its connection closed, none waited for a timeout */
	assert_true(v.took < 5.0);
	for (int i = 0; i < 5; i++) {
		assert_true(v.f[i].rc != CURLE_OK);
		assert_true(v.f[i].rc != CURLE_OPERATION_TIMEDOUT);
		fetch_fini(&v.f[i]);
	}
	/* orphans: still readable, replies dropped, before and after free */
	assert_string_equal(kvi_http_req_method(hold.reqs[0]), "GET");
	kvi_http_reply(hold.reqs[0], 200, "text/plain", "x", 1);
	kvi_http_reply_error(hold.reqs[1], 503, "stopped");
	kvi_httpd_stop(h);
	kvi_httpd_free(h);
	assert_string_equal(kvi_http_req_path(hold.reqs[2]), "/hold");
	kvi_http_reply_json(hold.reqs[2], 200, json_true());
	pthread_t rt;
	assert_int_equal(pthread_create(&rt, NULL, reply_main, hold.reqs[3]),
			 0);
	pthread_join(rt, NULL);
	kvi_http_reply(hold.reqs[4], 200, NULL, NULL, 0);
}

typedef struct replier {
	kvi_http_req **reqs;
	int n;
} replier;

static void *
replier_main(void *arg)
{
	replier *r = arg;
	for (int i = 0; i < r->n; i++) {
		kvi_http_reply(r->reqs[i], 200, "text/plain", "race", 4);
		if (i % 2) {
			sleep_ms(1);
		}
	}
	return NULL;
}

static void
test_stop_races_replies(void **state)
{
	(void)state;
	/* replies land before, during and after the loops close: sent,
	 * queued and dropped, or orphaned; none may leak or crash */
	for (int round = 0; round < 5; round++) {
		kvi_httpd *h = server_new(NULL, 2);
		volley v = {.port = kvi_httpd_port(h), .n = 8};
		pthread_t ct, rt;
		assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
		assert_true(holder_wait(8));
		replier r = {hold.reqs, 8};
		assert_int_equal(pthread_create(&rt, NULL, replier_main, &r),
				 0);
		sleep_ms(round);
		kvi_httpd_stop(h);
		pthread_join(rt, NULL);
		pthread_join(ct, NULL);
		int answered = 0;
		for (int i = 0; i < 8; i++) {
			if (v.f[i].rc == CURLE_OK) {
				assert_int_equal(v.f[i].status, 200);
				assert_string_equal(v.f[i].body, "race");
				answered++;
			}
			fetch_fini(&v.f[i]);
		}
		assert_true(v.took < 5.0);
		print_message("round %d: %d of 8 answered before stop\n", round,
			      answered);
		kvi_httpd_free(h);
	}
}

static void
test_stop_drains(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.drain_ms = 3000};
	kvi_httpd *h = server_new(&cfg, 1);
	volley v = {.port = kvi_httpd_port(h), .n = 1};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(1));
	reply_later(hold.reqs[0], 150, 200);

	double t0 = now_s();
	kvi_httpd_stop(h);
	double dt = now_s() - t0;
	pthread_join(ct, NULL);
	/* stop waited for the deferred reply (the client has it, below),
	 * and not for the whole drain */
	assert_true(dt < 2.0);
	assert_int_equal(v.f[0].rc, CURLE_OK);
	assert_int_equal(v.f[0].status, 200);
	assert_string_equal(v.f[0].connection, "close");
	char buf[32];
	assert_string_equal(json_field(v.f[0].body, "from", buf, sizeof(buf)),
			    "worker");
	fetch_fini(&v.f[0]);

	/* nothing listens any more */
	fetch f;
	do_fetch("GET", v.port, "/hello", NULL, 0, NULL, 2000, &f);
	assert_int_equal(f.rc, CURLE_COULDNT_CONNECT);
	fetch_fini(&f);
	kvi_httpd_free(h);
}

static void
test_drain_deadline(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.drain_ms = 200};
	kvi_httpd *h = server_new(&cfg, 1);
	volley v = {.port = kvi_httpd_port(h), .n = 1};
	pthread_t ct;
	assert_int_equal(pthread_create(&ct, NULL, volley_main, &v), 0);
	assert_true(holder_wait(1));
	double t0 = now_s();
	kvi_httpd_stop(h);
	double dt = now_s() - t0;
	pthread_join(ct, NULL);
	/* nobody answered: stop gave up after drain_ms */
	assert_true(dt >= 0.19);
	assert_true(dt < 1.5);
	assert_true(v.f[0].rc != CURLE_OK);
	fetch_fini(&v.f[0]);
	kvi_httpd_free(h);
	kvi_http_reply(hold.reqs[0], 200, NULL, NULL, 0);
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_loops_concurrent),
	    cmocka_unit_test(test_client_gone_before_reply),
	    cmocka_unit_test(test_stop_in_flight),
	    cmocka_unit_test(test_stop_races_replies),
	    cmocka_unit_test(test_stop_drains),
	    cmocka_unit_test(test_drain_deadline),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
