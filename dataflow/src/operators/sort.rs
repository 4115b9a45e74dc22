//! Sorting a stream that may not fit in memory, then walking it in order once it is complete.
//!
//! Several stages of a batch job group records by a key once every record has arrived:
//! exact duplicates by their content key, repeated ids by their hash. The simple version
//! is [`CollectComplete`](super::CollectComplete) with a `Vec`, sorted in `finish`: it holds
//! every record at once, and gives every result in one activation, so that timely's queues
//! hold all of them too before the next operator runs. [`SortComplete`] bounds both:
//!
//! * the records go into an [`ExternalSort`], which keeps its budget in memory and writes
//!   sorted runs to local disk beyond it;
//! * once the input is complete, the merged runs are walked in order, at most
//!   [`SORT_CHUNK`] records per activation (the operator asks to be scheduled again), so the
//!   operators downstream take each chunk before the next is given.
//!
//! `each` sees every record in order with a state of its own (a group being folded, say),
//! and `end` sees the state once after the last; both give to two outputs at the
//! operator's first time. `absorb` may give records to the first output at once, and keep
//! back from the sort whatever it removes from the batch. A failed write or read of a run
//! (a full disk) goes to `fail`, once, and the operator stops: no partial result follows.
//!
//! ```
//! use timely::dataflow::channels::pact::Pipeline;
//! use timely::dataflow::operators::{Capture, ToStream};
//! use timely::dataflow::operators::capture::Extract;
//! use neardup_dataflow::operators::SortComplete;
//! use neardup_io::spill::ExternalSort;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let runs = dir.path().join("runs");
//! let captured = timely::example(move |scope| {
//!     let (sums, _none) = (0u64..100)
//!         .map(|x| (x % 3, x))
//!         .to_stream(scope)
//!         .container::<Vec<_>>()
//!         .sort_complete_split(
//!             Pipeline,
//!             "SumByKey",
//!             // 16 bytes of memory: runs of one record each, on disk.
//!             ExternalSort::<(u64, u64)>::new(runs, 16),
//!             None::<(u64, u64)>,
//!             // Odd numbers skip the sort, given at once; the rest sort by (key, x).
//!             |data, sums| data.retain(|&(_, x)| x % 2 == 0 || { sums.give(x); false }),
//!             // Even numbers summed by key, as the merge walks them in order.
//!             |group, (key, x), sums, _: &mut neardup_dataflow::operators::collect::Give<_, ()>| {
//!                 match group {
//!                     Some((k, sum)) if *k == key => *sum += x,
//!                     _ => if let Some((_, sum)) = group.replace((key, x)) { sums.give(sum) },
//!                 }
//!             },
//!             |group, _stats, sums, _| sums.give(group.expect("records").1),
//!             |e| panic!("{e}"),
//!         );
//!     sums.capture()
//! });
//! let mut sums: Vec<u64> = captured.extract().into_iter().flat_map(|(_, d)| d).collect();
//! sums.sort();
//! let by_key = |k| (0..100u64).filter(|x| x % 2 == 0 && x % 3 == k).sum::<u64>();
//! let mut expected: Vec<u64> = (0..3).map(by_key).collect();
//! expected.extend((0..100u64).filter(|x| x % 2 == 1));
//! expected.sort();
//! assert_eq!(sums, expected);
//! ```

use std::io;

use neardup_io::spill::{ExternalSort, Merged, SortStats, SpillRecord};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;

use super::collect::Give;

/// Orders a record type by a key of it: `PartialEq`, `Eq`, `PartialOrd` and `Ord` from one
/// expression, as the stages' sort records compare (`ordered_by!(ByPair, |p| (p.0.a,
/// p.0.b))`): records with equal keys are equal for the sort, whatever else they carry.
macro_rules! ordered_by {
    ($t:ty, |$x:ident| $key:expr) => {
        ordered_by!(
            $t,
            cmp | a,
            b | {
                let key = |$x: &$t| $key;
                key(a).cmp(&key(b))
            }
        );
    };
    // The comparison written out, for a key that borrows from the record.
    ($t:ty, cmp |$a:ident, $b:ident| $cmp:expr) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == std::cmp::Ordering::Equal
            }
        }
        impl Eq for $t {}
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for $t {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                let ($a, $b) = (self, other);
                $cmp
            }
        }
    };
}
pub(crate) use ordered_by;

/// Records walked per activation once the input is complete: large enough that the
/// operator's own overhead vanishes, small enough that a chunk of results is a few
/// megabytes in timely's queues.
pub const SORT_CHUNK: usize = 1 << 16;

/// Sorts a stream within a memory budget and walks it in order (see the module docs).
pub trait SortComplete<'s, T: Timestamp, D> {
    /// Sorts every record `absorb` leaves in its batch with `sort` (as an `R`, the record
    /// with the order to sort by); once the input is complete, calls `each` on every record
    /// in order and then `end` once (with what the sort did), giving to two outputs at the operator's first time.
    /// `fail`: a run could not be written or read.
    #[allow(clippy::too_many_arguments)]
    fn sort_complete_split<R, O1, O2, S, P>(
        self,
        pact: P,
        name: &str,
        sort: ExternalSort<R>,
        state: S,
        absorb: impl FnMut(&mut Vec<D>, &mut Give<'_, '_, T, O1, InputCapability<T>>) + 'static,
        each: impl FnMut(&mut S, R, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
        end: impl FnOnce(S, SortStats, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
        fail: impl FnMut(io::Error) + 'static,
    ) -> (StreamVec<'s, T, O1>, StreamVec<'s, T, O2>)
    where
        R: SpillRecord + From<D> + 'static,
        O1: Clone + 'static,
        O2: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>;
}

/// Where the operator stands.
enum Phase<T: Timestamp, D, S, E> {
    /// Records arrive and are sorted.
    Sorting(Vec<Capability<T>>, ExternalSort<D>, S, E),
    /// The input is complete: the merge is walked, a chunk per activation.
    Walking(Vec<Capability<T>>, Merged<D>, S, E),
    /// Every record walked (or a run failed): the capabilities are dropped.
    Done,
}

impl<'s, T: Timestamp, D: Clone + 'static> SortComplete<'s, T, D> for StreamVec<'s, T, D> {
    fn sort_complete_split<R, O1, O2, S, P>(
        self,
        pact: P,
        name: &str,
        sort: ExternalSort<R>,
        state: S,
        mut absorb: impl FnMut(&mut Vec<D>, &mut Give<'_, '_, T, O1, InputCapability<T>>) + 'static,
        mut each: impl FnMut(&mut S, R, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
        end: impl FnOnce(S, SortStats, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
        mut fail: impl FnMut(io::Error) + 'static,
    ) -> (StreamVec<'s, T, O1>, StreamVec<'s, T, O2>)
    where
        R: SpillRecord + From<D> + 'static,
        O1: Clone + 'static,
        O2: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>,
    {
        let scope = self.scope();
        let mut builder = OperatorBuilder::new(name.to_owned(), self.scope());
        let activator = scope.activator_for(builder.operator_info().address);
        let mut input = builder.new_input(self, pact);
        let (first, first_stream) = builder.new_output::<Vec<O1>>();
        let (second, second_stream) = builder.new_output::<Vec<O2>>();
        let mut first = OutputBuilder::<_, CapacityContainerBuilder<Vec<O1>>>::from(first);
        let mut second = OutputBuilder::<_, CapacityContainerBuilder<Vec<O2>>>::from(second);
        builder.build(move |capabilities| {
            let mut phase = Phase::Sorting(capabilities, sort, state, end);
            move |frontiers| {
                let mut first = first.activate();
                let mut second = second.activate();
                input.for_each(|time, data| {
                    absorb(data, &mut first.session(&time));
                    if let Phase::Sorting(_, sort, _, _) = &mut phase {
                        for record in data.drain(..) {
                            if let Err(e) = sort.push(R::from(record)) {
                                fail(e);
                                phase = Phase::Done;
                                break;
                            }
                        }
                    }
                });
                if !frontiers[0].is_empty() {
                    return;
                }
                phase = match std::mem::replace(&mut phase, Phase::Done) {
                    Phase::Sorting(caps, sort, state, end) => match sort.finish() {
                        Ok(merged) => Phase::Walking(caps, merged, state, end),
                        Err(e) => {
                            fail(e);
                            Phase::Done
                        }
                    },
                    other => other,
                };
                let Phase::Walking(caps, merged, state, _) = &mut phase else {
                    return;
                };
                let (mut one, mut two) = (first.session(&caps[0]), second.session(&caps[1]));
                for _ in 0..SORT_CHUNK {
                    match merged.next() {
                        Some(Ok(record)) => each(state, record, &mut one, &mut two),
                        Some(Err(e)) => {
                            fail(e);
                            drop((one, two));
                            phase = Phase::Done;
                            return;
                        }
                        None => {
                            drop((one, two));
                            if let Phase::Walking(caps, merged, state, end) =
                                std::mem::replace(&mut phase, Phase::Done)
                            {
                                end(
                                    state,
                                    merged.stats(),
                                    &mut first.session(&caps[0]),
                                    &mut second.session(&caps[1]),
                                );
                            }
                            return;
                        }
                    }
                }
                activator.activate();
            }
        });
        (first_stream, second_stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::{Input, Inspect, Probe};
    use timely::dataflow::ProbeHandle;

    /// Every record comes out in order, whatever the budget (in memory, or in runs on
    /// disk); `end` runs once, after the last, with what the sort did.
    #[test]
    fn records_are_walked_in_order_whatever_the_budget() {
        // Runs of 1,000 records (some merged early: more than the fan-in), of 64,000, and
        // none.
        for budget in [16_000usize, 1 << 20, 1 << 30] {
            let dir = tempfile::tempdir().unwrap();
            let runs = dir.path().join("runs");
            let seen = Arc::new(Mutex::new(Vec::new()));
            let n = 3 * SORT_CHUNK as u64 + 17;
            let out = seen.clone();
            timely::execute_directly(move |worker| {
                let probe = ProbeHandle::new();
                let mut input = worker.dataflow::<u64, _, _>(|scope| {
                    let (input, stream) = scope.new_input::<Vec<(u64, u64)>>();
                    let (walked, ends) = stream.sort_complete_split(
                        Pipeline,
                        "Walk",
                        ExternalSort::<(u64, u64)>::new(runs.clone(), budget),
                        0u64,
                        |_, _: &mut Give<'_, '_, u64, (u64, u64), InputCapability<u64>>| {},
                        |count, r, give, _| {
                            *count += 1;
                            give.give(r)
                        },
                        move |count, stats, _, ends| {
                            assert_eq!(stats.records, n);
                            assert_eq!(stats.runs > 0, budget < 16 * n as usize);
                            ends.give(count)
                        },
                        |e| panic!("{e}"),
                    );
                    let out = out.clone();
                    walked
                        .inspect(move |&r| out.lock().unwrap().push(r))
                        .probe_with(&probe);
                    ends.inspect(move |&count| assert_eq!(count, n, "end after the last"))
                        .probe_with(&probe);
                    input
                });
                for i in 0..n {
                    input.send((neardup_core::mix::mix64(i) % 100, i));
                }
                input.close();
                worker.step_while(|| !probe.done());
            });
            let seen = seen.lock().unwrap();
            let mut simple: Vec<(u64, u64)> = (0..n)
                .map(|i| (neardup_core::mix::mix64(i) % 100, i))
                .collect();
            simple.sort();
            assert_eq!(*seen, simple, "budget {budget}");
            assert_eq!(
                std::fs::read_dir(dir.path().join("runs")).map_or(0, |d| d.count()),
                0
            );
        }
    }
}
