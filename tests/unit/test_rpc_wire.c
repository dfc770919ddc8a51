/*
 * test_rpc_wire.c - the shard's request server on the wire: nng's framing
 * spoken by hand over a plain socket (pipelined requests answered out of
 * order, frames that are not nng's), ipc:// with nng's own client, and a
 * peer that never reads its replies.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_fixture.h"
#include "sp.h"

/* ---- a plain socket speaking nng's req0 ---------------------------------- */

static int
dial_tcp(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in in = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	return fd;
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* read_full reads len bytes within 3 s; returns how many came before the
 * peer closed. */
static size_t
read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;
	while (got < len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		assert_int_equal(poll(&pfd, 1, 3000), 1);
		ssize_t n = read(fd, p + got, len - got);
		if (n <= 0) {
			break;
		}
		got += (size_t)n;
	}
	return got;
}

/* hello sends req0's hello on fd and checks the server's rep0 one. */
static void
hello(int fd)
{
	uint8_t h[KVI_SP_HELLO_LEN];
	kvi_sp_hello(h, KVI_SP_PROTO_REQ);
	write_all(fd, h, sizeof(h));
	assert_int_equal(read_full(fd, h, sizeof(h)), sizeof(h));
	assert_true(kvi_sp_hello_is(h, KVI_SP_PROTO_REP));
}

/* send_req sends req with request id id. */
static void
send_req(int fd, const Kvindex__Request *req, uint32_t id)
{
	nng_msg *msg;
	assert_int_equal(kvp_request_pack(req, &msg, NULL, 0), KVI_OK);
	uint8_t h[KVI_SP_PREFIX_MAX + 4];
	size_t hl = kvi_sp_prefix(h, false, nng_msg_len(msg) + 4);
	kvi_put_be32(h + hl, id | 0x80000000u);
	write_all(fd, h, hl + 4);
	write_all(fd, nng_msg_body(msg), nng_msg_len(msg));
	nng_msg_free(msg);
}

/* recv_reply reads one reply, checks it decodes, and returns its id. */
static uint32_t
recv_reply(int fd, int *code)
{
	uint8_t h[12];
	assert_int_equal(read_full(fd, h, sizeof(h)), sizeof(h));
	uint64_t len;
	assert_true(kvi_sp_prefix_read(h, false, &len));
	assert_true(len >= 4 && len < 65536);
	uint8_t *body = malloc(len - 4);
	assert_int_equal(read_full(fd, body, len - 4), len - 4);
	Kvindex__Response *resp =
	    kvindex__response__unpack(NULL, len - 4, body);
	assert_non_null(resp);
	*code = resp->code;
	kvindex__response__free_unpacked(resp, NULL);
	free(body);
	return kvi_get_be32(h + 8) & 0x7fffffffu;
}

/* closed says whether the server closed fd (within 3 s). */
static bool
closed(int fd)
{
	uint8_t b[64];
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 3000) != 1) {
			return false;
		}
		ssize_t n = read(fd, b, sizeof(b));
		if (n <= 0) {
			return true;
		}
	}
}

static uint64_t
malformed(void)
{
	kvn_stats st;
	kvn_service_stats(g_shard.svc, &st);
	return st.malformed;
}

/* ---- tests --------------------------------------------------------------- */

/* Requests pipelined on one connection: a slow one at a worker does not
 * hold up those behind it, and each reply carries its request's id. */
static void
test_pipelined_out_of_order(void **state)
{
	(void)state;
	int fd = dial_tcp(kvn_service_port(g_shard.svc));
	hello(fd);
	Kvindex__Request slow, q;
	Kvindex__AssignRequest ar;
	Kvindex__Listener l;
	Kvindex__QueryRequest qr;
	req_assign(&slow, &ar, &l, "slow");
	req_query(&q, &qr);
	send_req(fd, &slow, 7);
	send_req(fd, &q, 8);
	send_req(fd, &q, 9);
	int code;
	uint32_t first = recv_reply(fd, &code);
	assert_int_equal(code, KVI_OK);
	uint32_t second = recv_reply(fd, &code);
	assert_int_equal(code, KVI_OK);
	assert_true((first == 8 && second == 9) || (first == 9 && second == 8));
	assert_int_equal(recv_reply(fd, &code), 7);
	assert_int_equal(code, KVI_OK);
	close(fd);
}

/* Frames that are not nng's close their connection, count as malformed,
 * and leave the server serving. */
static void
test_bad_frames(void **state)
{
	(void)state;
	uint64_t before = malformed();
	int port = kvn_service_port(g_shard.svc);

	/* a hello of another protocol (a pub socket's, 0x20) */
	int fd = dial_tcp(port);
	uint8_t h[KVI_SP_HELLO_LEN];
	kvi_sp_hello(h, 0x20);
	write_all(fd, h, sizeof(h));
	assert_true(closed(fd));
	close(fd);

	/* a length over the largest message */
	fd = dial_tcp(port);
	hello(fd);
	uint8_t p[KVI_SP_PREFIX_MAX];
	size_t pl = kvi_sp_prefix(p, false, KVP_MSG_MAX + 1024);
	write_all(fd, p, pl);
	assert_true(closed(fd));
	close(fd);

	/* a request without a request id (no word with its top bit) */
	fd = dial_tcp(port);
	hello(fd);
	uint8_t f[8 + 8] = {0};
	kvi_sp_prefix(f, false, 8);
	write_all(fd, f, sizeof(f));
	assert_true(closed(fd));
	close(fd);

	assert_int_equal(malformed(), before + 3);

	/* a garbage body is the envelope's: an answer, not a close */
	fd = dial_tcp(port);
	hello(fd);
	uint8_t g[12 + 3] = {0};
	kvi_sp_prefix(g, false, 4 + 3);
	kvi_put_be32(g + 8, 0x80000005u);
	memcpy(g + 12, "\xff\xff\xff", 3);
	write_all(fd, g, sizeof(g));
	int code;
	assert_int_equal(recv_reply(fd, &code), 5);
	assert_int_equal(code, KVI_EPROTO);
	close(fd);

	Kvindex__Request q;
	Kvindex__QueryRequest qr;
	req_query(&q, &qr);
	Kvindex__Response *resp = NULL;
	assert_int_equal(kvp_call(g_client, &q, 3000, &resp, NULL, 0), KVI_OK);
	kvindex__response__free_unpacked(resp, NULL);
}

/* A peer that floods requests and never reads its replies is paused, not
 * served at the cost of others, and does not hold up the service's stop. */
static void
test_peer_that_never_reads(void **state)
{
	(void)state;
	fake_shard f;
	fake_start(&f, 0);
	int fd = dial_tcp(kvn_service_port(f.svc));
	int rcvbuf = 64 << 10;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	hello(fd);
	Kvindex__Request q;
	Kvindex__QueryRequest qr;
	req_query(&q, &qr);
	nng_msg *msg;
	assert_int_equal(kvp_request_pack(&q, &msg, NULL, 0), KVI_OK);
	size_t blen = nng_msg_len(msg);
	size_t one_len = 12 + blen;
	size_t n_req = 20000;
	uint8_t *flood = malloc(one_len * n_req);
	for (size_t i = 0; i < n_req; i++) {
		uint8_t *r = flood + i * one_len;
		kvi_sp_prefix(r, false, blen + 4);
		kvi_put_be32(r + 8, 0x80000000u | (uint32_t)i);
		memcpy(r + 12, nng_msg_body(msg), blen);
	}
	nng_msg_free(msg);
	/* the server stops reading it at some point: write what it takes */
	size_t sent = 0;
	int64_t t0 = now_ms();
	while (sent < one_len * n_req && now_ms() - t0 < 2000) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		if (poll(&pfd, 1, 100) != 1) {
			continue;
		}
		ssize_t n = send(fd, flood + sent, one_len * n_req - sent,
				 MSG_DONTWAIT);
		if (n > 0) {
			sent += (size_t)n;
		}
	}
	free(flood);

	/* another client is answered meanwhile */
	kvp_client *c = NULL;
	assert_int_equal(kvp_client_open(f.url, &c), KVI_OK);
	Kvindex__Response *resp = NULL;
	int64_t t1 = now_ms();
	assert_int_equal(kvp_call(c, &q, 3000, &resp, NULL, 0), KVI_OK);
	assert_true(now_ms() - t1 < 1000);
	kvindex__response__free_unpacked(resp, NULL);
	kvp_client_close(c);

	/* the stop waits at most about a second for the stuck replies */
	int64_t t2 = now_ms();
	fake_stop(&f);
	assert_true(now_ms() - t2 < 2500);
	close(fd);
}

/* ipc:// with nng's own client; the path is removed at the stop, a stale
 * one (its server gone) is taken over, a live one is refused. */
static void
test_ipc(void **state)
{
	(void)state;
	/* a socket's path must fit in 108 bytes: a long TMPDIR is not used */
	const char *root = getenv("TMPDIR");
	root = root != NULL && strlen(root) < 48 ? root : "/tmp";
	char dir[72];
	snprintf(dir, sizeof(dir), "%s/kvi-rpc-wire-XXXXXX", root);
	assert_non_null(mkdtemp(dir));
	char path[96], url[160], err[256];
	snprintf(path, sizeof(path), "%s/shard.sock", dir);
	snprintf(url, sizeof(url), "ipc://%s", path);

	/* a stale socket file: bound, never removed */
	int stale = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	assert_int_equal(bind(stale, (struct sockaddr *)&un, sizeof(un)), 0);
	close(stale);

	fake_shard f;
	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.mu, NULL);
	kvn_service_opts o = {.url = url, .workers = 2, .loops = 3};
	assert_int_equal(
	    kvn_service_open(&o, fake_handler, &f, &f.svc, err, sizeof(err)),
	    KVI_OK);
	assert_int_equal(kvn_service_port(f.svc), 0);

	kvn_service *again = NULL;
	assert_int_equal(
	    kvn_service_open(&o, fake_handler, &f, &again, err, sizeof(err)),
	    KVI_EIO);
	assert_null(again);

	/* several clients, so that every loop serves one */
	kvp_client *c[4];
	for (int i = 0; i < 4; i++) {
		assert_int_equal(kvp_client_open(url, &c[i]), KVI_OK);
	}
	Kvindex__Request q;
	Kvindex__QueryRequest qr;
	req_query(&q, &qr);
	for (int i = 0; i < 4; i++) {
		Kvindex__Response *resp = NULL;
		assert_int_equal(kvp_call(c[i], &q, 3000, &resp, NULL, 0),
				 KVI_OK);
		assert_int_equal(resp->query->n_m_instance, 5);
		kvindex__response__free_unpacked(resp, NULL);
		kvp_client_close(c[i]);
	}
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	fake_stop(&f);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
	rmdir(dir);
}

static void
test_listen_forms(void **state)
{
	(void)state;
	char err[256];
	const char *ok[] = {"tcp://*:0", "tcp://:0", "tcp://localhost:0",
			    "tcp4://127.0.0.1:0", "tcp://[::1]:0"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		kvn_service *svc = NULL;
		kvi_err rv = kvn_service_open_url(ok[i], 1, fake_handler, NULL,
						  &svc, err, sizeof(err));
		if (rv != KVI_OK && strstr(ok[i], "::1") != NULL) {
			continue; /* a host without IPv6 loopback */
		}
		assert_int_equal(rv, KVI_OK);
		assert_true(kvn_service_port(svc) > 0);
		kvn_service_free(svc);
	}
	const char *bad[] = {"tcp://127.0.0.1", "udp://127.0.0.1:1",
			     "tcp://no-such-host.invalid:0", "ipc://",
			     "tcp://192.0.2.1:0"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kvn_service *svc = NULL;
		err[0] = '\0';
		assert_int_equal(kvn_service_open_url(bad[i], 1, fake_handler,
						      NULL, &svc, err,
						      sizeof(err)),
				 KVI_EINVAL);
		assert_null(svc);
		assert_non_null(strstr(err, bad[i]));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pipelined_out_of_order),
	    cmocka_unit_test(test_bad_frames),
	    cmocka_unit_test(test_peer_that_never_reads),
	    cmocka_unit_test(test_ipc),
	    cmocka_unit_test(test_listen_forms),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
