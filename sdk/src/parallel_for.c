/* parallel_for.c — a persistent pthread pool for CPU kernels (the host API's parallel_for).
 * One job at a time, split statically: part 0 runs on the caller, part i on worker i, so a
 * thread touches the same slice of a tensor call after call and keeps it in its cache. Workers
 * spin briefly before sleeping, because kernels come back to back and waking a sleeping thread
 * costs as much as a 2^16-element kernel. A second caller, or a call from inside a body, finds
 * the pool busy and runs inline, so nested and concurrent use never deadlocks. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "host_services.h"

#define DLOP_MAX_THREADS 1024
/* How long a worker spins before it sleeps, and the caller before it yields: long enough to
 * bridge the gap between consecutive kernels of one graph, short enough not to burn a core
 * when idle. Bounded by time, not by a count of pause instructions, because a pause lasts
 * about 10 cycles on older x86 and about 140 on Skylake and newer (20000 of them: ~1 ms). */
#define DLOP_SPIN_NANOSECONDS 50000
/* Spin iterations between clock reads (a clock read costs about as much as a few pauses). */
#define DLOP_SPIN_CHECK_EVERY 256

typedef struct parallel_job {
  dlop_parallel_body body;
  void *context;
  int64_t count;
  int64_t num_parts; /* part i: [count * i / num_parts, count * (i + 1) / num_parts) */
} parallel_job;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work_ready; /* workers wait for a new generation */
  int started;
  int workers;
  int busy;           /* a caller owns the pool */
  int sleeping;       /* workers waiting on work_ready */
  uint64_t start_generation; /* generation when the workers started: no job for them yet */
  atomic_ullong generation;
  parallel_job job;
  atomic_int parts_left; /* parts of the current job not finished yet */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .work_ready = PTHREAD_COND_INITIALIZER};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int32_t thread_count = 1;

static void count_threads(void) {
  const char *text = getenv("DLOP_NUM_THREADS");
  long value = 0;
  if (text && *text) {
    char *end;
    value = strtol(text, &end, 10);
    if (*end != '\0' || value < 1) {
      dlop__warn("DLOP_NUM_THREADS=\"%s\" is not a positive integer; using the CPU count", text);
      value = 0;
    }
  }
  if (value == 0) value = sysconf(_SC_NPROCESSORS_ONLN);
  if (value < 1) value = 1;
  if (value > DLOP_MAX_THREADS) value = DLOP_MAX_THREADS;
  thread_count = (int32_t)value;
}

int32_t dlop__cpu_threads(void) {
  pthread_once(&threads_once, count_threads);
  return thread_count;
}

static void run_part(const parallel_job *job, int64_t part) {
  if (part >= job->num_parts) return;
  int64_t begin = job->count * part / job->num_parts;
  int64_t end = job->count * (part + 1) / job->num_parts;
  job->body(job->context, begin, end);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static uint64_t monotonic_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Spin budget: spin_expired() is true once DLOP_SPIN_NANOSECONDS have passed since
 * spin_start; it reads the clock only every DLOP_SPIN_CHECK_EVERY calls. */
typedef struct spin_budget {
  uint64_t deadline;
  unsigned calls;
  int expired;
} spin_budget;

static void spin_start(spin_budget *budget) {
  budget->deadline = monotonic_ns() + DLOP_SPIN_NANOSECONDS;
  budget->calls = 0;
  budget->expired = 0;
}

static int spin_expired(spin_budget *budget) {
  if (!budget->expired && ++budget->calls % DLOP_SPIN_CHECK_EVERY == 0)
    budget->expired = monotonic_ns() >= budget->deadline;
  return budget->expired;
}

/* The job is published like a seqlock: generation is odd while the caller writes it and even
 * once it is complete, so a worker that lags a job behind never runs a half-written one. */
static int read_job(uint64_t generation, parallel_job *job) {
  *job = pool.job;
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&pool.generation, memory_order_relaxed) == generation;
}

static void *worker_main(void *argument) {
  int64_t index = (int64_t)(intptr_t)argument; /* runs part index (1-based; part 0 is the caller's) */
  uint64_t seen = pool.start_generation; /* written before this thread was created */
  for (;;) {
    uint64_t generation = atomic_load_explicit(&pool.generation, memory_order_acquire);
    spin_budget budget;
    spin_start(&budget);
    while ((generation == seen || (generation & 1)) && !spin_expired(&budget)) {
      cpu_relax();
      generation = atomic_load_explicit(&pool.generation, memory_order_acquire);
    }
    if (generation == seen) {
      pthread_mutex_lock(&pool.lock);
      pool.sleeping++;
      while ((generation = atomic_load(&pool.generation)) == seen)
        pthread_cond_wait(&pool.work_ready, &pool.lock);
      pool.sleeping--;
      pthread_mutex_unlock(&pool.lock);
    }
    parallel_job job;
    if ((generation & 1) || !read_job(generation, &job)) continue; /* being written: look again */
    seen = generation;
    if (index < job.num_parts) {
      run_part(&job, index);
      atomic_fetch_sub_explicit(&pool.parts_left, 1, memory_order_acq_rel);
    }
  }
  return NULL;
}

/* fork() while another thread holds pool.lock would copy a locked mutex, and a job is
 * published (generation odd, then even) only under the lock: holding the lock across fork
 * means the child never sees a lock held by a thread it lacks, nor a half-published job. */
static void lock_before_fork(void) { pthread_mutex_lock(&pool.lock); }
static void unlock_after_fork_in_parent(void) { pthread_mutex_unlock(&pool.lock); }

/* In a forked child only the forking thread exists: forget the parent's workers and any job
 * they were running (its caller, if it was another thread, does not exist here either). */
static void reset_after_fork(void) {
  pthread_mutex_init(&pool.lock, NULL);
  pthread_cond_init(&pool.work_ready, NULL);
  pool.started = 0;
  pool.workers = 0;
  pool.busy = 0;
  pool.sleeping = 0;
  /* Even: no job being written (the parity check would be inverted otherwise). */
  uint64_t generation = atomic_load(&pool.generation);
  atomic_store(&pool.generation, (generation + 1) & ~(uint64_t)1);
  atomic_store(&pool.parts_left, 0);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) {
  pthread_atfork(lock_before_fork, unlock_after_fork_in_parent, reset_after_fork);
}

/* Start the workers once (lock held). Fewer start if the system refuses threads. */
static void start_workers_locked(int wanted) {
  pool.started = 1;
  pool.start_generation = atomic_load(&pool.generation);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < wanted; i++) {
    pthread_t thread;
    if (pthread_create(&thread, &attributes, worker_main, (void *)(intptr_t)(i + 1)) != 0) break;
    pool.workers++;
  }
  pthread_attr_destroy(&attributes);
}

int dlop__parallel_for(int64_t count, int64_t grain, dlop_parallel_body body, void *context) {
  if (body == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "parallel_for: body is NULL");
  if (count < 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "parallel_for: count %lld is negative",
                       (long long)count);
  if (count == 0) return DLOP_OK;
  if (grain < 1) grain = 1;
  int32_t threads = dlop__cpu_threads();
  if (threads <= 1 || count < 2 * grain) {
    body(context, 0, count);
    return DLOP_OK;
  }
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&pool.lock);
  if (pool.busy) { /* another caller, or we are inside a body: run here */
    pthread_mutex_unlock(&pool.lock);
    body(context, 0, count);
    return DLOP_OK;
  }
  if (!pool.started) start_workers_locked(threads - 1);
  pool.busy = 1;
  /* One part per thread, each at least grain long; parts beyond the workers that started
   * run on the caller. */
  int64_t parts = count / grain;
  if (parts > pool.workers + 1) parts = pool.workers + 1;
  if (parts < 1) parts = 1;
  atomic_store(&pool.parts_left, (int)parts - 1);
  atomic_fetch_add_explicit(&pool.generation, 1, memory_order_acq_rel); /* odd: writing */
  atomic_thread_fence(memory_order_release);
  pool.job = (parallel_job){body, context, count, parts};
  atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release); /* even: ready */
  if (pool.sleeping > 0) pthread_cond_broadcast(&pool.work_ready);
  parallel_job job = pool.job;
  pthread_mutex_unlock(&pool.lock);

  run_part(&job, 0);
  /* Workers each run one part; wait for them, politely if one was descheduled. */
  spin_budget budget;
  spin_start(&budget);
  while (atomic_load_explicit(&pool.parts_left, memory_order_acquire) > 0) {
    if (!spin_expired(&budget)) cpu_relax();
    else sched_yield();
  }

  pthread_mutex_lock(&pool.lock);
  pool.busy = 0;
  pthread_mutex_unlock(&pool.lock);
  return DLOP_OK;
}
