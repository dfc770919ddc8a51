#include "kube_list.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define KEY_MAX 512

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *
b64_encode(const unsigned char *in, size_t n)
{
	char *out = kvi_malloc(4 * (n / 3 + 1) + 1);
	size_t j = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n) {
			v |= (uint32_t)in[i + 1] << 8;
		}
		if (i + 2 < n) {
			v |= in[i + 2];
		}
		out[j++] = b64url[(v >> 18) & 63];
		out[j++] = b64url[(v >> 12) & 63];
		if (i + 1 < n) {
			out[j++] = b64url[(v >> 6) & 63];
		}
		if (i + 2 < n) {
			out[j++] = b64url[v & 63];
		}
	}
	out[j] = '\0';
	return out;
}

static int
b64_value(char c)
{
	const char *p = c != '\0' ? strchr(b64url, c) : NULL;
	return p != NULL ? (int)(p - b64url) : -1;
}

/* b64_decode decodes unpadded base64url into a new buffer; NULL if text is
 * not base64url. */
static unsigned char *
b64_decode(const char *text, size_t *n)
{
	size_t len = strlen(text);
	if (len % 4 == 1) {
		return NULL;
	}
	unsigned char *out = kvi_malloc(len * 3 / 4 + 1);
	size_t j = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < len; i++) {
		int v = b64_value(text[i]);
		if (v < 0) {
			kvi_free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[j++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	*n = j;
	return out;
}

char *
kube_continue_encode(uint64_t rv, const char *start)
{
	/* The start key ends with a NUL: the first key after it. */
	json_t *v =
	    json_pack("{s:s,s:I,s:s%}", "v", "meta.k8s.io/v1", "rv",
		      (json_int_t)rv, "start", start, strlen(start) + 1);
	char *text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	char *token = b64_encode((const unsigned char *)text, strlen(text));
	free(text); /* allocated by jansson */
	return token;
}

kvi_err
kube_continue_decode(const char *token, uint64_t *rv, char **start)
{
	size_t n;
	unsigned char *raw = b64_decode(token, &n);
	if (raw == NULL) {
		return KVI_EPROTO;
	}
	json_t *v = json_loadb((const char *)raw, n, JSON_ALLOW_NUL, NULL);
	kvi_free(raw);
	json_t *ver = json_object_get(v, "v");
	json_t *r = json_object_get(v, "rv");
	json_t *s = json_object_get(v, "start");
	kvi_err err = KVI_EPROTO;
	if (json_is_string(ver) &&
	    strcmp(json_string_value(ver), "meta.k8s.io/v1") == 0 &&
	    json_is_integer(r) && json_integer_value(r) > 0 &&
	    json_is_string(s)) {
		size_t len = json_string_length(s);
		const char *text = json_string_value(s);
		if (len > 0 && text[len - 1] == '\0') {
			len--;
		}
		*rv = (uint64_t)json_integer_value(r);
		*start = kvi_strndup(text, len);
		err = KVI_OK;
	}
	json_decref(v);
	return err;
}

bool
kube_list_matches(const json_t *pod, const char *ns,
		  const kube_selector *labels, const kube_selector *fields)
{
	if (ns != NULL) {
		const char *pod_ns = json_string_value(json_object_get(
		    json_object_get(pod, "metadata"), "namespace"));
		if (pod_ns == NULL || strcmp(pod_ns, ns) != 0) {
			return false;
		}
	}
	return kube_selector_matches(labels, pod) &&
	       kube_selector_matches(fields, pod);
}

static bool
in_prefix(const char *key, const char *prefix)
{
	return strncmp(key, prefix, strlen(prefix)) == 0;
}

static json_t *
list_new(uint64_t rv)
{
	char text[24];
	snprintf(text, sizeof(text), "%" PRIu64, rv);
	return json_pack("{s:s,s:s,s:{s:s},s:[]}", "kind", "PodList",
			 "apiVersion", "v1", "metadata", "resourceVersion",
			 text, "items");
}

/* page fills list with the items of pods (a state at rv) after key start
 * ("" = from the beginning). */
static void
page(kube_store *s, const kube_list_query *q, json_t *pods, uint64_t rv,
     const char *start, bool first, json_t *list)
{
	char prefix[KEY_MAX];
	snprintf(prefix, sizeof(prefix), "%s%s", q->ns ? q->ns : "",
		 q->ns ? "/" : "");
	json_t *items = json_object_get(list, "items");
	char key[KEY_MAX];
	char last[KEY_MAX] = "";
	size_t remaining = 0;
	size_t i;
	json_t *pod;
	json_array_foreach(pods, i, pod)
	{
		kube_pod_key(pod, key, sizeof(key));
		if (!in_prefix(key, prefix) || strcmp(key, start) <= 0) {
			continue;
		}
		if (q->limit > 0 && json_array_size(items) == q->limit) {
			remaining++;
			continue;
		}
		if (kube_list_matches(pod, q->ns, q->labels, q->fields)) {
			json_array_append(items, pod);
			snprintf(last, sizeof(last), "%s", key);
		}
	}
	if (remaining == 0) {
		return;
	}
	if (first) {
		kube_store_snapshot_add(s, pods);
	}
	json_t *md = json_object_get(list, "metadata");
	char *token = kube_continue_encode(rv, last + strlen(prefix));
	json_object_set_new(md, "continue", json_string(token));
	kvi_free(token);
	if (kube_selector_empty(q->labels) && kube_selector_empty(q->fields)) {
		json_object_set_new(md, "remainingItemCount",
				    json_integer((json_int_t)remaining));
	}
}

kvi_err
kube_list_page(kube_store *s, const kube_list_query *q, json_t **out, char *err,
	       size_t errlen)
{
	if (q->cont == NULL || *q->cont == '\0') {
		json_t *pods = kube_store_pods(s);
		json_t *list = list_new(kube_store_rv(s));
		page(s, q, pods, kube_store_rv(s), "", true, list);
		json_decref(pods);
		*out = list;
		return KVI_OK;
	}
	uint64_t rv;
	char *start;
	if (kube_continue_decode(q->cont, &rv, &start) != KVI_OK) {
		snprintf(err, errlen,
			 "continue key is not valid: illegal base64 data or "
			 "malformed token");
		return KVI_EPROTO;
	}
	const json_t *pods = kube_store_snapshot(s, rv);
	if (pods == NULL) {
		kvi_free(start);
		snprintf(
		    err, errlen,
		    "The provided continue parameter is too old to display "
		    "a consistent list result. You can start a new list "
		    "without the continue parameter.");
		return KVI_ENOENT;
	}
	char key[KEY_MAX];
	snprintf(key, sizeof(key), "%s%s%s", q->ns ? q->ns : "",
		 q->ns ? "/" : "", start);
	kvi_free(start);
	json_t *list = list_new(rv);
	page(s, q, (json_t *)pods, rv, key, false, list);
	*out = list;
	return KVI_OK;
}
