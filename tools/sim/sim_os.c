#include "sim_os.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"

#define AUTO_PORT_MIN 20000
#define AUTO_PORT_MAX 60000
#define AUTO_ATTEMPTS 2000

uint64_t
sim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static kvi_err
bind_all(size_t n, int base, sim_bind_fn bind, sim_unbind_fn unbind, void *arg)
{
	for (size_t i = 0; i < n; i++) {
		kvi_err rv = bind(arg, i, base + (int)i);
		if (rv != KVI_OK) {
			while (i-- > 0) {
				unbind(arg, i);
			}
			return rv;
		}
	}
	return KVI_OK;
}

/* range_looks_free probes ports [base, base + n) with plain loopback
 * sockets: far cheaper than binding (and unbinding) hundreds of ZeroMQ
 * sockets to find a taken port, which on a busy machine (outgoing
 * connections take ports of this span too) made a large fleet's start-up
 * time out. A hint only: the real bind decides. */
static bool
range_looks_free(size_t n, int base)
{
	for (size_t i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			return true; /* cannot tell: let the bind try */
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		struct sockaddr_in sa = {
		    .sin_family = AF_INET,
		    .sin_port = htons((uint16_t)(base + i)),
		    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (!ok) {
			return false;
		}
	}
	return true;
}

kvi_err
sim_bind_range(size_t n, int base, sim_bind_fn bind, sim_unbind_fn unbind,
	       void *arg, int *out)
{
	if (base != 0) {
		if ((size_t)base + n - 1 > 65535) {
			return KVI_ERANGE;
		}
		kvi_err rv = bind_all(n, base, bind, unbind, arg);
		if (rv == KVI_OK) {
			*out = base;
		}
		return rv;
	}
	if (n >= AUTO_PORT_MAX - AUTO_PORT_MIN) {
		return KVI_ERANGE;
	}
	unsigned seed = (unsigned)(sim_now_ns() ^ (uint64_t)getpid() << 16);
	int span = AUTO_PORT_MAX - AUTO_PORT_MIN - (int)n;
	for (int attempt = 0; attempt < AUTO_ATTEMPTS; attempt++) {
		int b = AUTO_PORT_MIN + (int)(rand_r(&seed) % (unsigned)span);
		if (!range_looks_free(n, b)) {
			continue;
		}
		kvi_err rv = bind_all(n, b, bind, unbind, arg);
		if (rv == KVI_OK) {
			*out = b;
			return KVI_OK;
		}
		if (rv != KVI_EEXIST) {
			return rv;
		}
	}
	return KVI_EEXIST;
}

kvi_err
sim_write_file_atomic(const char *path, const char *data, size_t len)
{
	size_t plen = strlen(path);
	char *tmp = kvi_malloc(plen + 5);
	snprintf(tmp, plen + 5, "%s.tmp", path);
	kvi_err rv = KVI_EIO;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		goto out;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			goto out;
		}
		off += (size_t)w;
	}
	int synced = fsync(fd);
	if (close(fd) != 0 || synced != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		goto out;
	}
	rv = KVI_OK;
out:
	kvi_free(tmp);
	return rv;
}
