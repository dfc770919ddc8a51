/*
 * rpc_fixture.c - what the rpc tests share; see rpc_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpc_fixture.h"

fake_shard g_shard;
kvp_client *g_client;

int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* port_hold binds a loopback TCP port the kernel picks, without
 * SO_REUSEADDR and without listening, and returns the descriptor. */
int
port_hold(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t len = sizeof(a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/*
 * The fake handler.
 */

static char *arena_printf(kvp_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static char *
arena_printf(kvp_arena *a, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return kvp_arena_strdup(a, buf);
}

static void
fake_record(fake_shard *f, const Kvindex__Request *req)
{
	pthread_mutex_lock(&f->mu);
	size_t len = kvindex__request__get_packed_size(req);
	f->last_len = 0;
	if (len <= sizeof(f->last)) {
		f->last_len = kvindex__request__pack(req, f->last);
	}
	pthread_mutex_unlock(&f->mu);
}

static void
fake_assign(fake_shard *f, const Kvindex__AssignRequest *ar,
	    Kvindex__Response *resp, kvp_arena *a)
{
	const char *key = ar->listener->key;
	if (strcmp(key, "slow") == 0) {
		atomic_store(&f->slow_started, 1);
		sleep_ms(SLOW_MS);
		atomic_store(&f->slow_done, 1);
	}
	if (strcmp(key, "fail") == 0) {
		resp->code = KVI_EEXIST;
		resp->error = arena_printf(
		    a, "listener %s is already assigned to shard 3", key);
		return;
	}
	Kvindex__AssignResponse *body = kvp_arena_alloc(a, sizeof(*body));
	kvindex__assign_response__init(body);
	body->has_existed = 1;
	body->existed = strcmp(key, "again") == 0;
	resp->body_case = KVINDEX__RESPONSE__BODY_ASSIGN;
	resp->assign = body;
}

static void
fake_unassign(const Kvindex__UnassignRequest *ur, Kvindex__Response *resp,
	      kvp_arena *a)
{
	if (strcmp(ur->key, "missing") == 0) {
		resp->code = KVI_ENOENT;
		resp->error = arena_printf(a, "no listener %s", ur->key);
	}
}

/* A match per seq hash, in compact form: listener i is (that hash, rank
 * i), with i blocks on the device, 1 on the host, 2 on disk. */
static void
fake_query(const Kvindex__QueryRequest *qr, Kvindex__Response *resp,
	   kvp_arena *a)
{
	Kvindex__QueryResponse *body = kvp_arena_alloc(a, sizeof(*body));
	kvindex__query_response__init(body);
	size_t n = qr->n_seq_hashes;
	body->m_instance = kvp_arena_calloc(a, n, sizeof(uint64_t));
	body->m_rank = kvp_arena_calloc(a, n, sizeof(uint32_t));
	body->m_gpu = kvp_arena_calloc(a, n, sizeof(uint32_t));
	body->m_cpu = kvp_arena_calloc(a, n, sizeof(uint32_t));
	body->m_disk = kvp_arena_calloc(a, n, sizeof(uint32_t));
	for (size_t i = 0; i < n; i++) {
		body->m_instance[i] = qr->seq_hashes[i];
		body->m_rank[i] = (uint32_t)i;
		body->m_gpu[i] = (uint32_t)i;
		body->m_cpu[i] = 1;
		body->m_disk[i] = 2;
	}
	body->n_m_instance = body->n_m_rank = body->n_m_gpu = n;
	body->n_m_cpu = body->n_m_disk = n;
	resp->body_case = KVINDEX__RESPONSE__BODY_QUERY;
	resp->query = body;
}

static Kvindex__Counters *
fake_counters(kvp_arena *a, uint64_t batches)
{
	Kvindex__Counters *c = kvp_arena_alloc(a, sizeof(*c));
	kvindex__counters__init(c);
	c->has_batches = 1;
	c->batches = batches;
	c->has_orphans = 1;
	c->orphans = UINT64_MAX;
	return c;
}

/* "broken" leaves the required shard_id out. */
static void
fake_status(const Kvindex__StatusRequest *sr, Kvindex__Response *resp,
	    kvp_arena *a)
{
	Kvindex__StatusResponse *body = kvp_arena_alloc(a, sizeof(*body));
	kvindex__status_response__init(body);
	bool broken = sr->key != NULL && strcmp(sr->key, "broken") == 0;
	body->shard_id = broken ? NULL : kvp_arena_strdup(a, "shard-7");
	body->entries = 42;
	body->store_bytes = UINT64_C(1) << 40;
	body->totals = fake_counters(a, 3);

	Kvindex__Listener *l = kvp_arena_alloc(a, sizeof(*l));
	kvindex__listener__init(l);
	l->key = kvp_arena_strdup(a, "ns/pod-a#1");
	l->instance_id = 77;
	l->dp_rank = 1;
	l->model = kvp_arena_strdup(a, "llama");
	l->block_size = 16;
	l->endpoint = kvp_arena_strdup(a, "tcp://10.0.0.1:5558");
	Kvindex__ListenerStatus *ls = kvp_arena_alloc(a, sizeof(*ls));
	kvindex__listener_status__init(ls);
	ls->listener = l;
	ls->state = KVINDEX__LISTENER_STATE__LISTENER_STATE_RECOVERING;
	ls->has_watermark = 1;
	ls->watermark = (UINT64_C(1) << 63) + 5;
	ls->blocks = 10;
	ls->counters = fake_counters(a, 1);
	ls->last_error = kvp_arena_strdup(a, "replay gap 5..9");
	body->n_listeners = 1;
	body->listeners = kvp_arena_calloc(a, 1, sizeof(void *));
	body->listeners[0] = ls;
	resp->body_case = KVINDEX__RESPONSE__BODY_STATUS;
	resp->status = body;
}

const uint64_t dump_ext[3] = {UINT64_MAX, 1, UINT64_C(0x8000000000000001)};
const uint64_t dump_seq[3] = {UINT64_C(1) << 63, 2,
			      UINT64_C(0xfedcba9876543210)};

/* "nomsg" fails without a message. */
static void
fake_dump(const Kvindex__DumpRequest *dr, Kvindex__Response *resp, kvp_arena *a)
{
	if (strcmp(dr->key, "nomsg") == 0) {
		resp->code = KVI_ENOENT;
		return;
	}
	Kvindex__DumpResponse *body = kvp_arena_alloc(a, sizeof(*body));
	kvindex__dump_response__init(body);
	body->has_watermark = 1;
	body->watermark = 99;
	body->n_entries = 3;
	body->entries = kvp_arena_calloc(a, 3, sizeof(void *));
	for (size_t i = 0; i < 3; i++) {
		Kvindex__DumpEntry *e = kvp_arena_alloc(a, sizeof(*e));
		kvindex__dump_entry__init(e);
		e->ext_hash = dump_ext[i];
		e->seq_hash = dump_seq[i];
		e->tiers = (uint32_t)(1u << i) | 4u;
		body->entries[i] = e;
	}
	resp->body_case = KVINDEX__RESPONSE__BODY_DUMP;
	resp->dump = body;
}

void
fake_handler(void *arg, const Kvindex__Request *req, Kvindex__Response *resp,
	     kvp_arena *arena)
{
	fake_shard *f = arg;
	atomic_fetch_add(&f->calls, 1);
	fake_record(f, req);
	switch (req->body_case) {
	case KVINDEX__REQUEST__BODY_ASSIGN:
		fake_assign(f, req->assign, resp, arena);
		break;
	case KVINDEX__REQUEST__BODY_UNASSIGN:
		fake_unassign(req->unassign, resp, arena);
		break;
	case KVINDEX__REQUEST__BODY_QUERY:
		fake_query(req->query, resp, arena);
		break;
	case KVINDEX__REQUEST__BODY_STATUS:
		fake_status(req->status, resp, arena);
		break;
	case KVINDEX__REQUEST__BODY_DUMP:
		fake_dump(req->dump, resp, arena);
		break;
	default:
		resp->code = KVI_EINTERNAL;
		break;
	}
}

void
fake_start(fake_shard *f, int port)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	char url[64], err[256];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	kvi_err rv = kvn_service_open_url(url, 4, fake_handler, f, &f->svc, err,
					  sizeof(err));
	if (rv != KVI_OK) {
		fail_msg("kvn_service_open_url %s: %s", url, err);
	}
	assert_true(kvn_service_port(f->svc) > 0);
	if (port != 0) {
		assert_int_equal(kvn_service_port(f->svc), port);
	}
	snprintf(f->url, sizeof(f->url), "tcp://127.0.0.1:%d",
		 kvn_service_port(f->svc));
}

void
fake_stop(fake_shard *f)
{
	kvn_service_free(f->svc);
	f->svc = NULL;
	pthread_mutex_destroy(&f->mu);
}

/* fake_last returns the last request f handled (the caller frees it). */
Kvindex__Request *
fake_last(fake_shard *f)
{
	pthread_mutex_lock(&f->mu);
	Kvindex__Request *req =
	    kvindex__request__unpack(NULL, f->last_len, f->last);
	pthread_mutex_unlock(&f->mu);
	assert_non_null(req);
	return req;
}

int
group_setup(void **state)
{
	(void)state;
	fake_start(&g_shard, 0);
	assert_int_equal(kvp_client_open(g_shard.url, &g_client), KVI_OK);
	assert_string_equal(kvp_client_url(g_client), g_shard.url);
	return 0;
}

int
group_teardown(void **state)
{
	(void)state;
	kvp_client_close(g_client);
	fake_stop(&g_shard);
	return 0;
}

/*
 * Request builders. Each fills caller-owned structs.
 */

void
req_dump(Kvindex__Request *req, Kvindex__DumpRequest *dr, const char *key)
{
	kvindex__request__init(req);
	kvindex__dump_request__init(dr);
	dr->key = (char *)key;
	req->body_case = KVINDEX__REQUEST__BODY_DUMP;
	req->dump = dr;
}

void
req_assign(Kvindex__Request *req, Kvindex__AssignRequest *ar,
	   Kvindex__Listener *l, const char *key)
{
	kvindex__request__init(req);
	kvindex__assign_request__init(ar);
	kvindex__listener__init(l);
	l->key = (char *)key;
	l->instance_id = UINT64_C(0xfedcba9876543210);
	l->pod = "ns/pod-a";
	l->dp_rank = 65535;
	l->model = "llama";
	l->block_size = 16;
	l->endpoint = "tcp://10.0.0.1:5558";
	l->replay_endpoint = "tcp://10.0.0.1:5658";
	l->recover_endpoint = "http://10.0.0.1:8001";
	l->topic = "kv@";
	ar->listener = l;
	req->body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req->assign = ar;
}

const uint64_t query_hashes[5] = {1, UINT64_C(1) << 63, UINT64_MAX,
				  UINT64_C(0x8000000000000001), 42};
const uint64_t query_instances[2] = {7, (UINT64_C(1) << 63) | 9};

void
req_query(Kvindex__Request *req, Kvindex__QueryRequest *qr)
{
	kvindex__request__init(req);
	kvindex__query_request__init(qr);
	qr->model = "llama";
	qr->n_seq_hashes = 5;
	qr->seq_hashes = (uint64_t *)query_hashes;
	qr->n_instances = 2;
	qr->instances = (uint64_t *)query_instances;
	qr->has_dp_rank = 1;
	qr->dp_rank = 3;
	req->body_case = KVINDEX__REQUEST__BODY_QUERY;
	req->query = qr;
}

/* raw_call sends len bytes with a plain req socket to url and returns the
 * decoded reply (the caller frees it). */
Kvindex__Response *
raw_call(const char *url, const void *buf, size_t len)
{
	nng_socket s;
	assert_int_equal(nng_req0_open(&s), 0);
	assert_int_equal(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 3000), 0);
	assert_int_equal(nng_dial(s, url, NULL, 0), 0);
	assert_int_equal(nng_send(s, (void *)buf, len, 0), 0);
	void *rbuf = NULL;
	size_t rlen = 0;
	assert_int_equal(nng_recv(s, &rbuf, &rlen, NNG_FLAG_ALLOC), 0);
	Kvindex__Response *resp = kvindex__response__unpack(NULL, rlen, rbuf);
	nng_free(rbuf, rlen);
	nng_close(s);
	assert_non_null(resp);
	return resp;
}

/* raw_call_request packs req as is (any version, any body) and sends it. */
Kvindex__Response *
raw_call_request(const char *url, const Kvindex__Request *req)
{
	uint8_t buf[1024];
	size_t len = kvindex__request__get_packed_size(req);
	assert_true(len <= sizeof(buf));
	kvindex__request__pack(req, buf);
	return raw_call(url, buf, len);
}
