/*
 * table_impl.h - an open-addressing hash table from u64 keys to a small
 * value, instantiated by table.h once per value type. Not a public header.
 *
 * Design: Robin Hood linear probing with backward-shift deletion, so lookups
 * stay short at high load (the table grows at 29/32 full) and deletion leaves
 * no tombstones. The home slot of a key is a Fibonacci hash of it xor a
 * per-table seed: external hashes on the wire are not always well mixed
 * (small integers in tests, engine counters), and without the seed, copying
 * one table into another in slot order (loading a snapshot) would insert
 * keys in home order and build one cluster the size of the table. Key 0
 * lives outside the slot array, so that 0 can mark an empty slot. Slots are
 * packed (key, value) pairs: one cache line read per probe for the common hit.
 *
 * Before including, define TBL (the type and prefix, e.g. kvx_extmap) and
 * TBL_VAL (the value type, a packed struct: slots are packed); define
 * TBL_UNIFORM_SKIP n for keys whose bits are uniform already (sequence
 * hashes): the slot is then the key's bits after the first n, unmixed, so a
 * loader can insert in slot order by sorting keys.
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
	uint32_t bits; /* capacity = 1 << bits, or 0 slots when bits == 0 */
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
	kvx_table_free(t->slots, t->slots == NULL ? 0
						  : ((size_t)1 << t->bits) *
							sizeof(TBL_SLOT));
	uint64_t seed = t->seed;
	memset(t, 0, sizeof(*t));
	t->seed = seed;
}

static inline size_t
TBL_FN(cap)(const TBL *t)
{
	return t->slots == NULL ? 0 : (size_t)1 << t->bits;
}

static inline size_t
TBL_FN(home)(const TBL *t, uint64_t key)
{
#ifdef TBL_UNIFORM_SKIP
	/* Keys already uniform (our own XXH3 outputs): the bits after the
	 * first TBL_UNIFORM_SKIP are the slot, so slot order is key order. */
	return (size_t)((key << TBL_UNIFORM_SKIP) >> (64 - t->bits));
#else
	return (size_t)(((key ^ t->seed) * UINT64_C(0x9e3779b97f4a7c15)) >>
			(64 - t->bits));
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
	size_t mask = TBL_FN(cap)(t) - 1;
	size_t i = TBL_FN(home)(t, key);
	for (size_t dist = 0;; dist++, i = (i + 1) & mask) {
		uint64_t k = t->slots[i].key;
		if (k == key) {
			return &t->slots[i].val;
		}
		/* Robin Hood: a key is never further from home than the
		 * resident it would have displaced. */
		if (k == 0 || ((i - TBL_FN(home)(t, k)) & mask) < dist) {
			return NULL;
		}
	}
}

/* TBL_FN(place) puts a key known to be absent into a table with room, and
 * returns its slot. */
static inline TBL_SLOT *
TBL_FN(place)(TBL *t, uint64_t key, TBL_VAL val)
{
	size_t mask = TBL_FN(cap)(t) - 1;
	size_t i = TBL_FN(home)(t, key);
	TBL_SLOT cur = {key, val};
	TBL_SLOT *mine = NULL;
	for (size_t dist = 0;; dist++, i = (i + 1) & mask) {
		TBL_SLOT *s = &t->slots[i];
		if (s->key == 0) {
			*s = cur;
			return mine != NULL ? mine : s;
		}
		size_t sdist = (i - TBL_FN(home)(t, s->key)) & mask;
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
TBL_FN(rehash)(TBL *t, uint32_t bits)
{
	TBL_SLOT *old = t->slots;
	size_t old_cap = TBL_FN(cap)(t);
	t->slots = kvx_table_alloc(((size_t)1 << bits) * sizeof(TBL_SLOT));
	t->bits = bits;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].key != 0) {
			TBL_FN(place)(t, old[i].key, old[i].val);
		}
	}
	kvx_table_free(old, old_cap * sizeof(TBL_SLOT));
}

/* TBL_FN(max_load) returns how many entries a table of 1 << bits slots
 * takes before it grows: 29/32 of it. Robin Hood keeps probes short that
 * full, and memory is what a big index is short of. */
static inline size_t
TBL_FN(max_load)(uint32_t bits)
{
	return (((size_t)1 << bits) / 32) * 29;
}

/* TBL_FN(reserve) makes room for n entries without growing. */
static inline void
TBL_FN(reserve)(TBL *t, size_t n)
{
	uint32_t bits = t->slots == NULL ? 4 : t->bits;
	while (n > TBL_FN(max_load)(bits)) {
		bits++;
	}
	if (t->slots == NULL || bits > t->bits) {
		TBL_FN(rehash)(t, bits);
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
	size_t mask = TBL_FN(cap)(t) - 1;
	size_t i = (size_t)((TBL_SLOT *)((char *)v - offsetof(TBL_SLOT, val)) -
			    t->slots);
	/* Backward shift: pull each displaced follower one slot home-ward. */
	for (;;) {
		size_t j = (i + 1) & mask;
		uint64_t k = t->slots[j].key;
		if (k == 0 || ((j - TBL_FN(home)(t, k)) & mask) == 0) {
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

#undef TBL_UNIFORM_SKIP
#undef TBL_SLOT
#undef TBL_FN
#undef TBL_CAT
#undef TBL_CAT2
#undef TBL_VAL
#undef TBL
