/*
 * fuzz_api_json_ref.c - the reference the one-pass body parsers are
 * checked against (fuzz_api_json_equiv.c): the API's request bodies read
 * with jansson, as the coordinator read them before (its general path,
 * kept here as it was but for the names).
 *
 * jansson refuses an integer literal beyond int64, and the API means such
 * a literal exactly, so a body is scanned first (outside strings,
 * honouring escapes) for them and, only when there are some, a copy is
 * parsed in which each is replaced by a string holding a NUL byte and
 * the literal's text: a string no client can send (JSON spells a NUL
 * \\u0000, and a body with one is parsed as it is and refused). The field
 * readers turn these back into exact values. A body whose copy fails to
 * parse is reported with jansson's message for the original text.
 *
 * One change to what the coordinator did: an mm_features identifier that
 * is such an integer is refused like any other integer (it was taken as
 * a string of a NUL and digits).
 */
#include "fuzz_api_json_ref.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define REF_VALUE_TEXT 48

/* ---- loading: integers beyond int64 -------------------------------------- */

static bool
ref_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ref_is_number_char says whether c can continue a JSON number token. */
static bool
ref_is_number_char(char c)
{
	return ref_is_digit(c) || c == '.' || c == 'e' || c == 'E' ||
	       c == '+' || c == '-';
}

/* ref_is_int_literal says whether s[0..n) is a JSON integer,
 * -?(0|[1-9][0-9]*). */
static bool
ref_is_int_literal(const char *s, size_t n)
{
	size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
	if (i == n || (s[i] == '0' && n - i > 1)) {
		return false;
	}
	for (; i < n; i++) {
		if (!ref_is_digit(s[i])) {
			return false;
		}
	}
	return true;
}

/* ref_fits_int64 says whether the JSON integer s[0..n) fits an int64, as
 * jansson's strtoll would take it. */
static bool
ref_fits_int64(const char *s, size_t n)
{
	bool neg = s[0] == '-';
	const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
	size_t digits = n - neg;
	if (digits != 19) {
		return digits < 19;
	}
	return memcmp(s + neg, limit, 19) <= 0;
}

/* ref_scan walks body[0..len) as JSON text and returns how many integer
 * literals outside strings do not fit an int64; *nul says whether a string
 * holds a \u0000 escape. With copy non-NULL it also writes the body with
 * each such literal L replaced by the string "\u0000L" (copy must hold len
 * + 8 bytes per literal) and its length to *copy_len. */
static size_t
ref_scan(const char *body, size_t len, char *copy, size_t *copy_len, bool *nul)
{
	size_t big = 0, o = 0, i = 0;
	*nul = false;
	while (i < len) {
		size_t start = i;
		if (body[i] == '"') {
			for (i++; i < len && body[i] != '"'; i++) {
				if (body[i] != '\\') {
					continue;
				}
				if (len - i >= 6 &&
				    memcmp(body + i + 1, "u0000", 5) == 0) {
					*nul = true;
				}
				if (i + 1 < len) {
					i++; /* the escaped character */
				}
			}
			i += i < len; /* the closing quote */
		} else if (body[i] == '-' || ref_is_digit(body[i])) {
			while (i < len && ref_is_number_char(body[i])) {
				i++;
			}
			if (ref_is_int_literal(body + start, i - start) &&
			    !ref_fits_int64(body + start, i - start)) {
				if (copy != NULL) {
					memcpy(copy + o, "\"\\u0000", 7);
					memcpy(copy + o + 7, body + start,
					       i - start);
					copy[o + 7 + i - start] = '"';
				}
				o += i - start + 8;
				big++;
				continue;
			}
		} else {
			i++;
		}
		if (copy != NULL) {
			memcpy(copy + o, body + start, i - start);
		}
		o += i - start;
	}
	if (copy_len != NULL) {
		*copy_len = o;
	}
	return big;
}

/* ref_is_big says whether v stands for an integer literal beyond int64
 * (a string that starts with NUL: see api_json.h). */
static bool
ref_is_big(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       json_string_value(v)[0] == '\0';
}

static const char *
ref_type_name(const json_t *v)
{
	if (ref_is_big(v)) {
		return "an integer";
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real";
	case JSON_NULL:
		return "null";
	default:
		return "a boolean";
	}
}

/* ref_value_text writes v as an error message quotes it: scalars as JSON
 * (ASCII, cut to REF_VALUE_TEXT), arrays and objects by their type. */
static void
ref_value_text(const json_t *v, char *buf, size_t size)
{
	if (ref_is_big(v)) {
		size_t n = json_string_length(v) - 1;
		if (n > REF_VALUE_TEXT) {
			snprintf(buf, size, "%.*s...", REF_VALUE_TEXT,
				 json_string_value(v) + 1);
		} else {
			snprintf(buf, size, "%s", json_string_value(v) + 1);
		}
		return;
	}
	if (json_is_object(v) || json_is_array(v)) {
		snprintf(buf, size, "%s", ref_type_name(v));
		return;
	}
	char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	if (s == NULL) {
		kvi_oom(0);
	}
	if (strlen(s) > REF_VALUE_TEXT) {
		snprintf(buf, size, "%.*s...", REF_VALUE_TEXT, s);
	} else {
		snprintf(buf, size, "%s", s);
	}
	free(s);
}

static kvi_err
ref_json_load(const char *body, size_t len, json_t **out, kvc_qerr *err)
{
	const size_t flags = JSON_REJECT_DUPLICATES;
	json_error_t je;
	json_t *j = NULL;
	bool nul;
	size_t big = ref_scan(body, len, NULL, NULL, &nul);
	if (big > 0 && !nul) {
		size_t n;
		char *copy = kvi_malloc(len + 8 * big);
		ref_scan(body, len, copy, &n, &nul);
		j = json_loadb(copy, n, flags | JSON_ALLOW_NUL, &je);
		kvi_free(copy);
	}
	if (j == NULL) {
		/* Nothing to rewrite, or the copy is not JSON: then the body
		 * is not either, and jansson says where in the body. */
		j = json_loadb(body, len, flags, &je);
	}
	if (j == NULL) {
		return kvc_qerr_set(err, KVI_EPROTO, 400,
				    "invalid JSON: %s at line %d, column "
				    "%d (byte %d)",
				    je.text, je.line, je.column, je.position);
	}
	if (!json_is_object(j)) {
		kvc_qerr_set(err, KVI_EINVAL, 400,
			     "the body must be a JSON object, not %s",
			     ref_type_name(j));
		json_decref(j);
		return KVI_EINVAL;
	}
	*out = j;
	return KVI_OK;
}

/* ---- values -------------------------------------------------------------- */

/* ref_digits_u64 reads s[0..n), decimal digits without a sign or a leading
 * zero, into *out; false when it is not that or exceeds 2^64-1. */
static bool
ref_digits_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0 || n > 20 || (s[0] == '0' && n > 1)) {
		return false;
	}
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (!ref_is_digit(s[i])) {
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

/* ref_uint_of reads a non-negative JSON integer (beyond int64 too) into
 * *out; false for anything else. */
static bool
ref_uint_of(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v)) {
		json_int_t x = json_integer_value(v);
		if (x < 0) {
			return false;
		}
		*out = (uint64_t)x;
		return true;
	}
	if (ref_is_big(v)) {
		return ref_digits_u64(json_string_value(v) + 1,
				      json_string_length(v) - 1, out);
	}
	return false;
}

/* ref_u64_of reads a u64 as ref_get_u64 takes it. */
static bool
ref_u64_of(const json_t *v, uint64_t *out)
{
	if (json_is_string(v) && !ref_is_big(v)) {
		return ref_digits_u64(json_string_value(v),
				      json_string_length(v), out);
	}
	return ref_uint_of(v, out);
}

static bool
ref_is_int(const json_t *v)
{
	return json_is_integer(v) || ref_is_big(v);
}

static kvi_err
ref_value_u64(const json_t *v, const char *what, uint64_t *out, kvc_qerr *err)
{
	uint64_t x;
	if (ref_u64_of(v, &x)) {
		*out = x;
		return KVI_OK;
	}
	char text[REF_VALUE_TEXT + 8];
	ref_value_text(v, text, sizeof(text));
	return kvc_qerr_set(err, ref_is_int(v) ? KVI_ERANGE : KVI_EINVAL, 400,
			    "%s: %s is not a u64", what, text);
}

/* ---- fields -------------------------------------------------------------- */

/* ref_lookup finds field in obj: *v is the value, or NULL when an optional
 * field is absent or null. A required field must be there. */
static kvi_err
ref_lookup(const json_t *obj, const char *field, bool *present,
	   const json_t **v, kvc_qerr *err)
{
	const json_t *x = json_object_get(obj, field);
	if (present != NULL) {
		*present = x != NULL && !json_is_null(x);
		*v = *present ? x : NULL;
		return KVI_OK;
	}
	if (x == NULL) {
		return kvc_qerr_set(err, KVI_EINVAL, 400, "%s is missing",
				    field);
	}
	*v = x;
	return KVI_OK;
}

static kvi_err
ref_type_error(const char *field, const char *want, const json_t *v,
	       kvc_qerr *err)
{
	char text[REF_VALUE_TEXT + 8];
	ref_value_text(v, text, sizeof(text));
	return kvc_qerr_set(err, KVI_EINVAL, 400, "%s must be %s, got %s",
			    field, want, text);
}

static kvi_err
ref_get_u64(const json_t *obj, const char *field, uint64_t *out, bool *present,
	    kvc_qerr *err)
{
	const json_t *v = NULL;
	uint64_t x;
	kvi_err rv = ref_lookup(obj, field, present, &v, err);
	if (rv != KVI_OK || v == NULL) {
		return rv;
	}
	if (!ref_u64_of(v, &x)) {
		char text[REF_VALUE_TEXT + 8];
		ref_value_text(v, text, sizeof(text));
		return kvc_qerr_set(err,
				    ref_is_int(v) ? KVI_ERANGE : KVI_EINVAL,
				    400, "%s %s is not a u64", field, text);
	}
	*out = x;
	return KVI_OK;
}

/* ref_get_uint reads an integer field in min..max; `range` ends the
 * message of a value outside it ("does not fit in u16"). */
static kvi_err
ref_get_uint(const json_t *obj, const char *field, uint64_t min, uint64_t max,
	     const char *range, uint64_t *out, bool *present, kvc_qerr *err)
{
	const json_t *v = NULL;
	uint64_t x;
	kvi_err rv = ref_lookup(obj, field, present, &v, err);
	if (rv != KVI_OK || v == NULL) {
		return rv;
	}
	if (!ref_is_int(v)) {
		return ref_type_error(field, "an integer", v, err);
	}
	if (!ref_uint_of(v, &x) || x < min || x > max) {
		char text[REF_VALUE_TEXT + 8];
		ref_value_text(v, text, sizeof(text));
		return kvc_qerr_set(err, KVI_ERANGE, 400, "%s %s %s", field,
				    text, range);
	}
	*out = x;
	return KVI_OK;
}

static kvi_err
ref_get_u16(const json_t *obj, const char *field, uint16_t *out, bool *present,
	    kvc_qerr *err)
{
	uint64_t x = 0;
	kvi_err rv = ref_get_uint(obj, field, 0, UINT16_MAX,
				  "does not fit in u16", &x, present, err);
	if (rv == KVI_OK && (present == NULL || *present)) {
		*out = (uint16_t)x;
	}
	return rv;
}

static kvi_err
ref_get_u32(const json_t *obj, const char *field, uint32_t min, uint32_t max,
	    uint32_t *out, bool *present, kvc_qerr *err)
{
	char range[48];
	uint64_t x = 0;
	if (min == 0 && max == UINT32_MAX) {
		snprintf(range, sizeof(range), "is not a u32");
	} else {
		snprintf(range, sizeof(range),
			 "is not in %" PRIu32 "..%" PRIu32, min, max);
	}
	kvi_err rv =
	    ref_get_uint(obj, field, min, max, range, &x, present, err);
	if (rv == KVI_OK && (present == NULL || *present)) {
		*out = (uint32_t)x;
	}
	return rv;
}

static kvi_err
ref_get_string(const json_t *obj, const char *field, char **out, bool *present,
	       kvc_qerr *err)
{
	const json_t *v = NULL;
	kvi_err rv = ref_lookup(obj, field, present, &v, err);
	if (rv != KVI_OK || v == NULL) {
		return rv;
	}
	if (!json_is_string(v) || ref_is_big(v)) {
		return ref_type_error(field, "a string", v, err);
	}
	*out = kvi_strdup(json_string_value(v));
	return KVI_OK;
}

/* ref_get_bool reads an optional boolean field (absent or null: *out as
 * it was). */
static kvi_err
ref_get_bool(const json_t *obj, const char *field, bool *out, kvc_qerr *err)
{
	bool present;
	const json_t *v = NULL;
	kvi_err rv = ref_lookup(obj, field, &present, &v, err);
	if (rv != KVI_OK || v == NULL) {
		return rv;
	}
	if (!json_is_boolean(v)) {
		return ref_type_error(field, "a boolean", v, err);
	}
	*out = json_is_true(v);
	return KVI_OK;
}

/* ref_get_name reads a required, non-empty string field. */
static kvi_err
ref_get_name(const json_t *obj, const char *field, char **out, kvc_qerr *err)
{
	char *s = NULL;
	kvi_err rv = ref_get_string(obj, field, &s, NULL, err);
	if (rv == KVI_OK && s[0] == '\0') {
		kvi_free(s);
		return kvc_qerr_set(err, KVI_EINVAL, 400, "%s is empty", field);
	}
	if (rv == KVI_OK) {
		*out = s;
	}
	return rv;
}

/* ref_get_array finds an array field of at most max elements (413 past
 * it, `unit` naming them); *a NULL when an optional one is absent. */
static kvi_err
ref_get_array(const json_t *obj, const char *field, size_t max,
	      const char *unit, const json_t **a, bool *present, kvc_qerr *err)
{
	const json_t *v = NULL;
	kvi_err rv = ref_lookup(obj, field, present, &v, err);
	if (rv != KVI_OK || v == NULL) {
		*a = NULL;
		return rv;
	}
	if (!json_is_array(v)) {
		return ref_type_error(field, "an array", v, err);
	}
	if (json_array_size(v) > max) {
		return kvc_qerr_set(err, KVI_ETOOBIG, 413,
				    "%s has %zu %s, more than the "
				    "maximum of %zu",
				    field, json_array_size(v), unit, max);
	}
	*a = v;
	return KVI_OK;
}

/* ref_get_u64_array reads an array field of u64 values into a new array. */
static kvi_err
ref_get_u64_array(const json_t *obj, const char *field, size_t max,
		  const char *unit, uint64_t **out, size_t *n, bool *present,
		  kvc_qerr *err)
{
	const json_t *a = NULL;
	kvi_err rv = ref_get_array(obj, field, max, unit, &a, present, err);
	if (rv != KVI_OK || a == NULL || json_array_size(a) == 0) {
		return rv;
	}
	size_t count = json_array_size(a);
	uint64_t *v = kvi_reallocarray(NULL, count, sizeof(*v));
	for (size_t i = 0; i < count; i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s[%zu]", field, i);
		rv = ref_value_u64(json_array_get(a, i), what, &v[i], err);
		if (rv != KVI_OK) {
			kvi_free(v);
			return rv;
		}
	}
	*out = v;
	*n = count;
	return KVI_OK;
}

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
	bool has = false;
	kvi_err rv;
	if ((rv = ref_get_string(o, "name", &p->name, NULL, err)) != KVI_OK ||
	    (rv = ref_get_string(o, "ip", &p->ip, NULL, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "zmq_port", 1, 65535, &p->zmq_port, NULL,
			      err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "recover_port", 1, 65535, &p->recover_port,
			      &p->has_recover_port, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "replay_port", 1, 65535, &p->replay_port,
			      &p->has_replay_port, err)) != KVI_OK ||
	    (rv = ref_get_u32(o, "dp_size", 1, KVC_DP_SIZE_MAX, &p->dp_size,
			      &has, err)) != KVI_OK) {
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
