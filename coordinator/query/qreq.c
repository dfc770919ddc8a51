#include "qreq.h"

#include <string.h>

#include "alloc.h"

uint64_t *
kvc_qreq_seq_hashes(kvc_qreq *r, bool by_tokens, uint32_t bs, size_t *nb)
{
	uint64_t *hashes;
	if (by_tokens) {
		*nb = r->n_tokens / bs;
		hashes = kvi_calloc(*nb + 1, sizeof(*hashes));
		const char *lora = r->lora_name, *salt = r->cache_salt;
		kvi_prompt_keys keys = {
		    .lora_name = lora,
		    .lora_len = lora ? strlen(lora) : 0,
		    .cache_salt = salt,
		    .salt_len = salt ? strlen(salt) : 0,
		    .mm = r->mm,
		    .n_mm = r->n_mm,
		};
		kvi_xbuf x = {0};
		kvi_prompt_hashes(r->token_ids, r->n_tokens, bs, &keys, &x,
				  hashes);
		kvi_xbuf_fini(&x);
	} else {
		*nb = r->n_hashes;
		hashes = r->block_hashes;
		r->block_hashes = NULL;
	}
	kvi_seq_hashes(KVI_SEQ_ROOT, hashes, *nb, hashes);
	return hashes;
}

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
	kvi_free(q->pod);
	memset(q, 0, sizeof(*q));
}
