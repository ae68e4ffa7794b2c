/* pb: the protobuf wire format, written into a strbuf. */
#include "base/pb.h"

#include <string.h>

static size_t varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

size_t pb_len_field_size(uint32_t field, size_t n)
{
	return pb_varint_size((uint64_t)field << 3) + pb_varint_size(n) + n;
}

void pb_len_prefix(struct strbuf *b, uint32_t field, size_t n)
{
	pb_key(b, field, PB_LEN);
	pb_varint(b, n);
}

void pb_varint(struct strbuf *b, uint64_t v)
{
	uint8_t buf[10];
	strbuf_add(b, (const char *)buf, varint_put(buf, v));
}

void pb_key(struct strbuf *b, uint32_t field, enum pb_wire wire)
{
	pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

void pb_uint(struct strbuf *b, uint32_t field, uint64_t v)
{
	pb_key(b, field, PB_VARINT);
	pb_varint(b, v);
}

void pb_int(struct strbuf *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

static void put_le(struct strbuf *b, uint64_t v, int bytes)
{
	uint8_t buf[8];
	for (int i = 0; i < bytes; i++)
		buf[i] = (uint8_t)(v >> (8 * i));
	strbuf_add(b, (const char *)buf, (size_t)bytes);
}

void pb_fixed64(struct strbuf *b, uint32_t field, uint64_t v)
{
	pb_key(b, field, PB_I64);
	put_le(b, v, 8);
}

void pb_fixed32(struct strbuf *b, uint32_t field, uint32_t v)
{
	pb_key(b, field, PB_I32);
	put_le(b, v, 4);
}

void pb_double(struct strbuf *b, uint32_t field, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof bits);
	pb_fixed64(b, field, bits);
}

void pb_bytes(struct strbuf *b, uint32_t field, const void *p, size_t n)
{
	pb_len_prefix(b, field, n);
	if (n > 0)
		strbuf_add(b, p, n);
}

void pb_string(struct strbuf *b, uint32_t field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

size_t pb_open(struct strbuf *b, uint32_t field)
{
	pb_key(b, field, PB_LEN);
	return b->len;
}

void pb_close(struct strbuf *b, size_t start)
{
	if (b->oom || start > b->len)
		return;
	size_t n = b->len - start;
	uint8_t len[10];
	size_t k = varint_put(len, n);
	/* Make room for the length in front of the content: grow by k bytes
	 * (their value does not matter), then move the content up. */
	strbuf_add(b, (const char *)len, k);
	if (b->oom)
		return;
	memmove(b->data + start + k, b->data + start, n);
	memcpy(b->data + start, len, k);
}
