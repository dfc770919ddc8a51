/*
 * service_listen.c - the request server's listening socket: the URL's
 * address (tcp:// with a host, an address or "*", or ipc://), the bind
 * (taking over an ipc path whose server is gone) and the listen.
 */
#include <errno.h>
#include <event2/util.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "service_int.h"

/* kvs_net_bind binds fd to ss, setting errno on failure. An ipc path left
 * by a process that is gone is removed and bound again. */
static int
kvs_net_bind(kvs_service *svc, int fd, const struct sockaddr_storage *ss,
	     socklen_t sl, const char *path)
{
	if (bind(fd, (const struct sockaddr *)ss, sl) == 0) {
		return 0;
	}
	if (!svc->ipc || errno != EADDRINUSE) {
		return -1;
	}
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool in_use =
	    probe >= 0 && connect(probe, (const struct sockaddr *)ss, sl) == 0;
	int e = errno;
	if (probe >= 0) {
		close(probe);
	}
	if (in_use || e != ECONNREFUSED) {
		errno = EADDRINUSE;
		return -1;
	}
	unlink(path);
	return bind(fd, (const struct sockaddr *)ss, sl);
}

/* kvs_net_addr fills ss from url. */
static kvi_err
kvs_net_addr(kvs_service *svc, const char *url, struct sockaddr_storage *ss,
	     socklen_t *sl, char *err, size_t errlen)
{
	memset(ss, 0, sizeof(*ss));
	if (strncmp(url, "ipc://", 6) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		size_t n = strlen(url + 6);
		if (n == 0 || n >= sizeof(un->sun_path)) {
			kvi_msgf(err, errlen, "bad ipc path in %s", url);
			return KVI_EINVAL;
		}
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, url + 6, n + 1);
		*sl = (socklen_t)sizeof(*un);
		svc->ipc = true;
		return KVI_OK;
	}
	static const struct {
		const char *scheme;
		int family;
	} tcp[] = {
	    {"tcp://", AF_UNSPEC}, {"tcp4://", AF_INET}, {"tcp6://", AF_INET6}};
	const char *hp = NULL;
	int family = AF_UNSPEC;
	for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]) && hp == NULL;
	     i++) {
		size_t n = strlen(tcp[i].scheme);
		if (strncmp(url, tcp[i].scheme, n) == 0) {
			hp = url + n;
			family = tcp[i].family;
		}
	}
	const char *colon = hp != NULL ? strrchr(hp, ':') : NULL;
	if (colon == NULL) {
		kvi_msgf(err, errlen,
			 "cannot listen on %s: want tcp://host:port or "
			 "ipc:///path",
			 url);
		return KVI_EINVAL;
	}
	char host[256], port[16];
	size_t hn = (size_t)(colon - hp);
	if (hn >= 2 && hp[0] == '[' && hp[hn - 1] == ']') {
		hp++;
		hn -= 2;
	}
	if (hn >= sizeof(host) || strlen(colon + 1) >= sizeof(port)) {
		kvi_msgf(err, errlen, "cannot listen on %s: address too long",
			 url);
		return KVI_EINVAL;
	}
	memcpy(host, hp, hn);
	host[hn] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	bool any = hn == 0 || strcmp(host, "*") == 0;
	struct addrinfo hints = {
	    .ai_family = any && family == AF_UNSPEC ? AF_INET : family,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(any ? NULL : host, port, &hints, &ai);
	if (gai != 0) {
		kvi_msgf(err, errlen, "cannot listen on %s: %s", url,
			 gai_strerror(gai));
		return KVI_EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return KVI_OK;
}

kvi_err
kvs_net_listen(kvs_service *svc, const char *url, char *err, size_t errlen)
{
	svc->url = kvi_strdup(url);
	struct sockaddr_storage ss;
	socklen_t sl;
	kvi_err rv = kvs_net_addr(svc, url, &ss, &sl, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		kvi_msgf(err, errlen, "listen on %s: %s", url, strerror(errno));
		return KVI_EIO;
	}
	svc->listen_fd = fd;
	int one = 1;
	if (!svc->ipc) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	const char *path = ((struct sockaddr_un *)&ss)->sun_path;
	if (kvs_net_bind(svc, fd, &ss, sl, path) != 0) {
		int e = errno;
		kvi_msgf(err, errlen, "listen on %s: %s", url, strerror(e));
		return e == EADDRNOTAVAIL || e == EAFNOSUPPORT ? KVI_EINVAL
							       : KVI_EIO;
	}
	if (svc->ipc) {
		svc->ipc_path = kvi_strdup(path); /* ours to remove */
	}
	if (listen(fd, 512) != 0) {
		int e = errno;
		kvi_msgf(err, errlen, "listen on %s: %s", url, strerror(e));
		return e == EADDRNOTAVAIL || e == EAFNOSUPPORT ? KVI_EINVAL
							       : KVI_EIO;
	}
	svc->port = 0;
	if (!svc->ipc && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		svc->port = ntohs(ss.ss_family == AF_INET6
				      ? ((struct sockaddr_in6 *)&ss)->sin6_port
				      : ((struct sockaddr_in *)&ss)->sin_port);
	}
	evutil_make_socket_nonblocking(fd);
	return KVI_OK;
}
