//! Several timely "processes" as threads of this test, over real loopback TCP (serialization,
//! the start-up handshake and the heartbeat included): the outputs equal a single worker's.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{read_clusters, read_pairs, PairSet};
use neardup_dataflow::control::ControlConfig;
use neardup_dataflow::{run_job, JobConfig, JobInput, KeepPolicy, Parallelism, Progress};
use neardup_io::input::expand_inputs;
use neardup_io::record::FieldSpec;

fn free_ports(n: usize) -> Vec<String> {
    // Hold all listeners until every port is chosen, so they differ.
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect()
}

fn corpus() -> Option<PathBuf> {
    common::shared_corpus("dev-small").map(|dir| dir.join("corpus.jsonl"))
}

fn config(corpus: &Path, out: &Path, parallelism: Parallelism) -> JobConfig {
    let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
    let fields = FieldSpec {
        text_field: "text".into(),
        id_field: Some("id".into()),
        extra_field: None,
        ..Default::default()
    };
    let mut config = JobConfig::new(JobInput::Documents { files, fields }, out.to_path_buf());
    config.keep = KeepPolicy::Longest;
    config.parallelism = parallelism;
    config.control = ControlConfig {
        connect_timeout: Duration::from_secs(30),
        peer_timeout: Duration::from_secs(30),
        job_id: "in-process-test".into(),
        on_fatal: None,
        secret: None,
    };
    config
}

type Outputs = (PairSet, std::collections::BTreeMap<u64, (i64, u32, bool)>);

fn outputs(out: &Path) -> Outputs {
    assert!(
        out.join("_SUCCESS").exists(),
        "{} has no _SUCCESS",
        out.display()
    );
    (read_pairs(out).into_iter().collect(), read_clusters(out))
}

#[test]
fn process_clusters_over_loopback_equal_one_worker() {
    let Some(corpus) = corpus() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let single = tmp.path().join("single");
    run_job(
        config(&corpus, &single, Parallelism::local(1)),
        Arc::new(Progress::default()),
    )
    .unwrap();
    let expected = outputs(&single);
    assert!(!expected.0.is_empty());

    for (processes, workers) in [(2, 1), (3, 2)] {
        let out = tmp.path().join(format!("p{processes}w{workers}"));
        let addresses = free_ports(processes);
        let handles: Vec<_> = (0..processes)
            .map(|process| {
                let parallelism = Parallelism {
                    workers,
                    process,
                    addresses: addresses.clone(),
                };
                let config = config(&corpus, &out, parallelism);
                std::thread::spawn(move || {
                    run_job(config, Arc::new(Progress::default())).map(|o| o.summary.counts.pairs)
                })
            })
            .collect();
        let pairs: Vec<u64> = handles
            .into_iter()
            .map(|h| h.join().unwrap().expect("every process succeeds"))
            .collect();
        assert!(
            pairs.windows(2).all(|w| w[0] == w[1]),
            "every process reports the same summary: {pairs:?}"
        );
        assert_eq!(
            outputs(&out),
            expected,
            "{processes} processes x {workers} workers"
        );
    }
}
