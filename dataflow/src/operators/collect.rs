//! Collecting a stream until it is complete, then acting once on all of it.
//!
//! Most stages of a batch job cannot decide anything until every record has arrived: the
//! captures of one URL, the forests of every worker, the anchors of one hash. Each worker's
//! operator therefore folds what arrives into some state, holds its first capability, and
//! once its input frontier is empty (every worker's input finished, so nothing more can
//! come) uses the state once, giving its results at the held time and then dropping the
//! capability. Written out, that is a capability in an `Option`, a `frontier.is_empty()`
//! test and a `take()` in every such stage; [`CollectComplete`] is that pattern, once.
//!
//! The state is a plain value the operator owns: `absorb` adds each batch to it as it
//! arrives (in arrival order, at any time), and `finish` consumes it, so whatever the state
//! holds is freed as soon as the results are given. Three shapes share the idea:
//!
//! * [`CollectComplete::collect_complete`]: one input, one output;
//! * [`CollectComplete::collect_complete_with`]: two inputs folded into one state, finished
//!   once both are complete (a join of everything with everything, such as hosts with pairs);
//! * [`CollectComplete::collect_complete_split`]: one input, two outputs, the first of which
//!   may also be given records at once, at their own time, as batches arrive (a fold that lets
//!   the records with nothing to wait for go on).
//!
//! An operator with no results at the end (a writer of parts, a counter into the report)
//! is `collect_complete` with an output of `()` that is never given.
//!
//! ```
//! use timely::dataflow::channels::pact::Pipeline;
//! use timely::dataflow::operators::{Capture, ToStream};
//! use timely::dataflow::operators::capture::Extract;
//! use neardup_dataflow::operators::CollectComplete;
//!
//! let captured = timely::example(|scope| {
//!     (0u64..10)
//!         .to_stream(scope)
//!         .container::<Vec<_>>()
//!         // The sum and count of everything, once all of it has arrived.
//!         .collect_complete(
//!             Pipeline,
//!             "SumAll",
//!             (0u64, 0u64),
//!             |(sum, count), data| {
//!                 *sum += data.iter().sum::<u64>();
//!                 *count += data.len() as u64;
//!             },
//!             |(sum, count), give| give.give((sum, count)),
//!         )
//!         .capture()
//! });
//! let results: Vec<(u64, u64)> = captured.extract().into_iter().flat_map(|(_, d)| d).collect();
//! assert_eq!(results, [(45, 10)]);
//! ```

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::{Operator, OutputBuilder, Session};
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;

/// Where an operator of this module gives its records: a session of one output at one time,
/// the held capability's unless `C` says otherwise.
pub type Give<'a, 'b, T, O, C = Capability<T>> =
    Session<'a, 'b, T, CapacityContainerBuilder<Vec<O>>, C>;

/// Folds a stream into a state, and uses the state once the stream is complete (see the
/// module docs).
pub trait CollectComplete<'s, T: Timestamp, D> {
    /// Adds every batch to `state` with `absorb`; once the input is complete, calls `finish`
    /// once with the state and the output at the operator's first time.
    fn collect_complete<O, S, P>(
        self,
        pact: P,
        name: &str,
        state: S,
        absorb: impl FnMut(&mut S, &mut Vec<D>) + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O>) + 'static,
    ) -> StreamVec<'s, T, O>
    where
        O: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>;

    /// As [`collect_complete`](CollectComplete::collect_complete), with a second input
    /// folded into the same state by `absorb_other`; `finish` runs once both inputs are
    /// complete.
    #[allow(clippy::too_many_arguments)]
    fn collect_complete_with<D2, O, S, P, P2>(
        self,
        other: StreamVec<'s, T, D2>,
        pact: P,
        other_pact: P2,
        name: &str,
        state: S,
        absorb: impl FnMut(&mut S, &mut Vec<D>) + 'static,
        absorb_other: impl FnMut(&mut S, &mut Vec<D2>) + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O>) + 'static,
    ) -> StreamVec<'s, T, O>
    where
        D2: Clone + 'static,
        O: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>,
        P2: ParallelizationContract<T, Vec<D2>>;

    /// As [`collect_complete`](CollectComplete::collect_complete), with two outputs:
    /// `absorb` may give records to the first at once, at the batch's own time, and
    /// `finish` gives to both at the operator's first time.
    fn collect_complete_split<O1, O2, S, P>(
        self,
        pact: P,
        name: &str,
        state: S,
        absorb: impl FnMut(&mut S, &mut Vec<D>, &mut Give<'_, '_, T, O1, InputCapability<T>>) + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
    ) -> (StreamVec<'s, T, O1>, StreamVec<'s, T, O2>)
    where
        O1: Clone + 'static,
        O2: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>;
}

impl<'s, T: Timestamp, D: Clone + 'static> CollectComplete<'s, T, D> for StreamVec<'s, T, D> {
    fn collect_complete<O, S, P>(
        self,
        pact: P,
        name: &str,
        state: S,
        mut absorb: impl FnMut(&mut S, &mut Vec<D>) + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O>) + 'static,
    ) -> StreamVec<'s, T, O>
    where
        O: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>,
    {
        self.unary_frontier(pact, name, move |cap, _| {
            // The capability and the state until the input is complete, then nothing.
            let mut held = Some((cap, state, finish));
            move |(input, frontier), output| {
                input.for_each(|_, data| {
                    if let Some((_, state, _)) = held.as_mut() {
                        absorb(state, data);
                    }
                });
                if frontier.is_empty() {
                    if let Some((cap, state, finish)) = held.take() {
                        finish(state, &mut output.session(&cap));
                    }
                }
            }
        })
    }

    fn collect_complete_with<D2, O, S, P, P2>(
        self,
        other: StreamVec<'s, T, D2>,
        pact: P,
        other_pact: P2,
        name: &str,
        state: S,
        mut absorb: impl FnMut(&mut S, &mut Vec<D>) + 'static,
        mut absorb_other: impl FnMut(&mut S, &mut Vec<D2>) + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O>) + 'static,
    ) -> StreamVec<'s, T, O>
    where
        D2: Clone + 'static,
        O: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>,
        P2: ParallelizationContract<T, Vec<D2>>,
    {
        self.binary_frontier::<_, CapacityContainerBuilder<Vec<O>>, _, _, _, _>(
            other,
            pact,
            other_pact,
            name,
            move |cap, _| {
                let mut held = Some((cap, state, finish));
                move |(input, frontier), (other, other_frontier), output| {
                    input.for_each(|_, data| {
                        if let Some((_, state, _)) = held.as_mut() {
                            absorb(state, data);
                        }
                    });
                    other.for_each(|_, data| {
                        if let Some((_, state, _)) = held.as_mut() {
                            absorb_other(state, data);
                        }
                    });
                    if frontier.is_empty() && other_frontier.is_empty() {
                        if let Some((cap, state, finish)) = held.take() {
                            finish(state, &mut output.session(&cap));
                        }
                    }
                }
            },
        )
    }

    fn collect_complete_split<O1, O2, S, P>(
        self,
        pact: P,
        name: &str,
        state: S,
        mut absorb: impl FnMut(&mut S, &mut Vec<D>, &mut Give<'_, '_, T, O1, InputCapability<T>>)
            + 'static,
        finish: impl FnOnce(S, &mut Give<'_, '_, T, O1>, &mut Give<'_, '_, T, O2>) + 'static,
    ) -> (StreamVec<'s, T, O1>, StreamVec<'s, T, O2>)
    where
        O1: Clone + 'static,
        O2: Clone + 'static,
        S: 'static,
        P: ParallelizationContract<T, Vec<D>>,
    {
        let mut builder = OperatorBuilder::new(name.to_owned(), self.scope());
        let mut input = builder.new_input(self, pact);
        let (first, first_stream) = builder.new_output::<Vec<O1>>();
        let (second, second_stream) = builder.new_output::<Vec<O2>>();
        let mut first = OutputBuilder::<_, CapacityContainerBuilder<Vec<O1>>>::from(first);
        let mut second = OutputBuilder::<_, CapacityContainerBuilder<Vec<O2>>>::from(second);
        builder.build(move |capabilities| {
            // One capability for each output, held until the input is complete.
            let mut held = Some((capabilities, state, finish));
            move |frontiers| {
                let mut first = first.activate();
                let mut second = second.activate();
                input.for_each(|time, data| {
                    if let Some((_, state, _)) = held.as_mut() {
                        absorb(state, data, &mut first.session(&time));
                    }
                });
                if frontiers[0].is_empty() {
                    if let Some((capabilities, state, finish)) = held.take() {
                        finish(
                            state,
                            &mut first.session(&capabilities[0]),
                            &mut second.session(&capabilities[1]),
                        );
                    }
                }
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
    use timely::progress::Stamp;

    type Seen = Arc<Mutex<Vec<(&'static str, u64, u64)>>>;

    /// What `inspect_core` shows: a batch at its time, or a new frontier.
    type Event<'a, 'b, 'c> = Result<(&'a Stamp<u64>, &'b Vec<u64>), &'c [u64]>;

    /// Notes each record of a stream with `tag` and its time.
    fn record(tag: &'static str, out: &Seen) -> impl for<'a, 'b, 'c> FnMut(Event<'a, 'b, 'c>) {
        let out = out.clone();
        move |event| {
            if let Ok((stamp, data)) = event {
                let t = *stamp.expect_singleton();
                out.lock()
                    .unwrap()
                    .extend(data.iter().map(|&d| (tag, t, d)));
            }
        }
    }

    /// Records given by `finish` come once, after every batch at every time, at the first
    /// time; `absorb` sees every record; a record given at once by the split form keeps its
    /// own time.
    #[test]
    fn finish_runs_once_after_every_batch_at_the_first_time() {
        let seen: Seen = Arc::default();
        let out = seen.clone();
        timely::execute_directly(move |worker| {
            let out = out.clone();
            let probe = ProbeHandle::new();
            let (mut a, mut b) = worker.dataflow::<u64, _, _>(|scope| {
                let (a, left) = scope.new_input::<Vec<u64>>();
                let (b, right) = scope.new_input::<Vec<u64>>();
                left.clone()
                    .collect_complete(
                        Pipeline,
                        "Sum",
                        0u64,
                        |sum, data| *sum += data.iter().sum::<u64>(),
                        |sum, give| give.give(sum),
                    )
                    .inspect_core(record("sum", &out))
                    .probe_with(&probe);
                left.clone()
                    .collect_complete_with(
                        right,
                        Pipeline,
                        Pipeline,
                        "Both",
                        (0u64, 0u64),
                        |(l, _), data| *l += data.len() as u64,
                        |(_, r), data| *r += data.len() as u64,
                        |(l, r), give| give.give(l * 100 + r),
                    )
                    .inspect_core(record("both", &out))
                    .probe_with(&probe);
                let (now, later) = left.collect_complete_split(
                    Pipeline,
                    "Split",
                    Vec::new(),
                    |held: &mut Vec<u64>, data, give| {
                        for d in data.drain(..) {
                            if d % 2 == 0 {
                                give.give(d);
                            } else {
                                held.push(d);
                            }
                        }
                    },
                    |held, first, second| {
                        first.give(1000);
                        second.give_iterator(held.into_iter());
                    },
                );
                now.inspect_core(record("now", &out)).probe_with(&probe);
                later.inspect_core(record("later", &out)).probe_with(&probe);
                (a, b)
            });
            for t in 0..3u64 {
                a.advance_to(t);
                b.advance_to(t);
                a.send(t * 2);
                a.send(t * 2 + 1);
                b.send(t);
                worker.step();
            }
            a.close();
            b.close();
            worker.step_while(|| !probe.done());
        });
        let mut seen = std::mem::take(&mut *seen.lock().unwrap());
        seen.sort();
        assert_eq!(
            seen,
            [
                ("both", 0, 603),
                ("later", 0, 1),
                ("later", 0, 3),
                ("later", 0, 5),
                ("now", 0, 0),
                ("now", 0, 1000),
                ("now", 1, 2),
                ("now", 2, 4),
                ("sum", 0, 15),
            ]
        );
    }
}
