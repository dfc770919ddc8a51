/*
 * test_httpd_limits.c - the HTTP server at its limits, over real loopback
 * sockets: a process out of file descriptors (answered from each loop's
 * reserve descriptor, which must survive another thread taking a freed
 * descriptor first), more connections than max_conns, and a client that
 * drips its request.
 *
 * Out of descriptors is made exact rather than raced for: the test lowers
 * its own limit, holds every descriptor left under it open on /dev/null,
 * and frees exactly as many as the clients it then opens will take, so that
 * the server, in the same process, has none when they arrive.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "httpd_fixture.h"

/* ---- descriptors held by a test, given back by teardown ---- */

#define HELD_MAX 64

static struct rlimit limit_was;
static bool limit_lowered;
static int held[HELD_MAX];
static int n_held;

/* limit_lower lets this process open exactly `room` more descriptors:
 * its limit is set past the first `room` numbers not in use. */
static void
limit_lower(int room)
{
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit_was), 0);
	int end = 0;
	for (int free = 0; free < room; end++) {
		free += fcntl(end, F_GETFD) < 0;
	}
	struct rlimit low = limit_was;
	low.rlim_cur = (rlim_t)end;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	limit_lowered = true;
}

/* hold_all opens /dev/null until no descriptor is left; returns how many
 * it holds. */
static int
hold_all(void)
{
	int fd;
	while (n_held < HELD_MAX &&
	       (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		held[n_held++] = fd;
	}
	assert_true(n_held < HELD_MAX);
	return n_held;
}

/* give_back closes the last n descriptors held. */
static void
give_back(int n)
{
	assert_true(n <= n_held);
	while (n-- > 0) {
		close(held[--n_held]);
	}
}

static int
limits_restore(void **state)
{
	(void)state;
	give_back(n_held);
	if (limit_lowered) {
		setrlimit(RLIMIT_NOFILE, &limit_was);
		limit_lowered = false;
	}
	return 0;
}

/* ---- another thread, taking a freed descriptor first ---- */

/* While steal_armed, the next accept4() to find a descriptor free takes it
 * first (into stolen_fd), as another thread of the process could between
 * the reserve's close and its accept. */
static atomic_bool steal_armed;
static atomic_int stolen_fd = -1;

int
accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	static int (*real)(int, struct sockaddr *, socklen_t *, int);
	if (real == NULL) {
		*(void **)&real = dlsym(RTLD_NEXT, "accept4");
	}
	if (atomic_load(&steal_armed)) {
		int s = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (s >= 0) {
			atomic_store(&stolen_fd, s);
			atomic_store(&steal_armed, false);
		}
	}
	return real(fd, addr, len, flags);
}

/* ---- helpers ---- */

/* read_reply reads what the server sends on fd until it closes it (5 s at
 * most) into out. */
static void
read_reply(int fd, char *out, size_t cap)
{
	size_t n = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (n + 1 < cap && poll(&p, 1, 5000) == 1) {
		ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
		if (r <= 0) {
			break;
		}
		n += (size_t)r;
	}
	out[n] = '\0';
}

/* assert_told_out checks that out is the reserve's 503. */
static void
assert_told_out(const char *out)
{
	assert_non_null(strstr(out, "HTTP/1.1 503 "));
	assert_non_null(strstr(out, "out of file descriptors"));
	assert_non_null(strstr(out, "Retry-After: 1"));
	assert_framed(out);
}

static kvi_httpd_stats
stats_of(kvi_httpd *h)
{
	kvi_httpd_stats st;
	kvi_httpd_stats_get(h, &st);
	return st;
}

/* wait_open waits (5 s at most) until h has n connections open. */
static void
wait_open(kvi_httpd *h, uint64_t n)
{
	for (int i = 0; i < 500 && stats_of(h).open != n; i++) {
		sleep_ms(10);
	}
	assert_int_equal(stats_of(h).open, n);
}

/* wait_reserve_idle waits (5 s at most) until h has answered `answers`
 * connections from its reserve and is done with it: every descriptor it
 * used meanwhile is given back, and its reserve is open again. */
static void
wait_reserve_idle(kvi_httpd *h, uint64_t answers)
{
	kvi_httpd_stats st = stats_of(h);
	for (int i = 0;
	     i < 500 && (st.reserve_answers != answers || st.reserve_busy != 0);
	     i++) {
		sleep_ms(10);
		st = stats_of(h);
	}
	assert_int_equal(st.reserve_answers, answers);
	assert_int_equal(st.reserve_busy, 0);
}

/* assert_serves checks that a plain request on port is served. */
static void
assert_serves(uint16_t port)
{
	fetch f;
	do_fetch("GET", port, "/hello", NULL, 0, NULL, 5000, &f);
	assert_int_equal(f.status, 200);
	fetch_fini(&f);
}

/* ---- tests ---- */

/* test_out_of_descriptors: connections that arrive when the process has
 * no descriptor left are answered from the reserve - 503 with the reason,
 * several waiting at once, /health 200 - the loop pauses rather than
 * spins, and serves as usual once descriptors are back. */
static void
test_out_of_descriptors(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	double t0 = now_s();
	limit_lower(16);
	assert_int_equal(hold_all(), 16);
	char out[1024];
	/* one free, which the client takes */
	give_back(1);
	int c = connect_raw(port);
	assert_true(c >= 0);
	read_reply(c, out, sizeof(out));
	assert_told_out(out);
	close(c);
	wait_reserve_idle(h, 1);
	assert_true(stats_of(h).accept_pauses >= 1);
	/* three waiting at once, each answered */
	give_back(2);
	int w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(w[i] >= 0);
	}
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    connect(w[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	for (int i = 0; i < 3; i++) {
		read_reply(w[i], out, sizeof(out));
		assert_told_out(out);
	}
	wait_reserve_idle(h, 4); /* each closed after 50 ms of lingering */
	for (int i = 0; i < 3; i++) {
		close(w[i]);
	}
	/* a liveness probe still sees a live process (this server has no
	 * /health route: only the reserve answers it so); the three
	 * descriptors held again, one given back for the probe */
	int was = n_held;
	assert_int_equal(hold_all(), was + 3);
	give_back(1);
	raw_exchange(port, "GET /health HTTP/1.1\r\nHost: t\r\n\r\n", out,
		     sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 "));
	assert_non_null(strstr(out, "{\"ok\":true}"));
	assert_framed(out);
	wait_reserve_idle(h, 5);
	/* paused and tried again, never more than once per 100 ms pause */
	uint64_t pauses = stats_of(h).accept_pauses;
	print_message("%llu pauses in %.2f s\n", (unsigned long long)pauses,
		      now_s() - t0);
	assert_true(pauses <= 2 + (uint64_t)((now_s() - t0) * 10));
	limits_restore(NULL);
	assert_serves(port);
	kvi_httpd_free(h);
}

/* test_reserve_taken_back: another thread takes the descriptor the reserve
 * gave up, so the waiting connection goes unanswered and the reserve
 * cannot be opened again. Once a descriptor is free the loop takes its
 * reserve back before accepting again, and answers that connection from
 * it: the reserve is lost for one answer, not for good. */
static void
test_reserve_taken_back(void **state)
{
	(void)state;
	kvi_httpd *h = server_new(NULL, 1);
	uint16_t port = kvi_httpd_port(h);
	limit_lower(16);
	assert_int_equal(hold_all(), 16);
	atomic_store(&stolen_fd, -1);
	atomic_store(&steal_armed, true);
	give_back(1);
	int c = connect_raw(port);
	assert_true(c >= 0);
	/* the failed accept, the reserve given up and taken, and done */
	for (int i = 0; i < 500 && atomic_load(&stolen_fd) < 0; i++) {
		sleep_ms(10);
	}
	assert_true(atomic_load(&stolen_fd) >= 0);
	wait_reserve_idle(h, 0);
	close(atomic_load(&stolen_fd));
	char out[1024];
	read_reply(c, out, sizeof(out));
	assert_told_out(out);
	assert_int_equal(stats_of(h).reserve_answers, 1);
	close(c);
	limits_restore(NULL);
	assert_serves(port);
	kvi_httpd_free(h);
}

/* test_max_connections: past max_conns a new connection gets a fast 503
 * and is closed; once the others close, connections are served again. */
static void
test_max_connections(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.max_conns = 3};
	kvi_httpd *h = server_new(&cfg, 1);
	uint16_t port = kvi_httpd_port(h);
	int idle[3];
	for (int i = 0; i < 3; i++) {
		idle[i] = connect_raw(port);
		assert_true(idle[i] >= 0);
	}
	wait_open(h, 3);
	char out[4096];
	double t0 = now_s();
	raw_exchange(port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", out,
		     sizeof(out));
	assert_true(now_s() - t0 < 2.0); /* not left to wait */
	assert_non_null(strstr(out, "HTTP/1.1 503 "));
	assert_non_null(strstr(out, "too many connections"));
	assert_framed(out);
	assert_int_equal(stats_of(h).refused, 1);
	for (int i = 0; i < 3; i++) {
		close(idle[i]);
	}
	wait_open(h, 0); /* the sweep sees them gone */
	assert_serves(port);
	kvi_httpd_free(h);
}

/* test_drip_ends: a request must arrive whole within the timeout, however
 * it drips: one header line every 300 ms, with a timeout of 1 s, is cut
 * off within about a second and a half. evhttp's own timeout restarts at
 * every read, so alone it never ends such a client. */
static void
test_drip_ends(void **state)
{
	(void)state;
	kvi_httpd_config cfg = {.timeout_s = 1};
	kvi_httpd *h = server_new(&cfg, 1);
	uint16_t port = kvi_httpd_port(h);
	/* from before the connection: the server's timeout cannot start
	 * earlier, however late this thread runs */
	double t0 = now_s(), closed = -1;
	int fd = connect_raw(port);
	assert_true(fd >= 0);
	const char *first = "GET /hello HTTP/1.1\r\nHost: x\r\n";
	assert_int_equal(write(fd, first, strlen(first)),
			 (ssize_t)strlen(first));
	int lines = 0;
	while (now_s() - t0 < 5.0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 300) > 0) {
			char buf[256];
			if (read(fd, buf, sizeof(buf)) <= 0) {
				closed = now_s() - t0;
				break;
			}
		}
		if (send(fd, "X-Drip: 1\r\n", 11, MSG_NOSIGNAL) != 11) {
			closed = now_s() - t0;
			break;
		}
		lines++;
	}
	close(fd);
	print_message("closed after %.2f s and %d header lines\n", closed,
		      lines);
	assert_true(closed > 0.8 && closed < 3.0);
	assert_true(lines >= 2);
	assert_true(stats_of(h).timed_out >= 1);
	assert_serves(port); /* a client that asks in time */
	kvi_httpd_free(h);
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_out_of_descriptors, limits_restore),
	    cmocka_unit_test_teardown(test_reserve_taken_back, limits_restore),
	    cmocka_unit_test(test_max_connections),
	    cmocka_unit_test(test_drip_ends),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
