/*
 * test_recover_fetch.c - the /kv_recover fetcher against a small HTTP
 * server that runs in the test, on an ephemeral loopback port
 * (fetch_fixture.h): a chunked Events body sent in small pieces, a
 * TreeDump, a 500 and a long 404 with bodies, a malformed 200, a slow
 * answer and no answer at all, with at most so many at once; a closed
 * port covers refused connections. Deadlines and refusals are
 * test_recover_limits.c.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch_fixture.h"

/* ---- tests ----------------------------------------------------------- */

static void
test_events_chunked(void **state)
{
	(void)state;
	kvr_fetcher *f = start(4, 10000);
	submit(f, 11, "/events");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 11);
	if (r->err != KVI_OK) {
		fail_msg("fetch failed: %s", r->message);
	}
	assert_int_equal(r->http_status, 200);
	assert_string_equal(r->message, "");
	assert_int_equal(r->body_bytes, strlen(BODY_EVENTS));
	const kvr_response *resp = kvr_parser_result(r->parser);
	assert_non_null(resp);
	assert_int_equal(resp->kind, KVR_KIND_EVENTS);
	assert_int_equal(resp->last_event_id, 44);
	assert_int_equal(resp->n_events, 3);
	assert_int_equal(resp->events[0].blocks[0].tokens_hash, 789);
	assert_true(resp->events[1].block_hashes[0] == UINT64_MAX);
	assert_int_equal(resp->events[2].type, KVI_EVENT_CLEARED);
	/* it did arrive in many pieces */
	pthread_mutex_lock(&server.mu);
	int chunks = server.chunks;
	pthread_mutex_unlock(&server.mu);
	assert_true(chunks > 20);
	kvr_result_free(r);
	assert_null(kvr_fetcher_pop(f));
	kvr_fetcher_free(f);
}

static void
test_tree_dump(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 0);
	submit(f, 5, "/dump");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 5);
	assert_int_equal(r->err, KVI_OK);
	const kvr_response *resp = kvr_parser_result(r->parser);
	assert_int_equal(resp->kind, KVR_KIND_TREE_DUMP);
	assert_int_equal(resp->n_events, 2);
	assert_int_equal(resp->last_event_id, 9);
	assert_int_equal(resp->events[1].blocks[0].tokens_hash, 22);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_http_errors(void **state)
{
	(void)state;
	kvr_fetcher *f = start(4, 10000);
	submit(f, 1, "/fail");
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EIO);
	assert_int_equal(r->http_status, 500);
	assert_null(r->parser);
	assert_string_equal(r->message,
			    "HTTP 500: engine exploded: replay buffer gone");
	kvr_result_free(r);

	/* a long error page is cut to a snippet */
	submit(f, 2, "/missing");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_ENOENT);
	assert_int_equal(r->http_status, 404);
	assert_int_equal(strncmp(r->message, "HTTP 404: no such route", 23), 0);
	assert_int_equal(strlen(r->message),
			 strlen("HTTP 404: ") + KVR_FETCH_SNIPPET_MAX);
	kvr_result_free(r);

	/* a 200 whose body is not a complete document */
	submit(f, 3, "/bad");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EPROTO);
	assert_int_equal(r->http_status, 200);
	assert_null(r->parser);
	assert_string_equal(r->message,
			    "body: byte 23: Events.events[0]: body ends before "
			    "the JSON value does");
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_timeout(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 500);
	int64_t t0 = now_ms();
	submit(f, 9, "/hang");
	kvr_result *r = wait_result(f, 10000);
	int64_t took = now_ms() - t0;
	assert_non_null(r);
	assert_int_equal(r->token, 9);
	assert_int_equal(r->err, KVI_ETIMEDOUT);
	assert_null(r->parser);
	assert_true(r->message[0] != '\0');
	assert_true(took >= 450 && took < 5000);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_unreachable(void **state)
{
	(void)state;
	int port;
	int fd = loopback_socket(&port); /* bound, not listening: refused */
	kvr_fetcher *f = start(1, 10000);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/kv_recover", port);
	assert_int_equal(kvr_fetcher_submit(f, 4, url, KVR_FETCH_BLOCKS_ANY),
			 KVI_OK);
	kvr_result *r = wait_result(f, 10000);
	close(fd);
	assert_non_null(r);
	assert_int_equal(r->token, 4);
	assert_int_equal(r->err, KVI_EUNREACHABLE);
	assert_int_equal(r->http_status, 0);
	assert_true(r->message[0] != '\0');
	kvr_result_free(r);

	/* a scheme other than http(s) is refused */
	assert_int_equal(kvr_fetcher_submit(f, 6, "file:///etc/hostname",
					    KVR_FETCH_BLOCKS_ANY),
			 KVI_OK);
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->err, KVI_EINVAL);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_bounded_concurrency(void **state)
{
	(void)state;
	kvr_fetcher *f = start(2, 10000);
	for (int i = 0; i < 5; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/slow?%d", i);
		submit(f, (uint64_t)i, path);
	}
	unsigned seen = 0;
	for (int i = 0; i < 5; i++) {
		kvr_result *r = wait_result(f, 10000);
		assert_non_null(r);
		if (r->err != KVI_OK) {
			fail_msg("fetch %d failed: %s", (int)r->token,
				 r->message);
		}
		assert_true(r->token < 5);
		assert_false(seen & (1u << r->token));
		seen |= 1u << r->token;
		kvr_result_free(r);
	}
	assert_int_equal(seen, 0x1f);
	/* never more than two at once, as the server counted them (each
	 * held SLOW_MS), and two at some point */
	pthread_mutex_lock(&server.mu);
	int max_busy = server.max_busy;
	pthread_mutex_unlock(&server.mu);
	assert_int_equal(max_busy, 2);
	kvr_fetcher_free(f);
}

static void
test_cancel(void **state)
{
	(void)state;
	kvr_fetcher *f = start(1, 10000);
	submit(f, 7, "/slow?7"); /* runs */
	submit(f, 8, "/slow?8"); /* waits */
	submit(f, 9, "/slow?9"); /* waits */
	for (int i = 0; i < 500 && !srv_saw("/slow?7"); i++) {
		usleep(2000);
	}
	assert_true(srv_saw("/slow?7"));
	/* the waiting one first: aborting 7 frees its slot for the next */
	kvr_fetcher_cancel(f, 8); /* forgets a waiting one */
	kvr_fetcher_cancel(f, 7); /* aborts a running fetch */
	kvr_result *r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 9);
	assert_int_equal(r->err, KVI_OK);
	kvr_result_free(r);
	assert_null(wait_result(f, SLOW_MS + 200));
	assert_false(srv_saw("/slow?8"));

	/* a queued result is dropped too; a later fetch with the same
	 * token is not */
	submit(f, 10, "/dump");
	for (int i = 0; i < 500; i++) {
		struct pollfd pfd = {.fd = wake[0], .events = POLLIN};
		if (poll(&pfd, 1, 20) > 0) {
			break;
		}
	}
	kvr_fetcher_cancel(f, 10);
	assert_null(kvr_fetcher_pop(f));
	submit(f, 10, "/dump");
	r = wait_result(f, 10000);
	assert_non_null(r);
	assert_int_equal(r->token, 10);
	assert_int_equal(r->err, KVI_OK);
	kvr_result_free(r);
	kvr_fetcher_free(f);
}

static void
test_stop(void **state)
{
	(void)state;
	kvr_fetcher *f = start(2, 60000);
	submit(f, 1, "/hang");
	submit(f, 2, "/hang");
	submit(f, 3, "/hang"); /* waiting */
	submit(f, 4, "/dump");
	for (int i = 0; i < 500 && !srv_saw("/hang"); i++) {
		usleep(2000);
	}
	int64_t t0 = now_ms();
	kvr_fetcher_stop(f);
	assert_true(now_ms() - t0 < 3000); /* running fetches are aborted */
	kvr_fetcher_stop(f);
	assert_null(kvr_fetcher_pop(f));
	assert_int_equal(kvr_fetcher_submit(f, 5, "http://127.0.0.1:1/",
					    KVR_FETCH_BLOCKS_ANY),
			 KVI_ECLOSED);
	kvr_fetcher_cancel(f, 1);
	kvr_fetcher_free(f);
	kvr_fetcher_free(NULL);
	kvr_result_free(NULL);
}

static void
test_bad_args(void **state)
{
	(void)state;
	kvr_fetcher *f = (kvr_fetcher *)&f;
	assert_int_equal(kvr_fetcher_open(NULL, &f), KVI_EINVAL);
	kvr_fetch_opts o = {.max_concurrent = -1};
	assert_int_equal(kvr_fetcher_open(&o, &f), KVI_EINVAL);
	o = (kvr_fetch_opts){.timeout_ms = -1};
	assert_int_equal(kvr_fetcher_open(&o, &f), KVI_EINVAL);
	o = (kvr_fetch_opts){.idle_ms = -1};
	assert_int_equal(kvr_fetcher_open(&o, &f), KVI_EINVAL);
	assert_true(f == (kvr_fetcher *)&f); /* untouched on failure */
	f = start(1, 1000);
	assert_int_equal(kvr_fetcher_submit(f, 1, "", KVR_FETCH_BLOCKS_ANY),
			 KVI_EINVAL);
	assert_int_equal(kvr_fetcher_submit(f, 1, NULL, KVR_FETCH_BLOCKS_ANY),
			 KVI_EINVAL);
	kvr_fetcher_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_events_chunked, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_tree_dump, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounded_concurrency, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
	};
	return cmocka_run_group_tests(tests, srv_start, srv_stop);
}
