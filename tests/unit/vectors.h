/*
 * vectors.h - reading the shared test vectors at run time.
 *
 * The vector files are JSON lines produced by the engines' own encoder
 * (msgspec); tests read them as they are, so a new vector is tested the
 * moment it is added. Paths are relative to KVI_DATA_DIR, which CMake
 * defines for every test.
 */
#ifndef KVI_TESTS_VECTORS_H
#define KVI_TESTS_VECTORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* vectors_load reads KVI_DATA_DIR/rel, one JSON object per line, into a
 * JSON array; it fails the running test if the file cannot be read. */
json_t *vectors_load(const char *rel);

/* vectors_hex decodes a hex string into a fresh buffer (free with free())
 * and sets *len. */
uint8_t *vectors_hex(const char *hex, size_t *len);

/* vectors_u64 parses a decimal string into a u64. */
uint64_t vectors_u64(const char *s);

#endif /* KVI_TESTS_VECTORS_H */
