/* netpolicy: CIDR allow/deny lists and the always-refused addresses for webhook calls. */
#include "base/netpolicy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refused whatever the configuration: link-local (which holds most cloud
 * metadata endpoints) and the metadata addresses outside it. */
static const char *const always_denied[] = {
	"169.254.0.0/16",     /* IPv4 link-local, 169.254.169.254 metadata */
	"fe80::/10",          /* IPv6 link-local */
	"fd00:ec2::254/128",  /* AWS metadata over IPv6 */
	"100.100.100.200/32", /* Alibaba Cloud metadata */
	"0.0.0.0/8",          /* "this network": connects to the local host */
	"::/128",
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

bool netpolicy_allowed(const struct netpolicy *p, const struct sockaddr *sa, char *why, size_t cap)
{
	unsigned char addr[16];
	int family;
	char text[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(addr, &in->sin_addr, 4);
		family = AF_INET;
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
			family = AF_INET;
		} else {
			memcpy(addr, in6->sin6_addr.s6_addr, 16);
			family = AF_INET6;
		}
	} else {
		snprintf(why, cap, "unsupported address family");
		return false;
	}
	if (in_list(p->fixed, p->nfixed, family, addr)) {
		snprintf(why, cap, "address %s is link-local or a cloud metadata address", text);
		return false;
	}
	if (in_list(p->deny, p->ndeny, family, addr)) {
		snprintf(why, cap, "address %s is denied by HOOKFLOW_URL_DENY", text);
		return false;
	}
	if (p->nallow > 0 && !in_list(p->allow, p->nallow, family, addr)) {
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
		if (parse_one(always_denied[i], &p->fixed[p->nfixed]))
			p->nfixed++;
	if (netpolicy_parse_list("HOOKFLOW_URL_ALLOW", allow, p->allow, &p->nallow, e) ||
	    netpolicy_parse_list("HOOKFLOW_URL_DENY", deny, p->deny, &p->ndeny, e))
		return e->code;
	return ERR_OK;
}
