/*
 * coord_truth.c - the simulator's ground truth, and answers checked
 * against it (coord_check.h): what a whole-cluster test compares the
 * coordinator's /query with.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"
#include "hash.h"

#define CLU_BS 16

/* ---- ground truth -------------------------------------------------- */

typedef struct clu_block {
	uint64_t seq;
	uint8_t tiers; /* 1 gpu, 2 cpu, 4 disk */
} clu_block;

struct clu_truth {
	int pods, dp;
	clu_block **blocks; /* per rank, sorted by seq */
	size_t *n;
};

static int
clu_block_cmp(const void *x, const void *y)
{
	const clu_block *a = x, *b = y;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

clu_truth *
clu_truth_get(cluster *c)
{
	clu_truth *t = kvi_calloc(1, sizeof(*t));
	t->pods = c->sim.pods;
	t->dp = c->sim.dp;
	t->blocks = kvi_calloc((size_t)c->sim.n, sizeof(*t->blocks));
	t->n = kvi_calloc((size_t)c->sim.n, sizeof(*t->n));
	for (int idx = 0; idx < c->sim.n; idx++) {
		char path[64];
		snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d",
			 idx / c->sim.dp, idx % c->sim.dp);
		kvt_http_resp r;
		assert_int_equal(kvt_sim_call(&c->sim, "GET", path, NULL, &r),
				 KVI_OK);
		assert_int_equal(r.status, 200);
		json_t *bl = json_object_get(r.json, "blocks");
		size_t nb = json_array_size(bl);
		t->blocks[idx] = kvi_calloc(nb + 1, sizeof(clu_block));
		size_t i;
		json_t *b;
		json_array_foreach(bl, i, b)
		{
			clu_block *cb = &t->blocks[idx][i];
			assert_true(kvt_json_u64(json_object_get(b, "seq_hash"),
						 &cb->seq));
			size_t k;
			json_t *tier;
			json_array_foreach(json_object_get(b, "tiers"), k, tier)
			{
				const char *s = json_string_value(tier);
				cb->tiers |= strcmp(s, "gpu") == 0   ? 1
					     : strcmp(s, "cpu") == 0 ? 2
								     : 4;
			}
		}
		t->n[idx] = nb;
		qsort(t->blocks[idx], nb, sizeof(clu_block), clu_block_cmp);
		kvt_http_resp_fini(&r);
	}
	return t;
}

void
clu_truth_free(clu_truth *t)
{
	if (t == NULL) {
		return;
	}
	for (int i = 0; i < t->pods * t->dp; i++) {
		kvi_free(t->blocks[i]);
	}
	kvi_free(t->blocks);
	kvi_free(t->n);
	kvi_free(t);
}

int
clu_truth_match(const clu_truth *t, const uint64_t *seq, size_t n,
		clu_expect *out)
{
	int m = 0;
	for (int idx = 0; idx < t->pods * t->dp; idx++) {
		uint32_t any = 0, gc = 0, gpu = 0;
		for (size_t i = 0; i < n; i++) {
			clu_block key = {.seq = seq[i]};
			const clu_block *b =
			    bsearch(&key, t->blocks[idx], t->n[idx],
				    sizeof(clu_block), clu_block_cmp);
			if (b == NULL || b->tiers == 0) {
				break;
			}
			gc += gc == any && (b->tiers & 3);
			gpu += gpu == any && (b->tiers & 1);
			any++;
		}
		if (any > 0) {
			out[m++] = (clu_expect){.pod = idx / t->dp,
						.rank = idx % t->dp,
						.gpu = gpu,
						.cpu = gc - gpu,
						.disk = any - gc,
						.longest = any};
		}
	}
	return m;
}

size_t
clu_seq_hashes(const uint32_t *tokens, size_t n, uint64_t *out)
{
	size_t nb = kvi_local_hashes(tokens, n, CLU_BS,
				     kvi_local_seed(NULL, 0, NULL, 0), out);
	kvi_seq_hashes(KVI_SEQ_ROOT, out, nb, out);
	return nb;
}

bool
clu_check_answer(const json_t *ans, const clu_expect *exp, int n_exp, char *why,
		 size_t len)
{
	const json_t *ws = json_object_get(ans, "workers");
	if (!json_is_array(ws)) {
		return kvt_why(why, len, "no workers array");
	}
	if ((int)json_array_size(ws) != n_exp) {
		return kvt_why(why, len, "%zu workers, expected %d",
			       json_array_size(ws), n_exp);
	}
	const json_t *scores = json_object_get(ans, "scores");
	for (int e = 0; e < n_exp; e++) {
		char pod[32];
		snprintf(pod, sizeof(pod), "sim/pod-%d", exp[e].pod);
		const json_t *found = NULL;
		size_t i;
		json_t *w;
		json_array_foreach(ws, i, w)
		{
			const char *p =
			    json_string_value(json_object_get(w, "pod"));
			if (p != NULL && strcmp(p, pod) == 0 &&
			    json_integer_value(json_object_get(w, "dp_rank")) ==
				exp[e].rank) {
				found = w;
			}
		}
		if (found == NULL) {
			return kvt_why(why, len, "%s rank %d is missing", pod,
				       exp[e].rank);
		}
		json_int_t mb = json_integer_value(
		    json_object_get(found, "matched_blocks"));
		json_int_t g =
		    json_integer_value(json_object_get(found, "gpu"));
		json_int_t cp =
		    json_integer_value(json_object_get(found, "cpu"));
		json_int_t d =
		    json_integer_value(json_object_get(found, "disk"));
		if (mb != exp[e].longest || g != exp[e].gpu * CLU_BS ||
		    cp != exp[e].cpu * CLU_BS || d != exp[e].disk * CLU_BS) {
			return kvt_why(
			    why, len,
			    "%s rank %d: blocks %lld gpu %lld cpu %lld disk "
			    "%lld tokens, expected %u blocks %u/%u/%u",
			    pod, exp[e].rank, (long long)mb, (long long)g,
			    (long long)cp, (long long)d, exp[e].longest,
			    exp[e].gpu * CLU_BS, exp[e].cpu * CLU_BS,
			    exp[e].disk * CLU_BS);
		}
		char id[24], rank[8];
		snprintf(id, sizeof(id), "%" PRIu64,
			 clu_instance_id(exp[e].pod));
		snprintf(rank, sizeof(rank), "%d", exp[e].rank);
		json_int_t sc = json_integer_value(
		    json_object_get(json_object_get(scores, id), rank));
		if (sc != (json_int_t)exp[e].longest * CLU_BS) {
			return kvt_why(
			    why, len, "scores[%s][%s] = %lld, expected %u", id,
			    rank, (long long)sc, exp[e].longest * CLU_BS);
		}
	}
	return true;
}

json_t *
clu_worker(const json_t *ans, int pod, int rank)
{
	char name[32];
	snprintf(name, sizeof(name), "sim/pod-%d", pod);
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(ans, "workers"), i, w)
	{
		const char *p = json_string_value(json_object_get(w, "pod"));
		if (p != NULL && strcmp(p, name) == 0 &&
		    json_integer_value(json_object_get(w, "dp_rank")) == rank) {
			return w;
		}
	}
	return NULL;
}
