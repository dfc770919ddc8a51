#include "shard_check.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* shc_wait_ready waits for the shard's HTTP /ready (the probe a
 * Kubernetes readiness check uses), which answers once it serves. */
static void
shc_wait_ready(shardproc *s, int64_t deadline)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/ready", s->metrics);
	while (kvt_now_ms() < deadline) {
		kvt_http_resp r;
		if (kvt_http_get(url, 1000, &r) == KVI_OK) {
			long st = r.status;
			kvt_http_resp_fini(&r);
			assert_int_equal(st, 200);
			return;
		}
		kvt_sleep_ms(20);
	}
	fail_msg("kvindex-shard: no /ready; see %s", s->log_path);
}

/* shc_argv writes the shard's command line into argv (64 slots). */
static void
shc_argv(shardproc *s, const char **argv, char *nofile, size_t nofile_len)
{
	int n = 0;
	if (s->nofile > 0) {
		snprintf(nofile, nofile_len, "--nofile=%d:%d", s->nofile,
			 s->nofile);
		argv[n++] = "/usr/bin/prlimit";
		argv[n++] = nofile;
	}
	argv[n++] = KVI_SHARD_BIN;
	argv[n++] = "--id";
	argv[n++] = "shard-test";
	argv[n++] = "--listen";
	argv[n++] = s->url;
	argv[n++] = "--data-dir";
	argv[n++] = s->data_dir;
	argv[n++] = "--metrics";
	argv[n++] = "127.0.0.1:0"; /* the port it bound is in its log */
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	argv[n++] = "--no-sync";
	for (int i = 0; s->extra != NULL && s->extra[i] != NULL && n < 62;
	     i++) {
		argv[n++] = s->extra[i];
	}
	argv[n] = NULL;
}

static void
shc_launch(shardproc *s)
{
	const char *argv[64];
	char nofile[48];
	s->starts++;
	shc_argv(s, argv, nofile, sizeof(nofile));
	long from = kvt_file_size(s->log_path);
	if (kvt_proc_start(argv, s->log_path, &s->proc) != KVI_OK) {
		fail_msg("cannot start %s", KVI_SHARD_BIN);
	}
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	char port[16];
	kvi_err lrv =
	    kvt_log_field(s->log_path, from, "listening", "metrics_port", port,
			  sizeof(port), s->proc, SHC_WAIT_MS);
	if (lrv != KVI_OK) {
		kvt_log_tail("kvindex-shard", s->log_path, 4095);
		fail_msg("kvindex-shard did not say where it listens (%s); "
			 "see %s",
			 kvi_strerror(lrv), s->log_path);
	}
	snprintf(s->metrics, sizeof(s->metrics), "127.0.0.1:%s", port);
	if (s->client == NULL) {
		/* the first start: the RPC port it bound is its own from now
		 * on */
		if (s->url_port0) {
			int rpc;
			assert_int_equal(kvt_log_port(s->log_path, from,
						      "listening", "rpc_port",
						      s->proc, SHC_WAIT_MS,
						      &rpc),
					 KVI_OK);
			size_t at = strlen(s->url) - 1; /* the "0" */
			snprintf(s->url + at, sizeof(s->url) - at, "%d", rpc);
			s->url_port0 = false;
		}
		assert_int_equal(kvp_client_open(s->url, &s->client), KVI_OK);
	}
	/* Answering a status request means loaded and serving. */
	Kvindex__StatusRequest st = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &st;
	while (kvt_now_ms() < deadline) {
		Kvindex__Response *resp = NULL;
		char err[256];
		kvi_err rv =
		    kvp_call(s->client, &req, 500, &resp, err, sizeof(err));
		if (resp != NULL) {
			kvindex__response__free_unpacked(resp, NULL);
		}
		if (rv == KVI_OK) {
			shc_wait_ready(s, deadline);
			return;
		}
		if (!kvt_proc_alive(s->proc)) {
			kvt_log_tail("kvindex-shard", s->log_path, 4095);
			fail_msg("kvindex-shard exited; see %s", s->log_path);
		}
		kvt_sleep_ms(50);
	}
	fail_msg("kvindex-shard did not answer; see %s", s->log_path);
}

static void
shc_start_with(shardproc *s, const char *const *extra, int nofile,
	       const char *data_dir, const char *host)
{
	memset(s, 0, sizeof(*s));
	s->extra = extra;
	s->nofile = nofile;
	assert_int_equal(kvt_tmpdir_make("kvi-shard", &s->dir), KVI_OK);
	s->data_dir = data_dir != NULL ? kvt_path(data_dir, "data")
				       : kvt_path(s->dir, "data");
	s->log_path = kvt_path(s->dir, "shard.log");
	if (getenv("KVI_TEST_SHARD_IPC") != NULL) {
		/* same host: nng's ipc transport, a socket in the shard's
		 * directory */
		assert_true((size_t)snprintf(s->url, sizeof(s->url),
					     "ipc://%s/rpc.ipc",
					     s->dir) < sizeof(s->url));
	} else {
		/* The RPC address stays the shard's across restarts (the
		 * coordinator is told it): a loopback address of its own,
		 * where no other process binds while it is down, and the
		 * port the kernel gives it at the first start. The metrics
		 * port is the kernel's choice at each start. */
		char own[32];
		if (host == NULL) {
			kvt_loopback_pick(own, sizeof(own));
			host = own;
		}
		snprintf(s->url, sizeof(s->url), "tcp://%s:0", host);
		s->url_port0 = true;
	}
	shc_launch(s);
}

void
shc_start(shardproc *s, const char *const *extra)
{
	shc_start_with(s, extra, 0, NULL, NULL);
}

void
shc_start_limited(shardproc *s, const char *const *extra, int nofile)
{
	shc_start_with(s, extra, nofile, NULL, NULL);
}

void
shc_start_on(shardproc *s, const char *const *extra, const char *dir)
{
	shc_start_with(s, extra, 0, dir, NULL);
}

void
shc_start_host(shardproc *s, const char *const *extra, const char *host)
{
	shc_start_with(s, extra, 0, NULL, host);
}

void
shc_restart(shardproc *s)
{
	if (s->proc != NULL) {
		kvt_proc_free(s->proc);
		s->proc = NULL;
	}
	shc_launch(s);
}

int
shc_run_to_exit(shardproc *s, const char *const *extra, int timeout_ms)
{
	const char *const *kept = s->extra;
	const char *argv[64];
	char nofile[48];
	if (s->proc != NULL) {
		kvt_proc_free(s->proc);
		s->proc = NULL;
	}
	s->extra = extra;
	shc_argv(s, argv, nofile, sizeof(nofile));
	s->extra = kept;
	kvt_proc *p;
	if (kvt_proc_start(argv, s->log_path, &p) != KVI_OK) {
		fail_msg("cannot start %s", KVI_SHARD_BIN);
	}
	int status = -1;
	kvi_err rv = kvt_proc_wait(p, timeout_ms, &status);
	kvt_proc_free(p);
	if (rv != KVI_OK) {
		fail_msg("kvindex-shard still runs after %d ms; see %s",
			 timeout_ms, s->log_path);
	}
	return status;
}

void
shc_kill9(shardproc *s)
{
	kvt_proc_kill(s->proc);
	int status;
	/* reaped, so its ports and LMDB lock are free before a restart; a
	 * sanitized process can take seconds to tear down on a busy host */
	assert_int_equal(kvt_proc_wait(s->proc, 60000, &status), KVI_OK);
}

int
shc_stop(shardproc *s)
{
	int status = -1;
	if (s->proc != NULL) {
		assert_int_equal(kvt_proc_stop(s->proc, 10000, &status),
				 KVI_OK);
		kvt_proc_free(s->proc);
		s->proc = NULL;
	}
	return status;
}

void
shc_cleanup(shardproc *s)
{
	if (s->proc != NULL) {
		kvt_proc_stop(s->proc, 10000, NULL);
		kvt_proc_free(s->proc);
	}
	kvp_client_close(s->client);
	if (s->dir != NULL && getenv("KVI_TEST_KEEP") == NULL) {
		kvt_tmpdir_remove(s->dir);
	}
	free(s->dir);
	free(s->data_dir);
	free(s->log_path);
	memset(s, 0, sizeof(*s));
}

Kvindex__Response *
shc_call(shardproc *s, Kvindex__Request *req)
{
	Kvindex__Response *resp = NULL;
	char err[256] = "";
	kvi_err rv = kvp_call(s->client, req, 10000, &resp, err, sizeof(err));
	if (resp == NULL) {
		fail_msg("shard request failed: %s (%s); see %s",
			 kvi_strerror(rv), err, s->log_path);
	}
	return resp;
}

void
shc_key(const kvt_sim *sim, int idx, char *buf, size_t len)
{
	snprintf(buf, len, "sim/pod-%d#%d", idx / sim->dp, idx % sim->dp);
}

void
shc_assign(shardproc *s, const kvt_sim *sim, int idx, bool replay, bool recover,
	   unsigned code)
{
	shc_assign_from(s, sim, idx, replay, recover, NULL, code);
}

/* shc_assign_with assigns rank idx of sim with the replay endpoint when
 * asked, recover_url as its /kv_recover endpoint (NULL: none) and from
 * as the shard to take it from (NULL: none), and checks the code. */
static void
shc_assign_with(shardproc *s, const kvt_sim *sim, int idx, bool replay,
		const char *recover_url, const char *from, unsigned code)
{
	char key[64], ep[96], rep[96], pod[32];
	shc_key(sim, idx, key, sizeof(key));
	snprintf(pod, sizeof(pod), "sim/pod-%d", idx / sim->dp);
	snprintf(ep, sizeof(ep), "tcp://%s:%d", sim->ip, sim->zmq_port[idx]);
	snprintf(rep, sizeof(rep), "tcp://%s:%d", sim->ip,
		 sim->replay_port[idx]);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = key;
	l.instance_id = (uint64_t)(idx / sim->dp);
	l.pod = pod;
	l.dp_rank = (uint32_t)(idx % sim->dp);
	l.model = "sim-model";
	l.block_size = 16;
	l.endpoint = ep;
	l.replay_endpoint = replay && sim->replay_port[idx] ? rep : NULL;
	l.recover_endpoint = (char *)recover_url;
	Kvindex__AssignRequest a = KVINDEX__ASSIGN_REQUEST__INIT;
	a.listener = &l;
	a.handoff_from = (char *)from;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req.assign = &a;
	Kvindex__Response *resp = shc_call(s, &req);
	if (resp->code != code) {
		fail_msg("assign %s: code %u (%s), expected %u", key,
			 resp->code, resp->error ? resp->error : "", code);
	}
	kvindex__response__free_unpacked(resp, NULL);
}

void
shc_assign_from(shardproc *s, const kvt_sim *sim, int idx, bool replay,
		bool recover, const char *from, unsigned code)
{
	char rec[96];
	snprintf(rec, sizeof(rec), "http://%s:%d", sim->ip,
		 sim->recover_port[idx]);
	shc_assign_with(s, sim, idx, replay,
			recover && sim->recover_port[idx] ? rec : NULL, from,
			code);
}

void
shc_assign_recover(shardproc *s, const kvt_sim *sim, int idx,
		   const char *recover_url)
{
	shc_assign_with(s, sim, idx, false, recover_url, NULL, 0);
}

Kvindex__Response *
shc_status_call(shardproc *s, const char *key, bool has_since, uint64_t since)
{
	Kvindex__StatusRequest st = KVINDEX__STATUS_REQUEST__INIT;
	st.key = (char *)key;
	st.has_since_digest = has_since;
	st.since_digest = since;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &st;
	return shc_call(s, &req);
}

Kvindex__ListenerStatus *
shc_status(shardproc *s, const char *key, Kvindex__Response **resp)
{
	*resp = shc_status_call(s, key, false, 0);
	if ((*resp)->code != 0 || (*resp)->status == NULL ||
	    (*resp)->status->n_listeners != 1) {
		return NULL;
	}
	return (*resp)->status->listeners[0];
}

/* One block of the truth: external hash, sequence hash, tier bits. */
typedef struct shc_entry {
	uint64_t ext, seq;
	uint32_t tiers;
} shc_entry;

static int
shc_entry_cmp(const void *a, const void *b)
{
	const shc_entry *x = a, *y = b;
	return x->ext < y->ext ? -1 : x->ext > y->ext;
}

static uint32_t
shc_tiers(const json_t *arr)
{
	uint32_t t = 0;
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		const char *s = json_string_value(v);
		t |= strcmp(s, "gpu") == 0   ? 1u
		     : strcmp(s, "cpu") == 0 ? 2u
					     : 4u;
	}
	return t;
}

bool
shc_matches_truth(shardproc *s, const kvt_sim *sim, int idx, char *why,
		  size_t len)
{
	char path[64], key[64];
	snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d", idx / sim->dp,
		 idx % sim->dp);
	shc_key(sim, idx, key, sizeof(key));
	kvt_http_resp tr;
	if (kvt_sim_call(sim, "GET", path, NULL, &tr) != KVI_OK ||
	    tr.json == NULL) {
		kvt_http_resp_fini(&tr);
		return kvt_why(why, len, "no truth from the simulator");
	}
	json_int_t seq = json_integer_value(json_object_get(tr.json, "seq"));
	const json_t *blocks = json_object_get(tr.json, "blocks");
	size_t n = json_array_size(blocks);
	shc_entry *want = calloc(n + 1, sizeof(*want));
	for (size_t i = 0; i < n; i++) {
		const json_t *b = json_array_get(blocks, i);
		kvt_json_u64(json_object_get(b, "hash"), &want[i].ext);
		kvt_json_u64(json_object_get(b, "seq_hash"), &want[i].seq);
		want[i].tiers = shc_tiers(json_object_get(b, "tiers"));
	}
	kvt_http_resp_fini(&tr);
	qsort(want, n, sizeof(*want), shc_entry_cmp);

	Kvindex__DumpRequest d = KVINDEX__DUMP_REQUEST__INIT;
	d.key = key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_DUMP;
	req.dump = &d;
	Kvindex__Response *resp = shc_call(s, &req);
	bool ok = true;
	if (resp->code != 0 || resp->dump == NULL) {
		ok = kvt_why(why, len, "dump %s: %s", key,
			     resp->error ? resp->error : "no dump");
		goto out;
	}
	Kvindex__DumpResponse *dump = resp->dump;
	bool has_wm = dump->has_watermark;
	if ((seq < 0 && has_wm) ||
	    (seq >= 0 && (!has_wm || dump->watermark != (uint64_t)seq))) {
		ok = kvt_why(why, len,
			     "%s: watermark %s%" PRIu64 ", engine at %lld", key,
			     has_wm ? "" : "none/", dump->watermark,
			     (long long)seq);
		goto out;
	}
	if (dump->n_entries != n) {
		ok = kvt_why(why, len, "%s: %zu entries, engine holds %zu", key,
			     dump->n_entries, n);
		goto out;
	}
	shc_entry *got = calloc(n + 1, sizeof(*got));
	for (size_t i = 0; i < n; i++) {
		got[i] = (shc_entry){dump->entries[i]->ext_hash,
				     dump->entries[i]->seq_hash,
				     dump->entries[i]->tiers};
	}
	qsort(got, n, sizeof(*got), shc_entry_cmp);
	for (size_t i = 0; i < n && ok; i++) {
		if (memcmp(&got[i], &want[i], sizeof(got[i])) != 0) {
			ok = kvt_why(
			    why, len,
			    "%s: entry %zu differs: ext %" PRIu64
			    " seq %" PRIu64 " tiers %u, engine: ext %" PRIu64
			    " seq %" PRIu64 " tiers %u",
			    key, i, got[i].ext, got[i].seq, got[i].tiers,
			    want[i].ext, want[i].seq, want[i].tiers);
		}
	}
	free(got);
out:
	kvindex__response__free_unpacked(resp, NULL);
	free(want);
	return ok;
}

/* shc_truth_load reads rank idx's truth: its entries sorted by external
 * hash (count in *n) and its seq (-1: none). NULL when the simulator did
 * not answer. */
static shc_entry *
shc_truth_load(const kvt_sim *sim, int idx, size_t *n, long long *seq)
{
	char path[64];
	snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d", idx / sim->dp,
		 idx % sim->dp);
	kvt_http_resp tr;
	if (kvt_sim_call(sim, "GET", path, NULL, &tr) != KVI_OK ||
	    tr.json == NULL) {
		kvt_http_resp_fini(&tr);
		return NULL;
	}
	*seq = (long long)json_integer_value(json_object_get(tr.json, "seq"));
	const json_t *blocks = json_object_get(tr.json, "blocks");
	*n = json_array_size(blocks);
	shc_entry *e = calloc(*n + 1, sizeof(*e));
	for (size_t i = 0; i < *n; i++) {
		const json_t *b = json_array_get(blocks, i);
		kvt_json_u64(json_object_get(b, "hash"), &e[i].ext);
		kvt_json_u64(json_object_get(b, "seq_hash"), &e[i].seq);
		e[i].tiers = shc_tiers(json_object_get(b, "tiers"));
	}
	kvt_http_resp_fini(&tr);
	qsort(e, *n, sizeof(*e), shc_entry_cmp);
	return e;
}

static unsigned
shc_bits(uint32_t v)
{
	return (unsigned)__builtin_popcount(v);
}

bool
shc_diff_truth(shardproc *s, const kvt_sim *sim, int idx, shc_diff *out)
{
	memset(out, 0, sizeof(*out));
	char key[64];
	shc_key(sim, idx, key, sizeof(key));
	size_t n;
	long long seq;
	shc_entry *want = shc_truth_load(sim, idx, &n, &seq);
	if (want == NULL) {
		return false;
	}
	Kvindex__DumpRequest d = KVINDEX__DUMP_REQUEST__INIT;
	d.key = key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_DUMP;
	req.dump = &d;
	Kvindex__Response *resp = shc_call(s, &req);
	if (resp->code != 0 || resp->dump == NULL) {
		kvindex__response__free_unpacked(resp, NULL);
		free(want);
		return false;
	}
	const Kvindex__DumpResponse *dump = resp->dump;
	size_t m = dump->n_entries;
	shc_entry *got = calloc(m + 1, sizeof(*got));
	for (size_t i = 0; i < m; i++) {
		got[i] = (shc_entry){dump->entries[i]->ext_hash,
				     dump->entries[i]->seq_hash,
				     dump->entries[i]->tiers};
	}
	qsort(got, m, sizeof(*got), shc_entry_cmp);
	/* both sorted by external hash: walk them side by side, counting
	 * (block, tier) pairs one has and the other lacks */
	size_t i = 0, k = 0;
	while (i < n || k < m) {
		if (k == m || (i < n && want[i].ext < got[k].ext)) {
			out->lost += shc_bits(want[i++].tiers);
		} else if (i == n || got[k].ext < want[i].ext) {
			out->phantom += shc_bits(got[k++].tiers);
		} else if (got[k].seq != want[i].seq) {
			/* a wrong chain: what it answers is not the block */
			out->lost += shc_bits(want[i++].tiers);
			out->phantom += shc_bits(got[k++].tiers);
		} else {
			out->lost += shc_bits(want[i].tiers & ~got[k].tiers);
			out->phantom += shc_bits(got[k].tiers & ~want[i].tiers);
			i++, k++;
		}
	}
	out->truth = n;
	out->entries = m;
	out->watermark_equal =
	    seq < 0 ? !dump->has_watermark
		    : dump->has_watermark && dump->watermark == (uint64_t)seq;
	free(got);
	free(want);
	kvindex__response__free_unpacked(resp, NULL);
	return true;
}

void
shc_wait_truth(shardproc *s, const kvt_sim *sim, const int *idx, int n,
	       int timeout_ms)
{
	char why[512] = "";
	int64_t deadline = kvt_now_ms() + timeout_ms;
	for (;;) {
		int ok = 0;
		for (int i = 0; i < n; i++) {
			ok +=
			    shc_matches_truth(s, sim, idx[i], why, sizeof(why));
		}
		if (ok == n) {
			return;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg(
			    "shard does not match the engines: %s (log %s)",
			    why, s->log_path);
		}
		kvt_sleep_ms(100);
	}
}

double
shc_metric(shardproc *s, const char *sample)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/metrics", s->metrics);
	return kvt_http_metric(url, sample);
}

double
shc_wait_metric(shardproc *s, const char *sample, double want, int timeout_ms)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	double v;
	while ((v = shc_metric(s, sample)) != want && kvt_now_ms() < deadline) {
		kvt_sleep_ms(20);
	}
	return v;
}
