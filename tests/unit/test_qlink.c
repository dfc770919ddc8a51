/*
 * test_qlink.c - an HTTP loop's own link to a shard
 * (coordinator/query/qlink.h), driven on an event_base of the test's against a
 * real shard service (the rpc tests' fake shard): calls and their replies, a
 * deadline, a shard that stops and comes back, and a host name whose first
 * address refuses (a hosts file of the test's own), which the link passes over.
 */
#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink.h"
#include "rpc_fixture.h"

typedef struct outcome {
	int done;
	kvi_err rv;
	size_t matches;
} outcome;

static void
on_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	outcome *o = arg;
	o->done++;
	o->rv = rv;
	if (rv == KVI_OK && resp->query != NULL) {
		o->matches = resp->query->n_m_instance;
	} else {
		assert_true(rv != KVI_OK && err != NULL && err[0] != '\0');
	}
	if (resp != NULL) {
		kvindex__response__free_unpacked(resp, NULL);
	}
}

/* run_until runs base until cond(arg) holds or ms pass; returns it. */
static bool
run_until(struct event_base *base, bool (*cond)(void *), void *arg, int ms)
{
	int64_t until = now_ms() + ms;
	while (!cond(arg) && now_ms() < until) {
		struct timeval tv = {0, 10000};
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return cond(arg);
}

static bool
is_ready(void *arg)
{
	return kvc_qlink_ready(arg);
}

static bool
is_down(void *arg)
{
	return !kvc_qlink_ready(arg);
}

static bool
is_done(void *arg)
{
	return ((outcome *)arg)->done > 0;
}

/* call sends the fixture's query on l and waits for its outcome. */
static outcome
call(struct event_base *base, kvc_qlink *l, int timeout_ms)
{
	Kvindex__Request req;
	Kvindex__QueryRequest qr;
	req_query(&req, &qr);
	outcome o = {0};
	kvi_err rv = kvc_qlink_call(l, &req, timeout_ms, on_done, &o);
	if (rv != KVI_OK) {
		o.done = 1;
		o.rv = rv;
		return o;
	}
	assert_int_equal(o.done, 0); /* never inside the call */
	assert_true(run_until(base, is_done, &o, 5000));
	assert_int_equal(o.done, 1);
	return o;
}

static void
test_calls_and_a_shard_that_comes_back(void **state)
{
	(void)state;
	fake_shard f;
	fake_start(&f, 0);
	int port = kvn_service_port(f.svc);
	struct event_base *base = event_base_new();
	kvc_qlink *l = kvc_qlink_open(base, NULL, f.url);
	assert_non_null(l);
	assert_int_equal(call(base, l, 1000).rv,
			 KVI_EUNREACHABLE); /* not yet */
	assert_true(run_until(base, is_ready, l, 3000));
	outcome o = call(base, l, 3000);
	assert_int_equal(o.rv, KVI_OK);
	assert_int_equal(o.matches, 5);
	assert_int_equal(kvc_qlink_inflight(l), 0);

	/* the shard goes: the link breaks, then redials it on its port */
	fake_stop(&f);
	assert_true(run_until(base, is_down, l, 3000));
	assert_int_equal(call(base, l, 1000).rv, KVI_EUNREACHABLE);
	fake_start(&f, port);
	assert_true(run_until(base, is_ready, l, 5000));
	assert_int_equal(call(base, l, 3000).rv, KVI_OK);

	kvc_qlink_close(l);
	event_base_free(base);
	fake_stop(&f);
}

/* A call whose reply is late ends at its deadline, and the reply that
 * comes after it is dropped. */
static void
test_deadline(void **state)
{
	(void)state;
	fake_shard f;
	fake_start(&f, 0);
	struct event_base *base = event_base_new();
	kvc_qlink *l = kvc_qlink_open(base, NULL, f.url);
	assert_true(run_until(base, is_ready, l, 3000));
	Kvindex__Request req;
	Kvindex__AssignRequest ar;
	Kvindex__Listener li;
	req_assign(&req, &ar, &li, "slow"); /* answered after SLOW_MS */
	outcome o = {0};
	atomic_store(&f.slow_done, 0);
	assert_int_equal(kvc_qlink_call(l, &req, 100, on_done, &o), KVI_OK);
	assert_true(run_until(base, is_done, &o, 3000));
	assert_int_equal(o.rv, KVI_ETIMEDOUT);
	/* ended by the deadline, before the reply was sent */
	assert_false(atomic_load(&f.slow_done));
	/* the late reply comes and is dropped (o is not called again); the
	 * link goes on */
	outcome never = {0};
	run_until(base, is_done, &never, SLOW_MS + 200);
	assert_int_equal(o.done, 1);
	assert_int_equal(call(base, l, 3000).rv, KVI_OK);
	kvc_qlink_close(l);
	event_base_free(base);
	fake_stop(&f);
}

static bool
got_addr(void *arg)
{
	return *(int *)arg != 0;
}

static int first_octet; /* of the first address the name resolves to */

static void
on_lookup(int result, struct evutil_addrinfo *res, void *arg)
{
	assert_int_equal(result, 0);
	const struct sockaddr_in *in = (const struct sockaddr_in *)res->ai_addr;
	first_octet = (int)(ntohl(in->sin_addr.s_addr) & 0xff);
	evutil_freeaddrinfo(res);
	*(int *)arg = 1;
}

/* A host name with two addresses, the first of which refuses: the link
 * tries the next at once and is ready on it. */
static void
test_host_name_with_two_addresses(void **state)
{
	(void)state;
	fake_shard f;
	fake_start(&f, 0); /* on 127.0.0.1 only */
	int port = kvn_service_port(f.svc);
	char hosts[256];
	snprintf(hosts, sizeof(hosts), "%s/kvi-qlink-hosts-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd = mkstemp(hosts);
	assert_true(fd >= 0);
	const char *lines = "127.0.0.2 two.kvindex.test\n"
			    "127.0.0.1 two.kvindex.test\n";
	assert_int_equal(write(fd, lines, strlen(lines)),
			 (ssize_t)strlen(lines));
	close(fd);
	struct event_base *base = event_base_new();
	struct evdns_base *dns = evdns_base_new(base, 0);
	assert_int_equal(evdns_base_load_hosts(dns, hosts), 0);

	/* the name's first address is the one that refuses */
	int got = 0;
	struct evutil_addrinfo hints = {.ai_family = AF_INET,
					.ai_socktype = SOCK_STREAM};
	evdns_getaddrinfo(dns, "two.kvindex.test", "1", &hints, on_lookup,
			  &got);
	assert_true(run_until(base, got_addr, &got, 1000));
	assert_int_equal(first_octet, 2);

	char url[96];
	snprintf(url, sizeof(url), "tcp://two.kvindex.test:%d", port);
	kvc_qlink *l = kvc_qlink_open(base, dns, url);
	assert_non_null(l);
	/* trying the first address alone, it would never be */
	assert_true(run_until(base, is_ready, l, 3000));
	assert_int_equal(call(base, l, 3000).rv, KVI_OK);
	kvc_qlink_close(l);

	/* a name it cannot resolve: never ready, calls unreachable */
	l = kvc_qlink_open(base, dns, "tcp://none.kvindex.test:1");
	assert_non_null(l);
	assert_false(run_until(base, is_ready, l, 300));
	assert_int_equal(call(base, l, 100).rv, KVI_EUNREACHABLE);
	/* closed while its lookup waits (there is no name server): the
	 * lookup's cancelled callback comes later and finds the link gone */
	kvc_qlink_close(l);
	outcome never = {0};
	run_until(base, is_done, &never, 100);

	evdns_base_free(dns, 1);
	event_base_free(base);
	unlink(hosts);
	fake_stop(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_calls_and_a_shard_that_comes_back),
	    cmocka_unit_test(test_deadline),
	    cmocka_unit_test(test_host_name_with_two_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
