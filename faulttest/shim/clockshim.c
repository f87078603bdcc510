/*
 * clockshim.c: an LD_PRELOAD library that shifts a process's wall clock
 * and can make it run fast or slow.
 *
 * It overrides gettimeofday, time and clock_gettime for CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE. The file named by the environment variable
 * SHIM_OFFSET_FILE holds up to three signed decimal integers:
 *
 *	offset_us [anchor_us rate_ppb]
 *
 * and the process reads, at real wall-clock time t (in µs),
 *
 *	t + offset_us + (t - anchor_us) * (rate_ppb / 1e9 - 1)
 *
 * that is, the clock is offset_us ahead of real time at the real moment
 * anchor_us and from then on runs at rate_ppb / 1e9 seconds per real
 * second. A missing or empty file means no offset; without the last two
 * numbers the rate is 1. The file is read again at most once a
 * millisecond, so a test can step the clock of a running process, or
 * change its rate, by rewriting it (atomically, with a rename); a new rate
 * anchored at the moment of the rewrite, with the offset the clock had
 * then, changes the rate without a step.
 *
 * Monotonic clocks are left alone, as a real clock step leaves them.
 * Redis 7.0 reads the wall clock (gettimeofday) for key expiry, TIME and
 * its uptime, and the monotonic clock only to pace its timers and to time
 * commands, so a rate set here changes how long a key lives in real time.
 *
 * Only system calls that are safe in a signal handler are used (open,
 * read, close), because a process may read its clock in one; for the same
 * reason a reader never waits for the thread that re-reads the file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
/*
 * The path is copied: redis-server reuses the memory of its environment
 * for its process title, after constructors have run.
 */
static char offset_path[4096];

/* params is one reading of the file. */
struct params {
	long long offset_us;
	long long anchor_us;
	long long rate_ppb;
};

/*
 * Two slots: the one numbered gen & 1 is current and never written while
 * it is; the thread that re-reads the file fills the other one and then
 * increments gen. A reader that sees gen unchanged after copying a slot
 * has a consistent copy.
 */
static struct params slots[2] = {{0, 0, 1000000000LL}, {0, 0, 1000000000LL}};
static unsigned long gen;
static int refreshing;         /* 1 while a thread re-reads the file */
static long long next_read_ns; /* monotonic time of the next read */

__attribute__((constructor)) static void shim_init(void)
{
	const char *p = getenv("SHIM_OFFSET_FILE");
	size_t i;
	real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	for (i = 0; p && p[i] && i < sizeof offset_path - 1; i++)
		offset_path[i] = p[i];
	offset_path[i] = '\0';
}

/*
 * parse reads the next signed decimal integer from *s into *v and moves *s
 * past it. It returns 0 when there is none.
 */
static int parse(const char **s, long long *v)
{
	const char *p = *s;
	long long n = 0;
	int neg = 0, digits = 0;
	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	for (; *p >= '0' && *p <= '9'; p++, digits++)
		n = n * 10 + (*p - '0');
	*s = p;
	*v = neg ? -n : n;
	return digits > 0;
}

/* refresh reads the file again if a millisecond has passed since the last read. */
static void refresh(void)
{
	struct timespec m;
	struct params p = {0, 0, 1000000000LL};
	char buf[96];
	const char *s = buf;
	long long now;
	ssize_t n;
	int fd;
	real_clock_gettime(CLOCK_MONOTONIC, &m);
	now = (long long)m.tv_sec * 1000000000LL + m.tv_nsec;
	if (now < __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED))
		return;
	if (__atomic_exchange_n(&refreshing, 1, __ATOMIC_ACQUIRE))
		return; /* another thread, or the code this signal interrupted, is at it */
	__atomic_store_n(&next_read_ns, now + 1000000LL, __ATOMIC_RELAXED);
	fd = open(offset_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		unsigned long g = __atomic_load_n(&gen, __ATOMIC_RELAXED);
		struct params *next = &slots[(g + 1) & 1];
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		parse(&s, &p.offset_us);
		if (parse(&s, &p.anchor_us) && !parse(&s, &p.rate_ppb))
			p.rate_ppb = 1000000000LL;
		if (p.rate_ppb <= 0)
			p.rate_ppb = 1000000000LL;
		__atomic_store_n(&next->offset_us, p.offset_us, __ATOMIC_RELAXED);
		__atomic_store_n(&next->anchor_us, p.anchor_us, __ATOMIC_RELAXED);
		__atomic_store_n(&next->rate_ppb, p.rate_ppb, __ATOMIC_RELAXED);
		__atomic_store_n(&gen, g + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&refreshing, 0, __ATOMIC_RELEASE);
}

/* current returns a consistent copy of the current parameters. */
static struct params current(void)
{
	struct params p;
	unsigned long g;
	do {
		g = __atomic_load_n(&gen, __ATOMIC_ACQUIRE);
		p.offset_us = __atomic_load_n(&slots[g & 1].offset_us, __ATOMIC_RELAXED);
		p.anchor_us = __atomic_load_n(&slots[g & 1].anchor_us, __ATOMIC_RELAXED);
		p.rate_ppb = __atomic_load_n(&slots[g & 1].rate_ppb, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&gen, __ATOMIC_RELAXED) != g);
	return p;
}

/* shift returns how far the process's wall clock is from the real one, in ns, at real time real_ns. */
static long long shift(long long real_ns)
{
	struct params p;
	long long d;
	if (!real_clock_gettime || !offset_path[0])
		return 0;
	refresh();
	p = current();
	d = p.offset_us * 1000LL;
	if (p.rate_ppb != 1000000000LL)
		d += (long long)((double)(real_ns - p.anchor_us * 1000LL) * ((double)(p.rate_ppb - 1000000000LL) / 1e9));
	return d;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	long long ns;
	int r;
	if (!real_clock_gettime)
		shim_init();
	r = real_clock_gettime(clk, ts);
	if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
		ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
		ns += shift(ns);
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
		if (ts->tv_nsec < 0) {
			ts->tv_sec--;
			ts->tv_nsec += 1000000000LL;
		}
	}
	return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;
	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
