/*
 * test_wire_groups.c - the spec fields of a hybrid model's KV cache group
 * in a decoded BlockStored (wire.h): kv_cache_spec_kind kept as sent,
 * kv_cache_spec_sliding_window a positive u32 or none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "wire.h"

static kvi_decoder *dec;

static int
setup(void **state)
{
	(void)state;
	dec = kvi_decoder_alloc();
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	kvi_decoder_free(dec);
	return 0;
}

/* pack_grouped packs a batch of one map-form BlockStored of a KV cache
 * group, with the spec fields given (kind NULL: absent; window < 0:
 * absent; window == -2: nil). */
static void
pack_grouped(msgpack_sbuffer *sb, const char *kind, long long window)
{
	msgpack_packer pk;
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_double(&pk, 1.0);
	msgpack_pack_array(&pk, 1);
	size_t n = 6 + (kind != NULL) + (window != -1);
	msgpack_pack_map(&pk, n);
#define KEY(k)                                                                 \
	(msgpack_pack_str(&pk, strlen(k)),                                     \
	 msgpack_pack_str_body(&pk, k, strlen(k)))
	KEY("type");
	KEY("BlockStored");
	KEY("block_hashes");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_uint64(&pk, 7);
	KEY("parent_block_hash");
	msgpack_pack_nil(&pk);
	KEY("token_ids");
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint32(&pk, 1);
	msgpack_pack_uint32(&pk, 2);
	KEY("block_size");
	msgpack_pack_uint32(&pk, 2);
	KEY("group_idx");
	msgpack_pack_uint32(&pk, 1);
	if (kind != NULL) {
		KEY("kv_cache_spec_kind");
		KEY(kind);
	}
	if (window == -2) {
		KEY("kv_cache_spec_sliding_window");
		msgpack_pack_nil(&pk);
	} else if (window != -1) {
		KEY("kv_cache_spec_sliding_window");
		msgpack_pack_int64(&pk, window);
	}
#undef KEY
}

/* The spec fields of a cache group's store are kept as sent; a window
 * that is no positive u32 reads as none. */
static void
test_group_spec_fields(void **state)
{
	(void)state;
	static const struct {
		const char *kind;
		long long window, want;
	} cases[] = {
	    {"sliding_window", 64, 64},
	    {"mamba", -1, 0},
	    {NULL, -1, 0},
	    {"sliding_window", -2, 0},
	    {"sliding_window", 0, 0},
	    {"sliding_window", -5, 0},
	    {"x", 1LL << 33, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		msgpack_sbuffer sb;
		pack_grouped(&sb, cases[i].kind, cases[i].window);
		kvi_batch b;
		assert_int_equal(kvi_decoder_decode(dec, sb.data, sb.size, &b),
				 KVI_OK);
		assert_int_equal(b.n_events, 1);
		const kvi_event *ev = &b.events[0];
		assert_int_equal(ev->type, KVI_EVENT_STORED);
		assert_true(ev->has_group_idx && ev->group_idx == 1);
		if (cases[i].kind == NULL) {
			assert_null(ev->spec_kind.ptr);
		} else {
			assert_int_equal(ev->spec_kind.len,
					 strlen(cases[i].kind));
			assert_memory_equal(ev->spec_kind.ptr, cases[i].kind,
					    ev->spec_kind.len);
		}
		assert_int_equal(ev->window, cases[i].want);
		msgpack_sbuffer_destroy(&sb);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_group_spec_fields),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
