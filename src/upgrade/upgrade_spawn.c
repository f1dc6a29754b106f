/* SPDX-License-Identifier: Apache-2.0 */
/* A hot upgrade started by a signal (systemctl reload): see upgrade.h.
 * And the new process telling systemd it is the service's main process
 * now, once it serves. */
#include "upgrade/upgrade.h"
#include "lib/log.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char exe[PATH_MAX];        /* the binary this process was started from */
static int spawn_argc;
static char **spawn_argv;
static pid_t child;               /* the process started to take over, 0: none */

void upgrade_spawn_init(int argc, char **argv)
{
    spawn_argc = argc;
    spawn_argv = argv;
    /* Read now: once the binary is replaced, the link names a deleted file. */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
}

void upgrade_spawn(void)
{
    if (!exe[0]) {
        log_msg(LOG_ERROR, "takeover: SIGUSR2, but the path of this binary is unknown: start "
                "the new one with --takeover by hand");
        return;
    }
    if (child) {
        log_msg(LOG_INFO, "takeover: SIGUSR2, but pid %d is taking over already", (int)child);
        return;
    }
    char **argv = calloc((size_t)spawn_argc + 2, sizeof *argv);
    if (!argv)
        return;
    int n = 0, has = 0;
    for (int i = 0; i < spawn_argc; i++) {
        has |= strcmp(spawn_argv[i], "--takeover") == 0;
        argv[n++] = spawn_argv[i];
    }
    if (!has)
        argv[n++] = "--takeover";
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none;
    sigemptyset(&none);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);   /* stdin, out and err only */
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int err = posix_spawn(&child, exe, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(argv);
    if (err) {
        child = 0;
        log_msg(LOG_ERROR, "takeover: SIGUSR2: cannot start %s: %s", exe, strerror(err));
        return;
    }
    log_msg(LOG_INFO, "takeover: SIGUSR2: started pid %d (%s --takeover); serving until it "
            "takes over", (int)child, exe);
}

void upgrade_reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid != child)
            continue;
        child = 0;
        log_msg(LOG_ERROR, "takeover: pid %d, started to take over, ended (%s %d) without "
                "taking over: its log says why", (int)pid,
                WIFEXITED(status) ? "status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}

void upgrade_notify_main_pid(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    memcpy(a.sun_path, path, len);
    if (path[0] == '@')
        a.sun_path[0] = '\0';            /* abstract */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    char msg[64];
    int n = snprintf(msg, sizeof msg, "MAINPID=%d", (int)getpid());
    if (sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&a,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
        log_msg(LOG_ERROR, "takeover: cannot tell systemd this is its main process now (%m): "
                "it may stop the service when the old one exits (NotifyAccess=all?)");
    close(fd);
}
