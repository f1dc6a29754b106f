/* SPDX-License-Identifier: Apache-2.0 */
/* Reading --auth-secret-file. Its bytes are never logged. */
#include "auth/auth_secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(const char *path, const char *why)
{
    fprintf(stderr, "httpdcnode: --auth-secret-file %s: %s\n", path, why);
    return -1;
}

/* Like erl with ~/.erlang.cookie: a secret others can read is no secret. */
static int check_file(const char *path, int fd)
{
    struct stat st;
    char why[160];
    if (fstat(fd, &st) != 0)
        return refuse(path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return refuse(path, "not a regular file");
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(why, sizeof why, "mode %04o gives group or others access; "
                 "chmod 600 it (erl refuses such a cookie file too)",
                 (unsigned)(st.st_mode & 07777));
        return refuse(path, why);
    }
    if (st.st_size > AUTH_SECRET_MAX + 1) {
        return refuse(path, "longer than " AUTH_SECRET_MAX_TEXT " bytes");
    }
    return 0;
}

/* The whole file, at most size bytes (a short read is not the end). */
static ssize_t read_all(int fd, unsigned char *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int auth_secret_read(const char *path, unsigned char *out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT)
        return refuse(path, "No such file or directory; create it: head -c 32 /dev/urandom "
                            "| base64 > FILE && chmod 600 FILE (docs/security.md)");
    if (fd < 0)
        return refuse(path, strerror(errno));
    if (check_file(path, fd) != 0) {
        close(fd);
        return -1;
    }
    unsigned char buf[AUTH_SECRET_MAX + 2];
    ssize_t n = read_all(fd, buf, sizeof buf);
    int err = errno;
    close(fd);
    if (n < 0)
        return refuse(path, strerror(err));
    if (n > 0 && buf[n - 1] == '\n')
        n--;                            /* one newline, as an editor leaves it */
    int r = 0;
    if (n > AUTH_SECRET_MAX)
        r = refuse(path, "longer than " AUTH_SECRET_MAX_TEXT " bytes");
    else if (n == 0)
        r = refuse(path, "the secret is empty; put at least 32 random bytes in it");
    else {
        memcpy(out, buf, (size_t)n);
        *len = (size_t)n;
    }
    explicit_bzero(buf, sizeof buf);
    return r;
}
