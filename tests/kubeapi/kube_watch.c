#include "kube_watch.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "kube_list.h"

#define SPLIT_DELAY_MS 15 /* between the two halves of a split event */
#define BATCH_MS       50 /* how long events are gathered into a chunk */
#define CONN_MARGIN_S  60 /* connection timeout beyond timeoutSeconds */

typedef struct kube_watch kube_watch;

struct kube_watch {
	kube_watch_hub *hub;
	kube_watch *prev;
	kube_watch *next;
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	kube_watch_spec spec;
	struct event *bookmark; /* NULL without bookmarks */
	struct event *deadline;
	struct event *flush; /* sends `held` */
	struct evbuffer *held;
	bool dropped; /* socket shut down; waiting for the close callback */
};

struct kube_watch_hub {
	struct event_base *base;
	kube_store *store;
	int bookmark_ms;
	int http_timeout_s;
	kube_chunking mode;
	kube_watch *head;
	kube_watch_stats stats;
};

kube_watch_hub *
kube_watch_hub_alloc(struct event_base *base, kube_store *store,
		     int bookmark_ms, int http_timeout_s)
{
	kube_watch_hub *h = kvi_calloc(1, sizeof(*h));
	h->base = base;
	h->store = store;
	h->bookmark_ms = bookmark_ms;
	h->http_timeout_s = http_timeout_s;
	h->mode = KUBE_CHUNK_LINE;
	return h;
}

/* ---- stream lifecycle ----------------------------------------------- */

static void
spec_fini(kube_watch_spec *s)
{
	kvi_free(s->ns);
	kube_selector_free(s->labels);
	kube_selector_free(s->fields);
	memset(s, 0, sizeof(*s));
}

/* forget unlinks w and frees it; the request is the caller's business. */
static void
forget(kube_watch *w)
{
	kube_watch_hub *h = w->hub;
	if (w->prev != NULL) {
		w->prev->next = w->next;
	} else {
		h->head = w->next;
	}
	if (w->next != NULL) {
		w->next->prev = w->prev;
	}
	if (!w->dropped) {
		h->stats.open--;
	}
	if (w->bookmark != NULL) {
		event_free(w->bookmark);
	}
	event_free(w->deadline);
	event_free(w->flush);
	evbuffer_free(w->held);
	spec_fini(&w->spec);
	kvi_free(w);
}

/* on_close runs when the connection of a stream goes away (the client
 * left or the socket was dropped). libevent has detached the request from
 * the connection if the stream was still running; ending a detached
 * request is what frees it. */
static void
on_close(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	kube_watch *w = arg;
	struct evhttp_request *req = w->req;
	forget(w);
	if (evhttp_request_get_connection(req) == NULL) {
		evhttp_send_reply_end(req);
	}
}

static void
flush_held(kube_watch *w)
{
	event_del(w->flush);
	if (evbuffer_get_length(w->held) > 0) {
		evhttp_send_reply_chunk(w->req, w->held);
		evbuffer_drain(w->held, evbuffer_get_length(w->held));
	}
}

/* finish ends the stream cleanly with the terminating chunk. */
static void
finish(kube_watch *w)
{
	flush_held(w);
	struct evhttp_request *req = w->req;
	evhttp_connection_set_closecb(w->conn, NULL, NULL);
	evhttp_connection_set_timeout(w->conn, w->hub->http_timeout_s);
	forget(w);
	evhttp_send_reply_end(req);
}

/* ---- writing -------------------------------------------------------- */

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_held(arg);
}

static void
send_text(kube_watch *w, const char *text, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	if (b == NULL) {
		kvi_oom(len);
	}
	evbuffer_add(b, text, len);
	evhttp_send_reply_chunk(w->req, b);
	evbuffer_free(b);
}

static void
arm_flush(kube_watch *w, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (!evtimer_pending(w->flush, NULL)) {
		evtimer_add(w->flush, &tv);
	}
}

/* emit writes {"type": type, "object": obj} (obj taken) as one line, cut
 * into chunks as the hub's mode says. */
static void
emit(kube_watch *w, const char *type, json_t *obj)
{
	json_t *ev = json_pack("{s:s,s:o}", "type", type, "object", obj);
	char *text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (text == NULL) {
		kvi_oom(0);
	}
	size_t len = strlen(text) + 1;
	char *line = kvi_malloc(len + 1);
	snprintf(line, len + 1, "%s\n", text);
	free(text); /* allocated by jansson */
	w->hub->stats.events++;
	switch (w->hub->mode) {
	case KUBE_CHUNK_LINE:
		flush_held(w);
		send_text(w, line, len);
		break;
	case KUBE_CHUNK_SPLIT:
		flush_held(w);
		send_text(w, line, len / 2);
		evbuffer_add(w->held, line + len / 2, len - len / 2);
		arm_flush(w, SPLIT_DELAY_MS);
		break;
	case KUBE_CHUNK_BATCH:
		evbuffer_add(w->held, line, len);
		arm_flush(w, BATCH_MS);
		break;
	}
	kvi_free(line);
}

/* with_kind returns a new pod object that starts with kind and
 * apiVersion, sharing pod's members (never modified). */
static json_t *
with_kind(const json_t *pod)
{
	json_t *o = json_pack("{s:s,s:s}", "kind", "Pod", "apiVersion", "v1");
	json_object_update(o, (json_t *)pod);
	return o;
}

static json_t *
with_rv(const json_t *pod, uint64_t rv)
{
	json_t *o = with_kind(pod);
	json_t *md = json_copy(json_object_get(o, "metadata"));
	char text[24];
	snprintf(text, sizeof(text), "%" PRIu64, rv);
	json_object_set_new(md, "resourceVersion", json_string(text));
	json_object_set_new(o, "metadata", md);
	return o;
}

static bool
matches(const kube_watch *w, const json_t *pod)
{
	return pod != NULL && kube_list_matches(pod, w->spec.ns, w->spec.labels,
						w->spec.fields);
}

/* deliver sends ev to w as the watch cache would: filtered by namespace
 * and selectors, with the transitions in and out of the selection. */
static void
deliver(kube_watch *w, const kube_event *ev)
{
	bool now = ev->type != KUBE_DELETED && matches(w, ev->obj);
	bool before = matches(w, ev->prev);
	if (now && !before) {
		emit(w, "ADDED", with_kind(ev->obj));
	} else if (now) {
		emit(w, "MODIFIED", with_kind(ev->obj));
	} else if (before && ev->type == KUBE_DELETED) {
		emit(w, "DELETED", with_kind(ev->obj));
	} else if (before) {
		emit(w, "DELETED", with_rv(ev->prev, ev->rv));
	}
}

static json_t *
status_expired(uint64_t rv, uint64_t oldest)
{
	char msg[128];
	snprintf(msg, sizeof(msg),
		 "too old resource version: %" PRIu64 " (%" PRIu64 ")", rv,
		 oldest);
	return json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status",
			 "apiVersion", "v1", "metadata", "status", "Failure",
			 "message", msg, "reason", "Expired", "code", 410);
}

static void
on_bookmark(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kube_watch *w = arg;
	char rv[24];
	snprintf(rv, sizeof(rv), "%" PRIu64, kube_store_rv(w->hub->store));
	emit(w, "BOOKMARK",
	     json_pack("{s:s,s:s,s:{s:s}}", "kind", "Pod", "apiVersion", "v1",
		       "metadata", "resourceVersion", rv));
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	finish(arg);
}

/* ---- public --------------------------------------------------------- */

static void
catch_up(kube_watch *w)
{
	if (w->spec.from_now) {
		json_t *pods = kube_store_pods(w->hub->store);
		size_t i;
		json_t *pod;
		json_array_foreach(pods, i, pod)
		{
			if (matches(w, pod)) {
				emit(w, "ADDED", with_kind(pod));
			}
		}
		json_decref(pods);
		return;
	}
	size_t n;
	const kube_event *evs = kube_store_events(w->hub->store, &n);
	for (size_t i = 0; i < n; i++) {
		if (evs[i].rv > w->spec.rv) {
			deliver(w, &evs[i]);
		}
	}
}

void
kube_watch_start(kube_watch_hub *h, struct evhttp_request *req,
		 kube_watch_spec *spec)
{
	kube_watch *w = kvi_calloc(1, sizeof(*w));
	w->hub = h;
	w->req = req;
	w->conn = evhttp_request_get_connection(req);
	w->spec = *spec;
	memset(spec, 0, sizeof(*spec));
	w->held = evbuffer_new();
	w->flush = evtimer_new(h->base, on_flush, w);
	w->deadline = evtimer_new(h->base, on_deadline, w);
	if (w->held == NULL || w->flush == NULL || w->deadline == NULL) {
		kvi_oom(0);
	}
	w->next = h->head;
	if (h->head != NULL) {
		h->head->prev = w;
	}
	h->head = w;
	h->stats.started++;
	h->stats.open++;

	evhttp_connection_set_closecb(w->conn, on_close, w);
	/* The connection outlives the stream's own deadline. */
	int conn_timeout = w->spec.timeout_s > INT_MAX - CONN_MARGIN_S
			       ? INT_MAX
			       : w->spec.timeout_s + CONN_MARGIN_S;
	evhttp_connection_set_timeout(w->conn, conn_timeout);
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", "application/json");
	evhttp_send_reply_start(req, 200, "OK");

	uint64_t oldest = kube_store_compacted_rv(h->store);
	if (!w->spec.from_now && w->spec.rv < oldest) {
		h->stats.gone++;
		emit(w, "ERROR", status_expired(w->spec.rv, oldest));
		finish(w);
		return;
	}
	catch_up(w);
	struct timeval tv = {w->spec.timeout_s, 0};
	evtimer_add(w->deadline, &tv);
	if (w->spec.bookmarks) {
		w->bookmark =
		    event_new(h->base, -1, EV_PERSIST, on_bookmark, w);
		struct timeval every = {h->bookmark_ms / 1000,
					(h->bookmark_ms % 1000) * 1000};
		event_add(w->bookmark, &every);
	}
}

void
kube_watch_hub_publish(kube_watch_hub *h, const kube_event *ev)
{
	for (kube_watch *w = h->head; w != NULL; w = w->next) {
		if (!w->dropped) {
			deliver(w, ev);
		}
	}
}

void
kube_watch_hub_drop(kube_watch_hub *h)
{
	for (kube_watch *w = h->head; w != NULL; w = w->next) {
		if (w->dropped) {
			continue;
		}
		w->dropped = true;
		h->stats.open--;
		event_del(w->flush);
		event_del(w->deadline);
		if (w->bookmark != NULL) {
			event_del(w->bookmark);
		}
		evbuffer_drain(w->held, evbuffer_get_length(w->held));
		struct bufferevent *bev =
		    evhttp_connection_get_bufferevent(w->conn);
		evutil_socket_t fd = bufferevent_getfd(bev);
		if (fd >= 0) {
			shutdown(fd, SHUT_RDWR);
		}
	}
}

void
kube_watch_hub_set_chunking(kube_watch_hub *h, kube_chunking mode)
{
	h->mode = mode;
}

void
kube_watch_hub_stats(const kube_watch_hub *h, kube_watch_stats *out)
{
	*out = h->stats;
}

void
kube_watch_hub_free(kube_watch_hub *h)
{
	if (h == NULL) {
		return;
	}
	while (h->head != NULL) {
		evhttp_connection_set_closecb(h->head->conn, NULL, NULL);
		forget(h->head);
	}
	kvi_free(h);
}
