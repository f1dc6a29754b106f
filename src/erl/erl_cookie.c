/* SPDX-License-Identifier: Apache-2.0 */
/* The Erlang cookie: --cookie-file, else $ERLANG_COOKIE, else ~/.erlang.cookie.
 * A cookie file is refused, as erl refuses ~/.erlang.cookie, when group or
 * others have any permission on it. The cookie itself is never printed. */
#include "erl/erl_cookie.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(const char *path, const char *why)
{
    fprintf(stderr, "httpdcnode: cookie file %s: %s\n", path, why);
    return -1;
}

/* The whole of a regular file that only its owner may access, into buf
 * (at most size - 1 bytes, NUL-terminated). Checked on the open descriptor,
 * so the file checked is the file read. 1 when it does not exist and
 * missing_ok, else -1 after one line on stderr. */
static int read_private(const char *path, char *buf, size_t size, size_t *len, int missing_ok)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && missing_ok)
            return 1;
        char open_why[128];
        snprintf(open_why, sizeof open_why, "cannot open it: %s", strerror(errno));
        return refuse(path, open_why);
    }
    struct stat st;
    const char *why = NULL;
    char mode_why[128];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        why = "not a regular file";
    } else if (st.st_mode & 077) {
        snprintf(mode_why, sizeof mode_why, "mode %04o gives group or others access; "
                 "chmod 600 it (erl refuses such a cookie file too)",
                 (unsigned)(st.st_mode & 07777));
        why = mode_why;
    }
    ssize_t n = why ? 0 : read(fd, buf, size - 1);
    if (n < 0)
        why = strerror(errno);
    close(fd);
    if (why)
        return refuse(path, why);
    buf[n] = '\0';
    *len = (size_t)n;
    return 0;
}

/* erl takes printable ASCII only: a CR or a second line would make this
 * cookie differ from the one erl reads from the same file. */
static int check_text(const char *path, char *buf, size_t n, char *out, size_t size)
{
    if (n == 0)
        return refuse(path, "empty; write the cookie into it");
    if (n >= size || n > COOKIE_MAX)
        return refuse(path, "longer than 255 characters");
    for (size_t i = 0; i < n; i++)
        if (buf[i] < 0x20 || buf[i] > 0x7e)
            return refuse(path, "holds a character that is not printable ASCII "
                                "(a second line? a CR?)");
    memcpy(out, buf, n);
    out[n] = '\0';
    return 0;
}

int erl_cookie_read_file(const char *path, char *out, size_t size)
{
    char buf[COOKIE_MAX + 3];   /* room to tell "too long" from a newline */
    size_t n;
    if (read_private(path, buf, sizeof buf, &n, 0) != 0)
        return -1;
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    int r = check_text(path, buf, n, out, size);
    memset(buf, 0, sizeof buf);
    return r;
}

/* ~/.erlang.cookie as erl reads it: trailing newlines, CRs and spaces go.
 * 1 when there is none. */
static int read_home_cookie(const char *path, char *out, size_t size)
{
    char buf[COOKIE_MAX + 64];
    size_t n;
    int r = read_private(path, buf, sizeof buf, &n, 1);
    if (r != 0)
        return r;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
    r = check_text(path, buf, n, out, size);
    memset(buf, 0, sizeof buf);
    return r;
}

int erl_cookie_find(char *out, size_t size)
{
    const char *env = getenv("ERLANG_COOKIE");
    if (env && *env) {
        if (strlen(env) >= size) {
            fprintf(stderr, "httpdcnode: $ERLANG_COOKIE is longer than %zu characters\n",
                    size - 1);
            return -1;
        }
        strcpy(out, env);
        return 0;
    }
    const char *home = getenv("HOME");
    char path[4096];
    if (home && *home && snprintf(path, sizeof path, "%s/.erlang.cookie", home) < (int)sizeof path) {
        int r = read_home_cookie(path, out, size);
        if (r <= 0)
            return r;
    }
    fprintf(stderr, "httpdcnode: no Erlang cookie: pass --cookie-file FILE (mode 0600), "
                    "set ERLANG_COOKIE, or create ~/.erlang.cookie (erl does on its first "
                    "distributed start)\n");
    return -1;
}
