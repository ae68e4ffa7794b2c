/* netpolicy: CIDR allow/deny lists and the always-refused addresses for webhook calls. */
#include "base/netpolicy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refused whatever the configuration: link-local (which holds most cloud
 * metadata endpoints), the metadata and platform addresses outside it, and
 * IPv6 tunnels whose IPv4 target cannot be read from the address. (NAT64,
 * 6to4 and IPv4-compatible addresses carry their IPv4 target: they are
 * checked as that address too, see embedded_v4.) */
static const char *const always_denied[] = {
	"169.254.0.0/16",     /* IPv4 link-local, 169.254.169.254 metadata */
	"fe80::/10",          /* IPv6 link-local */
	"fd00:ec2::254/128",  /* AWS metadata over IPv6 */
	"100.100.100.200/32", /* Alibaba Cloud metadata */
	"168.63.129.16/32",   /* Azure WireServer (VM agent, platform DNS and health) */
	"0.0.0.0/8",          /* "this network": connects to the local host */
	"::/128",
	"64:ff9b:1::/48", /* local-use NAT64 (RFC 8215): the IPv4 address sits where
			   * the local prefix length puts it, unknown here */
	"2001::/32",      /* Teredo: tunnels to an IPv4 host hidden (xor-ed) in the address */
};

static bool parse_one(const char *s, struct cidr *c)
{
	char buf[64];
	size_t n = strlen(s);
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, s, n + 1);
	char *slash = strchr(buf, '/');
	int bits = -1;
	if (slash != NULL) {
		*slash = '\0';
		char *end = NULL;
		long b = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end != '\0' || b < 0 || b > 128)
			return false;
		bits = (int)b;
	}
	memset(c, 0, sizeof *c);
	if (inet_pton(AF_INET, buf, c->addr) == 1) {
		c->family = AF_INET;
		if (bits < 0)
			bits = 32;
		if (bits > 32)
			return false;
	} else if (inet_pton(AF_INET6, buf, c->addr) == 1) {
		c->family = AF_INET6;
		if (bits < 0)
			bits = 128;
	} else {
		return false;
	}
	c->bits = bits;
	int len = c->family == AF_INET ? 4 : 16;
	for (int i = 0; i < len; i++) {
		int keep = bits - i * 8;
		unsigned char mask = keep >= 8   ? 0xff
				     : keep <= 0 ? 0
						 : (unsigned char)(0xff << (8 - keep));
		c->addr[i] &= mask;
	}
	return true;
}

enum err_code netpolicy_parse_list(const char *field, const char *list, struct cidr *out, int *n,
				   struct err *e)
{
	*n = 0;
	if (list == NULL)
		return ERR_OK;
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		const char *end = p;
		while (*end && *end != ',' && *end != ' ')
			end++;
		char item[64];
		size_t len = (size_t)(end - p);
		if (len >= sizeof item || *n == NETPOLICY_MAX_RULES)
			return err_set(e, ERR_INVALID, "%s: entry too long or too many entries",
				       field);
		memcpy(item, p, len);
		item[len] = '\0';
		if (!parse_one(item, &out[*n]))
			return err_set(e, ERR_INVALID,
				       "%s: %.63s is not an IP address or CIDR block", field, item);
		(*n)++;
		p = end;
	}
	return ERR_OK;
}

static bool in_cidr(const struct cidr *c, int family, const unsigned char *addr)
{
	if (c->family != family)
		return false;
	int full = c->bits / 8, rest = c->bits % 8;
	if (memcmp(c->addr, addr, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (addr[full] & mask) == c->addr[full];
}

static bool in_list(const struct cidr *list, int n, int family, const unsigned char *addr)
{
	for (int i = 0; i < n; i++)
		if (in_cidr(&list[i], family, addr))
			return true;
	return false;
}

/* The IPv4 address that IPv6 address `a` stands for, when it embeds one: NAT64
 * (64:ff9b::/96, RFC 6052: the last 32 bits), 6to4 (2002::/16, RFC 3056: bits
 * 16..47) and the deprecated IPv4-compatible form (::a.b.c.d; not ::1 or ::).
 * Returns the mechanism's name, or NULL. A connection to such an address
 * reaches the IPv4 host through a translator or a tunnel, so the policy has to
 * hold for that host as well. (IPv4-mapped addresses are IPv4 to the kernel:
 * netpolicy_allowed checks them as IPv4 only.) */
static const char *embedded_v4(const unsigned char a[16], unsigned char v4[4])
{
	static const unsigned char nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	static const unsigned char zero[12];
	if (memcmp(a, nat64, 12) == 0) {
		memcpy(v4, a + 12, 4);
		return "NAT64";
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		memcpy(v4, a + 2, 4);
		return "6to4";
	}
	if (memcmp(a, zero, 12) == 0 && a[12] != 0) {
		memcpy(v4, a + 12, 4);
		return "IPv4-compatible";
	}
	return NULL;
}

/* True when one of the forms of the address (its IPv6 form when has6, its
 * IPv4 form when has4) is in `list`. */
static bool listed(const struct cidr *list, int n, bool has6, const unsigned char *a6, bool has4,
		   const unsigned char *a4)
{
	return (has6 && in_list(list, n, AF_INET6, a6)) || (has4 && in_list(list, n, AF_INET, a4));
}

bool netpolicy_allowed(const struct netpolicy *p, const struct sockaddr *sa, char *why, size_t cap)
{
	unsigned char a6[16], a4[4];
	bool has6 = false, has4 = false;
	char text[INET6_ADDRSTRLEN + INET_ADDRSTRLEN + 24] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(a4, &in->sin_addr, 4);
		has4 = true;
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, text, INET6_ADDRSTRLEN);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			memcpy(a4, in6->sin6_addr.s6_addr + 12, 4);
			has4 = true;
		} else {
			memcpy(a6, in6->sin6_addr.s6_addr, 16);
			has6 = true;
			const char *kind = embedded_v4(a6, a4);
			if (kind != NULL) {
				char v4text[INET_ADDRSTRLEN];
				inet_ntop(AF_INET, a4, v4text, sizeof v4text);
				size_t l = strlen(text);
				snprintf(text + l, sizeof text - l, " (%s of %s)", kind, v4text);
				has4 = true;
			}
		}
	} else {
		snprintf(why, cap, "unsupported address family");
		return false;
	}
	if (listed(p->fixed, p->nfixed, has6, a6, has4, a4)) {
		snprintf(why, cap,
			 "address %s is always refused (link-local, cloud metadata or an "
			 "unverifiable tunnel)",
			 text);
		return false;
	}
	if (listed(p->deny, p->ndeny, has6, a6, has4, a4)) {
		snprintf(why, cap, "address %s is denied by HOOKFLOW_URL_DENY", text);
		return false;
	}
	if (p->nallow > 0 && !listed(p->allow, p->nallow, has6, a6, has4, a4)) {
		snprintf(why, cap, "address %s is not allowed by HOOKFLOW_URL_ALLOW", text);
		return false;
	}
	return true;
}

enum err_code netpolicy_init(struct netpolicy *p, const char *allow, const char *deny,
			     struct err *e)
{
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < sizeof always_denied / sizeof always_denied[0]; i++)
		if (p->nfixed < NETPOLICY_MAX_FIXED &&
		    parse_one(always_denied[i], &p->fixed[p->nfixed]))
			p->nfixed++;
	if (netpolicy_parse_list("HOOKFLOW_URL_ALLOW", allow, p->allow, &p->nallow, e) ||
	    netpolicy_parse_list("HOOKFLOW_URL_DENY", deny, p->deny, &p->ndeny, e))
		return e->code;
	return ERR_OK;
}
