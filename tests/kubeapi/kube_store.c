#include "kube_store.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "alloc.h"

#define KEY_MAX 512

typedef struct pod_entry {
	char *key; /* "namespace/name" */
	json_t *obj;
} pod_entry;

typedef struct snapshot {
	uint64_t rv;
	json_t *pods;
} snapshot;

struct kube_store {
	uint64_t rv;
	uint64_t compacted_rv;
	pod_entry *pods; /* sorted by key, strcmp order */
	size_t npods;
	size_t pods_cap;
	kube_event *events; /* oldest first */
	size_t nevents;
	size_t events_cap;
	snapshot snaps[KUBE_SNAPSHOTS_MAX]; /* oldest first */
	size_t nsnaps;
	kube_store_listener listener;
	void *listener_arg;
	/* The event that the last change's *stored / *last points into stays
	 * referenced here even when the history is compacted. */
	json_t *last;
};

kube_store *
kube_store_alloc(void)
{
	return kvi_calloc(1, sizeof(kube_store));
}

static void
event_fini(kube_event *e)
{
	json_decref(e->obj);
	json_decref(e->prev);
}

static void
snapshots_drop(kube_store *s, uint64_t below)
{
	size_t kept = 0;
	for (size_t i = 0; i < s->nsnaps; i++) {
		if (s->snaps[i].rv < below) {
			json_decref(s->snaps[i].pods);
		} else {
			s->snaps[kept++] = s->snaps[i];
		}
	}
	s->nsnaps = kept;
}

void
kube_store_free(kube_store *s)
{
	if (s == NULL) {
		return;
	}
	for (size_t i = 0; i < s->npods; i++) {
		kvi_free(s->pods[i].key);
		json_decref(s->pods[i].obj);
	}
	for (size_t i = 0; i < s->nevents; i++) {
		event_fini(&s->events[i]);
	}
	snapshots_drop(s, UINT64_MAX);
	json_decref(s->last);
	kvi_free(s->pods);
	kvi_free(s->events);
	kvi_free(s);
}

void
kube_store_set_listener(kube_store *s, kube_store_listener fn, void *arg)
{
	s->listener = fn;
	s->listener_arg = arg;
}

uint64_t
kube_store_rv(const kube_store *s)
{
	return s->rv;
}

uint64_t
kube_store_compacted_rv(const kube_store *s)
{
	return s->compacted_rv;
}

/* ---- pods ----------------------------------------------------------- */

void
kube_pod_key(const json_t *pod, char *buf, size_t size)
{
	json_t *md = json_object_get(pod, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	snprintf(buf, size, "%s/%s", ns ? ns : "", name ? name : "");
}

uint64_t
kube_pod_rv(const json_t *pod)
{
	const char *rv = json_string_value(json_object_get(
	    json_object_get(pod, "metadata"), "resourceVersion"));
	return rv != NULL ? strtoull(rv, NULL, 10) : 0;
}

/* find returns the index of key, or where it would be inserted with
 * *found false. */
static size_t
find(const kube_store *s, const char *key, bool *found)
{
	size_t lo = 0, hi = s->npods;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->pods[mid].key, key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

static void
insert_at(kube_store *s, size_t i, const char *key, json_t *obj)
{
	if (s->npods == s->pods_cap) {
		s->pods_cap = s->pods_cap ? 2 * s->pods_cap : 64;
		s->pods =
		    kvi_reallocarray(s->pods, s->pods_cap, sizeof(s->pods[0]));
	}
	memmove(&s->pods[i + 1], &s->pods[i],
		(s->npods - i) * sizeof(s->pods[0]));
	s->pods[i] = (pod_entry){kvi_strdup(key), obj};
	s->npods++;
}

static void
remove_at(kube_store *s, size_t i)
{
	kvi_free(s->pods[i].key);
	json_decref(s->pods[i].obj);
	memmove(&s->pods[i], &s->pods[i + 1],
		(s->npods - i - 1) * sizeof(s->pods[0]));
	s->npods--;
}

/* new_uid returns a random (version 4) UUID like the real server's. */
static json_t *
new_uid(void)
{
	unsigned char b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		for (size_t i = 0; i < sizeof(b); i++) {
			b[i] = (unsigned char)rand();
		}
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	char text[37];
	snprintf(text, sizeof(text),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x"
		 "%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
	return json_string(text);
}

static json_t *
now_timestamp(void)
{
	char text[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(text);
}

static void
set_rv(json_t *pod, uint64_t rv)
{
	char text[24];
	snprintf(text, sizeof(text), "%" PRIu64, rv);
	json_object_set_new(json_object_get(pod, "metadata"), "resourceVersion",
			    json_string(text));
}

/* ---- history -------------------------------------------------------- */

/* trim drops the oldest quarter of the history once it is full. */
static void
trim(kube_store *s)
{
	if (s->nevents < KUBE_HISTORY_MAX) {
		return;
	}
	size_t drop = KUBE_HISTORY_MAX / 4;
	s->compacted_rv = s->events[drop - 1].rv;
	for (size_t i = 0; i < drop; i++) {
		event_fini(&s->events[i]);
	}
	memmove(s->events, s->events + drop,
		(s->nevents - drop) * sizeof(s->events[0]));
	s->nevents -= drop;
	snapshots_drop(s, s->compacted_rv);
}

/* record appends an event (taking the references) and tells the
 * listener. */
static void
record(kube_store *s, kube_event_type type, json_t *obj, json_t *prev)
{
	trim(s);
	if (s->nevents == s->events_cap) {
		s->events_cap = s->events_cap ? 2 * s->events_cap : 256;
		s->events = kvi_reallocarray(s->events, s->events_cap,
					     sizeof(s->events[0]));
	}
	kube_event *e = &s->events[s->nevents++];
	*e = (kube_event){s->rv, type, obj, prev};
	json_decref(s->last);
	s->last = json_incref(obj);
	if (s->listener != NULL) {
		s->listener(s->listener_arg, e);
	}
}

/* ---- changes -------------------------------------------------------- */

/* build copies body into the pod to store at ns/name, given the pod
 * stored there now (or NULL). */
static json_t *
build(const json_t *body, const char *ns, const char *name, const json_t *old)
{
	json_t *pod = json_deep_copy(body);
	json_object_del(pod, "kind");
	json_object_del(pod, "apiVersion");
	json_t *md = json_object_get(pod, "metadata");
	if (md == NULL) {
		md = json_object();
		json_object_set_new(pod, "metadata", md);
	}
	json_t *old_md = json_object_get(old, "metadata");
	json_object_set_new(md, "name", json_string(name));
	json_object_set_new(md, "namespace", json_string(ns));
	json_t *uid = json_object_get(old_md, "uid");
	json_object_set_new(md, "uid", uid ? json_incref(uid) : new_uid());
	json_t *created = json_object_get(old_md, "creationTimestamp");
	json_object_set_new(md, "creationTimestamp",
			    created ? json_incref(created) : now_timestamp());
	json_object_del(md, "resourceVersion");
	return pod;
}

kvi_err
kube_store_put(kube_store *s, const char *ns, const char *name,
	       const json_t *body, const json_t **stored)
{
	json_t *body_md = json_object_get(body, "metadata");
	if (!json_is_object(body) || (body_md && !json_is_object(body_md))) {
		return KVI_EINVAL;
	}
	char key[KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	bool found;
	size_t i = find(s, key, &found);
	json_t *old = found ? s->pods[i].obj : NULL;
	json_t *pod = build(body, ns, name, old);
	if (old != NULL) {
		set_rv(pod, kube_pod_rv(old));
		if (json_equal(pod, old)) {
			json_decref(pod);
			*stored = old;
			return KVI_OK;
		}
	}
	set_rv(pod, ++s->rv);
	if (found) {
		s->pods[i].obj = json_incref(pod);
		record(s, KUBE_MODIFIED, pod, old); /* takes old's reference */
	} else {
		insert_at(s, i, key, json_incref(pod));
		record(s, KUBE_ADDED, pod, NULL);
	}
	*stored = pod;
	return KVI_OK;
}

kvi_err
kube_store_delete(kube_store *s, const char *ns, const char *name,
		  const json_t **last)
{
	char key[KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	bool found;
	size_t i = find(s, key, &found);
	if (!found) {
		return KVI_ENOENT;
	}
	json_t *prev = json_incref(s->pods[i].obj);
	json_t *gone = json_deep_copy(prev);
	set_rv(gone, ++s->rv);
	remove_at(s, i);
	record(s, KUBE_DELETED, gone, prev);
	*last = gone;
	return KVI_OK;
}

const json_t *
kube_store_get(const kube_store *s, const char *ns, const char *name)
{
	char key[KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	bool found;
	size_t i = find(s, key, &found);
	return found ? s->pods[i].obj : NULL;
}

json_t *
kube_store_pods(const kube_store *s)
{
	json_t *a = json_array();
	for (size_t i = 0; i < s->npods; i++) {
		json_array_append(a, s->pods[i].obj);
	}
	return a;
}

const kube_event *
kube_store_events(const kube_store *s, size_t *n)
{
	*n = s->nevents;
	return s->events;
}

void
kube_store_compact(kube_store *s)
{
	for (size_t i = 0; i < s->nevents; i++) {
		event_fini(&s->events[i]);
	}
	s->nevents = 0;
	s->compacted_rv = s->rv;
	snapshots_drop(s, UINT64_MAX);
}

/* ---- snapshots ------------------------------------------------------ */

void
kube_store_snapshot_add(kube_store *s, json_t *pods)
{
	if (s->nsnaps > 0 && s->snaps[s->nsnaps - 1].rv == s->rv) {
		return; /* the same state is kept already */
	}
	if (s->nsnaps == KUBE_SNAPSHOTS_MAX) {
		json_decref(s->snaps[0].pods);
		memmove(s->snaps, s->snaps + 1,
			(s->nsnaps - 1) * sizeof(s->snaps[0]));
		s->nsnaps--;
	}
	s->snaps[s->nsnaps++] = (snapshot){s->rv, json_incref(pods)};
}

const json_t *
kube_store_snapshot(const kube_store *s, uint64_t rv)
{
	for (size_t i = 0; i < s->nsnaps; i++) {
		if (s->snaps[i].rv == rv) {
			return s->snaps[i].pods;
		}
	}
	return NULL;
}

/* ---- persistence ---------------------------------------------------- */

json_t *
kube_store_dump(const kube_store *s)
{
	char rv[24];
	snprintf(rv, sizeof(rv), "%" PRIu64, s->rv);
	return json_pack("{s:s,s:o}", "resourceVersion", rv, "pods",
			 kube_store_pods(s));
}

static bool
valid_dumped_pod(const json_t *pod, uint64_t max_rv)
{
	json_t *md = json_object_get(pod, "metadata");
	uint64_t rv = kube_pod_rv(pod);
	return json_is_string(json_object_get(md, "name")) &&
	       json_is_string(json_object_get(md, "namespace")) &&
	       json_is_string(json_object_get(md, "uid")) && rv > 0 &&
	       rv <= max_rv;
}

kvi_err
kube_store_restore(kube_store *s, const json_t *state)
{
	if (s->npods > 0 || s->rv > 0) {
		return KVI_EEXIST;
	}
	const char *rv_text =
	    json_string_value(json_object_get(state, "resourceVersion"));
	json_t *pods = json_object_get(state, "pods");
	char *end = NULL;
	uint64_t rv = rv_text ? strtoull(rv_text, &end, 10) : 0;
	if (rv_text == NULL || *end != '\0' || !json_is_array(pods)) {
		return KVI_ECORRUPT;
	}
	size_t i;
	json_t *pod;
	json_array_foreach(pods, i, pod)
	{
		char key[KEY_MAX];
		bool found;
		if (!valid_dumped_pod(pod, rv)) {
			goto fail;
		}
		kube_pod_key(pod, key, sizeof(key));
		size_t at = find(s, key, &found);
		if (found) {
			goto fail;
		}
		insert_at(s, at, key, json_deep_copy(pod));
	}
	s->rv = s->compacted_rv = rv;
	return KVI_OK;
fail:
	while (s->npods > 0) {
		remove_at(s, s->npods - 1);
	}
	return KVI_ECORRUPT;
}
