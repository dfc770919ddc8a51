/*
 * test_shard_badinput.c - a shard fed bad input by a hand-driven engine:
 * malformed payloads and frames, a batch of another rank, another block
 * size, an unknown parent, events of a KV cache group out of range or
 * REMOTE, a token count that does not fit - each counted, none applied,
 * the shard alive -
 * while the good batches in between (bin and negative hashes included)
 * are applied exactly. An event of an unknown type between two stores
 * costs only itself; an offload store without tokens adds its tier to a
 * known block (an unknown one is an orphan), and a GPU removal leaves the
 * CPU copy.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <zmq.h>

#include "alloc.h"
#include "frame.h"
#include "hash.h"
#include "shard_check.h"
#include "wire_encode.h"

#define BS 4

static shardproc shard;
static void *zctx, *pub, *mon;
static uint64_t next_seq;

static int
teardown(void **state)
{
	(void)state;
	shc_cleanup(&shard);
	if (mon != NULL) {
		zmq_socket_monitor(pub, NULL, 0);
		zmq_close(mon);
	}
	if (pub != NULL) {
		zmq_close(pub);
	}
	if (zctx != NULL) {
		zmq_ctx_term(zctx);
	}
	return 0;
}

static void
publish_frames_at(uint64_t seq, const void *payload, size_t len, int frames)
{
	uint8_t seq8[8];
	kvi_seq_put(seq8, seq);
	assert_true(zmq_send(pub, "", 0, ZMQ_SNDMORE) >= 0);
	if (frames == 2) {
		assert_true(zmq_send(pub, seq8, 8, 0) >= 0);
		return;
	}
	assert_true(zmq_send(pub, seq8, 8, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pub, payload, len, 0) >= 0);
}

static void
publish_frames(const void *payload, size_t len, int frames)
{
	publish_frames_at(next_seq++, payload, len, frames);
}

static void
publish(const kvi_encoder *enc)
{
	size_t len;
	const void *data = kvi_encoder_data(enc, &len);
	publish_frames(data, len, 3);
}

/* A map-form BlockStored with one extra key/value (group_idx or
 * locality) as the last entry. */
static void
publish_stored_with(uint64_t hash, const char *key, const char *str_val,
		    int int_val)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_double(&pk, 1.0);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 6);
	const char *kv[] = {"type",      "block_hashes", "parent_block_hash",
			    "token_ids", "block_size",   key};
	msgpack_pack_str_with_body(&pk, kv[0], 4);
	msgpack_pack_str_with_body(&pk, "BlockStored", 11);
	msgpack_pack_str_with_body(&pk, kv[1], strlen(kv[1]));
	msgpack_pack_array(&pk, 1);
	msgpack_pack_uint64(&pk, hash);
	msgpack_pack_str_with_body(&pk, kv[2], strlen(kv[2]));
	msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, kv[3], strlen(kv[3]));
	msgpack_pack_array(&pk, BS);
	for (int i = 0; i < BS; i++) {
		msgpack_pack_uint32(&pk, 500 + (uint32_t)i);
	}
	msgpack_pack_str_with_body(&pk, kv[4], strlen(kv[4]));
	msgpack_pack_uint32(&pk, BS);
	msgpack_pack_str_with_body(&pk, key, strlen(key));
	if (str_val != NULL) {
		msgpack_pack_str_with_body(&pk, str_val, strlen(str_val));
	} else {
		msgpack_pack_int(&pk, int_val);
	}
	msgpack_pack_int(&pk, 0); /* data_parallel_rank */
	publish_frames(sb.data, sb.size, 3);
	msgpack_sbuffer_destroy(&sb);
}

static void
watch_accepts(void)
{
	zmq_socket_monitor(pub, "inproc://bad-mon", ZMQ_EVENT_ACCEPTED);
	mon = zmq_socket(zctx, ZMQ_PAIR);
	int timeout = 10000, zero = 0;
	zmq_setsockopt(mon, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(zmq_connect(mon, "inproc://bad-mon"), 0);
}

/* wait_subscribed waits until the shard's SUB has connected: a PUB drops
 * what it publishes before anyone subscribes. */
static void
wait_subscribed(void)
{
	zmq_msg_t m;
	zmq_msg_init(&m);
	int rc = zmq_msg_recv(&m, mon, 0);
	zmq_msg_close(&m);
	assert_true(rc >= 0);
	kvt_sleep_ms(300); /* the subscription follows the connection */
}

static void
assign_engine(int port)
{
	char ep[64];
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = "bad/pod#0";
	l.instance_id = 9;
	l.pod = "bad/pod";
	l.dp_rank = 0;
	l.model = "m";
	l.block_size = BS;
	l.endpoint = ep;
	Kvindex__AssignRequest a = KVINDEX__ASSIGN_REQUEST__INIT;
	a.listener = &l;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req.assign = &a;
	Kvindex__Response *resp = shc_call(&shard, &req);
	assert_int_equal(resp->code, 0);
	kvindex__response__free_unpacked(resp, NULL);
}

static Kvindex__ListenerStatus *
wait_watermark(uint64_t wm, Kvindex__Response **resp)
{
	int64_t deadline = kvt_now_ms() + 10000;
	for (;;) {
		Kvindex__ListenerStatus *st =
		    shc_status(&shard, "bad/pod#0", resp);
		assert_non_null(st);
		if (st->has_watermark && st->watermark == wm) {
			return st;
		}
		kvindex__response__free_unpacked(*resp, NULL);
		if (kvt_now_ms() > deadline) {
			fail_msg("watermark never reached %llu (log %s)",
				 (unsigned long long)wm, shard.log_path);
		}
		kvt_sleep_ms(50);
	}
}

/* frame_error publishes the frames given (as a live message, none of them
 * a valid seq) and returns when the listener has counted it malformed;
 * its last_error must name what was wrong. */
static void
frame_error(const char *const *frames, const size_t *lens, int n,
	    uint64_t malformed, const char *why)
{
	for (int i = 0; i < n; i++) {
		assert_true(zmq_send(pub, frames[i], lens[i],
				     i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
	}
	int64_t deadline = kvt_now_ms() + 10000;
	for (;;) {
		Kvindex__Response *resp;
		Kvindex__ListenerStatus *st =
		    shc_status(&shard, "bad/pod#0", &resp);
		assert_non_null(st);
		bool counted = st->counters->malformed == malformed;
		if (counted && (st->last_error == NULL ||
				strstr(st->last_error, why) == NULL)) {
			fail_msg("last_error \"%s\", expected \"%s\"",
				 st->last_error ? st->last_error : "", why);
		}
		kvindex__response__free_unpacked(resp, NULL);
		if (counted) {
			return;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(20);
	}
}

static void
test_bad_input_is_counted(void **state)
{
	(void)state;
	shc_start(&shard, NULL);
	zctx = zmq_ctx_new();
	pub = zmq_socket(zctx, ZMQ_PUB);
	int port;
	int zero = 0;
	zmq_setsockopt(pub, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(kvt_zmq_bind_any(pub, &port), KVI_OK);
	watch_accepts();
	assign_engine(port);
	wait_subscribed();

	kvi_encoder enc;
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_UINT);
	uint32_t toks[2 * BS] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint64_t h12[2] = {1, 2};
	/* seq 0: not msgpack at all - a batch lost, which nothing repairs
	 * here (no /kv_recover): the listener, empty so far, is marked
	 * incomplete */
	publish_frames("\xc1\x00garbage", 9, 3);
	/* seq 1: good, two blocks; then a message of two frames (its seq
	 * frame names the next batch, which comes whole after it) */
	kvi_encoder_begin(&enc, 1.0, 1, true, 0);
	kvi_encoder_stored(&enc, h12, 2, NULL, toks, 2 * BS, BS, "GPU", NULL);
	publish(&enc);
	publish_frames_at(next_seq, NULL, 0, 2);
	/* a batch of another data-parallel rank, numbered in that rank's
	 * own sequence (an engine publishing two ranks on one socket): its
	 * seq 1 is neither a restart of this rank nor a duplicate - it is
	 * not this rank's at all, and takes no seq of it */
	uint64_t h99 = 99;
	kvi_encoder_begin(&enc, 1.0, 1, true, 3);
	kvi_encoder_stored(&enc, &h99, 1, NULL, toks, BS, BS, "GPU", NULL);
	size_t olen;
	const void *other = kvi_encoder_data(&enc, &olen);
	publish_frames_at(1, other, olen, 3);
	/* seq 2: another block size */
	kvi_encoder_begin(&enc, 1.0, 1, true, 0);
	kvi_encoder_stored(&enc, &h99, 1, NULL, toks, 2 * BS, 2 * BS, "GPU",
			   NULL);
	publish(&enc);
	/* seq 3: a parent nobody stored */
	uint64_t unknown = 12345;
	kvi_encoder_begin(&enc, 1.0, 1, true, 0);
	kvi_encoder_stored(&enc, &h99, 1, &unknown, toks, BS, BS, "GPU", NULL);
	publish(&enc);
	/* seq 4: tokens that are not block_hashes x block_size */
	kvi_encoder_begin(&enc, 1.0, 1, true, 0);
	kvi_encoder_stored(&enc, &h99, 1, NULL, toks, BS + 1, BS, "GPU", NULL);
	publish(&enc);
	/* seq 5, 6: a KV cache group out of range, REMOTE locality */
	publish_stored_with(98, "group_idx", NULL, 40);
	publish_stored_with(97, "locality", "REMOTE", 0);
	/* seq 7: good - a bin hash (32 bytes) continuing block 2 */
	kvi_encoder_fini(&enc);
	kvi_encoder_init(&enc, KVI_FORM_LEGACY, KVI_HASH_BIN32);
	uint64_t h3 = 0xfeedfacecafebeefull, parent = 2;
	kvi_encoder_begin(&enc, 1.0, 1, true, 0);
	kvi_encoder_stored(&enc, &h3, 1, &parent, toks, BS, BS, "CPU", NULL);
	publish(&enc);
	/* seq 8: good - SGLang-style negative hash, then block 1 removed */
	kvi_encoder_fini(&enc);
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_INT64);
	uint64_t hneg = (uint64_t)-5;
	kvi_encoder_begin(&enc, 1.0, 2, true, 0);
	kvi_encoder_stored(&enc, &hneg, 1, NULL, toks + BS, BS, BS, "GPU",
			   NULL);
	kvi_encoder_removed(&enc, h12, 1, "GPU");
	publish(&enc);
	kvi_encoder_fini(&enc);
	/* seq 9: a store, an event of a type not known yet, a store */
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_UINT);
	uint64_t h50 = 50, h51 = 51;
	kvi_encoder_begin(&enc, 1.0, 3, false, 0);
	kvi_encoder_stored(&enc, &h50, 1, NULL, toks, BS, BS, "GPU", NULL);
	msgpack_pack_map(&enc.pk, 2);
	msgpack_pack_str(&enc.pk, 4);
	msgpack_pack_str_body(&enc.pk, "type", 4);
	msgpack_pack_str(&enc.pk, 13);
	msgpack_pack_str_body(&enc.pk, "BlockInactive", 13);
	msgpack_pack_str(&enc.pk, 12);
	msgpack_pack_str_body(&enc.pk, "block_hashes", 12);
	msgpack_pack_array(&enc.pk, 1);
	msgpack_pack_uint64(&enc.pk, h50);
	kvi_encoder_stored(&enc, &h51, 1, &h50, toks + BS, BS, BS, "GPU", NULL);
	publish(&enc);
	/* seq 10: block 50 offloaded to CPU as vLLM reports it (no tokens,
	 * no parent, block_size 0) with a hash never stored; then its GPU
	 * copy evicted */
	uint64_t off[2] = {h50, 777};
	kvi_stored_spec sp = {
	    .hashes = off, .n = 2, .block_size = 0, .medium = "CPU"};
	kvi_encoder_begin(&enc, 1.0, 2, true, 0);
	kvi_encoder_stored_spec(&enc, &sp);
	kvi_encoder_removed(&enc, &h50, 1, "GPU");
	publish(&enc);
	kvi_encoder_fini(&enc);

	Kvindex__Response *resp;
	Kvindex__ListenerStatus *st = wait_watermark(10, &resp);
	Kvindex__Counters *c = st->counters;
	assert_int_equal(c->malformed, 3); /* garbage, 2 frames, tokens */
	assert_int_equal(c->rank_mismatches, 1);
	assert_int_equal(c->engine_restarts, 0);
	assert_int_equal(c->unrepaired_gaps, 1); /* the lost batch */
	assert_true(st->incomplete);
	assert_non_null(st->misconfigured);
	assert_non_null(strstr(st->misconfigured, "data_parallel_rank 3"));
	assert_int_equal(c->block_size_mismatches, 1);
	{
		/* the store of another block size is said once in the log */
		char *log = kvt_file_read(shard.log_path, NULL);
		assert_non_null(log);
		const char *at = strstr(log, "event_block_size=");
		assert_non_null(at);
		assert_null(strstr(at + 1, "event_block_size="));
		kvi_free(log);
	}
	assert_int_equal(c->orphans, 2); /* parent 12345, offload of 777 */
	assert_int_equal(c->skipped_events, 2);
	assert_int_equal(c->blocks_stored, 7); /* 4, 50, 51, 50 on CPU */
	assert_int_equal(c->blocks_removed, 2);
	assert_non_null(st->last_error);
	kvindex__response__free_unpacked(resp, NULL);

	/* Exactly the good blocks: 2, the bin hash (its last 8 bytes) and
	 * the negative hash, chained as the engine chained them. */
	Kvindex__DumpRequest d = KVINDEX__DUMP_REQUEST__INIT;
	d.key = "bad/pod#0";
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_DUMP;
	req.dump = &d;
	resp = shc_call(&shard, &req);
	assert_int_equal(resp->code, 0);
	assert_int_equal(resp->dump->n_entries, 5);
	uint64_t seed = kvi_local_seed(NULL, 0, NULL, 0);
	uint64_t s1 =
	    kvi_seq_hash(KVI_SEQ_ROOT, kvi_local_hash(toks, BS, seed));
	uint64_t s2 = kvi_seq_hash(s1, kvi_local_hash(toks + BS, BS, seed));
	uint64_t s3 = kvi_seq_hash(s2, kvi_local_hash(toks, BS, seed));
	uint64_t sneg =
	    kvi_seq_hash(KVI_SEQ_ROOT, kvi_local_hash(toks + BS, BS, seed));
	int seen = 0;
	for (size_t i = 0; i < resp->dump->n_entries; i++) {
		Kvindex__DumpEntry *e = resp->dump->entries[i];
		if (e->ext_hash == 2) {
			assert_true(e->seq_hash == s2 && e->tiers == 1);
			seen |= 1;
		} else if (e->ext_hash == h3) {
			assert_true(e->seq_hash == s3 && e->tiers == 2);
			seen |= 2;
		} else if (e->ext_hash == hneg) {
			assert_true(e->seq_hash == sneg && e->tiers == 1);
			seen |= 4;
		} else if (e->ext_hash == h50) {
			/* held on CPU only, at block 1's key */
			assert_true(e->seq_hash == s1 && e->tiers == 2);
			seen |= 8;
		} else if (e->ext_hash == h51) {
			assert_true(e->seq_hash == s2 && e->tiers == 1);
			seen |= 16;
		}
	}
	assert_int_equal(seen, 31);
	kvindex__response__free_unpacked(resp, NULL);
	assert_true(shc_wait_metric(&shard, "kvindex_shard_orphans_total", 2,
				    5000) == 2);
	assert_true(shc_wait_metric(&shard,
				    "kvindex_shard_unknown_events_total", 1,
				    5000) == 1);
	assert_true(shc_wait_metric(&shard, "kvindex_shard_malformed_total", 3,
				    5000) == 3);

	/* frames that are not [topic, seq8, payload], each named as it is */
	const char *fr[] = {"", "\x01\0\0\0", "x"};
	size_t short_seq[] = {0, 4, 1};
	frame_error(fr, short_seq, 3, 4, "a seq frame of 4 bytes, expected 8");
	size_t two[] = {0, 4};
	frame_error(fr, two, 2, 5, "a live message of 2 frames, expected 3");
	const char *end[] = {"", "\xff\xff\xff\xff\xff\xff\xff\xff", ""};
	size_t end_lens[] = {0, 8, 0};
	frame_error(end, end_lens, 3, 6, "a replay end marker on the live");
	assert_int_equal(shc_stop(&shard), 0);
}

/* A port that takes connections and never answers: an engine that hangs.
 * Its listeners hold their sockets (one that takes no connection holds
 * none). */
static char hung_ep[64];

static int
hung_engine(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
	assert_int_equal(listen(fd, 1024), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	snprintf(hung_ep, sizeof(hung_ep), "tcp://127.0.0.1:%u",
		 ntohs(a.sin_port));
	return fd;
}

/* assign_far assigns listener i of the hung engine and returns the
 * answer's code and error. */
static unsigned
assign_far(int i, char *err, size_t len)
{
	char key[32];
	snprintf(key, sizeof(key), "far/pod#%d", i);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = key;
	l.instance_id = 100;
	l.pod = "far/pod";
	l.dp_rank = (uint32_t)i;
	l.model = "m";
	l.block_size = BS;
	l.endpoint = hung_ep;
	Kvindex__AssignRequest a = KVINDEX__ASSIGN_REQUEST__INIT;
	a.listener = &l;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req.assign = &a;
	Kvindex__Response *resp = shc_call(&shard, &req);
	unsigned code = resp->code;
	snprintf(err, len, "%s", resp->error ? resp->error : "");
	kvindex__response__free_unpacked(resp, NULL);
	return code;
}

/* unassign drops listener key; returns the answer's code and error. */
static unsigned
unassign(const char *key, char *err, size_t len)
{
	Kvindex__UnassignRequest u = KVINDEX__UNASSIGN_REQUEST__INIT;
	u.key = (char *)key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &u;
	Kvindex__Response *resp = shc_call(&shard, &req);
	unsigned code = resp->code;
	snprintf(err, len, "%s", resp->error ? resp->error : "");
	kvindex__response__free_unpacked(resp, NULL);
	return code;
}

/* test_out_of_descriptors: a shard that cannot raise its open-file limit
 * refuses the assignment that would need more, saying so, and goes on
 * serving the listeners it has. It used to report "Socket operation on
 * non-socket". */
static void
test_out_of_descriptors(void **state)
{
	(void)state;
	int hung = hung_engine();
	shc_start_limited(&shard, NULL, 96);
	char err[512] = "";
	int ok = 0;
	unsigned code = 0;
	for (int i = 0; i < 200; i++) {
		if ((code = assign_far(i, err, sizeof(err))) != 0) {
			break;
		}
		ok++;
	}
	assert_true(ok > 0);
	if (code == 0) {
		fail_msg("200 listeners under a limit of 96 descriptors");
	}
	assert_int_equal(code, KVI_EFULL);
	if (strstr(err, "out of file descriptors") == NULL ||
	    strstr(err, "limit 96") == NULL) {
		fail_msg("error \"%s\"", err);
	}
	/* It says so before anyone asks: /ready is 503, from the shard's
	 * own check when a descriptor is free for the probe, else from its
	 * HTTP server's reserve descriptor. */
	char url[96];
	snprintf(url, sizeof(url), "http://%s/ready", shard.metrics);
	kvt_http_resp r;
	assert_int_equal(kvt_http_get(url, 5000, &r), KVI_OK);
	assert_int_equal(r.status, 503);
	if (strstr(r.body, "open files used") == NULL &&
	    strstr(r.body, "out of file descriptors") == NULL) {
		fail_msg("/ready: %s", r.body);
	}
	kvt_http_resp_fini(&r);
	/* with some listeners gone, there is room to read it all (the
	 * reconnects to the absent engines take descriptors for a moment) */
	for (int i = 0; i < 8; i++) {
		char key[32], why[256];
		snprintf(key, sizeof(key), "far/pod#%d", i);
		assert_int_equal(unassign(key, why, sizeof(why)), 0);
	}
	ok -= 8;
	assert_int_equal(kvt_http_get(url, 5000, &r), KVI_OK);
	assert_int_equal(r.status, 503);
	assert_non_null(strstr(r.body, "open files used"));
	kvt_http_resp_fini(&r);
	assert_true(shc_metric(&shard, "kvindex_shard_open_files_limit") == 96);
	/* most of them in use (some come back as failed sockets close) */
	double open = shc_metric(&shard, "kvindex_shard_open_files");
	assert_true(open > 48 && open <= 96);
	/* the request service counted every assignment, and the refusal */
	assert_true(shc_metric(&shard, "kvindex_shard_rpc_requests_total{"
				       "kind=\"assign\"}") == ok + 9);
	assert_true(shc_metric(&shard, "kvindex_shard_rpc_requests_total{"
				       "kind=\"unassign\"}") == 8);
	assert_true(shc_metric(&shard, "kvindex_shard_rpc_errors_total{"
				       "kind=\"assign\"}") == 1);
	double mal = shc_metric(&shard, "kvindex_shard_rpc_refused_total{"
					"reason=\"malformed\"}");
	if (mal != 0) {
		fail_msg("malformed %f", mal);
	}
	/* nothing half-assigned, and the rest is served */
	Kvindex__Response *resp;
	char key[32];
	snprintf(key, sizeof(key), "far/pod#%d", ok + 8);
	assert_null(shc_status(&shard, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	snprintf(key, sizeof(key), "far/pod#%d", ok + 7);
	assert_non_null(shc_status(&shard, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	assert_int_equal(shc_stop(&shard), 0);
	close(hung);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_bad_input_is_counted, teardown),
	    cmocka_unit_test_teardown(test_out_of_descriptors, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
