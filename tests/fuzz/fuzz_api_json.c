/*
 * fuzz_api_json.c - libFuzzer target for the coordinator's HTTP API bodies
 * (coordinator/api/api_query.h, api_json.h; coordinator/query/qanswer.h).
 *
 * The first byte picks what the rest of the input feeds ('q', 'h', 'r',
 * 'u', 'm' in the corpus; any other byte modulo 5): the /query,
 * /query_by_hash, /register or /unregister parser, or the /query response
 * builder (matches decoded from the bytes). A parser must fail with a
 * 400/413, a code that fits the status and a printable message, and its
 * error body must be JSON; it calls a body "invalid JSON" exactly when
 * jansson rejects it for something other than an integer beyond int64
 * (but for a NUL byte jansson drops);
 * what it accepts holds its invariants (a non-empty model, counts under
 * the limits, a pod kvc_pod_check() takes). The response must list each
 * matched listener once, best first, and agree with its own scores,
 * instances and best. Built as a libFuzzer binary with -DKVI_FUZZ=ON
 * (clang), and as a corpus replayer (replay_main.c) in every build.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_json.h"
#include "api_query.h"
#include "qanswer.h"

#define FUZZ_MAX_TOKENS 64
#define FUZZ_MAX_HASHES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_jansson returns 1 when jansson takes the body, 0 when it rejects
 * it only for an integer beyond int64 (which api_json reads), -1 when it
 * rejects it for anything else. */
static int
fuzz_jansson(const char *body, size_t len)
{
	json_error_t e;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (j != NULL) {
		json_decref(j);
		return 1;
	}
	return json_error_code(&e) == json_error_numeric_overflow &&
		       strstr(e.text, "integer") != NULL
		   ? 0
		   : -1;
}

/* fuzz_nul_quirk says whether body has a NUL byte right after a digit or
 * a letter: one jansson may drop, taking what the parsers refuse. */
static bool
fuzz_nul_quirk(const char *body, size_t len)
{
	for (size_t i = 1; i < len; i++) {
		char c = body[i - 1];
		if (body[i] == '\0' &&
		    ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
		     (c >= 'A' && c <= 'Z'))) {
			return true;
		}
	}
	return false;
}

/* fuzz_check_error checks a parser's failure. */
static void
fuzz_check_error(kvi_err rv, kvc_qerr *e, const char *body, size_t len)
{
	if ((rv == KVI_ETOOBIG) != (e->status == 413) ||
	    (e->status != 400 && e->status != 413) ||
	    (rv != KVI_EPROTO && rv != KVI_EINVAL && rv != KVI_ERANGE &&
	     rv != KVI_ETOOBIG) ||
	    e->message[0] == '\0') {
		fprintf(stderr, "bad failure %d/%d \"%s\"\n", rv, e->status,
			e->message);
		abort();
	}
	for (const char *c = e->message; *c != '\0'; c++) {
		if (*c < 0x20 || *c > 0x7e) {
			abort(); /* messages are printable ASCII */
		}
	}
	json_t *b = kvc_qerr_body(e);
	char *s = json_dumps(b, JSON_COMPACT);
	if (s == NULL || strcmp(json_string_value(json_object_get(b, "error")),
				e->message) != 0) {
		abort();
	}
	free(s);
	json_decref(b);
	kvc_qerr_fini(e);
	/* "invalid JSON" exactly when jansson also rejects the body (for
	 * more than a too-big integer, which may hide a syntax error), but
	 * for a NUL byte jansson drops (api_jread.h). */
	int j = fuzz_jansson(body, len);
	if ((rv == KVI_EPROTO && j == 1 && !fuzz_nul_quirk(body, len)) ||
	    (rv != KVI_EPROTO && j == -1)) {
		fprintf(stderr, "disagrees with jansson (%d): %s\n", j,
			e->message);
		abort();
	}
}

/* fuzz_check_accepted checks that an accepted body is JSON. */
static void
fuzz_check_accepted(const char *body, size_t len)
{
	if (fuzz_jansson(body, len) < 0) {
		fprintf(stderr, "accepted what jansson rejects\n");
		abort();
	}
}

static void
fuzz_query(const char *body, size_t len, bool by_hash)
{
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	kvi_err rv =
	    by_hash
		? kvc_api_hash_query_parse(body, len, FUZZ_MAX_HASHES, &q, &e)
		: kvc_api_query_parse(body, len, FUZZ_MAX_TOKENS, &q, &e);
	if (rv != KVI_OK) {
		if (q.model != NULL) {
			abort(); /* out untouched */
		}
		fuzz_check_error(rv, &e, body, len);
		return;
	}
	fuzz_check_accepted(body, len);
	uint64_t sum = 0;
	for (size_t i = 0; i < q.n_tokens; i++) {
		sum += q.token_ids[i];
	}
	for (size_t i = 0; i < q.n_hashes; i++) {
		sum += q.block_hashes[i];
	}
	for (size_t i = 0; i < q.n_instances; i++) {
		sum += q.instances[i];
	}
	if (q.model == NULL || q.model[0] == '\0' ||
	    q.n_tokens > FUZZ_MAX_TOKENS || q.n_hashes > FUZZ_MAX_HASHES ||
	    (by_hash ? q.n_tokens != 0 : q.n_hashes != 0) ||
	    (q.n_instances == 0) != (q.instances == NULL)) {
		abort();
	}
	volatile uint64_t sink = sum; /* every value read, for ASan */
	(void)sink;
	kvc_qreq_fini(&q);
}

static void
fuzz_register(const char *body, size_t len)
{
	kvc_pod p = {0};
	kvc_qerr e = {0};
	kvi_err rv = kvc_api_register_parse(body, len, 2, &p, &e);
	if (rv != KVI_OK) {
		fuzz_check_error(rv, &e, body, len);
		return;
	}
	fuzz_check_accepted(body, len);
	char msg[256];
	if (p.source != KVC_SOURCE_HTTP ||
	    kvc_pod_check(&p, msg, sizeof(msg)) != KVI_OK ||
	    (p.name != NULL && p.instance_id != kvc_instance_id(p.name))) {
		abort();
	}
	if (p.dp_size <= 64) {
		size_t n;
		kvc_rank *r = kvc_pod_ranks(&p, &n);
		kvc_ranks_free(r, n);
	}
	kvc_pod_fini(&p);
}

static void
fuzz_unregister(const char *body, size_t len)
{
	kvc_api_unregister u = {0};
	kvc_qerr e = {0};
	kvi_err rv = kvc_api_unregister_parse(body, len, &u, &e);
	if (rv != KVI_OK) {
		fuzz_check_error(rv, &e, body, len);
		return;
	}
	fuzz_check_accepted(body, len);
	if ((u.name == NULL) == (u.model == NULL) ||
	    (u.name != NULL && u.instance_id != kvc_instance_id(u.name)) ||
	    (u.model != NULL && u.model[0] == '\0')) {
		abort();
	}
	kvc_api_unregister_fini(&u);
}

static uint64_t
fuzz_u64(const json_t *s)
{
	return strtoull(json_string_value(s), NULL, 10);
}

/* fuzz_response builds a response from 5-byte records (instance, rank,
 * gpu, cpu, disk) and checks it against itself. */
static void
fuzz_response(const uint8_t *d, size_t n)
{
	static const uint64_t ids[] = {
	    0, 1, 7, UINT64_MAX, UINT64_MAX - 1, UINT64_C(9223372036854775808)};
	static const char *const pods[] = {"ns/a", "", NULL, "ns/b"};
	size_t count = n / 5;
	kvc_qanswer_match *m = calloc(count ? count : 1, sizeof(*m));
	for (size_t i = 0; i < count; i++, d += 5) {
		m[i].instance_id = ids[d[0] % 6];
		m[i].pod = pods[d[0] / 6 % 4];
		m[i].key = "k";
		m[i].dp_rank = d[1] % 4;
		m[i].gpu = d[2] % 8;
		m[i].cpu = d[3] % 8;
		m[i].disk = d[4] % 8;
		m[i].longest = m[i].gpu + m[i].cpu + m[i].disk;
	}
	kvc_qanswer_result r = {.model = "m",
				.block_size = 16,
				.query_blocks = 24,
				.matches = m,
				.n_matches = count,
				.top_k = (uint32_t)(n % 7 < 4 ? 0 : n % 7 - 3),
				.shards_answered = (uint32_t)(n % 3),
				.shards_total = 2};
	json_t *o = kvc_qanswer_json(&r);
	json_t *workers = json_object_get(o, "workers");
	json_t *scores = json_object_get(o, "scores");
	json_t *instances = json_object_get(o, "instances");
	size_t nw = json_array_size(workers);
	if (r.top_k > 0 && nw > r.top_k) {
		abort();
	}
	for (size_t i = 0; i < nw; i++) {
		json_t *w = json_array_get(workers, i);
		json_int_t blocks =
		    json_integer_value(json_object_get(w, "matched_blocks"));
		json_int_t gpu = json_integer_value(json_object_get(w, "gpu"));
		const char *id =
		    json_string_value(json_object_get(w, "instance_id"));
		char rank[16];
		snprintf(rank, sizeof(rank), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(w, "dp_rank")));
		json_t *inst = json_object_get(instances, id);
		json_int_t tokens = blocks * 16;
		if (blocks < 1 ||
		    json_integer_value(json_object_get(
			json_object_get(scores, id), rank)) != tokens ||
		    json_integer_value(json_object_get(
			json_object_get(inst, "dp"), rank)) != tokens ||
		    json_integer_value(
			json_object_get(inst, "longest_matched")) < tokens) {
			abort();
		}
		if (i == 0) {
			continue;
		}
		json_t *p = json_array_get(workers, i - 1);
		json_int_t pb =
		    json_integer_value(json_object_get(p, "matched_blocks"));
		json_int_t pg = json_integer_value(json_object_get(p, "gpu"));
		uint64_t pid = fuzz_u64(json_object_get(p, "instance_id"));
		uint64_t wid = fuzz_u64(json_object_get(w, "instance_id"));
		json_int_t pr =
		    json_integer_value(json_object_get(p, "dp_rank"));
		json_int_t wr =
		    json_integer_value(json_object_get(w, "dp_rank"));
		if (pb < blocks || (pb == blocks && pg < gpu) ||
		    (pb == blocks && pg == gpu &&
		     (pid > wid || (pid == wid && pr >= wr)))) {
			abort(); /* best first, each listener once */
		}
	}
	size_t listed = 0;
	const char *key;
	json_t *v;
	json_object_foreach(scores, key, v)
	{
		listed += json_object_size(v);
	}
	json_t *best = json_object_get(o, "best");
	if (listed != nw ||
	    json_object_size(instances) != json_object_size(scores) ||
	    (nw == 0) != json_is_null(best) ||
	    (nw > 0 && !json_equal(json_object_get(best, "instance_id"),
				   json_object_get(json_array_get(workers, 0),
						   "instance_id"))) ||
	    json_is_true(json_object_get(o, "partial")) != (n % 3 < 2)) {
		abort();
	}
	char *s = json_dumps(o, JSON_COMPACT);
	if (s == NULL) {
		abort();
	}
	free(s);
	json_decref(o);
	free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0) {
		return 0;
	}
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	/* 'q', 'h', 'r', 'u', 'm' name the target in the corpus files; any
	 * other byte picks one too. */
	const char *targets = "qhrum";
	const char *t = memchr(targets, data[0], 5);
	switch (t != NULL ? t - targets : data[0] % 5) {
	case 0:
		fuzz_query(body, len, false);
		break;
	case 1:
		fuzz_query(body, len, true);
		break;
	case 2:
		fuzz_register(body, len);
		break;
	case 3:
		fuzz_unregister(body, len);
		break;
	default:
		fuzz_response(data + 1, len);
		break;
	}
	return 0;
}
