/*
 * fuzz_api_json_ref_bodies.c - the reference's reading of each request
 * body (/query, /query_by_hash, /register, /unregister) with the field
 * readers of fuzz_api_json_ref.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fuzz_api_json_ref_int.h"

/* ---- queries ------------------------------------------------------------- */

static kvi_err
ref_get_token_ids(const json_t *o, size_t max, kvc_qreq *q, kvc_qerr *err)
{
	const json_t *a = NULL;
	kvi_err rv =
	    ref_get_array(o, "token_ids", max, "tokens", &a, NULL, err);
	if (rv != KVI_OK || json_array_size(a) == 0) {
		return rv;
	}
	size_t count = json_array_size(a);
	q->token_ids = kvi_reallocarray(NULL, count, sizeof(uint32_t));
	q->n_tokens = count;
	for (size_t i = 0; i < count; i++) {
		const json_t *v = json_array_get(a, i);
		uint64_t x;
		if (!ref_uint_of(v, &x) || x > UINT32_MAX) {
			char text[REF_VALUE_TEXT + 8];
			ref_value_text(v, text, sizeof(text));
			return kvc_qerr_set(
			    err, ref_is_int(v) ? KVI_ERANGE : KVI_EINVAL, 400,
			    "token_ids[%zu]: %s is not a u32", i, text);
		}
		q->token_ids[i] = (uint32_t)x;
	}
	return KVI_OK;
}

/* ref_mm_u64 reads mm_features[i].field, a u64. */
static kvi_err
ref_mm_u64(const json_t *e, size_t i, const char *field, uint64_t *out,
	   kvc_qerr *err)
{
	const json_t *v = json_object_get(e, field);
	if (v == NULL || !ref_uint_of(v, out)) {
		char text[REF_VALUE_TEXT + 8];
		if (v == NULL) {
			snprintf(text, sizeof(text), "missing");
		} else {
			ref_value_text(v, text, sizeof(text));
		}
		return kvc_qerr_set(
		    err, v != NULL && ref_is_int(v) ? KVI_ERANGE : KVI_EINVAL,
		    400, "mm_features[%zu].%s: %s is not a u64", i, field,
		    text);
	}
	return KVI_OK;
}

/* ref_mm_item reads entry i of mm_features into it; prev_end is where
 * the entry before it ends. */
static kvi_err
ref_mm_item(const json_t *e, size_t i, uint64_t prev_end, size_t n_tokens,
	    kvi_mm_item *it, kvc_qerr *err)
{
	if (!json_is_object(e)) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "mm_features[%zu] must be an object", i);
	}
	const json_t *id = json_object_get(e, "identifier");
	/* a big integer (a marked string) is no identifier either: the
	 * code before the one-pass reader took it (fixed there too) */
	if (!json_is_string(id) || ref_is_big(id) ||
	    json_string_length(id) == 0) {
		return kvc_qerr_set(err, KVI_EINVAL, 400,
				    "mm_features[%zu].identifier must be "
				    "a non-empty string",
				    i);
	}
	kvi_err rv;
	if ((rv = ref_mm_u64(e, i, "offset", &it->offset, err)) != KVI_OK ||
	    (rv = ref_mm_u64(e, i, "length", &it->length, err)) != KVI_OK) {
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
	it->id = kvi_strndup(json_string_value(id), json_string_length(id));
	it->id_len = json_string_length(id);
	return KVI_OK;
}

/* ref_get_mm reads mm_features, which needs token_ids read first. */
static kvi_err
ref_get_mm(const json_t *o, kvc_qreq *q, kvc_qerr *err)
{
	const json_t *a = NULL;
	bool has;
	kvi_err rv = ref_get_array(o, "mm_features", q->n_tokens, "items", &a,
				   &has, err);
	if (rv != KVI_OK || a == NULL || json_array_size(a) == 0) {
		return rv;
	}
	size_t n = json_array_size(a);
	q->mm = kvi_calloc(n, sizeof(*q->mm));
	uint64_t end = 0;
	for (size_t i = 0; i < n; i++) {
		rv = ref_mm_item(json_array_get(a, i), i, end, q->n_tokens,
				 &q->mm[q->n_mm], err);
		if (rv != KVI_OK) {
			return rv;
		}
		end = q->mm[q->n_mm].offset + q->mm[q->n_mm].length;
		q->n_mm++;
	}
	return KVI_OK;
}

/* ref_query_common reads the fields both query forms share. */
static kvi_err
ref_query_common(const json_t *o, kvc_qreq *q, kvc_qerr *err)
{
	bool has;
	kvi_err rv =
	    ref_get_u64_array(o, "instances", SIZE_MAX, "instances",
			      &q->instances, &q->n_instances, &has, err);
	if (rv != KVI_OK ||
	    (rv = ref_get_u16(o, "dp_rank", &q->dp_rank, &q->has_dp_rank,
			      err)) != KVI_OK) {
		return rv;
	}
	bool pending = true;
	if ((rv = ref_get_u32(o, "top_k", 1, KVC_QREQ_TOP_K_MAX, &q->top_k,
			      &has, err)) != KVI_OK) {
		return rv;
	}
	rv = ref_get_bool(o, "pending", &pending, err);
	q->no_pending = !pending;
	return rv;
}

/* ref_query_done hands q to out on success and frees it otherwise. */
static kvi_err
ref_query_done(kvi_err rv, kvc_qreq *q, kvc_qreq *out)
{
	if (rv != KVI_OK) {
		kvc_qreq_fini(q);
		return rv;
	}
	*out = *q;
	return KVI_OK;
}

kvi_err
ref_query_parse(const char *body, size_t len, size_t max_tokens, kvc_qreq *out,
		kvc_qerr *err)
{
	kvc_qreq q = {0};
	bool has;
	json_t *o;
	kvi_err rv = ref_json_load(body, len, &o, err);
	if (rv != KVI_OK) {
		return rv;
	}
	if ((rv = ref_get_name(o, "model_name", &q.model, err)) != KVI_OK ||
	    (rv = ref_get_token_ids(o, max_tokens, &q, err)) != KVI_OK ||
	    (rv = ref_get_string(o, "lora_name", &q.lora_name, &has, err)) !=
		KVI_OK ||
	    (rv = ref_get_string(o, "cache_salt", &q.cache_salt, &has, err)) !=
		KVI_OK ||
	    (rv = ref_get_mm(o, &q, err)) != KVI_OK) {
		json_decref(o);
		return ref_query_done(rv, &q, out);
	}
	rv = ref_query_common(o, &q, err);
	json_decref(o);
	return ref_query_done(rv, &q, out);
}

kvi_err
ref_hash_query_parse(const char *body, size_t len, size_t max_hashes,
		     kvc_qreq *out, kvc_qerr *err)
{
	kvc_qreq q = {0};
	json_t *o;
	kvi_err rv = ref_json_load(body, len, &o, err);
	if (rv != KVI_OK) {
		return rv;
	}
	if ((rv = ref_get_name(o, "model_name", &q.model, err)) == KVI_OK &&
	    (rv = ref_get_u64_array(o, "block_hashes", max_hashes, "hashes",
				    &q.block_hashes, &q.n_hashes, NULL, err)) ==
		KVI_OK) {
		rv = ref_query_common(o, &q, err);
	}
	json_decref(o);
	return ref_query_done(rv, &q, out);
}

/* ---- registration -------------------------------------------------------- */

/* ref_form tells the per-pod form (name) from the per-instance one
 * (instance_id): *named says which; neither or both is an error. */
static kvi_err
ref_form(const json_t *o, bool *named, kvc_qerr *err)
{
	const json_t *n = json_object_get(o, "name");
	const json_t *i = json_object_get(o, "instance_id");
	bool name = n != NULL && !json_is_null(n);
	bool id = i != NULL && !json_is_null(i);
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
ref_register_pod(const json_t *o, uint32_t default_dp_size, kvc_pod *p,
		 kvc_qerr *err)
{
	bool has = false, has_start = false;
	kvi_err rv;
	if ((rv = ref_get_string(o, "name", &p->name, NULL, err)) != KVI_OK ||
	    (rv = ref_get_string(o, "ip", &p->ip, NULL, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "zmq_port", 1, 65535, &p->zmq_port, NULL,
			      err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "recover_port", 1, 65535, &p->recover_port,
			      &p->has_recover_port, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "replay_port", 1, 65535, &p->replay_port,
			      &p->has_replay_port, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "metrics_port", 1, 65535, &p->metrics_port,
			      &p->has_metrics_port, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "dp_size", 1, KVC_DP_SIZE_MAX, &p->dp_size,
			      &has, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "dp_start_rank", 0, UINT16_MAX,
			      &p->dp_start_rank, &has_start, err)) != KVI_OK) {
		return rv;
	}
	if (!has) {
		p->dp_size = default_dp_size;
	}
	p->instance_id = kvc_instance_id(p->name);
	return KVI_OK;
}

static kvi_err
ref_register_rank(const json_t *o, kvc_pod *p, kvc_qerr *err)
{
	bool has;
	uint16_t rank = 0;
	kvi_err rv;
	if ((rv = ref_get_u64(o, "instance_id", &p->instance_id, NULL, err)) !=
		KVI_OK ||
	    (rv = ref_get_string(o, "endpoint", &p->endpoint, NULL, err)) !=
		KVI_OK ||
	    (rv = ref_get_u16(o, "dp_rank", &rank, &has, err)) != KVI_OK ||
	    (rv = ref_get_string(o, "replay_endpoint", &p->replay_endpoint,
				 &has, err)) != KVI_OK ||
	    (rv = ref_get_string(o, "recover_endpoint", &p->recover_endpoint,
				 &has, err)) != KVI_OK) {
		return rv;
	}
	p->rank = rank;
	p->dp_size = 1;
	return KVI_OK;
}

kvi_err
ref_register_parse(const char *body, size_t len, uint32_t default_dp_size,
		   kvc_pod *out, kvc_qerr *err)
{
	kvc_pod p = {.source = KVC_SOURCE_HTTP};
	bool named = false;
	json_t *o;
	kvi_err rv = ref_json_load(body, len, &o, err);
	if (rv != KVI_OK) {
		return rv;
	}
	if ((rv = ref_form(o, &named, err)) == KVI_OK &&
	    (rv = ref_get_string(o, "model_name", &p.model, NULL, err)) ==
		KVI_OK &&
	    (rv = ref_get_u32(o, "block_size", 0, UINT32_MAX, &p.block_size,
			      NULL, err)) == KVI_OK) {
		rv = named ? ref_register_pod(o, default_dp_size, &p, err)
			   : ref_register_rank(o, &p, err);
	}
	json_decref(o);
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

/* ref_unregister_fields reads the fields of an /unregister body. */
static kvi_err
ref_unregister_fields(const json_t *o, kvc_api_unregister *u, kvc_qerr *err)
{
	bool named = false;
	kvi_err rv = ref_form(o, &named, err);
	if (rv == KVI_OK && named &&
	    (rv = ref_get_name(o, "name", &u->name, err)) == KVI_OK) {
		if (strlen(u->name) > KVC_NAME_MAX) {
			return kvc_qerr_set(err, KVI_EINVAL, 400,
					    "name must be 1..%d characters",
					    KVC_NAME_MAX);
		}
		u->instance_id = kvc_instance_id(u->name);
	} else if (rv == KVI_OK && !named &&
		   (rv = ref_get_u64(o, "instance_id", &u->instance_id, NULL,
				     err)) == KVI_OK) {
		rv = ref_get_name(o, "model_name", &u->model, err);
	}
	if (rv != KVI_OK) {
		return rv;
	}
	return ref_get_u16(o, "dp_rank", &u->dp_rank, &u->has_dp_rank, err);
}

kvi_err
ref_unregister_parse(const char *body, size_t len, kvc_api_unregister *out,
		     kvc_qerr *err)
{
	kvc_api_unregister u = {0};
	json_t *o;
	kvi_err rv = ref_json_load(body, len, &o, err);
	if (rv != KVI_OK) {
		return rv;
	}
	rv = ref_unregister_fields(o, &u, err);
	json_decref(o);
	if (rv != KVI_OK) {
		kvc_api_unregister_fini(&u);
		return rv;
	}
	*out = u;
	return KVI_OK;
}
