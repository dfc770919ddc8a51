/*
 * table_impl.h - an open-addressing hash table from u64 keys to a small
 * value, instantiated by table.h once per value type. Not a public header.
 *
 * Design: Robin Hood linear probing with backward-shift deletion, so lookups
 * stay short at high load (the table grows at 29/32 full) and deletion leaves
 * no tombstones. A table of mixed keys grows by 3/2 and 4/3 in turn (16,
 * 24, 32, 48 ... slots), so it is 68% full at least where doubling would
 * leave 45%, and a key's home is its mixed hash scaled to the capacity
 * (hash * cap / 2^64); a table of uniform keys doubles (below). The home slot
 * of a key is a Fibonacci hash of it xor a per-table seed: external hashes on
 * the wire are not always well mixed (small integers in tests, engine
 * counters), and without the seed, copying one table into another in slot order
 * (loading a snapshot) would insert keys in home order and build one cluster
 * the size of the table. Key 0 lives outside the slot array, so that 0 can mark
 * an empty slot. Slots are packed (key, value) pairs: one cache line read per
 * probe for the common hit.
 *
 * Before including, define TBL (the type and prefix, e.g. kvx_extmap) and
 * TBL_VAL (the value type, a packed struct: slots are packed); define
 * TBL_UNIFORM_SKIP n for keys whose bits are uniform already (sequence
 * hashes): the slot is then the key's bits after the first n, unmixed, so a
 * loader can insert in slot order by sorting keys, and the capacity is a
 * power of two.
 */
#define TBL_CAT2(a, b) a##b
#define TBL_CAT(a, b)  TBL_CAT2(a, b)
#define TBL_FN(name)   TBL_CAT(TBL, TBL_CAT(_, name))
#define TBL_SLOT       TBL_CAT(TBL, _slot)

typedef struct __attribute__((packed)) TBL_SLOT {
	uint64_t key;
	TBL_VAL val;
} TBL_SLOT;

typedef struct TBL {
	TBL_SLOT *slots;
	uint64_t seed;
	size_t cap;    /* slots, when slots != NULL */
	uint32_t bits; /* bits of a slot number: cap <= 1 << bits */
	bool has_zero;
	size_t len; /* entries, key 0 included */
	TBL_VAL zero_val;
} TBL;

static inline void
TBL_FN(init)(TBL *t)
{
	memset(t, 0, sizeof(*t));
	t->seed = kvx_table_seed();
}

static inline void
TBL_FN(fini)(TBL *t)
{
	kvx_table_free(t->slots,
		       t->slots == NULL ? 0 : t->cap * sizeof(TBL_SLOT));
	uint64_t seed = t->seed;
	memset(t, 0, sizeof(*t));
	t->seed = seed;
}

static inline size_t
TBL_FN(cap)(const TBL *t)
{
	return t->slots == NULL ? 0 : t->cap;
}

/* TBL_FN(next_cap) returns the capacity a table of cap slots grows to. */
static inline size_t
TBL_FN(next_cap)(size_t cap)
{
#ifdef TBL_UNIFORM_SKIP
	return cap * 2;
#else
	return (cap & (cap - 1)) == 0 ? cap / 2 * 3 : cap / 3 * 4;
#endif
}

/* TBL_FN(step) returns the slot after i. */
static inline size_t
TBL_FN(step)(const TBL *t, size_t i)
{
	return i + 1 == t->cap ? 0 : i + 1;
}

/* TBL_FN(dist) returns how far slot i is past home h. */
static inline size_t
TBL_FN(dist)(const TBL *t, size_t i, size_t h)
{
	return i >= h ? i - h : i + t->cap - h;
}

static inline size_t
TBL_FN(home)(const TBL *t, uint64_t key)
{
#ifdef TBL_UNIFORM_SKIP
	/* Keys already uniform (our own XXH3 outputs): the bits after the
	 * first TBL_UNIFORM_SKIP are the slot, so slot order is key order. */
	return (size_t)((key << TBL_UNIFORM_SKIP) >> (64 - t->bits));
#else
	uint64_t h = (key ^ t->seed) * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(((unsigned __int128)h * t->cap) >> 64);
#endif
}

/* TBL_FN(prefetch) starts loading key's home slot into the cache. */
static inline void
TBL_FN(prefetch)(const TBL *t, uint64_t key)
{
	if (t->slots != NULL) {
		__builtin_prefetch(&t->slots[TBL_FN(home)(t, key)], 1);
	}
}

/* TBL_FN(find) returns a pointer to key's value, or NULL. The pointer is
 * valid until the next insert or remove. */
static inline TBL_VAL *
TBL_FN(find)(TBL *t, uint64_t key)
{
	if (key == 0) {
		return t->has_zero ? &t->zero_val : NULL;
	}
	if (t->slots == NULL) {
		return NULL;
	}
	size_t i = TBL_FN(home)(t, key);
	for (size_t dist = 0;; dist++, i = TBL_FN(step)(t, i)) {
		uint64_t k = t->slots[i].key;
		if (k == key) {
			return &t->slots[i].val;
		}
		/* Robin Hood: a key is never further from home than the
		 * resident it would have displaced. */
		if (k == 0 || TBL_FN(dist)(t, i, TBL_FN(home)(t, k)) < dist) {
			return NULL;
		}
	}
}

/* TBL_FN(place) puts a key known to be absent into a table with room, and
 * returns its slot. */
static inline TBL_SLOT *
TBL_FN(place)(TBL *t, uint64_t key, TBL_VAL val)
{
	size_t i = TBL_FN(home)(t, key);
	TBL_SLOT cur = {key, val};
	TBL_SLOT *mine = NULL;
	for (size_t dist = 0;; dist++, i = TBL_FN(step)(t, i)) {
		TBL_SLOT *s = &t->slots[i];
		if (s->key == 0) {
			*s = cur;
			return mine != NULL ? mine : s;
		}
		size_t sdist = TBL_FN(dist)(t, i, TBL_FN(home)(t, s->key));
		if (sdist < dist) {
			TBL_SLOT tmp = *s;
			*s = cur;
			cur = tmp;
			if (mine == NULL) {
				mine = s;
			}
			dist = sdist;
		}
	}
}

static inline void
TBL_FN(rehash)(TBL *t, size_t cap)
{
	TBL_SLOT *old = t->slots;
	size_t old_cap = TBL_FN(cap)(t);
	t->slots = kvx_table_alloc(cap * sizeof(TBL_SLOT));
	t->cap = cap;
	t->bits = 0;
	while (((size_t)1 << t->bits) < cap) {
		t->bits++;
	}
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].key != 0) {
			TBL_FN(place)(t, old[i].key, old[i].val);
		}
	}
	kvx_table_free(old, old_cap * sizeof(TBL_SLOT));
}

/* TBL_FN(max_load) returns how many entries a table of cap slots takes
 * before it grows: 29/32 of it. Robin Hood keeps probes short that full,
 * and memory is what a big index is short of. */
static inline size_t
TBL_FN(max_load)(size_t cap)
{
	return cap / 32 * 29 + cap % 32 * 29 / 32;
}

/* TBL_FN(reserve) makes room for n entries without growing. */
static inline void
TBL_FN(reserve)(TBL *t, size_t n)
{
	size_t cap = t->slots == NULL ? 16 : t->cap;
	while (n > TBL_FN(max_load)(cap)) {
		cap = TBL_FN(next_cap)(cap);
	}
	if (t->slots == NULL || cap > t->cap) {
		TBL_FN(rehash)(t, cap);
	}
}

/* TBL_FN(insert) returns a pointer to key's value, adding key with a zero
 * value first when absent (*added says which). Valid until the next insert
 * or remove. */
static inline TBL_VAL *
TBL_FN(insert)(TBL *t, uint64_t key, bool *added)
{
	TBL_VAL *v = TBL_FN(find)(t, key);
	*added = v == NULL;
	if (v != NULL) {
		return v;
	}
	t->len++;
	if (key == 0) {
		t->has_zero = true;
		memset(&t->zero_val, 0, sizeof(t->zero_val));
		return &t->zero_val;
	}
	TBL_FN(reserve)(t, t->len);
	TBL_VAL zero;
	memset(&zero, 0, sizeof(zero));
	return &TBL_FN(place)(t, key, zero)->val;
}

/* TBL_FN(remove) deletes key, copying its value to *old when old is not
 * NULL. Returns false when key was absent. */
static inline bool
TBL_FN(remove)(TBL *t, uint64_t key, TBL_VAL *old)
{
	TBL_VAL *v = TBL_FN(find)(t, key);
	if (v == NULL) {
		return false;
	}
	if (old != NULL) {
		*old = *v;
	}
	t->len--;
	if (key == 0) {
		t->has_zero = false;
		return true;
	}
	size_t i = (size_t)((TBL_SLOT *)((char *)v - offsetof(TBL_SLOT, val)) -
			    t->slots);
	/* Backward shift: pull each displaced follower one slot home-ward. */
	for (;;) {
		size_t j = TBL_FN(step)(t, i);
		uint64_t k = t->slots[j].key;
		if (k == 0 || TBL_FN(home)(t, k) == j) {
			break;
		}
		t->slots[i] = t->slots[j];
		i = j;
	}
	t->slots[i].key = 0;
	return true;
}

/* TBL_FN(next) iterates: start with *pos = 0; returns false at the end. Key
 * 0, when present, comes last. The table must not change meanwhile. */
static inline bool
TBL_FN(next)(const TBL *t, size_t *pos, uint64_t *key, TBL_VAL *val)
{
	size_t cap = TBL_FN(cap)(t);
	while (*pos < cap) {
		const TBL_SLOT *s = &t->slots[(*pos)++];
		if (s->key != 0) {
			*key = s->key;
			*val = s->val;
			return true;
		}
	}
	if (*pos == cap && t->has_zero) {
		(*pos)++;
		*key = 0;
		*val = t->zero_val;
		return true;
	}
	return false;
}

static inline size_t
TBL_FN(size)(const TBL *t)
{
	return t->len;
}

/* TBL_FN(bytes) returns the memory the table holds. */
static inline size_t
TBL_FN(bytes)(const TBL *t)
{
	return TBL_FN(cap)(t) * sizeof(TBL_SLOT);
}

static inline void
TBL_FN(clear)(TBL *t)
{
	TBL_FN(fini)(t);
}

/* TBL_FN(save) writes t to an image: its fields, then its slot array as it
 * is in memory. */
static inline void
TBL_FN(save)(const TBL *t, kvx_imgw *w)
{
	uint64_t cap = TBL_FN(cap)(t);
	kvx_imgw_u64(w, t->seed);
	kvx_imgw_u64(w, cap);
	kvx_imgw_u64(w, t->len);
	kvx_imgw_u32(w, t->has_zero);
	kvx_imgw_put(w, &t->zero_val, sizeof(t->zero_val));
	if (cap != 0) {
		kvx_imgw_put(w, t->slots, cap * sizeof(TBL_SLOT));
	}
}

/* TBL_FN(load) reads into t, an empty table, what TBL_FN(save) wrote;
 * false if the fields cannot be a table's (t is then empty). */
static inline bool
TBL_FN(load)(TBL *t, kvx_imgr *r)
{
	uint64_t seed = kvx_imgr_u64(r), cap = kvx_imgr_u64(r);
	uint64_t len = kvx_imgr_u64(r);
	uint32_t has_zero = kvx_imgr_u32(r);
	TBL_VAL zero_val;
	if (!kvx_imgr_get(r, &zero_val, sizeof(zero_val))) {
		return false;
	}
	uint32_t bits = 0;
	while (bits < 63 && ((uint64_t)1 << bits) < cap) {
		bits++;
	}
#ifdef TBL_UNIFORM_SKIP
	bool shape = ((uint64_t)1 << bits) == cap || cap == 0;
#else
	bool shape = true; /* any capacity */
#endif
	if (!shape || has_zero > 1 || len > cap + has_zero ||
	    cap > r->left / sizeof(TBL_SLOT)) {
		return kvx_imgr_fail(r, "a table's fields are out of range");
	}
	t->seed = seed;
	t->len = (size_t)len;
	t->has_zero = has_zero != 0;
	t->zero_val = zero_val;
	if (cap != 0) {
		t->slots = kvx_table_alloc((size_t)cap * sizeof(TBL_SLOT));
		t->cap = (size_t)cap;
		t->bits = bits;
		if (!kvx_imgr_get(r, t->slots,
				  (size_t)cap * sizeof(TBL_SLOT))) {
			TBL_FN(fini)(t);
			return false;
		}
	}
	return true;
}

#undef TBL_UNIFORM_SKIP
#undef TBL_SLOT
#undef TBL_FN
#undef TBL_CAT
#undef TBL_CAT2
#undef TBL_VAL
#undef TBL
