#include "api_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "api_json_int.h"
#include "wire_json.h"

/* ---- loading: integers beyond int64 -------------------------------------- */

bool
kvc_api_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* kvc_is_number_char says whether c can continue a JSON number token. */
static bool
kvc_is_number_char(char c)
{
	return kvc_api_is_digit(c) || c == '.' || c == 'e' || c == 'E' ||
	       c == '+' || c == '-';
}

/* kvc_is_int_literal says whether s[0..n) is a JSON integer,
 * -?(0|[1-9][0-9]*). */
static bool
kvc_is_int_literal(const char *s, size_t n)
{
	size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
	if (i == n || (s[i] == '0' && n - i > 1)) {
		return false;
	}
	for (; i < n; i++) {
		if (!kvc_api_is_digit(s[i])) {
			return false;
		}
	}
	return true;
}

/* kvc_fits_int64 says whether the JSON integer s[0..n) fits an int64, as
 * jansson's strtoll would take it. */
static bool
kvc_fits_int64(const char *s, size_t n)
{
	bool neg = s[0] == '-';
	const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
	size_t digits = n - neg;
	if (digits != 19) {
		return digits < 19;
	}
	return memcmp(s + neg, limit, 19) <= 0;
}

/* kvc_scan walks body[0..len) as JSON text and returns how many integer
 * literals outside strings do not fit an int64; *nul says whether a string
 * holds a \u0000 escape. With copy non-NULL it also writes the body with
 * each such literal L replaced by the string "\u0000L" (copy must hold len
 * + 8 bytes per literal) and its length to *copy_len. */
static size_t
kvc_scan(const char *body, size_t len, char *copy, size_t *copy_len, bool *nul)
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
		} else if (body[i] == '-' || kvc_api_is_digit(body[i])) {
			while (i < len && kvc_is_number_char(body[i])) {
				i++;
			}
			if (kvc_is_int_literal(body + start, i - start) &&
			    !kvc_fits_int64(body + start, i - start)) {
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

/* kvc_api_is_big says whether v stands for an integer literal beyond int64
 * (a string that starts with NUL: see api_json.h). */
bool
kvc_api_is_big(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       json_string_value(v)[0] == '\0';
}

static const char *
kvc_type_name(const json_t *v)
{
	if (kvc_api_is_big(v)) {
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

/* kvc_api_value_text writes v as an error message quotes it: scalars as JSON
 * (ASCII, cut to KVC_VALUE_TEXT), arrays and objects by their type. */
void
kvc_api_value_text(const json_t *v, char *buf, size_t size)
{
	if (kvc_api_is_big(v)) {
		size_t n = json_string_length(v) - 1;
		if (n > KVC_VALUE_TEXT) {
			snprintf(buf, size, "%.*s...", KVC_VALUE_TEXT,
				 json_string_value(v) + 1);
		} else {
			snprintf(buf, size, "%s", json_string_value(v) + 1);
		}
		return;
	}
	if (json_is_object(v) || json_is_array(v)) {
		snprintf(buf, size, "%s", kvc_type_name(v));
		return;
	}
	char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	if (s == NULL) {
		kvi_oom(0);
	}
	if (strlen(s) > KVC_VALUE_TEXT) {
		snprintf(buf, size, "%.*s...", KVC_VALUE_TEXT, s);
	} else {
		snprintf(buf, size, "%s", s);
	}
	free(s);
}

kvi_err
kvc_api_json_load(const char *body, size_t len, json_t **out, kvc_qerr *err)
{
	const size_t flags = JSON_REJECT_DUPLICATES;
	json_error_t je;
	json_t *j = NULL;
	bool nul;
	size_t big = kvc_scan(body, len, NULL, NULL, &nul);
	if (big > 0 && !nul) {
		size_t n;
		char *copy = kvi_malloc(len + 8 * big);
		kvc_scan(body, len, copy, &n, &nul);
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
			     kvc_type_name(j));
		json_decref(j);
		return KVI_EINVAL;
	}
	*out = j;
	return KVI_OK;
}
