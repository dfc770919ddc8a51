/*
 * fuzz_kube.c - libFuzzer target for the Kubernetes parsers
 * (coordinator/discovery/kube_parse.h).
 *
 * The first byte picks a cut point; the rest is fed to a watch stream in
 * two pieces, cut there, and then parsed whole as a pod list. Every event
 * object the stream hands back is parsed as a pod; a pod that parses as
 * registrable must pass kvc_pod_check() and expand into its ranks; one
 * that does not must say why. Feeding the same bytes in one piece must
 * give the same events as feeding them cut. Built as a libFuzzer binary
 * with -DKVI_FUZZ=ON (clang), and as a corpus replayer (replay_main.c) in
 * every build.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const kvc_kube_defaults fuzz_defaults = {
    .zmq_port = 60000,
    .dp_size = 4,
    .block_size = 16,
    .model_label = "model",
};

typedef struct fuzz_seen {
	uint64_t sum; /* a fingerprint of the events seen */
	size_t n;
} fuzz_seen;

static void
fuzz_check_pod(const kvc_kube_pod *p)
{
	if (!p->valid) {
		if (p->why[0] == '\0') {
			abort();
		}
		return;
	}
	char err[200];
	if (kvc_pod_check(&p->pod, err, sizeof(err)) != KVI_OK ||
	    p->ip == NULL) {
		abort();
	}
	size_t n = 0;
	kvc_rank *r = kvc_pod_ranks(&p->pod, &n);
	if (n != p->pod.dp_size) {
		abort();
	}
	kvc_ranks_free(r, n);
}

static bool
fuzz_on_event(void *arg, kvc_kube_ev type, const json_t *obj)
{
	fuzz_seen *s = arg;
	s->n++;
	s->sum = s->sum * 31 + (uint64_t)type + 1;
	kvc_kube_pod p;
	char err[200];
	if (kvc_kube_pod_parse(obj, &fuzz_defaults, &p, err, sizeof(err)) ==
	    KVI_OK) {
		fuzz_check_pod(&p);
		s->sum = s->sum * 31 + p.valid;
		kvc_kube_pod_fini(&p);
	} else if (err[0] == '\0') {
		abort();
	}
	return true;
}

static kvi_err
fuzz_feed(const uint8_t *data, size_t size, size_t cut, fuzz_seen *s)
{
	kvc_kube_stream *st = kvc_kube_stream_alloc(fuzz_on_event, s);
	char err[200];
	kvi_err rv = kvc_kube_stream_feed(st, data, cut, err, sizeof(err));
	if (rv == KVI_OK) {
		rv = kvc_kube_stream_feed(st, data + cut, size - cut, err,
					  sizeof(err));
	}
	kvc_kube_stream_free(st);
	return rv;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) {
		return 0;
	}
	size_t cut = data[0] % size;
	data++;
	size--;
	if (cut > size) {
		cut = size;
	}
	fuzz_seen a = {0}, b = {0};
	kvi_err ra = fuzz_feed(data, size, cut, &a);
	kvi_err rb = fuzz_feed(data, size, 0, &b);
	if (ra != rb || a.n != b.n || a.sum != b.sum) {
		abort();
	}
	kvc_kube_list l;
	kvc_kube_status st;
	char err[200];
	if (kvc_kube_list_parse(data, size, &fuzz_defaults, &l, &st, err,
				sizeof(err)) == KVI_OK) {
		for (size_t i = 0; i < l.n_pods; i++) {
			fuzz_check_pod(&l.pods[i]);
		}
		kvc_kube_list_fini(&l);
	} else if (err[0] == '\0') {
		abort();
	}
	return 0;
}
