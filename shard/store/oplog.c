#include "oplog.h"

#include <string.h>

#include "alloc.h"
#include "bytes.h"

static uint8_t *
grow(kvo_rec *r, size_t n)
{
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		while (cap < r->len + n) {
			cap *= 2;
		}
		r->buf = kvi_realloc(r->buf, cap);
		r->cap = cap;
	}
	uint8_t *p = r->buf + r->len;
	r->len += n;
	return p;
}

void
kvo_rec_init(kvo_rec *r)
{
	memset(r, 0, sizeof(*r));
	kvo_rec_reset(r);
}

void
kvo_rec_fini(kvo_rec *r)
{
	kvi_free(r->buf);
	memset(r, 0, sizeof(*r));
}

void
kvo_rec_reset(kvo_rec *r)
{
	r->len = 0;
	r->n_ops = 0;
	memset(grow(r, KVO_HEADER_SIZE), 0, KVO_HEADER_SIZE);
}

void
kvo_rec_store(kvo_rec *r, uint64_t ext, uint64_t seq, uint8_t tier)
{
	uint8_t *p = grow(r, 18);
	p[0] = KVO_STORE;
	kvi_put_le64(p + 1, ext);
	kvi_put_le64(p + 9, seq);
	p[17] = tier;
	r->n_ops++;
}

void
kvo_rec_remove(kvo_rec *r, uint64_t ext, uint8_t tier)
{
	uint8_t *p = grow(r, 10);
	p[0] = KVO_REMOVE;
	kvi_put_le64(p + 1, ext);
	p[9] = tier;
	r->n_ops++;
}

void
kvo_rec_group(kvo_rec *r, uint8_t group, uint8_t kind, uint32_t ratio,
	      uint32_t window)
{
	uint8_t *p = grow(r, 11);
	p[0] = KVO_GROUP;
	p[1] = group;
	p[2] = kind;
	kvi_put_le32(p + 3, ratio);
	kvi_put_le32(p + 7, window);
	r->n_ops++;
}

void
kvo_rec_clear(kvo_rec *r)
{
	*grow(r, 1) = KVO_CLEAR;
	r->n_ops++;
}

void
kvo_rec_finish(kvo_rec *r, const kvs_mark *mark)
{
	r->buf[0] = kvs_mark_flags(mark);
	kvi_put_le64(r->buf + 1, mark->has_wm ? mark->wm : 0);
	kvi_put_le64(r->buf + 9, mark->has_fp ? mark->fp : 0);
}

kvi_err
kvo_iter_init(kvo_iter *it, const void *payload, size_t len, kvs_mark *mark)
{
	const uint8_t *p = payload;
	if (len < KVO_HEADER_SIZE || !kvs_mark_from_flags(p[0], mark)) {
		return KVI_ECORRUPT;
	}
	mark->wm = kvi_get_le64(p + 1);
	mark->fp = kvi_get_le64(p + 9);
	*it = (kvo_iter){.p = p, .len = len, .off = KVO_HEADER_SIZE};
	return KVI_OK;
}

kvi_err
kvo_iter_next(kvo_iter *it, kvo_op *op)
{
	if (it->off == it->len) {
		return KVI_ENOENT;
	}
	const uint8_t *p = it->p + it->off;
	size_t left = it->len - it->off;
	*op = (kvo_op){.kind = (kvo_kind)p[0]};
	switch (p[0]) {
	case KVO_STORE:
		if (left < 18 || (p[17] & KVO_TIER_MASK) > 2) {
			return KVI_ECORRUPT;
		}
		op->ext = kvi_get_le64(p + 1);
		op->seq = kvi_get_le64(p + 9);
		op->tier = p[17] & KVO_TIER_MASK;
		op->group = p[17] >> KVO_GROUP_SHIFT;
		it->off += 18;
		return KVI_OK;
	case KVO_REMOVE:
		if (left < 10 || (p[9] & KVO_TIER_MASK) > 2) {
			return KVI_ECORRUPT;
		}
		op->ext = kvi_get_le64(p + 1);
		op->tier = p[9] & KVO_TIER_MASK;
		op->group = p[9] >> KVO_GROUP_SHIFT;
		it->off += 10;
		return KVI_OK;
	case KVO_GROUP:
		if (left < 11 || p[1] >= KVO_GROUPS) {
			return KVI_ECORRUPT;
		}
		op->group = p[1];
		op->spec_kind = p[2];
		op->ratio = kvi_get_le32(p + 3);
		op->window = kvi_get_le32(p + 7);
		if (op->ratio == 0) {
			return KVI_ECORRUPT;
		}
		it->off += 11;
		return KVI_OK;
	case KVO_CLEAR:
		it->off += 1;
		return KVI_OK;
	default:
		return KVI_ECORRUPT;
	}
}
