/*
 * test_rpc_envelope.c - the rpc envelope and what is not a well-formed call:
 * the arena, packing and the version field, calls kvp_call refuses, requests
 * the shard service refuses without reaching its handler (another version,
 * garbage, no body), replies the client refuses (another version, garbage,
 * an unknown code), and services that cannot start. Over real nng sockets
 * on loopback, against the fake shard of rpc_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rpc_fixture.h"

static void
test_arena(void **state)
{
	(void)state;
	kvp_arena a;
	kvp_arena_init(&a);
	static unsigned char *blocks[2000];
	for (size_t i = 0; i < 2000; i++) {
		size_t size = i % 37 + 1;
		blocks[i] = kvp_arena_alloc(&a, size);
		assert_int_equal((uintptr_t)blocks[i] % alignof(max_align_t),
				 0);
		memset(blocks[i], (int)(i & 0xff), size);
	}
	/* no two allocations overlap */
	for (size_t i = 0; i < 2000; i++) {
		for (size_t j = 0; j < i % 37 + 1; j++) {
			assert_int_equal(blocks[i][j], i & 0xff);
		}
	}
	unsigned char *big = kvp_arena_alloc(&a, (size_t)3 << 20);
	assert_int_equal((uintptr_t)big % alignof(max_align_t), 0);
	memset(big, 0xab, (size_t)3 << 20);
	assert_ptr_not_equal(kvp_arena_alloc(&a, 0), kvp_arena_alloc(&a, 0));
	char *s = kvp_arena_strdup(&a, "listener");
	assert_string_equal(s, "listener");
	assert_null(kvp_arena_strdup(&a, NULL));

	kvp_arena_reset(&a);
	assert_non_null(a.chunks); /* one chunk kept for reuse */
	assert_int_equal(a.used, 0);
	/* calloc zeroes memory the arena used before */
	uint64_t *z = kvp_arena_calloc(&a, 512, sizeof(uint64_t));
	for (size_t i = 0; i < 512; i++) {
		assert_true(z[i] == 0);
	}
	kvp_arena_fini(&a);
	assert_null(a.chunks);
	kvp_arena_fini(&a); /* idempotent */
}

static void
test_envelope(void **state)
{
	(void)state;
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	char err[256];
	nng_msg *m;
	uint32_t v = 0;

	/* version 0 is packed as the current version; req is untouched */
	assert_int_equal(kvp_request_pack(&req, &m, err, sizeof(err)), KVI_OK);
	assert_int_equal(req.version, 0);
	assert_int_equal(
	    kvp_envelope_version(nng_msg_body(m), nng_msg_len(m), &v), KVI_OK);
	assert_int_equal(v, KVP_VERSION);
	Kvindex__Request *out = NULL;
	assert_int_equal(kvp_request_unpack(nng_msg_body(m), nng_msg_len(m),
					    NULL, &out, err, sizeof(err)),
			 KVI_OK);
	assert_string_equal(out->dump->key, "k");
	kvindex__request__free_unpacked(out, NULL);
	/* cut short: a length-delimited field overruns the end */
	assert_int_equal(
	    kvp_envelope_version(nng_msg_body(m), nng_msg_len(m) - 1, &v),
	    KVI_EPROTO);
	nng_msg_free(m);

	req.version = 7;
	assert_int_equal(kvp_request_pack(&req, &m, err, sizeof(err)), KVI_OK);
	assert_int_equal(
	    kvp_envelope_version(nng_msg_body(m), nng_msg_len(m), &v), KVI_OK);
	assert_int_equal(v, 7);
	out = NULL;
	assert_int_equal(kvp_request_unpack(nng_msg_body(m), nng_msg_len(m),
					    NULL, &out, err, sizeof(err)),
			 KVI_EVERSION);
	assert_null(out);
	assert_string_equal(
	    err, "peer speaks protocol version 7, this build speaks 1");
	nng_msg_free(m);

	assert_int_equal(kvp_envelope_version("not a protobuf", 14, &v),
			 KVI_EPROTO);
	assert_int_equal(kvp_envelope_version("", 0, &v), KVI_EPROTO);
	/* well-formed fields but no version: field 6, empty */
	assert_int_equal(kvp_envelope_version("\x32\x00", 2, &v), KVI_EPROTO);

	/* invalid requests are not packed */
	dr.key = NULL;
	assert_int_equal(kvp_request_pack(&req, &m, err, sizeof(err)),
			 KVI_EINVAL);
	assert_string_equal(err, "request lacks a required field");
	kvindex__request__init(&req);
	assert_int_equal(kvp_request_pack(&req, &m, err, sizeof(err)),
			 KVI_EINVAL);
	assert_string_equal(err, "request has no body");
}

static void
test_invalid_calls(void **state)
{
	(void)state;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	Kvindex__Response sentinel;
	Kvindex__Response *resp = &sentinel; /* kvp_call must reset it */
	char err[256];
	int before = atomic_load(&g_shard.calls);
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)),
	    KVI_EINVAL);
	assert_null(resp);
	assert_string_equal(err, "request has no body");
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	assert_int_equal(kvp_call(g_client, &req, 0, &resp, err, sizeof(err)),
			 KVI_EINVAL);
	assert_int_equal(atomic_load(&g_shard.calls), before);
}

/* A request of another version is answered EVERSION without reaching the
 * handler; garbage EPROTO; a request without a body EINVAL. */
static void
test_service_envelope_errors(void **state)
{
	(void)state;
	int before = atomic_load(&g_shard.calls);
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	req.version = 2;
	Kvindex__Response *resp = raw_call_request(g_shard.url, &req);
	assert_int_equal(resp->version, KVP_VERSION);
	assert_int_equal(resp->code, KVI_EVERSION);
	assert_string_equal(
	    resp->error, "peer speaks protocol version 2, this build speaks 1");
	kvindex__response__free_unpacked(resp, NULL);

	resp = raw_call(g_shard.url, "not a protobuf", 14);
	assert_int_equal(resp->code, KVI_EPROTO);
	assert_int_equal(strncmp(resp->error, "malformed request", 17), 0);
	kvindex__response__free_unpacked(resp, NULL);

	/* the right version, then a truncated field */
	resp = raw_call(g_shard.url, "\x08\x01\x32\x05\x0a", 5);
	assert_int_equal(resp->code, KVI_EPROTO);
	kvindex__response__free_unpacked(resp, NULL);

	kvindex__request__init(&req);
	req.version = KVP_VERSION;
	resp = raw_call_request(g_shard.url, &req);
	assert_int_equal(resp->code, KVI_EINVAL);
	kvindex__response__free_unpacked(resp, NULL);

	assert_int_equal(atomic_load(&g_shard.calls), before);
}

/* A raw rep server that answers each request with the next canned reply. */
typedef struct canned_server {
	nng_socket sock;
	const void *replies[4];
	size_t lens[4];
	int n;
	int served;
	pthread_t thread;
} canned_server;

static void *
canned_main(void *arg)
{
	canned_server *cs = arg;
	for (int i = 0; i < cs->n; i++) {
		void *buf = NULL;
		size_t len = 0;
		if (nng_recv(cs->sock, &buf, &len, NNG_FLAG_ALLOC) != 0) {
			break;
		}
		nng_free(buf, len);
		if (nng_send(cs->sock, (void *)cs->replies[i], cs->lens[i],
			     0) != 0) {
			break;
		}
		cs->served++;
	}
	return NULL;
}

static void
test_reply_version_mismatch(void **state)
{
	(void)state;
	canned_server cs = {0};
	uint8_t v2[64], unknown[64];
	Kvindex__Response r = KVINDEX__RESPONSE__INIT;
	r.version = 2;
	cs.replies[0] = v2;
	cs.lens[0] = kvindex__response__pack(&r, v2);
	cs.replies[1] = "\xff\xff";
	cs.lens[1] = 2;
	r.version = KVP_VERSION;
	r.code = 999;
	r.error = "from the future";
	cs.replies[2] = unknown;
	cs.lens[2] = kvindex__response__pack(&r, unknown);
	cs.n = 3;

	nng_listener l;
	assert_int_equal(nng_rep0_open(&cs.sock), 0);
	assert_int_equal(nng_socket_set_ms(cs.sock, NNG_OPT_RECVTIMEO, 5000),
			 0);
	assert_int_equal(nng_listen(cs.sock, "tcp://127.0.0.1:0", &l, 0), 0);
	int port = 0;
	assert_int_equal(nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port),
			 0);
	assert_int_equal(pthread_create(&cs.thread, NULL, canned_main, &cs), 0);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	kvp_client *c;
	assert_int_equal(kvp_client_open(url, &c), KVI_OK);

	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	Kvindex__Response sentinel;
	Kvindex__Response *resp = &sentinel; /* kvp_call must reset it */
	char err[256];
	assert_int_equal(kvp_call(c, &req, 3000, &resp, err, sizeof(err)),
			 KVI_EVERSION);
	assert_null(resp);
	assert_string_equal(
	    err, "peer speaks protocol version 2, this build speaks 1");

	assert_int_equal(kvp_call(c, &req, 3000, &resp, err, sizeof(err)),
			 KVI_EPROTO);
	assert_null(resp);
	assert_string_equal(err, "malformed response (2 bytes)");

	assert_int_equal(kvp_call(c, &req, 3000, &resp, err, sizeof(err)),
			 KVI_EPROTO);
	assert_non_null(resp);
	assert_int_equal(resp->code, 999);
	assert_non_null(strstr(err, "unknown error code 999: from the future"));
	kvindex__response__free_unpacked(resp, NULL);

	pthread_join(cs.thread, NULL);
	assert_int_equal(cs.served, 3);
	kvp_client_close(c);
	nng_close(cs.sock);
}

static void
test_start_errors(void **state)
{
	(void)state;
	kvn_service *svc = NULL;
	char err[256];
	assert_int_equal(kvn_service_open_url("bogus://nowhere", 1,
					      fake_handler, NULL, &svc, err,
					      sizeof(err)),
			 KVI_EINVAL);
	assert_int_equal(kvn_service_open_url("tcp://127.0.0.1:0", 0,
					      fake_handler, NULL, &svc, err,
					      sizeof(err)),
			 KVI_EINVAL);
	/* the address is taken by the group's shard */
	err[0] = '\0';
	assert_int_equal(kvn_service_open_url(g_shard.url, 1, fake_handler,
					      NULL, &svc, err, sizeof(err)),
			 KVI_EIO);
	assert_non_null(strstr(err, g_shard.url));
	assert_null(svc);
	kvp_client *c = NULL;
	assert_int_equal(kvp_client_open("bogus://nowhere", &c), KVI_EINVAL);
	assert_null(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arena),
	    cmocka_unit_test(test_envelope),
	    cmocka_unit_test(test_invalid_calls),
	    cmocka_unit_test(test_service_envelope_errors),
	    cmocka_unit_test(test_reply_version_mismatch),
	    cmocka_unit_test(test_start_errors),
	};
	int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
	nng_fini();
	return failed;
}
