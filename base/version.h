/* version: the version of hookflow, and how versions compare. */
#ifndef HOOKFLOW_VERSION_H
#define HOOKFLOW_VERSION_H

/* This build's version: MAJOR.MINOR.PATCH, with "-dev" between releases
 * (README, "Versions and upgrades"). */
#define HOOKFLOW_VERSION "0.2.0-dev"

/* Compares versions "MAJOR.MINOR.PATCH[-PRE]" (borrowed): negative, zero or
 * positive as `a` is older than, the same as or newer than `b`. A
 * pre-release is older than its release ("0.2.0-dev" < "0.2.0"); pre-release
 * labels compare as strings. A string that is not a version compares older
 * than every version. Pure. */
int version_compare(const char *a, const char *b);

#endif
