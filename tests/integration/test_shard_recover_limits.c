/*
 * test_shard_recover_limits.c - a shard whose listeners' /kv_recover
 * endpoints are hostile, played by an HTTP server in the test (loopback,
 * ephemeral port; a path per behaviour), beside the simulator's healthy
 * ones.
 *
 * test_slow_endpoints_do_not_starve: four endpoints that accept and never
 * answer, answer and stall, or drip a byte now and then take every fetch
 * slot (the default --recover-concurrency 4) before a healthy listener is
 * assigned; with the default deadlines the healthy one has its dump within
 * seconds (it waited out the whole 120 s fetch timeout before), and each
 * hostile listener's last_error names the deadline it passed.
 *
 * test_refused_answers: a valid dump of more blocks than
 * --listener-max-entries is refused whole (last_error, the counter, a
 * log line, no entry applied), and so is a valid dump served as
 * text/html.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard_check.h"

#define TRACE      KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define MAX_CONNS  256
#define BIG_BLOCKS 5000
#define MAX_ENTRY  "1000"

static kvt_sim sim;
static shardproc shard;

/* ---- the hostile server ---------------------------------------------- */

typedef struct hostile {
	int lfd, port;
	int stop[2]; /* readable once it stops */
	pthread_t acceptor;
	pthread_mutex_t mu;
	pthread_t conns[MAX_CONNS]; /* under mu */
	int n_conns, requests;
} hostile;

static hostile hs;

/* hs_wait waits ms (-1: for ever) for fd to be readable or the server to
 * stop; true when fd is readable and the server runs. */
static bool
hs_wait(int fd, int ms)
{
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
			      {.fd = hs.stop[0], .events = POLLIN}};
	return poll(p, 2, ms) > 0 && p[1].revents == 0 && p[0].revents != 0;
}

static void
hs_send(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n <= 0) {
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* hs_hold keeps the connection open, saying nothing more, until the
 * client closes it or the server stops. */
static void
hs_hold(int fd)
{
	char buf[256];
	while (hs_wait(fd, -1) && recv(fd, buf, sizeof(buf), 0) > 0) {
	}
}

/* hs_dump answers a TreeDump of n blocks, as type. */
static void
hs_dump(int fd, int n, const char *type)
{
	size_t cap = 128 + (size_t)n * 64, len = 0;
	char *body = malloc(cap);
	len += (size_t)snprintf(body, cap,
				"{\"TreeDump\": {\"events\": [{\"event\": "
				"{\"event_id\": 0, \"data\": {\"stored\": "
				"{\"parent_hash\": null, \"blocks\": [");
	for (int i = 0; i < n; i++) {
		len += (size_t)snprintf(body + len, cap - len,
					"%s{\"block_hash\": %d, "
					"\"tokens_hash\": %d}",
					i ? ", " : "", 1000 + i, 7000 + i);
	}
	len += (size_t)snprintf(body + len, cap - len,
				"]}}}}], \"last_event_id\": null}}");
	char head[256];
	int h = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 type, len);
	hs_send(fd, head, (size_t)h);
	hs_send(fd, body, len);
	free(body);
}

static void
hs_route(int fd, const char *path)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: "
				   "application/json\r\nContent-Length: "
				   "100000\r\n\r\n";
	if (strncmp(path, "/stall/", 7) == 0) {
		hs_send(fd, head, sizeof(head) - 1);
		hs_send(fd, "{\"Tree", 6);
		hs_hold(fd);
	} else if (strncmp(path, "/drip/", 6) == 0) {
		/* a byte every 6 s: slower than the idle deadline */
		hs_send(fd, head, sizeof(head) - 1);
		char buf[64];
		for (int i = 0; i < 20; i++) {
			hs_send(fd, &"{\"TreeDump\": {\"events\": ["[i], 1);
			if (hs_wait(fd, 6000) && recv(fd, buf, 64, 0) <= 0) {
				return;
			}
		}
	} else if (strncmp(path, "/big/", 5) == 0) {
		hs_dump(fd, BIG_BLOCKS, "application/json");
	} else if (strncmp(path, "/html/", 6) == 0) {
		hs_dump(fd, 3, "text/html; charset=utf-8");
	} else {
		hs_hold(fd); /* /hang/: accepts, reads, never answers */
	}
}

static void *
hs_conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[2048];
	size_t len = 0;
	while (len < sizeof(req) - 1 && hs_wait(fd, -1)) {
		ssize_t n = recv(fd, req + len, sizeof(req) - 1 - len, 0);
		if (n <= 0) {
			break;
		}
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL) {
			char path[128] = "";
			sscanf(req, "GET %127s", path);
			pthread_mutex_lock(&hs.mu);
			hs.requests++;
			pthread_mutex_unlock(&hs.mu);
			hs_route(fd, path);
			break;
		}
	}
	close(fd);
	return NULL;
}

static void *
hs_accept_main(void *arg)
{
	(void)arg;
	while (hs_wait(hs.lfd, -1)) {
		int fd = accept4(hs.lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_mutex_lock(&hs.mu);
		if (fd >= 0 && hs.n_conns < MAX_CONNS) {
			pthread_create(&hs.conns[hs.n_conns++], NULL,
				       hs_conn_main, (void *)(intptr_t)fd);
		} else if (fd >= 0) {
			close(fd);
		}
		pthread_mutex_unlock(&hs.mu);
	}
	return NULL;
}

static void
hs_start(void)
{
	memset(&hs, 0, sizeof(hs));
	/* close-on-exec, all of it: the shard and the simulator the test
	 * starts must not hold the server's descriptors */
	hs.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	assert_int_equal(bind(hs.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(hs.lfd, (struct sockaddr *)&a, &alen), 0);
	hs.port = ntohs(a.sin_port);
	assert_int_equal(listen(hs.lfd, 64), 0);
	assert_int_equal(pipe2(hs.stop, O_CLOEXEC), 0);
	pthread_mutex_init(&hs.mu, NULL);
	pthread_create(&hs.acceptor, NULL, hs_accept_main, NULL);
}

static void
hs_stop(void)
{
	if (hs.lfd <= 0) {
		return;
	}
	close(hs.stop[1]);
	pthread_join(hs.acceptor, NULL);
	for (int i = 0; i < hs.n_conns; i++) {
		pthread_join(hs.conns[i], NULL);
	}
	close(hs.lfd);
	close(hs.stop[0]);
	pthread_mutex_destroy(&hs.mu);
	memset(&hs, 0, sizeof(hs));
}

static int
hs_requests(void)
{
	pthread_mutex_lock(&hs.mu);
	int n = hs.requests;
	pthread_mutex_unlock(&hs.mu);
	return n;
}

/* hs_url writes the /kv_recover endpoint of behaviour kind. */
static void
hs_url(const char *kind, char *buf, size_t len)
{
	snprintf(buf, len, "http://127.0.0.1:%d/%s", hs.port, kind);
}

/* ---- the cluster ----------------------------------------------------- */

static void
sim_post(const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&sim, "POST", path, j, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(j);
}

/* sim_start runs six ranks that have history before any listener. */
static void
sim_start(void)
{
	const char *argv[] = {"--pods",         "6",    "--dp",     "1",
			      "--trace",        TRACE,  "--rate",   "1000",
			      "--cache-blocks", "4096", "--paused", NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, argv, 10000, &sim), KVI_OK);
	sim_post("/resume", "{}");
	kvt_sleep_ms(500);
	sim_post("/pause", "{}");
}

static int
teardown(void **state)
{
	(void)state;
	shc_cleanup(&shard);
	hs_stop();
	kvt_sim_stop(&sim, NULL);
	return 0;
}

/* wait_error waits until rank idx's listener has a last_error holding
 * want and returns its entries; fails the test after timeout_ms. */
static uint64_t
wait_error(int idx, const char *want, int timeout_ms)
{
	char key[64], last[300] = "";
	shc_key(&sim, idx, key, sizeof(key));
	int64_t deadline = kvt_now_ms() + timeout_ms;
	do {
		Kvindex__Response *resp;
		Kvindex__ListenerStatus *st = shc_status(&shard, key, &resp);
		assert_non_null(st);
		snprintf(last, sizeof(last), "%s",
			 st->last_error ? st->last_error : "");
		uint64_t blocks = st->blocks;
		kvindex__response__free_unpacked(resp, NULL);
		if (strstr(last, want) != NULL) {
			return blocks;
		}
		kvt_sleep_ms(50);
	} while (kvt_now_ms() < deadline);
	fail_msg("%s: last_error \"%s\", not \"%s\"", key, last, want);
	return 0;
}

static void
test_slow_endpoints_do_not_starve(void **state)
{
	(void)state;
	hs_start();
	sim_start();
	shc_start(&shard, NULL); /* the default deadlines and concurrency */
	static const char *const kinds[] = {"hang", "hang", "stall", "drip"};
	for (int i = 0; i < 4; i++) {
		char url[96];
		hs_url(kinds[i], url, sizeof(url));
		shc_assign_recover(&shard, &sim, i, url);
	}
	/* every slot is taken before the healthy listener comes */
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	while (hs_requests() < 4 && kvt_now_ms() < deadline) {
		kvt_sleep_ms(10);
	}
	assert_int_equal(hs_requests(), 4);
	int64_t t0 = kvt_now_ms();
	char rec[96];
	snprintf(rec, sizeof(rec), "http://127.0.0.1:%d", sim.recover_port[4]);
	shc_assign_recover(&shard, &sim, 4, rec);
	static const int healthy[] = {4};
	shc_wait_truth(&shard, &sim, healthy, 1, 15000);
	double took = (double)(kvt_now_ms() - t0) / 1000;
	printf("healthy dump applied %.2f s after its assignment, with four "
	       "hostile endpoints in every slot\n",
	       took);
	assert_true(took < 10);
	/* each hostile listener says which deadline its endpoint passed, and
	 * holds nothing */
	assert_int_equal(wait_error(0, "no answer within 5000 ms", 10000), 0);
	assert_int_equal(wait_error(1, "no answer within 5000 ms", 10000), 0);
	assert_int_equal(wait_error(2, "nothing received for 5000 ms", 10000),
			 0);
	assert_int_equal(wait_error(3, "nothing received for 5000 ms", 10000),
			 0);
	assert_int_equal(shc_stop(&shard), 0);
}

static void
test_refused_answers(void **state)
{
	(void)state;
	hs_start();
	sim_start();
	static const char *flags[] = {"--listener-max-entries", MAX_ENTRY,
				      NULL};
	shc_start(&shard, flags);
	char url[96];
	hs_url("big", url, sizeof(url));
	shc_assign_recover(&shard, &sim, 0, url);
	hs_url("html", url, sizeof(url));
	shc_assign_recover(&shard, &sim, 1, url);
	/* a dump of more blocks than a listener may hold: none applied */
	assert_int_equal(wait_error(0,
				    "refused, none of it applied: the answer "
				    "stores more than " MAX_ENTRY " blocks",
				    SHC_WAIT_MS),
			 0);
	assert_true(shc_wait_metric(&shard,
				    "kvindex_shard_recoveries_too_big_total", 1,
				    5000) >= 1);
	size_t len;
	char *log = kvt_file_read(shard.log_path, &len);
	const char *line =
	    strstr(log, "event=recover_refused listener=sim/pod-0#0");
	assert_non_null(line);
	assert_non_null(strstr(line, "max_entries=" MAX_ENTRY));
	free(log);
	/* a valid dump served as HTML: not taken */
	assert_int_equal(
	    wait_error(1,
		       "Content-Type text/html; charset=utf-8, not "
		       "application/json",
		       SHC_WAIT_MS),
	    0);
	assert_true(shc_metric(&shard, "kvindex_shard_entries") == 0);
	assert_int_equal(shc_stop(&shard), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_slow_endpoints_do_not_starve,
				      teardown),
	    cmocka_unit_test_teardown(test_refused_answers, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
