#include "sim_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "frame.h"

#define HTTP_MS 5000
#define RECV_MS 3000

static void *zctx;
static kvi_decoder *dec;

void *
simc_zmq(void)
{
	return zctx;
}

void
simc_setup(void)
{
	zctx = zmq_ctx_new();
	dec = kvi_decoder_alloc();
}

void
simc_teardown(void)
{
	kvi_decoder_free(dec);
	zmq_ctx_term(zctx);
}

kvi_decoder *
simc_decoder(void)
{
	return dec;
}

int
simc_int(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v)) {
		fail_msg("\"%s\" is not an integer", key);
	}
	return (int)json_integer_value(v);
}

uint64_t
simc_u64(const json_t *v)
{
	uint64_t out = 0;
	assert_true(kvt_json_u64(v, &out));
	return out;
}

void
simc_tokens(uint32_t *tok, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		tok[i] = (seed * 7919u + (uint32_t)i * 104729u) % 150000u;
	}
}

/* check_layout checks the layout file beyond what kvt_sim reads. */
static void
check_layout(const kvt_sim *s, int pods, int dp)
{
	json_t *pod_list = json_object_get(s->layout, "pods");
	assert_int_equal(s->pods, pods);
	assert_int_equal(s->dp, dp);
	for (int p = 0; p < pods; p++) {
		json_t *pod = json_array_get(pod_list, (size_t)p);
		char name[32];
		snprintf(name, sizeof(name), "sim/pod-%d", p);
		assert_string_equal(
		    json_string_value(json_object_get(pod, "name")), name);
		assert_string_equal(
		    json_string_value(json_object_get(pod, "ip")), "127.0.0.1");
		assert_int_equal(simc_int(pod, "dp_size"), dp);
		assert_int_equal(simc_int(pod, "block_size"), SIMC_BS);
		assert_string_equal(
		    json_string_value(json_object_get(pod, "model")),
		    "sim-model");
	}
	/* Consecutive layout: pod p's ports are base + p * dp. */
	for (int i = 0; i < s->n; i++) {
		assert_true(s->zmq_port[i] > 0 && s->replay_port[i] > 0 &&
			    s->recover_port[i] > 0);
		assert_int_equal(s->zmq_port[i], s->zmq_port[0] + i);
		assert_int_equal(s->replay_port[i], s->replay_port[0] + i);
		assert_int_equal(s->recover_port[i], s->recover_port[0] + i);
	}
}

void
simc_start(simproc *s, int pods, int dp, const char *const *extra)
{
	char pods_s[16], dp_s[16], bs_s[16];
	snprintf(pods_s, sizeof(pods_s), "%d", pods);
	snprintf(dp_s, sizeof(dp_s), "%d", dp);
	snprintf(bs_s, sizeof(bs_s), "%d", SIMC_BS);
	const char *argv[64] = {"--pods",        pods_s, "--dp",           dp_s,
				"--block-size",  bs_s,   "--zmq-port",     "0",
				"--replay-port", "0",    "--recover-port", "0",
				"--log-level",   "debug"};
	size_t n = 0;
	while (argv[n] != NULL) {
		n++;
	}
	for (size_t i = 0; extra[i] != NULL; i++) {
		argv[n++] = extra[i];
	}
	memset(s, 0, sizeof(*s));
	kvi_err rv = kvt_sim_start(KVI_SIM_BIN, argv, SIMC_WAIT_MS, &s->sim);
	if (rv != KVI_OK) {
		fail_msg("simulator did not start: %s", kvi_strerror(rv));
	}
	check_layout(&s->sim, pods, dp);
}

void
simc_connect(simproc *s)
{
	assert_true(s->sim.n <= SIMC_MAX_RANKS);
	for (int i = 0; i < s->sim.n; i++) {
		char ep[64];
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
			 s->sim.zmq_port[i]);
		assert_int_equal(kvt_zmq_connect(zctx, ZMQ_SUB, ep,
						 SIMC_WAIT_MS, &s->sub[i]),
				 KVI_OK);
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
			 s->sim.replay_port[i]);
		assert_int_equal(kvt_zmq_connect(zctx, ZMQ_DEALER, ep,
						 SIMC_WAIT_MS, &s->dealer[i]),
				 KVI_OK);
	}
}

int
simc_stop(simproc *s)
{
	int status = -1;
	for (int i = 0; i < SIMC_MAX_RANKS; i++) {
		kvt_zmq_close(&s->sub[i]);
		kvt_zmq_close(&s->dealer[i]);
	}
	kvt_sim_stop(&s->sim, &status);
	return status;
}

json_t *
simc_http(const simproc *s, const char *method, const char *path, json_t *body,
	  long expect)
{
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&s->sim, method, path, body, &r), KVI_OK);
	json_decref(body);
	if (r.status != expect) {
		fail_msg("%s %s: status %ld, expected %ld: %s", method, path,
			 r.status, expect, r.body);
	}
	json_t *v = json_incref(r.json);
	assert_non_null(v);
	kvt_http_resp_fini(&r);
	return v;
}

void
simc_post(const simproc *s, const char *path, json_t *body)
{
	json_decref(simc_http(s, "POST", path, body, 200));
}

json_t *
simc_recover(const simproc *s, int idx, const char *query, long expect)
{
	char url[256];
	kvt_http_resp r;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/kv_recover%s",
		 s->sim.recover_port[idx], query);
	assert_int_equal(kvt_http_get(url, HTTP_MS, &r), KVI_OK);
	if (r.status != expect) {
		fail_msg("%s: status %ld, expected %ld", url, r.status, expect);
	}
	json_t *v = json_incref(r.json);
	assert_non_null(v);
	kvt_http_resp_fini(&r);
	return v;
}

json_t *
simc_prefill(const simproc *s, int pod, int rank, const uint32_t *tokens,
	     size_t n)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_integer(tokens[i]));
	}
	return simc_http(s, "POST", "/prefill",
			 json_pack("{s:i,s:i,s:o}", "pod", pod, "rank", rank,
				   "token_ids", arr),
			 200);
}

void
simc_expect_quiet(void *socket)
{
	kvt_frames f;
	kvi_err rv = kvt_zmq_recv(socket, SIMC_QUIET_MS, &f);
	if (rv == KVI_OK) {
		kvt_frames_fini(&f);
		fail_msg("unexpected message");
	}
	assert_int_equal(rv, KVI_ETIMEDOUT);
}

uint64_t
simc_recv_live(simproc *s, int idx, const char *topic, kvt_frames *f)
{
	assert_int_equal(kvt_zmq_recv(s->sub[idx].socket, RECV_MS, f), KVI_OK);
	assert_int_equal(f->n, 3);
	assert_int_equal(f->len[0], strlen(topic));
	assert_memory_equal(f->data[0], topic, strlen(topic));
	assert_int_equal(f->len[1], 8);
	return kvi_seq_get(f->data[1]);
}

const kvi_event *
simc_decode_one(const kvt_frames *f, int dp_rank, kvi_batch *b)
{
	kvi_err rv = kvi_decoder_decode(dec, f->data[2], f->len[2], b);
	if (rv != KVI_OK) {
		fail_msg("decode: %s", kvi_decoder_error(dec));
	}
	assert_true(b->has_dp_rank);
	assert_int_equal(b->dp_rank, dp_rank);
	assert_int_equal(b->n_events, 1);
	return &b->events[0];
}

void
simc_replay_request(simproc *s, int idx, uint64_t start)
{
	uint8_t seq8[8];
	kvi_seq_put(seq8, start);
	assert_int_equal(zmq_send(s->dealer[idx].socket, "", 0, ZMQ_SNDMORE),
			 0);
	assert_int_equal(zmq_send(s->dealer[idx].socket, seq8, 8, 0), 8);
}

uint64_t
simc_recv_replay(simproc *s, int idx, bool with_topic, const char *topic,
		 kvt_frames *f)
{
	assert_int_equal(kvt_zmq_recv(s->dealer[idx].socket, RECV_MS, f),
			 KVI_OK);
	assert_true(f->n == 3 || f->n == 4);
	assert_int_equal(f->len[0], 0);
	kvi_frame frames[4];
	for (size_t i = 0; i < f->n; i++) {
		frames[i] = (kvi_frame){f->data[i], f->len[i]};
	}
	kvi_msg m;
	assert_int_equal(kvi_frame_parse_replay(frames, f->n, &m, NULL, 0),
			 KVI_OK);
	if (m.end) {
		assert_int_equal(f->n, 3); /* [b"", END, b""] */
	} else {
		assert_int_equal(f->n, with_topic ? 4 : 3);
		if (with_topic) {
			assert_int_equal(f->len[1], strlen(topic));
			assert_memory_equal(f->data[1], topic, strlen(topic));
		}
	}
	return m.seq;
}

void
simc_expect_replay(simproc *s, int idx, uint64_t start, const uint64_t *seqs,
		   size_t n)
{
	kvt_frames f;
	simc_replay_request(s, idx, start);
	for (size_t i = 0; i < n; i++) {
		assert_true(simc_recv_replay(s, idx, true, "", &f) == seqs[i]);
		kvt_frames_fini(&f);
	}
	assert_true(simc_recv_replay(s, idx, true, "", &f) == KVI_SEQ_END);
	kvt_frames_fini(&f);
}
