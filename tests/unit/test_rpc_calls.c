/*
 * test_rpc_calls.c - calls from a client to a shard service and back: every
 * kind of request and response round-trips through kvp_call with all its
 * fields (u64 values past 2^63 included), the handler's errors reach the
 * caller with their messages, an invalid response is caught, and the
 * service counts what it served. Over real nng sockets on loopback, against
 * the fake shard of rpc_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>

#include "rpc_fixture.h"

static void
test_roundtrip_assign(void **state)
{
	(void)state;
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "ns/pod-a#65535");
	Kvindex__Response *resp = NULL;
	char err[256];
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)), KVI_OK);
	assert_string_equal(err, "");
	assert_non_null(resp);
	assert_int_equal(resp->version, KVP_VERSION);
	assert_int_equal(resp->code, 0);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY_ASSIGN);
	assert_true(resp->assign->has_existed);
	assert_false(resp->assign->existed);
	kvindex__response__free_unpacked(resp, NULL);

	Kvindex__Request *got = fake_last(&g_shard);
	assert_int_equal(got->version, KVP_VERSION);
	assert_int_equal(got->body_case, KVINDEX__REQUEST__BODY_ASSIGN);
	const Kvindex__Listener *gl = got->assign->listener;
	assert_string_equal(gl->key, "ns/pod-a#65535");
	assert_true(gl->instance_id == UINT64_C(0xfedcba9876543210));
	assert_string_equal(gl->pod, "ns/pod-a");
	assert_int_equal(gl->dp_rank, 65535);
	assert_string_equal(gl->model, "llama");
	assert_int_equal(gl->block_size, 16);
	assert_string_equal(gl->endpoint, "tcp://10.0.0.1:5558");
	assert_string_equal(gl->replay_endpoint, "tcp://10.0.0.1:5658");
	assert_string_equal(gl->recover_endpoint, "http://10.0.0.1:8001");
	assert_string_equal(gl->topic, "kv@");
	assert_null(gl->lora_name);
	kvindex__request__free_unpacked(got, NULL);

	/* an idempotent re-assignment */
	l.key = "again";
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)), KVI_OK);
	assert_true(resp->assign->existed);
	kvindex__response__free_unpacked(resp, NULL);
}

static void
test_roundtrip_unassign(void **state)
{
	(void)state;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	Kvindex__UnassignRequest ur = KVINDEX__UNASSIGN_REQUEST__INIT;
	ur.key = "ns/pod-b#0";
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &ur;
	Kvindex__Response *resp = NULL;
	assert_int_equal(kvp_call(g_client, &req, 2000, &resp, NULL, 0),
			 KVI_OK);
	assert_non_null(resp);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY__NOT_SET);
	kvindex__response__free_unpacked(resp, NULL);
	Kvindex__Request *got = fake_last(&g_shard);
	assert_int_equal(got->body_case, KVINDEX__REQUEST__BODY_UNASSIGN);
	assert_string_equal(got->unassign->key, "ns/pod-b#0");
	kvindex__request__free_unpacked(got, NULL);
}

static void
test_roundtrip_query(void **state)
{
	(void)state;
	Kvindex__Request req;
	Kvindex__QueryRequest qr;
	req_query(&req, &qr);
	Kvindex__Response *resp = NULL;
	char err[256];
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)), KVI_OK);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY_QUERY);
	const Kvindex__QueryResponse *q = resp->query;
	assert_int_equal(q->n_m_instance, 5);
	assert_int_equal(q->n_m_rank, 5);
	assert_int_equal(q->n_m_disk, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_true(q->m_instance[i] == query_hashes[i]);
		assert_int_equal(q->m_rank[i], i);
		assert_int_equal(q->m_gpu[i], i);
		assert_int_equal(q->m_cpu[i], 1);
		assert_int_equal(q->m_disk[i], 2);
	}
	kvindex__response__free_unpacked(resp, NULL);

	Kvindex__Request *got = fake_last(&g_shard);
	const Kvindex__QueryRequest *gq = got->query;
	assert_string_equal(gq->model, "llama");
	assert_int_equal(gq->n_seq_hashes, 5);
	assert_memory_equal(gq->seq_hashes, query_hashes, sizeof(query_hashes));
	assert_int_equal(gq->n_instances, 2);
	assert_memory_equal(gq->instances, query_instances,
			    sizeof(query_instances));
	assert_true(gq->has_dp_rank);
	assert_int_equal(gq->dp_rank, 3);
	kvindex__request__free_unpacked(got, NULL);
}

static void
test_roundtrip_status(void **state)
{
	(void)state;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	Kvindex__Response *resp = NULL;
	assert_int_equal(kvp_call(g_client, &req, 2000, &resp, NULL, 0),
			 KVI_OK);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY_STATUS);
	const Kvindex__StatusResponse *st = resp->status;
	assert_string_equal(st->shard_id, "shard-7");
	assert_true(st->entries == 42);
	assert_true(st->store_bytes == UINT64_C(1) << 40);
	assert_true(st->totals->has_batches && st->totals->batches == 3);
	assert_true(st->totals->orphans == UINT64_MAX);
	assert_false(st->totals->has_events);
	assert_int_equal(st->n_listeners, 1);
	const Kvindex__ListenerStatus *ls = st->listeners[0];
	assert_string_equal(ls->listener->key, "ns/pod-a#1");
	assert_string_equal(ls->listener->endpoint, "tcp://10.0.0.1:5558");
	assert_null(ls->listener->replay_endpoint);
	assert_int_equal(ls->state,
			 KVINDEX__LISTENER_STATE__LISTENER_STATE_RECOVERING);
	assert_true(ls->has_watermark);
	assert_true(ls->watermark == (UINT64_C(1) << 63) + 5);
	assert_true(ls->blocks == 10);
	assert_true(ls->counters->batches == 1);
	assert_string_equal(ls->last_error, "replay gap 5..9");
	kvindex__response__free_unpacked(resp, NULL);

	Kvindex__Request *got = fake_last(&g_shard);
	assert_int_equal(got->body_case, KVINDEX__REQUEST__BODY_STATUS);
	assert_null(got->status->key);
	kvindex__request__free_unpacked(got, NULL);
}

static void
test_roundtrip_dump(void **state)
{
	(void)state;
	Kvindex__Request req;
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "ns/pod-a#1");
	Kvindex__Response *resp = NULL;
	assert_int_equal(kvp_call(g_client, &req, 2000, &resp, NULL, 0),
			 KVI_OK);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY_DUMP);
	const Kvindex__DumpResponse *d = resp->dump;
	assert_true(d->has_watermark && d->watermark == 99);
	assert_int_equal(d->n_entries, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_true(d->entries[i]->ext_hash == dump_ext[i]);
		assert_true(d->entries[i]->seq_hash == dump_seq[i]);
		assert_int_equal(d->entries[i]->tiers, (1u << i) | 4u);
	}
	kvindex__response__free_unpacked(resp, NULL);
	Kvindex__Request *got = fake_last(&g_shard);
	assert_string_equal(got->dump->key, "ns/pod-a#1");
	kvindex__request__free_unpacked(got, NULL);
}

static void
test_handler_errors(void **state)
{
	(void)state;
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "fail");
	Kvindex__Response *resp = NULL;
	char err[256];
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)),
	    KVI_EEXIST);
	assert_string_equal(err,
			    "listener fail is already assigned to shard 3");
	assert_non_null(resp); /* a valid response, whose code is an error */
	assert_int_equal(resp->code, KVI_EEXIST);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY__NOT_SET);
	kvindex__response__free_unpacked(resp, NULL);

	Kvindex__UnassignRequest ur = KVINDEX__UNASSIGN_REQUEST__INIT;
	ur.key = "missing";
	kvindex__request__init(&req);
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &ur;
	assert_int_equal(kvp_call(g_client, &req, 2000, NULL, err, sizeof(err)),
			 KVI_ENOENT);
	assert_string_equal(err, "no listener missing");

	/* a code without a message gets kvi_strerror's */
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "nomsg");
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)),
	    KVI_ENOENT);
	assert_string_equal(err, kvi_strerror(KVI_ENOENT));
	assert_string_equal(resp->error, kvi_strerror(KVI_ENOENT));
	kvindex__response__free_unpacked(resp, NULL);
}

static void
test_handler_invalid_response(void **state)
{
	(void)state;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	sr.key = "broken";
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	Kvindex__Response *resp = NULL;
	char err[256];
	assert_int_equal(
	    kvp_call(g_client, &req, 2000, &resp, err, sizeof(err)),
	    KVI_EINTERNAL);
	assert_string_equal(err, "response lacks a required field");
	assert_non_null(resp);
	assert_int_equal(resp->body_case, KVINDEX__RESPONSE__BODY__NOT_SET);
	kvindex__response__free_unpacked(resp, NULL);
}

static void
test_service_stats(void **state)
{
	(void)state;
	static fake_shard f;
	fake_start(&f, 0);
	kvp_client *c;
	assert_int_equal(kvp_client_open(f.url, &c), KVI_OK);

	Kvindex__Request req;
	Kvindex__QueryRequest qr;
	req_query(&req, &qr);
	assert_int_equal(kvp_call(c, &req, 2000, NULL, NULL, 0), KVI_OK);
	assert_int_equal(kvp_call(c, &req, 2000, NULL, NULL, 0), KVI_OK);
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	req_assign(&req, &ar, &l, "fail");
	assert_int_equal(kvp_call(c, &req, 2000, NULL, NULL, 0), KVI_EEXIST);
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	sr.key = "broken";
	kvindex__request__init(&req);
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	assert_int_equal(kvp_call(c, &req, 2000, NULL, NULL, 0), KVI_EINTERNAL);
	kvindex__response__free_unpacked(raw_call(f.url, "garbage!", 8), NULL);
	Kvindex__DumpRequest dr;
	req_dump(&req, &dr, "k");
	req.version = 9;
	kvindex__response__free_unpacked(raw_call_request(f.url, &req), NULL);
	kvindex__request__init(&req);
	req.version = KVP_VERSION;
	kvindex__response__free_unpacked(raw_call_request(f.url, &req), NULL);

	kvn_stats st;
	kvn_service_stats(f.svc, &st);
	assert_int_equal(st.requests[KVN_KIND_QUERY], 2);
	assert_int_equal(st.errors[KVN_KIND_QUERY], 0);
	assert_int_equal(st.requests[KVN_KIND_ASSIGN], 1);
	assert_int_equal(st.errors[KVN_KIND_ASSIGN], 1);
	assert_int_equal(st.requests[KVN_KIND_STATUS], 1);
	assert_int_equal(st.errors[KVN_KIND_STATUS], 1);
	assert_int_equal(st.requests[KVN_KIND_DUMP], 0);
	assert_int_equal(st.malformed, 1);
	assert_int_equal(st.version_mismatches, 1);
	assert_int_equal(st.no_body, 1);
	assert_int_equal(st.bad_responses, 1);
	assert_int_equal(st.send_failures, 0);
	assert_string_equal(kvn_kind_name(KVN_KIND_UNASSIGN), "unassign");
	kvp_client_close(c);
	fake_stop(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_assign),
	    cmocka_unit_test(test_roundtrip_unassign),
	    cmocka_unit_test(test_roundtrip_query),
	    cmocka_unit_test(test_roundtrip_status),
	    cmocka_unit_test(test_roundtrip_dump),
	    cmocka_unit_test(test_handler_errors),
	    cmocka_unit_test(test_handler_invalid_response),
	    cmocka_unit_test(test_service_stats),
	};
	int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
	nng_fini();
	return failed;
}
