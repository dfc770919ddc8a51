#include "api_query.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "api_jread.h"
#include "api_json.h"
#include "api_tokens.h"

/* How much room a value quoted in a message takes (kvc_jr_text). */
#define VALUE_TEXT (KVC_JR_TEXT_MAX + 8)

/* An array field as read: its value (type KVC_JR_NONE when absent; not an
 * array: the field's type is wrong), its elements, and the first one that
 * is not what the field holds. */
typedef struct arr {
	kvc_jr_val v;
	size_t count;
	bool has_bad;
	size_t bad;
	kvc_jr_val bad_v;
} arr;

/* An mm_features entry as read: itself (its type), and its three fields
 * (type KVC_JR_NONE when absent). */
typedef struct mm_entry {
	kvc_jr_type type;
	kvc_jr_val id, offset, length;
} mm_entry;

/* Everything a query body's one pass finds, checked once it has read the
 * body whole. Arrays of values (ids, hashes, instances) go straight into
 * the request being built. */
typedef struct qbody {
	kvc_jr_val model, lora, salt, dp_rank, top_k, pending;
	kvc_jr_val pod, instance_id, ttl_ms; /* /routed */
	arr tokens, hashes, instances, mm;
	mm_entry *entries; /* the first of mm's (at most max + 1) */
	size_t n_entries;
} qbody;

/* The fields of the query bodies; the others are stepped over. */
typedef enum qfield {
	F_OTHER = 0,
	F_MODEL,
	F_TOKENS,
	F_HASHES,
	F_LORA,
	F_SALT,
	F_MM,
	F_INSTANCES,
	F_DP_RANK,
	F_TOP_K,
	F_PENDING,
	F_POD,
	F_INSTANCE_ID,
	F_TTL_MS,
} qfield;

/* The bodies read here. */
typedef enum qform {
	FORM_TOKENS, /* POST /query */
	FORM_HASHES, /* POST /query_by_hash */
	FORM_ROUTED, /* POST /routed: either prompt, and where it went */
} qform;

/* field_of says which field of a body of form the key k[0..n) names. */
static qfield
field_of(const char *k, size_t n, qform form)
{
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(k, lit, n) == 0)
	if (IS("model_name")) {
		return F_MODEL;
	}
	if (IS("pending")) {
		return F_PENDING;
	}
	if (form == FORM_ROUTED) {
		if (IS("pod")) {
			return F_POD;
		}
		if (IS("instance_id")) {
			return F_INSTANCE_ID;
		}
		if (IS("ttl_ms")) {
			return F_TTL_MS;
		}
		if (IS("block_hashes")) {
			return F_HASHES;
		}
	}
	if (IS("instances")) {
		return F_INSTANCES;
	}
	if (IS("dp_rank")) {
		return F_DP_RANK;
	}
	if (IS("top_k")) {
		return F_TOP_K;
	}
	if (form == FORM_HASHES) {
		return IS("block_hashes") ? F_HASHES : F_OTHER;
	}
	return IS("token_ids")     ? F_TOKENS
	       : IS("lora_name")   ? F_LORA
	       : IS("cache_salt")  ? F_SALT
	       : IS("mm_features") ? F_MM
				   : F_OTHER;
#undef IS
}

static inline bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- reading: one pass --------------------------------------------------- */

/* arr_begin starts reading the array field in hand into a: false when it
 * is no array (then read whole into a->v) or on an error. */
static bool
arr_begin(kvc_jr *r, arr *a, kvc_jr_iter *it, bool *ok)
{
	if (kvc_jr_in_hand(r) != KVC_JR_ARRAY) {
		*ok = kvc_jr_value(r, &a->v);
		return false;
	}
	a->v = (kvc_jr_val){.type = KVC_JR_ARRAY};
	*ok = kvc_jr_enter(r, it);
	return *ok;
}

/* arr_note counts the element just read, v, and notes it when it is the
 * first that is not what the field holds (right false); returns whether
 * to keep it. */
static bool
arr_note(arr *a, const kvc_jr_val *v, bool right)
{
	size_t i = a->count++;
	if (a->has_bad) {
		return false;
	}
	if (!right) {
		a->has_bad = true;
		a->bad = i;
		a->bad_v = *v;
		return false;
	}
	return true;
}

/* read_tokens reads token_ids, in a body that ends at end: the 64-byte
 * reader first, then the element reader from the last comma it read when
 * it declines. At most max ids are kept (the count goes on). */
static bool
read_tokens(kvc_jr *r, const char *end, size_t max, arr *a, kvc_qreq *q)
{
	kvc_jr_iter it;
	bool ok;
	if (!arr_begin(r, a, &it, &ok)) {
		return ok;
	}
	const char *p = kvc_jr_at(r);
	while (p < end && is_space(*p)) {
		p++;
	}
	uint32_t *ids = NULL;
	size_t n = 0;
	if (p < end && *p != ']') {
		const char *after;
		if (kvc_tokens_read(p, end, max, &ids, &n, &after)) {
			kvc_jr_end_at(r, &it, after);
			q->token_ids = ids;
			q->n_tokens = a->count = n;
			return true;
		}
		kvc_jr_resume_at(r, &it, after, after != p);
	}
	size_t cap = n;
	a->count = n;
	kvc_jr_val v;
	while (kvc_jr_element(r, &it) && kvc_jr_value(r, &v)) {
		uint64_t x;
		bool right = kvc_api_uint_of(&v, &x) && x <= UINT32_MAX;
		if (!arr_note(a, &v, right) || n >= max) {
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			ids = kvi_reallocarray(ids, cap, sizeof(*ids));
		}
		ids[n++] = (uint32_t)x;
	}
	q->token_ids = ids;
	q->n_tokens = n;
	return kvc_jr_ok(r);
}

/* read_u64s reads an array of u64 values (block_hashes, instances) into
 * *out and *n, keeping at most max. */
static bool
read_u64s(kvc_jr *r, size_t max, arr *a, uint64_t **out, size_t *n)
{
	kvc_jr_iter it;
	bool ok;
	if (!arr_begin(r, a, &it, &ok)) {
		return ok;
	}
	size_t cap = 0;
	kvc_jr_val v;
	while (kvc_jr_element(r, &it) && kvc_jr_value(r, &v)) {
		uint64_t x;
		if (!arr_note(a, &v, kvc_api_u64_of(&v, &x)) || *n >= max) {
			continue;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			*out = kvi_reallocarray(*out, cap, sizeof(**out));
		}
		(*out)[(*n)++] = x;
	}
	return kvc_jr_ok(r);
}

/* read_mm_entry reads one entry of mm_features into e. */
static bool
read_mm_entry(kvc_jr *r, mm_entry *e)
{
	kvc_jr_val other;
	e->type = kvc_jr_in_hand(r);
	if (e->type != KVC_JR_OBJECT) {
		return kvc_jr_value(r, &other);
	}
	kvc_jr_iter it;
	if (!kvc_jr_enter(r, &it)) {
		return false;
	}
	const char *k;
	size_t n;
	while (kvc_jr_member(r, &it, &k, &n)) {
		kvc_jr_val *v = &other;
		if (n == 10 && memcmp(k, "identifier", 10) == 0) {
			v = &e->id;
		} else if (n == 6 && memcmp(k, "offset", 6) == 0) {
			v = &e->offset;
		} else if (n == 6 && memcmp(k, "length", 6) == 0) {
			v = &e->length;
		}
		if (!kvc_jr_value(r, v)) {
			return false;
		}
	}
	return kvc_jr_ok(r);
}

/* read_mm reads mm_features, keeping at most one entry more than there
 * are token ids (max, or as many as token_ids held when it came first):
 * more are refused whatever they hold. */
static bool
read_mm(kvc_jr *r, size_t max, qbody *b)
{
	kvc_jr_iter it;
	bool ok;
	if (!arr_begin(r, &b->mm, &it, &ok)) {
		return ok;
	}
	if (b->tokens.v.type == KVC_JR_ARRAY && b->tokens.count < max) {
		max = b->tokens.count;
	}
	size_t cap = 0;
	mm_entry scratch;
	while (kvc_jr_element(r, &it)) {
		mm_entry *e = &scratch;
		if (b->n_entries <= max) {
			if (b->n_entries == cap) {
				cap = cap ? 2 * cap : 4;
				b->entries = kvi_reallocarray(
				    b->entries, cap, sizeof(*b->entries));
			}
			e = &b->entries[b->n_entries++];
		}
		memset(e, 0, sizeof(*e));
		b->mm.count++;
		if (!read_mm_entry(r, e)) {
			return false;
		}
	}
	return kvc_jr_ok(r);
}

/* read_body reads a query body whole into b and q (the arrays of values);
 * an error, with err set, when it is not a JSON object. */
static kvi_err
read_body(const char *text, size_t len, qform form, size_t max, qbody *b,
	  kvc_qreq *q, kvc_qerr *err)
{
	kvc_jr r;
	kvc_jr_iter it;
	kvc_jr_init(&r, text, len);
	kvc_jr_type top = kvc_jr_top(&r, &it);
	const char *k;
	size_t n;
	kvc_jr_val other;
	while (top == KVC_JR_OBJECT && kvc_jr_member(&r, &it, &k, &n)) {
		bool ok;
		switch (field_of(k, n, form)) {
		case F_MODEL:
			ok = kvc_jr_value(&r, &b->model);
			break;
		case F_TOKENS:
			ok = read_tokens(&r, text + len, max, &b->tokens, q);
			break;
		case F_HASHES:
			ok = read_u64s(&r, max, &b->hashes, &q->block_hashes,
				       &q->n_hashes);
			break;
		case F_INSTANCES:
			ok = read_u64s(&r, SIZE_MAX, &b->instances,
				       &q->instances, &q->n_instances);
			break;
		case F_MM:
			ok = read_mm(&r, max, b);
			break;
		case F_LORA:
			ok = kvc_jr_value(&r, &b->lora);
			break;
		case F_SALT:
			ok = kvc_jr_value(&r, &b->salt);
			break;
		case F_DP_RANK:
			ok = kvc_jr_value(&r, &b->dp_rank);
			break;
		case F_TOP_K:
			ok = kvc_jr_value(&r, &b->top_k);
			break;
		case F_PENDING:
			ok = kvc_jr_value(&r, &b->pending);
			break;
		case F_POD:
			ok = kvc_jr_value(&r, &b->pod);
			break;
		case F_INSTANCE_ID:
			ok = kvc_jr_value(&r, &b->instance_id);
			break;
		case F_TTL_MS:
			ok = kvc_jr_value(&r, &b->ttl_ms);
			break;
		default:
			ok = kvc_jr_value(&r, &other);
			break;
		}
		if (!ok) {
			break;
		}
	}
	kvi_err rv = KVI_OK;
	if (!kvc_jr_finish(&r) || top != KVC_JR_OBJECT) {
		rv = kvc_api_body_error(&r, top, err);
	}
	kvc_jr_fini(&r);
	return rv;
}

/* ---- checking: the API's order ------------------------------------------- */

/* arr_check checks an array field's value and size: required unless
 * present is given (absent or null: *present false), at most max
 * elements (413 past it, `unit` naming them). */
static kvi_err
arr_check(const arr *a, const char *field, size_t max, const char *unit,
	  bool *present, kvc_qerr *err)
{
	if (present != NULL) {
		*present = a->v.type != KVC_JR_NONE && a->v.type != KVC_JR_NULL;
		if (!*present) {
			return KVI_OK;
		}
	} else if (a->v.type == KVC_JR_NONE) {
		return kvc_qerr_set(err, KVI_EINVAL, 400, "%s is missing",
				    field);
	}
	if (a->v.type != KVC_JR_ARRAY) {
		return kvc_api_type_error(&a->v, field, "an array", err);
	}
	if (a->count > max) {
		return kvc_qerr_set(err, KVI_ETOOBIG, 413,
				    "%s has %zu %s, more than the maximum of "
				    "%zu",
				    field, a->count, unit, max);
	}
	return KVI_OK;
}

/* u64s_check checks an array of u64 values: its size, then the first
 * element that is not one. */
static kvi_err
u64s_check(const arr *a, const char *field, size_t max, const char *unit,
	   bool required, kvc_qerr *err)
{
	bool has;
	kvi_err rv =
	    arr_check(a, field, max, unit, required ? NULL : &has, err);
	if (rv != KVI_OK || !a->has_bad) {
		return rv;
	}
	char what[64];
	uint64_t x;
	snprintf(what, sizeof(what), "%s[%zu]", field, a->bad);
	return kvc_api_value_u64(&a->bad_v, what, &x, err);
}

static kvi_err
tokens_check(const arr *a, size_t max, kvc_qerr *err)
{
	kvi_err rv = arr_check(a, "token_ids", max, "tokens", NULL, err);
	if (rv != KVI_OK || !a->has_bad) {
		return rv;
	}
	const kvc_jr_val *v = &a->bad_v;
	char text[VALUE_TEXT];
	kvc_jr_text(v, text, sizeof(text));
	return kvc_qerr_set(
	    err,
	    v->type == KVC_JR_INT || v->type == KVC_JR_BIG ? KVI_ERANGE
							   : KVI_EINVAL,
	    400, "token_ids[%zu]: %s is not a u32", a->bad, text);
}

/* mm_u64 reads mm_features[i].field, a u64 integer. */
static kvi_err
mm_u64(const kvc_jr_val *v, size_t i, const char *field, uint64_t *out,
       kvc_qerr *err)
{
	if (v->type != KVC_JR_NONE && kvc_api_uint_of(v, out)) {
		return KVI_OK;
	}
	char text[VALUE_TEXT];
	if (v->type == KVC_JR_NONE) {
		snprintf(text, sizeof(text), "missing");
	} else {
		kvc_jr_text(v, text, sizeof(text));
	}
	return kvc_qerr_set(
	    err,
	    v->type == KVC_JR_INT || v->type == KVC_JR_BIG ? KVI_ERANGE
							   : KVI_EINVAL,
	    400, "mm_features[%zu].%s: %s is not a u64", i, field, text);
}

/* mm_item checks entry i of mm_features into it; prev_end is where the
 * entry before it ends. */
static kvi_err
mm_item(const mm_entry *e, size_t i, uint64_t prev_end, size_t n_tokens,
	kvi_mm_item *it, kvc_qerr *err)
{
	if (e->type != KVC_JR_OBJECT) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "mm_features[%zu] must be an object", i);
	}
	if (e->id.type != KVC_JR_STRING || e->id.len == 2) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "mm_features[%zu].identifier must be a "
				    "non-empty string",
				    i);
	}
	kvi_err rv;
	if ((rv = mm_u64(&e->offset, i, "offset", &it->offset, err)) !=
		KVI_OK ||
	    (rv = mm_u64(&e->length, i, "length", &it->length, err)) !=
		KVI_OK) {
		return rv;
	}
	if (it->length == 0) {
		return kvc_qerr_set(err, KVI_ERANGE, 400,
				    "mm_features[%zu].length: 0, an item "
				    "covers at least one token",
				    i);
	}
	if (i > 0 && it->offset < prev_end) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "mm_features[%zu]: offset %" PRIu64
				    " is before the end of "
				    "mm_features[%zu] (%" PRIu64
				    "): entries must be sorted and not "
				    "overlap",
				    i, it->offset, i - 1, prev_end);
	}
	if (it->offset > n_tokens || it->length > n_tokens - it->offset) {
		return kvc_qerr_set(
		    err, KVI_EINVAL, 400,
		    "mm_features[%zu]: tokens %" PRIu64 "..%" PRIu64
		    " are past the prompt's %zu tokens",
		    i, it->offset, it->offset + it->length, n_tokens);
	}
	it->id = kvc_jr_string(&e->id, &it->id_len);
	return KVI_OK;
}

/* mm_check checks mm_features, which needs token_ids checked first. */
static kvi_err
mm_check(const qbody *b, kvc_qreq *q, kvc_qerr *err)
{
	bool has;
	kvi_err rv =
	    arr_check(&b->mm, "mm_features", q->n_tokens, "items", &has, err);
	if (rv != KVI_OK || !has || b->mm.count == 0) {
		return rv;
	}
	q->mm = kvi_calloc(b->mm.count, sizeof(*q->mm));
	uint64_t end = 0;
	for (size_t i = 0; i < b->mm.count; i++) {
		kvi_mm_item *it = &q->mm[q->n_mm];
		if ((rv = mm_item(&b->entries[i], i, end, q->n_tokens, it,
				  err)) != KVI_OK) {
			return rv;
		}
		end = it->offset + it->length;
		q->n_mm++;
	}
	return KVI_OK;
}

/* common_check checks the fields both query forms share after their
 * prompt. */
static kvi_err
common_check(const qbody *b, kvc_qreq *q, kvc_qerr *err)
{
	bool has, pending = true;
	kvi_err rv;
	if ((rv = u64s_check(&b->instances, "instances", SIZE_MAX, "instances",
			     false, err)) != KVI_OK ||
	    (rv = kvc_api_get_u16(&b->dp_rank, "dp_rank", &q->dp_rank,
				  &q->has_dp_rank, err)) != KVI_OK ||
	    (rv = kvc_api_get_u32(&b->top_k, "top_k", 1, KVC_QREQ_TOP_K_MAX,
				  &q->top_k, &has, err)) != KVI_OK) {
		return rv;
	}
	rv = kvc_api_get_bool(&b->pending, "pending", &pending, err);
	q->no_pending = !pending;
	return rv;
}

static kvi_err
query_check(const qbody *b, size_t max, kvc_qreq *q, kvc_qerr *err)
{
	bool has;
	kvi_err rv;
	if ((rv = kvc_api_get_name(&b->model, "model_name", &q->model, err)) !=
		KVI_OK ||
	    (rv = tokens_check(&b->tokens, max, err)) != KVI_OK ||
	    (rv = kvc_api_get_string(&b->lora, "lora_name", &q->lora_name, &has,
				     err)) != KVI_OK ||
	    (rv = kvc_api_get_string(&b->salt, "cache_salt", &q->cache_salt,
				     &has, err)) != KVI_OK ||
	    (rv = mm_check(b, q, err)) != KVI_OK) {
		return rv;
	}
	return common_check(b, q, err);
}

static kvi_err
hash_query_check(const qbody *b, size_t max, kvc_qreq *q, kvc_qerr *err)
{
	kvi_err rv;
	if ((rv = kvc_api_get_name(&b->model, "model_name", &q->model, err)) !=
		KVI_OK ||
	    (rv = u64s_check(&b->hashes, "block_hashes", max, "hashes", true,
			     err)) != KVI_OK) {
		return rv;
	}
	return common_check(b, q, err);
}

/* routed_check checks a /routed body: its prompt as /query's, or as
 * /query_by_hash's when it has block_hashes and no token_ids, then
 * where the request went. */
static kvi_err
routed_check(const qbody *b, size_t max, kvc_qreq *q, kvc_qerr *err)
{
	bool by_hash =
	    b->tokens.v.type == KVC_JR_NONE && b->hashes.v.type != KVC_JR_NONE;
	bool has_pod;
	kvi_err rv = by_hash ? hash_query_check(b, max, q, err)
			     : query_check(b, max, q, err);
	if (rv != KVI_OK ||
	    (rv = kvc_api_get_string(&b->pod, "pod", &q->pod, &has_pod, err)) !=
		KVI_OK ||
	    (rv = kvc_api_get_u64(&b->instance_id, "instance_id",
				  &q->instance_id, &q->has_instance_id, err)) !=
		KVI_OK ||
	    (rv = kvc_api_get_u32(&b->ttl_ms, "ttl_ms", 1, KVC_QREQ_TTL_MAX_MS,
				  &q->ttl_ms, &q->has_ttl_ms, err)) != KVI_OK) {
		return rv;
	}
	return kvc_api_routed_rank(q, err);
}

/* parse reads a body of form and checks it. */
static kvi_err
parse(const char *text, size_t len, qform form, size_t max, kvc_qreq *out,
      kvc_qerr *err)
{
	qbody b = {0};
	kvc_qreq q = {0};
	kvi_err rv = read_body(text, len, form, max, &b, &q, err);
	if (rv == KVI_OK) {
		rv = form == FORM_HASHES   ? hash_query_check(&b, max, &q, err)
		     : form == FORM_TOKENS ? query_check(&b, max, &q, err)
					   : routed_check(&b, max, &q, err);
	}
	kvi_free(b.entries);
	if (rv != KVI_OK) {
		kvc_qreq_fini(&q);
		return rv;
	}
	if (q.n_tokens == 0) {
		kvi_free(q.token_ids);
		q.token_ids = NULL;
	}
	*out = q;
	return KVI_OK;
}

kvi_err
kvc_api_query_parse(const char *body, size_t len, size_t max_tokens,
		    kvc_qreq *out, kvc_qerr *err)
{
	return parse(body, len, FORM_TOKENS, max_tokens, out, err);
}

kvi_err
kvc_api_hash_query_parse(const char *body, size_t len, size_t max_hashes,
			 kvc_qreq *out, kvc_qerr *err)
{
	return parse(body, len, FORM_HASHES, max_hashes, out, err);
}

kvi_err
kvc_api_routed_parse(const char *body, size_t len, size_t max, kvc_qreq *out,
		     kvc_qerr *err)
{
	return parse(body, len, FORM_ROUTED, max, out, err);
}
