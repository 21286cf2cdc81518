//! Work over consecutive chunks of a list on a few threads, results in the list's order: how a
//! large catalog renders its tools' entries on more than one core. Threads claim chunks one at a
//! time, so a thread that gets no core leaves its share to the others; and a helper thread is
//! only started for a core that is idle right now (on a machine whose cores are all busy, a
//! helper competes with the caller for the same time and the work came out slower).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// How a list is cut and how many threads work on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split {
    /// Items per chunk (the last may be shorter).
    pub chunk: usize,
    /// Threads, the calling one included.
    pub workers: usize,
}

impl Split {
    /// One chunk on the calling thread.
    pub fn sequential(len: usize) -> Self {
        Self { chunk: len.max(1), workers: 1 }
    }

    /// A split of `len` items for this machine now: on the calling thread alone below `min_len`
    /// items or when no other core is idle, else on up to `max_workers` threads (the caller and
    /// one per idle core), the items cut into about `chunks_per_worker` chunks per thread (more
    /// chunks even out a thread that starts late or runs slower; each chunk costs a little to
    /// start and to join).
    pub fn for_machine(len: usize, min_len: usize, max_workers: usize, chunks_per_worker: usize) -> Self {
        if len < min_len || max_workers <= 1 || cores() == 1 {
            return Self::sequential(len);
        }
        let workers = (1 + idle_cores()).min(max_workers);
        if workers == 1 {
            return Self::sequential(len);
        }
        Self { chunk: len.div_ceil(workers * chunks_per_worker.max(1)).max(1), workers }
    }
}

/// Cores with nothing to run at this moment, besides the calling thread's: Linux's count of
/// runnable tasks (`/proc/loadavg`'s fourth field, `running/total`, the caller among them)
/// against [`cores`]. Where that count cannot be read, every other core counts as idle.
fn idle_cores() -> usize {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    idle_of(&loadavg, cores())
}

/// [`idle_cores`] from the text of `/proc/loadavg`.
fn idle_of(loadavg: &str, cores: usize) -> usize {
    let running = loadavg.split_whitespace().nth(3).and_then(|f| f.split_once('/')).and_then(|(r, _)| r.parse().ok());
    match running {
        Some(running) => cores.saturating_sub(usize::max(running, 1)),
        None => cores.saturating_sub(1),
    }
}

/// The cores this process may use, asked once (`available_parallelism` reads the affinity mask
/// and cgroup quota files on every call).
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// `work(chunk, state)` over `items` cut into chunks of `split.chunk`, on up to `split.workers`
/// threads (the calling one among them), each thread with its own `state`; the results in the
/// chunks' order. The first error in that order is returned (chunks after an error are not
/// started; every chunk before it has been, since chunks are claimed in order). A panic in
/// `work` is resumed on the calling thread.
pub(crate) fn map_chunks<T, S, R, E>(
    mut items: Vec<T>,
    split: Split,
    work: impl Fn(Vec<T>, &mut S) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Send,
    S: Default,
    R: Send,
    E: Send,
{
    let chunk = split.chunk.max(1);
    let count = items.len().div_ceil(chunk);
    let workers = split.workers.clamp(1, count.max(1));
    if count <= 1 {
        return Ok(vec![work(items, &mut S::default())?]);
    }
    // Cut from the back, so that each item moves once.
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(count);
    for start in (0..count).rev().map(|c| c * chunk) {
        chunks.push(items.split_off(start));
    }
    chunks.reverse();
    if workers == 1 {
        let mut state = S::default();
        return chunks.into_iter().map(|c| work(c, &mut state)).collect();
    }
    let chunks: Vec<Mutex<Vec<T>>> = chunks.into_iter().map(Mutex::new).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let run = || {
        let mut state = S::default();
        let mut done: Vec<(usize, Result<R, E>)> = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let c = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = chunks.get(c) else { break };
            let taken = std::mem::take(&mut *slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            let result = work(taken, &mut state);
            if result.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            done.push((c, result));
        }
        done
    };
    let mut done = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers).map(|_| scope.spawn(run)).collect();
        let mut done = run();
        for helper in helpers {
            match helper.join() {
                Ok(theirs) => done.extend(theirs),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        done
    });
    done.sort_unstable_by_key(|(c, _)| *c);
    done.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the split, the chunks cover the items in order, each once.
    #[test]
    fn chunks_come_back_in_order() {
        let items: Vec<usize> = (0..1000).collect();
        for (chunk, workers) in [(1000, 1), (7, 1), (1, 2), (7, 2), (64, 3), (999, 2), (2000, 4)] {
            let out = map_chunks(items.clone(), Split { chunk, workers }, |c: Vec<usize>, seen: &mut usize| {
                *seen += c.len();
                Ok::<_, ()>(c)
            })
            .unwrap();
            assert_eq!(out.concat(), items, "chunk {chunk}, workers {workers}");
            assert!(out.iter().all(|c| c.len() <= chunk && !c.is_empty()), "chunk {chunk}");
        }
        let none = map_chunks(Vec::<u8>::new(), Split { chunk: 4, workers: 2 }, |c, _: &mut ()| Ok::<_, ()>(c));
        assert_eq!(none.unwrap(), vec![Vec::<u8>::new()], "an empty list is one empty chunk");
    }

    /// The error returned is the first in the items' order, even when a later chunk failed first.
    #[test]
    fn first_error_in_order_wins() {
        let items: Vec<usize> = (0..400).collect();
        for workers in [1, 2, 4] {
            let out = map_chunks(items.clone(), Split { chunk: 10, workers }, |c: Vec<usize>, _: &mut ()| {
                if c[0] == 350 {
                    return Err(350);
                }
                if c[0] == 120 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    return Err(120);
                }
                Ok(c.len())
            });
            assert_eq!(out, Err(120), "workers {workers}");
        }
    }

    /// Idle cores are the cores minus the runnable tasks, the caller among them.
    #[test]
    fn idle_cores_from_the_runnable_count() {
        assert_eq!(idle_of("0.10 0.20 0.30 1/150 4242\n", 2), 1);
        assert_eq!(idle_of("2.50 2.40 2.00 3/152 4242\n", 2), 0);
        assert_eq!(idle_of("2.50 2.40 2.00 2/152 4242\n", 2), 0);
        assert_eq!(idle_of("1.00 1.00 1.00 2/152 4242\n", 8), 6);
        assert_eq!(idle_of("0.00 0.00 0.00 0/10 1\n", 4), 3, "the caller runs, whatever was read");
        assert_eq!(idle_of("", 4), 3, "unreadable: every other core");
        assert_eq!(idle_of("1 2 3 x/y 5", 2), 1);
    }

    #[test]
    fn small_lists_stay_on_the_calling_thread() {
        assert_eq!(Split::for_machine(10, 100, 4, 8), Split::sequential(10));
        let big = Split::for_machine(10_000, 100, 2, 8);
        assert!(big.workers <= 2 && big.chunk * big.workers * 8 >= 10_000);
    }
}
