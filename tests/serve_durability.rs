//! `neardup serve` survives `kill -9`: a child is killed with SIGKILL during a stream of
//! writes (with checkpoints every second), restarted, and every write it acknowledged is
//! there, as acknowledged (put or deleted); `neardup query` then reads its checkpoint.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::serve::*;
use common::{neardup, s};
use serde_json::Value;

fn page(seed: u64) -> String {
    common::SeededRng::new(seed).words(100).join(" ")
}

/// What the clients know was acknowledged: each id's last answered write (`Some(fp)`: put
/// with that fingerprint, `None`: deleted).
type Acknowledged = Arc<Mutex<BTreeMap<String, Option<String>>>>;

/// The write each client had sent when the server was killed, unanswered: the server may or
/// may not have made it durable before the kill (`Some(text)`: a put of that text, `None`:
/// a delete).
type InFlight = Arc<Mutex<BTreeMap<String, Option<String>>>>;

/// The fingerprints `neardup hash` gives these texts (the server's own scheme, the default).
fn fingerprints_of(texts: &[&str], dir: &std::path::Path) -> Vec<String> {
    let path = dir.join("in-flight.jsonl");
    let mut lines = String::new();
    for (i, text) in texts.iter().enumerate() {
        lines.push_str(&format!(
            "{{\"id\": \"{i}\", \"text\": {}}}\n",
            quoted(text)
        ));
    }
    std::fs::write(&path, lines).unwrap();
    let out = neardup().args(["hash", "-q", s(&path)]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let fps: Vec<String> = stdout
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(fps.len(), texts.len(), "{stdout}");
    fps
}

#[test]
fn every_acknowledged_write_survives_kill_9_and_the_checkpoint_is_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    // A base index made by a run.
    let corpus = dir.path().join("corpus.jsonl");
    let mut lines = String::new();
    for i in 0..50 {
        lines.push_str(&format!(
            "{{\"id\": \"base-{i}\", \"text\": {}}}\n",
            quoted(&page(10_000 + i))
        ));
    }
    std::fs::write(&corpus, lines).unwrap();
    let out = neardup()
        .args([
            "run",
            "--index",
            s(&index),
            "--output",
            s(&dir.path().join("out")),
            s(&corpus),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut server = Server::start(&index, &["--checkpoint-interval", "1"]);
    let addr = server.addr;
    let acknowledged: Acknowledged = Arc::default();
    let in_flight: InFlight = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3u64)
        .map(|c| {
            let (acknowledged, in_flight, stop) =
                (acknowledged.clone(), in_flight.clone(), stop.clone());
            thread::spawn(move || {
                let Ok(mut conn) = Conn::connect(addr) else {
                    return;
                };
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Puts of new ids, replacements of earlier ones, and deletes.
                    let id = format!("c{c}-{}", if n % 5 == 4 { n / 2 } else { n });
                    let text = (n % 7 != 6).then(|| page(c << 32 | n));
                    let answer = match &text {
                        None => conn
                            .request("DELETE", &format!("/v1/documents/{id}"), None)
                            .map(|r| (r.status, None)),
                        Some(text) => {
                            let body = format!("{{\"text\": {}}}", quoted(text));
                            conn.request("PUT", &format!("/v1/documents/{id}"), Some(&body))
                                .map(|r| (r.status, Some(r)))
                        }
                    };
                    n += 1;
                    match answer {
                        Ok((200, Some(r))) => {
                            let fp = r.json()["fingerprint"].as_str().unwrap().to_string();
                            acknowledged.lock().unwrap().insert(id, Some(fp));
                        }
                        Ok((200 | 404, None)) => {
                            acknowledged.lock().unwrap().insert(id, None);
                        }
                        Ok((status, _)) => panic!("{id}: status {status}"),
                        // The server was killed: whether the write in flight was made
                        // durable is unknown; either outcome is allowed below.
                        Err(_) => {
                            in_flight.lock().unwrap().insert(id, text);
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    // Long enough for several checkpoints.
    thread::sleep(Duration::from_millis(3500));
    server.proc.signal("KILL");
    server.proc.wait(Duration::from_secs(10)).expect("killed");
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 20,
        "too few writes: {}",
        acknowledged.len()
    );

    let server = Server::start(&index, &[]);
    let stats = server.request("GET", "/v1/stats", None).json();
    assert!(
        stats["generation"].as_u64().unwrap() > 0,
        "no checkpoint was written: {stats}"
    );
    // Each id may be as acknowledged, or, for the one write per client still in flight at
    // the kill, as that write left it.
    let in_flight = in_flight.lock().unwrap().clone();
    let puts: Vec<(&String, &str)> = in_flight
        .iter()
        .filter_map(|(id, text)| text.as_deref().map(|t| (id, t)))
        .collect();
    let texts: Vec<&str> = puts.iter().map(|(_, t)| *t).collect();
    let in_flight_fps: BTreeMap<&String, String> = puts
        .iter()
        .map(|(id, _)| *id)
        .zip(fingerprints_of(&texts, dir.path()))
        .collect();
    for id in acknowledged.keys().chain(in_flight.keys()) {
        let r = server.request("GET", &format!("/v1/documents/{id}"), None);
        let found =
            (r.status == 200).then(|| r.json()["fingerprint"].as_str().unwrap().to_string());
        let mut allowed = Vec::new();
        if let Some(state) = acknowledged.get(id) {
            allowed.push(state.clone());
        } else {
            // Never acknowledged: absent unless its write in flight was made durable.
            allowed.push(None);
        }
        if in_flight.contains_key(id) {
            allowed.push(in_flight_fps.get(id).cloned());
        }
        assert!(
            allowed.contains(&found),
            "{id}: found {found:?} ({}), allowed {allowed:?}",
            r.text()
        );
    }
    // The index's own documents are all still there.
    for i in 0..50 {
        assert_eq!(
            server
                .request("GET", &format!("/v1/documents/base-{i}"), None)
                .status,
            200
        );
    }
    // A checkpoint, then `neardup query` finds a written document in it by its text.
    let cp = server.request("POST", "/v1/checkpoint", None).json();
    let total = stats["documents"].as_u64().unwrap();
    assert_eq!(cp["documents"], total, "{cp}");
    let (id, fp) = acknowledged
        .iter()
        .filter(|(id, _)| !in_flight.contains_key(*id))
        .find_map(|(id, s)| s.as_ref().map(|fp| (id, fp)))
        .expect("a put");
    let out = neardup()
        .args([
            "query",
            "--index",
            s(&index),
            "-k",
            "0",
            "--fingerprint",
            fp,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter().any(|r| r["id"] == id.as_str()),
        "{id} not in {rows:?}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(index.join("manifest.json")).unwrap()).unwrap();
    // The documents present: the generations' less those a later one deleted (the
    // checkpoints' `deleted`, docs/index.md).
    let deleted: u64 = (manifest["generations"].as_array().unwrap().iter())
        .map(|g| g["deleted"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(manifest["documents"].as_u64().unwrap() - deleted, total);
}
