/* The Erlang cookie: $ERLANG_COOKIE, else ~/.erlang.cookie. Never logged. */
#include "cookie.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_cookie_file(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        out[--n] = '\0';
    return n > 0 ? 0 : -1;
}

int cookie_find(char *out, size_t size)
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
    if (home && snprintf(path, sizeof path, "%s/.erlang.cookie", home) < (int)sizeof path &&
        read_cookie_file(path, out, size) == 0)
        return 0;
    fprintf(stderr, "httpdcnode: no Erlang cookie: pass --cookie, set ERLANG_COOKIE, "
                    "or create ~/.erlang.cookie (erl does on its first distributed start)\n");
    return -1;
}
