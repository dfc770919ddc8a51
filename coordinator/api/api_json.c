#include "api_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

/* How much room a value quoted in a message takes (kvc_jr_text). */
#define VALUE_TEXT (KVC_JR_TEXT_MAX + 8)

/* ---- bodies -------------------------------------------------------------- */

kvi_err
kvc_api_body_error(const kvc_jr *r, kvc_jr_type top, kvc_qerr *err)
{
	int line, column, position;
	const char *m = kvc_jr_error(r, &line, &column, &position);
	if (m != NULL) {
		return kvc_qerr_set(err, KVI_EPROTO, 400,
				    "invalid JSON: %s at line %d, column %d "
				    "(byte %d)",
				    m, line, column, position);
	}
	return kvc_qerr_set(err, KVI_EINVAL, 400,
			    "the body must be a JSON object, not %s",
			    kvc_jr_type_name(top));
}

/* field_index returns the index of key k[0..n) in names[0..count), or
 * count when it is none of them. */
static size_t
field_index(const char *const *names, size_t count, const char *k, size_t n)
{
	for (size_t i = 0; i < count; i++) {
		if (strlen(names[i]) == n && memcmp(names[i], k, n) == 0) {
			return i;
		}
	}
	return count;
}

/* read_fields reads body as a JSON object whose members are all read as
 * values: the value of names[i] into vals[i] (type KVC_JR_NONE when
 * absent), the others stepped over. */
static kvi_err
read_fields(const char *body, size_t len, const char *const *names,
	    size_t count, kvc_jr_val *vals, kvc_qerr *err)
{
	kvc_jr r;
	kvc_jr_iter it;
	kvc_jr_init(&r, body, len);
	memset(vals, 0, count * sizeof(*vals));
	kvc_jr_type top = kvc_jr_top(&r, &it);
	const char *k;
	size_t n;
	kvc_jr_val other;
	while (top == KVC_JR_OBJECT && kvc_jr_member(&r, &it, &k, &n)) {
		size_t i = field_index(names, count, k, n);
		if (!kvc_jr_value(&r, i < count ? &vals[i] : &other)) {
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

/* ---- values -------------------------------------------------------------- */

/* digits_u64 reads s[0..n), decimal digits without a sign or a leading
 * zero, into *out; false when it is not that or exceeds 2^64-1. */
static bool
digits_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0 || n > 20 || (s[0] == '0' && n > 1)) {
		return false;
	}
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return false;
		}
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10) {
			return false;
		}
		x = x * 10 + d;
	}
	*out = x;
	return true;
}

static bool
is_int(const kvc_jr_val *v)
{
	return v->type == KVC_JR_INT || v->type == KVC_JR_BIG;
}

bool
kvc_api_uint_of(const kvc_jr_val *v, uint64_t *out)
{
	if (!is_int(v) || !v->fits_u64 || (v->neg && v->mag != 0)) {
		return false;
	}
	*out = v->mag;
	return true;
}

bool
kvc_api_u64_of(const kvc_jr_val *v, uint64_t *out)
{
	if (v->type != KVC_JR_STRING) {
		return kvc_api_uint_of(v, out);
	}
	if (!v->escaped) {
		return digits_u64(v->text + 1, v->len - 2, out);
	}
	size_t n;
	char *s = kvc_jr_string(v, &n);
	bool ok = digits_u64(s, n, out);
	kvi_free(s);
	return ok;
}

kvi_err
kvc_api_value_u64(const kvc_jr_val *v, const char *what, uint64_t *out,
		  kvc_qerr *err)
{
	uint64_t x;
	if (kvc_api_u64_of(v, &x)) {
		*out = x;
		return KVI_OK;
	}
	char text[VALUE_TEXT];
	kvc_jr_text(v, text, sizeof(text));
	return kvc_qerr_set(err, is_int(v) ? KVI_ERANGE : KVI_EINVAL, 400,
			    "%s: %s is not a u64", what, text);
}

/* ---- fields -------------------------------------------------------------- */

/* lookup decides whether the field's value v is to be read: KVI_OK with
 * *go false for an optional one absent or null; a required one must be
 * there (null too: then its type is wrong). */
static kvi_err
lookup(const kvc_jr_val *v, const char *field, bool *present, bool *go,
       kvc_qerr *err)
{
	if (present != NULL) {
		*present = v->type != KVC_JR_NONE && v->type != KVC_JR_NULL;
		*go = *present;
		return KVI_OK;
	}
	if (v->type == KVC_JR_NONE) {
		return kvc_qerr_set(err, KVI_EINVAL, 400, "%s is missing",
				    field);
	}
	*go = true;
	return KVI_OK;
}

kvi_err
kvc_api_type_error(const kvc_jr_val *v, const char *field, const char *want,
		   kvc_qerr *err)
{
	char text[VALUE_TEXT];
	kvc_jr_text(v, text, sizeof(text));
	return kvc_qerr_set(err, KVI_EINVAL, 400, "%s must be %s, got %s",
			    field, want, text);
}

kvi_err
kvc_api_get_bool(const kvc_jr_val *v, const char *field, bool *out,
		 kvc_qerr *err)
{
	if (v->type == KVC_JR_NONE || v->type == KVC_JR_NULL) {
		return KVI_OK;
	}
	if (v->type != KVC_JR_TRUE && v->type != KVC_JR_FALSE) {
		return kvc_api_type_error(v, field, "a boolean", err);
	}
	*out = v->type == KVC_JR_TRUE;
	return KVI_OK;
}

kvi_err
kvc_api_get_u64(const kvc_jr_val *v, const char *field, uint64_t *out,
		bool *present, kvc_qerr *err)
{
	bool go = false;
	uint64_t x;
	kvi_err rv = lookup(v, field, present, &go, err);
	if (rv != KVI_OK || !go) {
		return rv;
	}
	if (!kvc_api_u64_of(v, &x)) {
		char text[VALUE_TEXT];
		kvc_jr_text(v, text, sizeof(text));
		return kvc_qerr_set(err, is_int(v) ? KVI_ERANGE : KVI_EINVAL,
				    400, "%s %s is not a u64", field, text);
	}
	*out = x;
	return KVI_OK;
}

/* get_uint reads an integer field in min..max; `range` ends the message
 * of a value outside it ("does not fit in u16"; NULL: "is not in
 * min..max"), written only then. */
static kvi_err
get_uint(const kvc_jr_val *v, const char *field, uint64_t min, uint64_t max,
	 const char *range, uint64_t *out, bool *present, kvc_qerr *err)
{
	bool go = false;
	uint64_t x;
	kvi_err rv = lookup(v, field, present, &go, err);
	if (rv != KVI_OK || !go) {
		return rv;
	}
	if (!is_int(v)) {
		return kvc_api_type_error(v, field, "an integer", err);
	}
	if (!kvc_api_uint_of(v, &x) || x < min || x > max) {
		char text[VALUE_TEXT];
		kvc_jr_text(v, text, sizeof(text));
		if (range != NULL) {
			return kvc_qerr_set(err, KVI_ERANGE, 400, "%s %s %s",
					    field, text, range);
		}
		return kvc_qerr_set(err, KVI_ERANGE, 400,
				    "%s %s is not in %" PRIu64 "..%" PRIu64,
				    field, text, min, max);
	}
	*out = x;
	return KVI_OK;
}

kvi_err
kvc_api_get_u16(const kvc_jr_val *v, const char *field, uint16_t *out,
		bool *present, kvc_qerr *err)
{
	uint64_t x = 0;
	kvi_err rv = get_uint(v, field, 0, UINT16_MAX, "does not fit in u16",
			      &x, present, err);
	if (rv == KVI_OK && (present == NULL || *present)) {
		*out = (uint16_t)x;
	}
	return rv;
}

kvi_err
kvc_api_get_u32(const kvc_jr_val *v, const char *field, uint32_t min,
		uint32_t max, uint32_t *out, bool *present, kvc_qerr *err)
{
	uint64_t x = 0;
	const char *range =
	    min == 0 && max == UINT32_MAX ? "is not a u32" : NULL;
	kvi_err rv = get_uint(v, field, min, max, range, &x, present, err);
	if (rv == KVI_OK && (present == NULL || *present)) {
		*out = (uint32_t)x;
	}
	return rv;
}

kvi_err
kvc_api_get_string(const kvc_jr_val *v, const char *field, char **out,
		   bool *present, kvc_qerr *err)
{
	bool go = false;
	kvi_err rv = lookup(v, field, present, &go, err);
	if (rv != KVI_OK || !go) {
		return rv;
	}
	if (v->type != KVC_JR_STRING) {
		return kvc_api_type_error(v, field, "a string", err);
	}
	*out = kvc_jr_string(v, NULL);
	return KVI_OK;
}

kvi_err
kvc_api_get_name(const kvc_jr_val *v, const char *field, char **out,
		 kvc_qerr *err)
{
	char *s = NULL;
	kvi_err rv = kvc_api_get_string(v, field, &s, NULL, err);
	if (rv == KVI_OK && s[0] == '\0') {
		kvi_free(s);
		return kvc_qerr_set(err, KVI_EINVAL, 400, "%s is empty", field);
	}
	if (rv == KVI_OK) {
		*out = s;
	}
	return rv;
}

kvi_err
kvc_api_routed_rank(const kvc_qreq *q, kvc_qerr *err)
{
	if (q->pod != NULL && q->pod[0] == '\0') {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "pod must not be empty");
	}
	if ((q->pod != NULL) == q->has_instance_id) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "name the rank the request went to by "
				    "pod or by instance_id (one of them), "
				    "with dp_rank");
	}
	return KVI_OK;
}

/* ---- registration -------------------------------------------------------- */

/* The fields of /register and /unregister bodies. */
enum {
	F_NAME = 0,
	F_INSTANCE_ID,
	F_MODEL,
	F_BLOCK_SIZE,
	F_IP,
	F_ZMQ_PORT,
	F_RECOVER_PORT,
	F_REPLAY_PORT,
	F_METRICS_PORT,
	F_DP_SIZE,
	F_DP_START_RANK,
	F_ENDPOINT,
	F_DP_RANK,
	F_REPLAY_ENDPOINT,
	F_RECOVER_ENDPOINT,
	F_COUNT
};

static const char *const fields[F_COUNT] = {
    [F_NAME] = "name",
    [F_INSTANCE_ID] = "instance_id",
    [F_MODEL] = "model_name",
    [F_BLOCK_SIZE] = "block_size",
    [F_IP] = "ip",
    [F_ZMQ_PORT] = "zmq_port",
    [F_RECOVER_PORT] = "recover_port",
    [F_REPLAY_PORT] = "replay_port",
    [F_METRICS_PORT] = "metrics_port",
    [F_DP_SIZE] = "dp_size",
    [F_DP_START_RANK] = "dp_start_rank",
    [F_ENDPOINT] = "endpoint",
    [F_DP_RANK] = "dp_rank",
    [F_REPLAY_ENDPOINT] = "replay_endpoint",
    [F_RECOVER_ENDPOINT] = "recover_endpoint",
};

/* form tells the per-pod form (name) from the per-instance one
 * (instance_id): *named says which; neither or both is an error. */
static kvi_err
form(const kvc_jr_val *v, bool *named, kvc_qerr *err)
{
	bool name =
	    v[F_NAME].type != KVC_JR_NONE && v[F_NAME].type != KVC_JR_NULL;
	bool id = v[F_INSTANCE_ID].type != KVC_JR_NONE &&
		  v[F_INSTANCE_ID].type != KVC_JR_NULL;
	if (name == id) {
		return kvc_qerr_set(
		    err, KVI_EINVAL, 400, "%s",
		    name ? "give either name (a pod) or instance_id, not both"
			 : "name (a pod) or instance_id is missing");
	}
	*named = name;
	return KVI_OK;
}

static kvi_err
register_pod(const kvc_jr_val *v, uint32_t default_dp_size, kvc_pod *p,
	     kvc_qerr *err)
{
	bool has = false, has_start = false;
	kvi_err rv;
	if ((rv = kvc_api_get_string(&v[F_NAME], "name", &p->name, NULL,
				     err)) != KVI_OK ||
	    (rv = kvc_api_get_string(&v[F_IP], "ip", &p->ip, NULL, err)) !=
		KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_ZMQ_PORT], "zmq_port", 1, 65535,
				  &p->zmq_port, NULL, err)) != KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_RECOVER_PORT], "recover_port", 1, 65535,
				  &p->recover_port, &p->has_recover_port,
				  err)) != KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_REPLAY_PORT], "replay_port", 1, 65535,
				  &p->replay_port, &p->has_replay_port, err)) !=
		KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_METRICS_PORT], "metrics_port", 1, 65535,
				  &p->metrics_port, &p->has_metrics_port,
				  err)) != KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_DP_SIZE], "dp_size", 1, KVC_DP_SIZE_MAX,
				  &p->dp_size, &has, err)) != KVI_OK ||
	    (rv = kvc_api_get_u32(&v[F_DP_START_RANK], "dp_start_rank", 0,
				  UINT16_MAX, &p->dp_start_rank, &has_start,
				  err)) != KVI_OK) {
		return rv;
	}
	if (!has) {
		p->dp_size = default_dp_size;
	}
	kvc_pod_origin_given(p, has, has_start);
	p->instance_id = kvc_instance_id(p->name);
	return KVI_OK;
}

static kvi_err
register_rank(const kvc_jr_val *v, kvc_pod *p, kvc_qerr *err)
{
	bool has;
	uint16_t rank = 0;
	kvi_err rv;
	if ((rv = kvc_api_get_u64(&v[F_INSTANCE_ID], "instance_id",
				  &p->instance_id, NULL, err)) != KVI_OK ||
	    (rv = kvc_api_get_string(&v[F_ENDPOINT], "endpoint", &p->endpoint,
				     NULL, err)) != KVI_OK ||
	    (rv = kvc_api_get_u16(&v[F_DP_RANK], "dp_rank", &rank, &has,
				  err)) != KVI_OK ||
	    (rv = kvc_api_get_string(&v[F_REPLAY_ENDPOINT], "replay_endpoint",
				     &p->replay_endpoint, &has, err)) !=
		KVI_OK ||
	    (rv = kvc_api_get_string(&v[F_RECOVER_ENDPOINT], "recover_endpoint",
				     &p->recover_endpoint, &has, err)) !=
		KVI_OK) {
		return rv;
	}
	p->rank = rank;
	p->dp_size = 1;
	return KVI_OK;
}

kvi_err
kvc_api_register_parse(const char *body, size_t len, uint32_t default_dp_size,
		       kvc_pod *out, kvc_qerr *err)
{
	kvc_pod p = {.source = KVC_SOURCE_HTTP};
	bool named = false;
	kvc_jr_val v[F_COUNT];
	kvi_err rv = read_fields(body, len, fields, F_COUNT, v, err);
	if (rv != KVI_OK) {
		return rv;
	}
	if ((rv = form(v, &named, err)) == KVI_OK &&
	    (rv = kvc_api_get_string(&v[F_MODEL], "model_name", &p.model, NULL,
				     err)) == KVI_OK &&
	    (rv = kvc_api_get_u32(&v[F_BLOCK_SIZE], "block_size", 0, UINT32_MAX,
				  &p.block_size, NULL, err)) == KVI_OK) {
		rv = named ? register_pod(v, default_dp_size, &p, err)
			   : register_rank(v, &p, err);
	}
	if (rv == KVI_OK) {
		char msg[sizeof(err->message)];
		if ((rv = kvc_pod_check(&p, msg, sizeof(msg))) != KVI_OK) {
			kvc_qerr_set(err, rv, 400, "%s", msg);
		}
	}
	if (rv != KVI_OK) {
		kvc_pod_fini(&p);
		return rv;
	}
	*out = p;
	return KVI_OK;
}

void
kvc_api_unregister_fini(kvc_api_unregister *u)
{
	kvi_free(u->name);
	kvi_free(u->model);
	memset(u, 0, sizeof(*u));
}

/* unregister_fields reads the fields of an /unregister body. */
static kvi_err
unregister_fields(const kvc_jr_val *v, kvc_api_unregister *u, kvc_qerr *err)
{
	bool named = false;
	kvi_err rv = form(v, &named, err);
	if (rv == KVI_OK && named &&
	    (rv = kvc_api_get_name(&v[F_NAME], "name", &u->name, err)) ==
		KVI_OK) {
		if (strlen(u->name) > KVC_NAME_MAX) {
			return kvc_qerr_set(err, KVI_EINVAL, 400,
					    "name must be 1..%d characters",
					    KVC_NAME_MAX);
		}
		u->instance_id = kvc_instance_id(u->name);
	} else if (rv == KVI_OK && !named &&
		   (rv = kvc_api_get_u64(&v[F_INSTANCE_ID], "instance_id",
					 &u->instance_id, NULL, err)) ==
		       KVI_OK) {
		rv =
		    kvc_api_get_name(&v[F_MODEL], "model_name", &u->model, err);
	}
	if (rv != KVI_OK) {
		return rv;
	}
	return kvc_api_get_u16(&v[F_DP_RANK], "dp_rank", &u->dp_rank,
			       &u->has_dp_rank, err);
}

kvi_err
kvc_api_unregister_parse(const char *body, size_t len, kvc_api_unregister *out,
			 kvc_qerr *err)
{
	kvc_api_unregister u = {0};
	kvc_jr_val v[F_COUNT];
	kvi_err rv = read_fields(body, len, fields, F_COUNT, v, err);
	if (rv == KVI_OK) {
		rv = unregister_fields(v, &u, err);
	}
	if (rv != KVI_OK) {
		kvc_api_unregister_fini(&u);
		return rv;
	}
	*out = u;
	return KVI_OK;
}
