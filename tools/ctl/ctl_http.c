#include "ctl_http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"

struct ctl_http {
	CURL *curl;
	char *base;
	char *auth; /* "Authorization: Bearer ..." or NULL */
	long timeout_ms;
};

/* What one transfer collects. */
typedef struct http_sink {
	char *body;
	size_t len, cap;
	char *next_cursor;
} http_sink;

static size_t
http_on_body(char *data, size_t size, size_t n, void *arg)
{
	http_sink *s = arg;
	size_t add = size * n;
	if (s->len + add + 1 > s->cap) {
		s->cap = (s->len + add + 1) * 2;
		s->body = kvi_realloc(s->body, s->cap);
	}
	memcpy(s->body + s->len, data, add);
	s->len += add;
	s->body[s->len] = '\0';
	return add;
}

/* http_on_header keeps X-Next-Cursor, the value trimmed. Each hop's
 * headers start afresh: a redirect's are not the answer's. */
static size_t
http_on_header(char *data, size_t size, size_t n, void *arg)
{
	http_sink *s = arg;
	size_t len = size * n;
	static const char name[] = "X-Next-Cursor:";
	size_t nl = sizeof(name) - 1;
	if (len > nl && strncasecmp(data, name, nl) == 0) {
		const char *v = data + nl, *end = data + len;
		while (v < end && (*v == ' ' || *v == '\t')) {
			v++;
		}
		while (end > v && isspace((unsigned char)end[-1])) {
			end--;
		}
		kvi_free(s->next_cursor);
		s->next_cursor = kvi_strndup(v, (size_t)(end - v));
	}
	return len;
}

ctl_http *
ctl_http_alloc(const char *base, long timeout_ms)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ctl_http *h = kvi_calloc(1, sizeof(*h));
	h->curl = curl_easy_init();
	if (h->curl == NULL) {
		fprintf(stderr, "kvindexctl: libcurl cannot start\n");
		abort();
	}
	h->base = kvi_strdup(base);
	h->timeout_ms = timeout_ms;
	return h;
}

void
ctl_http_free(ctl_http *h)
{
	if (h == NULL) {
		return;
	}
	curl_easy_cleanup(h->curl);
	kvi_free(h->base);
	kvi_free(h->auth);
	kvi_free(h);
	curl_global_cleanup();
}

const char *
ctl_http_base(const ctl_http *h)
{
	return h->base;
}

void
ctl_http_set_token(ctl_http *h, const char *token)
{
	kvi_free(h->auth);
	h->auth = NULL;
	if (token != NULL) {
		size_t len = strlen(token) + 32;
		h->auth = kvi_malloc(len);
		snprintf(h->auth, len, "Authorization: Bearer %s", token);
	}
}

/* http_once sends one request to url, following nothing. */
static kvi_err
http_once(ctl_http *h, const char *method, const char *url, const char *body,
	  ctl_resp *out, char *err, size_t errlen)
{
	CURL *c = h->curl;
	http_sink s = {0};
	char curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	if (h->auth != NULL) {
		hdrs = curl_slist_append(hdrs, h->auth);
	}
	/* no "Expect: 100-continue" round trip before a large body */
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL || strcmp(method, "POST") == 0) {
		hdrs =
		    curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS,
				 body != NULL ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
				 (long)(body != NULL ? strlen(body) : 0));
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, http_on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->timeout_ms);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* see ctl_http_call */
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		kvi_free(s.body);
		kvi_free(s.next_cursor);
		return kvi_errf(err, errlen, KVI_EUNREACHABLE, "%s",
				curl_err[0] ? curl_err
					    : curl_easy_strerror(rc));
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	char *loc = NULL;
	curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
	out->location = loc != NULL ? kvi_strdup(loc) : NULL;
	out->body = s.body != NULL ? s.body : kvi_strdup("");
	out->len = s.len;
	out->next_cursor = s.next_cursor;
	return KVI_OK;
}

/*
 * ctl_http_call follows a follower's redirect itself, and sends the token
 * again to the leader it names, deliberately.
 *
 * libcurl's own following (CURLOPT_FOLLOWLOCATION) would keep the method
 * and the body of a 307, but drops an Authorization header we set when
 * the redirect goes to another host or port - which is what a follower's
 * redirect always does - so a write would reach the leader without its
 * token and be refused (401). CURLOPT_UNRESTRICTED_AUTH would keep it,
 * for any host of a whole chain of redirects of any kind. Here it is kept
 * for a 307 or 308 alone, to an http:// or https:// URL, for at most
 * CTL_HTTP_MAX_HOPS hops: a follower answers 307 to a request that needs
 * the token only after checking it (401 or 403 otherwise), so the server
 * that names the leader is one that holds the token already, and the URL
 * it names is the one the leader wrote into the Lease. The body of the
 * redirect (a JSON object naming the leader) is dropped.
 */
kvi_err
ctl_http_call(ctl_http *h, const char *method, const char *path,
	      const char *body, ctl_resp *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	size_t len = strlen(h->base) + strlen(path) + 1;
	char *url = kvi_malloc(len);
	snprintf(url, len, "%s%s", h->base, path);
	kvi_err rv;
	for (int hop = 0;; hop++) {
		rv = http_once(h, method, url, body, out, err, errlen);
		bool redirect = rv == KVI_OK &&
				(out->status == 307 || out->status == 308) &&
				out->location != NULL &&
				ctl_http_url_ok(out->location);
		if (!redirect || hop == CTL_HTTP_MAX_HOPS) {
			break;
		}
		kvi_free(url);
		url = out->location;
		out->location = NULL;
		ctl_resp_fini(out);
	}
	kvi_free(url);
	return rv;
}

void
ctl_resp_fini(ctl_resp *r)
{
	kvi_free(r->body);
	kvi_free(r->next_cursor);
	kvi_free(r->location);
	memset(r, 0, sizeof(*r));
}

char *
ctl_http_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = kvi_malloc(strlen(s) * 3 + 1), *p = out;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || strchr("-._~", c) != NULL) {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

bool
ctl_http_url_ok(const char *url)
{
	const char *host = strncmp(url, "http://", 7) == 0    ? url + 7
			   : strncmp(url, "https://", 8) == 0 ? url + 8
							      : NULL;
	return host != NULL && *host != '\0' && *host != '/';
}
