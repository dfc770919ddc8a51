#include "kube_fields.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

static const char *const pod_fields[] = {"metadata.name",
					 "metadata.namespace",
					 "spec.nodeName",
					 "spec.restartPolicy",
					 "spec.schedulerName",
					 "spec.serviceAccountName",
					 "spec.hostNetwork",
					 "status.phase",
					 "status.podIP",
					 "status.nominatedNodeName",
					 NULL};

static bool
field_supported(const char *key)
{
	for (size_t i = 0; pod_fields[i] != NULL; i++) {
		if (strcmp(pod_fields[i], key) == 0) {
			return true;
		}
	}
	return false;
}

/* unescape copies s[0..n) into a new string, dropping the backslash of
 * "\\", "\," and "\=" like fields.UnescapeValue; *ok is false for any
 * other escape. */
static char *
unescape(const char *s, size_t n, bool *ok)
{
	char *out = kvi_malloc(n + 1);
	size_t j = 0;
	*ok = true;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\') {
			if (i + 1 >= n || strchr("\\,=", s[i + 1]) == NULL) {
				*ok = false;
			}
			i++;
			if (i >= n) {
				break;
			}
		}
		out[j++] = s[i];
	}
	out[j] = '\0';
	return out;
}

/* parse_term reads term[0..n) into t; false with a message in err. */
static bool
parse_term(const char *all, const char *term, size_t n, kube_field_term *t,
	   char *err, size_t errlen)
{
	size_t i = 0;
	for (; i < n; i++) {
		if (term[i] == '\\') {
			i++;
		} else if (term[i] == '=' || (term[i] == '!' && i + 1 < n &&
					      term[i + 1] == '=')) {
			break;
		}
	}
	if (i >= n) {
		snprintf(err, errlen,
			 "invalid selector: '%s'; can't understand '%.*s'", all,
			 (int)n, term);
		return false;
	}
	t->negated = term[i] == '!';
	size_t vstart =
	    i + (t->negated || (i + 1 < n && term[i + 1] == '=') ? 2 : 1);
	t->key = kvi_strndup(term, i);
	if (!field_supported(t->key)) {
		snprintf(err, errlen, "field label not supported: %s", t->key);
		return false;
	}
	bool ok;
	t->value = unescape(term + vstart, n - vstart, &ok);
	if (!ok) {
		snprintf(err, errlen, "invalid field selector value: '%.*s'",
			 (int)n, term);
	}
	return ok;
}

kvi_err
kube_fields_parse(const char *text, kube_field_term **terms, size_t *n,
		  char *err, size_t errlen)
{
	kube_field_term *out = NULL;
	size_t count = 0;
	const char *t = text != NULL ? text : "";
	while (*t != '\0') {
		size_t len = 0;
		while (t[len] != '\0' && t[len] != ',') {
			len += t[len] == '\\' && t[len + 1] != '\0' ? 2 : 1;
		}
		if (len > 0) {
			out = kvi_reallocarray(out, count + 1, sizeof(out[0]));
			out[count] = (kube_field_term){0};
			if (!parse_term(text, t, len, &out[count++], err,
					errlen)) {
				kube_fields_free(out, count);
				return KVI_EINVAL;
			}
		}
		t += len;
		if (*t == ',') {
			t++;
		}
	}
	*terms = out;
	*n = count;
	return KVI_OK;
}

void
kube_fields_free(kube_field_term *terms, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		kvi_free(terms[i].key);
		kvi_free(terms[i].value);
	}
	kvi_free(terms);
}

const char *
kube_fields_value(const json_t *pod, const char *key)
{
	const char *dot = strchr(key, '.');
	if (dot == NULL) {
		return "";
	}
	char top[16];
	snprintf(top, sizeof(top), "%.*s", (int)(dot - key), key);
	json_t *v = json_object_get(json_object_get(pod, top), dot + 1);
	if (strcmp(key, "spec.hostNetwork") == 0) {
		return json_is_true(v) ? "true" : "false";
	}
	return json_is_string(v) ? json_string_value(v) : "";
}
