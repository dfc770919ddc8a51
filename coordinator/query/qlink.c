#include "qlink.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nng/nng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "bytes.h"
#include "clock.h"
#include "log.h"
#include "sp.h"

#define KVC_QLINK_ADDRS        8 /* a host name's addresses tried */
#define KVC_QLINK_RETRY_MIN_MS 50
#define KVC_QLINK_RETRY_MAX_MS 1000

/* A lookup of a link's host name in flight. A link that closes meanwhile
 * lets go of it (l = NULL): evdns calls back later, cancelled. */
typedef struct kvc_qresolve {
	struct kvc_qlink *l;
	struct evdns_getaddrinfo_request *req;
} kvc_qresolve;

/* One call awaiting its reply. */
typedef struct kvc_qcall {
	struct kvc_qcall *next;
	uint32_t id;
	int64_t deadline_ms;
	int timeout_ms;
	kvp_call_done done;
	void *arg;
} kvc_qcall;

typedef enum kvc_qstate {
	KVC_QL_WAIT,       /* no connection; redialing when retry fires */
	KVC_QL_CONNECTING, /* dialing (or resolving) */
	KVC_QL_HANDSHAKE,  /* connected, the peer's 8 bytes not yet read */
	KVC_QL_READY,
} kvc_qstate;

struct kvc_qlink {
	struct event_base *base;
	struct evdns_base *dns;
	char *url;
	bool ipc;
	bool numeric; /* addr[0] is the URL's address; else host:port */
	char host[256];
	int port;
	/* the addresses, tried in turn; a host name's are resolved again
	 * once every one failed, or a connection was lost */
	struct kvc_qresolve *resolving;
	struct sockaddr_storage addr[KVC_QLINK_ADDRS];
	int addr_len[KVC_QLINK_ADDRS];
	int n_addr, next_addr;
	struct bufferevent *bev;
	kvc_qstate state;
	bool closing;
	uint32_t next_id;
	kvc_qcall *calls, **calls_tail; /* in flight, in send order */
	size_t n_calls;
	struct event *timer; /* the earliest deadline of calls */
	struct event *retry;
	int retry_ms;
};

/* qlink_parse fills l's address from url (or its host name and port);
 * false for a URL it cannot dial. */
static bool
qlink_parse(kvc_qlink *l, const char *url)
{
	kvi_sp_url u;
	if (!kvi_sp_url_split(url, &u) ||
	    (!u.ipc && (u.host[0] == '\0' || atoi(u.port) == 0))) {
		return false;
	}
	l->ipc = u.ipc;
	socklen_t len;
	if (kvi_sp_url_addr(&u, AI_NUMERICHOST, &l->addr[0], &len) == 0) {
		l->addr_len[0] = (int)len;
		l->n_addr = 1;
		l->numeric = true;
		return true;
	}
	snprintf(l->host, sizeof(l->host), "%s", u.host);
	l->port = atoi(u.port);
	return true;
}

/* qlink_arm sets the deadline timer to the earliest call's. */
static void
qlink_arm(kvc_qlink *l)
{
	if (l->calls == NULL) {
		evtimer_del(l->timer);
		return;
	}
	int64_t first = INT64_MAX;
	for (kvc_qcall *c = l->calls; c != NULL; c = c->next) {
		first = c->deadline_ms < first ? c->deadline_ms : first;
	}
	int64_t left = first - kvi_now_ms();
	left = left > 0 ? left : 0;
	struct timeval tv = {(time_t)(left / 1000),
			     (suseconds_t)(left % 1000) * 1000};
	evtimer_add(l->timer, &tv);
}

/* qlink_end calls back a list of calls taken off l with rv. */
static void
qlink_end(kvc_qlink *l, kvc_qcall *list, kvi_err rv, const char *why)
{
	while (list != NULL) {
		kvc_qcall *c = list;
		list = c->next;
		char err[300];
		if (rv == KVI_ETIMEDOUT) {
			snprintf(err, sizeof(err),
				 "no reply from %s within %d ms", l->url,
				 c->timeout_ms);
		} else if (rv == KVI_ECLOSED) {
			snprintf(err, sizeof(err), "link to %s closed", l->url);
		} else {
			snprintf(err, sizeof(err),
				 "connection to %s lost before the reply: %s",
				 l->url, why);
		}
		c->done(c->arg, rv, NULL, err);
		kvi_free(c);
	}
}

/* qlink_take_all takes every call in flight off l. */
static kvc_qcall *
qlink_take_all(kvc_qlink *l)
{
	kvc_qcall *list = l->calls;
	l->calls = NULL;
	l->calls_tail = &l->calls;
	l->n_calls = 0;
	evtimer_del(l->timer);
	return list;
}

static void qlink_dial(kvc_qlink *l);

/* qlink_broken drops l's connection, fails its calls and redials
 * after the back-off - at once when a host name has addresses left to
 * try. */
static void
qlink_broken(kvc_qlink *l, const char *why)
{
	if (l->bev != NULL) {
		bufferevent_free(l->bev);
		l->bev = NULL;
	}
	KVI_DEBUG("qlink_down", "url=%s state=%d why=\"%s\"", l->url,
		  (int)l->state, why);
	bool was_up = l->state == KVC_QL_READY;
	l->state = KVC_QL_WAIT;
	if (was_up) {
		l->next_addr = l->n_addr; /* a name may have moved */
	} else if (l->next_addr < l->n_addr) {
		qlink_dial(l); /* no call is in flight before ready */
		return;
	}
	struct timeval tv = {l->retry_ms / 1000, (l->retry_ms % 1000) * 1000};
	evtimer_add(l->retry, &tv);
	l->retry_ms = l->retry_ms * 2 < KVC_QLINK_RETRY_MAX_MS
			  ? l->retry_ms * 2
			  : KVC_QLINK_RETRY_MAX_MS;
	qlink_end(l, qlink_take_all(l), KVI_EUNREACHABLE, why);
}

/* qlink_take removes and returns the call with id, NULL if none
 * (timed out already). */
static kvc_qcall *
qlink_take(kvc_qlink *l, uint32_t id)
{
	for (kvc_qcall **p = &l->calls; *p != NULL; p = &(*p)->next) {
		kvc_qcall *c = *p;
		if (c->id != id) {
			continue;
		}
		*p = c->next;
		if (l->calls_tail == &c->next) {
			l->calls_tail = p;
		}
		l->n_calls--;
		return c;
	}
	return NULL;
}

/* qlink_handshake reads the peer's 8 bytes; false when it is not an
 * nng rep0 socket (l is broken then) or they have not all come. */
static bool
qlink_handshake(kvc_qlink *l, struct evbuffer *in)
{
	uint8_t h[KVI_SP_HELLO_LEN];
	if (evbuffer_remove(in, h, sizeof(h)) != (int)sizeof(h)) {
		return false;
	}
	if (!kvi_sp_hello_is(h, KVI_SP_PROTO_REP)) {
		qlink_broken(l, "the peer is not an nng rep0 socket");
		return false;
	}
	l->state = KVC_QL_READY;
	l->retry_ms = KVC_QLINK_RETRY_MIN_MS;
	return true;
}

static void
qlink_on_read(struct bufferevent *bev, void *arg)
{
	kvc_qlink *l = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	if (l->state == KVC_QL_HANDSHAKE &&
	    (evbuffer_get_length(in) < KVI_SP_HELLO_LEN ||
	     !qlink_handshake(l, in))) {
		return;
	}
	size_t hl = kvi_sp_prefix_len(l->ipc);
	while (l->state == KVC_QL_READY) {
		size_t have = evbuffer_get_length(in);
		uint8_t h[KVI_SP_PREFIX_MAX];
		uint64_t len;
		if (have < hl ||
		    evbuffer_copyout(in, h, hl) != (ev_ssize_t)hl) {
			return;
		}
		if (!kvi_sp_prefix_read(h, l->ipc, &len) || len < 4 ||
		    len > KVP_MSG_MAX + 4) {
			qlink_broken(l, "malformed message frame");
			return;
		}
		if (have - hl < len) {
			return;
		}
		evbuffer_drain(in, hl);
		uint8_t idb[4];
		evbuffer_remove(in, idb, sizeof(idb));
		size_t blen = (size_t)len - 4;
		kvc_qcall *c = qlink_take(l, kvi_get_be32(idb));
		Kvindex__Response *resp = NULL;
		char err[300] = "";
		kvi_err rv = KVI_OK;
		if (c != NULL) {
			const uint8_t *body =
			    blen > 0 ? evbuffer_pullup(in, (ev_ssize_t)blen)
				     : (const uint8_t *)"";
			rv = kvp_reply_decode(body, blen, l->url, &resp, err,
					      sizeof(err));
		}
		evbuffer_drain(in, blen);
		if (c == NULL) {
			continue; /* its deadline passed: dropped */
		}
		qlink_arm(l);
		c->done(c->arg, rv, resp, err);
		kvi_free(c);
	}
}

static void
qlink_on_event(struct bufferevent *bev, short what, void *arg)
{
	kvc_qlink *l = arg;
	if (what & BEV_EVENT_CONNECTED) {
		if (!l->ipc) {
			int one = 1;
			setsockopt(bufferevent_getfd(bev), IPPROTO_TCP,
				   TCP_NODELAY, &one, sizeof(one));
		}
		l->state = KVC_QL_HANDSHAKE;
		return;
	}
	char why[160];
	if (what & BEV_EVENT_EOF) {
		snprintf(why, sizeof(why), "closed by the shard");
	} else {
		snprintf(why, sizeof(why), "%s",
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	qlink_broken(l, why);
}

static void qlink_resolve(kvc_qlink *l);

/* qlink_dial starts a connection to l's next address (a host name is
 * resolved first when none is left); a failure shows as an event. */
static void
qlink_dial(kvc_qlink *l)
{
	if (l->next_addr >= l->n_addr) {
		if (!l->numeric) {
			qlink_resolve(l);
			return;
		}
		l->next_addr = 0;
	}
	l->bev = bufferevent_socket_new(l->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (l->bev == NULL) {
		kvi_oom(sizeof(struct bufferevent *));
	}
	bufferevent_setcb(l->bev, qlink_on_read, NULL, qlink_on_event, l);
	bufferevent_enable(l->bev, EV_READ | EV_WRITE);
	/* ours first: nng writes and reads its own at the same time */
	uint8_t h[KVI_SP_HELLO_LEN];
	kvi_sp_hello(h, KVI_SP_PROTO_REQ);
	bufferevent_write(l->bev, h, sizeof(h));
	l->state = KVC_QL_CONNECTING;
	struct bufferevent *bev = l->bev;
	int k = l->next_addr++;
	int rc = bufferevent_socket_connect(bev, (struct sockaddr *)&l->addr[k],
					    l->addr_len[k]);
	/* one that fails at once has called qlink_on_event already */
	if (rc != 0 && l->bev == bev) {
		qlink_broken(l, "cannot start a connection");
	}
}

static void
qlink_on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	kvc_qresolve *r = arg;
	kvc_qlink *l = r->l;
	kvi_free(r);
	if (l == NULL) {
		if (res != NULL) {
			evutil_freeaddrinfo(res);
		}
		return; /* the link is gone */
	}
	l->resolving = NULL;
	l->n_addr = l->next_addr = 0;
	for (struct evutil_addrinfo *ai = res;
	     ai != NULL && l->n_addr < KVC_QLINK_ADDRS; ai = ai->ai_next) {
		if (ai->ai_addrlen <= sizeof(l->addr[0])) {
			memcpy(&l->addr[l->n_addr], ai->ai_addr,
			       ai->ai_addrlen);
			l->addr_len[l->n_addr++] = (int)ai->ai_addrlen;
		}
	}
	if (res != NULL) {
		evutil_freeaddrinfo(res);
	}
	if (l->n_addr == 0) {
		char why[320];
		snprintf(why, sizeof(why), "cannot resolve %s: %s", l->host,
			 result != 0 ? evutil_gai_strerror(result)
				     : "no address");
		qlink_broken(l, why);
		return;
	}
	qlink_dial(l);
}

/* qlink_resolve looks l's host name up; qlink_on_resolved then
 * dials its first address. */
static void
qlink_resolve(kvc_qlink *l)
{
	l->state = KVC_QL_CONNECTING;
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC,
					.ai_socktype = SOCK_STREAM,
					.ai_protocol = IPPROTO_TCP};
	char port[8];
	snprintf(port, sizeof(port), "%d", l->port);
	kvc_qresolve *r = kvi_calloc(1, sizeof(*r));
	r->l = l;
	l->resolving = r;
	/* may answer before it returns (from the hosts file): r is freed
	 * then, and l->resolving cleared */
	struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(
	    l->dns, l->host, port, &hints, qlink_on_resolved, r);
	if (req != NULL) {
		r->req = req;
	}
}

static void
qlink_on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	qlink_dial(arg);
}

static void
qlink_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kvc_qlink *l = arg;
	int64_t now = kvi_now_ms();
	kvc_qcall *late = NULL, **late_tail = &late;
	kvc_qcall **p = &l->calls;
	while (*p != NULL) {
		kvc_qcall *c = *p;
		if (c->deadline_ms > now) {
			p = &c->next;
			continue;
		}
		*p = c->next;
		l->n_calls--;
		c->next = NULL;
		*late_tail = c;
		late_tail = &c->next;
	}
	l->calls_tail = p;
	qlink_arm(l);
	qlink_end(l, late, KVI_ETIMEDOUT, NULL);
}

kvc_qlink *
kvc_qlink_open(struct event_base *base, struct evdns_base *dns, const char *url)
{
	kvc_qlink *l = kvi_calloc(1, sizeof(*l));
	if (!qlink_parse(l, url) || (!l->numeric && dns == NULL)) {
		kvi_free(l);
		return NULL;
	}
	l->base = base;
	l->dns = dns;
	l->url = kvi_strdup(url);
	l->calls_tail = &l->calls;
	l->retry_ms = KVC_QLINK_RETRY_MIN_MS;
	l->timer = evtimer_new(base, qlink_on_timer, l);
	l->retry = evtimer_new(base, qlink_on_retry, l);
	if (l->timer == NULL || l->retry == NULL) {
		kvi_oom(sizeof(struct event *));
	}
	qlink_dial(l);
	return l;
}

void
kvc_qlink_close(kvc_qlink *l)
{
	if (l == NULL) {
		return;
	}
	l->closing = true;
	if (l->resolving != NULL) {
		kvc_qresolve *r = l->resolving;
		r->l = NULL; /* freed by its callback */
		evdns_getaddrinfo_cancel(r->req);
	}
	if (l->bev != NULL) {
		bufferevent_free(l->bev);
		l->bev = NULL;
	}
	qlink_end(l, qlink_take_all(l), KVI_ECLOSED, NULL);
	event_free(l->timer);
	event_free(l->retry);
	kvi_free(l->url);
	kvi_free(l);
}

bool
kvc_qlink_ready(const kvc_qlink *l)
{
	return l->state == KVC_QL_READY && !l->closing;
}

size_t
kvc_qlink_inflight(const kvc_qlink *l)
{
	return l->n_calls;
}

const char *
kvc_qlink_url(const kvc_qlink *l)
{
	return l->url;
}

static void
qlink_msg_free(const void *data, size_t len, void *msg)
{
	(void)data;
	(void)len;
	nng_msg_free(msg);
}

kvi_err
kvc_qlink_call(kvc_qlink *l, const Kvindex__Request *req, int timeout_ms,
	       kvp_call_done done, void *arg)
{
	if (l->closing) {
		return KVI_ECLOSED;
	}
	if (l->state != KVC_QL_READY) {
		return KVI_EUNREACHABLE;
	}
	nng_msg *msg;
	char err[200];
	kvi_err rv = kvp_request_pack(req, &msg, err, sizeof(err));
	if (rv != KVI_OK) {
		return rv;
	}
	size_t blen = nng_msg_len(msg);
	uint8_t h[KVI_SP_PREFIX_MAX + 4];
	size_t hl = kvi_sp_prefix(h, l->ipc, blen + 4);
	uint32_t id = ++l->next_id | 0x80000000u;
	kvi_put_be32(h + hl, id);
	hl += 4;
	struct evbuffer *out = bufferevent_get_output(l->bev);
	if (evbuffer_add(out, h, hl) != 0 ||
	    evbuffer_add_reference(out, nng_msg_body(msg), blen, qlink_msg_free,
				   msg) != 0) {
		kvi_oom(blen);
	}
	kvc_qcall *c = kvi_calloc(1, sizeof(*c));
	c->id = id;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
	c->deadline_ms = kvi_now_ms() + c->timeout_ms;
	c->done = done;
	c->arg = arg;
	*l->calls_tail = c;
	l->calls_tail = &c->next;
	l->n_calls++;
	qlink_arm(l);
	return KVI_OK;
}

kvi_err
kvc_qlink_call_fn(void *link, const Kvindex__Request *req, int timeout_ms,
		  kvp_call_done done, void *arg)
{
	return kvc_qlink_call(link, req, timeout_ms, done, arg);
}
