/*
 * fuzz_discovery_file.c - libFuzzer target for the static discovery file
 * parser.
 *
 * Each input is parsed with the default dp_size 1 and, when the first
 * byte is odd, 0 (an invalid default, so every pod without dp_size is
 * reported). Either the whole document is refused with a message and
 * nothing written, or every element of "pods" ends up exactly once as a
 * pod or as an error: errors in index order, each with a message; pods
 * valid by kvc_pod_check(), from the file, with their instance id, unique
 * names. A few ranks of each pod are expanded, so a bad field shows up
 * under ASan. Built as a libFuzzer binary with -DKVI_FUZZ=ON (clang), and
 * as a corpus replayer (replay_main.c) in every build.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_count_pods returns the length of the document's "pods" array as
 * jansson sees it with the parser's flags, or -1 if it is not one. */
static long
fuzz_count_pods(const uint8_t *data, size_t size)
{
	json_t *root =
	    json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	json_t *pods = json_object_get(root, "pods");
	long n = json_is_array(pods) ? (long)json_array_size(pods) : -1;
	json_decref(root);
	return n;
}

static void
fuzz_check(const kvc_dfile *f, long n_elems)
{
	if ((long)(f->n_pods + f->n_errors) != n_elems) {
		abort(); /* each element is a pod or an error, once */
	}
	for (size_t i = 0; i < f->n_errors; i++) {
		const kvc_dfile_error *e = &f->errors[i];
		if ((long)e->index >= n_elems || e->msg[0] == '\0' ||
		    (i > 0 && e->index <= f->errors[i - 1].index) ||
		    e->code == KVI_OK || strlen(e->name) > KVC_NAME_MAX) {
			abort();
		}
	}
	for (size_t i = 0; i < f->n_pods; i++) {
		const kvc_pod *p = &f->pods[i];
		char err[200];
		if (kvc_pod_check(p, err, sizeof(err)) != KVI_OK ||
		    p->source != KVC_SOURCE_FILE || p->name == NULL ||
		    p->instance_id != kvc_instance_id(p->name)) {
			abort();
		}
		for (size_t k = 0; k < i; k++) {
			if (strcmp(f->pods[k].name, p->name) == 0 ||
			    f->pods[k].instance_id == p->instance_id) {
				abort();
			}
		}
		if (p->dp_size <= 4) {
			size_t n;
			kvc_rank *r = kvc_pod_ranks(p, &n);
			if (n != p->dp_size || r[n - 1].rank != n - 1) {
				abort();
			}
			kvc_ranks_free(r, n);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t dflt = size > 0 && (data[0] & 1) ? 0 : 1;
	kvc_dfile f = {.n_pods = 12345};
	char err[200] = "";
	kvi_err rv = kvc_dfile_parse(data, size, dflt, &f, err, sizeof(err));
	long n_elems = fuzz_count_pods(data, size);
	if (rv != KVI_OK) {
		if (rv != KVI_EPROTO || err[0] == '\0' || f.n_pods != 12345 ||
		    n_elems >= 0) {
			abort(); /* refused: says why, writes nothing */
		}
		return 0;
	}
	fuzz_check(&f, n_elems);
	kvc_dfile_fini(&f);
	return 0;
}
