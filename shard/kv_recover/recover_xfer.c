/*
 * recover_xfer.c - one `/kv_recover` transfer (recover_fetch_int.h): its
 * libcurl handle, the callbacks that stream the body into the parser and
 * stamp the times the fetcher's deadlines count from, what is refused on
 * the way, and the result it ends in.
 */
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "clock.h"
#include "recover_fetch_int.h"

void
kvr_xfer_free(kvr_xfer *x)
{
	if (x == NULL) {
		return;
	}
	if (x->easy != NULL) {
		curl_easy_cleanup(x->easy);
	}
	kvr_parser_free(x->parser);
	kvi_free(x->url);
	kvi_free(x);
}

size_t
kvr_xfer_stop(kvr_xfer *x, kvi_err why, const char *fmt, ...)
{
	if (x->abort == KVI_OK) {
		x->abort = why;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(x->abort_msg, sizeof(x->abort_msg), fmt, ap);
		va_end(ap);
	}
	return 0;
}

/* is_json_type says whether a Content-Type is JSON: application/json,
 * in any case, with or without parameters. None at all passes: the
 * parser takes nothing but a well-formed body. */
static bool
is_json_type(const char *ct)
{
	static const char json[] = "application/json";
	if (ct == NULL) {
		return true;
	}
	ct += strspn(ct, " \t");
	if (strncasecmp(ct, json, sizeof(json) - 1) != 0) {
		return false;
	}
	char next = ct[sizeof(json) - 1];
	return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* xfer_check_type stops x when its 200 answer is not JSON. */
static bool
xfer_check_type(kvr_xfer *x)
{
	char *ct = NULL;
	curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
	if (is_json_type(ct)) {
		return true;
	}
	kvr_xfer_stop(x, KVI_EPROTO, "Content-Type %.80s, not application/json",
		      ct);
	return false;
}

/* xfer_write takes the next piece of the body: a 200 body goes to the
 * parser, any other is kept as a snippet for the message. Returning less
 * than given makes libcurl end the transfer with CURLE_WRITE_ERROR. */
static size_t
xfer_write(char *data, size_t size, size_t nmemb, void *arg)
{
	kvr_xfer *x = arg;
	size_t n = size * nmemb;
	x->heard_ms = kvi_now_ms();
	if (x->status < 0) {
		long status = 0;
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
		x->status = status;
		if (status == 200 && !xfer_check_type(x)) {
			return 0;
		}
	}
	x->bytes += n;
	if (x->bytes > KVR_FETCH_BODY_MAX) {
		return kvr_xfer_stop(x, KVI_ETOOBIG,
				     "body longer than %llu bytes",
				     (unsigned long long)KVR_FETCH_BODY_MAX);
	}
	if (x->status != 200) {
		size_t room = sizeof(x->snippet) - x->snippet_len;
		size_t k = n < room ? n : room;
		memcpy(x->snippet + x->snippet_len, data, k);
		x->snippet_len += k;
		if (x->snippet_len == sizeof(x->snippet)) {
			x->cut = true; /* the rest of an error page is noise */
			return 0;
		}
		return n;
	}
	if (kvr_parser_feed(x->parser, data, n) != KVI_OK) {
		return kvr_xfer_stop(x, KVI_EPROTO, "body: %s",
				     kvr_parser_error(x->parser));
	}
	if (kvr_parser_blocks(x->parser) > x->max_blocks) {
		return kvr_xfer_stop(x, KVI_ETOOBIG,
				     "the answer stores more than %llu blocks",
				     (unsigned long long)x->max_blocks);
	}
	return n;
}

/* xfer_header takes a header line: the answer has begun. */
static size_t
xfer_header(char *data, size_t size, size_t nitems, void *arg)
{
	(void)data;
	kvr_xfer *x = arg;
	x->heard_ms = kvi_now_ms();
	return size * nitems;
}

/* xfer_sent notes that the request is going out: the first-byte
 * deadline counts from here. */
static int
xfer_sent(void *arg, char *ip, char *local_ip, int port, int local_port)
{
	(void)ip;
	(void)local_ip;
	(void)port;
	(void)local_port;
	kvr_xfer *x = arg;
	x->sent_ms = kvi_now_ms();
	return CURL_PREREQFUNC_OK;
}

kvi_err
kvr_xfer_setup(const kvr_fetch_opts *o, kvr_xfer *x)
{
	long connect_ms = o->connect_ms;
	if (connect_ms > o->timeout_ms) {
		connect_ms = o->timeout_ms;
	}
	x->easy = curl_easy_init();
	if (x->easy == NULL) {
		return KVI_EIO;
	}
	x->parser = kvr_parser_alloc();
	x->status = -1;
	CURL *e = x->easy;
	CURLcode rc = CURLE_OK;
	rc |= curl_easy_setopt(e, CURLOPT_URL, x->url);
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, xfer_write);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, xfer_header);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	rc |= curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, xfer_sent);
	rc |= curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");
	rc |= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, "kvindex");
	/* An unknown URL scheme fails at perform time with a message; every
	 * other option only fails on out-of-memory. */
	return rc == CURLE_OK ? KVI_OK : KVI_EIO;
}

/* from_curl translates a libcurl result. */
static kvi_err
from_curl(CURLcode code)
{
	switch (code) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return KVI_EUNREACHABLE;
	case CURLE_OPERATION_TIMEDOUT:
		return KVI_ETIMEDOUT;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return KVI_EINVAL;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
		return KVI_EPROTO;
	default:
		return KVI_EIO;
	}
}

static kvi_err
status_err(long status)
{
	switch (status) {
	case 404:
		return KVI_ENOENT;
	case 429:
	case 502:
	case 503:
	case 504:
		return KVI_EAGAIN;
	default:
		return KVI_EIO;
	}
}

void
kvr_xfer_result(kvr_xfer *x, CURLcode code, kvr_result *r)
{
	long status = 0;
	if (x->easy != NULL) {
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	}
	r->token = x->token;
	r->http_status = status;
	r->body_bytes = x->bytes;
	r->blocks = x->parser != NULL ? kvr_parser_blocks(x->parser) : 0;
	if (code == CURLE_WRITE_ERROR && x->cut) {
		code = CURLE_OK;
	}
	if (code == CURLE_OK && status == 200 && x->abort == KVI_OK) {
		xfer_check_type(x); /* an empty body never reached write */
	}
	if (x->abort != KVI_OK) {
		r->err = x->abort;
		snprintf(r->message, sizeof(r->message), "%s", x->abort_msg);
	} else if (code != CURLE_OK) {
		r->err = from_curl(code);
		snprintf(r->message, sizeof(r->message), "%s",
			 x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
	} else if (status != 200) {
		char text[KVR_FETCH_SNIPPET_MAX + 1];
		for (size_t i = 0; i < x->snippet_len; i++) {
			unsigned char c = (unsigned char)x->snippet[i];
			text[i] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
		}
		text[x->snippet_len] = '\0';
		r->err = status_err(status);
		snprintf(r->message, sizeof(r->message), "HTTP %ld: %s", status,
			 text);
	} else if (kvr_parser_finish(x->parser) != KVI_OK) {
		r->err = KVI_EPROTO;
		snprintf(r->message, sizeof(r->message), "body: %s",
			 kvr_parser_error(x->parser));
	} else {
		r->err = KVI_OK;
		r->blocks = kvr_parser_blocks(x->parser);
		r->parser = x->parser;
		x->parser = NULL;
	}
}

int64_t
kvr_xfer_due(const kvr_fetch_opts *o, const kvr_xfer *x)
{
	if (x->heard_ms != 0) {
		return x->heard_ms + o->idle_ms;
	}
	return x->sent_ms != 0 ? x->sent_ms + o->first_byte_ms : INT64_MAX;
}
