/* pb: a small writer of the protobuf wire format
 * (https://protobuf.dev/programming-guides/encoding/): varints, fixed-width
 * numbers, length-delimited fields and nested messages, appended to a
 * strbuf. Enough for OTLP's ExportTraceServiceRequest (service/otlp.c). Pure;
 * an allocation failure sets the strbuf's oom flag, which the caller checks
 * once at the end. */
#ifndef HOOKFLOW_PB_H
#define HOOKFLOW_PB_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

/* Wire types. */
enum pb_wire { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

/* Appends `v` as a varint (1 to 10 bytes). */
void pb_varint(struct strbuf *b, uint64_t v);

/* How many bytes pb_varint writes for `v`. */
size_t pb_varint_size(uint64_t v);

/* How many bytes a length-delimited field `field` of `n` bytes of content
 * takes (key, length and content): what an enclosing message whose length
 * is known in advance counts for it. */
size_t pb_len_field_size(uint32_t field, size_t n);

/* Appends the key and the length of length-delimited field `field` whose
 * `n` bytes of content the caller writes next (a message whose length is
 * known in advance: no pb_open/pb_close). */
void pb_len_prefix(struct strbuf *b, uint32_t field, size_t n);

/* Appends the key of field `field` with wire type `wire`. */
void pb_key(struct strbuf *b, uint32_t field, enum pb_wire wire);

/* Field `field` as a varint (uint32, uint64, int32 >= 0, int64, bool, enum:
 * a negative int64 is written as its two's complement, 10 bytes). */
void pb_uint(struct strbuf *b, uint32_t field, uint64_t v);
void pb_int(struct strbuf *b, uint32_t field, int64_t v);

/* Field `field` as fixed64 / fixed32 (little-endian). */
void pb_fixed64(struct strbuf *b, uint32_t field, uint64_t v);
void pb_fixed32(struct strbuf *b, uint32_t field, uint32_t v);

/* Field `field` as a double (fixed 64 bits). */
void pb_double(struct strbuf *b, uint32_t field, double v);

/* Field `field` as `n` bytes of `p` (bytes, or a string: UTF-8 text). */
void pb_bytes(struct strbuf *b, uint32_t field, const void *p, size_t n);
void pb_string(struct strbuf *b, uint32_t field, const char *s);

/* Opens embedded message `field`: returns where its content starts, to be
 * passed to pb_close once the content is written. Messages nest. */
size_t pb_open(struct strbuf *b, uint32_t field);

/* Closes the message opened at `start`: writes its length in front of its
 * content. */
void pb_close(struct strbuf *b, size_t start);

#endif
