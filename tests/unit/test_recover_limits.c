/*
 * test_recover_limits.c - what keeps a /kv_recover endpoint from holding
 * the fetcher's slots or the shard's memory (recover_fetch.h), against the
 * test's own server (fetch_fixture.h): the first-byte deadline ends a
 * fetch that was never answered and the idle deadline one that stopped
 * half-way, while a slow answer that keeps flowing completes; so endpoints
 * that never answer hold every slot only that long; connecting has its
 * deadline too; a 200 that is not JSON is refused, with or without a
 * body, and JSON with parameters or without a Content-Type is taken; an
 * answer storing more blocks than asked is cut off.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch_fixture.h"

#define SHORT_MS 300

/* fetch_one fetches path with short deadlines and max_blocks, and returns
 * the result (which the caller frees) and how long it took. */
static kvr_result *
fetch_one(const char *path, uint64_t max_blocks, int64_t *took)
{
	kvr_fetcher *f = start_opts((kvr_fetch_opts){
	    .max_concurrent = 1,
	    .timeout_ms = 20000,
	    .connect_ms = SHORT_MS,
	    .first_byte_ms = SHORT_MS,
	    .idle_ms = SHORT_MS,
	});
	int64_t t0 = now_ms();
	submit_max(f, 1, path, max_blocks);
	kvr_result *r = wait_result(f, 10000);
	*took = now_ms() - t0;
	kvr_fetcher_free(f);
	assert_non_null(r);
	return r;
}

static void
expect(kvr_result *r, kvi_err err, const char *msg)
{
	if (r->err != err || strstr(r->message, msg) == NULL) {
		fail_msg("got %s \"%s\", want %s \"%s\"", kvi_strerror(r->err),
			 r->message, kvi_strerror(err), msg);
	}
}

static void
test_deadlines(void **state)
{
	(void)state;
	int64_t took;
	/* never answered: the first-byte deadline, not the whole one */
	kvr_result *r = fetch_one("/hang", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_ETIMEDOUT, "no answer within 300 ms of the request");
	assert_true(took >= SHORT_MS - 20 && took < 3000);
	kvr_result_free(r);
	/* answered, then silent: the idle deadline */
	r = fetch_one("/stall", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_ETIMEDOUT, "nothing received for 300 ms, after 11 bytes");
	assert_int_equal(r->http_status, 200);
	assert_true(took >= SHORT_MS - 20 && took < 3000);
	kvr_result_free(r);
	/* slow but flowing: 100 ms between pieces, for over a second */
	r = fetch_one("/drip", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_OK, "");
	assert_true(took > 1000);
	assert_int_equal(kvr_parser_result(r->parser)->n_events, 2);
	kvr_result_free(r);
}

/* Four endpoints that never answer, in every slot, ahead of a good one:
 * the good one waits for the first-byte deadline, not the whole one. */
static void
test_hanging_endpoints_do_not_starve(void **state)
{
	(void)state;
	kvr_fetcher *f = start_opts((kvr_fetch_opts){
	    .max_concurrent = 4, .timeout_ms = 60000, .first_byte_ms = 500});
	int64_t t0 = now_ms();
	for (int i = 0; i < 4; i++) {
		submit(f, (uint64_t)i, "/hang");
	}
	submit(f, 9, "/dump");
	int64_t dump_ms = -1;
	for (int i = 0; i < 5; i++) {
		kvr_result *r = wait_result(f, 10000);
		assert_non_null(r);
		if (r->token == 9) {
			assert_int_equal(r->err, KVI_OK);
			dump_ms = now_ms() - t0;
		} else {
			assert_int_equal(r->err, KVI_ETIMEDOUT);
		}
		kvr_result_free(r);
	}
	assert_true(dump_ms >= 480 && dump_ms < 3000);
	kvr_fetcher_free(f);
}

/* A listener that accepts nothing: its queue of one taken by a
 * connection nobody accepts, the next connect waits for the deadline. */
static void
test_connect_deadline(void **state)
{
	(void)state;
	int port;
	int lfd = loopback_socket(&port);
	assert_int_equal(listen(lfd, 0), 0);
	int fill[4];
	for (int i = 0; i < 4; i++) { /* the queue is full after one */
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)port),
					.sin_addr.s_addr = htonl(0x7f000001)};
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	usleep(50000);
	kvr_fetcher *f = start_opts((kvr_fetch_opts){
	    .max_concurrent = 1, .timeout_ms = 20000, .connect_ms = SHORT_MS});
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/kv_recover", port);
	int64_t t0 = now_ms();
	assert_int_equal(kvr_fetcher_submit(f, 1, url, KVR_FETCH_BLOCKS_ANY),
			 KVI_OK);
	kvr_result *r = wait_result(f, 10000);
	int64_t took = now_ms() - t0;
	assert_non_null(r);
	expect(r, KVI_ETIMEDOUT, "onnect");
	assert_int_equal(r->http_status, 0);
	assert_true(took >= SHORT_MS - 20 && took < 3000);
	kvr_result_free(r);
	kvr_fetcher_free(f);
	for (int i = 0; i < 4; i++) {
		close(fill[i]);
	}
	close(lfd);
}

static void
test_content_type(void **state)
{
	(void)state;
	int64_t took;
	kvr_result *r = fetch_one("/html", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_EPROTO, "Content-Type text/html, not application/json");
	assert_null(r->parser);
	kvr_result_free(r);
	r = fetch_one("/html-empty", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_EPROTO, "Content-Type text/html; charset=utf-8");
	kvr_result_free(r);
	r = fetch_one("/jsonx", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_EPROTO, "Content-Type application/jsonx");
	kvr_result_free(r);
	/* JSON with a parameter, in any case; no Content-Type at all */
	r = fetch_one("/charset", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_OK, "");
	kvr_result_free(r);
	r = fetch_one("/notype", KVR_FETCH_BLOCKS_ANY, &took);
	expect(r, KVI_OK, "");
	assert_int_equal(kvr_parser_result(r->parser)->n_blocks, 2);
	kvr_result_free(r);
}

static void
test_max_blocks(void **state)
{
	(void)state;
	int64_t took;
	kvr_result *r = fetch_one("/dump", 1, &took);
	expect(r, KVI_ETOOBIG, "the answer stores more than 1 blocks");
	assert_null(r->parser);
	assert_int_equal(r->blocks, 2);
	kvr_result_free(r);
	r = fetch_one("/dump", 2, &took);
	expect(r, KVI_OK, "");
	assert_int_equal(r->blocks, 2);
	kvr_result_free(r);
	/* Events count too */
	r = fetch_one("/events", 0, &took);
	expect(r, KVI_ETOOBIG, "more than 0 blocks");
	kvr_result_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_deadlines, setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_hanging_endpoints_do_not_starve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect_deadline, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_content_type, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_max_blocks, setup, teardown),
	};
	return cmocka_run_group_tests(tests, srv_start, srv_stop);
}
