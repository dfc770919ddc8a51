#include "pod.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"

uint64_t
kvc_instance_id(const char *name)
{
	return XXH3_64bits(name, strlen(name)) >> 11;
}

const char *
kvc_source_name(kvc_source s)
{
	switch (s) {
	case KVC_SOURCE_FILE:
		return "file";
	case KVC_SOURCE_HTTP:
		return "http";
	default:
		return "kubernetes";
	}
}

const char *
kvc_from_name(kvc_from f, kvc_source s)
{
	switch (f) {
	case KVC_FROM_DEFAULT:
		return "default";
	case KVC_FROM_ANNOTATION:
		return "annotation";
	case KVC_FROM_ENGINE_ARGS:
		return "engine_args";
	default:
		return s == KVC_SOURCE_HTTP ? "registration"
					    : kvc_source_name(s);
	}
}

void
kvc_pod_origin_given(kvc_pod *p, bool has_dp, bool has_start)
{
	memset(&p->origin, 0, sizeof(p->origin));
	p->origin.from[KVC_SET_DP_SIZE] =
	    has_dp ? KVC_FROM_SOURCE : KVC_FROM_DEFAULT;
	p->origin.from[KVC_SET_DP_START_RANK] =
	    has_start ? KVC_FROM_SOURCE : KVC_FROM_DEFAULT;
	p->origin.from[KVC_SET_REPLAY_PORT] =
	    p->has_replay_port ? KVC_FROM_SOURCE : KVC_FROM_DEFAULT;
}

static bool
prefixed(const char *s, const char *p)
{
	return s != NULL && strncmp(s, p, strlen(p)) == 0 && s[strlen(p)];
}

static kvi_err
check_common(const kvc_pod *p, char *err, size_t errlen)
{
	if (p->model == NULL || p->model[0] == '\0') {
		return kvi_errf(err, errlen, KVI_EINVAL, "model_name is empty");
	}
	if (p->block_size == 0 || p->block_size > (1u << 20)) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"block_size %u is not in 1..1048576",
				p->block_size);
	}
	return KVI_OK;
}

static kvi_err
check_port(const char *what, uint32_t port, uint32_t span, char *err,
	   size_t errlen)
{
	if (port == 0 || (uint64_t)port + span - 1 > 65535) {
		return kvi_errf(err, errlen, KVI_ERANGE,
				"%s %u%s does not fit: ports are 1..65535",
				what, port, span > 1 ? " plus the ranks" : "");
	}
	return KVI_OK;
}

kvi_err
kvc_pod_check(const kvc_pod *p, char *err, size_t errlen)
{
	kvi_err rv = check_common(p, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	if (p->name == NULL) {
		if (p->rank > UINT16_MAX) {
			return kvi_errf(err, errlen, KVI_ERANGE,
					"dp_rank %u does not fit in u16",
					p->rank);
		}
		if (!prefixed(p->endpoint, "tcp://") &&
		    !prefixed(p->endpoint, "ipc://")) {
			return kvi_errf(err, errlen, KVI_EINVAL,
					"endpoint must be tcp://host:port or "
					"ipc://path");
		}
		if (p->replay_endpoint != NULL &&
		    !prefixed(p->replay_endpoint, "tcp://") &&
		    !prefixed(p->replay_endpoint, "ipc://")) {
			return kvi_errf(
			    err, errlen, KVI_EINVAL,
			    "replay_endpoint must be tcp:// or ipc://");
		}
		if (p->recover_endpoint != NULL &&
		    !prefixed(p->recover_endpoint, "http://") &&
		    !prefixed(p->recover_endpoint, "https://")) {
			return kvi_errf(err, errlen, KVI_EINVAL,
					"recover_endpoint must be http:// or "
					"https://");
		}
		return KVI_OK;
	}
	if (p->name[0] == '\0' || strlen(p->name) > KVC_NAME_MAX) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"name must be 1..%d characters", KVC_NAME_MAX);
	}
	if (p->ip == NULL || p->ip[0] == '\0' || strchr(p->ip, '/') != NULL) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"ip is missing or not "
				"an address");
	}
	if (p->dp_size == 0 || p->dp_size > KVC_DP_SIZE_MAX) {
		return kvi_errf(err, errlen, KVI_ERANGE,
				"dp_size %u is not in 1..%u", p->dp_size,
				KVC_DP_SIZE_MAX);
	}
	/* ranks are u16: the last one, S + dp_size - 1, included */
	uint64_t span = (uint64_t)p->dp_start_rank + p->dp_size;
	if (span > KVC_DP_SIZE_MAX) {
		return kvi_errf(err, errlen, KVI_ERANGE,
				"dp_start_rank %u plus dp_size %u passes rank "
				"%u: a rank is a u16",
				p->dp_start_rank, p->dp_size, UINT16_MAX);
	}
	/* each rank's port is offset by its global rank */
	if ((rv = check_port("zmq_port", p->zmq_port, (uint32_t)span, err,
			     errlen)) != KVI_OK ||
	    (p->has_recover_port &&
	     (rv = check_port("recover_port", p->recover_port, (uint32_t)span,
			      err, errlen)) != KVI_OK) ||
	    (p->has_replay_port &&
	     (rv = check_port("replay_port", p->replay_port, (uint32_t)span,
			      err, errlen)) != KVI_OK) ||
	    (p->has_metrics_port &&
	     (rv = check_port("metrics_port", p->metrics_port, 1, err,
			      errlen)) != KVI_OK)) {
		return rv;
	}
	return KVI_OK;
}

static char *
format_endpoint(const char *fmt, const char *host, uint32_t port)
{
	char buf[512];
	snprintf(buf, sizeof(buf), fmt, host, port);
	return kvi_strdup(buf);
}

/* url_host formats an IPv6 address in brackets for a URL. */
static const char *
url_host(const char *ip, char *buf, size_t len)
{
	if (strchr(ip, ':') != NULL && ip[0] != '[') {
		snprintf(buf, len, "[%s]", ip);
		return buf;
	}
	return ip;
}

kvc_rank *
kvc_pod_ranks(const kvc_pod *p, size_t *n)
{
	if (p->name == NULL) {
		kvc_rank *r = kvi_calloc(1, sizeof(*r));
		char key[64];
		snprintf(key, sizeof(key), "%" PRIu64 "#%u", p->instance_id,
			 p->rank);
		r->key = kvi_strdup(key);
		r->rank = (uint16_t)p->rank;
		r->endpoint = kvi_strdup(p->endpoint);
		r->replay_endpoint = kvi_strdup_null(p->replay_endpoint);
		r->recover_endpoint = p->recover_endpoint
					  ? kvi_strdup(p->recover_endpoint)
					  : NULL;
		*n = 1;
		return r;
	}
	kvc_rank *r = kvi_calloc(p->dp_size, sizeof(*r));
	char hostbuf[128];
	const char *host = url_host(p->ip, hostbuf, sizeof(hostbuf));
	for (uint32_t i = 0; i < p->dp_size; i++) {
		uint32_t g = p->dp_start_rank + i; /* the global rank */
		char key[KVC_NAME_MAX + 16];
		snprintf(key, sizeof(key), "%s#%u", p->name, g);
		r[i].key = kvi_strdup(key);
		r[i].rank = (uint16_t)g;
		r[i].endpoint =
		    format_endpoint("tcp://%s:%u", host, p->zmq_port + g);
		if (p->has_replay_port) {
			r[i].replay_endpoint = format_endpoint(
			    "tcp://%s:%u", host, p->replay_port + g);
		}
		if (p->has_recover_port) {
			r[i].recover_endpoint = format_endpoint(
			    "http://%s:%u", host, p->recover_port + g);
		}
	}
	*n = p->dp_size;
	return r;
}

char *
kvc_pod_metrics_url(const kvc_pod *p)
{
	if (p->name == NULL || !p->has_metrics_port) {
		return NULL;
	}
	char hostbuf[128];
	return format_endpoint("http://%s:%u/metrics",
			       url_host(p->ip, hostbuf, sizeof(hostbuf)),
			       p->metrics_port);
}

void
kvc_ranks_free(kvc_rank *r, size_t n)
{
	for (size_t i = 0; r != NULL && i < n; i++) {
		kvi_free(r[i].key);
		kvi_free(r[i].endpoint);
		kvi_free(r[i].replay_endpoint);
		kvi_free(r[i].recover_endpoint);
	}
	kvi_free(r);
}

void
kvc_pod_copy(kvc_pod *dst, const kvc_pod *src)
{
	*dst = *src;
	dst->name = kvi_strdup_null(src->name);
	dst->model = kvi_strdup_null(src->model);
	dst->ip = kvi_strdup_null(src->ip);
	dst->endpoint = kvi_strdup_null(src->endpoint);
	dst->replay_endpoint = kvi_strdup_null(src->replay_endpoint);
	dst->recover_endpoint = kvi_strdup_null(src->recover_endpoint);
}

void
kvc_pod_fini(kvc_pod *p)
{
	kvi_free(p->name);
	kvi_free(p->model);
	kvi_free(p->ip);
	kvi_free(p->endpoint);
	kvi_free(p->replay_endpoint);
	kvi_free(p->recover_endpoint);
	memset(p, 0, sizeof(*p));
}

static bool
str_eq(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool
kvc_pod_equal(const kvc_pod *a, const kvc_pod *b)
{
	return str_eq(a->name, b->name) && a->instance_id == b->instance_id &&
	       str_eq(a->model, b->model) && a->block_size == b->block_size &&
	       str_eq(a->ip, b->ip) && a->zmq_port == b->zmq_port &&
	       a->has_recover_port == b->has_recover_port &&
	       (!a->has_recover_port || a->recover_port == b->recover_port) &&
	       a->has_replay_port == b->has_replay_port &&
	       (!a->has_replay_port || a->replay_port == b->replay_port) &&
	       a->has_metrics_port == b->has_metrics_port &&
	       (!a->has_metrics_port || a->metrics_port == b->metrics_port) &&
	       a->dp_size == b->dp_size &&
	       a->dp_start_rank == b->dp_start_rank && a->rank == b->rank &&
	       str_eq(a->endpoint, b->endpoint) &&
	       str_eq(a->replay_endpoint, b->replay_endpoint) &&
	       str_eq(a->recover_endpoint, b->recover_endpoint);
}
