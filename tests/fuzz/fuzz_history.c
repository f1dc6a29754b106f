/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the history (src/core/history.c, included for its clock),
 * driven by a program of random operations and checked against a simple
 * model. Each input byte pair is one operation: append to a uid (the
 * last two are topics' slots, with a bound in bytes of their own), a
 * multicast of one payload to several uids, the clock moving, a client
 * resuming (from an id before, at or past the newest, or of another
 * epoch) and its cursor stepping while more messages arrive; with a file
 * (the second byte's top bit), a restart (the file opened again: the same
 * epoch, ids and messages) and a byte of the file damaged before one.
 *
 * What must hold, whatever the arena's wrap-arounds and evictions:
 * every message a cursor gives is the uid's message of that id, byte for
 * byte; ids come contiguous unless history_next said gap; a cursor past
 * the newest id is caught up; a resume from the newest id is no gap and
 * replays nothing; the kept bytes never pass the arena. A damaged file is
 * either started afresh (another epoch, no ids) or still gives only the
 * model's messages; either way nothing reads out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/core/history.c"

struct loop_stats loop_stats;
void log_msg(int level, const char *fmt, ...) { (void)level; (void)fmt; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UIDS 8
#define MSGS 512            /* per uid, in the model */

static uint32_t fake_now;
static uint32_t fake_clock(void) { return fake_now; }

/* The model: each uid's messages by id, as their length and a hash. */
static uint32_t model_last[UIDS + 1];
static uint32_t model_len[UIDS + 1][MSGS + 1], model_hash[UIDS + 1][MSGS + 1];

static uint32_t hash(const char *d, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)d[i]) * 16777619u;
    return h;
}

/* A payload of its own for every message: a stale or crossed byte shows. */
static uint32_t make_payload(uint32_t uid, uint32_t seq, uint32_t len, char *out)
{
    for (uint32_t i = 0; i < len; i++)
        out[i] = (char)('a' + (uid * 7 + seq * 3 + i) % 26);
    return len;
}

static void model_add(uint32_t uid, const char *d, uint32_t len)
{
    uint32_t seq = ++model_last[uid];
    model_len[uid][seq] = len;
    model_hash[uid][seq] = hash(d, len);
}

static void check_message(uint32_t uid, uint32_t seq, const char *d, uint32_t len)
{
    if (seq == 0 || seq > model_last[uid] || len != model_len[uid][seq] ||
        hash(d, len) != model_hash[uid][seq])
        abort();
}

/* Whether a message of len bytes is kept as binary: a rule of the model,
 * so that every length's flag is checked where it comes back. */
#define BINARY(len) ((int)((len) % 2))

struct client {
    uint32_t uid;
    uint32_t seen;              /* the last id it got */
    struct history_cursor c;
    int on;
};

static void step(struct client *k, int steps)
{
    for (int i = 0; i < steps; i++) {
        const char *d;
        uint32_t len, seq;
        uint32_t before = k->c.seq;
        int binary, r = history_next(k->uid, &k->c, &d, &len, &seq, &binary);
        if (r == 0) {
            if (k->c.seq != model_last[k->uid] + 1)
                abort();            /* caught up means past the newest */
            return;
        }
        if (r < 0) {
            if (k->c.seq <= before)
                abort();            /* a gap only moves forward */
            continue;
        }
        if (seq != before)
            abort();                /* no gap told: the id it stood at */
        check_message(k->uid, seq, d, len);
        if (binary != BINARY(len))
            abort();                /* given as it was kept */
        k->seen = seq;
    }
}

static char path[64];

static void remove_file(void) { unlink(path); }

/* The file opened again, as the next run would: 1 when it resumed (the
 * same epoch), 0 when it was started afresh, -1 when it was not used. */
static int restart(const struct history_config *cfg)
{
    uint32_t was = history_epoch();
    history_free();
    if (history_init(cfg) != 0)
        return -1;
    return history_epoch() == was;
}

/* A bit of the file flipped: in the head, the slots, the entries kept or
 * the room, where r points. Whether it was in the magic, which makes the
 * file one that is not used at all. */
static int damage(uint32_t r, uint8_t bit)
{
    char *at;
    switch (r % 4) {
    case 0: at = (char *)hd + r / 4 % sizeof *hd; break;
    case 1: at = (char *)(uids + 1) + r / 4 % (UIDS * sizeof *uids); break;
    case 2:
        at = tail > head ? arena + (head + r / 4 % (tail - head)) % arena_size : arena;
        break;
    default: at = room + r / 4 % 256; break;
    }
    *at ^= (char)(1u << (bit % 8));
    return at < (char *)hd + sizeof hd->magic;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint32_t per_uid = 1 + data[0] % 40;
    size_t bytes = 65536 + (size_t)(data[1] % 8) * 4096;
    int in_file = data[1] & 0x80;
    int restarts = 16;      /* each opens and checks the file: a few per input keep it fast */
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/httpdcnode-fuzz-history-%d",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
        atexit(remove_file);
    }
    unlink(path);
    memset(&loop_stats, 0, sizeof loop_stats);
    memset(model_last, 0, sizeof model_last);
    fake_now = 1000;
    now_s = fake_clock;
    /* the last two slots are topics': bounded in bytes and time of their own */
    struct history_config cfg = {.max_users = UIDS - 2, .max_topics = 2, .per_uid = per_uid,
                                 .per_topic = per_uid, .topic_bytes = 512 + data[0] / 40 * 1024u,
                                 .ttl_s = 30, .topic_ttl_s = 20, .bytes = bytes,
                                 .file = in_file ? path : NULL, .node = "fuzz@localhost"};
    if (history_init(&cfg) != 0)
        abort();
    struct client clients[4] = {{0}};
    char buf[256];
    memset(model_len, 0, sizeof model_len);
    for (size_t i = 2; i + 1 < size; i += 2) {
        uint8_t op = data[i], arg = data[i + 1];
        uint32_t uid = 1 + arg % UIDS;
        switch (op % 8) {
        case 0:
        case 1: {                                   /* a message, at times a large one */
            if (model_last[uid] >= MSGS)
                break;
            static char body[20000];
            uint32_t len = op & 0x80 ? 1000 + (uint32_t)arg * 70 : 1 + (uint32_t)arg % 200;
            make_payload(uid, model_last[uid] + 1, len, body);
            if (history_append(uid, body, len, BINARY(len)) != model_last[uid] + 1)
                abort();
            model_add(uid, body, len);
            break;
        }
        case 2: {                                   /* a multicast to the uids in arg's bits */
            uint32_t len = 1 + (uint32_t)op % 120;
            make_payload(0, arg, len, buf);
            uint64_t shared = history_share(buf, len, BINARY(len));
            for (uint32_t u = 1; u <= UIDS; u++) {
                if (!(arg & (1u << (u - 1))) || model_last[u] >= MSGS)
                    continue;
                if (history_append_shared(u, shared) != model_last[u] + 1)
                    abort();
                model_add(u, buf, len);
            }
            break;
        }
        case 3:
            fake_now += arg % 40;                   /* time passes */
            break;
        case 4: {                                   /* a client comes back */
            struct client *k = &clients[arg % 4];
            k->uid = uid;
            uint32_t last = model_last[uid];
            uint32_t from = (op >> 3) % 3 == 0 ? last : (uint32_t)(arg * 3u) % (last + 2);
            uint32_t first;
            int other = (op & 0x40) != 0;
            int gap = history_resume(uid, 1, history_slot_epoch(uid) + (uint32_t)other, from, &k->c,
                                     &first);
            if (!other && from == last && (gap || k->c.seq != last + 1))
                abort();                            /* nothing missed: nothing to say */
            if (other && !gap)
                abort();
            k->seen = other || from > last ? 0 : from;
            if (!gap && k->c.seq != k->seen + 1)
                abort();
            k->on = 1;
            break;
        }
        case 5: {                                   /* clients read */
            struct client *k = &clients[arg % 4];
            if (k->on)
                step(k, 1 + arg % 16);
            break;
        }
        case 6:                                     /* a restart: all as it was */
            if (in_file && restarts-- > 0 && restart(&cfg) != 1)
                abort();
            break;
        default:                                    /* a byte damaged, then a restart */
            if (!in_file || restarts-- <= 0)
                break;
            int magic = damage((uint32_t)arg * 2654435761u + (uint32_t)i, op >> 3);
            int r = restart(&cfg);
            if (r < 0) {
                if (!magic)
                    abort();                        /* only a file not ours is not used */
                goto out;
            }
            if (magic)
                abort();
            if (r == 0) {
                memset(model_last, 0, sizeof model_last);   /* afresh: no ids */
                memset(clients, 0, sizeof clients);
                for (uint32_t u = 1; u <= UIDS; u++)
                    if (history_last_seq(u) != 0)
                        abort();
                break;
            }
            /* Taken: what it gives is still the model's (every entry is
             * as written); ids that no longer agree end the program. */
            for (uint32_t u = 1; u <= UIDS; u++)
                if (history_last_seq(u) != model_last[u])
                    goto out;
            for (int c = 0; c < 4; c++)
                if (clients[c].on)
                    step(&clients[c], 64);
            break;
        }
        if (loop_stats.history_bytes > bytes)
            abort();
    }
out:
    history_free();
    return 0;
}
