/*
 * fuzz_api_json_equiv.c - libFuzzer target: the coordinator's one-pass
 * body parsers (api_query.h, api_json.h) against a reading of the same
 * bytes with jansson (fuzz_api_json_ref.c: json_loadb with
 * JSON_REJECT_DUPLICATES, integers as integers - not as reals - and those
 * beyond int64 kept exact, as the API has always read them).
 *
 * The first byte picks the parser: 'q' /query, 'h' /query_by_hash, 'r'
 * /register, 'u' /unregister, each with a limit of 64 token ids or
 * hashes; any other byte b picks parser b % 4 with a limit of b / 4 % 70,
 * so that the 413s and the 64-byte token reader's refusals of too many
 * ids are reached by small inputs. The rest is the body. It aborts when
 * the two disagree on anything: whether the body is taken, the error's
 * code, status and message (jansson's own words and position for a body
 * that is not JSON), or any value of what they take - every field of the
 * request, the pod or the unregistration, every token id, hash, instance
 * and multimodal item. One difference is allowed, and only that one: a
 * NUL byte that jansson drops (nul_quirk). Built as a libFuzzer binary with
 * -DKVI_FUZZ=ON (clang), and as a corpus replayer (replay_main.c) in every
 * build.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_json.h"
#include "api_query.h"
#include "fuzz_api_json_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *what;

/* differ reports what disagrees, with the body, and aborts. */
static void
differ(const char *body, size_t len, const char *fmt, const char *a,
       const char *b)
{
	fprintf(stderr, "%s: ", what);
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\nbody (%zu bytes): %.*s\n", len, (int)len, body);
	abort();
}

static void
same_str(const char *body, size_t len, const char *field, const char *a,
	 const char *b)
{
	if ((a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0)) {
		char fmt[128];
		snprintf(fmt, sizeof(fmt), "%s: \"%%s\" against \"%%s\"",
			 field);
		differ(body, len, fmt, a ? a : "(null)", b ? b : "(null)");
	}
}

static void
same(const char *body, size_t len, const char *field, bool equal)
{
	if (!equal) {
		differ(body, len, "%s differs%s", field, "");
	}
}

static bool
arr_eq(const void *a, const void *b, size_t n, size_t size)
{
	return (a == NULL) == (b == NULL) &&
	       (n == 0 || memcmp(a, b, n * size) == 0);
}

/* nul_quirk says whether jansson drops a NUL byte of body: one right
 * after a number or a word (true, false, null), which its lexer reads
 * ahead and puts back, and then takes for the end of its buffer. The
 * parsers refuse such a body as not JSON instead (a NUL is no white
 * space), so where one is, they only need to say "invalid JSON". */
static bool
nul_quirk(const char *body, size_t len)
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

/* same_error compares two outcomes; true when both took the body. */
static bool
same_error(const char *body, size_t len, kvi_err rv, kvc_qerr *e,
	   kvi_err ref_rv, kvc_qerr *ref_e)
{
	if (rv == KVI_EPROTO && nul_quirk(body, len) &&
	    (ref_rv != rv || strcmp(e->message, ref_e->message) != 0)) {
		kvc_qerr_fini(e);
		kvc_qerr_fini(ref_e);
		return false;
	}
	if ((rv == KVI_OK) != (ref_rv == KVI_OK)) {
		differ(body, len, "taken: %s, by jansson: %s",
		       rv == KVI_OK ? "yes" : e->message,
		       ref_rv == KVI_OK ? "yes" : ref_e->message);
	}
	if (rv == KVI_OK) {
		return true;
	}
	same_str(body, len, "error", e->message, ref_e->message);
	same(body, len, "the error code", rv == ref_rv);
	same(body, len, "the status", e->status == ref_e->status);
	kvc_qerr_fini(e);
	kvc_qerr_fini(ref_e);
	return false;
}

static void
same_query(const char *body, size_t len, const kvc_qreq *a, const kvc_qreq *b)
{
	same_str(body, len, "model", a->model, b->model);
	same_str(body, len, "lora_name", a->lora_name, b->lora_name);
	same_str(body, len, "cache_salt", a->cache_salt, b->cache_salt);
	same(body, len, "token_ids",
	     a->n_tokens == b->n_tokens &&
		 arr_eq(a->token_ids, b->token_ids, a->n_tokens, 4));
	same(body, len, "block_hashes",
	     a->n_hashes == b->n_hashes &&
		 arr_eq(a->block_hashes, b->block_hashes, a->n_hashes, 8));
	same(body, len, "instances",
	     a->n_instances == b->n_instances &&
		 arr_eq(a->instances, b->instances, a->n_instances, 8));
	same(body, len, "dp_rank",
	     a->has_dp_rank == b->has_dp_rank &&
		 (!a->has_dp_rank || a->dp_rank == b->dp_rank));
	same(body, len, "top_k", a->top_k == b->top_k);
	same(body, len, "pending", a->no_pending == b->no_pending);
	same(body, len, "mm_features", a->n_mm == b->n_mm);
	for (size_t i = 0; i < a->n_mm; i++) {
		const kvi_mm_item *x = &a->mm[i], *y = &b->mm[i];
		same(body, len, "an mm_features item",
		     x->offset == y->offset && x->length == y->length &&
			 x->id_len == y->id_len &&
			 memcmp(x->id, y->id, x->id_len) == 0);
	}
}

static void
check_query(const char *body, size_t len, size_t max, bool by_hash)
{
	kvc_qreq q = {0}, r = {0};
	kvc_qerr e = {0}, re = {0};
	kvi_err rv = by_hash ? kvc_api_hash_query_parse(body, len, max, &q, &e)
			     : kvc_api_query_parse(body, len, max, &q, &e);
	kvi_err ref_rv = by_hash ? ref_hash_query_parse(body, len, max, &r, &re)
				 : ref_query_parse(body, len, max, &r, &re);
	if (rv != KVI_OK && q.model != NULL) {
		abort(); /* out untouched */
	}
	if (same_error(body, len, rv, &e, ref_rv, &re)) {
		same_query(body, len, &q, &r);
	}
	kvc_qreq_fini(&q);
	kvc_qreq_fini(&r);
}

static void
check_register(const char *body, size_t len, uint32_t dp_size)
{
	kvc_pod p = {0}, r = {0};
	kvc_qerr e = {0}, re = {0};
	kvi_err rv = kvc_api_register_parse(body, len, dp_size, &p, &e);
	kvi_err ref_rv = ref_register_parse(body, len, dp_size, &r, &re);
	if (!same_error(body, len, rv, &e, ref_rv, &re)) {
		kvc_pod_fini(&r); /* when jansson took a NUL quirk */
		return;
	}
	same_str(body, len, "name", p.name, r.name);
	same_str(body, len, "model", p.model, r.model);
	same_str(body, len, "ip", p.ip, r.ip);
	same_str(body, len, "endpoint", p.endpoint, r.endpoint);
	same_str(body, len, "replay_endpoint", p.replay_endpoint,
		 r.replay_endpoint);
	same_str(body, len, "recover_endpoint", p.recover_endpoint,
		 r.recover_endpoint);
	same(body, len, "the numbers",
	     p.source == r.source && p.instance_id == r.instance_id &&
		 p.block_size == r.block_size && p.zmq_port == r.zmq_port &&
		 p.has_recover_port == r.has_recover_port &&
		 p.has_replay_port == r.has_replay_port &&
		 p.recover_port == r.recover_port &&
		 p.replay_port == r.replay_port && p.dp_size == r.dp_size &&
		 p.has_metrics_port == r.has_metrics_port &&
		 p.metrics_port == r.metrics_port &&
		 p.dp_start_rank == r.dp_start_rank && p.rank == r.rank);
	kvc_pod_fini(&p);
	kvc_pod_fini(&r);
}

static void
check_unregister(const char *body, size_t len)
{
	kvc_api_unregister u = {0}, r = {0};
	kvc_qerr e = {0}, re = {0};
	kvi_err rv = kvc_api_unregister_parse(body, len, &u, &e);
	kvi_err ref_rv = ref_unregister_parse(body, len, &r, &re);
	if (!same_error(body, len, rv, &e, ref_rv, &re)) {
		kvc_api_unregister_fini(&r);
		return;
	}
	same_str(body, len, "name", u.name, r.name);
	same_str(body, len, "model", u.model, r.model);
	same(body, len, "the numbers",
	     u.instance_id == r.instance_id && u.has_dp_rank == r.has_dp_rank &&
		 u.dp_rank == r.dp_rank);
	kvc_api_unregister_fini(&u);
	kvc_api_unregister_fini(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0) {
		return 0;
	}
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	static const char names[] = "qhru";
	const char *named = memchr(names, data[0], 4);
	int target = named != NULL ? (int)(named - names) : data[0] % 4;
	size_t limit = named != NULL ? 64 : (size_t)(data[0] / 4 % 70);
	switch (target) {
	case 0:
		what = "/query";
		check_query(body, len, limit, false);
		break;
	case 1:
		what = "/query_by_hash";
		check_query(body, len, limit, true);
		break;
	case 2:
		what = "/register";
		check_register(body, len, (uint32_t)limit + 1);
		break;
	default:
		what = "/unregister";
		check_unregister(body, len);
		break;
	}
	return 0;
}
