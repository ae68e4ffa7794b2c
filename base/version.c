/* version: comparing hookflow versions (pure). */
#include "base/version.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Parses "MAJOR.MINOR.PATCH[-PRE]" into n[3] and *pre (borrowed, "" when
 * none). False when `s` is not such a string. */
static bool parse(const char *s, long n[3], const char **pre)
{
	const char *p = s;
	for (int i = 0; i < 3; i++) {
		if (!isdigit((unsigned char)*p))
			return false;
		char *end = NULL;
		n[i] = strtol(p, &end, 10);
		p = end;
		if (i < 2) {
			if (*p != '.')
				return false;
			p++;
		}
	}
	if (*p == '\0') {
		*pre = "";
		return true;
	}
	if (*p != '-' || p[1] == '\0')
		return false;
	*pre = p + 1;
	return true;
}

int version_compare(const char *a, const char *b)
{
	long na[3], nb[3];
	const char *pa, *pb;
	bool oka = a != NULL && parse(a, na, &pa);
	bool okb = b != NULL && parse(b, nb, &pb);
	if (!oka || !okb)
		return (int)oka - (int)okb;
	for (int i = 0; i < 3; i++)
		if (na[i] != nb[i])
			return na[i] < nb[i] ? -1 : 1;
	if (*pa == '\0' || *pb == '\0')
		return (*pa == '\0') - (*pb == '\0');
	int c = strcmp(pa, pb);
	return (c > 0) - (c < 0);
}
