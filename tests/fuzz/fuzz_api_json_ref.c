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
#include "fuzz_api_json_ref_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

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
bool
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
void
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

kvi_err
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
bool
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

bool
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

kvi_err
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

kvi_err
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

kvi_err
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

kvi_err
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
kvi_err
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
kvi_err
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
kvi_err
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
kvi_err
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
