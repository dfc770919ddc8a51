/*
 * pod_record.c - a pod's record (pod.h says its layout): encoding,
 * decoding, and the key a pod is kept under. Pure functions over bytes,
 * for the coordinator's store and the replicas' Lease.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "pod.h"

#define KVC_CS_POD_VERSION  1u
#define KVC_CS_NULL_STR     UINT32_MAX
#define KVC_CS_FLAG_RECOVER 1u
#define KVC_CS_FLAG_REPLAY  2u
/* a metrics port follows the strings (records written before it have
 * neither the flag nor the field) */
#define KVC_CS_FLAG_METRICS 4u
#define KVC_CS_FLAG_START   8u

typedef struct kvc_cs_reader {
	const uint8_t *p;
	size_t left;
	bool bad;
} kvc_cs_reader;

static const uint8_t *
cs_take(kvc_cs_reader *r, size_t n)
{
	if (r->bad || r->left < n) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p;
	r->p += n;
	r->left -= n;
	return p;
}

static uint8_t
cs_u8(kvc_cs_reader *r)
{
	const uint8_t *p = cs_take(r, 1);
	return p != NULL ? p[0] : 0;
}

static uint32_t
cs_u32(kvc_cs_reader *r)
{
	const uint8_t *p = cs_take(r, 4);
	return p != NULL ? kvi_get_le32(p) : 0;
}

static uint64_t
cs_u64(kvc_cs_reader *r)
{
	uint64_t lo = cs_u32(r);
	return lo | (uint64_t)cs_u32(r) << 32;
}

/* cs_str reads one string: NULL for the NULL marker or a bad one
 * (r->bad says which). */
static char *
cs_str(kvc_cs_reader *r)
{
	uint32_t n = cs_u32(r);
	if (r->bad || n == KVC_CS_NULL_STR) {
		return NULL;
	}
	const uint8_t *p = n <= KVC_POD_STR_MAX ? cs_take(r, n) : NULL;
	if (p == NULL || memchr(p, '\0', n) != NULL) {
		r->bad = true;
		return NULL;
	}
	return kvi_strndup((const char *)p, n);
}

static size_t
cs_str_size(const char *s)
{
	return 4 + (s != NULL ? strlen(s) : 0);
}

static uint8_t *
cs_put_str(uint8_t *p, const char *s)
{
	if (s == NULL) {
		kvi_put_le32(p, KVC_CS_NULL_STR);
		return p + 4;
	}
	size_t n = strlen(s);
	kvi_put_le32(p, (uint32_t)n);
	memcpy(p + 4, s, n);
	return p + 4 + n;
}

#define KVC_CS_POD_FIXED (4 + 3 + 8 + 6 * 4)

/* A record does not keep p->origin: only HTTP registrations are stored,
 * and their settings come from the registration, but for what the
 * coordinator filled in (a dp_size from its flag, no start rank or replay
 * port), which reads back as "registration" (KVC_FROM_SOURCE). */
uint8_t *
kvc_pod_encode(const kvc_pod *p, size_t *len)
{
	const char *strs[] = {
	    p->name,     p->model,           p->ip,
	    p->endpoint, p->replay_endpoint, p->recover_endpoint};
	size_t n = KVC_CS_POD_FIXED;
	for (size_t i = 0; i < 6; i++) {
		if (strs[i] != NULL && strlen(strs[i]) > KVC_POD_STR_MAX) {
			return NULL;
		}
		n += cs_str_size(strs[i]);
	}
	n += p->has_metrics_port ? 4 : 0;
	n += p->dp_start_rank != 0 ? 4 : 0;
	uint8_t *buf = kvi_malloc(n), *w = buf + 4;
	*w++ = KVC_CS_POD_VERSION;
	*w++ = (uint8_t)p->source;
	*w++ = (uint8_t)((p->has_recover_port ? KVC_CS_FLAG_RECOVER : 0) |
			 (p->has_replay_port ? KVC_CS_FLAG_REPLAY : 0) |
			 (p->has_metrics_port ? KVC_CS_FLAG_METRICS : 0) |
			 (p->dp_start_rank != 0 ? KVC_CS_FLAG_START : 0));
	kvi_put_le64(w, p->instance_id);
	const uint32_t nums[] = {p->block_size,  p->zmq_port, p->recover_port,
				 p->replay_port, p->dp_size,  p->rank};
	for (size_t i = 0; i < 6; i++) {
		kvi_put_le32(w + 8 + 4 * i, nums[i]);
	}
	w += 8 + 6 * 4;
	for (size_t i = 0; i < 6; i++) {
		w = cs_put_str(w, strs[i]);
	}
	if (p->has_metrics_port) {
		kvi_put_le32(w, p->metrics_port);
		w += 4;
	}
	if (p->dp_start_rank != 0) {
		kvi_put_le32(w, p->dp_start_rank);
	}
	kvi_seal(buf, n);
	*len = n;
	return buf;
}

kvi_err
kvc_pod_read(const void *rest, size_t len, kvc_pod *out, char *err,
	     size_t errlen)
{
	kvc_cs_reader r = {rest, len, false};
	uint8_t version = cs_u8(&r);
	if (!r.bad && version != KVC_CS_POD_VERSION) {
		return kvi_errf(err, errlen, KVI_EVERSION,
				"pod record version %u is not %u", version,
				KVC_CS_POD_VERSION);
	}
	kvc_pod p = {0};
	uint8_t source = cs_u8(&r), flags = cs_u8(&r);
	p.source = (kvc_source)source;
	p.has_recover_port = (flags & KVC_CS_FLAG_RECOVER) != 0;
	p.has_replay_port = (flags & KVC_CS_FLAG_REPLAY) != 0;
	p.instance_id = cs_u64(&r);
	p.block_size = cs_u32(&r);
	p.zmq_port = cs_u32(&r);
	p.recover_port = cs_u32(&r);
	p.replay_port = cs_u32(&r);
	p.dp_size = cs_u32(&r);
	p.rank = cs_u32(&r);
	p.name = cs_str(&r);
	p.model = cs_str(&r);
	p.ip = cs_str(&r);
	p.endpoint = cs_str(&r);
	p.replay_endpoint = cs_str(&r);
	p.recover_endpoint = cs_str(&r);
	p.has_metrics_port = (flags & KVC_CS_FLAG_METRICS) != 0;
	if (p.has_metrics_port) {
		p.metrics_port = cs_u32(&r);
	}
	if ((flags & KVC_CS_FLAG_START) != 0) {
		p.dp_start_rank = cs_u32(&r);
	}
	const char *why = NULL;
	if (r.bad) {
		why = "truncated or bad string";
	} else if (r.left != 0) {
		why = "trailing bytes";
	} else if (source > KVC_SOURCE_KUBERNETES) {
		why = "unknown source";
	} else if ((flags & ~(KVC_CS_FLAG_RECOVER | KVC_CS_FLAG_REPLAY |
			      KVC_CS_FLAG_METRICS | KVC_CS_FLAG_START)) != 0) {
		why = "unknown flags";
	}
	if (why != NULL) {
		kvc_pod_fini(&p);
		return kvi_errf(err, errlen, KVI_ECORRUPT, "pod record: %s",
				why);
	}
	*out = p;
	return KVI_OK;
}

kvi_err
kvc_pod_decode(const void *val, size_t len, kvc_pod *out, char *err,
	       size_t errlen)
{
	if (!kvi_sealed(val, len)) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"pod record: bad checksum");
	}
	return kvc_pod_read((const uint8_t *)val + 4, len - 4, out, err,
			    errlen);
}

char *
kvc_pod_key(const kvc_pod *p, char *buf, size_t len)
{
	int n = p->name != NULL ? snprintf(buf, len, "%s", p->name)
				: snprintf(buf, len, "%" PRIu64 "#%" PRIu32,
					   p->instance_id, p->rank);
	return n >= 0 && (size_t)n < len ? buf : NULL;
}
