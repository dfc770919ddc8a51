/*
 * test_qbatch.c - queries coalesced per shard (coordinator/query/qbatch.h)
 * against a real shard service over nng.
 *
 * The shard here answers each query of a batch with its first sequence
 * hash as the one matching instance, so every answer can be checked to be
 * its own query's, and records how many queries each message carried. It
 * answers a query whose dp_rank is 7 with an error of its own and can be
 * made to stall. Checked: 64 queries from 4 threads all get their own
 * answers in fewer messages than queries, never more than max_batch per
 * message; one query at a time travels alone; a query queued behind a
 * stalled message fails at its own deadline, not later, and one whose
 * deadline has passed in the queue is never sent; a query's own error
 * reaches only that query; a shard that is down fails every query by its
 * deadline.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "qbatch.h"
#include "service.h"
#include "shardset.h"

static atomic_int messages, queries, biggest, stall_ms;

static void
handler(void *arg, const Kvindex__Request *req, Kvindex__Response *resp,
	kvp_arena *a)
{
	(void)arg;
	assert_int_equal(req->body_case, KVINDEX__REQUEST__BODY_QUERY_BATCH);
	/* counted on arrival, before any stall */
	const Kvindex__QueryBatchRequest *b = req->query_batch;
	atomic_fetch_add(&messages, 1);
	atomic_fetch_add(&queries, (int)b->n_queries);
	int n = (int)b->n_queries, old = atomic_load(&biggest);
	while (n > old && !atomic_compare_exchange_weak(&biggest, &old, n)) {
	}
	int ms = atomic_load(&stall_ms);
	if (ms > 0) {
		usleep((useconds_t)ms * 1000);
	}
	Kvindex__QueryBatchResponse *out = kvp_arena_alloc(a, sizeof(*out));
	kvindex__query_batch_response__init(out);
	out->answers = kvp_arena_alloc(a, b->n_queries * sizeof(*out->answers));
	out->n_answers = b->n_queries;
	for (size_t i = 0; i < b->n_queries; i++) {
		Kvindex__QueryResponse *qr = kvp_arena_alloc(a, sizeof(*qr));
		kvindex__query_response__init(qr);
		const Kvindex__QueryRequest *q = b->queries[i];
		if (q->has_dp_rank && q->dp_rank == 7) {
			qr->has_code = true;
			qr->code = KVI_ERANGE;
			qr->error = "rank 7 is not served";
		} else {
			uint64_t *id = kvp_arena_alloc(a, 8);
			uint32_t *z = kvp_arena_alloc(a, 4);
			*id = q->seq_hashes[0];
			*z = 1;
			qr->m_instance = id;
			qr->n_m_instance = 1;
			qr->m_rank = qr->m_gpu = qr->m_cpu = qr->m_disk = z;
			qr->n_m_rank = qr->n_m_gpu = qr->n_m_cpu =
			    qr->n_m_disk = 1;
		}
		out->answers[i] = qr;
	}
	resp->body_case = KVINDEX__RESPONSE__BODY_QUERY_BATCH;
	resp->query_batch = out;
}

/* One query and what came back for it. */
typedef struct job {
	kvc_qbatch_item item;
	Kvindex__QueryRequest q;
	uint64_t hash;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	kvi_err rv;
	uint64_t answer;
	int64_t at_ms;
} job;

static void
job_done(void *arg, kvi_err rv, const Kvindex__QueryResponse *qr,
	 const char *err)
{
	job *j = arg;
	pthread_mutex_lock(&j->mu);
	j->done++;
	j->rv = rv;
	j->at_ms = kvi_now_ms();
	if (rv == KVI_OK) {
		j->answer = qr->n_m_instance == 1 ? qr->m_instance[0] : 0;
	} else {
		assert_true(err != NULL && err[0] != '\0');
	}
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
}

static void
job_init(job *j, uint64_t hash, int deadline_ms)
{
	memset(j, 0, sizeof(*j));
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	j->hash = hash;
	kvindex__query_request__init(&j->q);
	j->q.model = "m";
	j->q.seq_hashes = &j->hash;
	j->q.n_seq_hashes = 1;
	j->item = (kvc_qbatch_item){.query = &j->q,
				    .deadline_ms = kvi_now_ms() + deadline_ms,
				    .done = job_done,
				    .arg = j};
}

static void
job_wait(job *j)
{
	pthread_mutex_lock(&j->mu);
	while (j->done == 0) {
		pthread_cond_wait(&j->cv, &j->mu);
	}
	pthread_mutex_unlock(&j->mu);
	assert_int_equal(j->done, 1);
}

static void
job_fini(job *j)
{
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->mu);
}

typedef struct env {
	kvn_service *svc;
	kvp_client *client;
	kvc_qbatch *b;
} env;

static void
env_start(env *e, int inflight, size_t max_batch)
{
	char err[256];
	assert_int_equal(kvn_service_open_url("tcp://127.0.0.1:0", 2, handler,
					      NULL, &e->svc, err, sizeof(err)),
			 KVI_OK);
	char url[64];
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d",
		 kvn_service_port(e->svc));
	assert_int_equal(kvp_client_open(url, &e->client), KVI_OK);
	e->b = kvc_qbatch_alloc(e->client, inflight, max_batch);
	atomic_store(&messages, 0);
	atomic_store(&queries, 0);
	atomic_store(&biggest, 0);
	atomic_store(&stall_ms, 0);
}

static void
env_stop(env *e)
{
	kvp_client_close(e->client);
	kvc_qbatch_free(e->b);
	kvn_service_free(e->svc);
}

#define JOBS 64

typedef struct submitter {
	env *e;
	job *jobs;
	int from, n;
} submitter;

static void *
submit_main(void *arg)
{
	submitter *s = arg;
	for (int i = s->from; i < s->from + s->n; i++) {
		kvc_qbatch_submit(s->e->b, &s->jobs[i].item);
	}
	return NULL;
}

static void
test_coalesced_answers_are_each_their_own(void **state)
{
	(void)state;
	env e;
	env_start(&e, 1, 10);
	atomic_store(&stall_ms, 20); /* let queries pile up */
	static job jobs[JOBS];
	for (int i = 0; i < JOBS; i++) {
		job_init(&jobs[i], 1000 + (uint64_t)i, 5000);
	}
	pthread_t t[4];
	submitter s[4];
	for (int k = 0; k < 4; k++) {
		s[k] = (submitter){&e, jobs, k * (JOBS / 4), JOBS / 4};
		pthread_create(&t[k], NULL, submit_main, &s[k]);
	}
	for (int k = 0; k < 4; k++) {
		pthread_join(t[k], NULL);
	}
	for (int i = 0; i < JOBS; i++) {
		job_wait(&jobs[i]);
		assert_int_equal(jobs[i].rv, KVI_OK);
		assert_int_equal(jobs[i].answer, 1000 + (uint64_t)i);
		job_fini(&jobs[i]);
	}
	assert_int_equal(atomic_load(&queries), JOBS);
	assert_true(atomic_load(&messages) < JOBS / 2);
	assert_true(atomic_load(&biggest) > 1 && atomic_load(&biggest) <= 10);
	print_message("%d queries in %d messages, at most %d per message\n",
		      JOBS, atomic_load(&messages), atomic_load(&biggest));

	/* one at a time: each alone, nothing waits */
	atomic_store(&stall_ms, 0);
	atomic_store(&biggest, 0);
	for (int i = 0; i < 5; i++) {
		job j;
		job_init(&j, 7 + (uint64_t)i, 5000);
		kvc_qbatch_submit(e.b, &j.item);
		job_wait(&j);
		assert_int_equal(j.answer, 7 + (uint64_t)i);
		job_fini(&j);
	}
	assert_int_equal(atomic_load(&biggest), 1);
	env_stop(&e);
}

static void
test_deadlines_hold_behind_a_stall(void **state)
{
	(void)state;
	env e;
	env_start(&e, 1, 0);
	atomic_store(&stall_ms, 1500);
	job a, b, c;
	int64_t t0 = kvi_now_ms();
	job_init(&a, 1, 150); /* in flight, stalled */
	kvc_qbatch_submit(e.b, &a.item);
	job_init(&b, 2, 100); /* queued; its deadline passes in the queue */
	kvc_qbatch_submit(e.b, &b.item);
	job_init(&c, 3, 300); /* queued; sent when a times out */
	kvc_qbatch_submit(e.b, &c.item);
	job_wait(&a);
	job_wait(&b);
	job_wait(&c);
	assert_int_equal(a.rv, KVI_ETIMEDOUT);
	assert_int_equal(b.rv, KVI_ETIMEDOUT);
	assert_int_equal(c.rv, KVI_ETIMEDOUT);
	/* no query waits for the stall: each ends by its own deadline,
	 * with 1 s of slack for a busy host, still short of the 1.5 s
	 * stall; c, sent when a timed out, waited for its own deadline */
	assert_true(a.at_ms - t0 < 150 + 1000);
	assert_true(b.at_ms - t0 < 150 + 1000);
	assert_true(c.at_ms - t0 >= 300 - 5 && c.at_ms - t0 < 300 + 1000);
	/* b never left: only a and c reached the shard */
	usleep(200 * 1000);
	assert_int_equal(atomic_load(&queries), 2);
	job_fini(&a);
	job_fini(&b);
	job_fini(&c);
	env_stop(&e);
}

static void
test_errors_stay_with_their_query(void **state)
{
	(void)state;
	env e;
	env_start(&e, 1, 0);
	atomic_store(&stall_ms, 50);
	job j[3];
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], 50 + (uint64_t)i, 5000);
	}
	j[2].q.has_dp_rank = true;
	j[2].q.dp_rank = 7;
	for (int i = 0; i < 3; i++) {
		kvc_qbatch_submit(e.b, &j[i].item);
	}
	for (int i = 0; i < 3; i++) {
		job_wait(&j[i]);
	}
	assert_int_equal(j[0].rv, KVI_OK);
	assert_int_equal(j[1].rv, KVI_OK);
	assert_int_equal(j[1].answer, 51);
	assert_int_equal(j[2].rv, KVI_ERANGE);
	for (int i = 0; i < 3; i++) {
		job_fini(&j[i]);
	}
	env_stop(&e);
}

static void
test_shard_down(void **state)
{
	(void)state;
	kvp_client *client;
	/* nothing listens on port 1 of loopback */
	assert_int_equal(kvp_client_open("tcp://127.0.0.1:1", &client), KVI_OK);
	kvc_qbatch *b = kvc_qbatch_alloc(client, 1, 0);
	job j[4];
	int64_t t0 = kvi_now_ms();
	for (int i = 0; i < 4; i++) {
		job_init(&j[i], 1, 100);
		kvc_qbatch_submit(b, &j[i].item);
	}
	for (int i = 0; i < 4; i++) {
		job_wait(&j[i]);
		assert_int_not_equal(j[i].rv, KVI_OK);
		assert_true(j[i].at_ms - t0 < 100 + 1000);
		job_fini(&j[i]);
	}
	kvp_client_close(client);
	kvc_qbatch_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_coalesced_answers_are_each_their_own),
	    cmocka_unit_test(test_deadlines_hold_behind_a_stall),
	    cmocka_unit_test(test_errors_stay_with_their_query),
	    cmocka_unit_test(test_shard_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
