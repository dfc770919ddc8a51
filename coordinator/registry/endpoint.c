#include "endpoint.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"

#define KVC_EP_HOST_MAX 256 /* a DNS name is 253 at most */

/* ep_canon writes the canonical text of the address sa into out
 * (INET6_ADDRSTRLEN + 2 bytes at least). */
static void
ep_canon(const struct sockaddr *sa, char *out, size_t len)
{
	char buf[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		struct in_addr a = ((const struct sockaddr_in *)sa)->sin_addr;
		if (a.s_addr == htonl(INADDR_ANY)) {
			a.s_addr = htonl(INADDR_LOOPBACK);
		}
		inet_ntop(AF_INET, &a, out, (socklen_t)len);
		return;
	}
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	struct in6_addr a6 = s6->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&a6)) {
		struct sockaddr_in v4 = {.sin_family = AF_INET};
		memcpy(&v4.sin_addr, &a6.s6_addr[12], 4);
		ep_canon((const struct sockaddr *)&v4, out, len);
		return;
	}
	if (IN6_IS_ADDR_UNSPECIFIED(&a6)) {
		a6 = in6addr_loopback;
	}
	inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
	if (s6->sin6_scope_id != 0) {
		/* fe80::1%2: the same address on another link is another */
		snprintf(out, len, "[%s%%%u]", buf,
			 (unsigned)s6->sin6_scope_id);
	} else {
		snprintf(out, len, "[%s]", buf);
	}
}

static int
ep_strcmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* ep_collect returns the canonical texts of the addresses of ai,
 * sorted and distinct; NULL (and *n 0) when it has none. */
static char **
ep_collect(const struct addrinfo *ai, size_t *n)
{
	size_t cap = 0;
	for (const struct addrinfo *p = ai; p != NULL; p = p->ai_next) {
		cap++;
	}
	char **v = kvi_calloc(cap + 1, sizeof(*v));
	size_t m = 0;
	for (const struct addrinfo *p = ai; p != NULL; p = p->ai_next) {
		if (p->ai_family != AF_INET && p->ai_family != AF_INET6) {
			continue;
		}
		char buf[INET6_ADDRSTRLEN + 16];
		ep_canon(p->ai_addr, buf, sizeof(buf));
		v[m++] = kvi_strdup(buf);
	}
	qsort(v, m, sizeof(*v), ep_strcmp);
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		if (k > 0 && strcmp(v[k - 1], v[i]) == 0) {
			kvi_free(v[i]);
		} else {
			v[k++] = v[i];
		}
	}
	if (k == 0) {
		kvi_free(v);
		v = NULL;
	}
	*n = k;
	return v;
}

/* ---- names: getaddrinfo_a, bounded --------------------------------- */

/* One lookup, freed by the last of the waiter and the notification of
 * its end: a waiter that gives up leaves it to the notification. */
typedef struct kvc_ep_lookup {
	atomic_int refs;
	struct gaicb cb;
	struct addrinfo hints;
	char name[KVC_EP_HOST_MAX];
} kvc_ep_lookup;

static void
ep_lookup_unref(kvc_ep_lookup *lk)
{
	if (atomic_fetch_sub(&lk->refs, 1) == 1) {
		if (lk->cb.ar_result != NULL) {
			freeaddrinfo(lk->cb.ar_result);
		}
		kvi_free(lk);
	}
}

static void
ep_lookup_done(union sigval v)
{
	ep_lookup_unref(v.sival_ptr);
}

/* ep_resolve returns the addresses of name, waiting at most
 * timeout_ms; NULL when it did not resolve in time. */
static char **
ep_resolve(const char *name, int timeout_ms, size_t *n)
{
	kvc_ep_lookup *lk = kvi_calloc(1, sizeof(*lk));
	atomic_init(&lk->refs, 2);
	snprintf(lk->name, sizeof(lk->name), "%s", name);
	lk->hints.ai_family = AF_UNSPEC;
	lk->hints.ai_socktype = SOCK_STREAM;
	lk->cb.ar_name = lk->name;
	lk->cb.ar_request = &lk->hints;
	struct gaicb *list[1] = {&lk->cb};
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD,
			       .sigev_notify_function = ep_lookup_done,
			       .sigev_value.sival_ptr = lk};
	if (getaddrinfo_a(GAI_NOWAIT, list, 1, &sev) != 0) {
		kvi_free(lk); /* not queued: no notification will come */
		return NULL;
	}
	int64_t until = kvi_now_ms() + timeout_ms;
	for (;;) {
		int64_t left = until - kvi_now_ms();
		if (left <= 0 || gai_error(&lk->cb) != EAI_INPROGRESS) {
			break;
		}
		struct timespec ts = {left / 1000, (left % 1000) * 1000000};
		gai_suspend((const struct gaicb *const *)list, 1, &ts);
	}
	char **v = NULL;
	*n = 0;
	if (gai_error(&lk->cb) == 0) {
		v = ep_collect(lk->cb.ar_result, n);
	}
	ep_lookup_unref(lk);
	return v;
}

/* ---- hosts and endpoints ------------------------------------------- */

char **
kvc_ep_addrs(const char *host, int timeout_ms, size_t *n)
{
	char h[KVC_EP_HOST_MAX];
	size_t len = strlen(host);
	if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if (len >= sizeof(h)) {
		len = sizeof(h) - 1;
	}
	for (size_t i = 0; i < len; i++) {
		h[i] = (char)tolower((unsigned char)host[i]);
	}
	h[len] = '\0';
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST},
			*ai = NULL;
	char **v = NULL;
	if (len > 0 && getaddrinfo(h, NULL, &hints, &ai) == 0) {
		v = ep_collect(ai, n);
		freeaddrinfo(ai);
	} else if (len > 0) {
		if (len > 1 && h[len - 1] == '.') {
			h[--len] = '\0'; /* "localhost." is localhost */
		}
		v = ep_resolve(h, timeout_ms, n);
	}
	if (v == NULL) {
		v = kvi_calloc(1, sizeof(*v));
		v[0] = kvi_strdup(h);
		*n = 1;
	}
	return v;
}

char *
kvc_ep_id(const char *addr, uint32_t port)
{
	size_t len = strlen(addr) + 16;
	char *id = kvi_malloc(len);
	snprintf(id, len, "%s:%u", addr, port);
	return id;
}

/* ep_split finds the host and port of a tcp:// endpoint's address
 * (after "tcp://" and any "source;"): host without brackets into h.
 * False when it is not host:port with a port in 1..65535. */
static bool
ep_split(const char *addr, char *h, size_t hlen, uint32_t *port)
{
	const char *semi = strrchr(addr, ';');
	if (semi != NULL) {
		addr = semi + 1;
	}
	const char *colon = strrchr(addr, ':');
	if (colon == NULL || colon == addr) {
		return false;
	}
	char *end;
	errno = 0;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || p == 0 ||
	    p > 65535 || errno != 0) {
		return false;
	}
	size_t len = (size_t)(colon - addr);
	if (addr[0] == '[' && addr[len - 1] == ']') {
		addr++;
		len -= 2;
	}
	if (len == 0 || len >= hlen) {
		return false;
	}
	memcpy(h, addr, len);
	h[len] = '\0';
	*port = (uint32_t)p;
	return true;
}

char **
kvc_ep_url_ids(const char *url, int timeout_ms, size_t *n)
{
	char host[KVC_EP_HOST_MAX];
	uint32_t port;
	if (strncmp(url, "tcp://", 6) == 0 &&
	    ep_split(url + 6, host, sizeof(host), &port)) {
		char **addrs = kvc_ep_addrs(host, timeout_ms, n);
		for (size_t i = 0; i < *n; i++) {
			char *id = kvc_ep_id(addrs[i], port);
			kvi_free(addrs[i]);
			addrs[i] = id;
		}
		return addrs;
	}
	char **v = kvi_calloc(1, sizeof(*v));
	v[0] = kvi_strdup(url); /* ipc://path, and what is not an address */
	*n = 1;
	return v;
}

void
kvc_ep_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		kvi_free(v[i]);
	}
	kvi_free(v);
}
