#include "qreq.h"

#include <string.h>

#include "alloc.h"

void
kvc_qreq_fini(kvc_qreq *q)
{
	kvi_free(q->model);
	kvi_free(q->lora_name);
	kvi_free(q->cache_salt);
	for (size_t i = 0; i < q->n_mm; i++) {
		kvi_free((char *)q->mm[i].id);
	}
	kvi_free(q->mm);
	kvi_free(q->token_ids);
	kvi_free(q->block_hashes);
	kvi_free(q->instances);
	memset(q, 0, sizeof(*q));
}
