#include "kube_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "engine_args.h"

/* Pods */

static const char *
kp_str(const json_t *o, const char *field)
{
	const json_t *v = json_object_get(o, field);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* kp_decimal parses a plain decimal string (digits only) into *out;
 * false when it is not one or exceeds max. */
static bool
kp_decimal(const char *s, uint64_t max, uint64_t *out)
{
	if (s == NULL || *s == '\0') {
		return false;
	}
	uint64_t v = 0;
	for (const char *p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || p - s >= 19) {
			return false;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > max) {
		return false;
	}
	*out = v;
	return true;
}

/* kp_ann reads the integer annotation name into *out when present,
 * in lo..hi; otherwise keeps *out. False (why set) on a bad value. */
static bool
kp_ann(const json_t *ann, const char *name, uint32_t lo, uint32_t hi,
       uint32_t *out, bool *has, char *why, size_t whylen)
{
	const json_t *v = json_object_get(ann, name);
	if (v == NULL) {
		return true;
	}
	uint64_t x = 0;
	if (!json_is_string(v)) {
		snprintf(why, whylen, "annotation %s is not a string", name);
		return false;
	}
	const char *s = json_string_value(v);
	if (!kp_decimal(s, UINT64_MAX / 16, &x) || x < lo || x > hi) {
		snprintf(why, whylen,
			 "annotation %s=\"%.40s\" is not an integer in "
			 "%" PRIu32 "..%" PRIu32,
			 name, s, lo, hi);
		return false;
	}
	*out = (uint32_t)x;
	if (has != NULL) {
		*has = true;
	}
	return true;
}

static bool
kp_ready(const json_t *status)
{
	const json_t *conds = json_object_get(status, "conditions");
	size_t i;
	const json_t *c;
	json_array_foreach(conds, i, c)
	{
		const char *type = kp_str(c, "type");
		if (type != NULL && strcmp(type, "Ready") == 0) {
			const char *st = kp_str(c, "status");
			return st != NULL && strcmp(st, "True") == 0;
		}
	}
	return false;
}

/* kp_pick sets one setting: from the annotation name when the pod has
 * it, else from what the engine's arguments say (ev), else it keeps the
 * default already in *val and *has. False with why set when the
 * annotation is bad, when it disagrees with the arguments, and when it is
 * missing while the arguments leave the value to the container's start. */
static bool
kp_pick(const json_t *ann, const char *name, uint32_t lo, uint32_t hi,
	const kvc_ea_value *ev, uint32_t *val, bool *has, uint8_t *from,
	char *why, size_t wl)
{
	uint32_t a = 0;
	bool given = false;
	if (!kp_ann(ann, name, lo, hi, &a, &given, why, wl)) {
		return false;
	}
	if (given && ev->state == KVC_EA_SET && (ev->none || ev->value != a)) {
		snprintf(why, wl,
			 "annotation %s=%" PRIu32 " disagrees with the "
			 "engine's %s",
			 name, a, ev->said);
		return false;
	}
	if (given) {
		*val = a;
		*from = KVC_FROM_ANNOTATION;
	} else if (ev->state == KVC_EA_SET) {
		*val = ev->none ? 0 : ev->value;
		given = !ev->none;
		*from = KVC_FROM_ENGINE_ARGS;
	} else if (ev->state == KVC_EA_UNKNOWN) {
		snprintf(why, wl, "%s: annotate %s", ev->said, name);
		return false;
	} else {
		*from = KVC_FROM_DEFAULT;
		return true;
	}
	if (has != NULL) {
		*has = given;
	}
	return true;
}

/* kp_engine reads what the engine's command line in spec says into *ea,
 * and records it in p's origin. False with why set when the annotation
 * naming the engine's container is bad. */
static bool
kp_engine(const json_t *ann, const json_t *spec, kvc_engine_args *ea,
	  kvc_pod *p, char *why, size_t wl)
{
	const json_t *c = json_object_get(ann, KVC_KUBE_ANN_ENGINE_CONTAINER);
	if (c != NULL && !json_is_string(c)) {
		snprintf(why, wl, "annotation %s is not a string",
			 KVC_KUBE_ANN_ENGINE_CONTAINER);
		return false;
	}
	if (kvc_engine_args_read(spec, json_string_value(c), ea, why, wl) !=
	    KVI_OK) {
		return false;
	}
	kvc_pod_origin *o = &p->origin;
	memset(o, 0, sizeof(*o));
	if (ea->kind != KVC_EA_NONE) {
		o->engine = kvc_ea_kind_name(ea->kind);
		o->kv_events = kvc_ea_events_name(ea->events);
		snprintf(o->container, sizeof(o->container), "%s",
			 ea->container);
	}
	return true;
}

/* kp_values sets the pod's ports, ranks and block size from the
 * defaults, the annotations and the engine's arguments. */
static bool
kp_values(const json_t *ann, const kvc_engine_args *ea,
	  const kvc_kube_defaults *d, kvc_pod *p, char *why, size_t wl)
{
	uint8_t *from = p->origin.from;
	p->zmq_port = d->zmq_port;
	p->has_replay_port = d->has_replay_port;
	p->replay_port = d->replay_port;
	p->has_recover_port = d->has_recover_port;
	p->recover_port = d->recover_port;
	p->dp_size = d->dp_size;
	p->block_size = d->block_size;
	return kp_pick(ann, KVC_KUBE_ANN_DP_SIZE, 1, KVC_DP_SIZE_MAX,
		       &ea->dp_size, &p->dp_size, NULL, &from[KVC_SET_DP_SIZE],
		       why, wl) &&
	       kp_pick(ann, KVC_KUBE_ANN_DP_START_RANK, 0, UINT16_MAX,
		       &ea->dp_start_rank, &p->dp_start_rank, NULL,
		       &from[KVC_SET_DP_START_RANK], why, wl) &&
	       kp_pick(ann, KVC_KUBE_ANN_ZMQ_PORT, 1, 65535, &ea->zmq_port,
		       &p->zmq_port, NULL, &from[KVC_SET_ZMQ_PORT], why, wl) &&
	       kp_pick(ann, KVC_KUBE_ANN_REPLAY_PORT, 1, 65535,
		       &ea->replay_port, &p->replay_port, &p->has_replay_port,
		       &from[KVC_SET_REPLAY_PORT], why, wl) &&
	       kp_ann(ann, KVC_KUBE_ANN_RECOVER_PORT, 1, 65535,
		      &p->recover_port, &p->has_recover_port, why, wl) &&
	       kp_ann(ann, KVC_KUBE_ANN_METRICS_PORT, 1, 65535,
		      &p->metrics_port, &p->has_metrics_port, why, wl) &&
	       kp_pick(ann, KVC_KUBE_ANN_BLOCK_SIZE, 1, 1u << 20,
		       &ea->block_size, &p->block_size, NULL,
		       &from[KVC_SET_BLOCK_SIZE], why, wl);
}

/* kp_settings derives out->pod from the defaults, the pod's labels and
 * annotations and its engine's command line (spec); false with out->why
 * set when it cannot. */
static bool
kp_settings(const json_t *meta, const json_t *spec, const kvc_kube_defaults *d,
	    kvc_kube_pod *out)
{
	const json_t *ann = json_object_get(meta, "annotations");
	const json_t *labels = json_object_get(meta, "labels");
	kvc_pod *p = &out->pod;
	char *why = out->why;
	size_t wl = sizeof(out->why);
	kvc_engine_args ea;
	if (!kp_engine(ann, spec, &ea, p, why, wl) ||
	    !kp_values(ann, &ea, d, p, why, wl)) {
		return false;
	}
	const char *model = kp_str(ann, KVC_KUBE_ANN_MODEL);
	if (model == NULL && d->model_label != NULL) {
		model = kp_str(labels, d->model_label);
	}
	if (model == NULL || model[0] == '\0') {
		snprintf(why, wl,
			 "no model: neither annotation %s nor label %s",
			 KVC_KUBE_ANN_MODEL,
			 d->model_label != NULL ? d->model_label : "-");
		return false;
	}
	if (out->ip == NULL) {
		snprintf(why, wl, "no pod IP yet");
		return false;
	}
	p->source = KVC_SOURCE_KUBERNETES;
	p->name = kvi_strdup(out->key);
	p->ip = kvi_strdup(out->ip);
	p->model = kvi_strdup(model);
	p->instance_id = kvc_instance_id(p->name);
	if (kvc_pod_check(p, why, wl) != KVI_OK) {
		kvc_pod_fini(p);
		return false;
	}
	return true;
}

kvi_err
kvc_kube_pod_parse(const json_t *obj, const kvc_kube_defaults *d,
		   kvc_kube_pod *out, char *err, size_t errlen)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *name = kp_str(meta, "name");
	const char *ns = kp_str(meta, "namespace");
	if (!json_is_object(obj) || name == NULL || ns == NULL ||
	    name[0] == '\0' || ns[0] == '\0') {
		snprintf(err, errlen,
			 "not a pod: metadata.name or metadata.namespace is "
			 "missing");
		return KVI_EPROTO;
	}
	kvc_kube_pod p;
	memset(&p, 0, sizeof(p));
	size_t kl = strlen(ns) + 1 + strlen(name) + 1;
	p.key = kvi_malloc(kl);
	snprintf(p.key, kl, "%s/%s", ns, name);
	const char *uid = kp_str(meta, "uid");
	p.uid = kvi_strdup(uid != NULL ? uid : "");
	uint64_t rv = 0;
	if (kp_decimal(kp_str(meta, "resourceVersion"), UINT64_MAX / 16, &rv)) {
		p.rv = rv;
	}
	const json_t *del = json_object_get(meta, "deletionTimestamp");
	p.terminating = del != NULL && !json_is_null(del);
	const json_t *status = json_object_get(obj, "status");
	const char *ip = kp_str(status, "podIP");
	if (ip != NULL && ip[0] != '\0') {
		p.ip = kvi_strdup(ip);
	}
	p.ready = kp_ready(status);
	p.valid = kp_settings(meta, json_object_get(obj, "spec"), d, &p);
	*out = p;
	return KVI_OK;
}

void
kvc_kube_pod_fini(kvc_kube_pod *p)
{
	kvi_free(p->key);
	kvi_free(p->uid);
	kvi_free(p->ip);
	if (p->valid) {
		kvc_pod_fini(&p->pod);
	}
	memset(p, 0, sizeof(*p));
}

void
kvc_kube_pod_move(kvc_kube_pod *dst, kvc_kube_pod *src)
{
	if (dst != src) {
		kvc_kube_pod_fini(dst);
		*dst = *src;
		memset(src, 0, sizeof(*src));
	}
}

bool
kvc_kube_status_parse(const json_t *obj, kvc_kube_status *out)
{
	const char *kind = kp_str(obj, "kind");
	if (kind == NULL || strcmp(kind, "Status") != 0) {
		return false;
	}
	memset(out, 0, sizeof(*out));
	const json_t *code = json_object_get(obj, "code");
	if (json_is_integer(code) && json_integer_value(code) > 0 &&
	    json_integer_value(code) < 1000) {
		out->code = (int)json_integer_value(code);
	}
	const char *reason = kp_str(obj, "reason");
	const char *msg = kp_str(obj, "message");
	snprintf(out->reason, sizeof(out->reason), "%s", reason ? reason : "");
	snprintf(out->message, sizeof(out->message), "%s", msg ? msg : "");
	return true;
}

/* Lists */

kvi_err
kvc_kube_list_parse(const void *data, size_t len, const kvc_kube_defaults *d,
		    kvc_kube_list *out, kvc_kube_status *status, char *err,
		    size_t errlen)
{
	json_error_t je;
	json_t *doc = json_loadb(data, len, 0, &je);
	if (doc == NULL) {
		snprintf(err, errlen, "pod list is not JSON: %s at byte %d",
			 je.text, je.position);
		return KVI_EPROTO;
	}
	kvc_kube_status st;
	kvi_err rv = KVI_EPROTO;
	if (kvc_kube_status_parse(doc, &st)) {
		snprintf(err, errlen, "API status %d %s: %s", st.code,
			 st.reason, st.message);
		if (status != NULL) {
			*status = st;
		}
		goto out;
	}
	const json_t *items = json_object_get(doc, "items");
	const json_t *meta = json_object_get(doc, "metadata");
	uint64_t lrv = 0;
	if (!json_is_array(items) ||
	    !kp_decimal(kp_str(meta, "resourceVersion"), UINT64_MAX / 16,
			&lrv)) {
		snprintf(err, errlen,
			 "not a pod list: items or metadata.resourceVersion "
			 "is missing");
		goto out;
	}
	kvc_kube_list l;
	memset(&l, 0, sizeof(l));
	l.rv = lrv;
	l.pods = kvi_calloc(json_array_size(items) + 1, sizeof(*l.pods));
	size_t i;
	const json_t *item;
	json_array_foreach(items, i, item)
	{
		char perr[128];
		if (kvc_kube_pod_parse(item, d, &l.pods[l.n_pods], perr,
				       sizeof(perr)) == KVI_OK) {
			l.n_pods++;
		} else {
			l.n_skipped++;
		}
	}
	const char *cont = kp_str(meta, "continue");
	if (cont != NULL && cont[0] != '\0') {
		l.cont = kvi_strdup(cont);
	}
	*out = l;
	rv = KVI_OK;
out:
	json_decref(doc);
	return rv;
}

void
kvc_kube_list_fini(kvc_kube_list *l)
{
	for (size_t i = 0; i < l->n_pods; i++) {
		kvc_kube_pod_fini(&l->pods[i]);
	}
	kvi_free(l->pods);
	kvi_free(l->cont);
	memset(l, 0, sizeof(*l));
}

/* Watch stream */

struct kvc_kube_stream {
	kvc_kube_event_fn fn;
	void *arg;
	char *buf; /* a partial line */
	size_t len, cap;
};

kvc_kube_stream *
kvc_kube_stream_alloc(kvc_kube_event_fn fn, void *arg)
{
	kvc_kube_stream *s = kvi_calloc(1, sizeof(*s));
	s->fn = fn;
	s->arg = arg;
	return s;
}

void
kvc_kube_stream_free(kvc_kube_stream *s)
{
	if (s != NULL) {
		kvi_free(s->buf);
		kvi_free(s);
	}
}

void
kvc_kube_stream_reset(kvc_kube_stream *s)
{
	s->len = 0;
}

size_t
kvc_kube_stream_pending(const kvc_kube_stream *s)
{
	return s->len;
}

static const struct {
	const char *name;
	kvc_kube_ev ev;
} kvc_kube_evs[] = {
    {"ADDED", KVC_KUBE_ADDED},     {"MODIFIED", KVC_KUBE_MODIFIED},
    {"DELETED", KVC_KUBE_DELETED}, {"BOOKMARK", KVC_KUBE_BOOKMARK},
    {"ERROR", KVC_KUBE_ERROR},
};

/* ks_line parses one complete line and calls back. */
static kvi_err
ks_line(kvc_kube_stream *s, const char *line, size_t len, char *err,
	size_t errlen)
{
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
			   line[len - 1] == '\t')) {
		len--;
	}
	if (len == 0) {
		return KVI_OK;
	}
	json_error_t je;
	json_t *ev = json_loadb(line, len, 0, &je);
	if (ev == NULL) {
		snprintf(err, errlen, "watch event is not JSON: %s at byte %d",
			 je.text, je.position);
		return KVI_EPROTO;
	}
	kvi_err rv = KVI_EPROTO;
	const char *type = kp_str(ev, "type");
	const json_t *obj = json_object_get(ev, "object");
	if (type == NULL || !json_is_object(obj)) {
		snprintf(err, errlen,
			 "watch event without a type or an object");
		goto out;
	}
	for (size_t i = 0; i < sizeof(kvc_kube_evs) / sizeof(kvc_kube_evs[0]);
	     i++) {
		if (strcmp(type, kvc_kube_evs[i].name) == 0) {
			rv = s->fn(s->arg, kvc_kube_evs[i].ev, obj)
				 ? KVI_OK
				 : KVI_ECLOSED;
			goto out;
		}
	}
	snprintf(err, errlen, "watch event of unknown type \"%.32s\"", type);
out:
	json_decref(ev);
	return rv;
}

static void
ks_keep(kvc_kube_stream *s, const char *data, size_t len)
{
	if (s->len + len > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + len) {
			cap *= 2;
		}
		s->buf = kvi_realloc(s->buf, cap);
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, len);
	s->len += len;
}

kvi_err
kvc_kube_stream_feed(kvc_kube_stream *s, const void *data, size_t len,
		     char *err, size_t errlen)
{
	const char *p = data, *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t take = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (s->len + take > KVC_KUBE_LINE_MAX) {
			snprintf(err, errlen,
				 "watch event line longer than %zu bytes",
				 KVC_KUBE_LINE_MAX);
			return KVI_ETOOBIG;
		}
		if (nl == NULL) {
			ks_keep(s, p, take);
			return KVI_OK;
		}
		kvi_err rv;
		if (s->len == 0) {
			rv = ks_line(s, p, take, err, errlen);
		} else {
			ks_keep(s, p, take);
			size_t n = s->len;
			s->len = 0;
			rv = ks_line(s, s->buf, n, err, errlen);
		}
		if (rv != KVI_OK) {
			return rv;
		}
		p = nl + 1;
	}
	return KVI_OK;
}
