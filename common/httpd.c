/*
 * httpd.c - the HTTP server (httpd.h): its routes, the address it binds,
 * start, stop and free. The loop threads live in httpd_loop.c, requests and
 * replies in httpd_req.c.
 */
#include "httpd.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "httpd_int.h"

/* ---- routing ---- */

static bool
route_path_matches(const route *r, const char *path)
{
	if (r->prefix) {
		return strncmp(path, r->path, r->len) == 0;
	}
	return strcmp(path, r->path) == 0;
}

/* allow_add appends method to the comma-separated list allow. */
static void
allow_add(char *allow, size_t size, const char *method)
{
	size_t ml = strlen(method);
	for (const char *p = allow; (p = strstr(p, method)) != NULL; p += ml) {
		if ((p == allow || p[-1] == ' ') &&
		    (p[ml] == ',' || p[ml] == '\0')) {
			return;
		}
	}
	size_t used = strlen(allow);
	snprintf(allow + used, size - used, "%s%s", used ? ", " : "", method);
}

/* kvi_httpd_route_find returns the most specific route for method and path, or
 * NULL; then *allow lists the methods the path has (405), or is empty
 * (404). */
const route *
kvi_httpd_route_find(const kvi_httpd *h, const char *method, const char *path,
		     char *allow, size_t allow_size)
{
	const route *best = NULL;
	size_t best_score = 0;
	/* HEAD is GET without the body, which evhttp leaves out */
	bool is_head = strcmp(method, "HEAD") == 0;
	allow[0] = '\0';
	for (size_t i = 0; i < h->n_routes; i++) {
		const route *r = &h->routes[i];
		if (!route_path_matches(r, path)) {
			continue;
		}
		if (r->method != NULL && strcmp(r->method, method) != 0 &&
		    !(is_head && strcmp(r->method, "GET") == 0)) {
			allow_add(allow, allow_size, r->method);
			if (strcmp(r->method, "GET") == 0) {
				allow_add(allow, allow_size, "HEAD");
			}
			continue;
		}
		size_t score = r->prefix ? r->len : SIZE_MAX;
		if (best == NULL || score > best_score ||
		    (score == best_score && r->method != NULL)) {
			best = r;
			best_score = score;
		}
	}
	return best;
}

static kvi_err
route_add(kvi_httpd *h, const char *method, const char *path, bool prefix,
	  kvi_http_handler fn, void *arg)
{
	if (h->started || path == NULL || path[0] != '/' || fn == NULL ||
	    (method != NULL && !kvi_http_token_valid(method))) {
		return KVI_EINVAL;
	}
	for (size_t i = 0; i < h->n_routes; i++) {
		const route *r = &h->routes[i];
		bool same_method = (r->method == NULL && method == NULL) ||
				   (r->method != NULL && method != NULL &&
				    strcmp(r->method, method) == 0);
		if (same_method && r->prefix == prefix &&
		    strcmp(r->path, path) == 0) {
			return KVI_EEXIST;
		}
	}
	h->routes =
	    kvi_reallocarray(h->routes, h->n_routes + 1, sizeof(*h->routes));
	route *r = &h->routes[h->n_routes++];
	r->method = method != NULL ? kvi_strdup(method) : NULL;
	r->path = kvi_strdup(path);
	r->len = strlen(path);
	r->prefix = prefix;
	r->fn = fn;
	r->arg = arg;
	return KVI_OK;
}

kvi_err
kvi_httpd_route(kvi_httpd *h, const char *method, const char *path,
		kvi_http_handler fn, void *arg)
{
	return route_add(h, method, path, false, fn, arg);
}

kvi_err
kvi_httpd_route_prefix(kvi_httpd *h, const char *method, const char *prefix,
		       kvi_http_handler fn, void *arg)
{
	return route_add(h, method, prefix, true, fn, arg);
}

/* ---- server ---- */

kvi_httpd *
kvi_httpd_alloc(const kvi_httpd_config *cfg)
{
	kvi_httpd *h = kvi_calloc(1, sizeof(*h));
	if (cfg != NULL) {
		h->cfg = *cfg;
	}
	if (h->cfg.max_body == 0) {
		h->cfg.max_body = KVI_HTTPD_DEFAULT_MAX_BODY;
	}
	if (h->cfg.timeout_s <= 0) {
		h->cfg.timeout_s = KVI_HTTPD_DEFAULT_TIMEOUT_S;
	}
	return h;
}

/* listen_open binds and listens on host_port; writes the socket and its
 * port. Returns KVI_EINVAL (unparsable) or KVI_EIO. */
static kvi_err
listen_open(const char *host_port, int *fd_out, uint16_t *port_out, char *err,
	    size_t errlen)
{
	char host[256];
	const char *colon;
	if (host_port == NULL) {
		kvi_msgf(err, errlen, "no address");
		return KVI_EINVAL;
	}
	if (host_port[0] == '[') {
		const char *close_br = strchr(host_port, ']');
		if (close_br == NULL || close_br[1] != ':') {
			kvi_msgf(err, errlen, "bad address %s", host_port);
			return KVI_EINVAL;
		}
		colon = close_br + 1;
		snprintf(host, sizeof(host), "%.*s",
			 (int)(close_br - host_port - 1), host_port + 1);
	} else {
		colon = strrchr(host_port, ':');
		if (colon == NULL ||
		    (size_t)(colon - host_port) >= sizeof(host)) {
			kvi_msgf(err, errlen, "bad address %s", host_port);
			return KVI_EINVAL;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - host_port),
			 host_port);
	}
	const char *port = colon + 1;
	char *end;
	errno = 0;
	unsigned long pn = strtoul(port, &end, 10);
	if (*port == '\0' || *end != '\0' || pn > 65535 || errno != 0) {
		kvi_msgf(err, errlen, "bad port in %s", host_port);
		return KVI_EINVAL;
	}
	bool any = host[0] == '\0' || strcmp(host, "*") == 0;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(any ? NULL : host, port, &hints, &res);
	if (rc != 0) {
		kvi_msgf(err, errlen, "%s: %s", host_port, gai_strerror(rc));
		return KVI_EINVAL;
	}
	int fd = -1;
	int saved = 0;
	for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		int on = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int v6only = 0;
		socklen_t ol = sizeof(v6only);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			/* the address is free (and the port chosen): open it
			 * again as the first socket of a group */
			if (ss.ss_family == AF_INET6) {
				getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY,
					   &v6only, &ol);
			}
			close(fd);
			fd = kvi_httpd_listen_reuse(&ss, sl, v6only);
			if (fd >= 0) {
				break;
			}
			saved = errno;
			continue;
		}
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		kvi_msgf(err, errlen, "listen %s: %s", host_port,
			 strerror(saved));
		return KVI_EIO;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		saved = errno;
		close(fd);
		kvi_msgf(err, errlen, "getsockname: %s", strerror(saved));
		return KVI_EIO;
	}
	*port_out = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	*fd_out = fd;
	return KVI_OK;
}

kvi_err
kvi_httpd_start(kvi_httpd *h, const char *host_port, int threads, char *err,
		size_t errlen)
{
	if (h->started || h->n_loops > 0 || threads < 1 ||
	    threads > KVI_HTTPD_MAX_THREADS) {
		kvi_msgf(err, errlen, "bad thread count or already started");
		return KVI_EINVAL;
	}
	int fd;
	uint16_t port;
	kvi_err rc = listen_open(host_port, &fd, &port, err, errlen);
	if (rc != KVI_OK) {
		return rc;
	}
	h->loops = kvi_calloc((size_t)threads, sizeof(*h->loops));
	h->n_loops = threads;
	for (int i = 0; i < threads; i++) {
		h->loops[i] = kvi_http_loop_alloc(h, i);
	}
	for (int i = 0; i < threads; i++) {
		rc = kvi_http_loop_init(h->loops[i], fd, err, errlen);
		if (rc != KVI_OK) {
			goto fail;
		}
	}
	close(fd);
	fd = -1;

	/* loop threads take no asynchronous signals: EPIPE instead of
	 * SIGPIPE, and the process's own signal handling stays on its own
	 * threads. Faults stay deliverable, for crash reports. */
	sigset_t all, old;
	sigfillset(&all);
	static const int faults[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
				     SIGTRAP, SIGABRT, SIGSYS};
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		sigdelset(&all, faults[i]);
	}
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < threads; i++) {
		kvi_http_loop *loop = h->loops[i];
		int e =
		    pthread_create(&loop->tid, NULL, kvi_http_loop_main, loop);
		if (e != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			kvi_msgf(err, errlen, "pthread_create: %s",
				 strerror(e));
			rc = KVI_EIO;
			goto fail;
		}
		loop->running = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	h->port = port;
	h->started = true;
	return KVI_OK;

fail:
	if (fd >= 0) {
		close(fd);
	}
	kvi_httpd_loops_shutdown(h);
	kvi_httpd_loops_release(h);
	return rc;
}

uint16_t
kvi_httpd_port(const kvi_httpd *h)
{
	return h->started ? h->port : 0;
}

uint64_t
kvi_httpd_accept_pauses(const kvi_httpd *h)
{
	uint64_t n = 0;
	for (int i = 0; h->started && i < h->n_loops; i++) {
		n += atomic_load(&h->loops[i]->accept_pauses);
	}
	return n;
}

void
kvi_httpd_stats_get(const kvi_httpd *h, kvi_httpd_stats *out)
{
	*out = (kvi_httpd_stats){0};
	for (int i = 0; h->started && i < h->n_loops; i++) {
		out->accept_pauses += atomic_load(&h->loops[i]->accept_pauses);
		out->refused += atomic_load(&h->loops[i]->refused);
		out->timed_out += atomic_load(&h->loops[i]->timed_out);
		out->reserve_answers +=
		    atomic_load(&h->loops[i]->reserve_answers);
		out->open += atomic_load(&h->loops[i]->n_conns);
		out->reserve_busy += atomic_load(&h->loops[i]->reserve_busy);
	}
}

void
kvi_httpd_stop(kvi_httpd *h)
{
	if (h == NULL || !h->started || h->stopped) {
		return;
	}
	h->stopped = true;
	kvi_httpd_loops_shutdown(h);
}

void
kvi_httpd_free(kvi_httpd *h)
{
	if (h == NULL) {
		return;
	}
	kvi_httpd_stop(h);
	kvi_httpd_loops_release(h);
	for (size_t i = 0; i < h->n_routes; i++) {
		kvi_free(h->routes[i].method);
		kvi_free(h->routes[i].path);
	}
	kvi_free(h->routes);
	kvi_free(h);
}
