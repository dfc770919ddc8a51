/*
 * httpd_reserve.c - what a loop does when the process is out of file
 * descriptors. Each loop keeps one descriptor in reserve (/dev/null, open
 * from the start). When accept() fails for want of descriptors, the loop
 * gives the reserve up to accept one waiting connection, answers it
 * directly - 200 to the health path, so that a liveness probe still sees a
 * live process, 503 with the reason to anything else - closes it, and takes
 * the reserve back. Without it those clients would wait, unanswered, until
 * they time out.
 *
 * Another thread may take a freed descriptor first (between giving the
 * reserve up and accept(), or between the answer's close and taking the
 * reserve back). That costs one answer, not the reserve: kvi_http_reserve_take
 * runs again at every use and when each accept pause ends, so the reserve
 * is back as soon as a descriptor is. Loop thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "httpd_int.h"

/* Connections answered from the reserve per failed accept, and how long
 * each may take to send its request line. */
#define RESERVE_ANSWERS 4
#define RESERVE_WAIT_MS 50

void
kvi_http_reserve_take(kvi_http_loop *loop)
{
	if (loop->reserve_fd < 0) {
		loop->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
}

/* reserve_is_health says whether the request in buf[0..n) asks for the
 * health path: "GET /health " or "HEAD /health?...". */
static bool
reserve_is_health(const char *buf, size_t n, const char *path)
{
	size_t m = strlen(path);
	size_t at = n >= 4 && memcmp(buf, "GET ", 4) == 0    ? 4
		    : n >= 5 && memcmp(buf, "HEAD ", 5) == 0 ? 5
							     : 0;
	return at > 0 && n > at + m && memcmp(buf + at, path, m) == 0 &&
	       (buf[at + m] == ' ' || buf[at + m] == '?');
}

/* reserve_answer answers one connection accepted on the reserve
 * descriptor and closes it. */
static void
reserve_answer(kvi_http_loop *loop, int fd)
{
	char buf[512];
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n = -1;
	if (poll(&pfd, 1, RESERVE_WAIT_MS) == 1) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	}
	const char *path = loop->h->cfg.health_path != NULL
			       ? loop->h->cfg.health_path
			       : "/health";
	bool health = n > 0 && reserve_is_health(buf, (size_t)n, path);
	char reply[256];
	size_t len =
	    health ? kvi_http_canned(reply, sizeof(reply), "200 OK",
				     "{\"ok\":true}", false)
		   : kvi_http_canned(reply, sizeof(reply),
				     "503 Service Unavailable",
				     "{\"error\":\"out of file descriptors; "
				     "try again\"}",
				     true);
	atomic_fetch_add(&loop->reserve_answers, 1);
	ssize_t w = send(fd, reply, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)w;
	/* a lingering close: what the client still sends is read, not left
	 * unread, which would reset the connection before it reads this */
	shutdown(fd, SHUT_WR);
	int64_t until = kvi_now_ms() + RESERVE_WAIT_MS, left;
	while ((left = until - kvi_now_ms()) > 0 &&
	       poll(&pfd, 1, (int)left) == 1 &&
	       recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
	}
	close(fd);
}

/* reserve_answer_waiting is kvi_http_reserve_use's loop. */
static void
reserve_answer_waiting(kvi_http_loop *loop, int listen_fd)
{
	kvi_http_reserve_take(loop);
	for (int i = 0; i < RESERVE_ANSWERS && loop->reserve_fd >= 0; i++) {
		int spare =
		    i > 0 ? fcntl(loop->reserve_fd, F_DUPFD_CLOEXEC, 0) : -1;
		if (spare >= 0) {
			close(spare); /* descriptors again: accept as usual */
			return;
		}
		close(loop->reserve_fd);
		loop->reserve_fd = -1;
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		int e = errno;
		if (fd >= 0) {
			reserve_answer(loop, fd);
		}
		kvi_http_reserve_take(loop);
		if (fd < 0 && e != EMFILE && e != ENFILE) {
			return; /* none waiting */
		}
	}
}

void
kvi_http_reserve_use(kvi_http_loop *loop, int listen_fd)
{
	atomic_store(&loop->reserve_busy, true);
	reserve_answer_waiting(loop, listen_fd);
	atomic_store(&loop->reserve_busy, false);
}
