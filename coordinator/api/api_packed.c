#include "api_packed.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "api_json.h"

/* The parameters of the packed form. */
typedef enum param {
	P_MODEL,
	P_LORA,
	P_SALT,
	P_INSTANCES,
	P_DP_RANK,
	P_TOP_K,
	P_PENDING,
	P_POD,
	P_INSTANCE_ID,
	P_TTL_MS,
	P_PROMPT,
	P_COUNT,
} param;

static const char *const param_names[P_COUNT] = {
    "model_name", "lora_name", "cache_salt",  "instances", "dp_rank", "top_k",
    "pending",    "pod",       "instance_id", "ttl_ms",    "prompt",
};

/* The parameters each route takes, a bit per param. */
#define BIT(p) (1u << (p))
#define ANY_QUERY                                                              \
	(BIT(P_MODEL) | BIT(P_INSTANCES) | BIT(P_DP_RANK) | BIT(P_TOP_K) |     \
	 BIT(P_PENDING))
#define TOKENS_ONLY (BIT(P_LORA) | BIT(P_SALT))
#define ROUTED_ONLY                                                            \
	(BIT(P_POD) | BIT(P_INSTANCE_ID) | BIT(P_TTL_MS) | BIT(P_PROMPT))

/* How long a value quoted in a message may be. */
#define QUOTE_MAX 64

static unsigned
route_params(kvc_packed_route route)
{
	switch (route) {
	case KVC_PACKED_QUERY:
		return ANY_QUERY | TOKENS_ONLY;
	case KVC_PACKED_HASH_QUERY:
		return ANY_QUERY;
	case KVC_PACKED_ROUTED:
		return ANY_QUERY | TOKENS_ONLY | ROUTED_ONLY;
	}
	return 0;
}

static const char *
route_path(kvc_packed_route route)
{
	return route == KVC_PACKED_QUERY        ? "/query"
	       : route == KVC_PACKED_HASH_QUERY ? "/query_by_hash"
						: "/routed";
}

bool
kvc_api_is_packed(const char *ct)
{
	static const char want[] = "application/octet-stream";
	size_t n = sizeof(want) - 1;
	if (ct == NULL) {
		return false;
	}
	while (*ct == ' ' || *ct == '\t') {
		ct++;
	}
	return strncasecmp(ct, want, n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

/* ---- values -------------------------------------------------------------- */

/* digits reads s, decimal digits with no sign and no leading zero (but
 * "0"), into *out: false when it is not that or exceeds max. *range is
 * set when s is such digits and only its size is wrong. */
static bool
digits(const char *s, size_t n, uint64_t max, uint64_t *out, bool *range)
{
	*range = false;
	if (n == 0 || (s[0] == '0' && n > 1)) {
		return false;
	}
	uint64_t x = 0;
	bool over = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return false;
		}
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10) {
			over = true;
		} else {
			x = x * 10 + d;
		}
	}
	if (over || x > max) {
		*range = true;
		return false;
	}
	*out = x;
	return true;
}

/* get_uint reads parameter name's value v, an integer in min..max. */
static kvi_err
get_uint(const char *v, const char *name, uint64_t min, uint64_t max,
	 uint64_t *out, kvc_qerr *err)
{
	bool range;
	uint64_t x = 0;
	bool ok = digits(v, strlen(v), max, &x, &range);
	if (ok && x >= min) {
		*out = x;
		return KVI_OK;
	}
	if (!ok && !range) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "%s must be an integer, got \"%.*s\"", name,
				    QUOTE_MAX, v);
	}
	if (max == UINT64_MAX) {
		return kvc_qerr_set(err, KVI_ERANGE, 400,
				    "%s %.*s is not a u64", name, QUOTE_MAX, v);
	}
	if (max == UINT16_MAX && min == 0) {
		return kvc_qerr_set(err, KVI_ERANGE, 400,
				    "%s %.*s does not fit in u16", name,
				    QUOTE_MAX, v);
	}
	return kvc_qerr_set(err, KVI_ERANGE, 400,
			    "%s %.*s is not in %" PRIu64 "..%" PRIu64, name,
			    QUOTE_MAX, v, min, max);
}

/* get_instances reads a comma-separated list of u64 instance ids. */
static kvi_err
get_instances(const char *v, kvc_qreq *q, kvc_qerr *err)
{
	size_t cap = 0;
	for (size_t i = 0;; i++) {
		size_t n = strcspn(v, ",");
		uint64_t x;
		bool range;
		if (!digits(v, n, UINT64_MAX, &x, &range)) {
			return kvc_qerr_set(
			    err, range ? KVI_ERANGE : KVI_EINVAL, 400,
			    "instances[%zu]: \"%.*s\" is not a u64", i,
			    (int)(n < QUOTE_MAX ? n : QUOTE_MAX), v);
		}
		if (q->n_instances == cap) {
			cap = cap ? 2 * cap : 8;
			q->instances = kvi_reallocarray(q->instances, cap,
							sizeof(uint64_t));
		}
		q->instances[q->n_instances++] = x;
		if (v[n] == '\0') {
			return KVI_OK;
		}
		v += n + 1;
	}
}

/* ---- the request --------------------------------------------------------- */

/* find_params sorts the parameters given by name into vals: an unknown
 * one, or one given twice, is refused. */
static kvi_err
find_params(kvc_packed_route route, const char *const *params, size_t n,
	    const char *vals[P_COUNT], kvc_qerr *err)
{
	unsigned allowed = route_params(route);
	for (size_t i = 0; i < n; i++) {
		const char *name = params[2 * i];
		param p = 0;
		while (p < P_COUNT && strcmp(param_names[p], name) != 0) {
			p++;
		}
		if (p == P_COUNT || !(allowed & BIT(p))) {
			return kvc_qerr_set(err, KVI_EINVAL, 400,
					    "%.*s is not a parameter of a "
					    "packed %s",
					    QUOTE_MAX, name, route_path(route));
		}
		if (vals[p] != NULL) {
			return kvc_qerr_set(err, KVI_EINVAL, 400,
					    "%s is given more than once",
					    param_names[p]);
		}
		vals[p] = params[2 * i + 1];
	}
	return KVI_OK;
}

/* get_prompt copies the body, the prompt's packed integers of unit bytes
 * each, into the request. */
static kvi_err
get_prompt(bool by_tokens, size_t body_len, kvc_packed_copy_fn copy, void *arg,
	   size_t max, kvc_qreq *q, kvc_qerr *err)
{
	size_t unit = by_tokens ? sizeof(uint32_t) : sizeof(uint64_t);
	const char *field = by_tokens ? "token_ids" : "block_hashes";
	if (body_len % unit != 0) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "a packed body of %s holds %zu-byte "
				    "integers; %zu bytes is not a multiple of "
				    "%zu",
				    field, unit, body_len, unit);
	}
	size_t count = body_len / unit;
	if (count > max) {
		return kvc_qerr_set(err, KVI_ETOOBIG, 413,
				    "%s has %zu %s, more than the maximum of "
				    "%zu",
				    field, count,
				    by_tokens ? "tokens" : "hashes", max);
	}
	if (count == 0) {
		return KVI_OK;
	}
	void *dst = kvi_malloc(body_len);
	copy(arg, dst);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	for (size_t i = 0; i < count; i++) {
		if (by_tokens) {
			uint32_t *t = dst;
			t[i] = __builtin_bswap32(t[i]);
		} else {
			uint64_t *h = dst;
			h[i] = __builtin_bswap64(h[i]);
		}
	}
#endif
	if (by_tokens) {
		q->token_ids = dst;
		q->n_tokens = count;
	} else {
		q->block_hashes = dst;
		q->n_hashes = count;
	}
	return KVI_OK;
}

/* get_common reads the parameters every route shares after its prompt,
 * in the JSON form's order. */
static kvi_err
get_common(const char *vals[P_COUNT], kvc_qreq *q, kvc_qerr *err)
{
	uint64_t x;
	kvi_err rv;
	if (vals[P_INSTANCES] != NULL &&
	    (rv = get_instances(vals[P_INSTANCES], q, err)) != KVI_OK) {
		return rv;
	}
	if (vals[P_DP_RANK] != NULL) {
		if ((rv = get_uint(vals[P_DP_RANK], "dp_rank", 0, UINT16_MAX,
				   &x, err)) != KVI_OK) {
			return rv;
		}
		q->has_dp_rank = true;
		q->dp_rank = (uint16_t)x;
	}
	if (vals[P_TOP_K] != NULL) {
		if ((rv = get_uint(vals[P_TOP_K], "top_k", 1,
				   KVC_QREQ_TOP_K_MAX, &x, err)) != KVI_OK) {
			return rv;
		}
		q->top_k = (uint32_t)x;
	}
	const char *p = vals[P_PENDING];
	if (p != NULL) {
		if (strcmp(p, "true") != 0 && strcmp(p, "false") != 0) {
			return kvc_qerr_set(err, KVI_EINVAL, 400,
					    "pending must be true or false, "
					    "got \"%.*s\"",
					    QUOTE_MAX, p);
		}
		q->no_pending = p[0] == 'f';
	}
	return KVI_OK;
}

/* get_routed reads where a routed request went: pod or instance_id
 * (exactly one), and ttl_ms. */
static kvi_err
get_routed(const char *vals[P_COUNT], kvc_qreq *q, kvc_qerr *err)
{
	kvi_err rv;
	uint64_t x;
	if (vals[P_POD] != NULL) {
		q->pod = kvi_strdup(vals[P_POD]);
	}
	if (vals[P_INSTANCE_ID] != NULL) {
		if ((rv = get_uint(vals[P_INSTANCE_ID], "instance_id", 0,
				   UINT64_MAX, &q->instance_id, err)) !=
		    KVI_OK) {
			return rv;
		}
		q->has_instance_id = true;
	}
	if (vals[P_TTL_MS] != NULL) {
		if ((rv = get_uint(vals[P_TTL_MS], "ttl_ms", 1,
				   KVC_QREQ_TTL_MAX_MS, &x, err)) != KVI_OK) {
			return rv;
		}
		q->has_ttl_ms = true;
		q->ttl_ms = (uint32_t)x;
	}
	return kvc_api_routed_rank(q, err);
}

/* routed_by_tokens says whether a routed request's body is token ids
 * (prompt=token_ids, the default) or block hashes (prompt=block_hashes). */
static kvi_err
routed_by_tokens(const char *prompt, bool *by_tokens, kvc_qerr *err)
{
	*by_tokens = prompt == NULL || strcmp(prompt, "token_ids") == 0;
	if (!*by_tokens && strcmp(prompt, "block_hashes") != 0) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "prompt must be token_ids or "
				    "block_hashes, got \"%.*s\"",
				    QUOTE_MAX, prompt);
	}
	return KVI_OK;
}

static kvi_err
packed_read(kvc_packed_route route, const char *vals[P_COUNT], size_t body_len,
	    kvc_packed_copy_fn copy, void *arg, size_t max, kvc_qreq *q,
	    kvc_qerr *err)
{
	bool by_tokens = route != KVC_PACKED_HASH_QUERY;
	kvi_err rv;
	if (route == KVC_PACKED_ROUTED &&
	    (rv = routed_by_tokens(vals[P_PROMPT], &by_tokens, err)) !=
		KVI_OK) {
		return rv;
	}
	if (!by_tokens && (vals[P_LORA] != NULL || vals[P_SALT] != NULL)) {
		return kvc_qerr_set(
		    err, KVI_EINVAL, 400, "%s applies to token ids only",
		    vals[P_LORA] != NULL ? "lora_name" : "cache_salt");
	}
	if (vals[P_MODEL] == NULL) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "model_name is missing");
	}
	if (vals[P_MODEL][0] == '\0') {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "model_name is empty");
	}
	q->model = kvi_strdup(vals[P_MODEL]);
	if ((rv = get_prompt(by_tokens, body_len, copy, arg, max, q, err)) !=
	    KVI_OK) {
		return rv;
	}
	if (vals[P_LORA] != NULL) {
		q->lora_name = kvi_strdup(vals[P_LORA]);
	}
	if (vals[P_SALT] != NULL) {
		q->cache_salt = kvi_strdup(vals[P_SALT]);
	}
	if ((rv = get_common(vals, q, err)) != KVI_OK) {
		return rv;
	}
	return route == KVC_PACKED_ROUTED ? get_routed(vals, q, err) : KVI_OK;
}

kvi_err
kvc_api_packed_parse(kvc_packed_route route, const char *const *params,
		     size_t n, size_t body_len, kvc_packed_copy_fn copy,
		     void *arg, size_t max, kvc_qreq *out, kvc_qerr *err)
{
	const char *vals[P_COUNT] = {0};
	kvc_qreq q = {0};
	kvi_err rv = find_params(route, params, n, vals, err);
	if (rv == KVI_OK) {
		rv =
		    packed_read(route, vals, body_len, copy, arg, max, &q, err);
	}
	if (rv != KVI_OK) {
		kvc_qreq_fini(&q);
		return rv;
	}
	*out = q;
	return KVI_OK;
}
