#include "kvt_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	atexit(curl_global_cleanup);
}

typedef struct growbuf {
	char *data;
	size_t len;
	size_t cap;
} growbuf;

static void
grow_add(growbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1) {
			cap *= 2;
		}
		b->data = kvi_realloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	grow_add(arg, ptr, size * nmemb);
	return size * nmemb;
}

static bool
is_big_unsigned(const char *s, size_t n)
{
	static const char max[] = "9223372036854775807";
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return false;
		}
	}
	return n > 19 || (n == 19 && memcmp(s, max, 19) > 0);
}

json_t *
kvt_json_loads(const char *text, size_t len)
{
	growbuf out = {0};
	bool in_string = false;
	size_t i = 0;
	while (i < len) {
		char c = text[i];
		if (in_string) {
			size_t n = (c == '\\' && i + 1 < len) ? 2 : 1;
			in_string = c != '"';
			grow_add(&out, text + i, n);
			i += n;
			continue;
		}
		if (c == '"') {
			in_string = true;
		}
		if ((c >= '0' && c <= '9') || c == '-') {
			size_t j = i;
			while (j < len && strchr("0123456789.eE+-", text[j]) &&
			       text[j] != '\0') {
				j++;
			}
			bool big = is_big_unsigned(text + i, j - i);
			if (big) {
				grow_add(&out, "\"", 1);
			}
			grow_add(&out, text + i, j - i);
			if (big) {
				grow_add(&out, "\"", 1);
			}
			i = j;
			continue;
		}
		grow_add(&out, &c, 1);
		i++;
	}
	json_t *v = out.data ? json_loadb(out.data, out.len, 0, NULL) : NULL;
	kvi_free(out.data);
	return v;
}

bool
kvt_json_u64(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	const char *s = json_string_value(v);
	if (s == NULL || *s == '\0') {
		return false;
	}
	uint64_t r = 0;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' ||
		    r > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) {
			return false;
		}
		r = r * 10 + (uint64_t)(*s - '0');
	}
	*out = r;
	return true;
}

/* request sends method to url with body (len bytes of content_type;
 * NULL: none, or an empty one for POST and PUT) and one extra header. */
static kvi_err
request(const char *method, const char *url, const void *body, size_t len,
	const char *content_type, const char *header, int timeout_ms,
	kvt_http_resp *out)
{
	memset(out, 0, sizeof(*out)); /* fini is safe whatever happens */
	pthread_once(&curl_once, curl_init);
	CURL *c = curl_easy_init();
	if (c == NULL) {
		return KVI_EIO;
	}
	growbuf got = {0}, hdrs = {0};
	struct curl_slist *headers = NULL;
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &hdrs);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
	if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	if (header != NULL) {
		headers = curl_slist_append(headers, header);
	}
	bool sends = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
	if (body != NULL || sends) {
		/* an empty body still gets "Content-Length: 0" */
		char ct[128];
		snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
		headers = curl_slist_append(headers, ct);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
				 (long)(body ? len : 0));
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	CURLcode rc = curl_easy_perform(c);
	kvi_err rv = KVI_OK;
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		rv = KVI_ETIMEDOUT;
	} else if (rc == CURLE_COULDNT_CONNECT) {
		rv = KVI_EUNREACHABLE;
	} else if (rc != CURLE_OK) {
		rv = KVI_EIO;
	}
	if (rv == KVI_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
		if (got.data == NULL) {
			grow_add(&got, "", 0);
		}
		out->body = got.data;
		out->len = got.len;
		out->json = kvt_json_loads(got.data, got.len);
		if (hdrs.data == NULL) {
			grow_add(&hdrs, "", 0);
		}
		out->headers = hdrs.data;
	} else {
		kvi_free(got.data);
		kvi_free(hdrs.data);
	}
	curl_slist_free_all(headers);
	curl_easy_cleanup(c);
	return rv;
}

kvi_err
kvt_http_request(const char *method, const char *url, const char *body,
		 const char *header, int timeout_ms, kvt_http_resp *out)
{
	return request(method, url, body, body ? strlen(body) : 0,
		       "application/json", header, timeout_ms, out);
}

kvi_err
kvt_http_post_bytes(const char *url, const void *body, size_t len,
		    const char *content_type, int timeout_ms,
		    kvt_http_resp *out)
{
	return request("POST", url, len > 0 ? body : "", len, content_type,
		       NULL, timeout_ms, out);
}

static kvi_err
perform(const char *url, const char *post, int timeout_ms, kvt_http_resp *out)
{
	return kvt_http_request(post != NULL ? "POST" : "GET", url, post, NULL,
				timeout_ms, out);
}

kvi_err
kvt_http_get(const char *url, int timeout_ms, kvt_http_resp *out)
{
	return perform(url, NULL, timeout_ms, out);
}

kvi_err
kvt_http_post(const char *url, const char *body, int timeout_ms,
	      kvt_http_resp *out)
{
	return perform(url, body ? body : "", timeout_ms, out);
}

kvi_err
kvt_http_post_json(const char *url, const json_t *body, int timeout_ms,
		   kvt_http_resp *out)
{
	char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
	if (text == NULL) {
		return KVI_EINVAL;
	}
	kvi_err rv = perform(url, text, timeout_ms, out);
	free(text); /* allocated by jansson */
	return rv;
}

void
kvt_http_resp_fini(kvt_http_resp *r)
{
	kvi_free(r->body);
	kvi_free(r->headers);
	json_decref(r->json);
	memset(r, 0, sizeof(r[0]));
}

double
kvt_http_metric_sum(const char *url, const char *prefix)
{
	kvt_http_resp r;
	double total = -1;
	if (kvt_http_get(url, 5000, &r) == KVI_OK && r.status == 200) {
		total = 0;
		size_t n = strlen(prefix);
		for (const char *p = r.body; p != NULL && *p != '\0';) {
			const char *sp = strchr(p, ' ');
			if (strncmp(p, prefix, n) == 0 && sp != NULL) {
				total += strtod(sp + 1, NULL);
			}
			p = strchr(p, '\n');
			p = p != NULL ? p + 1 : NULL;
		}
	}
	kvt_http_resp_fini(&r);
	return total;
}

double
kvt_http_metric(const char *url, const char *sample)
{
	kvt_http_resp r;
	double v = -1;
	if (kvt_http_get(url, 5000, &r) == KVI_OK && r.status == 200) {
		size_t n = strlen(sample);
		for (const char *p = r.body; p != NULL && *p != '\0';) {
			if (strncmp(p, sample, n) == 0 && p[n] == ' ') {
				v = strtod(p + n + 1, NULL);
				break;
			}
			p = strchr(p, '\n');
			p = p != NULL ? p + 1 : NULL;
		}
	}
	kvt_http_resp_fini(&r);
	return v;
}
