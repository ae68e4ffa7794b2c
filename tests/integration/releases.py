"""Builds of earlier releases, for the upgrade tests (test_upgrade.py).

RELEASES maps every shipped version to its release commit, read from
migrations/RELEASES (the one list of releases; a new release adds its line
there, and the upgrade tests then prove the take-over from it too).

release_binary(version) gives the path of that release's `hookflow` binary,
built from the release commit's files in a temporary directory (`git archive
<commit> | tar -x`, then that tree's own `make build/hookflow`: its Makefile,
its flags, no sanitizers) and cached as build/release/<version>/<commit>/hookflow,
so a repeated run does not build again. The cache is keyed by the commit: a
binary is only ever reused for the exact commit it was built from. Several
pytest processes (xdist) may ask at once: a file lock lets one build while the
others wait for it.

The release commit must be in this repository's history: a clone without it
(a shallow clone, a tarball without .git) cannot prove an upgrade, and the
tests fail saying so rather than skipping silently."""

import fcntl
import os
import shutil
import subprocess
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))



def _read_releases():
    """version -> release commit (full SHA-1), from migrations/RELEASES."""
    out = {}
    with open(os.path.join(REPO, "migrations", "RELEASES")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                version, commit = line.split()
                out[version] = commit
    return out


RELEASES = _read_releases()

# Variables an enclosing make or sanitizer build may leave in the environment;
# the release builds with its own Makefile's defaults instead, so the cached
# binary depends on the commit only.
_BUILD_ENV_DROP = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "CFLAGS", "LDFLAGS",
                   "LDLIBS", "SANITIZE", "BUILD", "V")


class ReleaseError(RuntimeError):
    pass


def _git(*args, **kw):
    return subprocess.run(["git", "-C", REPO] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, **kw)


def _check_commit(version, commit):
    r = _git("rev-parse", "--git-dir")
    if r.returncode != 0:
        raise ReleaseError("release %s (commit %s) cannot be built: %s is not a git checkout (%s); "
                           "the upgrade tests build the release from the repository's history"
                           % (version, commit, REPO, r.stderr.decode().strip()))
    r = _git("cat-file", "-e", commit + "^{commit}")
    if r.returncode != 0:
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.decode().strip() == "true"
        raise ReleaseError("release %s: commit %s is not in this repository's history%s; the upgrade "
                           "tests build that release from it"
                           % (version, commit, " (a shallow clone: run `git fetch --unshallow`)"
                              if shallow else ""))


def _build(version, commit, dest):
    src = tempfile.mkdtemp(prefix="hookflow-release-%s-" % version)
    try:
        archive = subprocess.Popen(["git", "-C", REPO, "archive", "--format=tar", commit],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        archive.stdout.close()
        archive_err = archive.stderr.read()
        if archive.wait() != 0 or untar.returncode != 0:
            raise ReleaseError("release %s: git archive %s | tar -x failed: %s %s"
                               % (version, commit, archive_err.decode().strip(), untar.stderr.decode().strip()))
        env = {k: v for k, v in os.environ.items() if k not in _BUILD_ENV_DROP}
        r = subprocess.run(["make", "-C", src, "-j2", "build/hookflow"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            tail = "\n".join(r.stdout.decode("utf-8", "replace").splitlines()[-40:])
            raise ReleaseError("release %s (commit %s): make build/hookflow failed (exit %d):\n%s"
                               % (version, commit, r.returncode, tail))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = dest + ".tmp"
        shutil.copy2(os.path.join(src, "build", "hookflow"), tmp)
        os.replace(tmp, dest)  # a reader never sees half a binary
    finally:
        shutil.rmtree(src, ignore_errors=True)


def _cached_build(label, commit, check=None):
    """Path of the `hookflow` binary of `commit`, cached as
    build/release/<label>/<commit>/hookflow: built on first use (after
    check(), when given), under a lock so that parallel test processes build
    it once."""
    top = os.path.join(REPO, "build", "release", label)
    dest = os.path.join(top, commit, "hookflow")
    if os.access(dest, os.X_OK):
        return dest
    os.makedirs(top, exist_ok=True)
    with open(os.path.join(top, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.access(dest, os.X_OK):  # another process may have built it meanwhile
            if check is not None:
                check()
            _build(label, commit, dest)
    return dest


def release_binary(version):
    """Path of the `hookflow` binary of release `version` (a key of RELEASES),
    built and cached on first use. Raises ReleaseError with the reason when it
    cannot be had."""
    if version not in RELEASES:
        raise ReleaseError("unknown release %r (known: %s)" % (version, ", ".join(sorted(RELEASES))))
    commit = RELEASES[version]
    dest = _cached_build(version, commit, lambda: _check_commit(version, commit))
    r = subprocess.run([dest, "version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0 or version not in r.stdout.decode("utf-8", "replace"):
        raise ReleaseError("%s is not release %s: `hookflow version` printed %r (exit %d); delete it to rebuild"
                           % (dest, version, r.stdout.decode("utf-8", "replace"), r.returncode))
    return dest


def binary_before(path):
    """Path of the `hookflow` binary built from the commit before the one that
    added `path` (a migration, say): the schema that migration upgrades from,
    for a test of the upgrade with runs in flight that release 0.1.0 cannot
    make (its features came after it). Built and cached like a release's, as
    build/release/before-<file name>/<commit>/hookflow. Raises ReleaseError
    with the reason when it cannot be had."""
    name = os.path.basename(path)
    r = _git("log", "--diff-filter=A", "--format=%H", "--", path)
    added = r.stdout.decode().split()
    if r.returncode != 0 or not added:
        raise ReleaseError("no commit of this repository's history adds %s (%s): the build "
                           "before it cannot be made" % (path, r.stderr.decode().strip()))
    r = _git("rev-parse", "--verify", added[-1] + "^")
    if r.returncode != 0:
        raise ReleaseError("the commit that adds %s (%s) has no parent in this repository's "
                           "history: %s" % (path, added[-1], r.stderr.decode().strip()))
    return _cached_build("before-" + name, r.stdout.decode().strip())
