/*
 * service_listen.c - the request server's listening socket: the URL's
 * address (common/sp.h), the bind (taking over an ipc path whose server is
 * gone) and the listen.
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

/* net_bind binds fd to ss, setting errno on failure. An ipc path left
 * by a process that is gone is removed and bound again. */
static int
net_bind(kvn_service *svc, int fd, const struct sockaddr_storage *ss,
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

/* net_addr fills ss from url. */
static kvi_err
net_addr(kvn_service *svc, const char *url, struct sockaddr_storage *ss,
	 socklen_t *sl, char *err, size_t errlen)
{
	kvi_sp_url u;
	if (!kvi_sp_url_split(url, &u)) {
		kvi_msgf(err, errlen,
			 "cannot listen on %s: want tcp://host:port or "
			 "ipc:///path",
			 url);
		return KVI_EINVAL;
	}
	int gai = kvi_sp_url_addr(&u, AI_PASSIVE, ss, sl);
	if (gai != 0) {
		kvi_msgf(err, errlen, "cannot listen on %s: %s", url,
			 gai_strerror(gai));
		return KVI_EINVAL;
	}
	svc->ipc = u.ipc;
	return KVI_OK;
}

/* net_fail writes why listening on url failed with errno e. */
static kvi_err
net_fail(const char *url, int e, char *err, size_t errlen)
{
	kvi_msgf(err, errlen, "listen on %s: %s", url, strerror(e));
	return e == EADDRNOTAVAIL || e == EAFNOSUPPORT ? KVI_EINVAL : KVI_EIO;
}

kvi_err
kvn_net_listen(kvn_service *svc, const char *url, char *err, size_t errlen)
{
	svc->url = kvi_strdup(url);
	struct sockaddr_storage ss;
	socklen_t sl;
	kvi_err rv = net_addr(svc, url, &ss, &sl, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return net_fail(url, errno, err, errlen);
	}
	svc->listen_fd = fd;
	int one = 1;
	if (!svc->ipc) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	const char *path = ((struct sockaddr_un *)&ss)->sun_path;
	if (net_bind(svc, fd, &ss, sl, path) != 0) {
		return net_fail(url, errno, err, errlen);
	}
	if (svc->ipc) {
		svc->ipc_path = kvi_strdup(path); /* ours to remove */
	}
	if (listen(fd, 512) != 0) {
		return net_fail(url, errno, err, errlen);
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
